"""Cluster health: agent heartbeats -> each Cluster's Ready condition and its health taints.

In: Clusters and the agents' heartbeat Leases (``gpufed-cluster-lease/<cluster>``), a grace
period (``gpufed controlplane --cluster-monitor-grace-period``, default 40 s) and a clock.
Out, per Cluster, as Kubernetes' node lifecycle controller does for nodes:

* ``status.conditions[Ready]`` set to ``Unknown`` once no heartbeat arrived for the grace
  period (reason ``ClusterStatusUnknown``; ``ClusterStatusNeverUpdated`` for a cluster that
  never reported). While heartbeats arrive the agent owns the condition and the monitor
  leaves it alone; the agent's next status report replaces the ``Unknown``.
* ``spec.taints``: ``cluster.gpufed.io/unreachable`` (Ready Unknown) or
  ``cluster.gpufed.io/not-ready`` (the agent reports Ready False), each with both the
  ``NoSchedule`` and ``NoExecute`` effects and a ``timeAdded``; and
  ``cluster.gpufed.io/unschedulable:NoSchedule`` while ``spec.unschedulable`` (cordon) is
  set. Recovery removes them. Other taints are never touched.

A heartbeat is a change of the Lease's ``renewTime`` or of the Cluster's
``status.lastReportTime``. Clocks of members and hub may disagree, so a heartbeat seen
*change* while the monitor runs is dated by the hub's clock; only the heartbeat present
when the monitor starts is dated by its own timestamp (capped at now). A member is never
marked lost because the hub was busy: time the hub's event loop was stalled (it could serve
no heartbeat; :class:`LoopStalls`, checked every second and before each assessment) is
given back to every cluster's grace. A new cluster that
has not reported yet gets the grace period from its ``creationTimestamp`` (start-up grace).

When most of the fleet looks unhealthy at once the hub suspects itself rather than the
clusters (:mod:`controlplane.controllers.disruption`, after Kubernetes' zone disruption
modes): in a full disruption no ``NoExecute`` health taint is set and those set are removed,
in a partial one new ones are held back. The monitor keeps each cluster's latest verdict; a
pass over an unhealthy cluster first assesses every cluster at the same instant, so clusters
whose heartbeats stopped together are judged together (a healthy fleet costs one assessment
per heartbeat). A change of the fleet's state is logged at WARNING, reported to
``on_fleet_state`` (the hub's metrics) and re-queues every cluster.

The decisions (:func:`assess_cluster`, :func:`desired_taints`) are pure; the
:class:`ClusterHealthMonitor` is level-based: every Cluster or Lease event queues the
cluster, and a healthy cluster is looked at again when its grace would run out. Writes are
compare-and-swap on resourceVersion (a lost race re-reads and retries). The hub runs the
monitor only on the leader.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.cluster_v1alpha1 import ClusterConditionType, ClusterReadyReason
from controlplane.apis.timestamps import format_time, parse_time_or_none
from controlplane.apis.views import ClusterObjectView, ObjectView
from controlplane.controllers.disruption import (
    DEFAULT_UNHEALTHY_THRESHOLD,
    EvictionTaints,
    FleetState,
    describe_transition,
    eviction_gate,
    fleet_state,
)
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workloads import with_condition
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.lifecycle import Service
from controlplane.objectclient import ObjectClient, WatchEventType, utc_now

log = logging.getLogger(__name__)

DEFAULT_GRACE_PERIOD = 40.0
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
#: Re-check a healthy cluster this long after its grace would run out (absorbs timer jitter).
RECHECK_SLACK_SECONDS = 0.05


class Health(StrEnum):
    """What the monitor concluded about one cluster."""

    READY = "Ready"
    NOT_READY = "NotReady"
    """Heartbeats arrive, and the agent reports its member unhealthy (Ready False)."""
    UNREACHABLE = "Unreachable"
    """No heartbeat for the grace period, or Ready still Unknown from that."""
    STARTING = "Starting"
    """Within the start-up grace (or heartbeating) without a Ready condition yet: no verdict."""


#: The verdicts that count against the fleet (a starting cluster counts neither way).
UNHEALTHY = frozenset({Health.NOT_READY, Health.UNREACHABLE})
#: The taints the monitor owns: (key, effect). Any taint with one of these keys is managed.
MANAGED_KEYS = frozenset({c.TAINT_UNREACHABLE, c.TAINT_NOT_READY, c.TAINT_CORDONED})
_HEALTH_TAINTS: dict[Health, tuple[tuple[str, str], ...]] = {
    Health.READY: (),
    Health.STARTING: (),
    Health.NOT_READY: ((c.TAINT_NOT_READY, NO_SCHEDULE), (c.TAINT_NOT_READY, NO_EXECUTE)),
    Health.UNREACHABLE: ((c.TAINT_UNREACHABLE, NO_SCHEDULE), (c.TAINT_UNREACHABLE, NO_EXECUTE)),
}


@dataclass(frozen=True)
class HealthAssessment:
    health: Health
    #: The Ready condition the monitor must set (None: the agent's condition stands).
    ready_condition: dict[str, str] | None
    #: When the cluster turns Unknown unless a heartbeat arrives (None: it already is).
    stale_at: datetime | None



def heartbeat_marker(cluster: Mapping[str, Any], lease: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The agent-written values that change with every heartbeat (Lease renewTime, lastReportTime)."""
    renew = ObjectView(lease).spec.get("renewTime")
    report = ClusterObjectView(cluster).last_report_time
    return (str(renew) if renew else None, str(report) if report else None)


