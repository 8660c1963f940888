"""kube's replica calculation for Resource and ContainerResource metrics (cpu, memory) over pods
of several members, on hand-computed pods (the cases of kube's replica_calculator_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.controllers.federatedhpa.calculating import MetricsUnavailable
from controlplane.controllers.federatedhpa.metrics import evaluate
from controlplane.controllers.federatedhpa.podmetrics import MemberPods, PodMetric, pod_metric_of
from controlplane.controllers.federatedhpa.resources import FleetPods, resource_replicas

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, *containers: tuple[str, dict[str, str]], phase: str = "Running", ready: str = "True",
        started: timedelta = timedelta(minutes=10), changed: timedelta = timedelta(minutes=9),
        deleting: bool = False, own: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod started ``started`` ago whose readiness changed to ``ready`` ``changed`` ago; by
    default one container ``main`` requesting 1 cpu and 1Gi."""
    spec: dict[str, Any] = {"containers": [{"name": c, "resources": {"requests": r}} for c, r in containers]
                            or [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    if own is not None:
        spec["resources"] = {"requests": own}
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = _time(NOW)
    return {"metadata": meta, "spec": spec, "status": {
        "phase": phase, "startTime": _time(NOW - started),
        "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": _time(NOW - changed)}]}}


def sample(**containers: dict[str, int]) -> PodMetric:
    """Each container's usage in milli-units, measured just now over 30 s."""
    return PodMetric(containers, NOW - timedelta(seconds=5), 30.0)


def member(cluster: str, pods: list[dict[str, Any]], cpu: dict[str, int] | None) -> MemberPods:
    """``cpu``: each named pod's ``main`` container's millicores (None: the member's metrics did not answer)."""
    return MemberPods(cluster, pods, None if cpu is None else {n: sample(main={"cpu": v}) for n, v in cpu.items()})


def replicas(members: list[MemberPods], current: int, *, utilization: int | None = None, average: int | None = None,
             resource: str = "cpu", container: str = "") -> tuple[int, int | None, int]:
    proposal = resource_replicas(members, resource, namespace="default", container=container, current_replicas=current,
                                 target_utilization=utilization, target_average=average, now=NOW)
    return proposal.replicas, proposal.utilization, proposal.average


def test_utilization_is_usage_over_the_requests_of_pods_in_every_member() -> None:
    # TestReplicaCalcScaleUp: 300m, 500m, 700m of 1 cpu each: 50 % against 30 % -> 5.
    fleet = [member("a", [pod("p1"), pod("p2")], {"p1": 300, "p2": 500}), member("b", [pod("p1")], {"p1": 700})]
    assert replicas(fleet, 3, utilization=30) == (5, 50, 500)
    # TestReplicaCalcScaleDown: 100, 300, 500, 250, 250 of 1 cpu: 28 % against 50 % -> 3.
    fleet = [member("a", [pod(f"p{i}") for i in range(5)], dict(zip([f"p{i}" for i in range(5)],
                                                                    [100, 300, 500, 250, 250], strict=True)))]
    assert replicas(fleet, 5, utilization=50) == (3, 28, 280)
    # Within the 10 % tolerance: no change.
    fleet = [member("a", [pod("p1"), pod("p2")], {"p1": 520, "p2": 520})]
    assert replicas(fleet, 2, utilization=50)[0] == 2


def test_requests_differ_and_weigh_the_utilization() -> None:
    """(100 + 900) / (500 + 1500) = 50 %: a sum over the pods, not a mean of their percentages."""
    fleet = [member("a", [pod("small", ("main", {"cpu": "500m"})), pod("big", ("main", {"cpu": "1500m"}))],
                    {"small": 100, "big": 900})]
    assert replicas(fleet, 2, utilization=25) == (4, 50, 500)


def test_average_value_is_the_mean_usage_per_pod() -> None:
    fleet = [member("a", [pod("p1")], {"p1": 900}), member("b", [pod("p1")], {"p1": 700})]
    assert replicas(fleet, 2, average=400) == (4, None, 800)


def test_a_container_without_the_request_is_kubes_error() -> None:
    fleet = [member("a", [pod("p1"), pod("web-1", ("main", {"memory": "1Gi"}))], {"p1": 500, "web-1": 500})]
    with pytest.raises(MetricsUnavailable, match=r"^missing request for cpu in container main of Pod web-1$"):
        replicas(fleet, 2, utilization=50)
    # A pod-level request stands in for the containers' when no container is named.
    fleet = [member("a", [pod("web-1", ("main", {"memory": "1Gi"}), own={"cpu": "2"})], {"web-1": 500})]
    assert replicas(fleet, 1, utilization=50)[1] == 25
    fleet = [MemberPods("a", fleet[0].pods, {"web-1": sample(main={"memory": 1000})})]
    with pytest.raises(MetricsUnavailable, match=r"^missing pod-level request for memory in Pod web-1$"):
        replicas(fleet, 1, utilization=50, resource="memory")


