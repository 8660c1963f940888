"""Failover through the whole federation loop in one process, with a clock the test moves:
NoExecute taints evict once their toleration runs out, the old Work stays until the new
replicas are Healthy (or the grace period passes), status never counts a cluster twice,
gangs move whole, replicas with nowhere to go stay, and application failover."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.constants import LABEL_BINDING, LABEL_WORK_NAMESPACE
from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import A100, TIERED, deployment, eventually, node_shape, propagation_policy, put_cluster, settled
from .test_trainjob_placement import API as TRAINER_API
from .test_trainjob_placement import runtime as trainer_runtime
from .test_trainjob_placement import trainjob

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"
CLUSTER_API = "cluster.gpufed.io/v1alpha1"
UNREACHABLE = "cluster.gpufed.io/unreachable"
T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
SETTINGS = replace(FAST, graceful_eviction_timeout_seconds=600)


class Clock:
    """The controllers' clock; tests move it forward."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance_to(self, seconds: float) -> None:
        self.now = T0 + timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def fleet(objects: ObjectStore, clock: Clock) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=SETTINGS, clock=clock) as running:
        yield running


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


async def apply(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(rt(objects, obj["apiVersion"], obj["kind"]), obj)


async def binding_of(objects: ObjectStore, name: str = "train-deployment") -> dict[str, Any]:
    return await objects.get(rt(objects, WORK_API, "ResourceBinding"), namespace="default", name=name)


async def placed(objects: ObjectStore, name: str = "train-deployment") -> dict[str, int]:
    try:
        binding = await binding_of(objects, name)
    except errors.NotFound:
        return {}
    return {t["name"]: t["replicas"] for t in binding["spec"].get("clusters") or ()}


async def works_by_cluster(objects: ObjectStore, binding: str = "train-deployment") -> dict[str, dict[str, Any]]:
    listed = await objects.list(
        rt(objects, WORK_API, "Work"), label_selector=f"{LABEL_BINDING}={binding},{LABEL_WORK_NAMESPACE}=default"
    )
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}


def work_replicas(works: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {name: w["spec"]["workload"]["manifests"][0]["spec"]["replicas"] for name, w in works.items()}


async def report(objects: ObjectStore, cluster: str, *, ready: int | None = None, name: str = "train") -> None:
    """What the agent writes back for ``cluster``'s Work: Applied at the current generation and
    the member Deployment's status (all replicas ready unless ``ready`` says otherwise)."""
    work = (await works_by_cluster(objects, f"{name}-deployment"))[cluster]
    replicas = work["spec"]["workload"]["manifests"][0]["spec"]["replicas"]
    ready = replicas if ready is None else ready
    entry = {
        "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "default", "name": name, "ordinal": 0},
        "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": replicas},
        "health": "Healthy" if ready >= replicas else "Unhealthy",
    }
    status = {
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
             "lastTransitionTime": format_time(T0), "observedGeneration": work["metadata"]["generation"]},
        ],
        "manifestStatuses": [entry],
    }
    await objects.update_status(rt(objects, WORK_API, "Work"), {**work, "status": status})


async def taint(objects: ObjectStore, cluster: str, *taints: tuple[str, str], ready: str = "True") -> None:
    """Taint ``cluster`` (timeAdded T0) and set its Ready condition, as the health monitor does."""
    cluster_rt = rt(objects, CLUSTER_API, "Cluster")
    current = await objects.get(cluster_rt, name=cluster)
    updated = copy.deepcopy(current)
    updated["spec"]["taints"] = [{"key": k, "effect": e, "timeAdded": format_time(T0)} for k, e in taints]
    current = await objects.update(cluster_rt, updated)
    status = copy.deepcopy(current["status"])
    status["conditions"] = [{"type": "Ready", "status": ready, "reason": "Test", "message": "set by the test",
                             "lastTransitionTime": format_time(T0)}]
    await objects.update_status(cluster_rt, {**current, "status": status})