def heartbeat_time(marker: tuple[str | None, str | None]) -> datetime | None:
    """The newest timestamp among a heartbeat marker's values, by the agent's clock."""
    times = [t for t in (parse_time_or_none(value) for value in marker) if t is not None]
    return max(times, default=None)


class HeartbeatTracker:
    """When each cluster's latest heartbeat arrived, by the hub's clock.

    A heartbeat first seen while tracking is dated when it was seen; the one present at the
    first look is dated by its own timestamp, capped at now (so an agent whose clock runs
    ahead cannot look alive after it died).
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[str | None, str | None], datetime]] = {}

    def observe(self, name: str, marker: tuple[str | None, str | None], *, now: datetime) -> datetime | None:
        """Record ``marker`` for ``name``; return when its latest heartbeat arrived (None: never)."""
        if marker == (None, None):
            self._seen.pop(name, None)
            return None
        previous = self._seen.get(name)
        if previous is None:
            stamped = heartbeat_time(marker)
            arrived = min(stamped, now) if stamped is not None else now
        elif previous[0] != marker:
            arrived = now
        else:
            arrived = previous[1]
        self._seen[name] = (marker, arrived)
        return arrived

    def forget(self, name: str) -> None:
        self._seen.pop(name, None)

    def postpone(self, seconds: float, *, now: datetime) -> None:
        """Date every recorded heartbeat ``seconds`` later (never after ``now``): the hub could
        not receive heartbeats for that long (:class:`LoopStalls`), so that time does not count
        against any cluster's grace."""
        shift = timedelta(seconds=seconds)
        for name, (marker, arrived) in self._seen.items():
            self._seen[name] = (marker, min(arrived + shift, now))


class LoopStalls:
    """Seconds the hub's event loop could not run (nothing was served, no heartbeat could arrive).

    :meth:`observe` is called every ``tick`` seconds by a timer, and before each assessment; a
    call later than ``tick + tolerance`` after the previous one means the loop was held (a long
    computation, the process starved of CPU) and returns the lateness beyond ``tick``. Times are
    the loop's monotonic clock.
    """

    def __init__(self, *, tick: float = 1.0, tolerance: float = 1.0) -> None:
        self.tick = tick
        self.tolerance = tolerance
        self.total = 0.0
        self._last: float | None = None

    def observe(self, now: float) -> float:
        """The stall ending at ``now`` in seconds (0.0: none)."""
        last, self._last = self._last, now
        if last is None:
            return 0.0
        late = now - last - self.tick
        if late <= self.tolerance:
            return 0.0
        self.total += late
        return late


