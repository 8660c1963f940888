"""The scheduling framework: plugin contracts, per-cycle state and the filter/score runtime.

Modelled on kube-scheduler's framework (``framework/interface.go``): a filter plugin says
whether one cluster can take the binding and returns a :class:`Status` whose reasons
become the binding's explanation; a score plugin returns a number per cluster; the
runtime runs filters in order (stopping at the first failure per cluster), then scores
the survivors, normalises every plugin's scores to 0..100 and sums them by weight.

The per-cycle :class:`CycleState` is how plugins share work: the GPU feasibility filter
stores each cluster's estimate, chosen GPU shape and capacity there, and the division
step and scorers read it. A plugin may also judge or score all clusters in one call
(:class:`BatchFilterPlugin`, :class:`BatchScorePlugin`): every decision looks at every
cluster, so the per-cluster call overhead is worth saving. The last filter may be a
:class:`DeferrableFilterPlugin`: :func:`run_filters_deferring` then leaves the clusters it
would judge to the caller, which asks only those it needs (the scheduler's tiered overflow).

The placement-only verdicts of a whole fleet are remembered in the scheduler's cache
(:class:`~controlplane.scheduler.core.cache.SchedulerCache`, which the cycle carries) per
placement and fleet (snapshot serials, never the snapshots themselves), so an unchanged fleet
is screened with one comparison. Everything is in memory; no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from controlplane.apis.meta import Toleration
from controlplane.apis.quantity import to_int
from controlplane.apis.trainer import is_train_job
from controlplane.apis.work_v1alpha1 import ResourceBinding
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import FleetVerdicts, SchedulerCache, Screened
from controlplane.scheduler.core.reservations import Checkpoint, Reservations
from controlplane.scheduler.core.slots import worked_out
from controlplane.scheduler.core.snapshot import ClusterSnapshot, fleet_key
from policies.models import ClusterAffinityTerm, DivisionStrategy, GpuShapeAlternative, Placement


class Code(StrEnum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    """The cluster cannot take the binding now (capacity); it may later."""
    UNRESOLVABLE = "UnschedulableAndUnresolvable"
    """The placement itself rules the cluster out (affinity, taints, cordon)."""


class Status:
    """A filter's verdict: its code, the plugin that gave it and the reasons (kube-scheduler style).

    The reasons may be given as ``explain``, a function worked out on first access: most
    rejections are only counted, and the reasons are read when the explanation is written.
    Immutable; equal when code, reasons and plugin are.
    """

    __slots__ = ("_explain", "_memo", "_reasons", "code", "plugin")

    code: Code
    plugin: str
    _reasons: tuple[str, ...] | None
    _explain: Callable[[], tuple[str, ...]] | None
    _memo: dict[Any, Any] | None

    def __init__(
        self,
        code: Code = Code.SUCCESS,
        reasons: tuple[str, ...] = (),
        plugin: str = "",
        *,
        explain: Callable[[], tuple[str, ...]] | None = None,
    ) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "plugin", plugin)
        object.__setattr__(self, "_reasons", reasons if explain is None else None)
        object.__setattr__(self, "_explain", explain)
        object.__setattr__(self, "_memo", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Status is immutable (cannot set {name})")

    @property
    def reasons(self) -> tuple[str, ...]:
        reasons: tuple[str, ...] | None = self._reasons
        if reasons is None:
            reasons = worked_out(self, "_reasons", self._explain)
        return reasons

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def memo(self) -> dict[Any, Any]:
        """Answers worked out from this verdict, kept with it (a verdict is itself remembered and
        reused by later decisions): e.g. the cluster's explanation entry. Not part of the value."""
        memo = self._memo
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo", memo)
        return memo

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.plugin, self.reasons) == (other.code, other.plugin, other.reasons)

    def __hash__(self) -> int:
        return hash((self.code, self.plugin, self.reasons))

    def __repr__(self) -> str:
        return f"Status(code={self.code!r}, reasons={self.reasons!r}, plugin={self.plugin!r})"


SUCCESS = Status()


