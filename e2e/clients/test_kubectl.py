"""The real kubectl against the hub, over every kind it serves: client-side ``apply``, then
``apply --server-side`` of a change, then a ``get -o yaml`` round trip (the ``List`` kubectl
printed, replaced and applied unchanged, changes nothing); ``create -f`` and ``delete -f`` of a
``List``; the client- to server-side apply migration; Karmada's taint-toleration sample
policy applied as Karmada's users apply it; and a namespace held ``Terminating`` by its content's
finalizers, as ``kubectl get namespace`` shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.clients.conftest import KINDS, NAMESPACE, Hub, ServedKind, unique_name
from e2e.clients.samples import sample
from e2e.harness import wait_for

pytestmark = pytest.mark.e2e

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"


def written(hub: Hub, served_verbs: dict[str, frozenset[str]]) -> list[tuple[ServedKind, dict[str, Any]]]:
    """One sample object of every kind the hub lets clients create."""
    return [
        (kind, sample(kind.api_version, kind.kind, unique_name("kubectl"), namespace=kind.namespace()))
        for kind in KINDS
        if "create" in served_verbs[kind.id]
    ]


def resource(kind: ServedKind) -> str:
    return f"{kind.kind.lower()}.{kind.group}" if kind.group else kind.kind.lower()


def resource_name(kind: ServedKind, name: str) -> str:
    return f"{resource(kind)}/{name}"


class TextTimestamps(yaml.SafeLoader):
    """YAML as kubectl means it: a timestamp stays the string it printed."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what a write changes by itself: its resourceVersion and kubectl's
    last-applied annotation (``.status`` left out too: the hub's controllers may write it), a
    Deployment's generation, which moves with its annotations as kube's does, and a Cluster's
    taints the hub sets itself (a Cluster no agent renews is tainted unreachable after its grace
    period, which a slow run reaches) with the generation they move."""
    cluster = obj.get("kind") == "Cluster"
    moved = ("resourceVersion", "annotations", *(("generation",) if obj.get("kind") == "Deployment" or cluster else ()))
    meta = {k: v for k, v in obj["metadata"].items() if k not in moved}
    annotations = {
        k: v for k, v in (obj["metadata"].get("annotations") or {}).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    out = {**{k: v for k, v in obj.items() if k != "status"}, "metadata": {**meta, "annotations": annotations}}
    if cluster and "taints" in (obj.get("spec") or {}):
        taints = [t for t in obj["spec"]["taints"] if not str(t.get("key", "")).startswith("cluster.gpufed.io/")]
        out["spec"] = {**obj["spec"], "taints": taints}
    return out


def test_apply_client_then_server_side_and_get_yaml_round_trip(
    hub: Hub, served_verbs: dict[str, frozenset[str]], tmp_path: Path
) -> None:
    objects = written(hub, served_verbs)
    manifest = tmp_path / "all.yaml"
    manifest.write_text(yaml.safe_dump_all([obj for _, obj in objects]))

    created = hub.kubectl.run("apply", "-f", str(manifest)).stdout.splitlines()
    assert created == [f"{resource_name(k, o['metadata']['name'])} created" for k, o in objects]

    for _, obj in objects:
        obj["metadata"]["labels"]["applied"] = "server-side"
    manifest.write_text(yaml.safe_dump_all([obj for _, obj in objects]))
    applied = hub.kubectl.run("apply", "--server-side", "-f", str(manifest)).stdout.splitlines()
    assert applied == [f"{resource_name(k, o['metadata']['name'])} serverside-applied" for k, o in objects]

    live = hub.kubectl.json("get", "-f", str(manifest), "--show-managed-fields")
    items = live["items"] if live.get("kind") == "List" else [live]
    assert [item["metadata"]["labels"]["applied"] for item in items] == ["server-side"] * len(objects)
    for item in items:
        managers = {(e["manager"], e["operation"]) for e in item["metadata"]["managedFields"]}
        assert ("kubectl", "Apply") in managers, (item["kind"], managers)

    # `get -o yaml` round trip: the List kubectl printed goes back unchanged (kubectl checks it
    # against /openapi/v2) and leaves the objects as they were: `replace` and client-side
    # `apply` rewrite only kubectl's last-applied annotation, as against kube.
    before = hub.kubectl.json("get", "-f", str(manifest))["items"]
    for verb, outcome in (("replace", "replaced"), ("apply", "configured")):
        # A controller may write an object (a ResourceBinding's status) between the get and the
        # write: kube answers Conflict then, and the round trip is done again from a fresh get.
        for _attempt in range(3):
            printed = hub.kubectl.run("get", "-f", str(manifest), "-o", "yaml").stdout
            assert yaml.load(printed, TextTimestamps)["kind"] == "List"
            result = hub.kubectl.run(verb, "-f", "-", input_text=printed, check=False)
            if result.returncode == 0 or "(Conflict)" not in result.stderr:
                break
        assert result.returncode == 0, result.stderr
        answered = result.stdout.splitlines()
        assert answered == [f"{resource_name(k, o['metadata']['name'])} {outcome}" for k, o in objects], verb
        after = hub.kubectl.json("get", "-f", str(manifest))["items"]
        assert [comparable(item) for item in after] == [comparable(item) for item in before], verb

    deleted = hub.kubectl.run("delete", "-f", str(manifest), "--wait=false").stdout.splitlines()
    assert len(deleted) == len(objects)


def test_create_and_delete_a_list_of_every_kind(hub: Hub, served_verbs: dict[str, frozenset[str]], tmp_path: Path) -> None:
    objects = written(hub, served_verbs)
    manifest = tmp_path / "list.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [obj for _, obj in objects]}))
    created = hub.kubectl.run("create", "-f", str(manifest)).stdout.splitlines()
    assert created == [f"{resource_name(k, o['metadata']['name'])} created" for k, o in objects]
    live = hub.kubectl.json("get", "-f", str(manifest))["items"]
    assert [(item["kind"], item["metadata"]["name"]) for item in live] == [
        (o["kind"], o["metadata"]["name"]) for _, o in objects
    ]
    deleted = hub.kubectl.run("delete", "-f", str(manifest), "--wait=false").stdout.splitlines()
    assert deleted == [f'{resource(k)} "{o["metadata"]["name"]}" deleted' for k, o in objects]


def test_client_side_then_server_side_apply_takes_over_without_conflict(hub: Hub, tmp_path: Path) -> None:
    deployment = sample("apps/v1", "Deployment", unique_name("migrate"), namespace=NAMESPACE)
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(yaml.safe_dump(deployment))
    hub.kubectl.run("apply", "-f", str(manifest))
    deployment["spec"]["replicas"] = 5
    manifest.write_text(yaml.safe_dump(deployment))
    result = hub.kubectl.run("apply", "--server-side", "-f", str(manifest))
    assert result.stdout.strip().endswith("serverside-applied"), result.stderr
    live = hub.kubectl.json("get", "-f", str(manifest), "--show-managed-fields")
    assert live["spec"]["replicas"] == 5
    managers = {(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers and ("kubectl-client-side-apply", "Update") not in managers
    last = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["replicas"] == 5


def test_an_apply_structured_merge_diff_cannot_type_is_refused_in_its_words(hub: Hub, tmp_path: Path) -> None:
    """kubectl prints the hub's 422 as kube's Invalid, with structured-merge-diff's words as the
    cause (kube itself answers a reasonless 500 there); nothing is created."""
    deployment = sample("apps/v1", "Deployment", unique_name("untyped"), namespace=NAMESPACE)
    pod = deployment["spec"]["template"]["spec"]
    pod["containers"] = [pod["containers"][0], {**pod["containers"][0], "image": "other"}]
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(yaml.safe_dump(deployment))
    result = hub.kubectl.run("apply", "--server-side", "-f", str(manifest), check=False)
    name, container = deployment["metadata"]["name"], pod["containers"][0]["name"]
    assert result.returncode == 1
    assert (f'The Deployment "{name}" is invalid: patch: .spec.template.spec.containers: duplicate entries for key '
            f'[name="{container}"]') in result.stderr, result.stderr
    assert hub.kubectl.json_or_none("get", "deployment", name, "-n", NAMESPACE) is None


def test_karmada_taint_toleration_sample_applies_unchanged(hub: Hub) -> None:
    path = MANIFESTS / "karmada" / "propagationpolicy_taintToleration.yaml"
    out = hub.kubectl.run("apply", "-n", NAMESPACE, "-f", str(path)).stdout.strip()
    assert out == "propagationpolicy.policy.karmada.io/nginx-propagation created"
    # One set of policies: Karmada's shows through gpufed's group and the short name.
    for resource in ("pp.policy.gpufed.io", "pp"):
        rows = hub.kubectl.run("get", resource, "-A").stdout.splitlines()[1:]
        assert [NAMESPACE, "nginx-propagation"] in [row.split()[:2] for row in rows], resource
    policy = hub.kubectl.json("get", "pp", "nginx-propagation", "-n", NAMESPACE)
    assert policy["apiVersion"] == "policy.gpufed.io/v1alpha1"
    assert policy["spec"]["placement"]["clusterTolerations"] == [
        {"key": "", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    hub.kubectl.run("delete", "pp", "nginx-propagation", "-n", NAMESPACE)


def test_a_terminating_namespace_says_what_holds_it_and_outlives_writes(hub: Hub) -> None:
    """A namespace whose content finalizers hold stays ``Terminating`` through a label and a patch
    of its ``spec.finalizers`` (kube keeps them on update), its status names what is left and which
    finalizers hold it (kube's namespace controller's conditions), and it goes once they are off."""
    namespace = unique_name("terminating")
    kubectl = hub.kubectl
    kubectl.run("create", "namespace", namespace)
    held = {"one": ["clients.example.com/hold"], "two": ["clients.example.com/hold", "clients.example.com/other"]}
    for name, finalizers in held.items():
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": finalizers}}
        kubectl.run("create", "-n", namespace, "-f", "-", input_text=json.dumps(config_map))
    kubectl.run("delete", "namespace", namespace, "--wait=false")

    kubectl.run("label", "namespace", namespace, "touched=yes")
    kubectl.run("patch", "namespace", namespace, "--type=merge", "-p", '{"spec":{"finalizers":[]}}')
    live = kubectl.json("get", "namespace", namespace)
    assert live["status"]["phase"] == "Terminating" and live["spec"]["finalizers"] == ["kubernetes"], live
    names = {cm["metadata"]["name"] for cm in kubectl.json("get", "configmaps", "-n", namespace)["items"]}
    assert names - {"kube-root-ca.crt"} == set(held)  # the root CA ConfigMap may not be deleted yet

    wanted = {
        "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
        "NamespaceDeletionGroupVersionParsingFailure": (
            "False", "ParsedGroupVersions", "All legacy kube types successfully parsed",
        ),
        "NamespaceDeletionContentFailure": (
            "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization",
        ),
        "NamespaceContentRemaining": (
            "True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 2 resource instances",
        ),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: clients.example.com/hold in 2 resource "
            "instances, clients.example.com/other in 1 resource instances",
        ),
    }

    def conditions() -> dict[str, tuple[str, str, str]]:
        status = kubectl.json("get", "namespace", namespace)["status"]
        return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status.get("conditions") or []}

    # The first count may still see the content the deletion is removing (the default ServiceAccount).
    wait_for(lambda: conditions() == wanted, timeout=60, what="the namespace's deletion conditions")
    kubectl.run("wait", "--for=condition=NamespaceFinalizersRemaining", f"namespace/{namespace}", "--timeout=5s")

    for name in held:
        kubectl.run("patch", "configmap", name, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    kubectl.run("wait", "--for=delete", f"namespace/{namespace}", "--timeout=60s")


def test_the_openapi_documents_carry_the_servers_version(hub: Hub) -> None:
    """``info.version`` of /openapi/v2 and of each /openapi/v3 document is the version ``kubectl
    version`` shows, up to its first ``-`` (kube's generic API server sets it so)."""
    served = hub.kubectl.json("version")["serverVersion"]["gitVersion"]
    documents = ["/openapi/v2", *(
        entry["serverRelativeURL"] for entry in json.loads(hub.kubectl.run("get", "--raw", "/openapi/v3").stdout)["paths"].values()
    )][:4]
    for document in documents:
        info = json.loads(hub.kubectl.run("get", "--raw", document).stdout)["info"]
        assert info == {"title": "Kubernetes", "version": served.split("-")[0]}, document
