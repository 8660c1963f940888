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
from collections.abc import Collection, Mapping
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


def _ratio(values: Mapping[str, float], target: float, step: float) -> float:
    return _average(values, step) / target


def plain_metric_replicas(
    samples: Mapping[str, float],
    pods: Collection[str],
    *,
    current_replicas: int,
    target: float,
    scale_down_fallback: float,
    step: float = 0.001,
    tolerance: float = TOLERANCE,
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
    usage_ratio = _ratio(metrics, target, step)
    usage = _average(metrics, step)
    missing = [name for name in pods if name not in metrics]
    if not missing:
        if abs(1.0 - usage_ratio) <= tolerance:
            return Proposal(current_replicas, usage)
        return Proposal(math.ceil(usage_ratio * len(metrics)), usage)
    fallback = scale_down_fallback if usage_ratio < 1.0 else 0.0
    for name in missing:
        metrics[name] = fallback
    new_ratio = _ratio(metrics, target, step)
    if (
        abs(1.0 - new_ratio) <= tolerance
        or (usage_ratio < 1.0 and new_ratio > 1.0)
        or (usage_ratio > 1.0 and new_ratio < 1.0)
    ):
        return Proposal(current_replicas, usage)
    replicas = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and replicas > current_replicas) or (new_ratio > 1.0 and replicas < current_replicas):
        return Proposal(current_replicas, usage)
    return Proposal(replicas, usage)
