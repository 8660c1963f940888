"""A Kueue pod group lands whole in one cluster, as MultiKueue runs a group's Workload in one
worker: the group's Pods (each its own binding) are decided together, in the one cluster that
holds them all, or none is placed and each binding says why. A Pod outside any group is placed
on its own, as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.spot import ANNOTATION_SPOT_RECLAIMS
from controlplane.apiserver.kueuepods import check_managed_label
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.admissiongate import hold_queued_workload
from controlplane.controllers.manager import ControllerManager
from gpufed.commands.explain import render_explanation

from .fleet import REPORT_TIME, eventually, node_shape, propagation_policy, put_cluster, settled
from .test_admission import GPU, PLACEMENT, create, kueue_obj
from .test_admission_job_events import events_on
from .test_admission_pod_groups import group_pod
from .test_failover_loop import taint, works_by_cluster

pytestmark = pytest.mark.waiting

BINDING_API = "work.gpufed.io/v1alpha1"


def nodes(count: int, *, gpus: int, allocatable: int | None = None) -> dict[str, Any]:
    """``count`` nodes of ``gpus`` free GPUs, each of ``allocatable`` GPUs in all (default: all free)."""
    shape = node_shape(count, gpus=gpus)
    if allocatable is not None:
        shape["allocatable"]["nvidia.com/gpu"] = allocatable
    return shape


async def put_fleet(
    objects: ObjectStore, *, small: int, big: int, small_nodes: int = 1, allocatable: int | None = None,
    report_time: str = REPORT_TIME,
) -> None:
    await put_cluster(
        objects, "a-small", nodes(small_nodes, gpus=small, allocatable=allocatable), pods=[], report_time=report_time
    )
    await put_cluster(
        objects, "b-big", nodes(1, gpus=big, allocatable=allocatable), provider="cloud", pricing={"A100": 4.0},
        pods=[], report_time=report_time,
    )


async def fleet(
    objects: ObjectStore, manager: ControllerManager, *, small: int, big: int, small_nodes: int = 1,
    only: tuple[str, ...] = (), allocatable: int | None = None,
) -> None:
    """Two clusters: ``a-small`` with ``small_nodes`` nodes of ``small`` free GPUs (first by name,
    and cheaper), ``b-big`` with one node of ``big`` (each node of ``allocatable`` GPUs in all); a
    queue of 8 GPUs and a Divided policy for Pods (``only``: for the Pods of these names alone)."""
    objects.check_creates(hold_queued_workload)
    objects.admit_writes(check_managed_label)
    await put_fleet(objects, small=small, big=big, small_nodes=small_nodes, allocatable=allocatable)
    await create(objects, kueue_obj("ResourceFlavor", "a100", spec={}))
    await create(objects, kueue_obj("ClusterQueue", "team", spec={
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [{"name": GPU, "nominalQuota": 8}]}]}],
    }))
    await create(objects, kueue_obj("LocalQueue", "team-lq", "default", spec={"clusterQueue": "team"}))
    policy = propagation_policy("pods", kind="Pod", api_version="v1", placement=PLACEMENT)
    if only:
        policy["spec"]["resourceSelectors"] = [{"apiVersion": "v1", "kind": "Pod", "name": name} for name in only]
    await create(objects, policy)
    await settled(manager)


def plain_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: "1"}}}]}}


async def binding(objects: ObjectStore, pod: str) -> dict[str, Any] | None:
    rt = objects.registry.require(BINDING_API, "ResourceBinding")
    found = (await objects.list(rt, namespace="default")).items
    return next((b for b in found if b["metadata"]["name"] == f"{pod}-pod"), None)


def scheduled(found: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in found.get("status", {}).get("conditions", ()) if c["type"] == "Scheduled")


async def decided(objects: ObjectStore, pod: str) -> dict[str, Any] | None:
    found = await binding(objects, pod)
    if found is None or not any(c["type"] == "Scheduled" for c in found.get("status", {}).get("conditions", ())):
        return None
    return found


def clusters(found: dict[str, Any]) -> dict[str, int]:
    return {c["name"]: c["replicas"] for c in found["spec"].get("clusters") or ()}


async def test_a_group_of_three_lands_whole_in_the_one_cluster_that_holds_it(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """``a-small`` (cheaper, first) holds two of the three pods, ``b-big`` all three: all three go
    to ``b-big``; a Pod outside any group still goes where it alone is best placed."""
    await fleet(objects, manager, small=2, big=4)
    await create(objects, plain_pod("solo"))
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name, queue="team-lq"))
    for name in ("g0", "g1", "g2"):
        found = await eventually(lambda n=name: placed_binding(objects, n), what=f"{name} placed")
        assert clusters(found) == {"b-big": 1}, (name, clusters(found))
        assert scheduled(found)["message"] == "pod group grp: scheduled with its 3 pods to b-big"
        [chosen] = [e for e in found["status"]["explanation"] if e.get("chosen")]
        assert chosen["cluster"] == "b-big" and "holds the whole pod group (3 pods)" in chosen["reasons"]
        pod = await objects.get(objects.registry.require("v1", "Pod"), namespace="default", name=name)
        explained = render_explanation(pod, found)  # gpufed explain pod/<name>
        assert "Scheduled:   True (Success): pod group grp: scheduled with its 3 pods to b-big" in explained, explained
    solo = await eventually(lambda: placed_binding(objects, "solo"), what="the plain Pod placed")
    assert clusters(solo) == {"a-small": 1}  # the cheaper cluster, on its own
    assert scheduled(solo)["message"] == "scheduled 1 replica(s) to 1 cluster(s)"


async def test_each_role_of_a_group_keeps_its_own_shape(objects: ObjectStore, manager: ControllerManager) -> None:
    """One Pod of 2 GPUs and two of 1: ``a-small`` has 4 free GPUs, but one per node, so the 2-GPU
    Pod fits nowhere there; the group goes whole to ``b-big``, whose one node holds all three."""
    await fleet(objects, manager, small=1, small_nodes=4, big=4)
    await create(objects, group_pod("big", gpus=2, queue="team-lq"))
    for name in ("small-a", "small-b"):
        await create(objects, group_pod(name, queue="team-lq"))
    for name in ("big", "small-a", "small-b"):
        found = await eventually(lambda n=name: placed_binding(objects, n), what=f"{name} placed")
        assert clusters(found) == {"b-big": 1}, (name, clusters(found))


async def placed_binding(objects: ObjectStore, pod: str) -> dict[str, Any] | None:
    found = await binding(objects, pod)
    return found if found is not None and found["spec"].get("clusters") else None


async def test_a_group_no_cluster_can_hold_is_not_placed_and_each_pod_says_why(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """Each cluster has 2 free GPUs of 8: no room for the group now, though there may be later."""
    await fleet(objects, manager, small=2, big=2, allocatable=8)
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name, queue="team-lq"))

    async def refused(pod: str) -> dict[str, Any] | None:
        found = await decided(objects, pod)
        return found if found is not None and "no cluster can hold" in scheduled(found)["message"] else None

    for name in ("g0", "g1", "g2"):
        await eventually(lambda n=name: refused(n), what=f"{name} told why")
    await settled(manager)
    for name in ("g0", "g1", "g2"):
        found = await binding(objects, name)
        assert found is not None and clusters(found) == {}, (name, found and clusters(found))
        condition = scheduled(found)
        assert condition["status"] == "False" and condition["reason"] != "NeverFits", condition
        assert condition["message"].startswith("pod group grp: no cluster can hold its 3 pods: "), condition["message"]
        assert "gang does not fit" in condition["message"] or "0/2 clusters" in condition["message"], condition["message"]


async def test_a_later_pod_of_a_placed_group_follows_it(objects: ObjectStore, manager: ControllerManager) -> None:
    """The group holds ``b-big``; its Pods' bindings stay there, and a change of one Pod's binding
    (its placement taken away) puts it back with the rest, not in the cheaper ``a-small``."""
    await fleet(objects, manager, small=2, big=4)
    await place_group(objects, manager)
    found = await take_placement_away(objects, "g1")

    async def back(pod: str) -> dict[str, Any] | None:
        again = await placed_binding(objects, pod)
        return again if again is not None and again["metadata"]["generation"] > found["metadata"]["generation"] else None

    again = await eventually(lambda: back("g1"), what="g1 placed again")
    assert clusters(again) == {"b-big": 1}
    assert scheduled(again)["message"] == "pod group grp: scheduled to b-big, where its other pods run"



async def place_group(objects: ObjectStore, manager: ControllerManager) -> None:
    """A group of three, placed in ``b-big`` (the one cluster of the fleet that holds it)."""
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name, queue="team-lq"))
    for name in ("g0", "g1", "g2"):
        found = await eventually(lambda n=name: placed_binding(objects, n), what=f"{name} placed")
        assert clusters(found) == {"b-big": 1}, (name, clusters(found))
    await settled(manager)


async def take_placement_away(objects: ObjectStore, pod: str) -> dict[str, Any]:
    """Empty ``pod``'s binding's placement (as a change of its binding may); the binding as it was."""
    found = await binding(objects, pod)
    assert found is not None
    await objects.update(objects.registry.require(BINDING_API, "ResourceBinding"), {
        **found, "spec": {**found["spec"], "clusters": []},
    })
    return found


async def placed_in_b_big(objects: ObjectStore, manager: ControllerManager, *, other_gpus: int) -> None:
    """The fleet, and ``c-other`` of ``other_gpus`` free GPUs; a group of three placed in ``b-big``."""
    await fleet(objects, manager, small=2, big=4)
    await put_cluster(objects, "c-other", node_shape(1, gpus=other_gpus), provider="cloud", pricing={"A100": 5.0}, pods=[])
    await place_group(objects, manager)


async def moved_off_b_big(objects: ObjectStore, pod: str) -> dict[str, Any] | None:
    found = await placed_binding(objects, pod)
    return found if found is not None and "b-big" not in clusters(found) else None


@pytest.mark.parametrize("other_gpus", [4, 2])
async def test_a_group_fails_over_whole_or_not_at_all(
    objects: ObjectStore, manager: ControllerManager, other_gpus: int,
) -> None:
    """``b-big`` is tainted NoExecute: the group moves whole to ``c-other`` when it holds all three
    Pods (each binding with its eviction task), and stays where it is when it holds only two."""
    await placed_in_b_big(objects, manager, other_gpus=other_gpus)
    await taint(objects, "b-big", ("maintenance", "NoExecute"))  # tolerated by no policy: due at once

    if other_gpus == 4:
        for name in ("g0", "g1", "g2"):
            found = await eventually(lambda n=name: moved_off_b_big(objects, n), what=f"{name} moved")
            assert clusters(found) == {"c-other": 1}
            assert [t["fromCluster"] for t in found["spec"]["gracefulEvictionTasks"]] == ["b-big"]
        return
    await settled(manager)
    for name in ("g0", "g1", "g2"):
        found = await binding(objects, name)
        assert found is not None and clusters(found) == {"b-big": 1}, (name, found and clusters(found))
        assert not found["spec"].get("gracefulEvictionTasks")


async def report_unschedulable(objects: ObjectStore, cluster: str, pod: str) -> None:
    """What the agent writes back for ``pod``'s Work in ``cluster``: applied, and the Pod unschedulable."""
    work = (await works_by_cluster(objects, f"{pod}-pod"))[cluster]
    entry = {
        "identifier": {"group": "", "version": "v1", "kind": "Pod", "namespace": "default", "name": pod, "ordinal": 0},
        "status": {"phase": "Pending"},
        "health": "Unhealthy",
        "unschedulable": {"pods": 1, "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."},
    }
    status = {
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "all 1 manifest(s) applied",
             "lastTransitionTime": REPORT_TIME, "observedGeneration": work["metadata"]["generation"]},
        ],
        "manifestStatuses": [entry],
    }
    await objects.update_status(objects.registry.require(BINDING_API, "Work"), {**work, "status": status})


