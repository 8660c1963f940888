"""Fleet disruption: the hub suspects itself when the whole fleet goes unhealthy at once.

The decision rules (kube's zone states, applied to the fleet) are table-driven; the health
monitor is then run against an in-memory ObjectStore with a fake clock and several clusters
written as their agents write them: all of them falling silent together must not taint any
for eviction, and evictions must resume when reports come back.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from controlplane.apis import constants as c
from controlplane.apis.cluster_v1alpha1 import ClusterReadyReason
from controlplane.apis.timestamps import format_time
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.disruption import (
    EvictionGate,
    EvictionTaints,
    FleetState,
    describe_transition,
    eviction_gate,
    fleet_state,
)
from controlplane.controllers.health import ClusterHealthMonitor, Health, desired_taints
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from tests.controllers.test_health import (
    NOT_READY,
    UNREACHABLE,
    Agent,
    FakeClock,
    at,
    health_taints,
    look,
    taint,
    until,
)

UNREACHABLE_NO_SCHEDULE = [(c.TAINT_UNREACHABLE, "NoSchedule")]

# --- pure rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "unhealthy", "threshold", "state"),
    [
        (3, 0, 0.55, FleetState.NORMAL),
        (0, 0, 0.55, FleetState.NORMAL),  # an empty fleet (or one still starting)
        (0, 1, 0.55, FleetState.FULL_DISRUPTION),  # a fleet of one that went silent
        (0, 3, 0.55, FleetState.FULL_DISRUPTION),
        (1, 1, 0.55, FleetState.NORMAL),  # one of two down: a real failure, fail over
        (1, 2, 0.55, FleetState.NORMAL),  # partial needs more than 2 unhealthy clusters
        (1, 3, 0.55, FleetState.PARTIAL_DISRUPTION),
        (2, 3, 0.55, FleetState.PARTIAL_DISRUPTION),  # 0.6 >= 0.55
        (3, 3, 0.55, FleetState.NORMAL),  # 0.5 < 0.55
        (2, 3, 0.8, FleetState.NORMAL),  # a higher threshold tolerates more
        (97, 3, 0.01, FleetState.PARTIAL_DISRUPTION),
    ],
)
def test_fleet_state(ready: int, unhealthy: int, threshold: float, state: FleetState) -> None:
    assert fleet_state(ready=ready, unhealthy=unhealthy, unhealthy_threshold=threshold) is state


@pytest.mark.parametrize(
    ("state", "fleet_size", "last_added", "gate"),
    [
        (FleetState.NORMAL, 3, None, EvictionGate(EvictionTaints.APPLY)),
        (FleetState.FULL_DISRUPTION, 3, None, EvictionGate(EvictionTaints.REMOVE)),
        (FleetState.FULL_DISRUPTION, 200, None, EvictionGate(EvictionTaints.REMOVE)),
        # A small fleet in partial disruption stops evicting (kube: zone size <= 50 -> rate 0).
        (FleetState.PARTIAL_DISRUPTION, 10, None, EvictionGate(EvictionTaints.HOLD)),
        (FleetState.PARTIAL_DISRUPTION, 50, at(0), EvictionGate(EvictionTaints.HOLD)),
        # A large one slows down to one new taint per 100 s (kube's secondary rate, 0.01/s).
        (FleetState.PARTIAL_DISRUPTION, 51, None, EvictionGate(EvictionTaints.APPLY)),
        (FleetState.PARTIAL_DISRUPTION, 51, at(50), EvictionGate(EvictionTaints.HOLD, next_allowed_at=at(150))),
        (FleetState.PARTIAL_DISRUPTION, 51, at(0), EvictionGate(EvictionTaints.APPLY)),
    ],
)
def test_eviction_gate(state: FleetState, fleet_size: int, last_added: datetime | None, gate: EvictionGate) -> None:
    assert eviction_gate(state, fleet_size=fleet_size, last_added=last_added, now=at(100)) == gate


SPOT = taint("gpufed.io/spot", "PreferNoSchedule", value="true")


@pytest.mark.parametrize(
    ("current", "health", "eviction", "expected"),
    [
        # Full disruption: the NoSchedule half is set, the NoExecute half is not (or goes).
        ([SPOT], Health.UNREACHABLE, EvictionTaints.REMOVE, [SPOT, taint(c.TAINT_UNREACHABLE, "NoSchedule", 60)]),
        (
            [taint(k, e, 5) for k, e in UNREACHABLE],
            Health.UNREACHABLE,
            EvictionTaints.REMOVE,
            [taint(c.TAINT_UNREACHABLE, "NoSchedule", 5)],
        ),
        # Held: a NoExecute taint already set stays (its timeAdded too), none is added.
        ([], Health.NOT_READY, EvictionTaints.HOLD, [taint(c.TAINT_NOT_READY, "NoSchedule", 60)]),
        (
            [taint(k, e, 5) for k, e in UNREACHABLE],
            Health.UNREACHABLE,
            EvictionTaints.HOLD,
            [taint(k, e, 5) for k, e in UNREACHABLE],
        ),
        # Recovery removes the health taints whatever the fleet's state.
        ([taint(k, e, 5) for k, e in NOT_READY], Health.READY, EvictionTaints.HOLD, []),
        ([taint(k, e, 5) for k, e in NOT_READY], Health.READY, EvictionTaints.REMOVE, []),
    ],
)
def test_desired_taints_follow_the_eviction_gate(
    current: list[dict[str, Any]], health: Health, eviction: EvictionTaints, expected: list[dict[str, Any]]
) -> None:
    assert desired_taints(current, health=health, cordoned=False, now=at(60), eviction=eviction) == expected


def test_the_transition_messages_say_what_the_hub_does() -> None:
    full = describe_transition(FleetState.NORMAL, FleetState.FULL_DISRUPTION, ready=0, unhealthy=3)
    assert full.startswith("all 3 clusters stopped reporting")
    assert "suspecting the hub's own connectivity, not evicting" in full
    partial = describe_transition(FleetState.NORMAL, FleetState.PARTIAL_DISRUPTION, ready=1, unhealthy=3)
    assert "3 of 4 clusters are not ready" in partial
    back = describe_transition(FleetState.FULL_DISRUPTION, FleetState.NORMAL, ready=1, unhealthy=2)
    assert "evictions resume" in back


# --- the monitor ---------------------------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def hub_objects(clock: FakeClock) -> AsyncIterator[ObjectStore]:
    async with MemoryStore() as store:
        objects = ObjectStore(store, hub_registry(), clock=clock)
        await objects.bootstrap()
        namespace_rt = objects.registry.require("v1", "Namespace")
        await objects.create(namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.LEASE_NAMESPACE}})
        yield objects


class Recorder:
    """Collects the monitor's fleet-state reports (what the hub's metrics are fed)."""

    def __init__(self) -> None:
        self.seen: list[tuple[FleetState, int, int]] = []

    def __call__(self, state: FleetState, ready: int, unhealthy: int) -> None:
        self.seen.append((state, ready, unhealthy))

    @property
    def last(self) -> tuple[FleetState, int, int]:
        return self.seen[-1]


async def _seen_renewal(monitor: ClusterHealthMonitor, agent: Agent) -> bool:
    """Whether the monitor's cache holds the agent's Lease renewed at the current fake time."""
    lease = monitor.leases.get(c.LEASE_NAMESPACE, agent.name) or {}
    return bool(lease.get("spec", {}).get("renewTime", "").startswith(format_time(agent.clock.now)[:19]))


async def _fleet(objects: ObjectStore, clock: FakeClock, names: list[str]) -> list[Agent]:
    agents = [Agent(objects, clock, name) for name in names]
    for agent in agents:
        await agent.register()
        await agent.renew()
        await agent.report("True")
    return agents


async def test_a_fleet_that_falls_silent_at_once_is_not_tainted_for_eviction(
    hub_objects: ObjectStore, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    agents = await _fleet(hub_objects, clock, ["gpu-a", "gpu-b", "gpu-c"])
    recorder = Recorder()
    async with ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock, on_fleet_state=recorder) as monitor:
        for agent in agents:
            await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[])

        # The agents wrote Ready themselves: what the monitor made of all three is its report.
        async def all_ready() -> bool:
            return bool(recorder.seen) and recorder.last == (FleetState.NORMAL, 3, 0)

        await until(all_ready, "the fleet judged Normal with 3 clusters ready")

        # The agents' heartbeats stop reaching the hub, all at the same time.
        clock.set(41)
        with caplog.at_level(logging.WARNING, logger="controlplane.controllers.health"):
            for agent in agents:
                await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE_NO_SCHEDULE)
        assert monitor.fleet_state is FleetState.FULL_DISRUPTION
        assert recorder.last == (FleetState.FULL_DISRUPTION, 0, 3)
        assert any(
            "all 3 clusters stopped reporting" in r.getMessage() and "not evicting" in r.getMessage()
            for r in caplog.records
        ), [r.getMessage() for r in caplog.records]

        # Reports come back from one cluster: evictions resume for the others, counted from now.
        clock.set(60)
        await agents[0].renew()
        await agents[0].report("True")
        await look(monitor, agents[0], ready=("True", "MemberHealthy"), taints=[])
        for agent in agents[1:]:
            await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE)
            noexecute = next(t for t in (await agent.cluster())["spec"]["taints"] if t["effect"] == "NoExecute")
            assert noexecute["timeAdded"] == format_time(at(60))
        assert monitor.fleet_state is FleetState.NORMAL
        assert recorder.last == (FleetState.NORMAL, 1, 2)


async def test_the_first_cluster_to_go_silent_loses_its_eviction_taint_when_the_rest_follow(
    hub_objects: ObjectStore, clock: FakeClock
) -> None:
    """Heartbeats stop at once but graces run out a heartbeat apart: the first cluster is tainted
    as one failed cluster would be, and untainted as soon as the whole fleet is seen silent."""
    first, *rest = await _fleet(hub_objects, clock, ["gpu-a", "gpu-b"])
    clock.set(5)
    for agent in rest:
        await agent.renew()
    async with ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock) as monitor:
        clock.set(41)
        await look(monitor, first, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE)
        clock.set(46)
        for agent in (first, *rest):
            await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE_NO_SCHEDULE)
        assert health_taints(await first.cluster()) == UNREACHABLE_NO_SCHEDULE


async def test_a_partial_disruption_holds_new_eviction_taints(hub_objects: ObjectStore, clock: FakeClock) -> None:
    agents = await _fleet(hub_objects, clock, ["gpu-a", "gpu-b", "gpu-c", "gpu-d"])
    clock.set(20)
    for agent in agents[1:]:
        await agent.renew()
    async with ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock) as monitor:
        # One cluster fails alone: a real failure, tainted for eviction.
        clock.set(41)
        await look(monitor, agents[0], ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE)
        # Two more stop reporting (3 of 4 >= 0.55, more than 2): held, the first keeps its taint.
        await agents[3].renew()
        await agents[3].report("True")
        await until(lambda: _seen_renewal(monitor, agents[3]), "the monitor to see gpu-d's renewal")
        clock.set(61)
        for agent in agents[1:3]:
            await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE_NO_SCHEDULE)
        assert monitor.fleet_state is FleetState.PARTIAL_DISRUPTION
        await look(monitor, agents[0], ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE)
        await look(monitor, agents[3], ready=("True", "MemberHealthy"), taints=[])
