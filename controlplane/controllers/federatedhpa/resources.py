"""kube's replica calculation for ``Resource`` and ``ContainerResource`` metrics (cpu, memory),
over the target's pods in every member.

kube's ``GetResourceReplicas`` (a ``Utilization`` target: the pods' usage over the sum of their
containers' requests) and ``GetRawResourceReplicas`` (an ``AverageValue`` target: the mean usage
per pod), with ``metrics/client.go``'s reading of ``PodMetrics`` (a pod's usage is the sum of its
containers', or the named container's) and ``groupPods``: pods being deleted or Failed are
ignored, Pending pods are unready, pods without metrics are missing, and -- for cpu only -- a
pod is unready while it has no Ready condition or start time, within
:data:`CPU_INITIALIZATION_PERIOD` of its start when it is not Ready or its sample predates one
window after its readiness changed, and after that when it is not Ready and never was
(its readiness last changed within :data:`INITIAL_READINESS_DELAY` of its start). A pod is
named ``<cluster>/<name>``: two members may run pods of one name.

In: :class:`~.podmetrics.MemberPods` of each member, the resource (and container), the target,
the current replicas and the time. Out: :class:`ResourceProposal`, or
:class:`~.calculating.MetricsUnavailable` with kube's words. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from controlplane.apis.pods import PodView, container_requests
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.controllers.federatedhpa.calculating import (
    TOLERANCE,
    MetricsUnavailable,
    usage_ratio_replicas,
)
from controlplane.controllers.federatedhpa.podmetrics import MemberPods, milli_value

#: ``--horizontal-pod-autoscaler-cpu-initialization-period``'s default (seconds).
CPU_INITIALIZATION_PERIOD: Final = 300.0
#: ``--horizontal-pod-autoscaler-initial-readiness-delay``'s default (seconds).
INITIAL_READINESS_DELAY: Final = 30.0
#: Resources a pod's own ``spec.resources`` may request (kube's pod-level resources).
_POD_LEVEL: Final = ("cpu", "memory")
_INT32_MAX: Final = 2**31 - 1
_NEVER: Final = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Sample:
    value: int
    """Milli-units."""
    timestamp: datetime
    window_seconds: float


@dataclass(frozen=True, slots=True)
class FleetPods:
    """What a FederatedHPA's resource metrics are computed from: its target's pods in each member."""

    namespace: str
    members: Sequence[MemberPods]
    now: datetime


@dataclass(frozen=True, slots=True)
class ResourceProposal:
    replicas: int
    utilization: int | None
    """The percentage of request (a ``Utilization`` target only)."""
    average: int
    """The mean usage per pod, milli-units."""


def pods_by_key(members: Sequence[MemberPods]) -> dict[str, Mapping[str, Any]]:
    return {f"{m.cluster}/{(pod.get('metadata') or {}).get('name')}": pod for m in members for pod in m.pods}


def resource_samples(
    members: Sequence[MemberPods], resource: str, *, namespace: str, container: str = "",
) -> dict[str, Sample]:
    """kube's ``GetResourceMetric``: each pod's usage of ``resource`` (its containers' sum, or
    ``container``'s); a pod a container of which reports no such usage has none."""
    answered = [m for m in members if m.metrics is not None]
    if members and not answered:
        silent = ", ".join(m.cluster for m in members)
        raise MetricsUnavailable(f"unable to fetch metrics from resource metrics API: no member answered ({silent})")
    samples: dict[str, Sample] = {}
    count = 0
    for member in answered:
        assert member.metrics is not None
        for name, metric in member.metrics.items():
            count += 1
            if container:
                usage = metric.containers.get(container)
                if usage is None:
                    raise MetricsUnavailable(f"failed to get container metrics: container {container} not present "
                                             f"in metrics for pod {namespace}/{name}")
                value = usage.get(resource)
            else:
                values = [usage.get(resource) for usage in metric.containers.values()]
                value = None if not values or None in values else sum(v for v in values if v is not None)
            if value is not None:
                samples[f"{member.cluster}/{name}"] = Sample(value, metric.timestamp or _NEVER, metric.window_seconds)
    if not count:
        raise MetricsUnavailable("no metrics returned from resource metrics API")
    return samples


@dataclass(frozen=True, slots=True)
class Groups:
    ready: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(
    pods: Mapping[str, Mapping[str, Any]], samples: Mapping[str, Sample], resource: str, *, now: datetime,
    cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
    initial_readiness_delay: float = INITIAL_READINESS_DELAY,
) -> Groups:
    """kube's ``groupPods``: see the module docstring."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for key, pod in pods.items():
        view = PodView(pod)
        status, phase = view.status, view.phase
        if view.is_deleting or phase == "Failed":
            ignored.add(key)
            continue
        if phase == "Pending":
            unready.add(key)
            continue
        sample = samples.get(key)
        if sample is None:
            missing.add(key)
            continue
        if resource == "cpu" and _cpu_unready(status, sample, now=now, initialization=cpu_initialization_period,
                                              delay=initial_readiness_delay):
            unready.add(key)
            continue
        ready += 1
    return Groups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def _cpu_unready(status: Mapping[str, Any], sample: Sample, *, now: datetime, initialization: float,
                 delay: float) -> bool:
    condition = next((c for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("type") == "Ready"),
                     None)
    started = parse_time_or_none(status.get("startTime"))
    if condition is None or started is None:
        return True
    changed = parse_time_or_none(condition.get("lastTransitionTime")) or _NEVER
    if started + timedelta(seconds=initialization) > now:
        return condition.get("status") == "False" or sample.timestamp < changed + timedelta(seconds=sample.window_seconds)
    return condition.get("status") == "False" and started + timedelta(seconds=delay) > changed


def pod_requests(pods: Mapping[str, Mapping[str, Any]], resource: str, *, container: str = "") -> dict[str, int]:
    """kube's ``calculateRequests`` (milli-units): the pod's own ``spec.resources`` request when it
    sets one and no container is named, else the sum of its containers' (and restartable init
    containers') requests, or the named container's."""
    out: dict[str, int] = {}
    for key, pod in pods.items():
        view = PodView(pod)
        name, own = view.name, view.pod_level_requests
        if not container and any(r in own for r in _POD_LEVEL):
            value = milli_value(own.get(resource)) if resource in own else None
            if value is None:
                raise MetricsUnavailable(f"missing pod-level request for {resource} in Pod {name}")
            out[key] = value
            continue
        containers = [*view.containers, *(c for c in view.init_containers if c.get("restartPolicy") == "Always")]
        total, found = 0, False
        for each in containers:
            if container and each.get("name") != container:
                continue
            requests = container_requests(each, read=lambda raw: {
                k: v for k, v in ((k, milli_value(q)) for k, q in raw.items() if k == resource) if v is not None})
            if resource not in requests:
                raise MetricsUnavailable(f"missing request for {resource} in container {each.get('name')} of Pod {name}")
            total += requests[resource]
            if container:
                found = True
                break
        if container and not found:
            raise MetricsUnavailable(f"container {container} not found in Pod {name}")
        out[key] = total
    return out


def utilization_ratio(metrics: Mapping[str, float], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """kube's ``GetResourceUtilizationRatio``: (ratio to the target, percentage of request, mean usage)."""
    used = requested = entries = 0
    for key, value in metrics.items():
        if key in requests:
            used, requested, entries = used + int(value), requested + requests[key], entries + 1
    if requested == 0:
        raise MetricsUnavailable("no metrics returned matched known pods")
    utilization = min(used * 100 // requested, _INT32_MAX)
    return utilization / target, utilization, used // entries


def resource_replicas(
    members: Sequence[MemberPods], resource: str, *, namespace: str, container: str = "", current_replicas: int,
    target_utilization: int | None = None, target_average: int | None = None, now: datetime,
    tolerance: float = TOLERANCE, calibration: float = 1.0,
) -> ResourceProposal:
    """kube's ``GetResourceReplicas`` (``target_utilization``, percent) or ``GetRawResourceReplicas``
    (``target_average``, milli-units)."""
    try:
        samples = resource_samples(members, resource, namespace=namespace, container=container)
    except MetricsUnavailable as exc:
        raise MetricsUnavailable(f"unable to get metrics for resource {resource}: {exc}") from exc
    pods = pods_by_key(members)
    if not pods:
        raise MetricsUnavailable("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, samples, resource, now=now)
    metrics = {k: float(s.value) for k, s in samples.items() if k not in groups.ignored and k not in groups.unready}
    if not metrics:
        raise MetricsUnavailable("did not receive metrics for targeted pods (pods might be unready)")
    if target_utilization is None:
        target = target_average or 0
        if target <= 0:
            raise MetricsUnavailable(f"invalid target value {target}m")

        def average(values: Mapping[str, float]) -> float:
            return (sum(int(v) for v in values.values()) // len(values)) / target

        replicas = usage_ratio_replicas(
            metrics, average, current_replicas=current_replicas, ready_count=groups.ready, unready=groups.unready,
            missing=groups.missing, scale_down_value=lambda _: target, tolerance=tolerance, calibration=calibration)
        return ResourceProposal(replicas, None, sum(int(v) for v in metrics.values()) // len(metrics))
    if target_utilization <= 0:
        raise MetricsUnavailable(f"invalid target value {target_utilization}")
    requests = pod_requests(pods, resource, container=container)
    _, utilization, average_value = utilization_ratio(metrics, requests, target_utilization)
    fallback = max(100, target_utilization)
    replicas = usage_ratio_replicas(
        metrics, lambda values: utilization_ratio(values, requests, target_utilization)[0],
        current_replicas=current_replicas, ready_count=groups.ready, unready=groups.unready, missing=groups.missing,
        scale_down_value=lambda key: requests[key] * fallback // 100, tolerance=tolerance, calibration=calibration)
    return ResourceProposal(replicas, utilization, average_value)
