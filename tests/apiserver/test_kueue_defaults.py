"""Kueue's CRD defaults on the hub's Kueue kinds: a ClusterQueue, LocalQueue or Cohort written
without them reads back as Kueue's API server stores it, at v1beta1 and v1beta2; one stored
without them is served with them; an apply of the same object again writes nothing; and the
hub's admission reads the defaulted queue as it read the one without defaults."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from controlplane.admission.objects import cluster_queue as admission_view
from controlplane.admission.objects import fair_weight
from controlplane.apis import kueue_defaulting
from controlplane.apiserver import codec
from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage.etcd import EtcdStore
from tests.apiserver import test_kueue_crd_rules as crd_rules

Obj = dict[str, Any]
GROUP = "/apis/kueue.x-k8s.io"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
GPU_GROUP = [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
    {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]
#: What Kueue's CRD adds to a ClusterQueue that sets none of its defaulted fields (v1beta1).
CQ_DEFAULTS: Obj = {
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
    "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
    "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never", "borrowWithinCohort": {"policy": "Never"}},
}


@pytest.fixture
async def served(etcd_endpoint: str) -> AsyncIterator[tuple[TestClient[Any, Any], ObjectStore]]:
    registry = hub_registry()
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/kueue-defaults-{time.monotonic_ns()}") as store:
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client, objects


async def ok(response: Any, status: int = 200) -> Obj:
    body: Obj = await response.json()
    assert response.status == status, body
    return body


def queue(version: str, name: str, **spec: Any) -> Obj:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": GPU_GROUP, **spec}}


async def test_a_cluster_queue_reads_back_with_kueues_defaults(served: tuple[TestClient[Any, Any], ObjectStore]) -> None:
    client, _ = served
    created = await ok(await client.post(f"{GROUP}/v1beta1/clusterqueues", json=queue("v1beta1", "team-a")), 201)
    assert created["spec"] == {"namespaceSelector": {}, "resourceGroups": GPU_GROUP, **CQ_DEFAULTS}
    at_v1beta2 = await ok(await client.get(f"{GROUP}/v1beta2/clusterqueues/team-a"))
    assert at_v1beta2["spec"]["preemption"] == CQ_DEFAULTS["preemption"]
    assert at_v1beta2["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}

    # Given values stay; a given fairSharing gets its weight.
    given = queue("v1beta2", "team-b", queueingStrategy="StrictFIFO", stopPolicy="Hold",
                  preemption={"withinClusterQueue": "LowerPriority"}, fairSharing={})
    created = await ok(await client.post(f"{GROUP}/v1beta2/clusterqueues", json=given), 201)
    assert created["spec"]["queueingStrategy"] == "StrictFIFO" and created["spec"]["stopPolicy"] == "Hold"
    assert created["spec"]["preemption"] == {
        "withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"}
    }
    assert created["spec"]["fairSharing"] == {"weight": 1}


async def test_local_queues_and_cohorts_get_theirs(served: tuple[TestClient[Any, Any], ObjectStore]) -> None:
    client, _ = served
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "team-a", "namespace": "default"}, "spec": {"clusterQueue": "team-a"}}
    created = await ok(await client.post(f"{GROUP}/v1beta2/namespaces/default/localqueues", json=local), 201)
    assert created["spec"] == {"clusterQueue": "team-a", "stopPolicy": "None"}
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "research"},
              "spec": {"fairSharing": {}}}
    created = await ok(await client.post(f"{GROUP}/v1beta2/cohorts", json=cohort), 201)
    assert created["spec"] == {"fairSharing": {"weight": 1}}


async def test_a_queue_stored_without_defaults_is_served_with_them(
    served: tuple[TestClient[Any, Any], ObjectStore],
) -> None:
    client, objects = served
    rt = objects.registry.require("kueue.x-k8s.io/v1beta1", "ClusterQueue")
    old = queue("v1beta1", "old")
    old["metadata"].update(uid="u-1", creationTimestamp="2026-01-01T00:00:00Z", generation=1)
    await objects.store.create(rt.key(namespace=None, name="old"), codec.encode(old))
    read = await ok(await client.get(f"{GROUP}/v1beta1/clusterqueues/old"))
    assert read["spec"] == {"namespaceSelector": {}, "resourceGroups": GPU_GROUP, **CQ_DEFAULTS}
    listed = await ok(await client.get(f"{GROUP}/v1beta2/clusterqueues"))
    assert [item["spec"]["stopPolicy"] for item in listed["items"]] == ["None"]


async def applying_again_writes_nothing(client: TestClient[Any, Any], path: str, obj: Obj) -> None:
    """A server-side apply of ``obj`` at ``path`` creates it; the same apply again writes nothing."""
    body = yaml.safe_dump(obj)
    first = await ok(await client.patch(f"{path}?fieldManager=kubectl", data=body, headers=APPLY), 201)
    again = await ok(await client.patch(f"{path}?fieldManager=kubectl", data=body, headers=APPLY))
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_applying_the_same_queue_again_writes_nothing(served: tuple[TestClient[Any, Any], ObjectStore]) -> None:
    client, _ = served
    for version in ("v1beta1", "v1beta2"):
        name = f"applied-{version}"
        await applying_again_writes_nothing(client, f"{GROUP}/{version}/clusterqueues/{name}", queue(version, name))


@pytest.mark.parametrize("spec", [
    {},
    {"cohort": "research", "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"maxPriorityThreshold": 5}}},
    {"queueingStrategy": "StrictFIFO", "stopPolicy": "HoldAndDrain", "fairSharing": {}},
    {"preemption": {}, "flavorFungibility": {}, "stopPolicy": "None"},
])
def test_the_defaults_change_no_admission_setting(spec: Obj) -> None:
    written = queue("v1beta1", "q", resourceGroups=GPU_GROUP, **spec)
    stored = copy.deepcopy(written)
    kueue_defaulting.cluster_queue("Borrow")(stored)
    assert stored != written
    flavors: dict[str, dict[str, str]] = {"a100": {}}
    assert admission_view(stored, flavors) == admission_view(written, flavors)
    assert fair_weight(stored["spec"]) == fair_weight(written["spec"])


def default_cases() -> list[tuple[str, str, str, Any]]:
    """Each default of the Kueue CRD lines (``default=``), as the hub serves it (a deliberate
    difference's served value, see test_kueue_crd_rules); of a field of a list's items, below."""
    out = []
    for (kind, version, path), rules in sorted(crd_rules.RULES.items()):
        if "[]" in path:
            continue
        served = crd_rules.DELIBERATE.get((kind, version, path), (rules, ""))[0]
        for rule in served.split():
            if rule.startswith("default="):
                out.append((kind, version, path, json.loads(rule.split("=", 1)[1])))
    return out


def _at(obj: Any, path: str) -> Any:
    for name in path.strip(".").split("."):
        assert isinstance(obj, dict) and name in obj, (name, obj)
        obj = obj[name]
    return obj


@pytest.mark.parametrize(("kind", "version", "path", "value"), default_cases())
async def test_every_default_of_kueues_crds_is_stored(hub: TestClient[Any, Any], kind: str, version: str, path: str, value: Any) -> None:
    """An object written with the field's parent only (a parent with a default of its own left
    out too: kube defaults what it defaulted) reads back with the CRD's default."""
    defaulted = {p for k, v, p, _ in default_cases() if (k, v) == (kind, version)}
    obj = crd_rules.valid(kind, version)
    names = path.strip(".").split(".")[:-1]
    here = obj
    for depth, name in enumerate(names, 1):
        if "." + ".".join(names[:depth]) in defaulted:
            break
        here = here.setdefault(name, {})
    url = f"{GROUP}/{version}/{crd_rules.RESOURCES[kind]}"
    created = await ok(await hub.post(url, json=obj), 201)
    read = await ok(await hub.get(f"{url}/{created['metadata']['name']}"))
    for answer in (created, read):
        found = _at(answer, path)
        assert (isinstance(found, dict) if value == {} else found == value), (path, found)