@pytest.mark.parametrize("other_gpus", [4, 2])
async def test_a_group_whose_member_cannot_place_one_pod_moves_whole_or_not_at_all(
    objects: ObjectStore, manager: ControllerManager, other_gpus: int,
) -> None:
    """``b-big``'s own scheduler cannot place ``g1`` (the grace period passes): the whole group moves
    to ``c-other`` when it holds all three Pods, and every Pod stays in ``b-big`` (``g1`` waiting
    there for room elsewhere) when it holds only two; never one Pod apart from the others."""
    await placed_in_b_big(objects, manager, other_gpus=other_gpus)
    await report_unschedulable(objects, "b-big", "g1")

    if other_gpus == 4:
        for name in ("g0", "g1", "g2"):
            found = await eventually(lambda n=name: moved_off_b_big(objects, n), what=f"{name} moved")
            assert clusters(found) == {"c-other": 1}, (name, clusters(found))
            assert scheduled(found)["message"] == "pod group grp: scheduled with its 3 pods to c-other"
            assert not found["spec"].get("gracefulEvictionTasks")
        await settled(manager)
        assert await events_on(objects, "Pod", "g1", "ReplicasMoved") == [
            "moved replicas members could not place (1 from b-big); now c-other:1"
        ]
        assert await events_on(objects, "Pod", "g0", "ReplicasMoved") == [
            "rescheduled (pod group grp: moved whole, b-big cannot place its pod g1): moved 1 from b-big; now c-other:1"
        ]
        return

    async def waiting() -> dict[str, Any] | None:
        found = await binding(objects, "g1")
        entries = {e["cluster"]: e for e in ((found or {}).get("status") or {}).get("explanation") or ()}
        reasons = entries.get("b-big", {}).get("reasons") or ()
        return found if any(r.startswith("waiting for room elsewhere: ") for r in reasons) else None

    await eventually(waiting, what="g1 waiting in b-big for room elsewhere")
    await settled(manager)
    for name in ("g0", "g1", "g2"):
        found = await binding(objects, name)
        assert found is not None and clusters(found) == {"b-big": 1}, (name, found and clusters(found))


