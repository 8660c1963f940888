"""Price bands: which prices per GPU-hour tiered overflow takes as equal.

``tieredOverflow.priceBandPercent`` (default 0: only equal prices tie) widens "equal price".
The fleet's listed prices (every cluster's ``spec.pricing``), lowest first, are cut into bands:
the lowest starts the first band, which holds every listed price up to P % above it; the first
listed price above that starts the next band, and so on. A cluster's price counts as the start
of its band, so clusters whose prices share a band tie on price, and the tie is decided as any
tie of tier and price (:mod:`~controlplane.scheduler.core.tiebreak`: fit, fragmentation and
scarcity, then the fewest free GPUs). A price below the lowest listed one (a cluster without
pricing pays 0) keeps its own value.

The map from a price to its band's start never decreases, so a cluster's cheapest listed price
still bounds its place from below (``verdict_walk``). Returns to a cheaper tier
(``returning``) rank clusters with the same bands, so they never move a replica within one.
In: the policy's percentage and the fleet's snapshots; out: band starts and banded prices. No I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Final

from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.snapshot import ClusterSnapshot, fleet_key
from policies.models import Placement

#: Relative slack when comparing a price with a band's upper end (float sums of list prices).
_SLACK: Final = 1e-9


def band_percent(state: CycleState) -> float:
    """The cycle's placement's ``tieredOverflow.priceBandPercent`` (0 when unset)."""
    return placement_band_percent(state.request.placement)


def placement_band_percent(placement: Placement) -> float:
    """``placement``'s ``tieredOverflow.priceBandPercent`` (0 when unset)."""
    replica_scheduling = placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    if tiered is None or not tiered.price_band_percent:
        return 0.0
    return float(tiered.price_band_percent)


def band_starts(prices: Iterable[float], percent: float) -> tuple[float, ...]:
    """The starts of the bands ``prices`` fall into at ``percent`` (see the module), ascending."""
    starts: list[float] = []
    factor = 1.0 + percent / 100.0
    for price in sorted(set(prices)):
        if not starts or price > starts[-1] * factor * (1.0 + _SLACK):
            starts.append(price)
    return tuple(starts)


def listed_band_starts(clusters: Iterable[ClusterSnapshot], percent: float) -> tuple[float, ...]:
    """:func:`band_starts` of every price ``clusters`` list (their ``spec.pricing``)."""
    return band_starts((p for c in clusters for p in c.pricing.values()), percent)


def banded(price: float, starts: Sequence[float]) -> float:
    """``price`` as its band's start (itself when below every start)."""
    index = bisect.bisect_right(starts, price * (1.0 + _SLACK)) - 1
    return starts[index] if index >= 0 else price


def fleet_band_starts(state: CycleState, clusters: Sequence[ClusterSnapshot], percent: float) -> tuple[float, ...]:
    """:func:`band_starts` of the listed prices of the cycle's fleet (``clusters`` when the cycle
    has none), remembered per fleet generation and percentage."""
    fleet = state.fleet_clusters or clusters
    serials = state.fleet(fleet) if fleet is state.fleet_clusters else fleet_key(fleet)
    key = (serials, percent)
    memo = state.cache.price_bands
    found = memo.get(key)
    if found is None:
        found = memo.remember(key, listed_band_starts(fleet, percent))
    return found


def band_price(state: CycleState, price: float, clusters: Sequence[ClusterSnapshot]) -> float:
    """``price`` as tiered overflow orders it in this cycle: its band's start, or itself without bands."""
    percent = band_percent(state)
    if not percent:
        return price
    return banded(price, fleet_band_starts(state, clusters, percent))