@dataclass(frozen=True, slots=True)
class GpuShape:
    """One acceptable per-replica GPU request (``spec.gpuShapes.alternatives[]``), parsed."""

    resources: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...] = ()
    name: str = ""

    @property
    def resource_map(self) -> dict[str, int]:
        return dict(self.resources)

    def describe(self) -> str:
        text = ",".join(f"{k}={v}" for k, v in self.resources)
        return f"{self.name} ({text})" if self.name else text

    def apply(self, requirements: ReplicaRequirements) -> ReplicaRequirements:
        """``requirements`` with this shape's GPU request and extra node selector.

        Memoised, so every decision asks the estimator about the same requirements object
        (its caches then hit by identity).
        """
        return _apply_shape(self, requirements)

    def _apply(self, requirements: ReplicaRequirements) -> ReplicaRequirements:
        changed = requirements.with_gpu_shape(self.resource_map)
        if not self.node_selector or changed is requirements:
            return changed
        selector = dict(changed.node_selector)
        selector.update(self.node_selector)
        return ReplicaRequirements.build(
            changed.resource_map,
            node_selector=selector,
            node_affinity=changed.node_affinity,
            tolerations=changed.tolerations,
            priority_class_name=changed.priority_class_name,
            shared=dict(changed.shared),
        )

    @classmethod
    def from_alternative(cls, alternative: GpuShapeAlternative) -> GpuShape:
        return cls(
            resources=tuple(sorted((k, to_int(k, v)) for k, v in alternative.resources.items())),
            node_selector=tuple(sorted((alternative.node_selector or {}).items())),
            name=alternative.name or "",
        )


@functools.lru_cache(maxsize=4096)
def _apply_shape(shape: GpuShape, requirements: ReplicaRequirements) -> ReplicaRequirements:
    return shape._apply(requirements)


