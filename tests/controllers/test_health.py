"""Cluster health: heartbeats -> Ready condition and health taints, with an injectable clock.

The pure rules are table-driven; the monitor runs against an in-memory ObjectStore whose
clock is the same fake clock, with Clusters and Leases written as an agent writes them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis import constants as c
from controlplane.apis.cluster_v1alpha1 import ClusterReadyReason
from controlplane.apis.timestamps import format_time
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.health import (
    ClusterHealthMonitor,
    Health,
    HeartbeatTracker,
    LoopStalls,
    assess_cluster,
    desired_taints,
    heartbeat_marker,
)
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

pytestmark = pytest.mark.waiting

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
GRACE = timedelta(seconds=40)
UNREACHABLE = [(c.TAINT_UNREACHABLE, "NoSchedule"), (c.TAINT_UNREACHABLE, "NoExecute")]
NOT_READY = [(c.TAINT_NOT_READY, "NoSchedule"), (c.TAINT_NOT_READY, "NoExecute")]
CORDONED = [(c.TAINT_CORDONED, "NoSchedule")]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def cluster_obj(*, ready: str | None = None, created: float = 0.0, report: float | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "reason": "AgentReport"}]
    if report is not None:
        status["lastReportTime"] = format_time(at(report))
    return {
        "metadata": {"name": "gpu-a", "creationTimestamp": format_time(at(created))},
        "spec": {"provider": "onprem"},
        "status": status,
    }


# --- pure rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "heartbeat", "now", "health", "reason", "stale_at"),
    [
        # Heartbeats within the grace period: the agent's condition decides.
        ("True", 0.0, 39.0, Health.READY, None, 40.0),
        ("False", 0.0, 39.0, Health.NOT_READY, None, 40.0),
        # Our own Unknown stands until the agent posts its status again.
        ("Unknown", 30.0, 39.0, Health.UNREACHABLE, None, 70.0),
        # Exactly at the grace period it is still fresh; past it, Unknown.
        ("True", 0.0, 40.0, Health.READY, None, 40.0),
        ("True", 0.0, 41.0, Health.UNREACHABLE, ClusterReadyReason.STATUS_UNKNOWN, None),
        ("False", 0.0, 100.0, Health.UNREACHABLE, ClusterReadyReason.STATUS_UNKNOWN, None),
        # Never reported: start-up grace from creationTimestamp (created at 10).
        (None, None, 45.0, Health.STARTING, None, 50.0),
        (None, None, 51.0, Health.UNREACHABLE, ClusterReadyReason.NEVER_UPDATED, None),
        # A heartbeat but no status yet: no verdict until the grace runs out.
        (None, 20.0, 45.0, Health.STARTING, None, 60.0),
    ],
)
def test_assess_cluster(
    ready: str | None,
    heartbeat: float | None,
    now: float,
    health: Health,
    reason: ClusterReadyReason | None,
    stale_at: float | None,
) -> None:
    cluster = cluster_obj(ready=ready, created=10.0)
    verdict = assess_cluster(
        cluster, last_heartbeat=None if heartbeat is None else at(heartbeat), now=at(now), grace=GRACE
    )
    assert verdict.health is health
    if reason is None:
        assert verdict.ready_condition is None
    else:
        assert verdict.ready_condition is not None
        assert verdict.ready_condition["status"] == "Unknown"
        assert verdict.ready_condition["reason"] == reason
    assert verdict.stale_at == (None if stale_at is None else at(stale_at))


def taint(key: str, effect: str, added: float | None = None, value: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    if added is not None:
        out["timeAdded"] = format_time(at(added))
    return out


SPOT = taint("gpufed.io/spot", "PreferNoSchedule", value="true")


@pytest.mark.parametrize(
    ("current", "health", "cordoned", "expected"),
    [
        ([], Health.READY, False, []),
        ([SPOT], Health.READY, False, [SPOT]),
        ([SPOT], Health.UNREACHABLE, False, [SPOT, *(taint(k, e, 60) for k, e in UNREACHABLE)]),
        # Kept taints keep their timeAdded (tolerationSeconds count from it).
        (
            [taint(c.TAINT_UNREACHABLE, "NoExecute", 5), SPOT],
            Health.UNREACHABLE,
            False,
            [taint(c.TAINT_UNREACHABLE, "NoExecute", 5), SPOT, taint(c.TAINT_UNREACHABLE, "NoSchedule", 60)],
        ),
        # Unreachable -> not ready swaps the taints.
        ([taint(k, e, 5) for k, e in UNREACHABLE], Health.NOT_READY, False, [taint(k, e, 60) for k, e in NOT_READY]),
        # Recovery removes every health taint, keeps the others.
        ([SPOT, *(taint(k, e, 5) for k, e in NOT_READY)], Health.READY, False, [SPOT]),
        # Starting: no verdict, no health taints.
        ([taint(k, e, 5) for k, e in UNREACHABLE], Health.STARTING, False, []),
        # Cordon taint follows spec.unschedulable; duplicates collapse.
        ([], Health.READY, True, [taint(c.TAINT_CORDONED, "NoSchedule", 60)]),
        ([taint(c.TAINT_CORDONED, "NoSchedule", 5)] * 2, Health.READY, True, [taint(c.TAINT_CORDONED, "NoSchedule", 5)]),
        ([taint(c.TAINT_CORDONED, "NoSchedule", 5)], Health.READY, False, []),
        # A managed key with an effect the monitor does not want goes.
        ([taint(c.TAINT_UNREACHABLE, "PreferNoSchedule")], Health.READY, False, []),
    ],
)
def test_desired_taints(
    current: list[dict[str, Any]], health: Health, cordoned: bool, expected: list[dict[str, Any]]
) -> None:
    assert desired_taints(current, health=health, cordoned=cordoned, now=at(60)) == expected


def test_heartbeat_tracker_dates_changes_by_the_hub_clock() -> None:
    tracker = HeartbeatTracker()
    # The agent's clock runs 100 s behind the hub's: its stamps look stale.
    first = heartbeat_marker(cluster_obj(), {"spec": {"renewTime": "2024-05-01T09:58:20.000000Z"}})
    assert tracker.observe("a", first, now=at(0)) == at(-100)
    second = heartbeat_marker(cluster_obj(), {"spec": {"renewTime": "2024-05-01T09:58:30.000000Z"}})
    assert tracker.observe("a", second, now=at(10)) == at(10)
    assert tracker.observe("a", second, now=at(30)) == at(10)
    # A clock running ahead cannot make a heartbeat newer than now.
    ahead = heartbeat_marker(cluster_obj(report=3600), None)
    assert tracker.observe("b", ahead, now=at(0)) == at(0)
    assert tracker.observe("c", (None, None), now=at(0)) is None


def test_loop_stalls_count_only_lateness_beyond_the_tolerance() -> None:
    stalls = LoopStalls(tick=1.0, tolerance=1.0)
    assert stalls.observe(100.0) == 0.0  # the first look: nothing to compare with
    assert stalls.observe(101.0) == 0.0
    assert stalls.observe(101.4) == 0.0  # an assessment between two ticks
    assert stalls.observe(103.3) == 0.0  # 0.9 s late: within the tolerance
    assert stalls.observe(109.3) == 5.0  # the loop was held for 5 s beyond its tick
    assert stalls.total == 5.0


def test_a_stall_postpones_every_heartbeat_but_never_past_now() -> None:
    tracker = HeartbeatTracker()
    marker = heartbeat_marker(cluster_obj(), {"spec": {"renewTime": "2024-05-01T09:59:50.000000Z"}})
    assert tracker.observe("a", marker, now=at(0)) == at(-10)
    other = heartbeat_marker(cluster_obj(), {"spec": {"renewTime": "2024-05-01T09:59:59.000000Z"}})
    assert tracker.observe("b", other, now=at(0)) == at(-1)
    tracker.postpone(30, now=at(35))
    assert tracker.observe("a", marker, now=at(35)) == at(20)
    assert tracker.observe("b", other, now=at(35)) == at(29)
    tracker.postpone(100, now=at(40))
    assert tracker.observe("a", marker, now=at(40)) == at(40)


# --- the monitor ---------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def set(self, seconds: float) -> None:
        self.now = at(seconds)


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


class Agent:
    """Writes a cluster's Lease and status as the member agent does."""

    def __init__(self, objects: ObjectStore, clock: FakeClock, name: str) -> None:
        self.objects, self.clock, self.name = objects, clock, name
        self.cluster_rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
        self.lease_rt = objects.registry.require("coordination.k8s.io/v1", "Lease")

    async def register(self, **spec: Any) -> None:
        body = {"apiVersion": "cluster.gpufed.io/v1alpha1", "kind": "Cluster", "metadata": {"name": self.name},
                "spec": {"provider": "onprem", **spec}}
        await self.objects.create(self.cluster_rt, body)

    async def renew(self) -> None:
        renew = self.clock.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            lease = await self.objects.get(self.lease_rt, namespace=c.LEASE_NAMESPACE, name=self.name)
        except Exception:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": c.LEASE_NAMESPACE},
                    "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": renew}}
            await self.objects.create(self.lease_rt, body)
            return
        lease["spec"]["renewTime"] = renew
        await self.objects.update(self.lease_rt, lease)

    async def report(self, ready: str) -> None:
        cluster = await self.objects.get(self.cluster_rt, name=self.name)
        cluster["status"] = {
            "conditions": [{"type": "Ready", "status": ready, "reason": "MemberHealthy" if ready == "True" else "NoReadyNodes",
                            "lastTransitionTime": format_time(self.clock.now)}],
            "lastReportTime": format_time(self.clock.now),
        }
        await self.objects.update_status(self.cluster_rt, cluster)

    async def cluster(self) -> dict[str, Any]:
        return await self.objects.get(self.cluster_rt, name=self.name)


