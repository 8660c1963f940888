"""Empty ``labels``, ``annotations``, ``finalizers`` and ``ownerReferences`` are not kept, as kube
marshals ObjectMeta (``omitempty``; a custom resource's metadata too, through apiextensions'
``objectmeta.Coerce``). ``kubectl diff`` of an object that has no annotations sends a patch with
``metadata.annotations: {}`` (kubectl's ``GetModifiedConfiguration``): kube answers the object
unchanged, so the diff is empty and kubectl exits 0."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

Client = TestClient[Any, Any]

EMPTY_COLLECTIONS = {"labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
FLAVORS = "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def _kept(metadata: dict[str, Any]) -> set[str]:
    return set(EMPTY_COLLECTIONS) & set(metadata)


async def test_a_create_keeps_no_empty_metadata_collection(hub: Client) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", **EMPTY_COLLECTIONS}}
    created = await hub.post(CONFIGMAPS, json=body)
    assert created.status == 201, await created.text()
    assert _kept((await created.json())["metadata"]) == set()
    read = await hub.get(f"{CONFIGMAPS}/c")
    assert _kept((await read.json())["metadata"]) == set()


async def test_kubectl_diffs_patch_of_empty_annotations_changes_nothing(hub: Client) -> None:
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    applied = await hub.patch(f"{DEPLOYMENTS}/web?fieldManager=kubectl", json=deployment, headers=APPLY)
    assert applied.status == 201, await applied.text()
    before = (await applied.json())["metadata"]
    diffed = await hub.patch(
        f"{DEPLOYMENTS}/web?dryRun=All&fieldManager=kubectl-client-side-apply",
        json={"metadata": {"annotations": {}}},
        headers=STRATEGIC,
    )
    assert diffed.status == 200, await diffed.text()
    after = (await diffed.json())["metadata"]
    assert "annotations" not in after
    assert after["generation"] == before["generation"]


async def test_a_merge_patch_to_empty_labels_and_finalizers_drops_them(hub: Client) -> None:
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f", "labels": {"a": "b"}},
    }
    created = await hub.post(FLAVORS, json=flavor)
    assert created.status == 201, await created.text()
    patched = await hub.patch(
        f"{FLAVORS}/f", json={"metadata": {"labels": {"a": None}, "annotations": {}}}, headers=MERGE
    )
    assert patched.status == 200, await patched.text()
    assert _kept((await patched.json())["metadata"]) == set()


async def test_null_metadata_collections_are_not_kept_nor_owned(hub: Client) -> None:
    """Helm renders a bare ``labels:`` as null: Go decodes it to a nil map, which ObjectMeta
    omits, so neither the object nor its managedFields entry has it."""
    nulls = dict.fromkeys(EMPTY_COLLECTIONS)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", **nulls}, "data": {"k": "v"}}
    created = await hub.post(CONFIGMAPS, json=body)
    assert created.status == 201, await created.text()
    metadata = (await created.json())["metadata"]
    assert _kept(metadata) == set()
    assert [entry["fieldsV1"] for entry in metadata["managedFields"]] == [{"f:data": {".": {}, "f:k": {}}}]
    applied = await hub.patch(
        f"{CONFIGMAPS}/a?fieldManager=helm", json={**body, "metadata": {"name": "a", **nulls}}, headers=APPLY
    )
    assert applied.status == 201, await applied.text()
    assert _kept((await applied.json())["metadata"]) == set()
