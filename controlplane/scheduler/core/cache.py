"""The scheduler's cache: the memo tables that outlive one decision, in one object someone owns.

As Karmada's ``pkg/scheduler/cache``, the cache is created by the scheduler controller and
passed into the core (``schedule(..., cache=...)``, ``ClusterSnapshot.from_cluster(...,
cache=...)``); the core keeps no table of its own between calls. A decision given no cache
works with a fresh one, so it is answered exactly as with a warm cache, only slower, except
for the one piece of state the cache also holds: the recent demand
(:class:`~controlplane.scheduler.core.demand.DemandHistory`, bounded), which breaks ties of
tier and price. Tests that want cold answers make a new :class:`SchedulerCache` (with a copy of
the demand history to get the same answers).

**What is remembered and when it is invalid.** Every table answers a question whose answer
depends only on its key, so no entry is ever stale:

* keys made of snapshot serials (:func:`~controlplane.scheduler.core.snapshot.fleet_key`, unique
  per snapshot, never reused) change whenever a cluster reports: a new fleet generation misses
  and is worked out again, the old entry is overwritten;
* keys made of object identities (``id(placement)``) hold the object in the entry, so an id is
  not reused while its entry lives, and a hit checks identity;
* keys made of values (node content, placement rules) give equal answers for equal values.

**Bounds.** Each table has a limit; a table that reaches it is emptied (:class:`BoundedMemo`),
which only costs recomputation. Entries hold serials, never snapshots, so the cache keeps no
replaced snapshot alive.

**Not here.** Memos that belong to one snapshot are its typed fields
(:class:`~controlplane.scheduler.core.snapshot.SnapshotMemo`, estimates, verdicts); memos valid as
of a reservations clock belong to the :class:`~controlplane.scheduler.core.reservations.Reservations`
(``verdicts_by_kind``); ``functools.lru_cache`` on pure functions of frozen values (a GPU shape
applied to requirements, a gang's envelope) stays with the function, since its answer depends on
its arguments alone. No I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from controlplane.scheduler.core.demand import DemandHistory

if TYPE_CHECKING:
    from controlplane.apis.fragmentation import TaskShape
    from controlplane.interpreter.requirements import ReplicaRequirements
    from controlplane.scheduler.core.clusterfit import NodeRow
    from controlplane.scheduler.core.demand import Need
    from controlplane.scheduler.core.framework import Status
    from controlplane.scheduler.core.rarenodes import RareTally
    from controlplane.scheduler.core.shapescarcity import Capacity, ShapeRow
    from controlplane.scheduler.core.sharehints import ShareHint
    from controlplane.scheduler.core.snapshot import NodeShape
    from policies.models import ClusterAffinityTerm, Placement, TieredOverflow

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(dict[K, V], Generic[K, V]):
    """A dict that empties itself when :meth:`remember` finds it full.

    Reads are plain ``dict`` reads (``get``, ``in``): the hot paths pay nothing for the bound.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (emptying the table first when it is full); returns it."""
        if len(self) >= self.limit and key not in self:
            self.clear()
        self[key] = value
        return value


NodeContent = tuple[
    tuple[tuple[str, str], ...], tuple[Any, ...], tuple[tuple[str, int], ...], tuple[tuple[str, int], ...], str
]
"""A node shape's labels, taints, free and allocatable resources and GPU product (not its count)."""


class FleetVerdicts(NamedTuple):
    """The placement-only filters' verdicts over one fleet generation (see ``framework``)."""

    serials: tuple[int, ...]
    verdicts: list[Status | None]
    """Per position: the first failure for a binding not running there (None: passes)."""
    unknown: bool
    """Whether some verdicts are placeholders for clusters the judged binding ran in."""


class FleetFree(NamedTuple):
    """A fleet generation's free GPUs per model (``tiebreak.fleet_free``), kept per position so that
    the next generation sums again only the models of the clusters that reported since."""

    serials: tuple[int, ...]
    frees: list[dict[str, float]]
    """Per position: the snapshot's free GPUs per model."""
    total: dict[str, float]


class Screened(NamedTuple):
    """A fleet generation split by the placement-only verdicts, for a binding running nowhere."""

    serials: tuple[int, ...]
    passing: list[int]
    """Positions passing, in order."""
    failing: dict[str, Status]


