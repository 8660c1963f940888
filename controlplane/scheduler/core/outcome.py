"""What one scheduling decision produced: clusters and replicas, the condition, and why.

:class:`ScheduleResult` holds the decision :func:`~controlplane.scheduler.core.deciding.schedule`
took and its ``Scheduled`` condition (:class:`ScheduledCondition`); its per-cluster
explanation (chosen or not, and why) is built when first read, from values fixed at
decision time, so decisions whose explanation is never read do not pay for it.
:func:`decision_result` assembles one from a decision's division, verdicts and scores. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core import packhints, rarenodes, sharehints
from controlplane.scheduler.core.estimating import UNLIMITED
from controlplane.scheduler.core.explanation import ClusterExplanation, cluster_explanation, rejection_reasons
from controlplane.scheduler.core.framework import Code, CycleState, GpuShape, Status
from controlplane.scheduler.core.plugins import cluster_price
from controlplane.scheduler.core.slots import worked_out
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from controlplane.scheduler.core.steering import describe, steering, steering_enabled


@dataclass(frozen=True, slots=True)
class ScheduledCondition:
    """The binding's ``Scheduled`` condition as decided (the controller stamps the times)."""

    status: bool
    reason: ScheduledReason
    message: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "Scheduled",
            "status": "True" if self.status else "False",
            "reason": str(self.reason),
            "message": self.message,
        }


def scheduled(replicas: int, clusters: int) -> ScheduledCondition:
    """``Scheduled`` True: all ``replicas`` found a place, in ``clusters`` clusters."""
    return ScheduledCondition(True, ScheduledReason.SUCCESS, f"scheduled {replicas} replica(s) to {clusters} cluster(s)")


Explanation = list[ClusterExplanation]

GANG_HOLDS = "holds the whole gang"
"""The reason of the cluster a gang was placed in."""


class ScheduleResult:
    """What :func:`schedule` decided. Immutable.

    ``explanation`` (one entry per cluster looked at) is built when first read, from
    values fixed at decision time, so reading it later gives the same answer; decisions
    whose explanation is never read do not pay for it.
    """

    __slots__ = (
        "_explain",
        "_explanation",
        "affinity_name",
        "chosen_shapes",
        "clusters",
        "condition",
        "packing",
        "requirements",
        "shapes",
        "short_of_room",
        "steering",
        "unplaced",
    )

    clusters: dict[str, int]
    """Cluster -> replicas (the new ``spec.clusters``)."""
    shapes: dict[str, dict[str, int]]
    """Cluster -> per-replica GPU request, only where an alternative GPU shape was chosen."""
    condition: ScheduledCondition
    affinity_name: str | None
    """The winning ``clusterAffinities`` term (None without ``clusterAffinities``)."""
    unplaced: int
    requirements: dict[str, ReplicaRequirements]
    """Per chosen cluster, the per-replica requirements with its GPU shape applied."""
    chosen_shapes: dict[str, GpuShape]
    """Per chosen cluster where an alternative won, that alternative."""
    steering: dict[str, tuple[str, ...]]
    """Per chosen cluster where its replicas are steered away from GPU models, those models
    (:mod:`~controlplane.scheduler.core.steering`)."""
    short_of_room: frozenset[str]
    """For a binding that goes to every feasible cluster (a Duplicated workload, a kind without
    replicas; not a gang), the clusters its placement admits that it was left out of for want of
    room now: room freeing there may add them (empty for other bindings)."""
    packing: dict[str, tuple[str, ...]]
    """Per chosen cluster where its replicas are packed toward nodes already running GPU work, those
    nodes (:mod:`~controlplane.scheduler.core.packhints`)."""
    _explanation: Explanation | None
    _explain: Callable[[], Explanation] | None

    def __init__(
        self,
        clusters: dict[str, int],
        shapes: dict[str, dict[str, int]],
        condition: ScheduledCondition,
        affinity_name: str | None,
        explanation: Explanation | None,
        unplaced: int,
        requirements: dict[str, ReplicaRequirements] | None = None,
        chosen_shapes: dict[str, GpuShape] | None = None,
        steering: dict[str, tuple[str, ...]] | None = None,
        packing: dict[str, tuple[str, ...]] | None = None,
        *,
        explain: Callable[[], Explanation] | None = None,
        short_of_room: frozenset[str] = frozenset(),
    ) -> None:
        """``explanation`` as a list, or None with ``explain`` building it on first read."""
        init = object.__setattr__
        init(self, "clusters", clusters)
        init(self, "shapes", shapes)
        init(self, "condition", condition)
        init(self, "affinity_name", affinity_name)
        init(self, "unplaced", unplaced)
        init(self, "requirements", {} if requirements is None else requirements)
        init(self, "chosen_shapes", {} if chosen_shapes is None else chosen_shapes)
        init(self, "steering", {} if steering is None else steering)
        init(self, "short_of_room", short_of_room)
        init(self, "packing", {} if packing is None else packing)
        init(self, "_explanation", explanation if explanation is not None or explain is None else None)
        init(self, "_explain", None if explanation is not None else explain)
        if explanation is None and explain is None:
            init(self, "_explanation", [])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ScheduleResult is immutable (cannot set {name})")

    @property
    def explanation(self) -> Explanation:
        """Per cluster looked at, in name order: chosen or not, and why."""
        explanation: Explanation | None = self._explanation
        if explanation is None:
            explanation = worked_out(self, "_explanation", self._explain)
        return explanation

    @property
    def placed(self) -> int:
        return sum(self.clusters.values())

    def target_clusters(self) -> list[dict[str, Any]]:
        """The ResourceBinding ``spec.clusters`` form."""
        return [{"name": name, "replicas": replicas} for name, replicas in sorted(self.clusters.items())]

    def _fields(self) -> tuple[object, ...]:
        return (
            self.clusters,
            self.shapes,
            self.condition,
            self.affinity_name,
            self.explanation,
            self.unplaced,
            self.requirements,
            self.chosen_shapes,
            self.steering,
            self.packing,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScheduleResult):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable dicts inside, as the dataclass was

    def __repr__(self) -> str:
        return (
            f"ScheduleResult(clusters={self.clusters!r}, shapes={self.shapes!r}, condition={self.condition!r}, "
            f"affinity_name={self.affinity_name!r}, unplaced={self.unplaced!r}, "
            f"requirements={self.requirements!r}, chosen_shapes={self.chosen_shapes!r}, steering={self.steering!r}, "
            f"packing={self.packing!r})"
        )


