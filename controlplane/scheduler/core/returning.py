"""Returning burst replicas to a cheaper tier: whether, which, and how many (pure).

A binding placed with tiered overflow keeps its replicas where they run, so replicas that burst
to the cloud while on-prem was full stay there after on-prem frees. This module decides the move
that brings them back. The scheduler controller (``controller/rebalancing.py``) carries it out in
two phases: it first adds the replicas in the cheaper cluster, waits until the member reports
them ready, then removes as many from the expensive one.

In: where the binding runs now (``previous``), what a scale-up by the surge budget would add
where (``gains``: the scheduler's own tiered overflow answers that, so room, reservations and
GPU shapes are judged exactly as in a decision), each cluster's rank (tier, price band) and
price per GPU-hour, the GPUs one replica uses, the policy's
:class:`~policies.models.TierRebalance` settings and when the binding last moved. Out: a
:class:`ReturnPlan`: the :class:`Move`, or why none (and how long until the interval since the
last move has passed).

Clusters rank as tiered overflow orders them: by tier, then price, a price counting as its
band's start when the placement sets ``tieredOverflow.priceBandPercent``
(:mod:`~controlplane.scheduler.core.pricebands`). A move needs a strictly better rank, so a
replica never moves between clusters the division takes as equal (it would fight the
division's own tie-break); the saving is still the real price difference.
:func:`propose_return` puts it all together for one binding over the clusters' snapshots; the
hub's controller and the what-if replay (``simulator/whatif/returns.py``) both ask it. It also
answers for the preferences of other policies (an earlier ``clusterAffinities`` term, static
weights: :mod:`~controlplane.scheduler.core.preferring`), where the saving is reported but not
required, and for a gang between runs, which moves whole to where a fresh decision places it
when that is an earlier term or a better rank. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from controlplane.apis.gpus import is_gpu_resource
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.plugins.scores import price_for
from controlplane.scheduler.core.preferring import fell_back, preferred_move, states_preference
from controlplane.scheduler.core.pricebands import banded, listed_band_starts, placement_band_percent
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.division import tier_of
from policies.models import DivisionStrategy, Placement, TierRebalance

MOVES_KEPT: Final = 20
DEFAULT_MIN_SAVING_PER_HOUR: Final = 1.0
DEFAULT_MIN_MOVE_INTERVAL_SECONDS: Final = 300
DEFAULT_MAX_SURGE: Final = "25%"
DEFAULT_SURGE_TIMEOUT_SECONDS: Final = 600


@dataclass(frozen=True)
class ReturnSettings:
    """A policy's ``tieredOverflow.rebalance`` with the documented defaults applied."""

    enabled: bool = True
    min_saving_per_hour: float = DEFAULT_MIN_SAVING_PER_HOUR
    min_move_interval_seconds: float = DEFAULT_MIN_MOVE_INTERVAL_SECONDS
    max_surge: int | str = DEFAULT_MAX_SURGE
    surge_timeout_seconds: float = DEFAULT_SURGE_TIMEOUT_SECONDS

    @classmethod
    def from_policy(cls, rebalance: TierRebalance | None) -> ReturnSettings:
        if rebalance is None:
            return cls()
        return cls(
            enabled=rebalance.enabled is not False,
            min_saving_per_hour=(
                DEFAULT_MIN_SAVING_PER_HOUR if rebalance.min_saving_per_hour is None else rebalance.min_saving_per_hour
            ),
            min_move_interval_seconds=(
                DEFAULT_MIN_MOVE_INTERVAL_SECONDS
                if rebalance.min_move_interval_seconds is None
                else rebalance.min_move_interval_seconds
            ),
            max_surge=DEFAULT_MAX_SURGE if rebalance.max_surge is None else rebalance.max_surge,
            surge_timeout_seconds=(
                DEFAULT_SURGE_TIMEOUT_SECONDS if rebalance.surge_timeout_seconds is None else rebalance.surge_timeout_seconds
            ),
        )

    def surge(self, replicas: int) -> int:
        """Replicas one move may add before it removes as many: ``maxSurge`` of ``replicas``
        (a percentage rounds up), at least 1."""
        if isinstance(self.max_surge, int):
            return max(1, self.max_surge)
        percent = int(self.max_surge.rstrip("%"))
        return max(1, math.ceil(replicas * percent / 100))


