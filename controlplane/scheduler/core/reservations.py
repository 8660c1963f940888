"""Capacity promised to bindings that the members have not reported as used yet.

Between a scheduling decision and the member agent's next capacity report, the hub's
view of a cluster still shows the GPUs it just handed out as free. Without a memory of
those promises, two bindings scheduled in a row would both take the same GPUs. A
:class:`Reservations` value is that memory: per cluster, per binding, the pods promised
(replicas x per-replica requirements). The estimator subtracts them from the reported
free shapes (see ``replaying.adjusted_snapshot``) until they expire.

Lifecycle, driven by the scheduler controller (all pure in-memory operations):

* :meth:`Reservations.record_decision` after a decision: the binding's reservation in a
  cluster grows by the replicas it gained there and shrinks by those it lost;
* :meth:`Reservations.mark_applied` when the cluster's Work reports Applied (optional;
  it makes expiry exact instead of time-based);
* :meth:`Reservations.observe_report` on every capacity report. When the report lists the
  member's GPU pods per owner (``status.utilization``), the controller passes how many pods
  of each binding it shows bound, and a reservation keeps exactly the replicas the report
  does not show yet: it is dropped once they are all there, and kept for pods the member has
  not bound (just created, or unschedulable). A report that says nothing about a binding's
  pods falls back to time: the reservation goes once the report is ``settle`` newer than
  the Work's apply, or than the decision when no apply was seen;
* :meth:`Reservations.release` when a binding is deleted or unscheduled;
* :meth:`Reservations.expire` periodically, a safety net for reports that never come;
* :meth:`Reservations.without` for what-if estimates (is there room once a binding's own
  promise is set aside?).

Every change bumps the cluster's version, which keys the estimator's cache of adjusted
snapshots, so unchanged clusters cost nothing. Versions come from one counter, so
:attr:`Reservations.clock` (the latest) and :meth:`Reservations.changed_since` tell a
fleet-wide memo (``Reservations.verdicts_by_kind``) which clusters changed since it was filled, and a
:meth:`Reservations.checkpoint` keeps what a cluster's journal was at one moment (saved on
its first change after), for answers given later as of then.

**Accounting: a journal per cluster.** Besides the reservations themselves, each cluster
keeps the :class:`Entry` list of changes since its last capacity report (:meth:`journal`):
a binding *takes* pods (a new or changed reservation) or *gives back* everything it holds
(a change, a release, an expiry). The estimator replays the journal on the reported
shapes: taken pods go best fit on what is left, and giving back returns exactly the
capacity the binding's own pods took, to the nodes they took it from, leaving every other
reservation where it is. So a change in the middle of a long list costs as much as one at
its end, not a replay of everything after it. Replicas that did not fit when taken are
placed as soon as capacity is given back (in the order they were taken), so a promise is
never forgotten while there is room for it; until then their GPUs are held wherever some
are free (``packing.spill_gpus``), so the cluster's total is not sold twice. Where
pods sit therefore depends on the order of past changes, not only on the current list; it is
still a pure function of the journal, so every replay of it agrees. A report starts a new
journal: the reservations it leaves are taken afresh, in their order (as is a journal grown
much longer than the list it describes).
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.slots import slot_setters

if TYPE_CHECKING:
    from controlplane.scheduler.core.plugins.verdict_memo import KindVerdicts

log = logging.getLogger(__name__)

_VERSIONS = itertools.count(1)
"""Versions are unique across all Reservations values, so caches never confuse two of them."""
_COMPACT_RATIO = 4
_COMPACT_SLACK = 256
"""A journal longer than ``_COMPACT_RATIO`` times its cluster's reservations plus this starts afresh."""


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
    target: int | None = None
    """Pods of the binding requesting a GPU that run in the cluster once the decision is carried
    out (those it ran before included): what a report must show bound before the reservation
    goes. None when the binding requests no GPU (reports list GPU pods only)."""

    @property
    def replicas(self) -> int:
        return sum(d.replicas for d in self.demands)


_NEW = object.__new__
_SET = slot_setters(Reservation)