def test_container_resource_reads_the_named_container_only() -> None:
    two = pod("p1", ("app", {"cpu": "500m"}), ("sidecar", {"cpu": "1"}))
    fleet = [MemberPods("a", [two], {"p1": sample(app={"cpu": 400}, sidecar={"cpu": 100})})]
    assert replicas(fleet, 1, utilization=40, container="app") == (2, 80, 400)
    assert replicas(fleet, 1, utilization=40) == (1, 33, 500)  # the whole pod: 500m of 1.5 cpu
    missing = [MemberPods("a", [two], {"p1": sample(sidecar={"cpu": 100})})]
    with pytest.raises(MetricsUnavailable, match="container app not present in metrics for pod default/p1"):
        replicas(missing, 1, utilization=40, container="app")


def test_unready_cpu_pods_count_as_idle_on_a_scale_up_only() -> None:
    # TestReplicaCalcScaleUpUnreadyLessScale: the not-Ready pod (just started) is left out, then
    # counted as 0 on the scale-up: (0 + 500 + 700) / 3000 = 40 % of 30 % -> 4.
    pods = [pod("p1", ready="False", started=timedelta(minutes=1)), pod("p2"), pod("p3")]
    cpu = {"p1": 300, "p2": 500, "p3": 700}
    assert replicas([member("a", pods, cpu)], 3, utilization=30) == (4, 60, 600)
    # Memory has no such rule: 50 % of 30 % -> 5.
    memory = MemberPods("a", pods, {n: sample(main={"memory": v * 1024**3 // 1000 * 1000}) for n, v in cpu.items()})
    assert replicas([memory], 3, utilization=30, resource="memory")[0] == 5


@pytest.mark.parametrize(
    ("ready", "started", "changed", "sampled_after_change", "unready"),
    [
        # Within the 5 minute cpu initialization period: not Ready, or Ready for less than a window.
        ("False", timedelta(minutes=2), timedelta(minutes=1), True, True),
        ("True", timedelta(minutes=2), timedelta(seconds=10), False, True),
        ("True", timedelta(minutes=2), timedelta(minutes=1), True, False),
        # After it: not Ready and never was (readiness changed within 30 s of the start) ...
        ("False", timedelta(minutes=10), timedelta(minutes=10) - timedelta(seconds=20), True, True),
        # ... but a pod that was Ready once still counts.
        ("False", timedelta(minutes=10), timedelta(minutes=2), True, False),
    ],
)
def test_cpu_readiness_rules(ready: str, started: timedelta, changed: timedelta, sampled_after_change: bool,
                             unready: bool) -> None:
    """Two pods at 90 % of a 50 % target: 4, unless the first is unready (then 0 + 90 % -> 45 %,
    which turns the scale-up around: stays 2)."""
    first = pod("p1", ready=ready, started=started, changed=changed)
    taken = NOW - timedelta(seconds=5) if sampled_after_change else NOW - changed + timedelta(seconds=5)
    metrics = {"p1": PodMetric({"main": {"cpu": 900}}, taken, 30.0), "p2": sample(main={"cpu": 900})}
    fleet = [MemberPods("a", [first, pod("p2")], metrics)]
    assert replicas(fleet, 2, utilization=50)[0] == (2 if unready else 4)


def test_deleted_failed_and_pending_pods() -> None:
    pods = [pod("p1"), pod("gone", deleting=True), pod("failed", phase="Failed"), pod("pending", phase="Pending")]
    cpu = {"p1": 900, "gone": 0, "failed": 0}
    # Only p1 counts (the pending pod is unready: 0 on the scale-up, 900 / 2000 = 45 % of 50 %: turned around).
    assert replicas([member("a", pods, cpu)], 1, utilization=50) == (1, 90, 900)
    assert replicas([member("a", pods[:3], cpu)], 1, utilization=50) == (2, 90, 900)


def test_a_member_whose_metrics_do_not_answer_has_its_pods_missing() -> None:
    busy = member("a", [pod("p1"), pod("p2")], {"p1": 900, "p2": 900})
    silent = member("b", [pod("p3"), pod("p4")], None)
    # A scale-up counts them as 0: 1800 / 4000 = 45 % of 30 % -> ceil(1.5 x 4) = 6.
    assert replicas([busy, silent], 4, utilization=30)[0] == 6
    # A scale-down counts them at 100 % of their request: (200 + 2000) / 4000 = 55 % of 50 %: stays.
    idle = member("a", [pod("p1"), pod("p2")], {"p1": 100, "p2": 100})
    assert replicas([idle, silent], 4, utilization=50)[0] == 4
    assert replicas([idle], 2, utilization=50)[0] == 1
    with pytest.raises(MetricsUnavailable, match=r"^unable to get metrics for resource cpu: unable to fetch metrics "
                                                 r"from resource metrics API: no member answered \(b\)$"):
        replicas([silent], 2, utilization=50)
    with pytest.raises(MetricsUnavailable, match="no metrics returned from resource metrics API"):
        replicas([member("a", [pod("p1")], {})], 1, utilization=50)


def test_calibration_divides_the_resource_count() -> None:
    """cpu by hand: b unreachable, a's two pods at 900m of 1 cpu against 60 %: a ratio of 1.5,
    ceil(1.5 x 2 / 0.5) = 6 for the 4 replicas placed 2 and 2 (3 uncalibrated); an average value
    the same way (900m against 600m)."""
    busy = [member("a", [pod("p1"), pod("p2")], {"p1": 900, "p2": 900})]
    proposal = resource_replicas(busy, "cpu", namespace="default", current_replicas=4, target_utilization=60,
                                 now=NOW, calibration=0.5)
    assert (proposal.replicas, proposal.utilization) == (6, 90)
    assert replicas(busy, 4, utilization=60)[0] == 3
    proposal = resource_replicas(busy, "cpu", namespace="default", current_replicas=4, target_average=600, now=NOW,
                                 calibration=0.5)
    assert proposal.replicas == 6


def test_pod_metrics_objects_are_read_in_milli_units() -> None:
    metric = pod_metric_of({"timestamp": "2026-01-01T11:59:30Z", "window": "30s", "containers": [
        {"name": "main", "usage": {"cpu": "912345678n", "memory": "524288Ki"}}]})
    assert metric.containers == {"main": {"cpu": 913, "memory": 512 * 1024**2 * 1000}}
    assert metric.window_seconds == 30.0 and metric.timestamp == NOW - timedelta(seconds=30)


_CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
_MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "256Mi"}}}
_APP = {"type": "ContainerResource", "containerResource": {
    "name": "cpu", "container": "app", "target": {"type": "Utilization", "averageUtilization": 50}}}


def test_evaluate_gives_kubes_statuses_names_and_failures() -> None:
    two = pod("p1", ("app", {"cpu": "500m", "memory": "256Mi"}), ("sidecar", {"cpu": "500m", "memory": "256Mi"}))
    usage = {"p1": sample(app={"cpu": 450, "memory": 400 * 1024**2 * 1000}, sidecar={"cpu": 50, "memory": 0})}
    fleet = FleetPods("default", [MemberPods("a", [two], usage)], NOW)
    evaluation = evaluate([_CPU, _MEMORY, _APP], [], {}, current=1, fleet=fleet)
    assert evaluation.statuses == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50, "averageValue": "500m"}}},
        {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "419430400"}}},
        {"type": "ContainerResource", "containerResource": {
            "name": "cpu", "container": "app", "current": {"averageUtilization": 90, "averageValue": "450m"}}},
    ]
    # cpu: within tolerance (1); memory: 400Mi of 256Mi -> 2; the app container: 90 % of 50 % -> 2.
    assert (evaluation.replicas, evaluation.metric) == (2, "memory resource")
    only_app = evaluate([_APP], [], {}, current=1, fleet=fleet)
    assert only_app.metric == "cpu container resource utilization (percentage of request)"
    assert evaluate([_CPU], [], {}, current=1, fleet=FleetPods("default", [MemberPods("a", [two], {
        "p1": sample(app={"cpu": 900}, sidecar={"cpu": 900})})], NOW)).metric == (
        "cpu resource utilization (percentage of request)")

    no_request = pod("p1", ("app", {"memory": "1Gi"}))
    failed = evaluate([_APP], [], {}, current=1, fleet=FleetPods("default", [MemberPods("a", [no_request], usage)], NOW))
    assert failed.replicas == -1 and failed.failure is not None
    assert failed.failure.reason == "FailedGetContainerResourceMetric"
    assert failed.failure.message == ("the HPA was unable to compute the replica count: failed to get cpu utilization: "
                                      "missing request for cpu in container app of Pod p1")
    no_target = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}
    invalid = evaluate([no_target], [], {}, current=1, fleet=fleet).failure
    assert invalid is not None and invalid.error == ("invalid resource metric source: neither an average utilization "
                                                     "target nor an average value (usage) target was set")
    unavailable = evaluate([_MEMORY], [], {}, current=1).failure
    assert unavailable is not None and unavailable.reason == "FailedGetResourceMetric"
    assert unavailable.error == ("failed to get memory usage: unable to get metrics for resource memory: unable to fetch "
                                 "metrics from resource metrics API: the hub's controllers have no source of them")
