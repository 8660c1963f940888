"""Server-side apply of the kinds that are CRDs on a real cluster but built into the hub
(Karmada's, Kueue's, gpufed's own, the operators'): structured-merge-diff types them by the schema
the hub serves for them, as kube types a custom resource by its CRD's schema. An undeclared field
or a scalar of the wrong type is SMD's refusal; what ``x-kubernetes-preserve-unknown-fields``
keeps, and every policy example, applies."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.hub import hub_registry

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

Client = TestClient[Any, Any]
APPLY = {"Content-Type": "application/apply-patch+yaml"}
TYPED = "failed to create typed patch object"
ROOT = Path(__file__).resolve().parents[2]
#: The policy examples and Karmada's and Kueue's samples the e2e tests apply (not those needing a CRD).
SAMPLES = sorted([*(ROOT / "policies" / "examples").glob("*.yaml"), *(ROOT / "e2e" / "manifests" / "upstream").rglob("*.yaml")])

POLICIES = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"
LOCAL_QUEUES = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues"
CLUSTERS = "/apis/cluster.gpufed.io/v1alpha1/clusters"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


def policy(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}], **spec},
    }


def local_queue(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq", **spec}}


def cluster(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "c1"},
            "spec": {"provider": "onprem", "region": "eu", **spec}}


def jobset(**extra: Any) -> dict[str, Any]:
    template = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "default"},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": template}], **extra}}


async def apply(api: Client, url: str, body: dict[str, Any], query: str = "") -> Any:
    return await api.patch(f"{url}?fieldManager=tester{query}", data=yaml.safe_dump(body), headers=APPLY)


@pytest.mark.parametrize(("url", "body", "subject", "detail"), [
    (f"{POLICIES}/p", policy(placment={}), "default/p; policy.karmada.io/v1alpha1, Kind=PropagationPolicy",
     ".spec.placment: field not declared in schema"),
    (f"{POLICIES}/p", policy(priority="high"), "default/p; policy.karmada.io/v1alpha1, Kind=PropagationPolicy",
     ".spec.priority: expected numeric (int or float), got string"),
    (f"{POLICIES}/p", policy(placement={"clusterAffinity": {"clusterNames": "a"}}),
     "default/p; policy.karmada.io/v1alpha1, Kind=PropagationPolicy",
     ".spec.placement.clusterAffinity.clusterNames: expected list, got &{a}"),
    (f"{LOCAL_QUEUES}/q", local_queue(clusterQueu="cq"), "default/q; kueue.x-k8s.io/v1beta2, Kind=LocalQueue",
     ".spec.clusterQueu: field not declared in schema"),
    (f"{LOCAL_QUEUES}/q", local_queue(clusterQueue=5), "default/q; kueue.x-k8s.io/v1beta2, Kind=LocalQueue",
     ".spec.clusterQueue: expected string, got &value.valueUnstructured{Value:5}"),
    (f"{CLUSTERS}/c1", cluster(regoin="eu"), "/c1; cluster.gpufed.io/v1alpha1, Kind=Cluster",
     ".spec.regoin: field not declared in schema"),
    # The operators' partial schemas keep what they do not list: a wrong scalar of what they list.
    (f"{JOBSETS}/js", jobset(suspend="yes"), "default/js; jobset.x-k8s.io/v1alpha2, Kind=JobSet",
     ".spec.suspend: expected boolean, got &{yes}"),
])
async def test_a_served_kind_is_typed_by_its_schema(hub: Client, url: str, body: dict[str, Any], subject: str,
                                                    detail: str) -> None:
    """As on a cluster with the kind's CRD: refused whatever ``fieldValidation`` says, nothing stored."""
    answer = await apply(hub, url, body, "&fieldValidation=Ignore")
    status = await answer.json()
    assert (answer.status, status.get("reason"), status.get("message")) == (422, "Invalid", f"{TYPED} ({subject}): {detail}")
    assert (await hub.get(url)).status == 404


async def test_metadata_is_typed_as_object_meta(hub: Client) -> None:
    body = policy()
    body["metadata"]["labelz"] = {"a": "b"}
    answer = await apply(hub, f"{POLICIES}/p", body)
    assert answer.status == 422
    assert (await answer.json())["message"].endswith(".metadata.labelz: field not declared in schema")


async def test_what_the_schemas_keep_open_applies(hub: Client) -> None:
    """A Work's manifests and a JobSet's fields its partial schema leaves to
    ``x-kubernetes-preserve-unknown-fields`` take anything, as the CRDs keep them."""
    work = {"apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                                                 "data": {"anything": "goes"}, "newField": [1]}]}}}
    answer = await apply(hub, "/apis/work.gpufed.io/v1alpha1/namespaces/default/works/w", work, "&fieldValidation=Strict")
    assert answer.status == 201, await answer.text()
    answer = await apply(hub, f"{JOBSETS}/js", jobset(network={"enableDNSHostnames": True}), "&fieldValidation=Strict")
    assert answer.status == 201, await answer.text()


def _collection(api_version: str) -> str:
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


@pytest.mark.parametrize("text", [
    pytest.param(p.read_text(), id=str(p.relative_to(ROOT))) for p in SAMPLES
    if "kind: CustomResourceDefinition" not in p.read_text() and "/crds/" not in str(p) and "Guestbook" not in p.read_text()
])
async def test_every_policy_example_and_upstream_sample_applies(hub: Client, text: str) -> None:
    """Every document of the policy examples and of Karmada's and Kueue's samples (policies,
    queues, flavors, the workloads they place) applies under ``fieldValidation=Strict``: each
    field they write is declared."""
    for document in filter(None, yaml.safe_load_all(text)):
        obj = copy.deepcopy(document)
        if obj["kind"] == "Namespace":
            continue
        obj["metadata"].setdefault("name", obj["metadata"].pop("generateName", "") + "x")  # apply names it
        group = _collection(obj["apiVersion"])
        served = (await (await hub.get(group)).json())["resources"]
        resource = next(r for r in served if r["kind"] == obj["kind"] and "/" not in r["name"])
        url = f"{group}/{resource['name']}/{obj['metadata']['name']}"
        if resource["namespaced"]:
            namespace = obj["metadata"].setdefault("namespace", "default")
            await hub.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})  # 201, or 409: there
            url = f"{group}/namespaces/{namespace}/{resource['name']}/{obj['metadata']['name']}"
        answer = await apply(hub, url, obj, "&fieldValidation=Strict")
        assert answer.status == 201, (obj["kind"], await answer.text())


@needs_kubectl
@pytest.mark.parametrize("api_registry", [pytest.param(hub_registry(), id="hub")])
async def test_kubectl_apply_server_side_refuses_a_policy_typo(kubeconfig: Path) -> None:  # noqa: F811
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(policy(placment={})))
    assert code != 0
    assert ".spec.placment: field not declared in schema" in err, err
