"""What the FederatedHPA controller reads of the members' pods and their resource metrics.

A ``Resource`` or ``ContainerResource`` metric (cpu, memory) is answered as kube's HPA answers
it: from the target's pods (their requests, phase, readiness) and the ``metrics.k8s.io``
``PodMetrics`` of those pods, here gathered from every Ready member, as Karmada's FederatedHPA
controller lists each member's pods and reads karmada-metrics-adapter. :class:`PodMetricsSource`
is what the hub's resource metrics (``controlplane.apiserver.proxy.resourcemetrics``) offer the
controllers through their context; None there: such metrics are unavailable.

In: a member's ``PodMetrics`` object (:func:`pod_metric_of`). Out: :class:`PodMetric`, each
container's usage in milli-units (kube's ``MilliValue``), with the sample's time and window.
Pure; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import InvalidOperation
from typing import Any, Protocol

from controlplane.apis.durations import duration_seconds
from controlplane.apis.quantity import parse_quantity
from controlplane.apis.timestamps import parse_time_or_none

#: metrics-server's window when a PodMetrics does not say (kube's ``metricServerDefaultMetricWindow``).
DEFAULT_WINDOW_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class PodMetric:
    """One pod's ``PodMetrics``."""

    containers: Mapping[str, Mapping[str, int]]
    """Container name -> resource -> usage in milli-units (millicores, millibytes)."""
    timestamp: datetime | None = None
    window_seconds: float = DEFAULT_WINDOW_SECONDS


@dataclass(frozen=True, slots=True)
class MemberPods:
    """The target's pods in one member, and the resource metrics it reported for them."""

    cluster: str
    pods: Sequence[Mapping[str, Any]] = ()
    """The member's pods the selector selects (v1 Pod objects)."""
    metrics: Mapping[str, PodMetric] | None = field(default_factory=dict)
    """By pod name; None when the member's metrics API did not answer (its pods have no metrics)."""
    answered: bool = True
    """Whether the member's pod list answered (when not, ``pods`` is empty and ``metrics`` None)."""


class PodMetricsSource(Protocol):
    async def pod_metrics(self, namespace: str, selector: Mapping[str, Any] | str) -> list[MemberPods]:
        """The pods ``selector`` (a ``metav1.LabelSelector``, or one as a string) selects in
        ``namespace`` of each Ready member, with their metrics."""
        ...


def milli_value(quantity: Any) -> int | None:
    """kube's ``Quantity.MilliValue()`` (rounded up); None for what is not a quantity."""
    try:
        return math.ceil(parse_quantity(quantity) * 1000)
    except (InvalidOperation, ValueError, TypeError, ArithmeticError):
        return None


def pod_metric_of(item: Mapping[str, Any]) -> PodMetric:
    """A ``PodMetrics`` object (``containers[].usage``, ``timestamp``, ``window``) as kube reads it."""
    containers: dict[str, dict[str, int]] = {}
    for container in item.get("containers") or ():
        if not isinstance(container, Mapping):
            continue
        usage: dict[str, int] = {}
        for resource, quantity in (container.get("usage") or {}).items():
            value = milli_value(quantity)
            if value is not None:
                usage[str(resource)] = value
        containers[str(container.get("name") or "")] = usage
    window = duration_seconds(str(item.get("window") or ""))
    return PodMetric(containers, parse_time_or_none(item.get("timestamp")),
                     window if window is not None else DEFAULT_WINDOW_SECONDS)