async def report_reclaimed(objects: ObjectStore, cluster: str, pod: str, *, node: str) -> None:
    """What the agent writes back for ``pod``'s Work in ``cluster`` once a spot reclaim of ``node`` took it."""
    work = (await works_by_cluster(objects, f"{pod}-pod"))[cluster]
    entry = {
        "identifier": {"group": "", "version": "v1", "kind": "Pod", "namespace": "default", "name": pod, "ordinal": 0},
        "health": "Unhealthy",
        "reclaimed": {"pods": 1, "nodes": [node], "time": REPORT_TIME},
    }
    await objects.update_status(objects.registry.require(BINDING_API, "Work"), {**work, "status": {"manifestStatuses": [entry]}})


@pytest.mark.parametrize("other_gpus", [4, 2])
async def test_a_group_one_of_whose_pods_a_spot_reclaim_took_moves_whole_or_not_at_all(
    objects: ObjectStore, manager: ControllerManager, other_gpus: int,
) -> None:
    """A spot reclaim of ``b-big``'s node takes ``g1``: the whole group moves to ``c-other`` when it
    holds all three Pods (``g1``'s workload gets the ``SpotReclaimed`` Event, its binding the count),
    and every Pod stays in ``b-big`` when it holds only two, ``g1`` waiting there with its group."""
    await placed_in_b_big(objects, manager, other_gpus=other_gpus)
    await report_reclaimed(objects, "b-big", "g1", node="b-big-0")

    if other_gpus == 4:
        for name in ("g0", "g1", "g2"):
            found = await eventually(lambda n=name: moved_off_b_big(objects, n), what=f"{name} moved")
            assert clusters(found) == {"c-other": 1}, (name, clusters(found))
            assert not found["spec"].get("gracefulEvictionTasks")
        await settled(manager)
        [reclaimed] = await events_on(objects, "Pod", "g1", "SpotReclaimed")
        assert reclaimed.startswith("spot node(s) b-big-0 of cluster b-big reclaimed: 1 replica(s) replaced, now c-other:1")
        assert await events_on(objects, "Pod", "g0", "ReplicasMoved") == [
            "rescheduled (pod group grp: moved whole, spot node(s) b-big-0 of b-big reclaimed its pod g1): "
            "moved 1 from b-big; now c-other:1"
        ]
        found = await binding(objects, "g1")
        assert found is not None
        assert json.loads(found["metadata"]["annotations"][ANNOTATION_SPOT_RECLAIMS])["count"] == 1
        return
    await settled(manager)
    for name in ("g0", "g1", "g2"):
        found = await binding(objects, name)
        assert found is not None and clusters(found) == {"b-big": 1}, (name, found and clusters(found))
    assert await events_on(objects, "Pod", "g1", "SpotReclaimed") == []


async def test_a_group_waits_until_every_pod_has_its_binding(objects: ObjectStore, manager: ControllerManager) -> None:
    """No policy claims ``g2``: ``g0`` and ``g1`` are not placed on their own, and say what they wait for."""
    await fleet(objects, manager, small=2, big=4, only=("g0", "g1"))
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name, queue="team-lq"))

    async def waiting(pod: str) -> dict[str, Any] | None:
        found = await decided(objects, pod)
        return found if found is not None and "(2 so far)" in scheduled(found)["message"] else None

    for name in ("g0", "g1"):
        await eventually(lambda n=name: waiting(n), what=f"{name} waiting")
    await settled(manager)
    for name in ("g0", "g1"):
        found = await binding(objects, name)
        assert found is not None and clusters(found) == {}
        assert scheduled(found)["message"] == "pod group grp: waiting for the bindings of its 3 pods (2 so far)"
