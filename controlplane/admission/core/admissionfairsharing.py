"""Kueue's admission fair sharing: a ClusterQueue whose ``admissionScope.admissionMode`` is
``UsageBasedAdmissionFairSharing`` takes its pending workloads by how much their LocalQueue has
consumed lately, the least first, then as any ClusterQueue does (priority, then age). Pure.

In: the configuration (Kueue's ``admissionFairSharing``: ``usageHalfLifeTime``,
``usageSamplingInterval``, ``resourceWeights``), each LocalQueue's consumed resources (its
``status.fairSharing.admissionFairSharingStatus.consumedResources``) and ``fairSharing.weight``.
Out: the consumed resources at the next sample (Kueue's exponential decay: the old value weighs
``0.5 ** (elapsed / halfLife)``, what the queue's admitted workloads hold now the rest), the entry
penalty an admission adds at once (its requests times the decay of one sampling interval, so two
admissions in one cycle do not both go to the same LocalQueue), and the usage the cycle orders by:
the consumed resources and pending penalties, each resource times its weight (1 when not listed),
summed, over the LocalQueue's weight.

Amounts are in Kueue's units, as its ``AsApproximateFloat64`` reads a quantity: cores, bytes,
counts (the admission core's CPU millicores are divided by 1000 here).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Final

from controlplane.admission.core.quota import FlavorResource
from controlplane.admission.core.workloads import Pending, queue_order

#: Kueue's ``UsageBasedAdmissionFairSharing`` admission mode (``NoAdmissionFairSharing``: off).
USAGE_BASED: Final = "UsageBasedAdmissionFairSharing"
#: Kueue's default ``usageSamplingInterval`` (5m); ``usageHalfLifeTime`` has none (0).
DEFAULT_SAMPLING_INTERVAL_SECONDS: Final = 300.0

Resources = Mapping[str, float]


@dataclass(frozen=True)
class AdmissionFairSharing:
    """Kueue's ``admissionFairSharing`` configuration."""

    usage_half_life_seconds: float = 0.0
    """``usageHalfLifeTime``: how long until consumed usage counts half; 0 keeps no history."""
    usage_sampling_interval_seconds: float = DEFAULT_SAMPLING_INTERVAL_SECONDS
    """``usageSamplingInterval``: how often each LocalQueue's consumed resources are sampled."""
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    """``resourceWeights``: what a unit of a resource counts for (1 when not listed)."""


def alpha_rate(elapsed: float, half_life: float) -> float:
    """Kueue's ``calculateAlphaRate``: the weight of the new sample after ``elapsed`` seconds."""
    if half_life == 0:
        return 0.0
    return 1.0 - float(0.5 ** (elapsed / half_life))


def _milli(value: float) -> float:
    """Kueue's quantities keep milli-units: a product is truncated to them (``MulByFloat``; the
    float's own rounding noise is not truncated away)."""
    return math.trunc(round(value * 1000, 6)) / 1000


def _scaled(resources: Resources, factor: float) -> dict[str, float]:
    return {name: _milli(amount * factor) for name, amount in resources.items()}


def _summed(a: Resources, b: Resources) -> dict[str, float]:
    return {name: a.get(name, 0.0) + b.get(name, 0.0) for name in {*a, *b}}


def decayed(old: Resources, now: Resources, *, elapsed: float, half_life: float) -> dict[str, float]:
    """Kueue's ``CalculateDecayedConsumed``: ``old`` after ``elapsed`` seconds, with ``now`` (what
    the LocalQueue's admitted workloads hold) taking the weight the old value lost."""
    alpha = alpha_rate(elapsed, half_life)
    return _summed(_scaled(old, 1 - alpha), _scaled(now, alpha))