def health_taints(cluster: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((t["key"], t["effect"]) for t in cluster["spec"].get("taints") or ())


def ready_of(cluster: dict[str, Any]) -> tuple[str, str]:
    for cond in (cluster.get("status") or {}).get("conditions") or ():
        if cond["type"] == "Ready":
            return cond["status"], cond.get("reason", "")
    return "", ""


async def until(probe: Callable[[], Awaitable[bool]], what: str) -> None:
    try:
        async with asyncio.timeout(10):
            while True:
                if await probe():
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def look(monitor: ClusterHealthMonitor, agent: Agent, *, ready: tuple[str, str], taints: list[tuple[str, str]]) -> None:
    """Make the monitor look at the cluster now and wait for the expected outcome."""
    await monitor.loop.add(agent.name)

    async def probe() -> bool:
        cluster = await agent.cluster()
        return ready_of(cluster) == ready and health_taints(cluster) == sorted(taints)

    await until(probe, f"Ready {ready} and taints {taints}")


async def healthy_peer(objects: ObjectStore, clock: FakeClock) -> Agent:
    """Another cluster that keeps reporting (call ``renew`` and ``report`` after moving the clock),
    so a cluster going silent is one failure rather than the whole fleet (controllers/disruption.py)."""
    peer = Agent(objects, clock, "gpu-peer")
    await peer.register()
    await peer.renew()
    await peer.report("True")
    return peer


async def test_monitor_marks_a_silent_cluster_unknown_and_recovers_it(hub_objects: ObjectStore, clock: FakeClock) -> None:
    agent = Agent(hub_objects, clock, "gpu-a")
    await agent.register(taints=[SPOT])
    await agent.renew()
    await agent.report("True")
    peer = await healthy_peer(hub_objects, clock)
    async with ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock) as monitor:
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[("gpufed.io/spot", "PreferNoSchedule")])

        clock.set(41)  # the agent went silent
        await peer.renew()
        await peer.report("True")
        await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN),
                   taints=[*UNREACHABLE, ("gpufed.io/spot", "PreferNoSchedule")])
        cluster = await agent.cluster()
        noexecute = next(t for t in cluster["spec"]["taints"] if t["effect"] == "NoExecute")
        assert noexecute["timeAdded"] == format_time(at(41))

        clock.set(60)  # heartbeats are back, the status is not: still unreachable
        await agent.renew()
        await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN),
                   taints=[*UNREACHABLE, ("gpufed.io/spot", "PreferNoSchedule")])

        await agent.report("True")
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[("gpufed.io/spot", "PreferNoSchedule")])

        await agent.report("False")  # the agent reports its member unhealthy
        await look(monitor, agent, ready=("False", "NoReadyNodes"), taints=[*NOT_READY, ("gpufed.io/spot", "PreferNoSchedule")])


