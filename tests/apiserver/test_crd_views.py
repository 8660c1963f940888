"""The CustomResourceDefinitions the hub publishes for the kinds it serves built in (Karmada's,
Kueue's, the operators'): listed, established and read as a real cluster's, refused a delete or
a change, left alone by the CRD controller, and found by lightkube's generic loader."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from lightkube import AsyncClient, KubeConfig
from lightkube.config.models import Cluster, User
from lightkube.generic_resource import async_load_in_cluster_generic_resources, get_generic_resource

from controlplane.apis.apiextensions import builtin
from controlplane.apis.apiextensions.cel import compile_error
from controlplane.apis.apiextensions.crd import default_crd, validate_crd
from controlplane.apiserver.app import create_app
from controlplane.apiserver.crd.views import to_publish, view_crds
from controlplane.apiserver.objects import ObjectStore
from controlplane.hubregistry import hub_registry
from controlplane.storage import MemoryStore
from controlplane.storage import interface as storage

from .test_crds import CRD
from .test_kube_validation import hub_kubeconfig  # noqa: F401 (fixture)
from .test_real_clients import kubectl, needs_kubectl

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CQ_CRD = "clusterqueues.kueue.x-k8s.io"
CQS = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
Client = TestClient[Any, Any]


async def _hub(memory: storage.Store) -> Client:
    registry = hub_registry()
    client = TestClient(TestServer(create_app(ObjectStore(memory, registry), registry)))
    await client.start_server()
    return client


@pytest.fixture
async def memory() -> AsyncIterator[storage.Store]:
    async with MemoryStore() as store:
        yield store


@pytest.fixture
async def hub(memory: storage.Store) -> AsyncIterator[Client]:
    client = await _hub(memory)
    try:
        yield client
    finally:
        await client.close()


async def _get(client: Client, path: str) -> dict[str, Any]:
    response = await client.get(path)
    assert response.status == 200, await response.text()
    body: dict[str, Any] = await response.json()
    return body


def _conditions(crd: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in crd["status"]["conditions"]}


async def test_the_built_in_kinds_are_listed_as_established_crds(hub: Client) -> None:
    names = {item["metadata"]["name"] for item in (await _get(hub, CRDS))["items"]}
    assert {
        CQ_CRD,
        "workloads.kueue.x-k8s.io",
        "propagationpolicies.policy.karmada.io",
        "clusterpropagationpolicies.policy.karmada.io",
        "federatedhpas.autoscaling.karmada.io",
        "jobsets.jobset.x-k8s.io",
        "rayjobs.ray.io",
        "pytorchjobs.kubeflow.org",
    } <= names
    # Karmada serves its Clusters from an aggregated API server; gpufed's own groups are its API.
    assert not any(name.endswith((".cluster.karmada.io", ".gpufed.io")) for name in names)
    crd = await _get(hub, f"{CRDS}/{CQ_CRD}")
    assert crd["metadata"]["labels"] == {builtin.LABEL: "true"}
    assert crd["metadata"]["annotations"] == {builtin.GENERATED: "true"}
    assert _conditions(crd) == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["storedVersions"] == ["v1beta1"]
    assert crd["status"]["acceptedNames"]["shortNames"] == ["cq"]
    assert crd["spec"]["scope"] == "Cluster"
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert {name: v["storage"] for name, v in versions.items()} == {"v1beta1": True, "v1beta2": False}
    assert versions["v1beta1"]["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in versions["v1beta1"]["additionalPrinterColumns"]}
    assert columns["Cohort"] == ".spec.cohort"
    assert columns["Pending Workloads"] == ".status.pendingWorkloads"
    assert columns["Age"] == ".metadata.creationTimestamp"
    # The schema the hub checks the kind by, where it has one.
    hpa = await _get(hub, f"{CRDS}/federatedhpas.autoscaling.karmada.io")
    assert "spec" in hpa["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]


async def test_the_views_page_select_and_read_back_unchanged_from_another_replica(
    memory: storage.Store, hub: Client
) -> None:
    everything = (await _get(hub, f"{CRDS}?labelSelector={builtin.LABEL}%3Dtrue"))["items"]
    assert len(everything) == len(view_crds(hub_registry().static))
    paged: list[str] = []
    query = f"{CRDS}?limit=7"
    while True:
        page = await _get(hub, query)
        paged += [item["metadata"]["name"] for item in page["items"]]
        if not page["metadata"].get("continue"):
            break
        query = f"{CRDS}?limit=7&continue={page['metadata']['continue']}"
    assert paged == [item["metadata"]["name"] for item in everything]
    one = await _get(hub, f"{CRDS}?fieldSelector=metadata.name%3D{CQ_CRD}")
    assert [item["metadata"]["name"] for item in one["items"]] == [CQ_CRD]
    before = await _get(hub, f"{CRDS}/{CQ_CRD}")
    second = await _hub(memory)  # a second replica (or a restart) publishes nothing new
    try:
        after = await _get(second, f"{CRDS}/{CQ_CRD}")
    finally:
        await second.close()
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_a_view_is_a_valid_crd() -> None:
    for crd in view_crds(hub_registry().static):
        view = copy.deepcopy(crd)
        default_crd(view)
        assert view == crd, crd["metadata"]["name"]  # nothing left for kube's defaults
        assert validate_crd(view, compile_rule=compile_error) == [], crd["metadata"]["name"]


async def test_a_view_cannot_be_deleted_and_its_objects_stay(hub: Client) -> None:
    created = await hub.post(
        CQS,
        json={
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "team"},
            "spec": {},
        },
    )
    assert created.status == 201, await created.text()
    deleted = await hub.delete(f"{CRDS}/{CQ_CRD}")
    assert deleted.status == 403
    status = await deleted.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        f'customresourcedefinitions.apiextensions.k8s.io "{CQ_CRD}" is forbidden: its kind is served built in '
        "by gpufed, which publishes this CustomResourceDefinition; it cannot be changed or deleted"
    )
    collection = await hub.delete(CRDS)
    assert collection.status == 200, await collection.text()
    crd = await _get(hub, f"{CRDS}/{CQ_CRD}")
    assert not crd["metadata"].get("deletionTimestamp")
    assert "finalizers" not in crd["metadata"]
    await _get(hub, f"{CQS}/team")


def _upstream_like(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD of the kind as an install manifest has it: other versions and schemas, no label."""
    spec = copy.deepcopy(crd["spec"])
    spec["versions"] = [
        {
            "name": "v1beta1",
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "schema": {
                "openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {"cohort": {"type": "string"}}}},
                }
            },
        }
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CQ_CRD, "annotations": {"controller-gen.kubebuilder.io/version": "v0.17.2"}},
        "spec": spec,
    }