@dataclass(frozen=True)
class BindingRequest:
    """What the scheduler needs from a ResourceBinding (built by the scheduler controller).

    ``previous`` is the binding's current ``spec.clusters`` (for stability and scale-down
    order); ``previous_affinity_name`` its ``status.schedulerObservingAffinityName``;
    ``gpu_shapes`` the policy's ``spec.gpuShapes.alternatives`` as the binding carries them
    (tried after the workload's own request); ``components`` the roles of a multi-role gang;
    ``keep_only`` the clusters that take none of its new replicas (the controller sets it when
    it moves replicas a member cannot place). ``rewritable`` is False for a kind whose Work the
    binding controller cannot give an alternative GPU shape or a preferred node-affinity term (a
    TrainJob: :data:`~controlplane.apis.trainer_runtime.NO_ALTERNATIVE_SHAPES`); such a request
    has no ``gpu_shapes`` and gets no steering or packing hints. ``has_replicas`` is False for a kind without
    replicas (no interpreter: ConfigMap, Service, a CRD without a scale subresource); its binding
    then has no ``spec.replicaRequirements``, and the whole object goes to every feasible cluster.
    """

    key: str
    replicas: int
    requirements: ReplicaRequirements
    placement: Placement = field(default_factory=Placement)
    gang: bool = False
    components: tuple[Component, ...] = ()
    gpu_shapes: tuple[GpuShape, ...] = ()
    previous: Mapping[str, int] = field(default_factory=dict)
    previous_affinity_name: str | None = None
    keep_only: Mapping[str, str] = field(default_factory=dict)
    """Clusters that keep the replicas they run of the binding but take no new ones in this
    decision, each with why (it goes into the explanation): e.g. its member reported replicas
    it cannot place, which are being moved elsewhere."""
    rewritable: bool = True
    api_version: str = ""
    """The workload's apiVersion and kind (the binding's ``spec.resource``); "": not known, every
    cluster serves it as far as the APIEnablement filter is concerned."""
    kind: str = ""
    has_replicas: bool = True
    """False for a kind without replicas: it goes whole to every feasible cluster, whatever the
    division (Karmada's ``assignReplicas`` for a non-workload), instead of where a workload scaled
    to zero would be kept."""

    @property
    def strategy(self) -> DivisionStrategy:
        return self.placement.division_strategy

    @property
    def goes_everywhere(self) -> bool:
        """Whether it goes to every feasible cluster: a kind without replicas, or a Duplicated workload."""
        return not self.has_replicas or self.strategy is DivisionStrategy.DUPLICATED

    @property
    def tolerations(self) -> Sequence[Toleration]:
        return self.placement.cluster_tolerations or ()

    @classmethod
    def from_binding(
        cls, binding: ResourceBinding, *, gpu_shapes: Sequence[GpuShapeAlternative] | None = None
    ) -> BindingRequest:
        """Build from a ResourceBinding; ``gpu_shapes``, when given, replace its ``spec.gpuShapes``
        (the claiming policy's, copied by the detector)."""
        spec = binding.spec
        if gpu_shapes is None:
            gpu_shapes = spec.gpu_shapes.alternatives if spec.gpu_shapes is not None else ()
        rewritable = not is_train_job({"apiVersion": spec.resource.api_version, "kind": spec.resource.kind})
        if not rewritable:
            gpu_shapes = ()
        requirements = (
            spec.replica_requirements.model_dump(mode="json", by_alias=True, exclude_none=True)
            if spec.replica_requirements is not None
            else None
        )
        status = binding.status
        return cls(
            key=f"{binding.metadata.namespace or ''}/{binding.metadata.name or ''}",
            replicas=spec.replicas,
            requirements=ReplicaRequirements.from_spec(requirements),
            placement=spec.placement or Placement(),
            gang=bool(spec.gang),
            components=tuple(
                Component.from_spec(c.model_dump(mode="json", by_alias=True, exclude_none=True))
                for c in spec.components or ()
            ),
            gpu_shapes=tuple(GpuShape.from_alternative(a) for a in gpu_shapes),
            previous={c.name: c.replicas for c in spec.clusters or ()},
            previous_affinity_name=status.scheduler_observing_affinity_name if status else None,
            rewritable=rewritable,
            api_version=spec.resource.api_version,
            kind=spec.resource.kind,
            # The detector writes replicaRequirements for every kind it has an interpreter for.
            has_replicas=spec.replica_requirements is not None or spec.replicas > 0,
        )

    def gang_components(self) -> tuple[Component, ...]:
        """The pods of a gang as components (one component for a single-template gang)."""
        if self.components:
            return self.components
        return (Component(name="replicas", replicas=self.replicas, requirements=self.requirements),)


@dataclass(frozen=True, slots=True)
class Feasibility:
    """What the GPU feasibility filter found for one cluster."""

    available: int
    """More replicas the cluster can hold beyond what it runs for this binding now."""
    requirements: ReplicaRequirements
    """Per-replica requirements with the chosen GPU shape applied."""
    shape: GpuShape | None = None
    """The alternative chosen, or None for the workload's own request."""
    products: tuple[str, ...] = ()
    price: float = 0.0
    """Dollars per GPU-hour the binding pays there (see ``plugins.scores.cluster_price``)."""