def assess_cluster(
    cluster: Mapping[str, Any], *, last_heartbeat: datetime | None, now: datetime, grace: timedelta
) -> HealthAssessment:
    """The health of ``cluster`` whose latest heartbeat arrived at ``last_heartbeat`` (None: never)."""
    view = ClusterObjectView(cluster)
    created = parse_time_or_none(view.metadata.get("creationTimestamp"))
    seen = last_heartbeat or created or now
    ready = view.condition(ClusterConditionType.READY)
    if now - seen > grace:
        if last_heartbeat is None:
            reason, message = (
                ClusterReadyReason.NEVER_UPDATED,
                f"the cluster's agent has not reported since the cluster was created at {format_time(seen)} "
                f"(grace period {grace.total_seconds():g}s)",
            )
        else:
            reason, message = (
                ClusterReadyReason.STATUS_UNKNOWN,
                f"the cluster's agent stopped posting heartbeats; the last arrived at {format_time(seen)} "
                f"(grace period {grace.total_seconds():g}s)",
            )
        condition = {"type": str(ClusterConditionType.READY), "status": "Unknown", "reason": str(reason), "message": message}
        return HealthAssessment(Health.UNREACHABLE, condition, None)
    stale_at = seen + grace
    if ready is None:
        return HealthAssessment(Health.STARTING, None, stale_at)
    status = ready.get("status")
    if status == "True":
        return HealthAssessment(Health.READY, None, stale_at)
    if status == "False":
        return HealthAssessment(Health.NOT_READY, None, stale_at)
    # Unknown (our own mark from before): heartbeats are back but the agent has not posted
    # its status yet, so the member's state is still not known.
    return HealthAssessment(Health.UNREACHABLE, None, stale_at)


def desired_taints(
    taints: Sequence[Mapping[str, Any]] | None,
    *,
    health: Health,
    cordoned: bool,
    now: datetime,
    eviction: EvictionTaints = EvictionTaints.APPLY,
) -> list[dict[str, Any]]:
    """``taints`` with the managed ones made to match ``health`` and the cordon.

    Unmanaged taints and the order of kept ones stay as they are; a kept managed taint keeps
    its ``timeAdded`` (tolerationSeconds count from it); a new one gets ``now``. ``eviction``
    (the fleet's disruption state) may hold back new ``NoExecute`` health taints or remove them.
    """
    wanted = list(_HEALTH_TAINTS[health])
    if eviction is EvictionTaints.REMOVE:
        wanted = [pair for pair in wanted if pair[1] != NO_EXECUTE]
    elif eviction is EvictionTaints.HOLD:
        before = {(str(t.get("key")), str(t.get("effect"))) for t in taints or ()}
        wanted = [pair for pair in wanted if pair[1] != NO_EXECUTE or pair in before]
    if cordoned:
        wanted.append((c.TAINT_CORDONED, NO_SCHEDULE))
    out: list[dict[str, Any]] = []
    present: set[tuple[str, str]] = set()
    for taint in taints or ():
        key = (str(taint.get("key")), str(taint.get("effect")))
        if key[0] in MANAGED_KEYS and (key not in wanted or key in present):
            continue
        present.add(key)
        out.append(dict(taint))
    for taint_key, effect in wanted:
        if (taint_key, effect) not in present:
            out.append({"key": taint_key, "effect": effect, "timeAdded": format_time(now)})
    return out


