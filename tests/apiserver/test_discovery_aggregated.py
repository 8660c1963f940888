"""Aggregated discovery (``apidiscovery.k8s.io/v2``), which kubectl asks ``/api`` and ``/apis``
for first: one answer with every group, version and resource, so a kubectl with an empty cache
makes two discovery requests instead of one per group-version (some thirty on the hub).

It must say exactly what the per-group-version documents say (they stay for clients that do not
ask): checked for every resource of the hub, and against the real kubectl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controlplane.apiserver import discovery
from controlplane.apiserver.auth.rbac.reviews import REVIEW_RESOURCES
from controlplane.apiserver.auth.serviceaccounts import TOKEN_REQUESTS
from controlplane.apiserver.computed import served_group_versions
from controlplane.hub import hub_registry

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

REGISTRY = hub_registry()
CREATE_ONLY = (*REVIEW_RESOURCES, TOKEN_REQUESTS)
KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


def _flat_legacy() -> set[tuple[Any, ...]]:
    """Every (group, version, resource or resource/subresource, kind's gvk, verbs, scope, short
    names, categories) of the per-group-version documents."""
    out = set()
    groups = {g: v for g, v in served_group_versions(REGISTRY, CREATE_ONLY).items()}
    for group, versions in groups.items():
        for version in versions:
            listed = discovery.api_resource_list(REGISTRY, group, version, CREATE_ONLY)
            assert listed is not None
            for entry in listed["resources"]:
                gvk = (entry.get("group", group), entry.get("version", version), entry["kind"])
                parent = "/" in entry["name"]
                out.add((group, version, entry["name"], gvk, tuple(entry["verbs"]),
                         None if parent else entry["namespaced"],
                         tuple(entry.get("shortNames", ())), tuple(entry.get("categories", ()))))
    return out


def _flat_aggregated() -> set[tuple[Any, ...]]:
    out = set()
    for core in (True, False):
        document = discovery.aggregated(REGISTRY, CREATE_ONLY, core=core)
        assert document["kind"] == "APIGroupDiscoveryList" and document["apiVersion"] == "apidiscovery.k8s.io/v2"
        for item in document["items"]:
            group = item["metadata"].get("name", "")
            assert bool(group) != core
            for entry in item["versions"]:
                assert entry["freshness"] == "Current"
                for resource in entry["resources"]:
                    kind = resource["responseKind"]
                    out.add((group, entry["version"], resource["resource"], (kind["group"], kind["version"], kind["kind"]),
                             tuple(resource["verbs"]), resource["scope"] == "Namespaced",
                             tuple(resource.get("shortNames", ())), tuple(resource.get("categories", ()))))
                    for sub in resource.get("subresources", ()):
                        kind = sub["responseKind"]
                        out.add((group, entry["version"], f"{resource['resource']}/{sub['subresource']}",
                                 (kind["group"], kind["version"], kind["kind"]), tuple(sub["verbs"]), None, (), ()))
    return out


def test_aggregated_discovery_says_what_the_group_version_documents_say() -> None:
    legacy = _flat_legacy()
    assert legacy == _flat_aggregated()
    names = {entry[2] for entry in legacy}
    assert {"deployments/scale", "serviceaccounts/token", "selfsubjectaccessreviews", "horizontalpodautoscalers"} <= names


def test_the_preferred_version_comes_first() -> None:
    document = discovery.aggregated(REGISTRY, CREATE_ONLY, core=False)
    autoscaling = next(item for item in document["items"] if item["metadata"]["name"] == "autoscaling")
    assert [v["version"] for v in autoscaling["versions"]] == ["v2", "v1"]
    apps = next(item for item in document["items"] if item["metadata"]["name"] == "apps")
    deployments = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deployments["singularResource"] == "deployment" and deployments["scope"] == "Namespaced"
    assert {sub["subresource"] for sub in deployments["subresources"]} == {"status", "scale"}


def test_the_media_type_kubectl_asks_for_is_served_and_others_are_not() -> None:
    assert discovery.wanted_aggregated_version(KUBECTL_ACCEPT) == "v2"
    assert discovery.wanted_aggregated_version(
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
    ) == "v2beta1"
    assert discovery.wanted_aggregated_version("application/json") is None
    assert discovery.wanted_aggregated_version(None) is None
    assert discovery.wanted_aggregated_version("application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList") is None
    # Plain JSON listed first wins, as kube's negotiation takes the first acceptable type.
    assert discovery.wanted_aggregated_version(
        "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    ) is None


async def test_api_and_apis_answer_kubectls_accept_header(hub: Client) -> None:  # noqa: F811
    for path, core in (("/api", True), ("/apis", False)):
        response = await hub.get(path, headers={"Accept": KUBECTL_ACCEPT})
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        assert response.headers["Vary"] == "Accept"
        body = await response.json()
        assert body["kind"] == "APIGroupDiscoveryList"
        assert [bool(item["metadata"].get("name")) for item in body["items"]] == [not core] * len(body["items"])
        plain = await (await hub.get(path)).json()
        assert plain["kind"] == ("APIVersions" if core else "APIGroupList")


@needs_kubectl
async def test_kubectl_reads_discovery_in_two_requests(hub_kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    cache = tmp_path / "cache"
    code, out, err = await kubectl(hub_kubeconfig, "api-resources", "-v=6", f"--cache-dir={cache}")
    assert code == 0, err
    gets = [line.split("GET ", 1)[1].split("?")[0] for line in err.splitlines() if "round_trippers" in line and " GET " in line]
    assert [url.rsplit("/", 1)[-1] for url in gets] == ["api", "apis"], gets
    assert "horizontalpodautoscalers" in out and "endpoints" in out and "propagationpolicies" in out


def test_groups_come_in_kubes_order_and_resources_by_name() -> None:
    """kube's discovery lists the groups by their APIServices' priority (core, apps, events.k8s.io,
    authentication, authorization, autoscaling, batch, ...; a group served through CRDs on a real
    cluster after every built-in one, by name) and a group-version's resources by path; kubectl
    reads kinds in that order (``kubectl get all``)."""
    groups = [item["metadata"]["name"] for item in discovery.aggregated(REGISTRY, CREATE_ONLY, core=False)["items"]]
    builtin = groups[: groups.index("flowcontrol.apiserver.k8s.io") + 1]
    assert builtin == [
        "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
        "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io",
        "storage.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io",
        "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io",
    ]
    rest = groups[len(builtin):]
    assert rest == sorted(rest) and {"kueue.x-k8s.io", "policy.gpufed.io", "apps.karmada.io"} <= set(rest)
    assert [g["name"] for g in discovery.api_group_list(REGISTRY, CREATE_ONLY)["groups"]] == groups
    for group, versions in served_group_versions(REGISTRY, CREATE_ONLY).items():
        for version in versions:
            listed = discovery.api_resource_list(REGISTRY, group, version, CREATE_ONLY)
            assert listed is not None
            names = [entry["name"] for entry in listed["resources"]]
            assert names == sorted(names), (group, version)


@needs_kubectl
async def test_kubectl_get_all_lists_kinds_in_kubes_order(hub_kubeconfig: Path) -> None:  # noqa: F811
    manifests = """
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cj}
spec: {schedule: "*/5 * * * *", jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: h}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: d}, maxReplicas: 2}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s}
spec: {selector: {matchLabels: {a: s}}, template: {metadata: {labels: {a: s}}, spec: {containers: [{name: c, image: nginx}]}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec: {selector: {matchLabels: {a: ds}}, template: {metadata: {labels: {a: ds}}, spec: {containers: [{name: c, image: nginx}]}}}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: nginx}]}
"""
    code, _out, err = await kubectl(hub_kubeconfig, "apply", "-n", "default", "-f", "-", stdin=manifests)
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "all", "-n", "default", "-o", "name")
    assert code == 0, err
    kinds = list(dict.fromkeys(line.split("/", 1)[0] for line in out.split()))
    assert kinds == [
        "pod", "service", "daemonset.apps", "statefulset.apps", "horizontalpodautoscaler.autoscaling",
        "cronjob.batch", "job.batch",
    ]