class BoundOrder(NamedTuple):
    """A fleet generation in (tier, lowest price, name) order (see ``verdict_walk``)."""

    serials: tuple[int, ...]
    tiered: TieredOverflow | None
    bounds: list[tuple[int, float, str] | None]
    """Per position of the fleet, its bound (None: no tier)."""
    order: list[tuple[tuple[int, float, str], int]]
    tainted: bool
    starts: tuple[float, ...] = ()
    """The price bands' starts the bounds were worked out with (``pricebands``; empty without bands)."""


_VERDICT_IDS: Iterator[int] = itertools.count(1)
"""Source of request-kind ids (:meth:`SchedulerCache.verdict_id`). One counter for every cache:
snapshots memoise verdicts by these ids, and a snapshot may be asked through two caches, so an id
must never mean two request kinds."""


@dataclass(eq=False)
class SchedulerCache:
    """Memo tables shared by the decisions of one scheduler (see the module docstring)."""

    node_memos: BoundedMemo[NodeContent, dict[Any, int]] = field(default_factory=lambda: BoundedMemo(65_536))
    """Node content -> the estimator's per-node memo (``NodeShape.fits``), shared by every shape with
    that content across reports, so a report that repeats a shape starts with its answers known."""
    placement_keys: BoundedMemo[tuple[int, int, str, str], tuple[ClusterAffinityTerm, Placement, str]] = field(
        default_factory=lambda: BoundedMemo(4096)
    )
    """(id(term), id(placement), apiVersion, kind) -> both objects and their placement key (see
    ``placement_key``)."""
    affinity_terms: BoundedMemo[int, tuple[Placement, list[ClusterAffinityTerm]]] = field(
        default_factory=lambda: BoundedMemo(4096)
    )
    """id(placement) -> that placement and its affinity terms, the same objects on every decision."""
    fleet_verdicts: BoundedMemo[str, FleetVerdicts] = field(default_factory=lambda: BoundedMemo(256))
    """Placement key -> the placement-only verdicts of the fleet generation last judged under it."""
    screened: BoundedMemo[str, Screened] = field(default_factory=lambda: BoundedMemo(256))
    """Placement key -> that fleet generation split into passing and failing clusters."""
    bound_orders: BoundedMemo[tuple[int, float], BoundOrder] = field(default_factory=lambda: BoundedMemo(256))
    """(id(tieredOverflow) (0: the clusters' own tiers), priceBandPercent) -> the fleet's (tier, price
    band, name) order."""
    verdict_ids: BoundedMemo[tuple[object, ...], int] = field(default_factory=lambda: BoundedMemo(16_384))
    """Request kind -> a small id, so per-snapshot verdict memos hash an int."""
    demand: DemandHistory = field(default_factory=DemandHistory)
    """The recent arrivals' task shapes: the demand mix and constrained demand (see ``demand``)."""
    tasks: BoundedMemo[ReplicaRequirements, TaskShape | None] = field(default_factory=lambda: BoundedMemo(4096))
    """Requirements -> the replica as a task of the demand mix (``clusterfit.task_of``)."""
    free_by_model: BoundedMemo[int, dict[str, float]] = field(default_factory=lambda: BoundedMemo(4096))
    """Snapshot serial -> its free GPUs per model (``clusterfit.free_by_model``)."""
    fleet_free: BoundedMemo[tuple[int, ...], dict[str, float]] = field(default_factory=lambda: BoundedMemo(64))
    """Serials of a set of clusters -> their free GPUs per model, summed."""
    last_fleet_free: FleetFree | None = None
    """The set of clusters last summed into ``fleet_free``, per position (the next generation of as
    many clusters starts from it)."""
    node_rows: BoundedMemo[int, tuple[NodeRow, ...]] = field(default_factory=lambda: BoundedMemo(4096))
    """Snapshot serial -> its distinct nodes as fragmentation sees them (``clusterfit.node_rows``)."""
    growths: BoundedMemo[tuple[int, TaskShape], BoundedMemo[NodeRow, float | None]] = field(
        default_factory=lambda: BoundedMemo(256)
    )
    """(mix version, task) -> per distinct node, its fragmentation growth when it hosts the task."""
    tie_costs: BoundedMemo[tuple[int, int, TaskShape], tuple[bool, float, float]] = field(
        default_factory=lambda: BoundedMemo(16_384)
    )
    """(snapshot serial, mix version, task) -> whether it hosts the task, the least fragmentation
    growth, and the free GPUs the task accepts (``tiebreak``)."""
    capacities: BoundedMemo[int, frozenset[Capacity]] = field(default_factory=lambda: BoundedMemo(4096))
    """Snapshot serial -> its distinct empty nodes (``shapescarcity.capacities``)."""
    shape_rows: BoundedMemo[int, dict[ShapeRow, int]] = field(default_factory=lambda: BoundedMemo(4096))
    """Snapshot serial -> its distinct nodes with free memory, and their counts (``shapescarcity``)."""
    constrained_needs: BoundedMemo[tuple[int, tuple[frozenset[Capacity], ...]], tuple[Need, ...]] = field(
        default_factory=lambda: BoundedMemo(1024)
    )
    """(mix version, the tied clusters' empty nodes) -> the needs only some of them hold."""
    slot_counts: BoundedMemo[tuple[int, Need], int] = field(default_factory=lambda: BoundedMemo(16_384))
    """(snapshot serial, need) -> its nodes hosting the need now."""
    rare_parts: BoundedMemo[frozenset[Capacity], dict[Need, tuple[frozenset[str], frozenset[str]]]] = field(
        default_factory=lambda: BoundedMemo(4096)
    )
    """A cluster's distinct empty nodes -> per recent multi-GPU need, its GPU models with nodes of the
    need's GPUs and those with nodes that hold it (``rarenodes.parts``)."""
    rare_tallies: BoundedMemo[Need, RareTally] = field(default_factory=lambda: BoundedMemo(1024))
    """Recent multi-GPU need -> its tally over the fleet last read (``rarenodes.RareTally``)."""
    lost_options: BoundedMemo[
        tuple[int, Need, ReplicaRequirements, tuple[Need, ...], bool], frozenset[frozenset[Need]]
    ] = field(default_factory=lambda: BoundedMemo(16_384))
    """(snapshot serial, replica, its requirements, constrained needs, only the nodes a spreading
    member picks) -> per node the requirements let the replica on and hosting it, the needs it stops
    hosting (distinct sets)."""
    lost_rows: BoundedMemo[tuple[Need, tuple[Need, ...]], BoundedMemo[ShapeRow, frozenset[Need] | None]] = field(
        default_factory=lambda: BoundedMemo(256)
    )
    """(replica, constrained needs) -> per distinct node, the needs it stops hosting."""
    share_hints: BoundedMemo[tuple[int, int, ReplicaRequirements], ShareHint | None] = field(
        default_factory=lambda: BoundedMemo(4096)
    )
    """(snapshot serial, mix version, requirements) -> the share remainder hint in that cluster
    (``sharehints.share_hint``; None: no hint)."""
    tightest_left: BoundedMemo[tuple[int, ReplicaRequirements], int | None] = field(
        default_factory=lambda: BoundedMemo(4096)
    )
    """(snapshot serial, a share's requirements) -> the fewest free GPU thousandths a node hosting it keeps
    (``sharefit.tightest_left``; None: no node hosts it)."""
    price_bands: BoundedMemo[tuple[tuple[int, ...], float], tuple[float, ...]] = field(
        default_factory=lambda: BoundedMemo(64)
    )
    """(fleet serials, priceBandPercent) -> the starts of the fleet's price bands (``pricebands``)."""

    def verdict_id(self, kind: tuple[object, ...]) -> int:
        """The id of a request kind (see :data:`_VERDICT_IDS`)."""
        found = self.verdict_ids.get(kind)
        if found is None:
            found = self.verdict_ids.remember(kind, next(_VERDICT_IDS))
        return found

    def node_memo(self, shape: NodeShape) -> dict[Any, int]:
        """The per-node memo for ``shape``'s content: the one an earlier shape with that content
        started, else ``shape``'s own (its answers depend only on the content, not on the count)."""
        key: NodeContent = (
            tuple(sorted(shape.labels.items())),
            shape.taints,
            tuple(sorted(shape.free.items())),
            tuple(sorted(shape.allocatable.items())),
            shape.product,
        )
        found = self.node_memos.get(key)
        if found is None:
            found = self.node_memos.remember(key, shape.fits)
        return found