def _reservation(
    binding: str, cluster: str, demands: tuple[Demand, ...], created: datetime, target: int | None
) -> Reservation:
    """``Reservation(...)`` without the frozen dataclass's ``__init__`` (a good part of recording a
    decision that spreads over many clusters): sets the slots directly, every field."""
    out: Reservation = _NEW(Reservation)
    _SET["binding"](out, binding)
    _SET["cluster"](out, cluster)
    _SET["demands"](out, demands)
    _SET["created"](out, created)
    _SET["applied_at"](out, None)
    _SET["target"](out, target)
    return out


class Entry(NamedTuple):
    """One change in a cluster's journal: ``binding`` takes ``demands``, or gives back all it holds."""

    binding: str
    demands: tuple[Demand, ...]
    """What the binding takes; empty: it gives back every pod it holds in the cluster."""


class Journal(NamedTuple):
    """A cluster's changes since it last started afresh (see the module docstring)."""

    generation: int
    """Changes whenever the journal starts afresh; within one generation it only grows."""
    entries: Sequence[Entry]
    """Read-only; the journal's own list (it grows with later changes)."""


_EMPTY = Journal(0, ())
_NO_ENTRIES: Mapping[str, Reservation] = MappingProxyType({})


class Checkpoint:
    """The reservations as they stood at one moment, enough to replay any cluster's journal as it was
    then (see :meth:`Reservations.checkpoint`).

    Copy on write: taking one costs nothing; the reservations save a cluster's state into every
    live checkpoint just before they first change it.
    """

    __slots__ = ("__weakref__", "_reservations", "_saved")

    def __init__(self, reservations: Reservations) -> None:
        self._reservations = reservations
        self._saved: dict[str, tuple[int, Journal, int]] = {}
        """Cluster -> (version, journal, entries) as at the checkpoint, for the clusters changed since."""

    def _save(self, cluster: str, version: int, journal: Journal, length: int) -> None:
        if cluster not in self._saved:
            self._saved[cluster] = (version, journal, length)

    @property
    def changed(self) -> Collection[str]:
        """The clusters whose reservations changed since the checkpoint (so far)."""
        return self._saved.keys()

    def version(self, cluster: str) -> int:
        saved = self._saved.get(cluster)
        return saved[0] if saved is not None else self._reservations.version(cluster)

    def journal(self, cluster: str) -> Journal:
        """The cluster's journal as it was: its generation and its entries then."""
        saved = self._saved.get(cluster)
        if saved is None:
            journal = self._reservations.journal(cluster)
            return Journal(journal.generation, list(journal.entries))
        journal, length = saved[1], saved[2]
        return Journal(journal.generation, journal.entries[:length])


