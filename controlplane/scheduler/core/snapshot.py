"""Immutable, pre-parsed views of member clusters: what the scheduler and estimator read.

A :class:`ClusterSnapshot` is built once per Cluster report (``from_cluster`` takes the
``Cluster`` model or its wire dict, see docs/objects.md) and then read by every scheduling
decision until the next report. Everything the hot path needs is parsed up front:
quantities are already integers in base units (the agent reports them so), labels and
taints are plain dicts and frozen dataclasses, the tier default is applied, and node
shapes are tuples. Each snapshot also carries memos of its own (estimates per
requirements, filter verdicts, and the typed :class:`SnapshotMemo`: its reservation-adjusted
copy, fit vectors, what an adjusted copy was made from) so repeated questions about the same
snapshot cost a lookup; a new report means a new snapshot and fresh caches,
except that, given the cluster's previous snapshot and the scheduler's cache
(:class:`~controlplane.scheduler.core.cache.SchedulerCache`, where node shapes of one content
share their per-node memo), it remembers which node shapes the report changed, so the previous
report's estimates can be carried over instead of computed anew.

Every snapshot has a :attr:`~ClusterSnapshot.serial` of its own, so fleet-wide memos
recognise a fleet (:func:`fleet_key`) without holding on to snapshots a report replaced.

No I/O; the snapshot is never mutated after construction (its caches are memo tables).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, NewType

from pydantic import BaseModel

from controlplane.apis.apienablements import served_kinds
from controlplane.apis.constants import LABEL_GPU_PRODUCT
from controlplane.apis.gpus import is_mig_invalid_product
from controlplane.apis.meta import Taint
from controlplane.apis.pods import FrozenTaint
from controlplane.apis.timestamps import parse_time
from controlplane.apis.views import ClusterObjectView
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.slots import slot_setters
from policies.affinity import ClusterView

if TYPE_CHECKING:
    from controlplane.interpreter.requirements import ReplicaRequirements
    from controlplane.scheduler.core.estimating import Origin
    from controlplane.scheduler.core.framework import Feasibility, Status
    from controlplane.scheduler.core.replaying import Ledger

ClusterName = NewType("ClusterName", str)

PROVIDER_ONPREM = "onprem"


@dataclass(frozen=True, slots=True)
class GpuInfo:
    product: str = ""
    memory_mib: int = 0
    count: int = 0
    mig_strategy: str = "none"
    shared_replicas: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class NodeShape:
    """``count`` identical nodes: their labels, taints and FREE resources (base units)."""

    count: int
    labels: Mapping[str, str]
    taints: tuple[FrozenTaint, ...]
    free: Mapping[str, int]
    allocatable: Mapping[str, int]
    gpu: GpuInfo | None = None
    hostnames: tuple[str, ...] = ()
    """Names of the nodes whose GPUs are partly in use, as the agent lists them (packing hints)."""
    product: str = field(init=False, default="")
    """``nvidia.com/gpu.product`` of the nodes ("" for CPU-only nodes)."""
    invalid_mig: bool = field(init=False, default=False)
    """A mixed MIG layout under the ``single`` strategy: GFD reports ``…-MIG-INVALID``; unusable."""
    fits: dict[Any, int] = field(init=False, default_factory=dict, repr=False)
    """Memo of the estimator: replicas of a requirements value one node holds (and other per-node
    answers under tuple keys)."""

    def __post_init__(self) -> None:
        product = self.labels.get(LABEL_GPU_PRODUCT) or (self.gpu.product if self.gpu else "")
        object.__setattr__(self, "product", product)
        object.__setattr__(self, "invalid_mig", is_mig_invalid_product(product))

    def with_count(self, count: int) -> NodeShape:
        """``count`` of the same nodes; shares the per-node memo, which does not depend on the count."""
        return _piece(self, self.free, count, self.fits)

    def with_free(self, free: Mapping[str, int], count: int) -> NodeShape:
        """``count`` nodes like these with other free resources (a fresh per-node memo)."""
        return _piece(self, free, count, {})

    def named(self, hostnames: tuple[str, ...], count: int) -> NodeShape:
        """``count`` of the same nodes, named ``hostnames`` (:attr:`hostnames`); shares the per-node memo."""
        out = _piece(self, self.free, count, self.fits)
        _SET_HOSTNAMES(out, hostnames)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, cache: SchedulerCache | None = None) -> NodeShape:
        """Build from a reported ``nodeShapes[]`` entry; with ``cache``, the per-node memo is shared
        with every earlier shape of the same content (``SchedulerCache.node_memo``)."""
        gpu_raw = raw.get("gpu")
        gpu = (
            GpuInfo(
                product=str(gpu_raw.get("product") or ""),
                memory_mib=int(gpu_raw.get("memoryMiB") or 0),
                count=int(gpu_raw.get("count") or 0),
                mig_strategy=str(gpu_raw.get("migStrategy") or "none"),
                shared_replicas=int(gpu_raw.get("sharedReplicas") or 0),
            )
            if gpu_raw
            else None
        )
        shape = cls(
            count=int(raw.get("count") or 1),
            labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
            taints=tuple(FrozenTaint.from_dict(t) for t in raw.get("taints") or ()),
            free={str(k): int(v) for k, v in (raw.get("free") or {}).items()},
            allocatable={str(k): int(v) for k, v in (raw.get("allocatable") or {}).items()},
            gpu=gpu,
            hostnames=tuple(str(name) for name in raw.get("hostnames") or ()),
        )
        if cache is not None:
            object.__setattr__(shape, "fits", cache.node_memo(shape))
        return shape


_SLOT = slot_setters(NodeShape)
_SET_COUNT = _SLOT["count"]
_SET_LABELS = _SLOT["labels"]
_SET_TAINTS = _SLOT["taints"]
_SET_FREE = _SLOT["free"]
_SET_ALLOCATABLE = _SLOT["allocatable"]
_SET_GPU = _SLOT["gpu"]
_SET_HOSTNAMES = _SLOT["hostnames"]
_SET_PRODUCT = _SLOT["product"]
_SET_INVALID_MIG = _SLOT["invalid_mig"]
_SET_FITS = _SLOT["fits"]


def _piece(shape: NodeShape, free: Mapping[str, int], count: int, fits: dict[Any, int]) -> NodeShape:
    """A copy of ``shape`` with ``free``, ``count`` and ``fits`` replaced.

    Reservations split shapes on the estimator's hot path, so this sets the slots directly
    instead of running the frozen dataclass's ``__init__`` (a third of the cost); every
    other field, derived ones included, is the same as ``shape``'s. A new field of
    NodeShape must be copied here too (tests/scheduler check every field).
    """
    out: NodeShape = object.__new__(NodeShape)
    _SET_COUNT(out, count)
    _SET_LABELS(out, shape.labels)
    _SET_TAINTS(out, shape.taints)
    _SET_FREE(out, free)
    _SET_ALLOCATABLE(out, shape.allocatable)
    _SET_GPU(out, shape.gpu)
    _SET_HOSTNAMES(out, shape.hostnames)
    _SET_PRODUCT(out, shape.product)
    _SET_INVALID_MIG(out, shape.invalid_mig)
    _SET_FITS(out, fits)
    return out


class Adjustment(NamedTuple):
    """A reported snapshot's reservation-adjusted copy, as of one reservations version."""

    version: int
    """The cluster's reservations version (``Reservations.version``) it was made for."""
    snapshot: ClusterSnapshot
    generation: int
    """The cluster's journal generation then."""
    replayed: int
    """How many journal entries it replays."""