async def unreachable(objects: ObjectStore, cluster: str) -> None:
    await taint(objects, cluster, (UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute"), ready="Unknown")


async def poke(manager: ControllerManager, name: str = "train-deployment") -> None:
    """Reconcile the binding now (its timed requeue runs on the real clock, not the test's)."""
    assert manager.scheduler is not None and manager.evictions is not None
    await manager.scheduler.loop.add(("default", name))
    await manager.evictions.loop.add(("default", name))
    await settled(manager)


async def hub_ready_replicas(objects: ObjectStore, name: str = "train") -> int | None:
    hub = await objects.get(rt(objects, "apps/v1", "Deployment"), namespace="default", name=name)
    return (hub.get("status") or {}).get("readyReplicas")


async def events(objects: ObjectStore, reason: str) -> list[dict[str, Any]]:
    listed = await objects.list(rt(objects, "v1", "Event"), namespace="default")
    return [e for e in listed.items if e["reason"] == reason]


async def two_clusters_running_train(objects: ObjectStore, manager: ControllerManager, *, replicas: int = 4,
                                     placement: dict[str, Any] | None = None, **policy: Any) -> None:
    """onprem (6 GPUs) runs all of ``train`` (tiered overflow); cloud (16 GPUs) is empty."""
    await put_cluster(objects, "onprem", node_shape(6, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1})
    await settled(manager)
    await apply(objects, propagation_policy("gpu", placement=placement or TIERED, **policy))
    await apply(objects, deployment("train", replicas=replicas))

    async def on_prem() -> dict[str, int] | None:
        works = work_replicas(await works_by_cluster(objects))
        return works if works == {"onprem": replicas} else None

    await eventually(on_prem, what=f"train's {replicas} replicas on onprem")
    await report(objects, "onprem")
    await eventually(lambda: _equals(hub_ready_replicas(objects), replicas), what="the hub's readyReplicas")


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


def with_tolerations(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return {**TIERED, "clusterTolerations": list(tolerations)}


@pytest.mark.parametrize(
    ("placement", "evict_after"),
    [
        (None, 300),  # no toleration: the hub's default for the unreachable taint
        (with_tolerations({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}), 30),
    ],
)
async def test_unreachable_cluster_is_evicted_when_the_toleration_runs_out_and_its_work_goes_once_replaced(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock, placement: dict[str, Any] | None, evict_after: int
) -> None:
    await two_clusters_running_train(objects, fleet, placement=placement)
    clock.advance_to(1)
    await unreachable(objects, "onprem")
    await settled(fleet)
    # Requeued for the eviction time.
    assert fleet.scheduler is not None
    assert await fleet.scheduler.reconcile(("default", "train-deployment")) == pytest.approx(evict_after - 1)

    clock.advance_to(evict_after - 5)  # (the real-time requeue must stay beyond the settle horizon)
    await poke(fleet)
    assert await placed(objects) == {"onprem": 4}

    clock.advance_to(evict_after)
    await poke(fleet)
    binding = await binding_of(objects)
    assert await placed(objects) == {"cloud": 4}
    [task] = binding["spec"]["gracefulEvictionTasks"]
    assert task == {
        "fromCluster": "onprem", "replicas": 4, "reason": "TaintUntolerated", "message": task["message"],
        "creationTimestamp": format_time(clock.now), "purgeMode": "Gracefully", "gracePeriodSeconds": 600,
    }
    assert f"tolerated for {evict_after}s only" in task["message"]
    onprem_explained = next(e for e in binding["status"]["explanation"] if e["cluster"] == "onprem")
    assert not onprem_explained["chosen"] and any("TaintUntolerated" in r for r in onprem_explained["reasons"])
    assert [e["involvedObject"]["name"] for e in await events(objects, "ReplicasEvicted")] == ["train"]

    # The old Work stays, unchanged, while the new replicas start.
    works = await eventually(lambda: _works_if(objects, {"onprem": 4, "cloud": 4}), what="old and new Works")
    await report(objects, "cloud", ready=1)
    await poke(fleet)
    assert set(await works_by_cluster(objects)) == {"onprem", "cloud"}
    assert works["onprem"]["metadata"]["generation"] == (await works_by_cluster(objects))["onprem"]["metadata"]["generation"]
    # Only the placement counts: onprem's copy (still reporting 4 ready) is not added.
    assert await hub_ready_replicas(objects) == 1

    await report(objects, "cloud")
    await eventually(lambda: _works_if(objects, {"cloud": 4}), what="the onprem Work to go once cloud is Healthy")
    assert "gracefulEvictionTasks" not in (await binding_of(objects))["spec"]
    assert await hub_ready_replicas(objects) == 4
    assert len(await events(objects, "EvictionCompleted")) == 1


async def _works_if(objects: ObjectStore, expected: dict[str, int]) -> dict[str, dict[str, Any]] | None:
    works = await works_by_cluster(objects)
    return works if work_replicas(works) == expected else None


async def test_a_placement_tolerating_the_taint_for_ever_stays(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    await two_clusters_running_train(
        objects, fleet, placement=with_tolerations({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"})
    )
    await unreachable(objects, "onprem")
    clock.advance_to(100_000)
    await poke(fleet)
    assert await placed(objects) == {"onprem": 4}
    assert "gracefulEvictionTasks" not in (await binding_of(objects))["spec"]


@pytest.mark.parametrize(
    ("failover", "old_work_after_eviction"),
    [
        ({"cluster": {"purgeMode": "Directly"}}, False),
        ({"cluster": {"purgeMode": "Gracefully", "gracePeriodSeconds": 60}}, True),
        ({"cluster": {"purgeMode": "Never"}}, True),
    ],
)
async def test_purge_mode_decides_when_the_old_work_goes(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock, failover: dict[str, Any], old_work_after_eviction: bool
) -> None:
    await two_clusters_running_train(objects, fleet, failover=failover)
    await taint(objects, "onprem", ("maintenance", "NoExecute"))  # untolerated: evicts at once
    await poke(fleet)
    assert await placed(objects) == {"cloud": 4}
    assert ("onprem" in await works_by_cluster(objects)) is old_work_after_eviction

    # The new replicas never become Healthy: a Gracefully evicted copy goes when its grace
    # period (from the policy) ends; one that is never purged stays.
    await eventually(lambda: _works_has(objects, "cloud"), what="the cloud Work")
    await report(objects, "cloud", ready=0)
    clock.advance_to(55)
    await poke(fleet)
    assert ("onprem" in await works_by_cluster(objects)) is old_work_after_eviction
    clock.advance_to(61)
    await poke(fleet)
    expected = failover["cluster"]["purgeMode"] == "Never"
    assert ("onprem" in await works_by_cluster(objects)) is expected


async def _works_has(objects: ObjectStore, cluster: str) -> bool:
    return cluster in await works_by_cluster(objects)


async def test_an_evicted_cluster_takes_none_of_the_replicas_while_the_task_lasts(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    await two_clusters_running_train(objects, fleet)
    await taint(objects, "onprem", ("maintenance", "NoExecute"))
    await poke(fleet)
    assert await placed(objects) == {"cloud": 4}
    # The taint goes; onprem is Ready again, but while its eviction task lasts a scale-up
    # does not put replicas back there.
    await taint(objects, "onprem")
    hub = await objects.get(rt(objects, "apps/v1", "Deployment"), namespace="default", name="train")
    hub["spec"]["replicas"] = 6
    await objects.update(rt(objects, "apps/v1", "Deployment"), hub)
    await eventually(lambda: _placed_is(objects, {"cloud": 6}), what="the scale-up in the cloud only")
    binding = await binding_of(objects)
    onprem = next(e for e in binding["status"]["explanation"] if e["cluster"] == "onprem")
    assert any("graceful eviction" in r for r in onprem["reasons"])


async def _placed_is(objects: ObjectStore, expected: dict[str, int]) -> bool:
    return await placed(objects) == expected


async def test_replicas_with_nowhere_to_go_stay_until_capacity_appears(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    await put_cluster(objects, "onprem", node_shape(6, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=0), provider="aws")  # no GPUs
    await settled(fleet)
    await apply(objects, propagation_policy("gpu"))
    await apply(objects, deployment("train", replicas=4))
    await eventually(lambda: _placed_is(objects, {"onprem": 4}), what="train on onprem")
    await unreachable(objects, "onprem")
    clock.advance_to(301)
    await poke(fleet)
    assert await placed(objects) == {"onprem": 4}
    assert "gracefulEvictionTasks" not in (await binding_of(objects))["spec"]
    [waiting] = await events(objects, "EvictionWaiting")
    assert "onprem" in waiting["message"] and "cannot hold them" in waiting["message"]

    # The cloud reports GPUs: the due eviction goes ahead without another nudge.
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1},
                      report_time="2024-05-01T10:05:00Z")
    await eventually(lambda: _placed_is(objects, {"cloud": 4}), what="the eviction once the cloud has room")
    assert [t["fromCluster"] for t in (await binding_of(objects))["spec"]["gracefulEvictionTasks"]] == ["onprem"]


def pytorchjob(name: str, *, workers: int) -> dict[str, Any]:
    def role(replicas: int, gpus: int) -> dict[str, Any]:
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
        return {"replicas": replicas,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "train:1", "resources": resources}]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": role(1, 0), "Worker": role(workers, 2)}},
    }


async def test_a_gang_moves_whole(objects: ObjectStore, fleet: ControllerManager, clock: Clock) -> None:
    await put_cluster(objects, "big-a", node_shape(1, gpus=8))
    await put_cluster(objects, "big-b", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.0})
    await settled(fleet)
    await apply(objects, propagation_policy("gangs", kind="PyTorchJob", api_version="kubeflow.org/v1"))
    await apply(objects, pytorchjob("train", workers=3))
    await eventually(lambda: _placed_is_named(objects, "train-pytorchjob", {"big-a": 4}), what="the gang in big-a")
    await taint(objects, "big-a", ("maintenance", "NoExecute"))
    await poke(fleet, "train-pytorchjob")
    assert await placed(objects, "train-pytorchjob") == {"big-b": 4}
    [task] = (await binding_of(objects, "train-pytorchjob"))["spec"]["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["replicas"]) == ("big-a", 4)


async def _placed_is_named(objects: ObjectStore, name: str, expected: dict[str, int]) -> bool:
    return await placed(objects, name) == expected


async def test_application_unhealthy_for_its_toleration_moves_to_another_cluster(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    failover = {"application": {"decisionConditions": {"tolerationSeconds": 60}, "purgeMode": "Gracefully",
                                "gracePeriodSeconds": 120}}
    await two_clusters_running_train(objects, fleet, failover=failover, propagateDeps=True)
    clock.advance_to(10)
    await report(objects, "onprem", ready=1)  # Unhealthy from now on (hub clock: T0+10)
    await settled(fleet)
    clock.advance_to(65)
    await poke(fleet)
    assert await placed(objects) == {"onprem": 4}

    clock.advance_to(70)
    await poke(fleet)
    assert await placed(objects) == {"cloud": 4}
    binding = await binding_of(objects)
    [task] = binding["spec"]["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["reason"], task["purgeMode"], task["gracePeriodSeconds"]) == (
        "onprem", "ApplicationFailure", "Gracefully", 120,
    )
    onprem = next(e for e in binding["status"]["explanation"] if e["cluster"] == "onprem")
    assert any("Unhealthy in cluster onprem" in r for r in onprem["reasons"])
    [event] = await events(objects, "ReplicasEvicted")
    assert "ApplicationFailure" in event["message"] and event["type"] == "Warning"


async def test_an_application_healthy_again_in_time_stays(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    failover = {"application": {"decisionConditions": {"tolerationSeconds": 60}}}
    await two_clusters_running_train(objects, fleet, failover=failover, propagateDeps=True)
    await report(objects, "onprem", ready=1)
    await settled(fleet)
    clock.advance_to(30)
    await report(objects, "onprem")  # recovered
    await settled(fleet)
    clock.advance_to(1000)
    await poke(fleet)
    assert await placed(objects) == {"onprem": 4}


async def _works_are(objects: ObjectStore, binding: str, clusters: set[str]) -> bool:
    return set(await works_by_cluster(objects, binding)) == clusters


async def test_a_moved_trainjob_lets_its_old_work_go_once_its_runtimes_nodes_run_in_the_new_cluster(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    """The TrainJob sets no numNodes: its runtime's 2 nodes are the replicas the binding gives the
    new cluster, and the new Work carries them (read with the runtime, not as one node alone)."""
    await put_cluster(objects, "big-a", node_shape(1, gpus=8))
    await put_cluster(objects, "big-b", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.0})
    await settled(fleet)
    await apply(objects, trainer_runtime("ClusterTrainingRuntime", gpus=2, num_nodes=2))
    await apply(objects, propagation_policy("training", kind="TrainJob", api_version=TRAINER_API))
    await apply(objects, trainjob("llama", "ClusterTrainingRuntime"))
    await eventually(lambda: _placed_is_named(objects, "llama-trainjob", {"big-a": 2}), what="the TrainJob in big-a")
    await taint(objects, "big-a", ("maintenance", "NoExecute"))
    await poke(fleet, "llama-trainjob")
    assert await placed(objects, "llama-trainjob") == {"big-b": 2}
    await eventually(lambda: _works_are(objects, "llama-trainjob", {"big-a", "big-b"}), what="the old and new Works")

    work = (await works_by_cluster(objects, "llama-trainjob"))["big-b"]
    entry = {
        "identifier": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob", "namespace": "default",
                       "name": "llama", "ordinal": 0},
        "status": {"conditions": [{"type": "Created", "status": "True", "reason": "JobsCreationSucceeded",
                                   "message": "Succeeded to create Jobs", "lastTransitionTime": format_time(T0)}],
                   "jobsStatus": [{"name": "node", "ready": 1, "active": 1}]},
        "health": "Healthy",
    }
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
               "lastTransitionTime": format_time(T0), "observedGeneration": work["metadata"]["generation"]}
    await objects.update_status(rt(objects, WORK_API, "Work"),
                                {**work, "status": {"conditions": [applied], "manifestStatuses": [entry]}})
    await eventually(lambda: _works_are(objects, "llama-trainjob", {"big-b"}), what="big-a's Work to go once big-b runs")
    assert "gracefulEvictionTasks" not in (await binding_of(objects, "llama-trainjob"))["spec"]
