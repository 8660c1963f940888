"""Filter plugins: which clusters may take a binding at all.

Each returns a :class:`~controlplane.scheduler.core.framework.Status`; the reasons end
up in the binding's explanation. Placement rules (affinity, taints, cordon, readiness,
spread fields) come from the policy language in :mod:`policies.affinity`; capacity comes
from the estimator. Clusters that already run the binding get two allowances, as in
Karmada: NoSchedule taints do not push them out (only NoExecute does), and a cordoned or
not-Ready cluster keeps what it runs but takes nothing more.
"""

from __future__ import annotations

from controlplane.apis.meta import taints_tolerated
from controlplane.scheduler.core.estimator import estimate_max_replicas, fits_gang
from controlplane.scheduler.core.framework import (
    SUCCESS,
    Code,
    CycleState,
    Feasibility,
    GpuShape,
    Status,
)
from controlplane.scheduler.core.plugins.scores import price_for
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import cluster_matches_affinity, spread_group, tolerates_cluster_taints
from policies.models import DivisionStrategy


class ClusterAffinity:
    """The current affinity term (``clusterAffinity`` or one ``clusterAffinities[]`` term)."""

    name = "ClusterAffinity"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        verdict = cluster_matches_affinity(cluster.view, state.term)
        if verdict.fits:
            return SUCCESS
        return Status(Code.UNRESOLVABLE, (verdict.reason,), self.name)


class TaintToleration:
    """Cluster taints against ``placement.clusterTolerations``."""

    name = "TaintToleration"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        if not cluster.taints:
            return SUCCESS
        tolerations = state.request.tolerations
        if cluster.name in state.request.previous:
            ok, taint = taints_tolerated(cluster.view.taints, tolerations, effects=("NoExecute",))
            if ok or taint is None:
                return SUCCESS
            value = f"={taint.value}" if taint.value else ""
            return Status(
                Code.UNRESOLVABLE,
                (f"cluster has taint {taint.key}{value}:NoExecute that the placement does not tolerate",),
                self.name,
            )
        verdict = tolerates_cluster_taints(cluster.view, tolerations)
        return SUCCESS if verdict.fits else Status(Code.UNRESOLVABLE, (verdict.reason,), self.name)


class Cordon:
    """A cordoned cluster (``spec.unschedulable``) takes no new replicas; it keeps the ones it runs."""

    name = "Cordon"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        if not cluster.unschedulable:
            return SUCCESS
        current = state.request.previous.get(cluster.name, 0)
        if current:
            state.caps[cluster.name] = current
            return SUCCESS
        return Status(Code.UNRESOLVABLE, ("cluster is cordoned (spec.unschedulable)",), self.name)


class ClusterReady:
    """A cluster that is not Ready has no trustworthy capacity: no new replicas, keeps the ones it runs.

    Moving replicas off a failed cluster is failover's job (NoExecute taints with
    tolerationSeconds), not the scheduler's.
    """

    name = "ClusterReady"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        if cluster.ready:
            return SUCCESS
        current = state.request.previous.get(cluster.name, 0)
        if current:
            state.caps[cluster.name] = current
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, ("cluster is not Ready",), self.name)


class SpreadConstraint:
    """Clusters lacking the field or label a spread constraint groups by cannot be counted in a group."""

    name = "SpreadConstraint"
    placement_only = True

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        for constraint in state.request.placement.spread_constraints or ():
            if spread_group(cluster.view, constraint) is None:
                what = (
                    f"label {constraint.spread_by_label}"
                    if constraint.spread_by_label
                    else constraint.effective_field or "cluster"
                )
                return Status(
                    Code.UNRESOLVABLE, (f"cluster has no {what} to spread by (spreadConstraints)",), self.name
                )
        return SUCCESS


def _prefixed(shape: GpuShape | None, reasons: tuple[str, ...], several: bool) -> list[str]:
    if not several:
        return list(reasons)
    label = f"shape {shape.describe()}" if shape else "requested shape"
    return [f"{label}: {r}" for r in reasons]


class GpuFeasibility:
    """Capacity, per node and MIG-aware, via the estimator; picks the GPU shape per cluster.

    Tries the workload's own request, then each ``gpuShapes`` alternative in order; the
    first that fits wins. "Fits" means at least one more replica (Divided), all replicas
    (Duplicated), or every pod at once (gangs). A gang already running whole in this
    cluster, unchanged in size, keeps its place.
    """

    name = "GpuFeasibility"
    placement_only = False

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        request = state.request
        current = request.previous.get(cluster.name, 0) if request.previous else 0
        capped = cluster.name in state.caps if state.caps else False
        if not request.gang and not request.gpu_shapes:
            # The common case, kept lean: one shape, no gang.
            requirements = request.requirements
            estimate = estimate_max_replicas(cluster, requirements, reserved=state.reservations)
            available = 0 if capped else estimate.replicas
            duplicated = state.strategy is DivisionStrategy.DUPLICATED
            need = request.replicas if duplicated else min(1, request.replicas)
            if available + current >= need:
                state.feasibility[cluster.name] = Feasibility(
                    available=available,
                    requirements=requirements,
                    products=estimate.products,
                    price=price_for(cluster, requirements, estimate.products) if cluster.pricing else 0.0,
                )
                return SUCCESS
            why = estimate.reasons
            if duplicated and estimate.replicas:
                why = (f"holds {estimate.replicas + current} of {need} replicas (Duplicated needs all)", *why)
            return Status(Code.UNSCHEDULABLE, why, self.name)
        options: tuple[GpuShape | None, ...] = (None, *request.gpu_shapes)
        several = len(options) > 1
        reasons: list[str] = []
        if request.gang:
            if current and current == request.replicas:
                state.feasibility[cluster.name] = Feasibility(
                    available=0,
                    requirements=request.requirements,
                    price=price_for(cluster, request.requirements, ()),
                )
                return SUCCESS
            if capped:
                return Status(Code.UNSCHEDULABLE, ("cluster takes no new replicas",), self.name)
            for shape in options:
                components = request.gang_components()
                if shape is not None:
                    components = tuple(
                        type(c)(name=c.name, replicas=c.replicas, requirements=shape.apply(c.requirements))
                        for c in components
                    )
                ok, why = fits_gang(cluster, components, reserved=state.reservations)
                if ok:
                    requirements = shape.apply(request.requirements) if shape else request.requirements
                    state.feasibility[cluster.name] = Feasibility(
                        available=request.replicas,
                        requirements=requirements,
                        shape=shape,
                        price=price_for(cluster, requirements, ()),
                    )
                    return SUCCESS
                reasons.extend(_prefixed(shape, why, several))
            return Status(Code.UNSCHEDULABLE, tuple(reasons), self.name)

        need = request.replicas if state.strategy is DivisionStrategy.DUPLICATED else min(1, request.replicas)
        for shape in options:
            requirements = shape.apply(request.requirements) if shape else request.requirements
            estimate = estimate_max_replicas(cluster, requirements, reserved=state.reservations)
            available = 0 if capped else estimate.replicas
            if available + current >= need:
                state.feasibility[cluster.name] = Feasibility(
                    available=available,
                    requirements=requirements,
                    shape=shape,
                    products=estimate.products,
                    price=price_for(cluster, requirements, estimate.products),
                )
                return SUCCESS
            why = estimate.reasons
            if state.strategy is DivisionStrategy.DUPLICATED and estimate.replicas:
                why = (f"holds {estimate.replicas + current} of {need} replicas (Duplicated needs all)", *why)
            reasons.extend(_prefixed(shape, why, several))
        return Status(Code.UNSCHEDULABLE, tuple(reasons), self.name)
