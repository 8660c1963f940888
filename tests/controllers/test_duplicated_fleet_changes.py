"""A Duplicated workload runs in every cluster its policy allows, whenever that cluster came to allow it.

A cluster that joins (or turns Ready, loses its taints, gets the labels the policy selects) while
the binding's first decision is on its way used to be missed: the cluster's event looked for
bindings placed but not in it, the binding had no placement yet in the scheduler's cache, and the
decision written a moment later named only the clusters seen before. Karmada's scheduler requeues
every binding whose affinity the changed cluster matches, placed or not, and schedules a Duplicated
one again on every pass; a Divided one is not scheduled again for a cluster change. A new scheduler
(a new leader) decides every Duplicated binding once, whatever order its informers list in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.objectclient import WRITER
from controlplane.scheduler.controller import controller as scheduler_controller
from controlplane.scheduler.core.snapshot import ClusterSnapshot

from .conftest import FAST
from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"
CLUSTER_API = "cluster.gpufed.io/v1alpha1"
KEY = ("default", "serve-deployment")
DUPLICATED = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
STATIC_WEIGHTS = {
    "replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {
            "staticWeightList": [
                {"targetCluster": {"clusterNames": ["onprem"]}, "weight": 1},
                {"targetCluster": {"clusterNames": ["late"]}, "weight": 1},
            ]
        },
    }
}
NO_SCHEDULE = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def placement(objects: ObjectStore) -> dict[str, int]:
    """Where the binding runs now, and with how many replicas ({} before its first decision)."""
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    listed = await objects.list(rt, namespace=KEY[0])
    found = next((b for b in listed.items if b["metadata"]["name"] == KEY[1]), None)
    return {c["name"]: c["replicas"] for c in (found or {}).get("spec", {}).get("clusters") or ()}


async def placed_in(objects: ObjectStore, expected: dict[str, int]) -> None:
    async def there() -> bool:
        return await placement(objects) == expected

    await eventually(there, what=f"the binding placed as {expected}")


async def update_cluster(objects: ObjectStore, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    rt = objects.registry.require(CLUSTER_API, "Cluster")
    current = await objects.get(rt, name=name)
    change(current)
    await objects.update(rt, current)


async def set_ready(objects: ObjectStore, name: str, status: str) -> None:
    rt = objects.registry.require(CLUSTER_API, "Cluster")
    current = await objects.get(rt, name=name)
    ready = next(c for c in current["status"]["conditions"] if c["type"] == "Ready")
    ready.update(status=status, reason="AgentReporting" if status == "True" else "AgentNotReporting")
    await objects.update_status(rt, current)


Change = Callable[[ObjectStore], Awaitable[None]]
Seen = Callable[[ClusterSnapshot], bool]


async def join(objects: ObjectStore) -> None:
    await put_cluster(objects, "late", node_shape(1, gpus=8))


async def turn_ready(objects: ObjectStore) -> None:
    await set_ready(objects, "late", "True")


async def untaint(objects: ObjectStore) -> None:
    await update_cluster(objects, "late", lambda c: c["spec"].update(taints=[]))


async def label(objects: ObjectStore) -> None:
    await update_cluster(objects, "late", lambda c: c["metadata"].update(labels={"pool": "serving"}))


async def before_join(objects: ObjectStore) -> None:
    """No cluster "late" yet."""


async def not_ready(objects: ObjectStore) -> None:
    await put_cluster(objects, "late", node_shape(1, gpus=8))
    await set_ready(objects, "late", "False")


async def tainted(objects: ObjectStore) -> None:
    await put_cluster(objects, "late", node_shape(1, gpus=8))
    await update_cluster(objects, "late", lambda c: c["spec"].update(taints=NO_SCHEDULE))


async def unlabelled(objects: ObjectStore) -> None:
    await put_cluster(objects, "late", node_shape(1, gpus=8), labels={"pool": "batch"})


SERVING = {"pool": "serving"}
#: (how "late" starts, what changes it, how the scheduler's view shows the change, the placement)
CHANGES: dict[str, tuple[Change, Change, Seen, dict[str, Any]]] = {
    "joins": (before_join, join, lambda s: s.ready, DUPLICATED),
    "turns-ready": (not_ready, turn_ready, lambda s: s.ready, DUPLICATED),
    "taints-removed": (tainted, untaint, lambda s: not s.taints, DUPLICATED),
    "labels-selected": (
        unlabelled, label, lambda s: dict(s.labels) == SERVING,
        {**DUPLICATED, "clusterAffinity": {"labelSelector": {"matchLabels": SERVING}}},
    ),
}


async def start(objects: ObjectStore, manager: ControllerManager, case: str) -> Callable[[], Awaitable[None]]:
    """The fleet before the change (the binding's policy included), and the change with a wait for
    the scheduler's cluster handler to have seen it."""
    initial, change, seen, placement = CHANGES[case]
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), labels=SERVING)
    await initial(objects)
    await create(objects, propagation_policy("serving", placement=placement))
    await settled(manager)
    scheduler = manager.scheduler
    assert scheduler is not None

    async def changed() -> None:
        await change(objects)

        async def handled() -> bool:
            snapshot = scheduler._snapshots.get("late")
            return snapshot is not None and seen(snapshot)

        await eventually(handled, what=f"the scheduler's view of the cluster that {case.split('-')[0]}")

    return changed


