"""kube's HPA replica calculator (``pkg/controller/podautoscaler/replica_calculator.go``), over
per-pod samples the hub knows.

In: the names of the target's pods, the samples of those that have one (a value per pod, in the
metric's unit: percent of a GPU for the hub's GPU metrics), the target's current replicas and the
metric's target value. Out: the proposed replica count and the average of the samples, or
:class:`MetricsUnavailable` with kube's words. As in kube, the change is ignored within a
tolerance of 10 %, and pods without a sample count as using nothing on a scale-up and as using
``scale_down_fallback`` (kube: the target for a Pods metric, 100 % of the request, or the
target when higher, for a Resource utilization) on a scale-down, unless that turns the
direction around. Pure; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

#: ``--horizontal-pod-autoscaler-tolerance``'s default.
TOLERANCE = 0.1


class MetricsUnavailable(Exception):
    """No replica count can be computed from the samples (kube's error text)."""


@dataclass(frozen=True, slots=True)
class Proposal:
    replicas: int
    """The replica count the metric asks for."""
    usage: float
    """The average of the samples the pods reported (before any fallback)."""


def _average(values: Mapping[str, float], step: float) -> float:
    """The mean, cut down to a multiple of ``step`` as kube's integer division cuts it."""
    return math.floor(round(sum(values.values()) / len(values) / step, 9)) * step


def within_tolerance(usage_ratio: float, tolerance: float = TOLERANCE) -> bool:
    """kube's ``Tolerances.isWithin``: the change is too small to act on."""
    return 1.0 - tolerance <= usage_ratio <= 1.0 + tolerance


def usage_ratio_replicas(
    metrics: Mapping[str, float],
    ratio: Callable[[Mapping[str, float]], float],
    *,
    current_replicas: int,
    ready_count: int,
    unready: Collection[str] = (),
    missing: Collection[str] = (),
    scale_down_value: Callable[[str], float],
    tolerance: float = TOLERANCE,
    calibration: float = 1.0,
) -> int:
    """The replica count kube's ``GetResourceReplicas`` and ``calcPlainMetricReplicas`` share:
    ``ratio`` of the pods' ``metrics`` to the target, times the ready pods; when pods lack
    metrics, or unready pods would take part in a scale-up, the ratio is taken again with the
    missing pods at ``scale_down_value`` (scale-down) or 0 (scale-up) and the unready at 0, and
    the count stays when that is within the tolerance or turns the direction around. A new count
    is divided by ``calibration`` (Karmada's: the share of the target's replicas whose pods were
    counted, see :func:`calibration_of`)."""
    usage_ratio = ratio(metrics)
    scale_up_with_unready = bool(unready) and usage_ratio > 1.0
    if not scale_up_with_unready and not missing:
        if within_tolerance(usage_ratio, tolerance):
            return current_replicas
        return math.ceil(usage_ratio * ready_count / calibration)
    filled = dict(metrics)
    if usage_ratio < 1.0:
        filled.update({name: scale_down_value(name) for name in missing})
    elif usage_ratio > 1.0:
        filled.update(dict.fromkeys(missing, 0.0))
    if scale_up_with_unready:
        filled.update(dict.fromkeys(unready, 0.0))
    new_ratio = ratio(filled)
    if (
        within_tolerance(new_ratio, tolerance)
        or (usage_ratio < 1.0 and new_ratio > 1.0)
        or (usage_ratio > 1.0 and new_ratio < 1.0)
    ):
        return current_replicas
    replicas = math.ceil(new_ratio * len(filled) / calibration)
    if (new_ratio < 1.0 and replicas > current_replicas) or (new_ratio > 1.0 and replicas < current_replicas):
        return current_replicas
    return replicas


def calibration_of(placed: Mapping[str, int], counted: Collection[str], *, current_replicas: int) -> float:
    """Karmada's calibration: the replicas of the members whose pods were counted (``placed``:
    each member's replicas, from the binding) over the target's own (``current_replicas``), so a
    count from the pods of some members is one for the whole target (0.5 when the members
    counted hold half of them; the number of members when each runs all of them). 1 when nothing
    is placed or the target has no replicas; the caller stops before the counted members hold
    none (Karmada's ``failed to get replicas in any of clusters``)."""
    if not placed or current_replicas <= 0:
        return 1.0
    return sum(replicas for member, replicas in placed.items() if member in counted) / current_replicas


def plain_metric_replicas(
    samples: Mapping[str, float],
    pods: Collection[str],
    *,
    current_replicas: int,
    target: float,
    scale_down_fallback: float,
    step: float = 0.001,
    tolerance: float = TOLERANCE,
    calibration: float = 1.0,
) -> Proposal:
    """kube's ``calcPlainMetricReplicas`` (and ``GetResourceReplicas``, whose utilization of pods
    requesting alike is the same average): see the module docstring. The average is cut to a
    multiple of ``step``, as kube's integers cut it: a thousandth for a Pods metric (its
    milli-units), a whole percent for a Resource utilization."""
    if not pods:
        raise MetricsUnavailable("no pods returned by selector while calculating replica count")
    if target <= 0:
        raise MetricsUnavailable(f"invalid target value {target:g}")
    metrics = {name: float(value) for name, value in samples.items() if name in pods}
    if not metrics:
        raise MetricsUnavailable("did not receive metrics for targeted pods (pods might be unready)")
    replicas = usage_ratio_replicas(
        metrics, lambda values: _average(values, step) / target, current_replicas=current_replicas,
        ready_count=len(metrics), missing=[name for name in pods if name not in metrics],
        scale_down_value=lambda _: scale_down_fallback, tolerance=tolerance, calibration=calibration)
    return Proposal(replicas, _average(metrics, step))
