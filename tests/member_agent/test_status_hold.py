"""The agent holds a Work status saying *applied, replicas starting* (issue 19): a rollout that
is ready within the hold costs the hub one status write; one that stays unhealthy is written
when the hold ends; an apply that failed is written at once.

The hold's decisions are checked on a fake clock; the agent's against a real hub (HTTPS,
embedded etcd) and an in-process member API, as in ``test_agent_integration``, reading the
Work's history from the hub's watch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from controlplane.apis.timestamps import format_time
from member_agent.agent import Agent
from member_agent.holding import StatusHold, starting
from tests.member_agent import test_agent_integration as integration
from tests.member_agent.test_agent_integration import (
    DEPLOYMENT,
    WORK_NS,
    Hub,
    Member,
    eventually,
    joining_agent_config,
    work_object,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]
#: The integration tests' real hub and in-process member.
hub = integration.hub
member = integration.member

WORK_API = ("work.gpufed.io/v1alpha1", "Work")


def status(*, applied: str = "True", health: str = "Unhealthy", **manifest: Any) -> dict[str, Any]:
    return {
        "conditions": [{"type": "Applied", "status": applied}],
        "manifestStatuses": [{"identifier": {"kind": "Deployment"}, "health": health, **manifest}],
    }


def test_only_applied_and_unhealthy_is_starting() -> None:
    assert starting(status())
    assert not starting(status(health="Healthy"))
    assert not starting(status(health="Unknown"))
    assert not starting(status(applied="False"))
    assert not starting(status(unschedulable={"pods": 1}))
    assert not starting(status(reclaimed={"pods": 1}))
    assert not starting({"conditions": [], "manifestStatuses": []})


def test_the_hold_runs_from_the_first_starting_status_and_ends_with_another() -> None:
    hold = StatusHold(window=1.0)
    assert hold.delay("w", status(), now=10.0) == 1.0
    assert hold.delay("w", status(), now=10.25) == 0.75  # still the first status' window
    assert hold.delay("w", status(), now=11.0) is None  # over: written as it is
    assert hold.delay("w", status(health="Healthy"), now=11.5) is None
    assert hold.delay("w", status(), now=20.0) == 1.0  # a new hold after another status
    hold.expire("w")  # its timer fired (perhaps a little early): written now
    assert hold.delay("w", status(), now=20.0) is None
    assert hold.delay("w", status(applied="False"), now=21.0) is None
    assert hold.delay("w", status(), now=22.0) == 1.0
    hold.forget("w")
    assert hold.delay("w", status(), now=30.0) == 1.0
    assert StatusHold(window=0).delay("w", status(), now=0.0) is None


def test_a_held_condition_keeps_the_time_it_was_first_seen() -> None:
    hold = StatusHold(window=1.0)
    applied = {"type": "Applied", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    first = hold.carry_transitions("w", {"conditions": [applied]})
    assert first["conditions"] == [applied]
    # Held; recomputed later from the stored status, which has no Applied yet: a new time.
    later = {**applied, "lastTransitionTime": "2026-01-01T00:00:02Z"}
    available = {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}
    carried = hold.carry_transitions("w", {"conditions": [later, available]})
    assert carried["conditions"] == [applied, available]
    hold.written("w")
    # After a write the stored status carries the times: nothing is remembered any more.
    again = hold.carry_transitions("w", {"conditions": [later]})
    assert again["conditions"] == [later]
    # A condition that changed status while held starts again from its new status' time.
    failed = {"type": "Applied", "status": "False", "lastTransitionTime": "2026-01-01T00:00:03Z"}
    hold.carry_transitions("v", {"conditions": [applied]})
    hold.carry_transitions("v", {"conditions": [failed]})
    assert hold.carry_transitions("v", {"conditions": [later]})["conditions"] == [later]
    hold.forget("v")


async def written_statuses(hub: Hub, created: dict[str, Any], *, until: Any) -> list[dict[str, Any]]:
    """The statuses the hub stored for the Work after its create, up to the first ``until`` accepts."""
    rt = hub.objects.registry.require(*WORK_API)
    stream = hub.objects.watch(rt, namespace=WORK_NS, resource_version=created["metadata"]["resourceVersion"])
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(30):
        async for event in stream:
            if event.object["metadata"]["name"] != created["metadata"]["name"] or not event.object.get("status"):
                continue
            seen.append(event.object["status"])
            if until(event.object["status"]):
                break
    await stream.aclose()  # type: ignore[attr-defined]
    return seen


def conditions(work_status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in work_status.get("conditions") or []}


async def test_a_rollout_ready_within_the_hold_is_one_status_write(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    cfg = (await joining_agent_config(hub, member, tmp_path / "agent")).model_copy(update={"status_hold": 3600.0})
    rt = hub.objects.registry.require(*WORK_API)
    async with Agent(cfg) as agent:
        created = await hub.objects.create(rt, work_object("infer", [DEPLOYMENT]))
        # The agent applied the Work and holds its "applied, replicas starting" status.
        await eventually(lambda: _async(f"{WORK_NS}/infer" in agent.held_works), what="the held status")
        await asyncio.sleep(1.1)  # the status written below is computed in a later second
        made_ready = format_time(agent.clock())
        live = await member.get("apps/v1", "Deployment", "infer", "ml")
        assert live is not None
        ready = {"observedGeneration": live["metadata"]["generation"], "replicas": 2, "updatedReplicas": 2,
                 "readyReplicas": 2, "availableReplicas": 2}
        await member.objects.update_status(member.rt("apps/v1", "Deployment"), {**live, "status": ready})
        seen = await written_statuses(hub, created, until=lambda s: conditions(s).get("Available") == "True")
        assert len(seen) == 1, [conditions(s) for s in seen]  # the starting status was never written
        assert conditions(seen[0]) == {"Applied": "True", "Available": "True"}
        # Applied when it was applied (and held), not when the ready status was computed.
        times = {c["type"]: c["lastTransitionTime"] for c in seen[0]["conditions"]}
        assert times["Applied"] < made_ready <= times["Available"], times
        assert not agent.held_works


async def test_a_rollout_that_stays_unhealthy_is_written_when_the_hold_ends(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    window = 0.5
    cfg = (await joining_agent_config(hub, member, tmp_path / "agent")).model_copy(update={"status_hold": window})
    rt = hub.objects.registry.require(*WORK_API)
    async with Agent(cfg) as agent:
        await eventually(lambda: _async(agent.works is not None and agent.works.synced.is_set()), what="the agent")
        loop = asyncio.get_running_loop()
        begun = loop.time()
        created = await hub.objects.create(rt, work_object("infer", [DEPLOYMENT]))
        # Nothing makes the Deployment ready (and statuses are resynced hourly here): only
        # the end of the hold writes the status.
        seen = await written_statuses(hub, created, until=lambda s: conditions(s).get("Applied") == "True")
        assert loop.time() - begun >= window  # not before the hold ended
        assert conditions(seen[-1]) == {"Applied": "True", "Available": "False"}
        assert seen[-1]["manifestStatuses"][0]["health"] == "Unhealthy"
        assert not agent.held_works


async def test_a_failed_apply_is_written_at_once(hub: Hub, member: Member, tmp_path: Path) -> None:
    cfg = (await joining_agent_config(hub, member, tmp_path / "agent")).model_copy(update={"status_hold": 3600.0})
    rt = hub.objects.registry.require(*WORK_API)
    unserved = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ml"}}
    async with Agent(cfg):
        created = await hub.objects.create(rt, work_object("widget", [unserved]))
        seen = await written_statuses(hub, created, until=lambda s: "Applied" in conditions(s))
        assert conditions(seen[-1])["Applied"] == "False"


async def _async(value: bool) -> bool:
    return value