class SnapshotMemo:
    """What reservation replaying and the estimator remember about one snapshot: typed slots,
    never part of the snapshot's value (a copy made by ``with_shapes`` starts with an empty one)."""

    __slots__ = ("adjustment", "fit_vectors", "ledger", "origin", "previous_report")

    def __init__(self) -> None:
        self.adjustment: Adjustment | None = None
        """On a reported snapshot: its latest reservation-adjusted copy (``replaying``)."""
        self.ledger: Ledger | None = None
        """On an adjusted snapshot: who holds what on its pieces (taken over by the next adjustment)."""
        self.origin: Origin | None = None
        """On an adjusted snapshot: the snapshot it was adjusted from, and what changed."""
        self.previous_report: ReportChange | None = None
        """On a reported snapshot: how its shapes differ from the report before (``from_cluster``)."""
        self.fit_vectors: dict[ReplicaRequirements, list[int]] = {}
        """Per requirements, the replicas one node of each shape holds (``estimating.fit_vector``)."""


_SERIAL = "_serial"
_SERIALS = itertools.count(1)
_SERIAL_OF = attrgetter(_SERIAL)


def fleet_key(clusters: Iterable[ClusterSnapshot]) -> tuple[int, ...]:
    """The snapshots' serials (see :attr:`ClusterSnapshot.serial`), in order: equal keys, the same
    snapshots."""
    return tuple(map(_SERIAL_OF, clusters))