@dataclass
class CycleState:
    """State of one scheduling attempt for one affinity term."""

    request: BindingRequest
    term: ClusterAffinityTerm
    reservations: Reservations | None
    now: datetime
    cache: SchedulerCache
    """The scheduler's cache (memos that outlive the cycle)."""
    feasibility: dict[str, Feasibility] = field(default_factory=dict)
    caps: dict[str, int] = field(default_factory=dict)
    """Clusters that keep what they run but take no more (cordoned or not Ready while assigned)."""
    cap_reasons: dict[str, str] = field(default_factory=dict)
    """Why a cluster in ``caps`` takes no more, when not because it is cordoned or not Ready."""
    fleet_clusters: Sequence[ClusterSnapshot] = ()
    """Every cluster the decision looks at (the fleet whose free GPUs scarcity weighs demand against)."""
    tie_reasons: dict[str, str] = field(default_factory=dict)
    """What decided between clusters tied on tier and price (``tiebreak``), per cluster of the tie."""
    strategy: DivisionStrategy = field(init=False)
    """The placement's division strategy, resolved once per cycle."""
    placement_key: str = field(init=False)
    """Identifies the placement rules of this cycle (term, tolerations, spread) and the workload's
    kind (which the APIEnablement filter judges) across bindings."""
    request_kind: int | None = None
    """GPU feasibility's id of the cycle's request kind (``SchedulerCache.verdict_id``), worked out once."""
    serials: tuple[int, ...] | None = None
    """:func:`fleet_key` of the clusters this cycle looks at (see :meth:`fleet`)."""

    def __post_init__(self) -> None:
        self.strategy = self.request.strategy
        request = self.request
        self.placement_key = placement_key(
            self.term, request.placement, self.cache, kind=(request.api_version, request.kind)
        )

    def fleet(self, clusters: Sequence[ClusterSnapshot]) -> tuple[int, ...]:
        """:func:`fleet_key` of ``clusters``, the fleet of this cycle (worked out once)."""
        serials = self.serials
        if serials is None:
            serials = self.serials = fleet_key(clusters)
        return serials


def placement_key(
    term: ClusterAffinityTerm,
    placement: Placement,
    cache: SchedulerCache,
    *,
    kind: tuple[str, str] = ("", ""),
) -> str:
    """A string identifying the placement rules of ``term`` under ``placement`` (term, tolerations,
    spread constraints) for a workload of ``kind`` (apiVersion, kind): equal keys mean the
    placement-only filters give equal verdicts.

    Remembered in ``cache`` per (term, placement) object and kind: bindings of one policy share
    them, and the JSON rendering is a noticeable part of a decision otherwise.
    """
    memo_key = (id(term), id(placement), *kind)
    found = cache.placement_keys.get(memo_key)
    if found is not None and found[0] is term and found[1] is placement:
        return found[2]
    key = "|".join(
        (
            term.model_dump_json(exclude_none=True),
            "["
            + ",".join(t.model_dump_json(exclude_none=True) for t in placement.cluster_tolerations or ())
            + "]",
            "["
            + ",".join(c.model_dump_json(exclude_none=True) for c in placement.spread_constraints or ())
            + "]",
            *kind,
        )
    )
    cache.placement_keys.remember(memo_key, (term, placement, key))
    return key


class FilterPlugin(Protocol):
    """Says whether one cluster can take the binding.

    ``placement_only`` plugins decide from the cluster and the placement rules alone for
    clusters that do not run the binding yet (no capacity, no reservations, no cycle
    state); the runtime then remembers their verdict per (cluster snapshot, placement).
    """

    name: str
    placement_only: bool

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status: ...


class BatchFilterPlugin(FilterPlugin, Protocol):
    """A filter that can also judge many clusters in one call; the runtime then prefers that.

    ``filter_all`` must give every cluster the verdict ``filter`` would, in the order given:
    it returns the clusters that pass and the failing status of each one that does not.
    """

    def filter_all(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot]
    ) -> tuple[list[ClusterSnapshot], dict[str, Status]]: ...


class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, cluster: ClusterSnapshot) -> float: ...


class BatchScorePlugin(ScorePlugin, Protocol):
    """A scorer that can also score many clusters in one call (``score`` of each, in order)."""

    def score_all(self, state: CycleState, clusters: Sequence[ClusterSnapshot]) -> list[float]: ...


@dataclass(frozen=True)
class WeightedScorer:
    plugin: ScorePlugin
    weight: float = 1.0


@dataclass(frozen=True)
class Profile:
    """The plugins of one scheduler profile, in the order they run."""

    filters: tuple[FilterPlugin, ...]
    scorers: tuple[WeightedScorer, ...]


