"""Concrete recommendations, with estimated savings, from what the accounting saw.

Two halves, both pure:

* :func:`find_opportunities` runs on every sample (next to the classification) and returns
  per-sample :class:`Opportunity` rates, which the accumulator integrates over time exactly
  like GPU-seconds:

  - **move**: a replica (pod) running on a GPU that a cheaper cluster of the same or a lower
    overflow tier could host right now on devices that are free and not claimed by pending
    demand (free-spare or free-fragmented). The pod needs, on one node, as many free devices of
    each resource it holds (whole GPUs stay whole GPUs, a 3g.40gb instance needs a 3g.40gb
    instance), on a product its workload accepts (its binding's product selector; without a
    known binding, only the product it runs on) in a cluster its placement allows. Most
    expensive pods first, cheapest destination first; each destination device is used once.
    Savings per hour = the pod's GPU shares x (source price - destination price).
  - **repartition**: free-fragmented MIG slices of profile A (or a MIG GPU's unpartitioned
    remainder) on a cluster's ``product`` nodes while pending replicas that allow that cluster
    and product still wait for MIG profile B. Savings per hour = the stranded GPU share, capped
    at the waiting replicas' GPU share, x the price.

* :func:`recommend` turns a :class:`~controlplane.reports.summary.WasteReport` into sentences
  with ``savings_usd_per_day``. A recommendation is something to do *now*, so each is about the
  fleet as of the newest sample and its savings are the current rate x 24 h:

  - **right-size** a workload that holds GPUs now and was idle-allocated during the window:
    saves its current GPU cost x the idle share of its measured GPU-hours (time with no
    utilization measured is neither idle nor busy);
  - **move** replicas that run now where a cheaper cluster has room now;
  - **repartition** MIG slices stranded now while other profiles wait.

  A workload that is gone (no GPUs in the newest sample) gets nothing, and figures say what
  they are: GPUs held now, GPU-hours over the window. Savings never count twice: a move of a
  workload that is also right-sized covers only the replicas it still needs afterwards (its
  busy share), so the two recommendations' savings add up to what doing both saves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from controlplane.reports.classify import ALLOCATED_STATES, Classification, DeviceState, WasteState
from controlplane.reports.fleet import (
    UNPARTITIONED,
    ClusterSample,
    FleetSample,
    mig_share,
    profile_of_resource,
)
from controlplane.reports.summary import (
    OpportunityTotal,
    Recommendation,
    RecommendationKind,
    WasteReport,
    WorkloadUsage,
)

DEFAULT_LIMIT = 10
#: Recommendations saving less than this per day are not worth a line.
MIN_SAVINGS_USD_PER_DAY = 0.01
_DESTINATION_STATES = frozenset({WasteState.FREE_SPARE, WasteState.FREE_FRAGMENTED})


class OpportunityKind(StrEnum):
    MOVE = "move"
    REPARTITION = "repartition"


@dataclass(frozen=True, slots=True)
class Opportunity:
    """One sample's opportunity.

    ``key`` for move: (namespace, workload, from cluster, from product, from price, to cluster,
    to product, to price); for repartition: (cluster, product, stranded profile, wanted profiles
    joined by commas, price). Prices are formatted with two decimals. ``units`` counts replicas
    (move) or slices (repartition); ``gpus`` their GPU share.
    """

    kind: OpportunityKind
    key: tuple[str, ...]
    units: float
    gpus: float
    savings_per_hour: float


@dataclass(slots=True)
class _Pod:
    cluster: ClusterSample
    namespace: str
    workload: str
    product: str
    resources: Counter[str]
    gpus: float

    @property
    def cost_per_hour(self) -> float:
        return self.gpus * self.cluster.price(self.product)


@dataclass(slots=True)
class _Destination:
    cluster: ClusterSample
    node: str
    product: str
    free: Counter[str]

    @property
    def price(self) -> float:
        return self.cluster.price(self.product)


def _price(value: float) -> str:
    return f"{value:.2f}"


def _running_pods(states: Iterable[DeviceState], clusters: dict[str, ClusterSample]) -> list[_Pod]:
    pods: dict[tuple[str, str, str], _Pod] = {}
    for state in states:
        if (
            state.state not in ALLOCATED_STATES
            or not state.namespace
            or not state.pod
            or state.resource is None
        ):
            continue
        key = (state.cluster, state.namespace, state.pod)
        pod = pods.get(key)
        if pod is None:
            pod = pods[key] = _Pod(
                clusters[state.cluster], state.namespace, state.workload or "", state.product, Counter(), 0.0
            )
        pod.resources[state.resource] += 1
        pod.gpus += state.share
    return sorted(
        pods.values(), key=lambda p: (-p.cluster.price(p.product), p.cluster.name, p.namespace, p.workload)
    )


def _destinations(
    states: Iterable[DeviceState], clusters: dict[str, ClusterSample], *, below: float
) -> list[_Destination]:
    """The nodes with free devices priced under ``below`` (a move needs a cheaper destination)."""
    nodes: dict[tuple[str, str], _Destination] = {}
    for state in states:
        if state.state not in _DESTINATION_STATES or state.resource is None or state.price_per_gpu_hour >= below:
            continue
        key = (state.cluster, state.node)
        node = nodes.get(key)
        if node is None:
            node = nodes[key] = _Destination(clusters[state.cluster], state.node, state.product, Counter())
        node.free[state.resource] += 1
    return sorted(nodes.values(), key=lambda d: (d.price, d.cluster.tier, d.cluster.name, d.node))


def _moves(
    sample: FleetSample, states: Sequence[DeviceState], clusters: dict[str, ClusterSample]
) -> list[Opportunity]:
    pods = _running_pods(states, clusters)
    if not pods:
        return []
    destinations = _destinations(states, clusters, below=max(pod.cluster.price(pod.product) for pod in pods))
    if not destinations:
        return []
    found: dict[tuple[str, ...], list[float]] = {}
    for pod in pods:
        source_price = pod.cluster.price(pod.product)
        constraints = sample.workloads.get((pod.namespace, pod.workload))
        for dest in destinations:
            if dest.price >= source_price:
                break
            if dest.cluster.name == pod.cluster.name or dest.cluster.tier > pod.cluster.tier:
                continue
            if constraints is not None:
                if not constraints.allows(dest.cluster.name, dest.product):
                    continue
            elif dest.product != pod.product:
                continue
            if any(dest.free[resource] < amount for resource, amount in pod.resources.items()):
                continue
            dest.free.subtract(pod.resources)
            key = (
                pod.namespace,
                pod.workload,
                pod.cluster.name,
                pod.product,
                _price(source_price),
                dest.cluster.name,
                dest.product,
                _price(dest.price),
            )
            totals = found.setdefault(key, [0.0, 0.0, 0.0])
            totals[0] += 1
            totals[1] += pod.gpus
            totals[2] += pod.gpus * (source_price - dest.price)
            break
    return [Opportunity(OpportunityKind.MOVE, key, *values) for key, values in sorted(found.items())]


def _repartitions(classification: Classification, clusters: dict[str, ClusterSample]) -> list[Opportunity]:
    waiting = [
        (u, {p: n for r, n in u.demand.gpu_requests.items() if (p := profile_of_resource(r)) is not None})
        for u in classification.unmet
    ]
    waiting = [(u, profiles) for u, profiles in waiting if profiles]
    if not waiting:
        return []
    stranded: dict[tuple[str, str], dict[str, list[float]]] = {}
    for state in classification.states:
        if state.state != WasteState.FREE_FRAGMENTED or state.profile is None:
            continue
        group = stranded.setdefault((state.cluster, state.product), {})
        totals = group.setdefault(state.profile, [0.0, 0.0])
        totals[0] += 1
        totals[1] += state.share
    out: list[Opportunity] = []
    for (cluster, product), profiles in sorted(stranded.items()):
        wanted: set[str] = set()
        wanted_gpus = 0.0
        for unmet, requested in waiting:
            if not unmet.demand.allows(cluster, product):
                continue
            wanted |= set(requested)
            wanted_gpus += unmet.replicas * sum(mig_share(p) * n for p, n in requested.items())
        price = clusters[cluster].price(product)
        for profile, (count, gpus) in sorted(profiles.items()):
            others = sorted(wanted - {profile})
            if not others or wanted_gpus <= 0:
                continue
            usable = min(gpus, wanted_gpus)
            wanted_gpus -= usable
            key = (cluster, product, profile, ",".join(others), _price(price))
            out.append(Opportunity(OpportunityKind.REPARTITION, key, count, gpus, usable * price))
    return out


def find_opportunities(sample: FleetSample, classification: Classification) -> list[Opportunity]:
    """This sample's move and repartition opportunities (see the module docstring)."""
    clusters = {cluster.name: cluster for cluster in sample.clusters}
    return _moves(sample, classification.states, clusters) + _repartitions(classification, clusters)