class Reservations:
    """Capacity promised per (cluster, binding). Mutable, owned by one scheduler controller."""

    def __init__(self) -> None:
        self._by_cluster: dict[str, dict[str, Reservation]] = {}
        self._versions: dict[str, int] = {}
        self._journals: dict[str, Journal] = {}
        self._lengths: dict[str, int] = {}
        self._changed: dict[str, int] = {}
        """Cluster -> the version of its latest change (0 or not), the least recently changed first."""
        self._clock = 0
        self._checkpoints: weakref.WeakSet[Checkpoint] = weakref.WeakSet()
        self.verdicts_by_kind: dict[int, KindVerdicts] = {}
        """GPU feasibility's verdicts over the fleet per request kind, each valid as of a :attr:`clock`
        value (see :meth:`changed_since`); they belong to these reservations and go with them."""

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_cluster.values())

    def version(self, cluster: str) -> int:
        """Changes whenever ``cluster``'s reservations change; 0 when it has none."""
        return self._versions.get(cluster, 0)

    def versions(self) -> Mapping[str, int]:
        """Read-only view of :meth:`version` for every cluster with reservations (absent: 0)."""
        return MappingProxyType(self._versions)

    def for_cluster(self, cluster: str) -> tuple[Reservation, ...]:
        """The cluster's reservations in the order they were made; a changed one moves to the end.

        This is the order in which a journal starting afresh takes them (:meth:`journal`).
        """
        return tuple((self._by_cluster.get(cluster) or {}).values())

    def get(self, binding: str, cluster: str) -> Reservation | None:
        return (self._by_cluster.get(cluster) or {}).get(binding)

    def reserved_replicas(self, binding: str, cluster: str) -> int:
        found = self.get(binding, cluster)
        return found.replicas if found else 0

    def journal(self, cluster: str) -> Journal:
        """The cluster's changes since its last report, in order (see the module docstring).

        Replaying them on the cluster's reported shapes gives the capacity left; within one
        :attr:`Journal.generation` the entries only grow at the end, so whoever replayed the
        first ``n`` can replay just the rest. Empty (generation 0) when nothing is reserved.
        """
        return self._journals.get(cluster, _EMPTY)

    @property
    def clock(self) -> int:
        """The version of the latest change to any cluster (0 before the first)."""
        return self._clock

    def changed_since(self, clock: int) -> list[str]:
        """Clusters whose reservations changed after :attr:`clock` was ``clock``, latest first."""
        out: list[str] = []
        for name, version in reversed(self._changed.items()):
            if version <= clock:
                break
            out.append(name)
        return out

    def checkpoint(self) -> Checkpoint:
        """What is reserved now, for answering later as of now (e.g. an explanation written after
        the next decisions changed the reservations). Valid as long as it is referenced."""
        checkpoint = Checkpoint(self)
        self._checkpoints.add(checkpoint)
        return checkpoint

    def _touch(self, cluster: str, *changes: Entry) -> None:
        """Record ``changes`` in the cluster's journal and bump its version (no changes: start afresh)."""
        if self._checkpoints:
            before = (
                self._versions.get(cluster, 0),
                self._journals.get(cluster, _EMPTY),
                self._lengths.get(cluster, 0),
            )
            for checkpoint in self._checkpoints:
                checkpoint._save(cluster, *before)
        entries = self._by_cluster.get(cluster)
        clock = self._clock = next(_VERSIONS)
        changed = self._changed
        changed.pop(cluster, None)
        changed[cluster] = clock
        if not entries:  # version 0 and an empty journal: nothing reserved
            self._versions.pop(cluster, None)
            self._by_cluster.pop(cluster, None)
            self._journals.pop(cluster, None)
            self._lengths.pop(cluster, None)
            return
        self._versions[cluster] = clock
        journal = self._journals.get(cluster)
        if (
            journal is None
            or not changes
            or len(journal.entries) + len(changes) > _COMPACT_RATIO * len(entries) + _COMPACT_SLACK
        ):
            fresh = [Entry(r.binding, r.demands) for r in entries.values()]
            self._journals[cluster] = Journal(next(_VERSIONS), fresh)
            self._lengths[cluster] = len(fresh)
            return
        log = journal.entries
        assert isinstance(log, list)
        log.extend(changes)
        self._lengths[cluster] = len(log)

    def reserve(
        self, binding: str, cluster: str, demands: Iterable[Demand], *, now: datetime, target: int | None = None
    ) -> None:
        """Set ``binding``'s reservation in ``cluster`` to ``demands`` (replacing any previous one).

        ``target``: the binding's GPU pods in the cluster once placed (see :attr:`Reservation.target`);
        by default the GPU-requesting pods of ``demands`` (right when the binding runs nothing
        there yet, as a gang placed whole).
        """
        kept = tuple([d for d in demands if d.replicas > 0])
        if not kept:
            self.release(binding, cluster=cluster)
            return
        if target is None:
            target = sum(d.replicas for d in kept if d.requirements.wants_gpu) or None
        entries = self._by_cluster.setdefault(cluster, {})
        replaced = entries.pop(binding, None) is not None
        entries[binding] = _reservation(binding, cluster, kept, now, target)
        taken = Entry(binding, kept)
        self._touch(cluster, *((Entry(binding, ()), taken) if replaced else (taken,)))

    def of_binding(self, binding: str) -> dict[str, Reservation]:
        """``binding``'s reservations by cluster (to :meth:`restore` them when a decision is not written)."""
        return {name: entries[binding] for name, entries in self._by_cluster.items() if binding in entries}

    def restore(self, binding: str, saved: Mapping[str, Reservation]) -> None:
        """Put ``binding``'s reservations back to ``saved`` (from :meth:`of_binding`)."""
        for name in set(self.of_binding(binding)) - set(saved):
            self.release(binding, cluster=name)
        for name, reservation in saved.items():
            entries = self._by_cluster.setdefault(name, {})
            if entries.get(binding) == reservation:
                continue
            replaced = entries.pop(binding, None) is not None
            entries[binding] = reservation
            taken = Entry(binding, reservation.demands)
            self._touch(name, *((Entry(binding, ()), taken) if replaced else (taken,)))

    def without(self, binding: str, *, cluster: str) -> Reservations:
        """A new value holding ``cluster``'s reservations except ``binding``'s (in their order,
        a fresh journal): to ask what the cluster could hold were that promise not there."""
        out = Reservations()
        kept = {name: r for name, r in (self._by_cluster.get(cluster) or {}).items() if name != binding}
        if kept:
            out._by_cluster[cluster] = kept
            out._touch(cluster)
        return out

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
            if after == before:
                continue  # unchanged here: its reservation (if any) stays as it is
            existing = (self._by_cluster.get(cluster) or _NO_ENTRIES).get(binding)
            reserved = existing.replicas if existing else 0
            if after > before:
                need = requirements[cluster]
                target = after if need.wants_gpu else None
                self.reserve(binding, cluster, [Demand(reserved + after - before, need)], now=now, target=target)
            elif after < before and existing is not None:
                left = reserved - min(reserved, before - after)
                need = requirements.get(cluster) or existing.demands[0].requirements
                target = after if need.wants_gpu else None
                self.reserve(binding, cluster, [Demand(left, need)] if left else [], now=now, target=target)

    def mark_applied(self, binding: str, cluster: str, *, at: datetime) -> None:
        """The member applied the binding's Work: the next report after ``at`` includes its pods."""
        found = self.get(binding, cluster)
        if found is not None and found.applied_at is None:
            self._by_cluster[cluster][binding] = replace(found, applied_at=at)

    def observe_report(
        self,
        cluster: str,
        *,
        reported_at: datetime,
        settle: timedelta = timedelta(seconds=0),
        bound: Mapping[str, int] | None = None,
    ) -> list[Reservation]:
        """Settle reservations against a capacity report taken at ``reported_at``; returns those dropped.

        ``bound``: per binding, the pods of it the report shows bound in the cluster (only for
        bindings whose pods the report can name). Such a reservation keeps the replicas still
        missing (``target`` minus bound, never more than it held) and goes when none are: a
        report taken after the apply but before the member bound the pods leaves it whole.
        Any other reservation goes once the report is ``settle`` newer than the Work's apply
        (the time the member needs to bind the pods), or than the decision when the apply was
        never seen.
        """
        entries = self._by_cluster.get(cluster) or {}
        dropped: list[Reservation] = []
        shrunk = False
        for r in list(entries.values()):
            shown = bound.get(r.binding) if bound is not None and r.target is not None else None
            if shown is None:
                since = r.applied_at if r.applied_at is not None else r.created
                if since + settle < reported_at:
                    dropped.append(r)
                continue
            assert r.target is not None
            missing = min(r.replicas, max(r.target - shown, 0))
            if missing <= 0:
                dropped.append(r)
            elif missing < r.replicas and len(r.demands) == 1:
                # Some of the promised pods are bound now; the report counts those itself.
                entries[r.binding] = replace(r, demands=(replace(r.demands[0], replicas=missing),))
                shrunk = True
        for r in dropped:
            del entries[r.binding]
        # A report is the new starting point: what is still reserved is taken afresh on it.
        self._touch(cluster)
        if dropped or shrunk:
            log.debug("reservations settled by report", extra={"cluster": cluster, "count": len(dropped)})
        return dropped

    def release(self, binding: str, *, cluster: str | None = None) -> None:
        """Forget ``binding``'s reservations (in one cluster, or everywhere)."""
        clusters = [cluster] if cluster is not None else list(self._by_cluster)
        for name in clusters:
            entries = self._by_cluster.get(name)
            if entries and entries.pop(binding, None) is not None:
                self._touch(name, Entry(binding, ()))

    def expire(self, *, now: datetime, max_age: timedelta) -> list[Reservation]:
        """Drop reservations older than ``max_age`` (their cluster stopped reporting, or the Work never applied)."""
        dropped: list[Reservation] = []
        for name, entries in list(self._by_cluster.items()):
            old = [r for r in entries.values() if r.created + max_age < now]
            for r in old:
                del entries[r.binding]
            if old:
                self._touch(name, *(Entry(r.binding, ()) for r in old))
                dropped.extend(old)
        return dropped