Scores = Callable[[], Mapping[str, float]]
"""Scores per feasible cluster, worked out when first called (then remembered)."""


def no_scores() -> Mapping[str, float]:
    return {}


LazyReasons = Callable[[], Mapping[str, str]] | None
"""Division reasons worked out only when the explanation is read (None: there are none)."""


def capacity_of(state: CycleState, name: str) -> int:
    feasibility = state.feasibility.get(name)
    return feasibility.available if feasibility else 0


def decision_result(
    state: CycleState,
    clusters: Sequence[ClusterSnapshot],
    *,
    assignments: dict[str, int],
    unplaced: int,
    condition: ScheduledCondition,
    rejected: Mapping[str, Status],
    scores: Scores,
    division_reasons: Mapping[str, str],
    affinity_name: str | None,
    more_reasons: LazyReasons = None,
) -> ScheduleResult:
    request = state.request
    feasibility_of = state.feasibility
    shapes: dict[str, dict[str, int]] = {}
    chosen_shapes: dict[str, GpuShape] = {}
    requirements: dict[str, ReplicaRequirements] = {}
    for name in sorted(assignments):
        feasibility = feasibility_of.get(name)
        requirements[name] = feasibility.requirements if feasibility else request.requirements
        if feasibility is not None and feasibility.shape is not None:
            shapes[name] = feasibility.shape.resource_map
            chosen_shapes[name] = feasibility.shape
    decided = dict(assignments)
    # Steering and packing hints are worked out for the clusters that get their first replicas,
    # only when the policy asks for one of them (most decisions do not: no walk over the clusters).
    # A request whose Work takes no preferred node-affinity term (a TrainJob) gets none.
    asked = request.rewritable and (
        steering_enabled(state)
        or packhints.packing_enabled(state)
        or sharehints.share_hints_wanted(state, requirements)
    )
    fresh = [c for c in clusters if assignments.get(c.name) and not request.previous.get(c.name)] if asked else []
    steered = steering(state, fresh, requirements)
    kept = rarenodes.rare_steering(state, fresh, clusters, requirements)
    packed = packhints.packing_hints(state, fresh, requirements)
    # Read now: the recent demand moves on with later decisions, the explanation is written later.
    waited = packhints.by_demand(state) if packed else None
    # Shares are packed only while the hints above wait for multi-GPU demand: never both.
    shared = sharehints.share_hints(state, fresh, requirements)
    if shared:
        packed = {**packed, **{name: hint.hosts for name, hint in shared.items()}}
    short_of_room: frozenset[str] = frozenset()
    if request.goes_everywhere and not request.gang:
        # Rejected for capacity now (Duplicated: not all its replicas fit), not by the placement itself.
        short_of_room = frozenset(name for name, status in rejected.items() if status.code is Code.UNSCHEDULABLE)

    def explain() -> Explanation:
        reasons_of = {**division_reasons, **more_reasons()} if more_reasons is not None else division_reasons
        inside = (steered, kept, packed, waited, shared)
        return _explanation(state, clusters, decided, rejected, scores(), reasons_of, inside)

    return ScheduleResult(
        clusters=assignments,
        shapes=shapes,
        condition=condition,
        affinity_name=affinity_name,
        explanation=None,
        unplaced=unplaced,
        requirements=requirements,
        chosen_shapes=chosen_shapes,
        steering=rarenodes.merged(steered, kept) if kept else steered,
        packing=packed,
        explain=explain,
        short_of_room=short_of_room,
    )