@dataclass(frozen=True)
class Move:
    """``replicas`` replicas leave ``source`` for ``target``, saving ``saving_per_hour`` dollars."""

    source: str
    target: str
    replicas: int
    saving_per_hour: float
    why: str = ""
    """The policy preference the move restores (:mod:`~controlplane.scheduler.core.preferring`);
    empty for a return to a cheaper tier, which the saving explains."""

    def describe(self) -> str:
        noun = "replica" if self.replicas == 1 else "replicas"
        head = f"moved {self.replicas} {noun} {self.source} \u2192 {self.target}"
        if not self.why:
            return f"{head}: saves ${self.saving_per_hour:.2f}/h"
        if self.saving_per_hour > 0:
            return f"{head}: {self.why}, saves ${self.saving_per_hour:.2f}/h"
        if self.saving_per_hour < 0:
            return f"{head}: {self.why}, costs ${-self.saving_per_hour:.2f}/h more"
        return f"{head}: {self.why}"


@dataclass(frozen=True)
class ReturnPlan:
    """The move to start now, or None with why not; ``wait_seconds`` until it may be asked again
    (the minimum interval since the last move), None when only a new report can change the answer."""

    move: Move | None
    reason: str
    wait_seconds: float | None = None


def gpus_per_replica(request: BindingRequest) -> float:
    """The GPUs one replica holds, on average over a gang's roles (its master often has none)."""
    components = request.gang_components()
    pods = sum(c.replicas for c in components)
    gpus = sum(c.replicas * sum(c.requirements.gpu_resources.values()) for c in components)
    return float(gpus) / pods if pods else 0.0


def surge_time_left(started: datetime | None, now: datetime, settings: ReturnSettings) -> float:
    """Seconds the move started at ``started`` may still wait for its added replicas to be ready
    (``surgeTimeoutSeconds``); at or below 0 it is abandoned. A move with no start time recorded
    (written before the field existed) counts from ``now``."""
    if started is None:
        return settings.surge_timeout_seconds
    return settings.surge_timeout_seconds - (now - started).total_seconds()


def free_gpu_units(snapshot: ClusterSnapshot | None) -> int:
    """The GPU resources a cluster's report shows free (whole GPUs, MIG slices and shares alike)."""
    if snapshot is None:
        return 0
    return sum(shape.count * n for shape in snapshot.shapes for name, n in shape.free.items() if is_gpu_resource(name))


def room_grew(before: ClusterSnapshot | None, after: ClusterSnapshot) -> bool:
    """Whether a new report shows more free GPU resources than the one before: burst replicas
    elsewhere may fit here now."""
    return free_gpu_units(after) > free_gpu_units(before)


def returnable(previous: Mapping[str, int], order: Mapping[str, tuple[int, float]]) -> int:
    """Replicas running in clusters ranked below the best rank the placement gives: the most a
    move could bring back (a cluster tied with the best never loses replicas to it)."""
    if not order:
        return 0
    best = min(order.values())
    return sum(n for name, n in previous.items() if n > 0 and name in order and order[name] > best)


def plan_return(
    previous: Mapping[str, int],
    gains: Mapping[str, int],
    order: Mapping[str, tuple[int, float]],
    *,
    gpus_per_replica: float,
    settings: ReturnSettings,
    last_move: datetime | None,
    now: datetime,
    prices: Mapping[str, float] | None = None,
) -> ReturnPlan:
    """The move from the worst-ranked cluster the binding runs in (the one tiered overflow
    shrinks first) to the best-ranked cluster that would gain replicas, when that rank is
    strictly better, the move saves at least the minimum per hour and the interval since the
    last move has passed. ``order`` maps a cluster to its rank (tier, price band: see
    :func:`return_order`); a cluster missing from it is not considered. ``prices``: each
    cluster's own price per GPU-hour, which the saving counts (the rank's price when not given)."""
    if not settings.enabled:
        return ReturnPlan(None, "rebalancing is disabled by the policy")
    running = sorted(
        ((order[name], name) for name, n in previous.items() if n > 0 and name in order), reverse=True
    )
    if not running:
        return ReturnPlan(None, "runs in no cluster the placement ranks")
    source_rank, source = running[0]
    offered = [name for name, n in gains.items() if n > 0 and name in order]
    cheaper = sorted((order[name], name) for name in offered if order[name] < source_rank)
    if not cheaper:
        tied = sorted(name for name in offered if order[name] == source_rank and name != source)
        if tied:
            return ReturnPlan(None, f"{tied[0]} has room but ties with {source} on tier and price band")
        return ReturnPlan(None, "no cheaper cluster has room")
    target = cheaper[0][1]
    count = min(previous[source], gains[target], settings.surge(sum(previous.values())))

    def price(name: str) -> float:
        return prices[name] if prices is not None and name in prices else order[name][1]

    saving = round(count * gpus_per_replica * (price(source) - price(target)), 2)
    move = Move(source=source, target=target, replicas=count, saving_per_hour=saving)
    if saving < settings.min_saving_per_hour or saving <= 0:
        return ReturnPlan(
            None,
            f"moving {count} replica(s) {source} \u2192 {target} would save ${saving:.2f}/h, below the policy's "
            f"minimum of ${settings.min_saving_per_hour:.2f}/h",
        )
    return _after_interval(move, settings, last_move=last_move, now=now)