# ---------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------


def _count(value: float) -> str:
    return str(round(value)) if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _money(value: float) -> str:
    return f"${value:,.2f}"


def describe_workload(namespace: str, workload: str) -> str:
    """``ns/name`` for ``Kind/name`` workloads (the kind is implied), ``ns/Pod/x`` otherwise."""
    kind, _, name = workload.partition("/")
    if not namespace and not workload:
        return "(unknown workload)"
    shown = name if name and kind != "Pod" else workload
    return f"{namespace}/{shown}" if namespace else shown


def _plural(count: str, word: str) -> str:
    return f"{count} {word}" if count == "1" else f"{count} {word}s"


def _move_text(total: OpportunityTotal, *, keep: float, after_right_size: bool) -> str:
    namespace, workload, source, source_product, source_price, dest, dest_product, dest_price = total.key
    replicas = _count(total.units_now * keep)
    gpus = _count(total.gpus_now * keep)
    after = " it still needs after right-sizing" if after_right_size else ""
    return (
        f"{_plural(replicas, 'replica')}{after} of {describe_workload(namespace, workload)}"
        f" {'runs' if replicas == '1' else 'run'} on {source} {source_product}"
        f" at ${source_price}/h while {_plural(gpus, 'GPU')} of {dest_product} in {dest} (${dest_price}/h) sit free:"
        f" moving them saves {_money(total.savings_usd_per_hour_now * keep * 24.0)}/day"
    )


