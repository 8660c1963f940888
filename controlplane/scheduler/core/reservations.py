"""Capacity promised to bindings that the members have not reported as used yet.

Between a scheduling decision and the member agent's next capacity report, the hub's
view of a cluster still shows the GPUs it just handed out as free. Without a memory of
those promises, two bindings scheduled in a row would both take the same GPUs. A
:class:`Reservations` value is that memory: per cluster, per binding, the pods promised
(replicas x per-replica requirements). The estimator subtracts them from the reported
free shapes (see ``estimator.adjusted_snapshot``) until they expire.

Lifecycle, driven by the scheduler controller (all pure in-memory operations):

* :meth:`Reservations.record_decision` after a decision: the binding's reservation in a
  cluster grows by the replicas it gained there and shrinks by those it lost;
* :meth:`Reservations.mark_applied` when the cluster's Work reports Applied (optional;
  it makes expiry exact instead of time-based);
* :meth:`Reservations.observe_report` on every capacity report: reservations the report
  must already include (applied, or created at least ``settle`` before it) are dropped;
* :meth:`Reservations.release` when a binding is deleted or unscheduled;
* :meth:`Reservations.expire` periodically, a safety net for reports that never come.

Every change bumps the cluster's version, which keys the estimator's cache of adjusted
snapshots, so unchanged clusters cost nothing.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from controlplane.interpreter.requirements import ReplicaRequirements

log = logging.getLogger(__name__)

_VERSIONS = itertools.count(1)
"""Versions are unique across all Reservations values, so caches never confuse two of them."""


@dataclass(frozen=True, slots=True)
class Demand:
    """``replicas`` pods that each need ``requirements``."""

    replicas: int
    requirements: ReplicaRequirements


@dataclass(frozen=True, slots=True)
class Reservation:
    binding: str
    """The binding's key, ``<namespace>/<name>``."""
    cluster: str
    demands: tuple[Demand, ...]
    created: datetime
    applied_at: datetime | None = None

    @property
    def replicas(self) -> int:
        return sum(d.replicas for d in self.demands)