async def test_monitor_gives_new_clusters_a_start_up_grace(hub_objects: ObjectStore, clock: FakeClock) -> None:
    agent = Agent(hub_objects, clock, "gpu-new")
    await agent.register()
    peer = await healthy_peer(hub_objects, clock)
    async with ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock) as monitor:
        clock.set(30)
        await look(monitor, agent, ready=("", ""), taints=[])
        await peer.renew()
        await peer.report("True")
        clock.set(41)
        await look(monitor, agent, ready=("Unknown", ClusterReadyReason.NEVER_UPDATED), taints=UNREACHABLE)


async def test_monitor_rechecks_on_its_own_when_the_grace_runs_out(hub_objects: ObjectStore, clock: FakeClock) -> None:
    """No event after the last heartbeat: the monitor's own timer finds the cluster silent."""
    agent = Agent(hub_objects, clock, "gpu-b")
    await agent.register()
    await agent.renew()
    await agent.report("True")
    async with ClusterHealthMonitor(hub_objects, grace_period=0.3, clock=asyncio_clock(clock)):
        async def unknown() -> bool:
            return ready_of(await agent.cluster())[0] == "Unknown"

        await until(unknown, "the cluster to turn Unknown without any event")
        # Alone in the fleet, its silence is a full disruption: NoSchedule only, no eviction.
        assert health_taints(await agent.cluster()) == [(c.TAINT_UNREACHABLE, "NoSchedule")]