async def test_the_defaults_of_a_workloads_pod_sets_and_their_entries_in_its_status_are_stored(
    hub: TestClient[Any, Any],
) -> None:
    """A pod set's ``name`` (``main``) and ``count`` (1), and the ``name`` of a pod set's
    assignment and of its resource requests in the status (``main``), as Kueue's CRD defaults them."""
    cases = {
        (kind, path): value
        for kind, version, path, rules in ((k, v, p, r) for (k, v, p), r in crd_rules.RULES.items())
        for value in [json.loads(rule.split("=", 1)[1]) for rule in rules.split() if rule.startswith("default=")]
        if kind == "Workload" and version == "v1beta1" and "[]" in path
    }
    assert cases == {
        ("Workload", ".spec.podSets[].count"): 1,
        ("Workload", ".spec.podSets[].name"): "main",
        ("Workload", ".status.admission.podSetAssignments[].name"): "main",
        ("Workload", ".status.resourceRequests[].name"): "main",
    }
    obj = crd_rules.valid("Workload", "v1beta1")
    obj["spec"]["podSets"] = [{"template": obj["spec"]["podSets"][0]["template"]}]
    url = f"{GROUP}/v1beta1/{crd_rules.RESOURCES['Workload']}"
    created = await ok(await hub.post(url, json=obj), 201)
    assert [(p["name"], p["count"]) for p in created["spec"]["podSets"]] == [("main", 1)]
    status = {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"count": 1}]}, "resourceRequests": [{}]}
    written = await ok(await hub.put(f"{url}/x/status", json={**created, "status": status}))
    read = await ok(await hub.get(f"{url}/x"))
    for answer in (written, read):
        assert answer["status"]["admission"]["podSetAssignments"] == [{"name": "main", "count": 1}]
        assert answer["status"]["resourceRequests"] == [{"name": "main"}]