@dataclass(frozen=True, eq=False)
class ClusterSnapshot:
    """One member cluster as the scheduler sees it. Compared and hashed by identity."""

    name: str
    provider: str = ""
    region: str | None = None
    zone: str | None = None
    tier: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    pricing: Mapping[str, float] = field(default_factory=dict)
    taints: tuple[FrozenTaint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    report_time: datetime | None = None
    shapes: tuple[NodeShape, ...] = ()
    node_scoring: str = ""
    """``status.nodeScoring`` as reported ("" when absent: unknown)."""
    api_kinds: frozenset[tuple[str, str]] | None = None
    """``(groupVersion, kind)`` of every API ``status.apiEnablements`` lists (None: it lists none)."""
    # Memo tables owned by the estimator; never part of the value.
    estimates: dict[Any, Any] = field(default_factory=dict, repr=False)
    """Memo of the estimator: its estimate per requirements (and gang verdicts per gang)."""
    memo: SnapshotMemo = field(default_factory=lambda: SnapshotMemo(), repr=False)
    """Memo of reservation replaying and the estimator: how this snapshot relates to others."""
    filters: dict[str, Status | None] = field(default_factory=dict, repr=False)
    """Memo of the scheduler runtime: placement-only filters' first failure (None: passes) per
    placement key."""
    verdicts: dict[int, Feasibility | Status] = field(default_factory=dict, repr=False)
    """Memo of the GPU feasibility filter: its verdict per request kind, for clusters not running it."""

    def __post_init__(self) -> None:
        # Not a field: it identifies this object, it is not part of its value.
        self.__dict__[_SERIAL] = next(_SERIALS)

    @property
    def serial(self) -> int:
        """Unique to this snapshot (copies get their own): fleet-wide memos recognise a fleet by it
        without keeping its snapshots alive (an ``id`` may be reused once a snapshot is freed)."""
        serial: int = self.__dict__[_SERIAL]
        return serial

    @property
    def node_count(self) -> int:
        return sum(s.count for s in self.shapes)

    def field_value(self, name: str) -> str | None:
        """A spread/affinity field: ``cluster`` (the name), ``provider``, ``region`` or ``zone``."""
        if name == "cluster":
            return self.name
        if name == "provider":
            return self.provider or None
        if name == "region":
            return self.region
        if name == "zone":
            return self.zone
        return None

    @cached_property
    def view(self) -> ClusterView:
        """The policy language's view of this cluster (affinity, taints, spread, tiers)."""
        return ClusterView(
            name=self.name,
            labels=self.labels,
            provider=self.provider or None,
            region=self.region,
            zone=self.zone,
            tier=self.tier,
            taints=tuple(
                Taint.model_validate({"key": t.key, "value": t.value or None, "effect": t.effect})
                for t in self.taints
            ),
            unschedulable=self.unschedulable,
            pricing=self.pricing,
        )

    def with_shapes(self, shapes: tuple[NodeShape, ...]) -> ClusterSnapshot:
        """A copy with other node shapes (fresh caches), e.g. after subtracting reservations.

        Every reservation change makes one, so this copies the instance dictionary instead of
        running the dataclass ``__init__``; the cluster's ``view`` (which does not depend on
        the shapes) comes along when it was built.
        """
        out: ClusterSnapshot = object.__new__(ClusterSnapshot)
        fields = out.__dict__
        fields.update(self.__dict__)
        fields["shapes"] = shapes
        fields["estimates"] = {}
        fields["memo"] = SnapshotMemo()
        fields["filters"] = {}
        fields["verdicts"] = {}
        fields[_SERIAL] = next(_SERIALS)
        return out

    @classmethod
    def from_cluster(
        cls,
        cluster: BaseModel | Mapping[str, Any],
        *,
        previous: ClusterSnapshot | None = None,
        cache: SchedulerCache | None = None,
    ) -> ClusterSnapshot:
        """Build from a ``Cluster`` (pydantic model or its wire dict, camelCase keys).

        ``previous``: the snapshot of the cluster's last report, when there is one. The new
        snapshot then remembers which node shapes the report changed, so the estimator can
        move the previous report's estimates by those shapes instead of computing them anew.
        ``cache``: the scheduler's cache, where node shapes of the same content share their
        per-node memo across reports (without it, nothing is shared and ``previous`` is not used).
        """
        raw: Mapping[str, Any]
        if isinstance(cluster, BaseModel):
            raw = cluster.model_dump(mode="json", by_alias=True, exclude_none=True)
        else:
            raw = cluster
        view = ClusterObjectView(raw)
        spec = view.spec
        provider = str(spec.get("provider") or "")
        tier = spec.get("tier")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in view.conditions)
        report = view.last_report_time
        snapshot = cls(
            name=view.name,
            provider=provider,
            region=spec.get("region"),
            zone=spec.get("zone"),
            tier=int(tier) if tier is not None else (0 if provider == PROVIDER_ONPREM else 1),
            labels={str(k): str(v) for k, v in view.labels.items()},
            pricing={str(k): float(v) for k, v in (spec.get("pricing") or {}).items()},
            taints=tuple(FrozenTaint.from_dict(t) for t in view.taints),
            unschedulable=view.unschedulable,
            ready=ready,
            report_time=parse_time(report) if report else None,
            shapes=tuple(NodeShape.from_dict(s, cache=cache) for s in view.status.get("nodeShapes") or ()),
            node_scoring=str(view.status.get("nodeScoring") or ""),
            api_kinds=served_kinds(view.status),
        )
        if cache is not None and previous is not None and previous.name == snapshot.name:
            _link_report(previous, snapshot)
        return snapshot


