"""Filter plugins: which clusters may take a binding at all.

Each returns a :class:`~controlplane.scheduler.core.framework.Status`; the reasons end
up in the binding's explanation. Placement rules (affinity, taints, cordon, readiness,
spread fields) come from the policy language in :mod:`policies.affinity`; capacity comes
from the estimator. Clusters that already run the binding get two allowances, as in
Karmada: NoSchedule taints do not push them out (only NoExecute does), and a cordoned or
not-Ready cluster keeps what it runs but takes nothing more; so does a cluster the request
names in ``keep_only`` (its member reported replicas it cannot place, which move elsewhere).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence

from controlplane.apis.meta import taints_tolerated
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.estimator import (
    ADJUSTED,
    Estimate,
    adjusted_snapshot,
    can_ever_run,
    estimate_max_replicas,
    gang_fit,
)
from controlplane.scheduler.core.framework import (
    SUCCESS,
    BindingRequest,
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


Verdict = Feasibility | Status
"""What :class:`GpuFeasibility` decides for one cluster: where and how it fits, or why not."""

_VERDICT_KEYS: dict[tuple[object, ...], int] = {}
"""Request key -> a small id, so the per-snapshot verdict memo hashes an int (never reused)."""
_VERDICT_KEY_LIMIT = 16_384
_verdict_ids = itertools.count(1)


def _verdict_key(request: BindingRequest, strategy: DivisionStrategy) -> int:
    """Identifies everything a verdict depends on besides the cluster, for a cluster that
    does not run the binding (no current replicas, no cap)."""
    if request.gang:
        key: tuple[object, ...] = (
            True,
            request.requirements,
            request.replicas,
            request.gang_components(),
            request.gpu_shapes,
        )
    else:
        duplicated = strategy is DivisionStrategy.DUPLICATED
        need = request.replicas if duplicated else min(1, request.replicas)
        key = (False, request.requirements, duplicated, need, request.gpu_shapes)
    found = _VERDICT_KEYS.get(key)
    if found is None:
        if len(_VERDICT_KEYS) >= _VERDICT_KEY_LIMIT:
            _VERDICT_KEYS.clear()  # ids are never reused, so forgetting one only costs a recomputation
        found = _VERDICT_KEYS[key] = next(_verdict_ids)
    return found


def _capacity_reasons(estimate: Estimate, duplicated: bool, current: int, need: int) -> tuple[str, ...]:
    if duplicated and estimate.replicas:
        return (f"holds {estimate.replicas + current} of {need} replicas (Duplicated needs all)", *estimate.reasons)
    return estimate.reasons


def _already_there(cluster: ClusterSnapshot, requirements: ReplicaRequirements, current: int) -> int:
    """How many of the ``current`` replicas ``cluster`` runs for the binding count as placed
    under ``requirements``: all when some node there could run them (or the cluster reports no
    nodes to judge by), none when the per-replica request changed to one it cannot run (another
    GPU model pinned, a shape it lacks): those replicas have to be placed anew."""
    if not current or not cluster.shapes or can_ever_run(cluster, requirements):
        return current
    return 0


def _all_reasons(parts: Sequence[tuple[GpuShape | None, Callable[[], tuple[str, ...]]]]) -> tuple[str, ...]:
    several = len(parts) > 1
    return tuple(reason for shape, why in parts for reason in _prefixed(shape, why(), several))


class KeepOnly:
    """Clusters the request lists in ``keep_only`` keep what they run of it and take nothing new.

    One that runs none of it is rejected with the request's reason; one that runs some keeps
    them (a cap, as for a cordoned cluster) and says why in the explanation.
    """

    name = "KeepOnly"
    placement_only = False

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        reason = state.request.keep_only.get(cluster.name)
        if reason is None:
            return SUCCESS
        current = state.request.previous.get(cluster.name, 0)
        if current:
            state.caps[cluster.name] = current
            state.cap_reasons[cluster.name] = reason
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, (reason,), self.name)

    def filter_all(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot]
    ) -> tuple[list[ClusterSnapshot], dict[str, Status]]:
        if not state.request.keep_only:  # the usual case: nothing to look at
            return list(clusters), {}
        passed: list[ClusterSnapshot] = []
        failed: dict[str, Status] = {}
        for cluster in clusters:
            status = self.filter(state, cluster)
            if status.ok:
                passed.append(cluster)
            else:
                failed[cluster.name] = status
        return passed, failed


class GpuFeasibility:
    """Capacity, per node and MIG-aware, via the estimator; picks the GPU shape per cluster.

    Tries the workload's own request, then each ``gpuShapes`` alternative in order; the
    first that fits wins. "Fits" means at least one more replica (Divided), all replicas
    (Duplicated), or every pod at once (gangs). A gang already running whole in this
    cluster, unchanged in size, keeps its place. Replicas the cluster already runs count
    towards "fits" only for a shape some node there could run (``can_ever_run``): after the
    per-replica request changes to one the cluster cannot run, they count for nothing.

    For a cluster that does not run the binding the verdict depends only on the cluster's
    reservation-adjusted snapshot and the request's requirements, shapes, gang and replica
    need, so it is remembered on that snapshot: the next binding asking the same question
    of an unchanged cluster costs a dict lookup. Reasons are worked out when read.
    """

    name = "GpuFeasibility"
    placement_only = False

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        verdict = self._judge(state, _verdict_key(state.request, state.strategy), cluster)
        if isinstance(verdict, Status):
            return verdict
        state.feasibility[cluster.name] = verdict
        return SUCCESS

    def filter_all(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot]
    ) -> tuple[list[ClusterSnapshot], dict[str, Status]]:
        request = state.request
        key = _verdict_key(request, state.strategy)
        feasibility = state.feasibility
        previous = request.previous
        reservations = state.reservations
        versions = reservations.versions() if reservations is not None else {}
        passed: list[ClusterSnapshot] = []
        failed: dict[str, Status] = {}
        for cluster in clusters:
            name = cluster.name
            verdict: Verdict | None
            if previous and previous.get(name):
                verdict = self._judge(state, key, cluster)
            else:
                # _judge's memo path, inlined: this loop runs for every cluster of every decision.
                version = versions.get(name, 0)
                snapshot: ClusterSnapshot | None = cluster
                if version:
                    cached = cluster.adjusted.get(ADJUSTED)
                    snapshot = cached[1] if cached is not None and cached[0] == version else None
                    if snapshot is None:
                        snapshot = adjusted_snapshot(cluster, reservations)
                assert snapshot is not None
                memo = snapshot.verdicts
                verdict = memo.get(key)
                if verdict is None:
                    verdict = memo[key] = self._verdict(
                        request, state.strategy, cluster, snapshot, current=0, capped=False
                    )
            if isinstance(verdict, Feasibility):
                feasibility[name] = verdict
                passed.append(cluster)
            else:
                assert verdict is not None
                failed[name] = verdict
        return passed, failed

    def _judge(self, state: CycleState, key: int, cluster: ClusterSnapshot) -> Verdict:
        request = state.request
        snapshot = adjusted_snapshot(cluster, state.reservations)
        current = request.previous.get(cluster.name, 0) if request.previous else 0
        if current:
            # Runs the binding: the verdict depends on what it runs there and on caps.
            capped = cluster.name in state.caps
            return self._verdict(request, state.strategy, cluster, snapshot, current=current, capped=capped)
        memo = snapshot.verdicts
        verdict: Verdict | None = memo.get(key)
        if verdict is None:
            verdict = memo[key] = self._verdict(request, state.strategy, cluster, snapshot, current=0, capped=False)
        return verdict

    def _verdict(
        self,
        request: BindingRequest,
        strategy: DivisionStrategy,
        cluster: ClusterSnapshot,
        snapshot: ClusterSnapshot,
        *,
        current: int,
        capped: bool,
    ) -> Verdict:
        """The verdict for ``cluster`` whose reservation-adjusted view is ``snapshot``."""
        duplicated = strategy is DivisionStrategy.DUPLICATED
        if not request.gang and not request.gpu_shapes:
            # The common case, kept lean: one shape, no gang.
            requirements = request.requirements
            estimate = estimate_max_replicas(snapshot, requirements)
            available = 0 if capped else estimate.replicas
            need = request.replicas if duplicated else min(1, request.replicas)
            held = _already_there(cluster, requirements, current)
            if available + held >= need:
                return Feasibility(
                    available=available,
                    requirements=requirements,
                    products=estimate.products,
                    price=price_for(cluster, requirements, estimate.products) if cluster.pricing else 0.0,
                )
            return Status(
                Code.UNSCHEDULABLE,
                plugin=self.name,
                explain=functools.partial(_capacity_reasons, estimate, duplicated, held, need),
            )
        options: tuple[GpuShape | None, ...] = (None, *request.gpu_shapes)
        parts: list[tuple[GpuShape | None, Callable[[], tuple[str, ...]]]] = []
        if request.gang:
            if current and current == request.replicas:
                # Running whole here: it stays, in the first shape the cluster can still run.
                for shape in options:
                    requirements = shape.apply(request.requirements) if shape else request.requirements
                    if all(
                        _already_there(cluster, shape.apply(c.requirements) if shape else c.requirements, c.replicas)
                        == c.replicas
                        for c in request.gang_components()
                    ):
                        return Feasibility(
                            available=0,
                            requirements=requirements,
                            shape=shape,
                            price=price_for(cluster, requirements, ()),
                        )
            if capped:
                return Status(Code.UNSCHEDULABLE, ("cluster takes no new replicas",), self.name)
            for shape in options:
                components = request.gang_components()
                if shape is not None:
                    components = tuple(
                        type(c)(name=c.name, replicas=c.replicas, requirements=shape.apply(c.requirements))
                        for c in components
                    )
                ok, why = gang_fit(snapshot, components)
                if ok:
                    requirements = shape.apply(request.requirements) if shape else request.requirements
                    return Feasibility(
                        available=request.replicas,
                        requirements=requirements,
                        shape=shape,
                        price=price_for(cluster, requirements, ()),
                    )
                parts.append((shape, why))
            return Status(Code.UNSCHEDULABLE, plugin=self.name, explain=functools.partial(_all_reasons, parts))

        need = request.replicas if duplicated else min(1, request.replicas)
        for shape in options:
            requirements = shape.apply(request.requirements) if shape else request.requirements
            estimate = estimate_max_replicas(snapshot, requirements)
            available = 0 if capped else estimate.replicas
            held = _already_there(cluster, requirements, current)
            if available + held >= need:
                return Feasibility(
                    available=available,
                    requirements=requirements,
                    shape=shape,
                    products=estimate.products,
                    price=price_for(cluster, requirements, estimate.products),
                )
            parts.append((shape, functools.partial(_capacity_reasons, estimate, duplicated, held, need)))
        return Status(Code.UNSCHEDULABLE, plugin=self.name, explain=functools.partial(_all_reasons, parts))