class DeferrableFilterPlugin(BatchFilterPlugin, Protocol):
    """A filter whose verdicts on clusters that do not run the binding may be asked one at a time,
    when needed (the division may need only a few), and later, as of a :class:`Checkpoint` of the
    reservations taken when the decision was made (the explanation needs the rest)."""

    def filter_at(self, state: CycleState, cluster: ClusterSnapshot, checkpoint: Checkpoint | None) -> Status:
        """:meth:`filter` of ``cluster`` (which does not run the binding) with the reservations as
        at ``checkpoint`` (None: as they are)."""
        ...

    def filter_all_at(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot], checkpoint: Checkpoint | None
    ) -> dict[str, Status]:
        """:meth:`filter_at` of each of ``clusters``: the failing status of each one that fails."""
        ...


_UNKNOWN = Status(Code.UNRESOLVABLE, ("not judged",), "")
"""Placeholder verdict of a cluster that ran the binding judged when it was remembered."""


def _placement_verdicts(
    filters: Sequence[FilterPlugin], state: CycleState, fleet: Sequence[ClusterSnapshot], serials: tuple[int, ...]
) -> list[Status | None]:
    """The placement-only verdicts of ``fleet`` for a binding not running in the cluster
    (``_UNKNOWN`` where this cycle's binding runs and none was remembered).

    Remembered in the cache per (fleet, placement) (``SchedulerCache.fleet_verdicts``, with
    ``_UNKNOWN`` placeholders): an unchanged fleet costs one tuple comparison, and a
    fleet where some clusters reported since looks only at those (each snapshot also keeps its
    own verdicts, so a snapshot seen in another fleet is not judged again).
    """
    key = state.placement_key
    memo = state.cache.fleet_verdicts
    found = memo.get(key)
    if found is not None and found.serials == serials and not found.unknown:
        return found.verdicts
    before = found.serials if found is not None and len(found.serials) == len(serials) else ()
    previous = state.request.previous
    verdicts: list[Status | None] = []
    unknown = False
    for i, cluster in enumerate(fleet):
        if before and before[i] == serials[i]:
            assert found is not None
            kept = found.verdicts[i]
            if kept is not _UNKNOWN:
                verdicts.append(kept)
                continue
        judged = cluster.filters
        if key in judged:
            verdicts.append(judged[key])
        elif previous and cluster.name in previous:
            # The plugins judge a cluster running the binding by other rules: not this answer.
            verdicts.append(_UNKNOWN)
            unknown = True
        else:
            verdict = judged[key] = _first_failure(filters, state, cluster)
            verdicts.append(verdict)
    memo.remember(key, FleetVerdicts(serials, verdicts, unknown))
    return verdicts


def _screened(
    state: CycleState, serials: tuple[int, ...], clusters: Sequence[ClusterSnapshot], verdicts: Sequence[Status | None]
) -> tuple[list[int], dict[str, Status]]:
    """The positions passing the placement-only filters and the verdicts of the others, for a
    binding running nowhere (remembered per fleet and placement: ``SchedulerCache.screened``)."""
    key = state.placement_key
    memo = state.cache.screened
    found = memo.get(key)
    if found is not None and found.serials == serials:
        return found.passing, found.failing
    passing: list[int] = []
    failing: dict[str, Status] = {}
    for i, verdict in enumerate(verdicts):
        if verdict is None:
            passing.append(i)
        else:
            failing[clusters[i].name] = verdict
    memo.remember(key, Screened(serials, passing, failing))
    return passing, failing


def run_filters(
    profile: Profile, state: CycleState, clusters: Sequence[ClusterSnapshot]
) -> tuple[list[ClusterSnapshot], dict[str, Status]]:
    """Clusters passing every filter, and the first failing status of each rejected cluster.

    Placement-only filters run first, their verdicts remembered per (snapshot, placement);
    then each other filter over the clusters still in, all at once when it is a
    :class:`BatchFilterPlugin`.
    """
    passed, rejected, _ = _run_filters(profile, state, clusters, defer=False)
    return passed, rejected