def sampled_consumed(
    previous: Resources | None, held: Resources, penalty: Resources | None, *, elapsed: float, settings: AdmissionFairSharing,
) -> dict[str, float]:
    """A LocalQueue's consumed resources at a sample, as Kueue's LocalQueue controller computes
    them: none without a half-life (no history); at the first sample (``previous`` None) only
    the pending entry penalties; else the old value decayed over ``elapsed`` seconds with
    ``held`` (what its admitted workloads hold now) taking the weight it lost, plus the penalties
    of the admissions since the last sample."""
    if settings.usage_half_life_seconds == 0:
        return {}
    if previous is None:
        return dict(penalty or {})
    consumed = decayed(previous, held, elapsed=elapsed, half_life=settings.usage_half_life_seconds)
    return _summed(consumed, penalty or {})


def entry_penalty(requests: Resources, settings: AdmissionFairSharing) -> dict[str, float]:
    """Kueue's ``CalculateEntryPenalty``: what an admission adds to its LocalQueue's usage at once."""
    alpha = alpha_rate(settings.usage_sampling_interval_seconds, settings.usage_half_life_seconds)
    return _scaled(requests, alpha)


def weighted_usage(consumed: Resources, penalty: Resources, *, weight: float, resource_weights: Mapping[str, float]) -> float:
    """Kueue's ``CalculateUsage``: each resource times its weight, summed, over the LocalQueue's
    weight (a weight-0 queue that consumed anything comes last)."""
    total = sum(resource_weights.get(name, 1.0) * amount for name, amount in sorted(_summed(consumed, penalty).items()))
    if weight == 0:
        return math.inf if total > 0 else 0.0
    return total / weight


def in_kueue_units(resource: str, amount: float) -> float:
    """An amount of the admission core (CPU in millicores) in Kueue's units (cores)."""
    return amount / 1000 if resource == "cpu" else float(amount)


def flattened(usage: Mapping[FlavorResource, int], *, without: Collection[str] = ()) -> dict[str, float]:
    """Usage per flavor and resource summed over flavors (Kueue's ``FlattenFlavors``), in Kueue's units."""
    out: dict[str, float] = {}
    for (_flavor, resource), amount in usage.items():
        if resource not in without:
            out[resource] = out.get(resource, 0.0) + in_kueue_units(resource, amount)
    return out


class LocalQueueUsage:
    """The LocalQueues' usage as one admission cycle orders by it, with the entry penalties of the
    admissions it makes (``penalties``: the caller's, per LocalQueue, until they are sampled into
    its consumed resources)."""

    def __init__(
        self,
        settings: AdmissionFairSharing,
        *,
        cluster_queues: Collection[str],
        consumed: Mapping[str, Resources],
        weights: Mapping[str, float],
        penalties: MutableMapping[str, dict[str, float]],
    ) -> None:
        self.settings = settings
        self._cluster_queues = frozenset(cluster_queues)
        self._consumed = consumed
        self._weights = weights
        self.penalties = penalties

    def orders(self, cluster_queue: str) -> bool:
        """Whether ``cluster_queue`` takes its workloads by their LocalQueue's usage."""
        return cluster_queue in self._cluster_queues

    def of(self, local_queue: str) -> float:
        return weighted_usage(
            self._consumed.get(local_queue, {}), self.penalties.get(local_queue, {}),
            weight=self._weights.get(local_queue, 1.0), resource_weights=self.settings.resource_weights,
        )

    def order(self, pending: Pending) -> tuple[float, int, str, str]:
        """Kueue's queue order with admission fair sharing: the LocalQueue's usage, then as :func:`queue_order`."""
        return (self.of(pending.local_queue) if self.orders(pending.queue) else 0.0, *queue_order(pending))

    def admitted(self, local_queue: str, usage: Mapping[FlavorResource, int]) -> None:
        """An admission from ``local_queue``: its entry penalty (of its requests; the ``pods`` a
        ClusterQueue may count are no request) counts until the next sample."""
        penalty = entry_penalty(flattened(usage, without=("pods",)), self.settings)
        self.penalties[local_queue] = _summed(self.penalties.get(local_queue, {}), penalty)
