"""Kueue's ``DeletedWorkload``: a Workload that holds quota and no longer matches its job (the job's
pod sets changed: its parallelism, its pods' requests) is deleted, with the Event ``DeletedWorkload``
(``Deleted not matching Workload: <ns>/<name>``), and the job queues anew with another Workload; a
started job is stopped first (``No matching Workload; restoring pod templates according to
existent Workload``)."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, queued_workload, queued_workload_name, settled
from .test_admission import create, get
from .test_admission_checks import fleet_with_check, reserved_with_checks
from .test_admission_job_events import JOB, events_on, held_job, started_job, told


async def change(objects: ObjectStore, name: str, **spec: Any) -> None:
    current = await get(objects, *JOB, name)
    assert current is not None
    current["spec"].update(spec)
    await objects.update(objects.registry.require(*JOB), current)


def asking_for(objects: ObjectStore, name: str, count: int, *, not_uid: str) -> Any:
    async def probe() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", name)
        if wl is None or wl["metadata"]["uid"] == not_uid or wl["spec"]["podSets"][0]["count"] != count:
            return None
        return wl
    return probe


async def test_a_suspended_job_holding_quota_whose_parallelism_changes_gets_a_new_workload(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """Quota reserved, its admission check pending (the Job still suspended): Kueue does not update
    a Workload that holds quota, it deletes it."""
    await fleet_with_check(objects, manager)
    await create(objects, held_job("a1", "team-a"))
    old = await reserved_with_checks(objects)
    wl_name = await queued_workload_name(objects, "Job", "a1")
    await change(objects, "a1", parallelism=3)

    new = await eventually(asking_for(objects, "a1", 3, not_uid=old["metadata"]["uid"]), what="a1's new Workload for 3 pods")
    assert new["metadata"]["name"] == wl_name  # Kueue's name: the Job's kind, name and UID
    assert await eventually(told(objects, "Job", "a1", "DeletedWorkload", 1), what="DeletedWorkload") == [
        f"Deleted not matching Workload: default/{wl_name}"]
    assert await eventually(told(objects, "Job", "a1", "CreatedWorkload", 2), what="a1's Workload made again") == [
        f"Created Workload: default/{wl_name}"] * 2
    await settled(manager)
    assert await events_on(objects, "Job", "a1", "UpdatedWorkload") == []
    assert await events_on(objects, "Job", "a1", "Stopped") == []  # it never started
    assert (await get(objects, *JOB, "a1") or {})["spec"]["suspend"] is True


async def test_a_running_job_whose_parallelism_changes_is_stopped_and_queued_anew(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    wl_name = await started_job(objects, manager)
    old = await queued_workload(objects, "Job", "a1")
    assert old is not None
    await change(objects, "a1", parallelism=2)

    assert await eventually(told(objects, "Job", "a1", "Stopped", 1), what="a1 stopped") == [
        "No matching Workload; restoring pod templates according to existent Workload"]
    assert await eventually(told(objects, "Job", "a1", "DeletedWorkload", 1), what="DeletedWorkload") == [
        f"Deleted not matching Workload: default/{wl_name}"]
    await eventually(asking_for(objects, "a1", 2, not_uid=old["metadata"]["uid"]), what="a1's new Workload for 2 pods")
    assert await eventually(told(objects, "Job", "a1", "Started", 2), what="a1 admitted and started again") == [
        "Admitted by clusterQueue team-a"] * 2
    started = await get(objects, *JOB, "a1")
    assert started is not None and started["spec"]["suspend"] is False and started["spec"]["parallelism"] == 2
    await settled(manager)
    assert len(await events_on(objects, "Job", "a1", "DeletedWorkload")) == 1