def _after_interval(move: Move, settings: ReturnSettings, *, last_move: datetime | None, now: datetime) -> ReturnPlan:
    """``move`` once the minimum interval since the last move has passed, else how long to wait."""
    if last_move is not None:
        left = settings.min_move_interval_seconds - (now - last_move).total_seconds()
        if left > 0:
            return ReturnPlan(None, f"the last move was less than {settings.min_move_interval_seconds:g}s ago", left)
    return ReturnPlan(move, move.describe())


def return_settings(placement: Placement) -> ReturnSettings:
    """The placement's ``tieredOverflow.rebalance`` (or ``replicaScheduling.rebalance``) with the
    defaults applied."""
    scheduling = placement.replica_scheduling
    if scheduling is None:
        return ReturnSettings()
    tiered = scheduling.tiered_overflow
    return ReturnSettings.from_policy(tiered.rebalance if tiered and tiered.rebalance else scheduling.rebalance)


def return_prices(request: BindingRequest, snapshots: Iterable[ClusterSnapshot]) -> dict[str, tuple[int, float]]:
    """Per cluster the placement ranks, (tier, price per GPU-hour a replica of the request pays there)."""
    scheduling = request.placement.replica_scheduling
    tiered = scheduling.tiered_overflow if scheduling else None
    priced: dict[str, tuple[int, float]] = {}
    for snapshot in snapshots:
        tier = tier_of(snapshot.view, tiered)
        if tier is not None:
            priced[snapshot.name] = (tier, price_for(snapshot, request.requirements, ()))
    return priced


def _ranks(
    priced: Mapping[str, tuple[int, float]], placement: Placement, snapshots: Iterable[ClusterSnapshot]
) -> dict[str, tuple[int, float]]:
    """``priced`` with each price as its band's start over ``snapshots``' listed prices, as
    tiered overflow orders them (unchanged without ``priceBandPercent``)."""
    percent = placement_band_percent(placement)
    if not percent:
        return dict(priced)
    starts = listed_band_starts(snapshots, percent)
    return {name: (tier, banded(price, starts)) for name, (tier, price) in priced.items()}


def return_order(request: BindingRequest, snapshots: Collection[ClusterSnapshot]) -> dict[str, tuple[int, float]]:
    """Per cluster the placement ranks, its rank (tier, price band) for returns: the price per
    GPU-hour a replica of the request pays there, as its band's start over the prices
    ``snapshots`` (the fleet) list when the placement sets ``priceBandPercent``."""
    return _ranks(return_prices(request, snapshots), request.placement, snapshots)


def propose_return(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    *,
    last_move: datetime | None,
    now: datetime,
    reservations: Reservations | None = None,
    cache: SchedulerCache | None = None,
) -> ReturnPlan:
    """The move :func:`plan_return` picks for a binding running ``request.previous``: the gains are
    what the scheduler's own decision for the replicas plus the surge budget adds where, so room,
    reservations and GPU shapes are judged exactly as in a decision. ``snapshots`` in a stable order.

    A binding that fell back to a later ``clusterAffinities`` term, or one divided by static
    weights, moves toward its policy's preference first (:func:`propose_preferred`); a gang (asked
    only between runs) moves whole (:func:`_propose_gang_move`)."""
    settings = return_settings(request.placement)
    if not settings.enabled:
        return ReturnPlan(None, "rebalancing is disabled by the policy")
    if request.gang:
        return _propose_gang_move(request, snapshots, settings, last_move=last_move, now=now, reservations=reservations, cache=cache)
    if states_preference(request) and (request.strategy is not DivisionStrategy.TIERED_OVERFLOW or fell_back(request)):
        plan = propose_preferred(
            request, snapshots, settings=settings, last_move=last_move, now=now, reservations=reservations, cache=cache
        )
        if plan.move is not None or request.strategy is not DivisionStrategy.TIERED_OVERFLOW:
            return plan
    elif request.strategy is not DivisionStrategy.TIERED_OVERFLOW:
        return ReturnPlan(None, f"a {request.strategy} division states no preference a move could meet better")
    priced = return_prices(request, snapshots)
    order = _ranks(priced, request.placement, snapshots)
    previous = dict(request.previous)
    if not returnable(previous, order):
        return ReturnPlan(None, "no replica runs outside the cheapest cluster")
    budget = min(settings.surge(request.replicas), returnable(previous, order))
    probe = schedule(
        replace(request, replicas=request.replicas + budget), snapshots, reservations=reservations, now=now, cache=cache
    )
    gains = {name: n - previous.get(name, 0) for name, n in probe.clusters.items() if n > previous.get(name, 0)}
    gpus = float(sum(request.requirements.gpu_resources.values()))
    prices = {name: price for name, (_, price) in priced.items()}
    return plan_return(
        previous, gains, order, gpus_per_replica=gpus, settings=settings, last_move=last_move, now=now, prices=prices
    )