async def test_applying_the_kinds_own_crd_keeps_it_as_written_and_still_served_built_in(hub: Client) -> None:
    view = await _get(hub, f"{CRDS}/{CQ_CRD}")
    relabelled = copy.deepcopy(view)
    relabelled["metadata"]["labels"]["team"] = "ml"
    labelled = await hub.put(f"{CRDS}/{CQ_CRD}", json=relabelled)
    assert labelled.status == 200, await labelled.text()
    # A label of one's own changes nothing of what the hub made.
    assert builtin.is_generated(await labelled.json())
    manifest = _upstream_like(view)
    applied = await hub.patch(
        f"{CRDS}/{CQ_CRD}?fieldManager=kubectl&force=true",
        data=json.dumps(manifest),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert applied.status == 200, await applied.text()
    after = await _get(hub, f"{CRDS}/{CQ_CRD}")
    assert after["spec"]["versions"] == manifest["spec"]["versions"]
    assert after["metadata"]["labels"][builtin.LABEL] == "true"
    assert builtin.is_view(after) and not builtin.is_generated(after)
    assert after["metadata"]["annotations"] == manifest["metadata"]["annotations"]
    assert _conditions(after) == {"NamesAccepted": "True", "Established": "True"}
    # A PUT without the label keeps it: the CRD still defines nothing, and cannot be deleted.
    replaced = await hub.put(
        f"{CRDS}/{CQ_CRD}",
        json={
            **manifest,
            "metadata": {**manifest["metadata"], "resourceVersion": after["metadata"]["resourceVersion"]},
        },
    )
    assert replaced.status == 200, await replaced.text()
    assert builtin.is_view(await replaced.json())
    assert (await hub.delete(f"{CRDS}/{CQ_CRD}")).status == 403
    discovery = await _get(hub, "/apis/kueue.x-k8s.io/v1beta1")
    assert "clusterqueues" in {r["name"] for r in discovery["resources"]}


def test_a_crd_of_the_kind_stored_before_is_kept_marked_and_a_users_is_not_replaced() -> None:
    [view] = [crd for crd in view_crds(hub_registry().static) if crd["metadata"]["name"] == CQ_CRD]
    upstream = _upstream_like(view)
    upstream["metadata"]["uid"] = "u-1"
    kept = to_publish(view, upstream, now="2026-12-07T00:00:00Z")
    assert kept is not None
    assert kept["spec"] == upstream["spec"] and kept["metadata"]["uid"] == "u-1"
    assert builtin.is_view(kept) and not builtin.is_generated(kept)
    assert _conditions(kept)["Established"] == "True"
    assert to_publish(view, kept, now="2026-12-07T00:00:00Z") is None


async def test_a_change_to_what_a_view_defines_or_its_status_is_refused(hub: Client) -> None:
    view = await _get(hub, f"{CRDS}/{CQ_CRD}")
    namespaced = copy.deepcopy(view)
    namespaced["spec"]["scope"] = "Namespaced"
    refused = await hub.put(f"{CRDS}/{CQ_CRD}", json=namespaced)
    assert refused.status == 403, await refused.text()
    status = copy.deepcopy(view)
    status["status"]["conditions"][1]["status"] = "False"
    refused = await hub.put(f"{CRDS}/{CQ_CRD}/status", json=status)
    assert refused.status == 403, await refused.text()
    assert await _get(hub, f"{CRDS}/{CQ_CRD}") == view


async def test_a_crd_of_ones_own_may_not_carry_the_label(hub: Client) -> None:
    labelled = copy.deepcopy(CRD)
    labelled["metadata"]["labels"] = {builtin.LABEL: "true"}
    refused = await hub.post(CRDS, json=labelled)
    assert refused.status == 422, await refused.text()
    [cause] = (await refused.json())["details"]["causes"]
    assert cause["field"] == f"metadata.labels[{builtin.LABEL}]"


async def test_the_crd_controller_serves_ones_own_crds_and_leaves_the_views_alone(hub: Client) -> None:
    before = await _get(hub, f"{CRDS}/{CQ_CRD}")
    created = await hub.post(CRDS, json=CRD)
    assert created.status == 201, await created.text()
    async with asyncio.timeout(10):
        while True:
            if _conditions(await _get(hub, f"{CRDS}/trainers.ml.example.com")).get("Established") == "True":
                break
            await asyncio.sleep(0.02)
    # Each sync looked at every CRD: the views kept their status (the names are the built-in
    # kinds', which the naming controller would call conflicts) and serve no custom kind.
    assert await _get(hub, f"{CRDS}/{CQ_CRD}") == before
    discovery = await _get(hub, "/apis/kueue.x-k8s.io/v1beta1")
    assert "clusterqueues" in {r["name"] for r in discovery["resources"]}


async def test_lightkube_loads_the_kinds_from_the_crds(hub: Client) -> None:
    server = Cluster(server=str(hub.make_url("")).rstrip("/"))
    client = AsyncClient(config=KubeConfig.from_one(cluster=server, user=User(token="unused")))
    try:
        await async_load_in_cluster_generic_resources(client)
        cluster_queue = get_generic_resource("kueue.x-k8s.io/v1beta1", "ClusterQueue")
        assert cluster_queue is not None
        await client.create(cluster_queue(metadata={"name": "lk"}, spec={}))
        listed = [obj.metadata.name async for obj in client.list(cluster_queue)]
        assert listed == ["lk"]
    finally:
        await client.close()


@needs_kubectl
async def test_kubectl_waits_for_a_view_applies_the_kinds_crd_and_is_refused_its_delete(
    hub_kubeconfig: Path,  # noqa: F811
) -> None:
    code, out, err = await kubectl(
        hub_kubeconfig, "wait", "--for=condition=Established", f"crd/{CQ_CRD}", "--timeout=20s"
    )
    assert code == 0, err
    assert "condition met" in out
    view = _upstream_like(
        {
            "spec": {
                "group": "kueue.x-k8s.io",
                "scope": "Cluster",
                "names": {"plural": "clusterqueues", "kind": "ClusterQueue"},
            }
        }
    )
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "team"},
        "spec": {},
    }
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": [view, queue]})
    for how in (["apply"], ["apply", "--server-side"]):
        code, out, err = await kubectl(hub_kubeconfig, *how, "-f", "-", stdin=manifest)
        assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "crd", CQ_CRD, "-o", "yaml")
    assert code == 0, err
    assert f'{builtin.LABEL}: "true"' in out
    assert builtin.GENERATED not in out  # the manifest's CRD, kept as written
    code, out, err = await kubectl(hub_kubeconfig, "delete", "crd", CQ_CRD)
    assert code != 0
    assert "it cannot be changed or deleted" in err
    code, out, err = await kubectl(hub_kubeconfig, "get", "clusterqueue", "team", "-o", "name")
    assert code == 0, err