class ReportChange(NamedTuple):
    """How a report's node shapes differ from the report before (see ``from_cluster``)."""

    estimates: dict[Any, Any]
    """The previous snapshot's estimate memo (only it: the rest of that snapshot can be freed)."""
    removed: list[NodeShape]
    added: list[NodeShape]


def _link_report(previous: ClusterSnapshot, snapshot: ClusterSnapshot) -> None:
    """Record in ``snapshot`` which shapes differ from ``previous`` (when few enough to be worth it).

    Shapes with the same content share their per-node memo (``SchedulerCache.node_memo``), so a shape the
    report repeats is found by that memo and its count.
    """
    if not previous.estimates:
        return
    unmatched: dict[tuple[int, int], list[NodeShape]] = {}
    for shape in previous.shapes:
        unmatched.setdefault((id(shape.fits), shape.count), []).append(shape)
    added: list[NodeShape] = []
    for shape in snapshot.shapes:
        bucket = unmatched.get((id(shape.fits), shape.count))
        if bucket:
            bucket.pop()
        else:
            added.append(shape)
    removed = [shape for bucket in unmatched.values() for shape in bucket]
    if len(removed) + len(added) < len(snapshot.shapes):
        snapshot.memo.previous_report = ReportChange(previous.estimates, removed, added)


def free_totals(snapshot: ClusterSnapshot | None) -> dict[str, int]:
    """Per resource, how much a cluster's report shows free over all its nodes (none without a report)."""
    totals: dict[str, int] = {}
    for shape in snapshot.shapes if snapshot is not None else ():
        for name, amount in shape.free.items():
            totals[name] = totals.get(name, 0) + shape.count * amount
    return totals


def resources_freed(before: ClusterSnapshot | None, after: ClusterSnapshot) -> frozenset[str]:
    """The resources of which ``after`` (a cluster's new report) shows more free than ``before``."""
    was = free_totals(before)
    return frozenset(name for name, amount in free_totals(after).items() if amount > was.get(name, 0))
