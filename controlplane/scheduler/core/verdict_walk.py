"""Only the verdicts a decision needs: GPU feasibility judged cluster by cluster in (tier,
price, name) order, stopping where the replicas run out.

Tiered overflow, and a gang with nothing to break a tie of tier and price, fill clusters in
(tier, price, name) order. Each cluster's tier and cheapest listed price bound its place
from below, so that order is known before the verdicts (:func:`_bound_order`, remembered per
fleet); :class:`VerdictWalk` judges clusters in it and stops where the replicas run out.
The other clusters' verdicts only feed the explanation: they are worked out when it is
first read, against the reservations as they stood at the decision
(``Reservations.checkpoint``), so it says exactly what an eager decision would have.

Clusters that tie on (tier, price) are all judged (their first ``TIE_LIMIT`` names) before the
first of them is filled, and are filled in :mod:`~controlplane.scheduler.core.tiebreak` order
rather than by name, as the eager division does. No I/O.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Mapping, Sequence
from operator import itemgetter

from controlplane.scheduler.core.cache import BoundOrder, SchedulerCache
from controlplane.scheduler.core.dividing import UNTIERED, Row, not_needed_reason, tier_rows
from controlplane.scheduler.core.framework import (
    SUCCESS,
    Code,
    CycleState,
    DeferrableFilterPlugin,
    Status,
    run_scorers,
)
from controlplane.scheduler.core.outcome import ScheduleResult, decision_result, no_scores, scheduled
from controlplane.scheduler.core.plugins import DEFAULT_PROFILE
from controlplane.scheduler.core.pricebands import band_percent, banded, fleet_band_starts
from controlplane.scheduler.core.reservations import Checkpoint
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from controlplane.scheduler.core.tiebreak import TIE_LIMIT, rank
from policies.division import TierCandidate, divide_tiered_overflow, tier_of
from policies.models import TieredOverflow

Bound = tuple[int, float, str]
"""(tier, lowest price, cluster): no cluster comes earlier in (tier, price, name) order than this."""


def _bound_order(
    fleet: Sequence[ClusterSnapshot],
    serials: tuple[int, ...],
    tiered: TieredOverflow | None,
    cache: SchedulerCache,
    starts: tuple[float, ...] = (),
) -> tuple[list[tuple[Bound, int]], bool]:
    """The fleet's positions in order of the earliest place each cluster could take in (tier,
    price, name) order, whatever its verdict: its tier and its cheapest listed price (every price a
    binding pays there is one of those); and whether some cluster has taints.

    With price bands (``starts``, see ``pricebands``) the price is its band's start.

    Remembered per fleet in ``cache`` (``SchedulerCache.bound_orders``); a new report of a cluster rarely moves it (its tier and prices are in
    its spec), so a fleet that differs from the last one by reports is sorted again only then.
    """
    listed = tiered is not None and bool(tiered.tiers)
    percent = (tiered.price_band_percent or 0.0) if tiered is not None else 0.0
    key = (id(tiered) if listed else 0, percent)
    memo = cache.bound_orders
    found = memo.get(key)
    if found is not None and (found.tiered is tiered or not listed) and found.starts == starts:
        if found.serials == serials:
            return found.order, found.tainted
        if len(found.serials) == len(serials):
            bounds = list(found.bounds)
            moved = False
            for index, (now, before) in enumerate(zip(serials, found.serials, strict=True)):
                if now != before:
                    bound = _bound(fleet[index], tiered if listed else None, starts)
                    moved = moved or bound != bounds[index]
                    bounds[index] = bound
            if not moved:
                tainted = any(cluster.taints for cluster in fleet)
                memo[key] = found._replace(serials=serials, bounds=bounds, tainted=tainted)
                return found.order, tainted
    bounds = [_bound(cluster, tiered if listed else None, starts) for cluster in fleet]
    order = sorted(((bound, index) for index, bound in enumerate(bounds) if bound is not None), key=_FIRST)
    tainted = any(cluster.taints for cluster in fleet)
    memo.remember(key, BoundOrder(serials, tiered if listed else None, bounds, order, tainted, starts))
    return order, tainted


def _bound(cluster: ClusterSnapshot, tiered: TieredOverflow | None, starts: tuple[float, ...]) -> Bound | None:
    tier = tier_of(cluster.view, tiered) if tiered is not None else cluster.tier
    if tier is None:
        return None
    lowest = min(cluster.pricing.values(), default=0.0)
    return (tier, banded(lowest, starts) if starts else lowest, cluster.name)


_FIRST = itemgetter(0)


class VerdictWalk:
    """Judges the deferred clusters of one decision in (tier, price, name) order, as far as needed.

    ``decide`` returns the decision when the division is settled without the verdicts it did
    not ask for; those are worked out when the explanation is read, with the reservations as
    they were at the decision (a checkpoint), so the explanation is the one an eager decision
    gives. Otherwise (replicas left unplaced, no gang fits, ties to break) it judges every
    cluster and returns None, and the decision goes on as an eager one.
    """

    def __init__(
        self,
        state: CycleState,
        plugin: DeferrableFilterPlugin,
        clusters: Sequence[ClusterSnapshot],
        feasible: list[ClusterSnapshot],
        rejected: dict[str, Status],
        deferred: list[ClusterSnapshot],
    ) -> None:
        self.state = state
        self.plugin = plugin
        self.clusters = clusters
        self.running = feasible
        """Clusters running the binding that passed every filter (judged already)."""
        self.rejected = rejected
        self.pending: dict[str, ClusterSnapshot] = {c.name: c for c in deferred}
        """Deferred clusters not judged yet."""
        self.checkpoint: Checkpoint | None = None
        self.ranks: dict[str, int] = {}
        """Clusters in the order the walk filled them (ties of tier and price broken by ``tiebreak``)."""
        self.starts: tuple[float, ...] = ()
        """The price bands' starts (``pricebands``; empty without bands)."""
        self.tie_orders: dict[tuple[int, float], list[str]] = {}
        """Per (tier, price) tie: its clusters in ``tiebreak`` order, ranked once when first needed."""

    def _judge(self, cluster: ClusterSnapshot) -> bool:
        del self.pending[cluster.name]
        status = self.plugin.filter_at(self.state, cluster, self.checkpoint)
        if status is not SUCCESS and status.code is not Code.SUCCESS:
            self.rejected[cluster.name] = status
            return False
        return True

    def _judge_rest(self) -> None:
        if self.pending:
            rest = list(self.pending.values())
            self.pending.clear()
            self.rejected.update(self.plugin.filter_all_at(self.state, rest, self.checkpoint))

    def feasible(self) -> list[ClusterSnapshot]:
        """Every cluster passing every filter, in the order given (all judged first)."""
        self._judge_rest()
        passed = self.state.feasibility
        return [c for c in self.clusters if c.name in passed]

    def decide(self, *, affinity_name: str | None) -> ScheduleResult | None:
        state = self.state
        request = state.request
        replica_scheduling = request.placement.replica_scheduling
        tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
        listed = tiered is not None and bool(tiered.tiers)
        feasibility = state.feasibility
        rows, untiered = tier_rows(state, self.running)
        percent = band_percent(state)
        self.starts = fleet_band_starts(state, self.clusters, percent) if percent else ()
        order, tainted = _bound_order(self.clusters, state.fleet(self.clusters), tiered, state.cache, self.starts)
        if request.gang:
            if tainted:  # scores might break a tie of tier and price differently
                self._judge_rest()
                return None
            return self._gang(order, affinity_name=affinity_name)
        previous = request.previous
        kept = {name: count for name, count in previous.items() if count > 0}
        running = {row[2] for row in rows if row[2] in kept}
        extra = request.replicas - sum(kept[name] for name in running)
        if extra < 0:  # scaling down touches only the clusters running the binding
            emitted, spare = rows, list[Row]()
        else:
            emitted, spare, extra = self._fill(order, rows, running, extra)
            if extra:
                self._judge_rest()
                return None
        last = len(self.ranks)
        candidates = [
            TierCandidate(name=name, available=free, tier=tier, price=price, rank=self.ranks.get(name, last))
            for tier, price, name, free in emitted
        ]
        current = {c.name: previous[c.name] for c in self.running if previous.get(c.name)}
        result = divide_tiered_overflow(request.replicas, candidates, current=current)
        if result.unplaced:
            self._judge_rest()
            return None
        self._pin()
        reasons = {**untiered, **result.reasons}
        scaling_down = extra < 0

        def more_reasons() -> Mapping[str, str]:
            # The verdicts not asked for, as at the decision; the division would have called the
            # feasible ones "not needed" (or nothing when scaling down), or left them out untiered.
            fresh = list(self.pending.values())
            self._judge_rest()
            # (What ``divide_tiered_overflow(0, idle)`` says of each idle cluster, without building them.)
            out: dict[str, str] = {name: not_needed_reason(tier) for tier, _, name, _ in spare}
            for cluster in fresh:
                if cluster.name not in feasibility:
                    continue
                tier = tier_of(cluster.view, tiered) if listed else cluster.tier
                if tier is None:
                    out[cluster.name] = UNTIERED
                elif not scaling_down:
                    out[cluster.name] = not_needed_reason(tier)
            return out

        assignments = dict(result.assignments)
        return decision_result(
            state,
            self.clusters,
            assignments=assignments,
            unplaced=0,
            condition=scheduled(request.replicas, len(assignments)),
            rejected=self.rejected,
            scores=no_scores,
            division_reasons=reasons,
            more_reasons=more_reasons,
            affinity_name=affinity_name,
        )

    def _fill(
        self, order: Sequence[tuple[Bound, int]], rows: list[Row], running: set[str], extra: int
    ) -> tuple[list[Row], list[Row], int]:
        """Fill ``extra`` replicas in (tier, price, name) order, judging clusters only as far as that
        order needs: returns the rows the division needs (those filled before the replicas ran
        out and those running the binding), the judged rows after them, and what is left."""
        heap = list(rows)
        heapq.heapify(heap)
        emitted: list[Row] = []
        position = 0
        while extra:
            position = self._judge_while_better(order, position, heap, ties=True)
            if not heap:
                break
            row = self._pop_best(heap)
            self.ranks[row[2]] = len(emitted)
            emitted.append(row)
            extra -= min(extra, max(row[3], 0))
        spare = [row for row in heap if row[2] not in running]
        emitted.extend(row for row in heap if row[2] in running)
        return emitted, spare, extra

    def _judge_while_better(
        self, order: Sequence[tuple[Bound, int]], position: int, heap: list[Row], *, ties: bool = False
    ) -> int:
        """Judge the clusters of ``order`` from ``position`` on while the next one's bound may beat the
        best row of ``heap`` (with ``ties``, or tie with it on tier and price while it may be among
        the first :data:`TIE_LIMIT` names of the tie), pushing a row for each feasible one; returns
        where the walk stopped."""
        pending = self.pending
        clusters = self.clusters
        feasibility = self.state.feasibility
        end = len(order)
        while position < end:
            bound, index = order[position]
            if heap and not bound < heap[0][:3]:
                if not ties or bound[:2] > heap[0][:2]:
                    break
                names = sorted(row[2] for row in heap if row[:2] == heap[0][:2])
                if len(names) >= TIE_LIMIT and bound[2] > names[TIE_LIMIT - 1]:
                    break
            cluster = clusters[index]
            position += 1
            if cluster.name in pending and self._judge(cluster):
                found = feasibility[cluster.name]
                price = banded(found.price, self.starts) if self.starts else found.price
                heapq.heappush(heap, (bound[0], price, cluster.name, found.available))
        return position

    def _pop_best(self, heap: list[Row]) -> Row:
        """Pop the best row of ``heap``: the first in (tier, price) order, ties broken by ``tiebreak``."""
        row = heapq.heappop(heap)
        if not heap or heap[0][:2] != row[:2]:
            return row
        tied = {row[2]: row}
        while heap and heap[0][:2] == row[:2]:
            other = heapq.heappop(heap)
            tied[other[2]] = other
        order = self.tie_orders.get(row[:2])
        if order is None:  # the first names of the tie are judged by now: rank them once
            head = set(sorted(tied)[:TIE_LIMIT])
            members = [c for c in self.clusters if c.name in head]
            order = self.tie_orders[row[:2]] = rank(self.state, members)
        best = tied[next((name for name in order if name in tied), min(tied))]
        for other in tied.values():
            if other is not best:
                heapq.heappush(heap, other)
        return best

    def _gang(self, order: Sequence[tuple[Bound, int]], *, affinity_name: str | None) -> ScheduleResult | None:
        """The gang's cluster: the first feasible one in (tier, price) order. Every feasible cluster
        holds the whole gang and none runs it, so the default scores tie: ``tiebreak`` decides."""
        state = self.state
        request = state.request
        heap: list[Row] = []
        self._judge_while_better(order, 0, heap, ties=True)
        if not heap:
            self._judge_rest()
            return None
        chosen = self._pop_best(heap)[2]
        self._pin()

        def scores() -> Mapping[str, float]:
            return run_scorers(DEFAULT_PROFILE, state, self.feasible())

        cached_scores = functools.cache(scores)

        def others() -> Mapping[str, str]:
            reason = f"gang placed whole in {chosen} (better tier, price or score)"
            return {c.name: reason for c in self.feasible() if c.name != chosen}

        condition = scheduled(request.replicas, 1)
        return decision_result(
            state,
            self.clusters,
            assignments={chosen: request.replicas},
            unplaced=0,
            condition=condition,
            rejected=self.rejected,
            scores=cached_scores,
            division_reasons={},
            more_reasons=others,
            affinity_name=affinity_name,
        )

    def _pin(self) -> None:
        """Fix the reservations the verdicts still pending are to be judged against: as now."""
        reservations = self.state.reservations
        if self.pending and reservations is not None:
            self.checkpoint = reservations.checkpoint()