def _explanation(
    state: CycleState,
    clusters: Sequence[ClusterSnapshot],
    assignments: Mapping[str, int],
    rejected: Mapping[str, Status],
    scores: Mapping[str, float],
    division_reasons: Mapping[str, str],
    inside: tuple[
        Mapping[str, tuple[str, ...]],
        Mapping[str, tuple[str, ...]],
        Mapping[str, tuple[str, ...]],
        tuple[float, float] | None,
        Mapping[str, sharehints.ShareHint],
    ],
) -> Explanation:
    """``inside``: the decision's steering, rare node steering and packing hints, per cluster, the multi-GPU demand
    the hints waited for (:func:`~controlplane.scheduler.core.packhints.by_demand`) and, of the
    packing hints, those of a share (:func:`~controlplane.scheduler.core.sharehints.share_hints`)."""
    request = state.request
    steered, kept, packed, waited, shared = inside
    explanation: Explanation = []
    for cluster in clusters:
        name = cluster.name
        status = rejected.get(name)
        if status is not None:
            # A rejected cluster's entry depends on the verdict and the cluster only, and verdicts
            # are reused by later decisions: so is the entry.
            memo = status.memo
            entry = memo.get(cluster.serial)
            if entry is None:
                entry = memo[cluster.serial] = ClusterExplanation(
                    cluster=name,
                    chosen=False,
                    reasons=rejection_reasons(status),
                    tier=cluster.tier,
                    price=cluster.view.price_per_gpu_hour(None),
                )
            explanation.append(entry)
            continue
        feasibility = state.feasibility.get(name)
        chosen = name in assignments
        reasons: tuple[str, ...]
        if chosen:
            reasons = (_holds(capacity_of(state, name), request.previous.get(name, 0)) if not request.gang
                       else GANG_HOLDS,)
            if feasibility is not None and feasibility.shape is not None:
                reasons += (f"GPU shape {feasibility.shape.describe()} (alternative)",)
            if name in state.tie_reasons:
                reasons += (state.tie_reasons[name],)
            if name in steered:
                reasons += (describe(steered[name]),)
            if name in kept:
                reasons += (rarenodes.describe(kept[name]),)
            if name in shared:
                reasons += (sharehints.describe(shared[name], cluster.node_scoring),)
            elif name in packed:
                reasons += (
                    packhints.describe(packed[name], packhints.by_scoring(state, cluster), waited),
                )
            if name in state.caps:
                reasons += (
                    state.cap_reasons.get(name)
                    or "takes no new replicas (cordoned or not Ready); keeps the ones it runs",
                )
        else:
            reasons = (
                state.tie_reasons.get(name) or division_reasons.get(name) or "feasible but not needed by the division",
            )
        explanation.append(
            cluster_explanation(
                name,
                chosen=chosen,
                replicas=assignments.get(name, 0),
                reasons=reasons,
                score=scores.get(name),
                tier=cluster.tier,
                price=feasibility.price if feasibility is not None else cluster_price(state, cluster),
            )
        )
    return explanation


def _holds(capacity: int, running: int) -> str:
    """A chosen cluster's reason: how many replicas it can hold (a pod that requests nothing the
    estimator counts fits without limit, and says so rather than print the sentinel)."""
    if capacity >= UNLIMITED:
        return "holds any number of replicas (its pods request nothing that runs out)"
    return f"holds {capacity + running} replica(s)"
