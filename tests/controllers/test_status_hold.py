"""The status controller's hold of waiting states follows how late members report (issue 19):
a hub whose members lately took longer than the base hold to report holds a binding's waiting
state that long too, so the ready state is the one status write; a member that stays silent is
still shown waiting once the (capped) hold is over, a hold that runs out lengthens the next
ones, and a held binding keeps the controllers from counting as idle until then."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import MAX_WAITING_HOLD_SECONDS, WAITING_HOLD_SECONDS
from controlplane.controllers.manager import IDLE_HORIZON, ControllerManager
from controlplane.controllers.status import WORK_NOT_APPLIED, WaitingHold
from controlplane.objectclient import WatchEventType

from .conftest import FAST
from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster
from .test_federation_loop import apply, report_work_status, works_by_cluster

pytestmark = pytest.mark.waiting


def test_the_hold_is_the_base_until_waits_take_longer() -> None:
    hold = WaitingHold(base=1.0, cap=5.0)
    assert hold.seconds == 1.0
    for _ in range(20):
        hold.ended(0.3)
    assert hold.seconds == 1.0  # quick members: the base hold


def test_the_hold_follows_the_upper_decile_of_recent_waits_with_a_margin() -> None:
    hold = WaitingHold(base=1.0, cap=5.0)
    for waited in [2.0] * 18 + [3.0] * 2:
        hold.ended(waited)
    # The upper decile of 18 waits of 2 s and 2 of 3 s (inclusive method) is 2.1 s; a fifth more.
    assert hold.seconds == pytest.approx(2.1 * WaitingHold.MARGIN)


def test_the_hold_is_capped_and_forgets_old_waits() -> None:
    hold = WaitingHold(base=1.0, cap=5.0)
    for _ in range(10):
        hold.ended(60.0)  # a member that came back after a minute
    assert hold.seconds == 5.0
    for _ in range(WaitingHold.WINDOW):
        hold.ended(0.1)
    assert hold.seconds == 1.0  # the long waits left the window


def test_a_hold_that_runs_out_counts_as_a_wait_of_twice_its_length() -> None:
    hold = WaitingHold(base=1.0, cap=10.0)
    for _ in range(4):
        hold.ran_out(1.0)  # four bindings still waiting when their 1 s hold ran out
    assert hold.seconds == pytest.approx(2.0 * WaitingHold.MARGIN)
    for _ in range(4):
        hold.ran_out(2.4)
    assert hold.seconds == pytest.approx(4.8 * WaitingHold.MARGIN)  # a growing backlog: it doubles


def test_a_cap_below_the_base_is_the_base() -> None:
    assert WaitingHold(base=2.0, cap=1.0).cap == 2.0


async def test_the_hold_and_its_cap_are_the_controller_settings(objects: ObjectStore) -> None:
    async with ControllerManager(objects) as running:
        assert running.status is not None
        assert (running.status.hold.base, running.status.hold.cap) == (WAITING_HOLD_SECONDS, MAX_WAITING_HOLD_SECONDS)
    settings = replace(FAST, waiting_hold_seconds=0.3, max_waiting_hold_seconds=2.0)
    async with ControllerManager(objects, settings=settings) as running:
        assert running.status is not None
        assert (running.status.hold.base, running.status.hold.cap) == (0.3, 2.0)


def record_binding_statuses(manager: ControllerManager) -> list[dict[str, Any]]:
    """Every status the hub's binding informer sees, in order."""
    seen: list[dict[str, Any]] = []

    async def handler(event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED and obj.get("status"):
            seen.append(obj["status"])

    assert manager.context is not None
    manager.context.bindings.add_handler(handler)
    return seen


def shows_waiting(status: dict[str, Any]) -> bool:
    return any(item.get("appliedMessage") == WORK_NOT_APPLIED for item in status.get("aggregatedStatus") or ())


async def one_work(objects: ObjectStore) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        works = await works_by_cluster(objects)
        return works.get("onprem")

    return await eventually(probe, what="the Work")


async def place_one(objects: ObjectStore) -> dict[str, Any]:
    await put_cluster(objects, "onprem", node_shape(4, gpus=1))
    await apply(objects, propagation_policy("gpu-tiered"))
    await apply(objects, deployment("train", replicas=1))
    return await one_work(objects)


def install_hold(manager: ControllerManager, *, waits: float | None = None, cap: float = 3.0) -> WaitingHold:
    """A hold of 0.2 s to ``cap`` in the manager's status controller, taught ten ``waits`` if given."""
    assert manager.status is not None
    hold = manager.status.hold = WaitingHold(base=0.2, cap=cap)
    for _ in range(10 if waits is not None else 0):
        hold.ended(waits or 0.0)
    return hold


async def first_waiting(statuses: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((s for s in statuses if shows_waiting(s)), None)


async def test_a_hold_that_learned_slow_members_writes_only_the_ready_state(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    # The learned hold (10 s) leaves a stall of the loaded machine 8 s of margin: the ready report
    # ends it, so the test does not wait for it.
    hold = install_hold(manager, waits=8.5, cap=10.0)
    assert hold.seconds == pytest.approx(10.0)
    statuses = record_binding_statuses(manager)
    work = await place_one(objects)
    await asyncio.sleep(1.3)  # later than any base hold, well within the learned one
    await report_work_status(objects, work, ready=1)

    async def ready() -> dict[str, Any] | None:
        return statuses[-1] if statuses and not shows_waiting(statuses[-1]) and any(
            item.get("health") == "Healthy" for item in statuses[-1].get("aggregatedStatus") or ()
        ) else None

    await eventually(ready, what="the ready state")
    assert not [s for s in statuses if shows_waiting(s)], "the waiting state was written although the hold covered it"


async def test_with_the_base_hold_a_late_report_follows_a_written_waiting_state(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """The control: the same report, later than an untaught hold, finds the waiting state written."""
    hold = install_hold(manager)
    statuses = record_binding_statuses(manager)
    work = await place_one(objects)
    await eventually(lambda: first_waiting(statuses), what="the waiting state written after the base hold")
    # The hold that ran out is a wait of at least its length: the next hold is longer.
    assert hold.seconds >= 2 * 0.2
    await report_work_status(objects, work, ready=1)
    await eventually(lambda: _latest_not_waiting(statuses), what="the ready state")


async def _latest_not_waiting(statuses: list[dict[str, Any]]) -> dict[str, Any] | None:
    return statuses[-1] if statuses and not shows_waiting(statuses[-1]) else None


async def test_a_silent_member_is_shown_waiting_after_the_learned_hold_and_the_hub_is_busy_till_then(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    hold = install_hold(manager, waits=30.0)
    assert hold.seconds == 3.0 > IDLE_HORIZON
    statuses = record_binding_statuses(manager)
    started = time.monotonic()
    await place_one(objects)
    await asyncio.sleep(0.5)
    assert not manager.idle(), "a binding held for seconds more counts as work to do"
    await eventually(lambda: first_waiting(statuses), what="the waiting state once the hold is over")
    assert time.monotonic() - started >= 2.5  # not before the learned hold (less the Work's creation)