@pytest.mark.parametrize("case", sorted(CHANGES))
async def test_a_cluster_that_comes_to_admit_a_duplicated_workload_during_its_first_decision_gets_it(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    changed = await start(objects, manager, case)
    real = scheduler_controller.write_decision
    decisions: list[str] = []

    async def write_decision(*args: Any, **kwargs: Any) -> None:
        # The first decision took the fleet as it was; the cluster changes before it is written.
        decisions.append("decision")
        if len(decisions) == 1:
            await changed()
        await real(*args, **kwargs)

    monkeypatch.setattr(scheduler_controller, "write_decision", write_decision)
    await create(objects, deployment("serve", replicas=2))
    await placed_in(objects, {"onprem": 2, "late": 2})
    assert len(decisions) == 2, decisions


@pytest.mark.parametrize("case", sorted(CHANGES))
async def test_a_cluster_that_comes_to_admit_a_placed_duplicated_workload_gets_it(
    objects: ObjectStore, manager: ControllerManager, case: str
) -> None:
    changed = await start(objects, manager, case)
    await create(objects, deployment("serve", replicas=2))
    await placed_in(objects, {"onprem": 2})
    await settled(manager)
    await changed()
    await placed_in(objects, {"onprem": 2, "late": 2})


async def test_a_divided_workload_is_not_scheduled_again_when_a_cluster_joins(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Karmada's scheduler leaves a placed Divided binding where it is when the fleet changes
    (its static weights' rebalance, off here, is the hub's own way back to the weights)."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    weighted = {"replicaScheduling": {**STATIC_WEIGHTS["replicaScheduling"], "rebalance": {"enabled": False}}}
    await create(objects, propagation_policy("serving", placement=weighted))
    await settled(manager)
    await create(objects, deployment("serve", replicas=2))
    await placed_in(objects, {"onprem": 2})
    await settled(manager)
    await join(objects)
    await settled(manager)
    assert await placement(objects) == {"onprem": 2}


async def test_a_new_scheduler_decides_again_a_duplicated_binding_a_cluster_joined_without(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster joins while no scheduler runs (between two leaders). The next scheduler may hear of
    it before it knows the binding (its clusters are listed first): Karmada's scheduler schedules
    every Duplicated binding again when it starts, and so does the hub's."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await create(objects, propagation_policy("serving", placement=DUPLICATED))
    async with ControllerManager(objects, settings=FAST) as first:
        await create(objects, deployment("serve", replicas=2))
        await placed_in(objects, {"onprem": 2})
        await settled(first)
    await join(objects)
    second = ControllerManager(objects, settings=FAST)
    listing = objects.list
    held: list[str] = []

    async def clusters_first(rt: Any, *args: Any, **kwargs: Any) -> Any:
        if rt.kind == "ResourceBinding" and WRITER.get() == "controller:informers" and not held:
            held.append("bindings")
            context = second.context
            assert context is not None

            async def clusters_seen() -> bool:
                return context.clusters.synced.is_set() and context.clusters.get(None, "late") is not None

            await eventually(clusters_seen, what="the clusters listed")
        return await listing(rt, *args, **kwargs)

    monkeypatch.setattr(objects, "list", clusters_first)
    async with second:
        await placed_in(objects, {"onprem": 2, "late": 2})
    assert held == ["bindings"]


async def test_a_cluster_whose_nodes_come_to_hold_a_duplicated_workload_gets_it(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """A member Ready before its GPUs are reported (the device plugin starts after the node) is left
    out; its next report, with the GPUs, brings it the workload."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await put_cluster(objects, "late", node_shape(1))  # Ready, no GPU yet
    await create(objects, propagation_policy("serving", placement=DUPLICATED))
    await settled(manager)
    await create(objects, deployment("serve", replicas=2))
    await placed_in(objects, {"onprem": 2})
    await settled(manager)
    await put_cluster(objects, "late", node_shape(1, gpus=8))  # the same node, its GPUs allocatable now
    await placed_in(objects, {"onprem": 2, "late": 2})


def busy_node(*, free_gpus: int) -> dict[str, Any]:
    """One 8-GPU node of which other work holds all but ``free_gpus`` (its allocatable stays 8)."""
    shape = node_shape(1, gpus=8)
    shape["free"] = {**shape["free"], "nvidia.com/gpu": free_gpus}
    return shape


async def test_a_cluster_where_a_duplicated_workload_did_not_fit_gets_it_once_room_frees(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """A member whose GPUs other work holds is left out; its report after that work finished (its
    nodes as they were, only more free) brings it the workload, as Karmada's Duplicated scheduling
    adds a cluster that comes to fit."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await put_cluster(objects, "busy", busy_node(free_gpus=1))
    await create(objects, propagation_policy("serving", placement=DUPLICATED))
    await settled(manager)
    await create(objects, deployment("serve", replicas=2))
    await placed_in(objects, {"onprem": 2})
    await settled(manager)
    await put_cluster(objects, "busy", busy_node(free_gpus=8), report_time="2024-05-01T10:00:30Z")
    await placed_in(objects, {"onprem": 2, "busy": 2})


async def test_a_cluster_where_a_duplicated_workload_did_not_fit_gets_it_once_a_hold_there_is_dropped(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Another workload placed in ``busy`` holds 7 of its 8 free GPUs until reports show its pods;
    the Duplicated workload is left out there. That workload is deleted before its pods ever start:
    its hold is dropped on the hub, no report follows, and the Duplicated workload gets ``busy``."""
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await put_cluster(objects, "busy", node_shape(1, gpus=8))
    hog = propagation_policy("hog", placement={"clusterAffinity": {"clusterNames": ["busy"]}, **STATIC_WEIGHTS})
    hog["spec"]["resourceSelectors"][0]["name"] = "hog"
    serving = propagation_policy("serving", placement=DUPLICATED)
    serving["spec"]["resourceSelectors"][0]["name"] = "serve"
    for policy in (hog, serving):
        await create(objects, policy)
    await settled(manager)
    await create(objects, deployment("hog", replicas=7))

    async def hog_placed() -> bool:
        rt = objects.registry.require(WORK_API, "ResourceBinding")
        found = (await objects.list(rt, namespace="default")).items
        return any(b["metadata"]["name"] == "hog-deployment" and b["spec"].get("clusters") for b in found)

    await eventually(hog_placed, what="hog placed in busy")
    await create(objects, deployment("serve", replicas=2))
    await placed_in(objects, {"onprem": 2})
    await settled(manager)
    assert await placement(objects) == {"onprem": 2}
    await objects.delete(objects.registry.require("apps/v1", "Deployment"), namespace="default", name="hog")
    await placed_in(objects, {"onprem": 2, "busy": 2})
