"""The metrics of a FederatedHPA, answered from what the members report.

* The GPU utilization of a pod (percent, the mean over the devices it holds), from the agents'
  DCGM reports (:func:`controlplane.controllers.pods.gpu_utilization_of_pods`): a ``Pods``
  metric named ``DCGM_FI_DEV_GPU_UTIL`` with an ``AverageValue`` target (as prometheus-adapter
  exposes dcgm-exporter's series), or -- gpufed's extension -- the ``Resource`` metric
  ``nvidia.com/gpu`` with a ``Utilization`` target.
* Any other ``Resource`` metric (cpu, memory) and ``ContainerResource`` metrics, with a
  ``Utilization`` or ``AverageValue`` target: from the target's pods in every member and their
  ``metrics.k8s.io`` usage (:mod:`.resources`), when the controllers have a source of them.

Any other metric (``External``, ``Object``, another ``Pods`` metric) is one the hub cannot
answer: it gets kube's failure reason (``FailedGetExternalMetric``...) and a message naming
what is unavailable.

In: the metric specs, the target's GPU pods and their samples, the target's pods with their
resource metrics (:class:`~.resources.FleetPods`, None: unavailable), the current replicas.
Out: :class:`Evaluation`, kube's ``computeReplicasForMetrics``: the largest replica count a valid
metric proposes, with each metric's status, or the failure that stops scaling. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import InvalidOperation
from typing import Any, Final

from controlplane.apis.quantity import canonical_quantity, parse_quantity
from controlplane.controllers.federatedhpa.calculating import (
    MetricsUnavailable,
    Proposal,
    plain_metric_replicas,
)
from controlplane.controllers.federatedhpa.podmetrics import milli_value
from controlplane.controllers.federatedhpa.resources import FleetPods, resource_replicas

GPU_UTIL_METRIC: Final = "DCGM_FI_DEV_GPU_UTIL"
GPU_RESOURCE: Final = "nvidia.com/gpu"
_ANSWERED: Final = (f"the hub answers the Pods metric {GPU_UTIL_METRIC} and Resource and ContainerResource metrics, "
                    "not this one")
_NO_RESOURCE_METRICS: Final = "unable to fetch metrics from resource metrics API: the hub's controllers have no source of them"
#: kube's condition reason for a metric source that failed, by its type.
FAILURE_REASONS: Final = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str
    """kube's reason, e.g. ``FailedGetPodsMetric``."""
    error: str
    """What failed, in kube's words: the Warning Event's message (reason ``reason``)."""
    context: str = ""
    """What kube's ``computeReplicasForMetric`` prefixes to ``error`` (``failed to get cpu resource
    metric value``), in ``FailedComputeMetricsReplicas``'s first error."""

    @property
    def message(self) -> str:
        """The ``ScalingActive`` condition's message."""
        return f"the HPA was unable to compute the replica count: {self.error}"

    @property
    def wrapped(self) -> str:
        return f"{self.context}: {self.error}" if self.context else self.error


@dataclass(frozen=True, slots=True)
class Evaluation:
    replicas: int
    """The largest proposal of the valid metrics (-1 when scaling stops: see ``failure``)."""
    metric: str
    """How kube names the metric that proposed it, e.g. ``pods metric DCGM_FI_DEV_GPU_UTIL``."""
    statuses: list[dict[str, Any]] = field(default_factory=list)
    """``status.currentMetrics``, one per metric (an empty one for a metric that failed)."""
    failure: Failure | None = None
    """Why no replica count comes from the metrics; set with ``replicas`` -1."""
    failures: list[Failure] = field(default_factory=list)
    """Every metric that failed, in order, whether or not scaling stops (kube records each one's
    Warning Event)."""
    error: str = ""
    """kube's error of ``computeReplicasForMetrics`` with ``failure`` (``invalid metrics (1 invalid
    out of 2), first error is: ...``), its ``FailedComputeMetricsReplicas`` Event's message."""


def milli_text(milli: int) -> str:
    """kube's ``resource.NewMilliQuantity(milli, DecimalSI)`` text (``90``, ``900m``, ``1k``)."""
    return canonical_quantity(f"{milli}m")


def milli_quantity(value: float) -> str:
    """:func:`milli_text` of ``value`` units."""
    return milli_text(int(value * 1000))