def run_filters_deferring(
    profile: Profile, state: CycleState, clusters: Sequence[ClusterSnapshot]
) -> tuple[list[ClusterSnapshot], dict[str, Status], list[ClusterSnapshot]]:
    """:func:`run_filters`, except that the last filter, when it is a :class:`DeferrableFilterPlugin`,
    judges only the clusters running the binding. The others passing every filter before it are
    returned third (in the order given), for the caller to judge as it needs them."""
    return _run_filters(profile, state, clusters, defer=True)


def deferrable(profile: Profile) -> DeferrableFilterPlugin | None:
    """The profile's last filter when its verdicts can be deferred (see :func:`run_filters_deferring`)."""
    last = profile.filters[-1] if profile.filters else None
    if last is None or last.placement_only or getattr(last, "filter_at", None) is None:
        return None
    plugin: DeferrableFilterPlugin = last  # type: ignore[assignment]  # checked just above
    return plugin


def _run_filters(
    profile: Profile, state: CycleState, clusters: Sequence[ClusterSnapshot], *, defer: bool
) -> tuple[list[ClusterSnapshot], dict[str, Status], list[ClusterSnapshot]]:
    rejected: dict[str, Status] = {}
    filters = profile.filters
    cut = next((i for i, plugin in enumerate(filters) if not plugin.placement_only), len(filters))
    placement_filters, other_filters = filters[:cut], filters[cut:]
    previous = state.request.previous
    serials = state.fleet(clusters)
    verdicts = _placement_verdicts(placement_filters, state, clusters, serials)
    candidates: list[ClusterSnapshot] = []
    if not previous:
        passing, failing = _screened(state, serials, clusters, verdicts)
        candidates = [clusters[i] for i in passing]
        rejected.update(failing)
    else:
        for cluster, verdict in zip(clusters, verdicts, strict=True):
            if cluster.name in previous:
                verdict = _first_failure(placement_filters, state, cluster)
            if verdict is not None:
                rejected[cluster.name] = verdict
            else:
                candidates.append(cluster)
    deferred: list[ClusterSnapshot] = []
    last = deferrable(profile) if defer else None
    if last is not None and other_filters and other_filters[-1] is last:
        other_filters = other_filters[:-1]
    else:
        last = None
    success = Code.SUCCESS
    for plugin in other_filters:
        if not candidates:
            break
        filter_all = getattr(plugin, "filter_all", None)
        if filter_all is not None:
            candidates, failed = filter_all(state, candidates)
            rejected.update(failed)
            continue
        kept: list[ClusterSnapshot] = []
        for cluster in candidates:
            status = plugin.filter(state, cluster)
            if status is not SUCCESS and status.code is not success:
                rejected[cluster.name] = status
            else:
                kept.append(cluster)
        candidates = kept
    if last is not None and candidates:
        running = [c for c in candidates if previous.get(c.name)] if previous else []
        deferred = [c for c in candidates if not previous.get(c.name)] if running else candidates
        candidates = []
        if running:
            candidates, failed = last.filter_all(state, running)
            rejected.update(failed)
    return candidates, rejected, deferred


def _first_failure(
    filters: Sequence[FilterPlugin], state: CycleState, cluster: ClusterSnapshot
) -> Status | None:
    for plugin in filters:
        status = plugin.filter(state, cluster)
        if status is not SUCCESS and status.code is not Code.SUCCESS:
            return status
    return None


def run_scorers(profile: Profile, state: CycleState, clusters: Sequence[ClusterSnapshot]) -> dict[str, float]:
    """Weighted sum of each plugin's scores, each min-max normalised to 0..100 over ``clusters``."""
    totals = {c.name: 0.0 for c in clusters}
    if len(clusters) < 2:
        return totals
    for weighted in profile.scorers:
        plugin = weighted.plugin
        score_all = getattr(plugin, "score_all", None)
        raw: list[float] = (
            score_all(state, clusters) if score_all is not None else [plugin.score(state, c) for c in clusters]
        )
        low, high = min(raw), max(raw)
        if high == low:
            continue
        scale = 100.0 * weighted.weight / (high - low)
        for cluster, value in zip(clusters, raw, strict=True):
            totals[cluster.name] += (value - low) * scale
    return totals