def _repartition_text(total: OpportunityTotal) -> str:
    cluster, product, profile, wanted, _ = total.key
    slices = _count(total.units_now)
    what = "unpartitioned GPU slices" if profile == UNPARTITIONED else f"{profile} slices"
    wanted_text = " / ".join(wanted.split(","))
    return (
        f"{cluster} {product} nodes: {slices} free {what} stranded while {wanted_text} requests wait:"
        f" repartition (saves up to {_money(total.savings_usd_per_hour_now * 24.0)}/day)"
    )


def _hours_text(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}"


def _right_size_text(usage: WorkloadUsage, per_day: float) -> str:
    utilization = "unknown" if usage.mean_utilization is None else f"{usage.mean_utilization:.0%}"
    return (
        f"{describe_workload(usage.namespace, usage.workload)} holds {_plural(_count(usage.gpus_now), 'GPU')} now;"
        f" over the window {_hours_text(usage.idle_gpu_hours)} of its {_hours_text(usage.measured_gpu_hours)}"
        f" measured GPU-hours were idle ({utilization} mean utilization, {_money(usage.idle_cost_usd)}):"
        f" right-size or scale it down: saves {_money(per_day)}/day"
    )


def right_size_savings_per_day(usage: WorkloadUsage) -> float:
    """What right-sizing ``usage`` saves per day: its GPUs' cost now x its idle share."""
    return usage.cost_usd_per_hour_now * usage.idle_share * 24.0 if usage.live else 0.0


def recommend(
    report: WasteReport,
    *,
    limit: int = DEFAULT_LIMIT,
    min_savings_usd_per_day: float = MIN_SAVINGS_USD_PER_DAY,
) -> list[Recommendation]:
    """The report's recommendations, largest savings first, at most ``limit``."""
    out: list[Recommendation] = []
    right_sized: dict[tuple[str, str], float] = {}
    for usage in report.workloads:
        per_day = right_size_savings_per_day(usage)
        if per_day >= min_savings_usd_per_day:
            right_sized[(usage.namespace, usage.workload)] = usage.idle_share
            out.append(Recommendation(RecommendationKind.RIGHT_SIZE, _right_size_text(usage, per_day), per_day))
    for total in report.opportunities:
        if total.units_now <= 0:
            continue  # not there any more: nothing to act on
        if total.kind == OpportunityKind.MOVE:
            # Only the whole replicas still needed after right-sizing move.
            idle = right_sized.get((total.key[0], total.key[1]), 0.0)
            keep = math.floor(total.units_now * (1.0 - idle) + 1e-9) / total.units_now
            per_day = total.savings_usd_per_hour_now * keep * 24.0
            if keep > 0 and per_day >= min_savings_usd_per_day:
                text = _move_text(total, keep=keep, after_right_size=idle > 0)
                out.append(Recommendation(RecommendationKind.MOVE, text, per_day))
        elif total.kind == OpportunityKind.REPARTITION:
            per_day = total.savings_usd_per_hour_now * 24.0
            if per_day >= min_savings_usd_per_day:
                out.append(Recommendation(RecommendationKind.REPARTITION, _repartition_text(total), per_day))
    out.sort(key=lambda r: (-r.savings_usd_per_day, r.kind, r.text))
    return out[:limit]