def _quantity(value: Any) -> float | None:
    try:
        return float(parse_quantity(value)) if value is not None else None
    except (InvalidOperation, ValueError, TypeError, ArithmeticError):
        return None


def _unanswered(metric: Mapping[str, Any]) -> Failure:
    kind = str(metric.get("type") or "")
    reason = FAILURE_REASONS.get(kind, "InvalidMetricSourceType")
    if kind in ("Resource", "ContainerResource"):
        source = metric.get("resource" if kind == "Resource" else "containerResource") or {}
        name = source.get("name")
        what = "utilization" if (source.get("target") or {}).get("type") == "Utilization" else "usage"
        problem = f"{GPU_RESOURCE} is answered with a Utilization target" if name == GPU_RESOURCE else _NO_RESOURCE_METRICS
        return Failure(reason, f"failed to get {name} {what}: unable to get metrics for resource {name}: {problem}",
                       _context(metric))
    if kind == "Pods":
        name = ((metric.get("pods") or {}).get("metric") or {}).get("name")
        return Failure(reason, f"unable to get metric {name}: {_ANSWERED}", _context(metric))
    if kind == "Object":
        name = ((metric.get("object") or {}).get("metric") or {}).get("name")
        return Failure(reason, f"unable to get metric {name}: {_ANSWERED}", _context(metric))
    if kind == "External":
        name = ((metric.get("external") or {}).get("metric") or {}).get("name")
        return Failure(reason, f"unable to get external metric {name}: {_ANSWERED}", _context(metric))
    return Failure(reason, f"unknown metric source type {kind!r}")


def _context(metric: Mapping[str, Any]) -> str:
    """kube's wrapping of a metric's error in ``computeReplicasForMetric``, by its type."""
    kind = str(metric.get("type") or "")
    if kind == "Resource":
        return f"failed to get {(metric.get('resource') or {}).get('name')} resource metric value"
    if kind == "ContainerResource":
        return f"failed to get {(metric.get('containerResource') or {}).get('container')} container metric value"
    if kind == "Pods":
        return "failed to get pods metric value"
    if kind == "Object":
        return "failed to get object metric value"
    if kind == "External":
        return f"failed to get {((metric.get('external') or {}).get('metric') or {}).get('name')} external metric value"
    return ""


def _evaluate_resource(
    metric: Mapping[str, Any], fleet: FleetPods, *, current: int, calibration: float,
) -> tuple[int, str, dict[str, Any]] | Failure:
    """kube's ``computeStatusForResourceMetricGeneric`` of a Resource or ContainerResource metric."""
    kind = str(metric.get("type"))
    field_name = "resource" if kind == "Resource" else "containerResource"
    source = metric.get(field_name) or {}
    name, container = str(source.get("name") or ""), str(source.get("container") or "")
    target = source.get("target") or {}
    reason = FAILURE_REASONS[kind]
    average = milli_value(target.get("averageValue")) if target.get("averageValue") is not None else None
    utilization = target.get("averageUtilization")
    if average is None and not isinstance(utilization, int):
        return Failure(reason, "invalid resource metric source: neither an average utilization target nor an "
                               "average value (usage) target was set", _context(metric))
    try:
        proposal = resource_replicas(
            fleet.members, name, namespace=fleet.namespace, container=container, current_replicas=current,
            target_utilization=None if average is not None else utilization, target_average=average, now=fleet.now,
            calibration=calibration)
    except MetricsUnavailable as exc:
        what = "usage" if average is not None else "utilization"
        return Failure(reason, f"failed to get {name} {what}: {exc}", _context(metric))
    current_status: dict[str, Any] = {"averageValue": milli_text(proposal.average)}
    if proposal.utilization is not None:
        current_status = {"averageUtilization": proposal.utilization, **current_status}
        label = f"{name} container resource" if kind == "ContainerResource" else f"{name} resource"
        metric_name = f"{label} utilization (percentage of request)"
    else:
        metric_name = f"{name} resource"
    status_body: dict[str, Any] = {"name": name, "current": current_status}
    if kind == "ContainerResource":
        status_body = {"name": name, "container": container, "current": current_status}
    return proposal.replicas, metric_name, {"type": kind, field_name: status_body}