class ClusterHealthMonitor(Service):
    """``async with ClusterHealthMonitor(objects): ...`` or ``await run()`` / ``shutdown()``.

    Each ``run()`` starts afresh (new informers and queue), so the hub can run it for every
    leadership term; what this process saw of the heartbeats (:attr:`tracker`) is kept.
    """

    shutdown_raises = False  # stopped in the hub's cleanup, which must go on

    def __init__(
        self,
        objects: ObjectClient,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        clock: Callable[[], datetime] = utc_now,
        workers: int = 2,
        unhealthy_threshold: float = DEFAULT_UNHEALTHY_THRESHOLD,
        on_fleet_state: Callable[[FleetState, int, int], None] | None = None,
        stall_tick: float = 1.0,
        workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        if grace_period <= 0:
            raise ValueError(f"the cluster monitor grace period must be > 0 seconds, got {grace_period}")
        if not 0 < unhealthy_threshold <= 1:
            raise ValueError(f"the unhealthy fleet threshold must be in (0, 1], got {unhealthy_threshold}")
        self.objects = objects
        self.grace = timedelta(seconds=grace_period)
        self.unhealthy_threshold = unhealthy_threshold
        #: Called with (state, ready clusters, unhealthy clusters) after every pass.
        self._on_fleet_state = on_fleet_state
        self._clock = clock
        self._workers = workers
        #: How often the loop's stalls are looked for (a lateness beyond one more tick is a stall).
        self._stall_tick = stall_tick
        self._workqueue_metrics = workqueue_metrics
        registry = objects.registry
        self._cluster_rt = registry.require(f"{c.CLUSTER_GROUP}/{c.VERSION}", "Cluster")
        self._lease_rt = registry.require(f"{c.COORDINATION_GROUP}/v1", "Lease")
        super().__init__("cluster-health")
        self._started = asyncio.Event()
        #: Kept from one term to the next in this process: what it saw of the heartbeats stays
        #: true, and a term that starts after a stall (which may have cost the last term its
        #: lease) must not date the heartbeats the stall kept out by their agents' old stamps.
        self.tracker = HeartbeatTracker()
        self._new_term()

    def _new_term(self) -> None:
        self.clusters = Informer(self.objects, self._cluster_rt)
        self.leases = Informer(self.objects, self._lease_rt, namespace=c.LEASE_NAMESPACE)
        self.stalls = LoopStalls(tick=self._stall_tick, tolerance=self._stall_tick)
        self.fleet_state = FleetState.NORMAL
        #: Each cluster's health at its latest assessment.
        self._health: dict[str, Health] = {}
        #: When the last new NoExecute taint was added during a slowed partial disruption.
        self._last_partial_taint: datetime | None = None
        self.loop: ReconcileLoop[str] = ReconcileLoop(
            "cluster-health", self.reconcile, workers=self._workers, metrics=self._workqueue_metrics
        )
        self.clusters.add_handler(self._on_event)
        self.leases.add_handler(self._on_event)

    @property
    def started(self) -> asyncio.Event:
        """Set once the caches are synced and clusters are being assessed."""
        return self._started

    async def _on_event(self, _event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        # A Lease is named after its cluster.
        await self.loop.add(str(obj["metadata"]["name"]))

    async def run(self) -> None:
        """Assess every cluster until :meth:`shutdown`."""
        self._stop = asyncio.Event()
        self._started.clear()
        self._new_term()
        loop = self.loop
        async with asyncio.TaskGroup() as group:
            informers = [
                group.create_task(self.clusters.run(), name="health-informer-clusters"),
                group.create_task(self.leases.run(), name="health-informer-leases"),
            ]
            stopped = group.create_task(self._stop.wait())
            synced = group.create_task(self._wait_synced())
            watch = group.create_task(self._watch_stalls(), name="health-stalls")
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
            worker: asyncio.Task[None] | None = None
            if synced.done():
                worker = group.create_task(loop.run(), name="health-workers")
                self._started.set()
                log.info("cluster health monitor started (grace period %gs)", self.grace.total_seconds())
            await stopped
            synced.cancel()
            watch.cancel()
            await loop.shutdown()
            for task in informers:
                task.cancel()
            if worker is not None:
                await worker
        self._started.clear()
        log.info("cluster health monitor stopped")

    async def _watch_stalls(self) -> None:
        while True:
            self._credit_stall()
            await asyncio.sleep(self.stalls.tick)

    def _credit_stall(self) -> None:
        """Give every cluster back the time the hub's loop was stalled (it served no heartbeat)."""
        stalled = self.stalls.observe(asyncio.get_running_loop().time())
        if stalled:
            log.warning(
                "the hub's event loop was stalled for %.1fs; clusters' heartbeat grace is extended by as much",
                stalled,
            )
            self.tracker.postpone(stalled, now=self._clock())

    async def _wait_synced(self) -> None:
        await self.clusters.synced.wait()
        await self.leases.synced.wait()

    def ready(self) -> asyncio.Event:
        return self._started

    async def reconcile(self, name: str) -> float | None:
        """Bring one cluster's Ready condition and taints in line; return when to look again."""
        cluster = self.clusters.get(None, name)
        if cluster is None or ClusterObjectView(cluster).is_deleting:
            self.tracker.forget(name)
            self._health.pop(name, None)
            return None
        self._credit_stall()
        now = self._clock()
        lease = self.leases.get(c.LEASE_NAMESPACE, name)
        arrived = self.tracker.observe(name, heartbeat_marker(cluster, lease), now=now)
        verdict = assess_cluster(cluster, last_heartbeat=arrived, now=now, grace=self.grace)
        if verdict.health in UNHEALTHY:
            self._assess_fleet(now)
        self._health[name] = verdict.health
        await self._judge_fleet()
        gate = eviction_gate(
            self.fleet_state, fleet_size=len(self._health), last_added=self._last_partial_taint, now=now
        )
        cluster = await self._write_condition(cluster, verdict, now=now)
        if await self._write_taints(cluster, verdict, now=now, eviction=gate.taints) and (
            self.fleet_state is FleetState.PARTIAL_DISRUPTION
        ):
            self._last_partial_taint = now
        times = [t for t in (verdict.stale_at, gate.next_allowed_at) if t is not None]
        if not times:
            return None
        return max((min(times) - now).total_seconds(), 0.0) + RECHECK_SLACK_SECONDS

    def _assess_fleet(self, now: datetime) -> None:
        """Every live cluster's health at ``now`` (one consistent view of the fleet)."""
        self._health.clear()
        for cluster in self.clusters.items():
            meta = ClusterObjectView(cluster).metadata
            if meta.get("deletionTimestamp"):
                continue
            name = str(meta.get("name"))
            arrived = self.tracker.observe(
                name, heartbeat_marker(cluster, self.leases.get(c.LEASE_NAMESPACE, name)), now=now
            )
            self._health[name] = assess_cluster(cluster, last_heartbeat=arrived, now=now, grace=self.grace).health

    async def _judge_fleet(self) -> None:
        """Update the fleet's disruption state; on a change, log it and look at every cluster again."""
        ready = sum(health is Health.READY for health in self._health.values())
        unhealthy = sum(health in UNHEALTHY for health in self._health.values())
        state = fleet_state(ready=ready, unhealthy=unhealthy, unhealthy_threshold=self.unhealthy_threshold)
        before, self.fleet_state = self.fleet_state, state
        if self._on_fleet_state is not None:
            self._on_fleet_state(state, ready, unhealthy)
        if state is before:
            return
        message = describe_transition(before, state, ready=ready, unhealthy=unhealthy)
        if state is FleetState.NORMAL:
            log.info(message, extra={"fleetState": str(state)})
        else:
            log.warning(message, extra={"fleetState": str(state)})
        self._last_partial_taint = None
        for other in list(self._health):
            await self.loop.add(other)

    async def _write_condition(
        self, cluster: dict[str, Any], verdict: HealthAssessment, *, now: datetime
    ) -> dict[str, Any]:
        wanted = verdict.ready_condition
        view = ClusterObjectView(cluster)
        current = view.condition(ClusterConditionType.READY)
        if wanted is None or (
            current is not None
            and current.get("status") == wanted["status"]
            and current.get("reason") == wanted["reason"]
        ):
            return cluster
        new_status = copy.deepcopy(dict(view.status))
        new_status["conditions"] = with_condition(view.conditions, wanted, now=format_time(now))
        name = cluster["metadata"]["name"]
        log.warning(
            "cluster %s is %s: %s", name, wanted["status"], wanted["message"],
            extra={"cluster": name, "reason": wanted["reason"]},
        )
        return await self.objects.update_status(
            self._cluster_rt, {**cluster, "status": new_status}, field_manager=c.FIELD_MANAGER_HUB
        )

    async def _write_taints(
        self, cluster: dict[str, Any], verdict: HealthAssessment, *, now: datetime, eviction: EvictionTaints
    ) -> bool:
        """Write the cluster's managed taints; True when a NoExecute health taint was added."""
        view = ClusterObjectView(cluster)
        spec = view.spec
        current = list(view.taints)
        wanted = desired_taints(current, health=verdict.health, cordoned=view.unschedulable, now=now, eviction=eviction)
        if wanted == current:
            return False
        name = cluster["metadata"]["name"]
        log.info(
            "cluster %s is %s: taints %s", name, verdict.health,
            ", ".join(f"{t['key']}:{t['effect']}" for t in wanted) or "(none)",
            extra={"cluster": name},
        )
        new_spec = {**spec, "taints": wanted} if wanted else {k: v for k, v in spec.items() if k != "taints"}
        await self.objects.update(self._cluster_rt, {**cluster, "spec": new_spec}, field_manager=c.FIELD_MANAGER_HUB)
        before = {(str(t.get("key")), str(t.get("effect"))) for t in current}
        return any(
            t["effect"] == NO_EXECUTE and t["key"] in MANAGED_KEYS and (t["key"], t["effect"]) not in before
            for t in wanted
        )
