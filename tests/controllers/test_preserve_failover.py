"""A preserved workload's copy in a cluster that left the placement goes with its Work — even
when that cluster's agent was away while it happened (the failover case).

The hub clears the Work's ``preserveResourcesOnDeletion`` and deletes the Work only once the
agent has applied that generation (its ``Applied`` condition's ``observedGeneration``), the
Cluster is removed, or the cluster has been Ready for the graceful-eviction timeout since the
clearing. The rule is pure and table-driven here; the rest runs the controllers on an
in-process hub store, with a clock the test moves and Work status written as an agent would.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.timestamps import format_time
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.binding import (
    ANNOTATION_PRESERVE_CLEARED,
    RELEASE_RECHECK_SECONDS,
    ReleaseVerdict,
    release_step,
)
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import A100, TIERED, deployment, eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"
CLUSTER_API = "cluster.gpufed.io/v1alpha1"
UNREACHABLE = "cluster.gpufed.io/unreachable"
T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
TIMEOUT = 600
SETTINGS = replace(FAST, graceful_eviction_timeout_seconds=TIMEOUT)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# --- the rule (pure) ---------------------------------------------------------------------------


def released_work(*, generation: int = 2, applied: int | None = 1, cleared: float | None = 0,
                  preserve: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": "gpufed-es-a", "generation": generation}
    if cleared is not None:
        meta["annotations"] = {ANNOTATION_PRESERVE_CLEARED: format_time(at(cleared))}
    spec: dict[str, Any] = {"workload": {"manifests": []}}
    if preserve:
        spec["preserveResourcesOnDeletion"] = True
    work: dict[str, Any] = {"metadata": meta, "spec": spec}
    if applied is not None:
        work["status"] = {"conditions": [{"type": "Applied", "status": "True", "observedGeneration": applied}]}
    return work


def cluster(*, ready: str | None = "True", since: float = -1000, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "a"}
    if deleting:
        meta["deletionTimestamp"] = format_time(at(0))
    conditions = [] if ready is None else [
        {"type": "Ready", "status": ready, "lastTransitionTime": format_time(at(since))}
    ]
    return {"metadata": meta, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("work", "cluster_obj", "now", "expected", "again"),
    [
        pytest.param(released_work(preserve=True, cleared=None), cluster(), 0, ReleaseVerdict.CLEAR, None,
                     id="preserving: clear first"),
        pytest.param(released_work(cleared=None), cluster(), 0, ReleaseVerdict.DELETE, None,
                     id="never preserved: at once"),
        pytest.param(released_work(applied=1), cluster(), 10, ReleaseVerdict.WAIT, TIMEOUT - 10,
                     id="agent has not applied the cleared generation"),
        pytest.param(released_work(applied=None), cluster(), 10, ReleaseVerdict.WAIT, TIMEOUT - 10,
                     id="agent never reported"),
        pytest.param(released_work(applied=2), cluster(), 10, ReleaseVerdict.DELETE, None,
                     id="agent applied the cleared generation"),
        pytest.param(released_work(applied=3), cluster(ready="Unknown"), 10, ReleaseVerdict.DELETE, None,
                     id="applied a later one, whatever the cluster's state"),
        pytest.param(released_work(), cluster(ready="Unknown"), 10 * TIMEOUT, ReleaseVerdict.WAIT,
                     RELEASE_RECHECK_SECONDS, id="unreachable: waits past the timeout"),
        pytest.param(released_work(), cluster(ready=None), 10 * TIMEOUT, ReleaseVerdict.WAIT,
                     RELEASE_RECHECK_SECONDS, id="no Ready condition: waits"),
        pytest.param(released_work(), cluster(), TIMEOUT, ReleaseVerdict.DELETE, None,
                     id="Ready all along for the timeout"),
        pytest.param(released_work(), cluster(since=500), TIMEOUT + 100, ReleaseVerdict.WAIT, 400,
                     id="Ready again only lately: counted from then"),
        pytest.param(released_work(), cluster(since=500), TIMEOUT + 500, ReleaseVerdict.DELETE, None,
                     id="Ready again for the timeout"),
        pytest.param(released_work(preserve=True), cluster(deleting=True), 0, ReleaseVerdict.DELETE, None,
                     id="cluster being deleted"),
        pytest.param(released_work(), None, 0, ReleaseVerdict.DELETE, None, id="cluster gone"),
    ],
)
def test_release_step(
    work: dict[str, Any], cluster_obj: dict[str, Any] | None, now: float, expected: ReleaseVerdict,
    again: float | None,
) -> None:
    step = release_step(work, cluster=cluster_obj, now=at(now), timeout_seconds=TIMEOUT)
    assert (step.verdict, step.again) == (expected, again), step.why


def test_an_unreadable_clearing_time_counts_from_readiness() -> None:
    work = released_work()
    work["metadata"]["annotations"][ANNOTATION_PRESERVE_CLEARED] = "yesterday"
    assert release_step(work, cluster=cluster(since=0), now=at(10), timeout_seconds=TIMEOUT).verdict is (
        ReleaseVerdict.WAIT
    )
    assert release_step(work, cluster=cluster(since=0), now=at(TIMEOUT), timeout_seconds=TIMEOUT).verdict is (
        ReleaseVerdict.DELETE
    )


# --- on the hub ----------------------------------------------------------------------------


class Clock:
    """The controllers' clock; tests move it forward."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance_to(self, seconds: float) -> None:
        self.now = at(seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def fleet(objects: ObjectStore, clock: Clock) -> AsyncIterator[ControllerManager]:
    async with ControllerManager(objects, settings=SETTINGS, clock=clock) as running:
        yield running


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


async def onprem_work(objects: ObjectStore) -> dict[str, Any] | None:
    try:
        return await objects.get(rt(objects, WORK_API, "Work"), namespace="gpufed-es-onprem",
                                 name="default-train-deployment")
    except errors.NotFound:
        return None


async def report_applied(objects: ObjectStore, work: dict[str, Any]) -> None:
    """What an agent writes once it has applied the Work's current generation."""
    status = {"conditions": [
        {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
         "lastTransitionTime": format_time(T0), "observedGeneration": work["metadata"]["generation"]},
    ]}
    await objects.update_status(rt(objects, WORK_API, "Work"), {**work, "status": status})


async def set_health(objects: ObjectStore, name: str, *, ready: str, since: datetime, taints: list[str]) -> None:
    """The cluster's taints and Ready condition, as the health monitor writes them."""
    cluster_rt = rt(objects, CLUSTER_API, "Cluster")
    current = await objects.get(cluster_rt, name=name)
    updated = copy.deepcopy(current)
    updated["spec"]["taints"] = [{"key": key, "effect": effect, "timeAdded": format_time(T0)}
                                 for key in taints for effect in ("NoSchedule", "NoExecute")]
    current = await objects.update(cluster_rt, updated)
    status = copy.deepcopy(current["status"])
    status["conditions"] = [{"type": "Ready", "status": ready, "reason": "Test", "message": "set by the test",
                             "lastTransitionTime": format_time(since)}]
    await objects.update_status(cluster_rt, {**current, "status": status})


def binding_loop(manager: ControllerManager) -> Any:
    """The binding controller's loop, to reconcile now (its timed requeue runs on the real clock)."""
    return next(loop for loop in manager._loops if loop.name == "binding")


async def poke(manager: ControllerManager) -> None:
    assert manager.scheduler is not None and manager.evictions is not None
    await manager.scheduler.loop.add(("default", "train-deployment"))
    await manager.evictions.loop.add(("default", "train-deployment"))
    await binding_loop(manager).add(("default", "train-deployment"))
    await settled(manager)


async def _gone(objects: ObjectStore) -> bool:
    return await onprem_work(objects) is None


@pytest.mark.parametrize("ending", ["agent-applies", "connected-past-timeout", "cluster-removed"])
async def test_a_failed_over_preserved_copy_keeps_its_work_until_the_agent_has_seen_the_flag_cleared(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock, ending: str
) -> None:
    await put_cluster(objects, "onprem", node_shape(6, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1})
    await settled(fleet)
    policy = propagation_policy("gpu", placement=TIERED, preserveResourcesOnDeletion=True,
                                failover={"cluster": {"purgeMode": "Directly"}})
    await objects.create(rt(objects, policy["apiVersion"], policy["kind"]), policy)
    await objects.create(rt(objects, "apps/v1", "Deployment"), deployment("train", replicas=4))
    work = await eventually(lambda: onprem_work(objects), what="train's Work in onprem")
    assert work["spec"]["preserveResourcesOnDeletion"] is True
    await report_applied(objects, work)

    # onprem stops answering; once the default toleration (300 s) runs out its replicas move.
    await set_health(objects, "onprem", ready="Unknown", since=T0, taints=[UNREACHABLE])
    clock.advance_to(300)
    await poke(fleet)

    # Its Work stays, with the flag cleared, for the agent to see when it is back.
    released = await onprem_work(objects)
    assert released is not None, "deleted while its agent cannot know the flag was cleared"
    assert "preserveResourcesOnDeletion" not in released["spec"]
    assert released["metadata"]["annotations"][ANNOTATION_PRESERVE_CLEARED] == format_time(at(300))
    assert released["metadata"]["generation"] > work["metadata"]["generation"]
    binding = await objects.get(rt(objects, WORK_API, "ResourceBinding"), namespace="default",
                                name="train-deployment")
    assert [t["name"] for t in binding["spec"]["clusters"]] == ["cloud"]

    # However long the cluster stays away.
    clock.advance_to(300 + 10 * TIMEOUT)
    await poke(fleet)
    assert await onprem_work(objects) is not None

    if ending == "cluster-removed":
        await objects.delete(rt(objects, CLUSTER_API, "Cluster"), name="onprem")
        await eventually(lambda: _gone(objects), what="the Work to go with its cluster")
        return

    # The agent is back: Ready again. Its watch may not have caught up yet, so the Work stays.
    back = 300 + 10 * TIMEOUT
    await set_health(objects, "onprem", ready="True", since=at(back), taints=[])
    await poke(fleet)
    assert await onprem_work(objects) is not None

    if ending == "agent-applies":
        await report_applied(objects, released)
    else:
        clock.advance_to(back + TIMEOUT - 5)  # (the real-time requeue must stay beyond the settle horizon)
        await poke(fleet)
        assert await onprem_work(objects) is not None
        clock.advance_to(back + TIMEOUT)
        await poke(fleet)
    await eventually(lambda: _gone(objects), what="the released Work deleted")
    await settled(fleet)
    cloud = await objects.get(rt(objects, WORK_API, "Work"), namespace="gpufed-es-cloud",
                              name="default-train-deployment")
    assert cloud["spec"]["preserveResourcesOnDeletion"] is True


async def test_a_released_work_whose_cluster_is_chosen_again_is_preserving_again(
    objects: ObjectStore, fleet: ControllerManager, clock: Clock
) -> None:
    await put_cluster(objects, "onprem", node_shape(6, gpus=1))
    await put_cluster(objects, "cloud", node_shape(2, gpus=8), provider="aws", pricing={A100: 4.1})
    await settled(fleet)
    two = {"clusterAffinity": {"clusterNames": ["onprem", "cloud"]}}
    policy = propagation_policy("gpu", placement=two, preserveResourcesOnDeletion=True)
    policy_rt = rt(objects, policy["apiVersion"], policy["kind"])
    await objects.create(policy_rt, policy)
    await objects.create(rt(objects, "apps/v1", "Deployment"), deployment("train", replicas=1))
    await report_applied(objects, await eventually(lambda: onprem_work(objects), what="the onprem Work"))

    current = await objects.get(policy_rt, namespace="default", name="gpu")
    current["spec"]["placement"] = {"clusterAffinity": {"clusterNames": ["cloud"]}}
    current = await objects.update(policy_rt, current)

    async def cleared() -> dict[str, Any] | None:
        work = await onprem_work(objects)
        return work if work is not None and "preserveResourcesOnDeletion" not in work["spec"] else None

    await eventually(cleared, what="the onprem Work released")
    current["spec"]["placement"] = two
    await objects.update(policy_rt, current)

    async def preserving_again() -> dict[str, Any] | None:
        work = await onprem_work(objects)
        return work if work is not None and work["spec"].get("preserveResourcesOnDeletion") else None

    work = await eventually(preserving_again, what="the onprem Work preserving again")
    assert ANNOTATION_PRESERVE_CLEARED not in (work["metadata"].get("annotations") or {})
    await settled(fleet)
    assert await onprem_work(objects) is not None