def _evaluate_one(
    metric: Mapping[str, Any], pods: Collection[str], samples: Mapping[str, float], *, current: int,
    fleet: FleetPods | None, calibration: float,
) -> tuple[Proposal | int, str, dict[str, Any]] | Failure:
    kind = metric.get("type")
    if _from_pod_metrics(metric):
        if fleet is None:
            return _unanswered(metric)
        return _evaluate_resource(metric, fleet, current=current, calibration=calibration)
    if kind == "Pods":
        source = metric.get("pods") or {}
        target = source.get("target") or {}
        name = (source.get("metric") or {}).get("name")
        average = _quantity(target.get("averageValue"))
        if name != GPU_UTIL_METRIC or target.get("type") != "AverageValue" or average is None:
            return _unanswered(metric)
        try:
            proposal = plain_metric_replicas(
                samples, pods, current_replicas=current, target=average, scale_down_fallback=average,
                calibration=calibration)
        except MetricsUnavailable as exc:
            return Failure(FAILURE_REASONS["Pods"], f"unable to get metric {name}: {exc}", _context(metric))
        status = {"type": "Pods", "pods": {"metric": {"name": name}, "current": {"averageValue": milli_quantity(proposal.usage)}}}
        return proposal, f"pods metric {name}", status
    if kind == "Resource":
        source = metric.get("resource") or {}
        target = source.get("target") or {}
        utilization = target.get("averageUtilization")
        if source.get("name") != GPU_RESOURCE or target.get("type") != "Utilization" or not isinstance(utilization, int):
            return _unanswered(metric)
        try:
            proposal = plain_metric_replicas(
                samples, pods, current_replicas=current, target=utilization,
                scale_down_fallback=max(100, utilization), step=1, calibration=calibration)
        except MetricsUnavailable as exc:
            return Failure(FAILURE_REASONS["Resource"], f"failed to get {GPU_RESOURCE} utilization: {exc}", _context(metric))
        status = {"type": "Resource", "resource": {"name": GPU_RESOURCE, "current": {
            "averageUtilization": int(proposal.usage), "averageValue": milli_quantity(proposal.usage / 100)}}}
        return proposal, f"{GPU_RESOURCE} resource utilization (percentage of request)", status
    return _unanswered(metric)


def _from_pod_metrics(metric: Mapping[str, Any]) -> bool:
    """Whether ``metric`` is answered from the members' pods and their resource metrics."""
    kind = metric.get("type")
    return kind == "ContainerResource" or (kind == "Resource" and (metric.get("resource") or {}).get("name") != GPU_RESOURCE)


def needs_pod_metrics(metrics: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a metric is answered from the members' pods and their resource metrics."""
    return any(_from_pod_metrics(m) for m in metrics)


def evaluate(
    metrics: Sequence[Mapping[str, Any]], pods: Collection[str], samples: Mapping[str, float], *, current: int,
    fleet: FleetPods | None = None, calibration: float = 1.0,
) -> Evaluation:
    """kube's ``computeReplicasForMetrics``: each metric's proposal, the largest wins; scaling stops
    when every metric failed, or when some failed and the others would scale down. Each proposal
    is Karmada's, divided by ``calibration`` (:func:`~.calculating.calibration_of`)."""
    replicas, name = 0, ""
    statuses: list[dict[str, Any]] = []
    failures: list[Failure] = []
    for metric in metrics:
        outcome = _evaluate_one(metric, pods, samples, current=current, fleet=fleet, calibration=calibration)
        if isinstance(outcome, Failure):
            failures.append(outcome)
            statuses.append({"type": ""})
            continue
        proposal, metric_name, status = outcome
        proposed = proposal if isinstance(proposal, int) else proposal.replicas
        statuses.append(status)
        if replicas == 0 or proposed > replicas:
            replicas, name = proposed, metric_name
    if failures and (len(failures) >= len(metrics) or replicas < current):
        # kube's condition is the first failure's.
        error = f"invalid metrics ({len(failures)} invalid out of {len(metrics)}), first error is: {failures[0].wrapped}"
        return Evaluation(-1, "", statuses, failures[0], failures, error)
    return Evaluation(replicas, name, statuses, failures=failures)


__all__ = ["GPU_RESOURCE", "GPU_UTIL_METRIC", "Evaluation", "Failure", "evaluate", "milli_quantity", "milli_text",
           "needs_pod_metrics"]