def propose_preferred(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    *,
    settings: ReturnSettings,
    last_move: datetime | None,
    now: datetime,
    reservations: Reservations | None = None,
    cache: SchedulerCache | None = None,
) -> ReturnPlan:
    """The step toward the policy's preference :func:`~controlplane.scheduler.core.preferring.preferred_move`
    picks, once the minimum interval since the last move has passed. The saving (negative when
    the preferred cluster is dearer) is reported, not required: the policy's own order asks for
    the move."""
    found = preferred_move(
        request, snapshots, surge=settings.surge(request.replicas), reservations=reservations, now=now, cache=cache
    )
    if isinstance(found, str):
        return ReturnPlan(None, found)
    by_name = {s.name: s for s in snapshots}
    gpus = float(sum(request.requirements.gpu_resources.values()))

    def price(name: str) -> float:
        snapshot = by_name.get(name)
        return price_for(snapshot, request.requirements, ()) if snapshot is not None else 0.0

    saving = round(found.replicas * gpus * (price(found.source) - price(found.target)), 2)
    move = Move(found.source, found.target, found.replicas, saving, why=found.why)
    return _after_interval(move, settings, last_move=last_move, now=now)


def _propose_gang_move(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    settings: ReturnSettings,
    *,
    last_move: datetime | None,
    now: datetime,
    reservations: Reservations | None,
    cache: SchedulerCache | None,
) -> ReturnPlan:
    """Where a gang between runs (the controller asks only then) moves whole: the cluster a fresh
    decision picks, when it belongs to an earlier ``clusterAffinities`` term than the gang's, or
    ranks strictly better (tier, price band) and saves at least the policy's minimum; once the
    minimum interval since the last move has passed. The gang's own GPUs where it is placed count
    as taken, so a move needs room for the whole gang elsewhere."""
    placed = [name for name, n in request.previous.items() if n > 0]
    if len(placed) != 1:
        return ReturnPlan(None, "the gang is not placed whole in one cluster")
    source = placed[0]
    fresh = schedule(
        replace(request, previous={}, previous_affinity_name=None), snapshots, reservations=reservations, now=now, cache=cache
    )
    if not fresh.condition.status or len(fresh.clusters) != 1:
        return ReturnPlan(None, "no other cluster holds the whole gang now")
    [target] = fresh.clusters
    if target == source:
        return ReturnPlan(None, "the gang is placed where a fresh decision would place it")
    terms = [t.affinity_name for t in request.placement.cluster_affinities or ()]
    earlier_term = (
        fresh.affinity_name in terms
        and request.previous_affinity_name in terms
        and terms.index(str(fresh.affinity_name)) < terms.index(str(request.previous_affinity_name))
    )
    priced = return_prices(request, snapshots)
    order = _ranks(priced, request.placement, snapshots)
    if not earlier_term and not (source in order and target in order and order[target] < order[source]):
        return ReturnPlan(None, f"{target} holds the gang now but ranks no better than {source}")
    gpus = gpus_per_replica(request) * request.replicas
    saving = round(gpus * (priced.get(source, (0, 0.0))[1] - priced.get(target, (0, 0.0))[1]), 2)
    why = f"the gang, between runs, back to clusterAffinities term {fresh.affinity_name}" if earlier_term else (
        "the gang, between runs"
    )
    move = Move(source=source, target=target, replicas=request.replicas, saving_per_hour=saving, why=why)
    if not earlier_term and (saving < settings.min_saving_per_hour or saving <= 0):
        return ReturnPlan(
            None, f"moving the gang {source} \u2192 {target} would save ${saving:.2f}/h, below the policy's minimum "
            f"of ${settings.min_saving_per_hour:.2f}/h",
        )
    return _after_interval(move, settings, last_move=last_move, now=now)
