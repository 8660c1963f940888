"""The GPU feasibility filter: capacity per node and MIG-aware, via the estimator, and the GPU
shape each cluster takes.

The last filter of the default profile and the only one that reads capacity and reservations;
its verdicts are remembered per reservation-adjusted snapshot and per fleet
(:mod:`~controlplane.scheduler.core.plugins.verdict_memo`), and may be deferred: a decision
that needs only some asks them one at a time (:meth:`GpuFeasibility.filter_at`). No I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.estimating import Estimate
from controlplane.scheduler.core.estimator import can_ever_run, estimate_max_replicas
from controlplane.scheduler.core.framework import (
    SUCCESS,
    BindingRequest,
    Code,
    CycleState,
    Feasibility,
    GpuShape,
    Status,
)
from controlplane.scheduler.core.gangs import gang_fit
from controlplane.scheduler.core.plugins.scores import price_for
from controlplane.scheduler.core.plugins.verdict_memo import (
    KindVerdicts,
    VerdictBasis,
    left_since,
    remember_basis,
    taken_since,
)
from controlplane.scheduler.core.replaying import (
    adjusted_at,
    adjusted_snapshot,
    base_holding_as_many,
)
from controlplane.scheduler.core.reservations import Checkpoint, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, fleet_key
from policies.models import DivisionStrategy


def _prefixed(shape: GpuShape | None, reasons: tuple[str, ...], several: bool) -> list[str]:
    if not several:
        return list(reasons)
    label = f"shape {shape.describe()}" if shape else "requested shape"
    return [f"{label}: {r}" for r in reasons]


_FLEET_LIMIT = 32
"""Request kinds ``Reservations.verdicts_by_kind`` keeps (the least recently used go first)."""

Verdict = Feasibility | Status
"""What :class:`GpuFeasibility` decides for one cluster: where and how it fits, or why not."""

def _verdict_key(request: BindingRequest, strategy: DivisionStrategy, cache: SchedulerCache) -> int:
    """Identifies everything a verdict depends on besides the cluster, for a cluster that
    does not run the binding (no current replicas, no cap): a small id from ``cache``, so the
    per-snapshot verdict memo hashes an int."""
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
    return cache.verdict_id(key)


@functools.lru_cache(maxsize=1024)
def _shaped(requirements: ReplicaRequirements, shapes: tuple[GpuShape, ...]) -> tuple[ReplicaRequirements, ...]:
    return (requirements, *(shape.apply(requirements) for shape in shapes))


def _options(request: BindingRequest) -> tuple[ReplicaRequirements, ...]:
    """The per-replica requirements of each GPU shape the request may take, its own first."""
    if not request.gpu_shapes:
        return (request.requirements,)
    return _shaped(request.requirements, request.gpu_shapes)


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
    of an unchanged cluster costs a dict lookup. Reasons are worked out when read. A binding
    running nowhere starts from the verdicts the last decision of the same request kind reached
    over the same fleet (``Reservations.verdicts_by_kind``) and judges again only the clusters whose snapshot
    or reservations changed since; a feasible verdict carries over to a later adjustment that
    touched only nodes holding none of the request, or one that only took pods of the request
    itself (see :func:`left_since`). A binding that runs somewhere reads the same memo, for its
    own clusters too. Decisions that need only some verdicts ask them one at a time
    (:meth:`filter_at`), the rest when their explanation is read.
    """

    name = "GpuFeasibility"
    placement_only = False

    def filter(self, state: CycleState, cluster: ClusterSnapshot) -> Status:
        verdict = self._judge(state, self._key(state), cluster)
        if isinstance(verdict, Status):
            return verdict
        state.feasibility[cluster.name] = verdict
        return SUCCESS

    @staticmethod
    def _key(state: CycleState) -> int:
        key = state.request_kind
        if key is None:
            key = state.request_kind = _verdict_key(state.request, state.strategy, state.cache)
        return key

    def filter_at(self, state: CycleState, cluster: ClusterSnapshot, checkpoint: Checkpoint | None) -> Status:
        """:meth:`filter` for a cluster not running the binding, with the reservations as at
        ``checkpoint`` (None: as they are now)."""
        reservations = state.reservations
        if (
            checkpoint is not None
            and reservations is not None
            and reservations.version(cluster.name) != checkpoint.version(cluster.name)
        ):
            snapshot = adjusted_at(cluster, checkpoint)
        else:
            snapshot = adjusted_snapshot(cluster, reservations)
        key = self._key(state)
        memo = snapshot.verdicts
        verdict: Verdict | None = memo.get(key)
        if verdict is None:
            verdict = memo[key] = self._fresh(state.request, state.strategy, cluster, snapshot, key)
        if isinstance(verdict, Status):
            return verdict
        state.feasibility[cluster.name] = verdict
        return SUCCESS

    def filter_all_at(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot], checkpoint: Checkpoint | None
    ) -> dict[str, Status]:
        """:meth:`filter_at` of many clusters, none running the binding (the explanation of a
        decision that judged only some): the failing status of each one that fails."""
        reservations = state.reservations
        versions = reservations.versions() if reservations is not None else {}
        changed = checkpoint.changed if checkpoint is not None and reservations is not None else ()
        key = self._key(state)
        request, strategy = state.request, state.strategy
        feasibility = state.feasibility
        failed: dict[str, Status] = {}
        for cluster in clusters:
            name = cluster.name
            snapshot: ClusterSnapshot | None = cluster
            if name in changed:
                assert checkpoint is not None
                snapshot = adjusted_at(cluster, checkpoint)
            elif versions.get(name, 0):
                cached = cluster.memo.adjustment
                snapshot = cached.snapshot if cached is not None and cached.version == versions[name] else None
                if snapshot is None:
                    snapshot = adjusted_snapshot(cluster, reservations)
            assert snapshot is not None
            memo = snapshot.verdicts
            verdict: Verdict | None = memo.get(key)
            if verdict is None:
                verdict = memo[key] = self._fresh(request, strategy, cluster, snapshot, key)
            if isinstance(verdict, Feasibility):
                feasibility[name] = verdict
            else:
                failed[name] = verdict
        return failed

    def filter_all(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot]
    ) -> tuple[list[ClusterSnapshot], dict[str, Status]]:
        request = state.request
        key = self._key(state)
        feasibility = state.feasibility
        previous = request.previous
        reservations = state.reservations
        if reservations is not None and not previous:
            return self._filter_fleet(state, clusters, key, reservations)
        versions = reservations.versions() if reservations is not None else {}
        # A binding that runs somewhere: its clusters are judged afresh, the others may be known to
        # the last decision of the same request kind over the fleet (only read here).
        known = reservations.verdicts_by_kind.get(key) if reservations is not None else None
        if known is not None:
            assert reservations is not None
            stale = set(reservations.changed_since(known.clock))
            serial_of = dict(zip(known.names, known.serials, strict=True))
            lean = not request.gang and not request.gpu_shapes
            need = max(request.replicas if state.strategy is DivisionStrategy.DUPLICATED else min(1, request.replicas), 1)
        passed: list[ClusterSnapshot] = []
        failed: dict[str, Status] = {}
        for cluster in clusters:
            name = cluster.name
            verdict: Verdict | None = None
            if previous and previous.get(name):
                if known is not None and lean and serial_of.get(name) == cluster.serial:
                    verdict = self._running(state, cluster, known, previous[name])
                if verdict is None:
                    verdict = self._judge(state, key, cluster)
            elif known is not None and serial_of.get(name) == cluster.serial:
                assert reservations is not None
                if name not in stale:
                    verdict = known.feasible.get(name) or known.failed.get(name)
                elif lean and (basis := known.bases.get(name)) is not None:
                    verdict = taken_since(
                        basis, known.feasible.get(name), reservations.journal(name), request.requirements, need, {}, name
                    )
            if verdict is None:
                # _judge's memo path, inlined: this loop runs for every cluster of every decision.
                version = versions.get(name, 0)
                snapshot: ClusterSnapshot | None = cluster
                if version:
                    cached = cluster.memo.adjustment
                    snapshot = cached.snapshot if cached is not None and cached.version == version else None
                    if snapshot is None:
                        snapshot = adjusted_snapshot(cluster, reservations)
                assert snapshot is not None
                memo = snapshot.verdicts
                verdict = memo.get(key)
                if verdict is None:
                    verdict = memo[key] = self._fresh(request, state.strategy, cluster, snapshot, key)
            if isinstance(verdict, Feasibility):
                feasibility[name] = verdict
                passed.append(cluster)
            else:
                assert verdict is not None
                failed[name] = verdict
        return passed, failed

    def _running(
        self, state: CycleState, cluster: ClusterSnapshot, known: KindVerdicts, current: int
    ) -> Feasibility | None:
        """The verdict for ``cluster``, which runs ``current`` replicas of a single-shape binding,
        from what the fleet memo knew of it as a cluster not running it (the estimate is the same;
        only what counts as placed and the caps differ). None when that cannot be told."""
        name = cluster.name
        basis = known.bases.get(name)
        reservations = state.reservations
        if basis is None or reservations is None:
            return None
        before = known.feasible.get(name)
        requirements = state.request.requirements
        found = left_since(basis, before, reservations.journal(name), requirements)
        if found is None:
            return None
        assert before is not None
        request = state.request
        need = request.replicas if state.strategy is DivisionStrategy.DUPLICATED else min(1, request.replicas)
        available = 0 if name in state.caps else found[1]
        if available + _already_there(cluster, requirements, current) < need:
            return None  # a rejection: its reasons come from the replayed snapshot
        return Feasibility(
            available=available, requirements=requirements, products=before.products, price=before.price
        )

    def _filter_fleet(
        self, state: CycleState, clusters: Sequence[ClusterSnapshot], key: int, reservations: Reservations
    ) -> tuple[list[ClusterSnapshot], dict[str, Status]]:
        """:meth:`filter_all` for a binding running nowhere, from the verdicts the last decision of
        the same request kind over the same clusters reached: only the clusters whose snapshot or
        reservations changed since are judged again (as :meth:`_judge` would)."""
        whole = state.serials
        # The clusters judged here are a subsequence of the cycle's fleet: as many means the same.
        serials = whole if whole is not None and len(whole) == len(clusters) else fleet_key(clusters)
        memo = reservations.verdicts_by_kind
        found = memo.get(key)
        stale: Collection[str]
        reported: Collection[str] = ()
        if found is not None and found.serials == serials:
            names, positions = found.names, found.positions
            stale = reservations.changed_since(found.clock)
        else:
            names = tuple(c.name for c in clusters)
            if found is not None and found.names == names:  # the same clusters, some reported since
                positions = found.positions
                reported = {name for name, a, b in zip(names, serials, found.serials, strict=True) if a != b}
                stale = {*reservations.changed_since(found.clock), *reported}
            else:
                found = None
                positions = {name: i for i, name in enumerate(names)}
                stale = names
        if found is None:
            passed: list[int] = []
            failed: dict[str, Status] = {}
            feasible: dict[str, Feasibility] = {}
            bases: dict[str, VerdictBasis] = {}
        else:
            passed, failed, feasible, bases = found.passed, found.failed, found.feasible, found.bases
        if stale:
            failed, feasible, bases = dict(failed), dict(feasible), dict(bases)
            request, strategy = state.request, state.strategy
            lean = not request.gang and not request.gpu_shapes
            requirements = request.requirements
            need = max(request.replicas if strategy is DivisionStrategy.DUPLICATED else min(1, request.replicas), 1)
            flipped = found is None
            for name in stale:
                position = positions.get(name)
                if position is None:
                    continue
                verdict: Verdict | None = None
                basis = bases.pop(name, None)
                if basis is not None and name not in reported:
                    verdict = taken_since(basis, feasible.get(name), reservations.journal(name), requirements, need, bases, name)
                if verdict is None:
                    cluster = clusters[position]
                    snapshot = adjusted_snapshot(cluster, reservations)
                    verdicts = snapshot.verdicts
                    verdict = verdicts.get(key)
                    if verdict is None:
                        verdict = verdicts[key] = self._fresh(request, strategy, cluster, snapshot, key)
                    if lean and isinstance(verdict, Feasibility):
                        remember_basis(bases, name, cluster, snapshot, requirements)
                if isinstance(verdict, Feasibility):
                    flipped = flipped or name not in feasible
                    feasible[name] = verdict
                    failed.pop(name, None)
                else:
                    flipped = flipped or name not in failed
                    failed[name] = verdict
                    feasible.pop(name, None)
            if flipped:
                passed = [i for i, name in enumerate(names) if name in feasible]
        # Least recently used first: the entries hold verdicts (and through their reasons, node
        # shapes) of snapshots since replaced, so only a few request kinds are kept.
        if memo.pop(key, None) is None and len(memo) >= _FLEET_LIMIT:
            del memo[next(iter(memo))]
        memo[key] = KindVerdicts(serials, names, positions, reservations.clock, passed, failed, feasible, bases)
        state.feasibility.update(feasible)
        return [clusters[i] for i in passed], dict(failed)

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
            verdict = memo[key] = self._fresh(request, state.strategy, cluster, snapshot, key)
        return verdict

    def _fresh(
        self,
        request: BindingRequest,
        strategy: DivisionStrategy,
        cluster: ClusterSnapshot,
        snapshot: ClusterSnapshot,
        key: int,
    ) -> Verdict:
        """The verdict for ``cluster`` (not running the binding) whose reservation-adjusted view is
        ``snapshot``, known to no memo yet.

        A cluster found feasible on a snapshot ``snapshot`` was adjusted from stays feasible, with
        the same capacity, shape, products and price, when the adjustments since changed only
        nodes that hold none of its replicas: the usual case for a reservation of another kind of
        GPU. (A rejection is worked out again: its reasons describe the nodes as they are.)
        """
        if not request.gang:
            base = base_holding_as_many(
                snapshot, _options(request), knows=lambda node: isinstance(node.verdicts.get(key), Feasibility)
            )
            if base is not None:
                return base.verdicts[key]  # a Feasibility: what ``knows`` looked for
        return self._verdict(request, strategy, cluster, snapshot, current=0, capped=False)

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