def asyncio_clock(clock: FakeClock) -> Callable[[], datetime]:
    """The fake clock advanced by the event loop's time since the call (real-time flow from T0)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    return lambda: clock.now + timedelta(seconds=loop.time() - start)


async def test_monitor_taints_a_cordoned_cluster(hub_objects: ObjectStore, clock: FakeClock) -> None:
    agent = Agent(hub_objects, clock, "gpu-c")
    await agent.register(unschedulable=True)
    await agent.renew()
    await agent.report("True")
    async with ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock) as monitor:
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=CORDONED)
        cluster = await agent.cluster()
        cluster["spec"]["unschedulable"] = False
        await hub_objects.update(agent.cluster_rt, cluster)
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[])


async def test_monitor_can_run_again_after_shutdown(hub_objects: ObjectStore, clock: FakeClock) -> None:
    """A hub runs the monitor once per leadership term."""
    agent = Agent(hub_objects, clock, "gpu-d")
    await agent.register()
    await agent.renew()
    await agent.report("True")
    peer = await healthy_peer(hub_objects, clock)
    monitor = ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock)
    async with monitor:
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[])
    assert not monitor.started.is_set()
    clock.set(50)
    await peer.renew()
    await peer.report("True")
    async with monitor:
        await look(monitor, agent, ready=("Unknown", ClusterReadyReason.STATUS_UNKNOWN), taints=UNREACHABLE)


class FlowingClock:
    """``now`` moving with the event loop's time from T0 (as an agent's clock does)."""

    def __init__(self, flowing: Callable[[], datetime]) -> None:
        self._flowing = flowing

    @property
    def now(self) -> datetime:
        return self._flowing()


async def test_a_stalled_hub_does_not_mark_its_clusters_lost(hub_objects: ObjectStore, clock: FakeClock) -> None:
    """The hub's event loop held for longer than the grace (as a long computation on it would)
    while an agent renews its Lease every 0.1 s: no heartbeat could arrive meanwhile, so none
    is missed; once the agent stops, its silence still counts."""
    flowing = asyncio_clock(clock)
    agent = Agent(hub_objects, FlowingClock(flowing), "gpu-s")  # type: ignore[arg-type]
    await agent.register()
    await agent.renew()
    await agent.report("True")

    async def heartbeats() -> None:
        while True:
            await asyncio.sleep(0.1)
            await agent.renew()

    async with ClusterHealthMonitor(hub_objects, grace_period=1.0, clock=flowing, stall_tick=0.1) as monitor:
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[])
        beating = asyncio.create_task(heartbeats())
        await asyncio.sleep(0.3)
        time.sleep(2.5)  # noqa: ASYNC251 -- the point: the loop is held, the monitor's recheck falls due
        await monitor.loop.add(agent.name)
        await asyncio.sleep(0.5)
        assert ready_of(await agent.cluster()) == ("True", "MemberHealthy")
        assert monitor.stalls.total >= 2.0
        beating.cancel()

        async def unknown() -> bool:
            return ready_of(await agent.cluster())[0] == "Unknown"

        await until(unknown, "the cluster to turn Unknown once it stays silent with the hub running")


async def test_a_new_term_keeps_what_the_last_one_saw_of_the_heartbeats(hub_objects: ObjectStore, clock: FakeClock) -> None:
    """A stall can cost the hub its leader lease: the next term in the same process must not
    date the heartbeats the stall kept out by their agents' old stamps."""
    agent = Agent(hub_objects, clock, "gpu-t")
    await agent.register()
    await agent.renew()
    await agent.report("True")
    monitor = ClusterHealthMonitor(hub_objects, grace_period=40, clock=clock)
    async with monitor:
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[])
        monitor.tracker.postpone(30, now=at(30))  # as the stall of the last term did
    clock.set(50)  # 50 s after the agent's stamp, 20 s after the postponed heartbeat
    async with monitor:
        await look(monitor, agent, ready=("True", "MemberHealthy"), taints=[])
