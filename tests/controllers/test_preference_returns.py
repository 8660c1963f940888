"""Replicas come back to what the policy prefers, not only to a cheaper tier: a later
clusterAffinities term back to the first, a static-weight division a full cluster cut short;
and a gang moves whole, but only between runs. The scheduler controller on an in-process hub
store; member reports and Work statuses written as an agent would (fleet.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, eventually, node_shape, propagation_policy, put_cluster, settled
from .test_failover_loop import pytorchjob
from .test_tier_return_loop import (
    WORK_API,
    binding_of,
    burst_then_free,
    events_of,
    later,
    placed,
    placed_as,
    report_ready,
)

pytestmark = pytest.mark.waiting

REBALANCE = {"minMoveIntervalSeconds": 0, "maxSurge": "50%"}
TERMS = [{"affinityName": "home", "clusterNames": ["onprem"]}, {"affinityName": "burst", "clusterNames": ["cloud"]}]
WEIGHTS = {"staticWeightList": [{"targetCluster": {"clusterNames": ["onprem"]}, "weight": 1},
                                {"targetCluster": {"clusterNames": ["cloud"]}, "weight": 1}]}


async def test_a_later_affinity_term_comes_back_to_the_first(objects: ObjectStore, manager: ControllerManager) -> None:
    placement = {"clusterAffinities": TERMS,
                 "replicaScheduling": {"replicaSchedulingType": "Divided", "rebalance": REBALANCE}}
    await burst_then_free(objects, manager, placement=placement)
    binding = await binding_of(objects, "web")
    assert binding is not None and binding["status"]["schedulerObservingAffinityName"] == "burst"

    # Two steps of 2 (50%): each added on-prem first, the cloud shrinks once they are ready.
    await eventually(placed_as(objects, {"cloud": 4, "onprem": 2}), what="2 replicas added on-prem")
    await report_ready(objects, "onprem", "web", 2)
    # The first step ends (the cloud keeps 2) and, no interval asked for, the next one starts.
    await eventually(placed_as(objects, {"cloud": 2, "onprem": 4}), what="the first step done, 2 more added on-prem")
    assert len(await events_of(objects, "ReplicasMoved")) == 1
    binding = await binding_of(objects, "web")
    assert binding is not None and binding["status"]["schedulerObservingAffinityName"] == "burst"  # still needs it
    await report_ready(objects, "onprem", "web", 4)
    await eventually(placed_as(objects, {"onprem": 4}), what="all 4 back in the first term")
    binding = await binding_of(objects, "web")
    assert binding is not None and binding["status"]["schedulerObservingAffinityName"] == "home"
    messages = await events_of(objects, "ReplicasMoved")
    assert messages == ["moved 2 replicas cloud \u2192 onprem: back to clusterAffinities term home, saves $5.80/h"] * 2
    await settled(manager)
    assert await placed(objects, "web") == {"onprem": 4}


async def test_static_weights_cut_short_by_a_full_cluster_are_restored(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    placement = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                       "weightPreference": WEIGHTS, "rebalance": REBALANCE}}
    # On-prem first reports no GPU it could ever run a replica on (its weight counts for nothing),
    # then 4 GPUs: the change of its nodes makes the weights' 1:1 the preference again.
    await burst_then_free(objects, manager, placement=placement)
    await eventually(placed_as(objects, {"cloud": 4, "onprem": 2}), what="2 replicas added on-prem")
    await report_ready(objects, "onprem", "web", 2)
    await eventually(placed_as(objects, {"cloud": 2, "onprem": 2}), what="the weights' division 1:1")
    assert await events_of(objects, "ReplicasMoved") == [
        "moved 2 replicas cloud \u2192 onprem: toward the staticWeightList division, saves $5.80/h"
    ]
    await settled(manager)
    assert await placed(objects, "web") == {"cloud": 2, "onprem": 2}  # met: nothing more moves


async def test_automatic_moves_can_be_turned_off(objects: ObjectStore, manager: ControllerManager) -> None:
    placement = {"clusterAffinities": TERMS,
                 "replicaScheduling": {"replicaSchedulingType": "Divided", "rebalance": {"enabled": False}}}
    await burst_then_free(objects, manager, placement=placement)
    await settled(manager)
    assert await placed(objects, "web") == {"cloud": 4}


async def report_gang(objects: ObjectStore, cluster: str, conditions: list[str]) -> None:
    """The member's Work status for the PyTorchJob ``train``: its conditions (all True)."""
    rt = objects.registry.require(WORK_API, "Work")

    async def work() -> dict[str, Any] | None:
        try:
            return await objects.get(rt, namespace=f"gpufed-es-{cluster}", name="default-train-pytorchjob")
        except errors.NotFound:
            return None

    found = await eventually(work, what=f"the Work in {cluster}")
    entry = {
        "identifier": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob", "namespace": "default",
                       "name": "train", "ordinal": 0},
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions],
                   "replicaStatuses": {"Worker": {"active": 3 if "Running" in conditions else 0}}},
        "health": "Healthy",
    }
    status = {
        "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
                        "lastTransitionTime": later(0), "observedGeneration": found["metadata"]["generation"]}],
        "manifestStatuses": [entry],
    }
    await objects.update_status(rt, {**found, "status": status})


async def gang_in_the_cloud(objects: ObjectStore, manager: ControllerManager, conditions: list[str]) -> None:
    """train (1 master + 3 workers of 2 GPUs) lands in the cloud while on-prem is full; its member
    reports ``conditions``; then on-prem reports room for the whole gang."""
    await put_cluster(objects, "onprem", node_shape(1, gpus=0), pricing={A100: 1.2}, pods=[])
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1}, pods=[])
    await settled(manager)
    placement = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow",
                                       "tieredOverflow": {"rebalance": {"minMoveIntervalSeconds": 0}}}}
    rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(rt, propagation_policy("gangs", kind="PyTorchJob", api_version="kubeflow.org/v1", placement=placement))
    await objects.create(objects.registry.require("kubeflow.org/v1", "PyTorchJob"), pytorchjob("train", workers=3))
    assert await eventually(lambda: placed(objects, "train", kind="pytorchjob"), what="train placed") == {"cloud": 4}
    await report_gang(objects, "cloud", conditions)
    await settled(manager)
    await put_cluster(objects, "onprem", node_shape(1, gpus=8), pricing={A100: 1.2}, report_time=later(30), pods=[])


async def test_a_gang_not_started_moves_whole(objects: ObjectStore, manager: ControllerManager) -> None:
    await gang_in_the_cloud(objects, manager, ["Created"])  # its pods pending

    async def moved() -> dict[str, int] | None:
        now = await placed(objects, "train", kind="pytorchjob")
        return now if now == {"onprem": 4} else None

    await eventually(moved, what="the gang moved whole on-prem")
    # The move's Event is written after the placement it reports.
    [message] = await eventually(lambda: events_of(objects, "ReplicasMoved"), what="the ReplicasMoved Event")
    assert message == "moved 4 replicas cloud \u2192 onprem: the gang, between runs, saves $17.40/h"


async def test_a_running_gang_stays(objects: ObjectStore, manager: ControllerManager) -> None:
    await gang_in_the_cloud(objects, manager, ["Created", "Running"])
    await settled(manager)
    assert await placed(objects, "train", kind="pytorchjob") == {"cloud": 4}
    assert await events_of(objects, "ReplicasMoved") == []