class Reservations:
    """Capacity promised per (cluster, binding). Mutable, owned by one scheduler controller."""

    def __init__(self) -> None:
        self._by_cluster: dict[str, dict[str, Reservation]] = {}
        self._versions: dict[str, int] = {}
        self._epochs: dict[str, int] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_cluster.values())

    def version(self, cluster: str) -> int:
        """Changes whenever ``cluster``'s reservations change; 0 when it has none."""
        return self._versions.get(cluster, 0)

    def versions(self) -> Mapping[str, int]:
        """Read-only view of :meth:`version` for every cluster with reservations (absent: 0)."""
        return MappingProxyType(self._versions)

    def for_cluster(self, cluster: str) -> tuple[Reservation, ...]:
        """The cluster's reservations in the order they were made (the order the estimator subtracts them).

        A changed reservation moves to the end, so a cluster that only gains reservations
        keeps its earlier ones as a prefix; the estimator then subtracts just the new ones.
        """
        return tuple((self._by_cluster.get(cluster) or {}).values())

    def get(self, binding: str, cluster: str) -> Reservation | None:
        return (self._by_cluster.get(cluster) or {}).get(binding)

    def reserved_replicas(self, binding: str, cluster: str) -> int:
        found = self.get(binding, cluster)
        return found.replicas if found else 0

    def epoch(self, cluster: str) -> int:
        """Changes whenever a reservation of ``cluster`` is changed or removed (not when one is added).

        Within one epoch :meth:`for_cluster` only grows at the end, so whoever subtracted
        its first ``n`` entries can subtract just the rest.
        """
        return self._epochs.get(cluster, 0)

    def _touch(self, cluster: str, *, appended: bool = False) -> None:
        if self._by_cluster.get(cluster):
            self._versions[cluster] = next(_VERSIONS)
        else:  # version 0: nothing reserved
            self._versions.pop(cluster, None)
            self._by_cluster.pop(cluster, None)
        if not appended:
            self._epochs[cluster] = next(_VERSIONS)

    def reserve(self, binding: str, cluster: str, demands: Iterable[Demand], *, now: datetime) -> None:
        """Set ``binding``'s reservation in ``cluster`` to ``demands`` (replacing any previous one)."""
        kept = tuple(d for d in demands if d.replicas > 0)
        if not kept:
            self.release(binding, cluster=cluster)
            return
        entries = self._by_cluster.setdefault(cluster, {})
        replaced = entries.pop(binding, None) is not None
        entries[binding] = Reservation(binding=binding, cluster=cluster, demands=kept, created=now)
        self._touch(cluster, appended=not replaced)

    def record_decision(
        self,
        binding: str,
        *,
        previous: Mapping[str, int],
        decided: Mapping[str, int],
        requirements: Mapping[str, ReplicaRequirements],
        now: datetime,
    ) -> None:
        """Update ``binding``'s reservations after a decision moved it from ``previous`` to ``decided``.

        Gained replicas are reserved with that cluster's requirements (the chosen GPU
        shape); lost replicas first cancel not-yet-reported reserved ones. Replicas that
        did not change keep their reservation as it is.
        """
        for cluster in sorted(set(previous) | set(decided)):
            before, after = previous.get(cluster, 0), decided.get(cluster, 0)
            existing = self.get(binding, cluster)
            reserved = existing.replicas if existing else 0
            if after > before:
                need = requirements[cluster]
                self.reserve(binding, cluster, [Demand(reserved + after - before, need)], now=now)
            elif after < before and existing is not None:
                left = reserved - min(reserved, before - after)
                need = requirements.get(cluster) or existing.demands[0].requirements
                self.reserve(binding, cluster, [Demand(left, need)] if left else [], now=now)

    def mark_applied(self, binding: str, cluster: str, *, at: datetime) -> None:
        """The member applied the binding's Work: the next report after ``at`` includes its pods."""
        found = self.get(binding, cluster)
        if found is not None and found.applied_at is None:
            self._by_cluster[cluster][binding] = replace(found, applied_at=at)

    def observe_report(
        self, cluster: str, *, reported_at: datetime, settle: timedelta = timedelta(seconds=0)
    ) -> list[Reservation]:
        """Drop the reservations that a capacity report taken at ``reported_at`` already shows.

        An applied reservation is dropped once the report is newer than the apply; one
        never marked applied, once the report is at least ``settle`` newer than the
        decision (the time the agent needs to apply a Work and the member to bind pods).
        """
        entries = self._by_cluster.get(cluster) or {}
        dropped = [
            r
            for r in entries.values()
            if (r.applied_at is not None and r.applied_at < reported_at)
            or (r.applied_at is None and r.created + settle < reported_at)
        ]
        for r in dropped:
            del entries[r.binding]
        if dropped:
            self._touch(cluster)
            log.debug("reservations settled by report", extra={"cluster": cluster, "count": len(dropped)})
        return dropped

    def release(self, binding: str, *, cluster: str | None = None) -> None:
        """Forget ``binding``'s reservations (in one cluster, or everywhere)."""
        clusters = [cluster] if cluster is not None else list(self._by_cluster)
        for name in clusters:
            entries = self._by_cluster.get(name)
            if entries and entries.pop(binding, None) is not None:
                self._touch(name)

    def expire(self, *, now: datetime, max_age: timedelta) -> list[Reservation]:
        """Drop reservations older than ``max_age`` (their cluster stopped reporting, or the Work never applied)."""
        dropped: list[Reservation] = []
        for name, entries in list(self._by_cluster.items()):
            old = [r for r in entries.values() if r.created + max_age < now]
            for r in old:
                del entries[r.binding]
            if old:
                self._touch(name)
                dropped.extend(old)
        return dropped
