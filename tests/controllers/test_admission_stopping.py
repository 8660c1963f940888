"""Kueue's stop policies at the hub: a ClusterQueue or LocalQueue set to ``Hold`` admits nothing
new and keeps what runs; ``HoldAndDrain`` also evicts what it admitted — Evicted with Kueue's
reason, its Job suspended, its binding and Works gone — and ``None`` again admits the drained
ones anew (``Requeued=True``). The queues' ``Active`` conditions say which is which."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, queued_workload, queued_workload_name, settled
from .test_admission import KUEUE, condition, create, get
from .test_admission_preemption import WORK, admitted, job, team_a_borrows, works_of

pytestmark = pytest.mark.waiting


async def stop(objects: ObjectStore, kind: str, name: str, policy: str) -> None:
    """``kubectl patch <kind> <name> --type merge -p '{"spec":{"stopPolicy":"<policy>"}}'``."""
    namespace = "default" if kind == "LocalQueue" else None
    obj = await get(objects, KUEUE, kind, name, namespace)
    assert obj is not None
    obj["spec"]["stopPolicy"] = policy
    await objects.update(objects.registry.require(KUEUE, kind), obj)


async def active(objects: ObjectStore, kind: str, name: str) -> tuple[str, str, str]:
    obj = await get(objects, KUEUE, kind, name, "default" if kind == "LocalQueue" else None)
    cond = condition(obj, "Active")
    return cond.get("status", ""), cond.get("reason", ""), cond.get("message", "")


def waits(objects: ObjectStore, name: str, message: str) -> Any:
    async def probe() -> dict[str, Any] | None:
        reserved = condition(await queued_workload(objects, "Job", name), "QuotaReserved")
        return reserved if reserved.get("status") == "False" and reserved.get("message") == message else None
    return probe


async def all_drained(objects: ObjectStore, names: tuple[str, ...], reason: str, message: str) -> None:
    """Each of the Jobs ``names`` evicted for ``reason``: suspended, its binding and Works gone,
    its Workload Evicted and held out of line (``Requeued=False``) with ``reason``."""
    for name in names:
        async def probe(name: str = name) -> dict[str, Any] | None:
            wl = await queued_workload(objects, "Job", name)
            obj = await get(objects, "batch/v1", "Job", name)
            stopped = obj is not None and obj["spec"].get("suspend") is True
            gone = await get(objects, WORK, "ResourceBinding", f"{name}-job") is None and not await works_of(objects, name)
            return wl if condition(wl, "Evicted").get("status") == "True" and stopped and gone else None

        wl = await eventually(probe, what=f"{name} drained")
        evicted, requeued = condition(wl, "Evicted"), condition(wl, "Requeued")
        assert (evicted["reason"], evicted["message"]) == (reason, message)
        assert (requeued["status"], requeued["reason"]) == ("False", reason)
        assert condition(wl, "Admitted")["status"] == "False" and "admission" not in wl["status"]


async def test_hold_and_drain_on_a_cluster_queue_evicts_what_it_admitted_until_it_runs_again(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team_a_borrows(objects, manager, {})  # a1, a2 and a3 admitted by team-a (a3 borrowing)
    assert await active(objects, "ClusterQueue", "team-a") == ("True", "Ready", "Can admit new workloads")
    assert await active(objects, "LocalQueue", "team-a") == ("True", "Active", "Can submit new workloads to localQueue")
    await eventually(lambda: works_of(objects, "a1"), what="a1's Work")

    await stop(objects, "ClusterQueue", "team-a", "HoldAndDrain")
    await all_drained(objects, ("a1", "a2", "a3"), "ClusterQueueStopped", "The ClusterQueue is stopped")
    await create(objects, job("a4", "team-a"))
    await eventually(waits(objects, "a4", "ClusterQueue team-a is inactive: stopPolicy is HoldAndDrain"), what="a4 held")
    await settled(manager)
    assert await active(objects, "ClusterQueue", "team-a") == ("False", "Stopped", "Can't admit new workloads: is stopped.")
    assert await active(objects, "LocalQueue", "team-a") == (
        "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    told = sorted(e["involvedObject"]["name"] for e in events if e["reason"] == "EvictedDueToClusterQueueStopped")
    assert told == sorted([await queued_workload_name(objects, "Job", n) for n in ("a1", "a2", "a3")])
    assert [await admitted(objects, n) for n in ("a1", "a2", "a3", "a4")] == [None] * 4

    await stop(objects, "ClusterQueue", "team-a", "None")
    for name in ("a1", "a2"):
        assert await eventually(lambda n=name: admitted(objects, n), what=f"{name} admitted again") == "team-a"  # type: ignore[misc]
        requeued = condition(await queued_workload(objects, "Job", name), "Requeued")
        assert (requeued["status"], requeued["reason"], requeued["message"]) == (
            "True", "ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped")
    await eventually(lambda: works_of(objects, "a1"), what="a1 propagated again")
    await settled(manager)
    assert await active(objects, "ClusterQueue", "team-a") == ("True", "Ready", "Can admit new workloads")


async def test_hold_on_a_cluster_queue_keeps_what_runs(objects: ObjectStore, manager: ControllerManager) -> None:
    await team_a_borrows(objects, manager, {})
    await stop(objects, "ClusterQueue", "team-b", "Hold")
    await stop(objects, "ClusterQueue", "team-a", "Hold")
    await create(objects, job("a4", "team-a"))
    await eventually(waits(objects, "a4", "ClusterQueue team-a is inactive: stopPolicy is Hold"), what="a4 held")
    await settled(manager)
    for name in ("a1", "a2", "a3"):
        assert await admitted(objects, name) == "team-a"
        assert condition(await queued_workload(objects, "Job", name), "Evicted") == {}
    assert await works_of(objects, "a1")
    await stop(objects, "ClusterQueue", "team-a", "None")
    await stop(objects, "ClusterQueue", "team-b", "None")
    assert await eventually(lambda: admitted(objects, "a4"), what="a4 admitted once team-a runs") == "team-a"


async def test_a_stopped_local_queue_holds_its_workloads_and_drains_them(objects: ObjectStore, manager: ControllerManager) -> None:
    await team_a_borrows(objects, manager, {})
    await stop(objects, "LocalQueue", "team-a", "Hold")
    await create(objects, job("a4", "team-a"))
    await eventually(waits(objects, "a4", "LocalQueue team-a is inactive"), what="a4 held by its LocalQueue")
    await settled(manager)
    assert await active(objects, "LocalQueue", "team-a") == ("False", "Stopped", "LocalQueue is stopped")
    assert await active(objects, "ClusterQueue", "team-a") == ("True", "Ready", "Can admit new workloads")
    lq = await get(objects, KUEUE, "LocalQueue", "team-a")
    assert lq is not None and (lq["status"]["pendingWorkloads"], lq["status"]["admittedWorkloads"]) == (0, 3)
    assert [await admitted(objects, n) for n in ("a1", "a2", "a3")] == ["team-a"] * 3  # Hold keeps them

    await stop(objects, "LocalQueue", "team-a", "HoldAndDrain")
    await all_drained(objects, ("a1", "a2", "a3"), "LocalQueueStopped", "The LocalQueue is stopped")
    await settled(manager)
    assert await admitted(objects, "a4") is None

    await stop(objects, "LocalQueue", "team-a", "None")
    for name in ("a1", "a2", "a3", "a4"):  # 16 GPUs: team-a's 8 and idle team-b's 8
        assert await eventually(lambda n=name: admitted(objects, n), what=f"{name} admitted") == "team-a"  # type: ignore[misc]
    requeued = condition(await queued_workload(objects, "Job", "a1"), "Requeued")
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "True", "LocalQueueRestarted", "The LocalQueue was restarted after being stopped")
    await settled(manager)
    assert await active(objects, "LocalQueue", "team-a") == ("True", "Active", "Can submit new workloads to localQueue")
