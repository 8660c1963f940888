"""kube's HPA replica calculation and scaling behaviour, as the FederatedHPA controller runs them
(the examples of kube's replica_calculator_test.go and horizontal_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.controllers.federatedhpa.behavior import History, normalize
from controlplane.controllers.federatedhpa.calculating import (
    MetricsUnavailable,
    calibration_of,
    plain_metric_replicas,
)
from controlplane.controllers.federatedhpa.metrics import evaluate, milli_quantity
from controlplane.controllers.federatedhpa.selecting import HPASelectors

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("samples", "pods", "current", "target", "fallback", "expected"),
    [
        # TestReplicaCalcScaleUp: 30 %, 50 %, 70 % of a 30 % target -> 5.
        ({"a": 30, "b": 50, "c": 70}, "abc", 3, 30, 100, 5),
        # TestReplicaCalcScaleUpCM: 20, 10, 30 against 15 -> 4.
        ({"a": 20, "b": 10, "c": 30}, "abc", 3, 15, 15, 4),
        # TestReplicaCalcScaleDown: 10, 30, 50, 25, 25 % against 50 % -> 3.
        ({"a": 10, "b": 30, "c": 50, "d": 25, "e": 25}, "abcde", 5, 50, 100, 3),
        # TestReplicaCalcTolerance: within 10 % of the target, no change.
        ({"a": 101, "b": 103, "c": 102}, "abc", 3, 100, 100, 3),
        # Missing pods on a scale-up count as 0: 100,100,100,? against 50 -> ratio 1.5 on 4 -> 6.
        ({"a": 100, "b": 100, "c": 100}, "abcd", 4, 50, 100, 6),
        # ... unless that turns the direction around (90, 90, ?, ? against 50: 0.9): no change.
        ({"a": 90, "b": 90}, "abcd", 4, 50, 100, 4),
        # Missing pods on a scale-down count as the fallback (a Pods metric's: its target):
        # 10, 10, 50, 50 against 50 -> 0.6 on 4 -> 3.
        ({"a": 10, "b": 10}, "abcd", 4, 50, 50, 3),
        # A Resource utilization's fallback is 100 %: 10, 10, 100, 100 against 50 is above -> no change.
        ({"a": 10, "b": 10}, "abcd", 4, 50, 100, 4),
    ],
)
def test_plain_metric_replicas(samples: dict[str, float], pods: str, current: int, target: float, fallback: float,
                               expected: int) -> None:
    proposal = plain_metric_replicas(samples, list(pods), current_replicas=current, target=target,
                                     scale_down_fallback=fallback)
    assert proposal.replicas == expected


def test_the_average_is_cut_as_kubes_integers_cut_it() -> None:
    """A Resource utilization is a whole percent: 50.9 % against 25 % is 50 %, twice the target."""
    samples = {"a": 50.9, "b": 50.9}
    assert plain_metric_replicas(samples, "ab", current_replicas=2, target=25, scale_down_fallback=100, step=1).replicas == 4
    assert plain_metric_replicas(samples, "ab", current_replicas=2, target=25, scale_down_fallback=100).replicas == 5


def test_calibration_scales_a_count_from_some_members_to_the_whole_target() -> None:
    """Karmada's calibration, by hand: 4 replicas placed 2 and 2, member b unreachable. Its pods
    are not counted and the calibration is b's absence: 2 of 4 replicas counted, 0.5. a's two
    pods at 60 against 50 are a ratio of 1.2: ceil(1.2 x 2 / 0.5) = 5 for the whole target (the
    two counted pods alone would say 3, a scale-down)."""
    calibration = calibration_of({"a": 2, "b": 2}, {"a"}, current_replicas=4)
    assert calibration == 0.5
    samples = {"a/p1": 60.0, "a/p2": 60.0}
    proposal = plain_metric_replicas(samples, list(samples), current_replicas=4, target=50, scale_down_fallback=50,
                                     calibration=calibration)
    assert proposal.replicas == 5
    assert plain_metric_replicas(samples, list(samples), current_replicas=4, target=50,
                                 scale_down_fallback=50).replicas == 3
    # Every member counted: 1; Duplicated (each member runs all 4): the number of members.
    assert calibration_of({"a": 2, "b": 2}, {"a", "b"}, current_replicas=4) == 1.0
    assert calibration_of({"a": 4, "b": 4}, {"a", "b"}, current_replicas=4) == 2.0
    # Nothing placed yet, or no replicas: no calibration.
    assert calibration_of({}, (), current_replicas=4) == 1.0
    assert calibration_of({"a": 0}, {"a"}, current_replicas=0) == 1.0


def test_no_samples_or_pods_is_kubes_error() -> None:
    with pytest.raises(MetricsUnavailable, match=r"did not receive metrics for targeted pods \(pods might be unready\)"):
        plain_metric_replicas({}, ["a"], current_replicas=1, target=50, scale_down_fallback=50)
    with pytest.raises(MetricsUnavailable, match="no pods returned by selector while calculating replica count"):
        plain_metric_replicas({}, [], current_replicas=1, target=50, scale_down_fallback=50)


def _rules(select: str = "Max", window: int | None = 0, *policies: tuple[str, int, int]) -> dict[str, Any]:
    rules: dict[str, Any] = {"selectPolicy": select,
                             "policies": [{"type": t, "value": v, "periodSeconds": p} for t, v, p in policies]}
    if window is not None:
        rules["stabilizationWindowSeconds"] = window
    return rules


_UP = _rules("Max", 0, ("Pods", 4, 60), ("Percent", 100, 60))
_DOWN = _rules("Max", 0, ("Percent", 50, 60))


@pytest.mark.parametrize(
    ("current", "desired", "behavior", "expected", "limited"),
    [
        # No behavior: kube's older rule, at most max(2 x current, 4).
        (3, 10, None, 6, ("True", "ScaleUpLimit")),
        (1, 10, None, 4, ("True", "ScaleUpLimit")),
        # Pods 4 (7) or Percent 100 (6) of 3: Max picks 7.
        (3, 30, {"scaleUp": _UP, "scaleDown": _DOWN}, 7, ("True", "ScaleUpLimit")),
        # Pods 4 / Percent 100 of 5: Max picks 10, Min picks 9.
        (5, 20, {"scaleUp": _UP, "scaleDown": _DOWN}, 10, ("True", "ScaleUpLimit")),
        (5, 20, {"scaleUp": {**_UP, "selectPolicy": "Min"}, "scaleDown": _DOWN}, 9, ("True", "ScaleUpLimit")),
        (5, 20, {"scaleUp": {**_UP, "selectPolicy": "Disabled"}, "scaleDown": _DOWN}, 5, ("True", "ScaleUpLimit")),
        # Above the maximum: TooManyReplicas.
        (5, 20, {"scaleUp": _rules("Max", 0, ("Pods", 100, 60)), "scaleDown": _DOWN}, 12, ("True", "TooManyReplicas")),
        # Percent 50 down from 10: int(10 x 0.5) = 5.
        (10, 1, {"scaleUp": _UP, "scaleDown": _DOWN}, 5, ("True", "ScaleDownLimit")),
        (10, 1, {"scaleUp": _UP, "scaleDown": _rules("Max", 0, ("Pods", 20, 60))}, 2, ("True", "TooFewReplicas")),
        (4, 3, {"scaleUp": _UP, "scaleDown": _DOWN}, 3, ("False", "DesiredWithinRange")),
    ],
)
def test_normalize(current: int, desired: int, behavior: dict[str, Any] | None, expected: int,
                   limited: tuple[str, str]) -> None:
    normalized = normalize(History(), NOW, current=current, desired=desired, min_replicas=2, max_replicas=12,
                           behavior=behavior)
    assert normalized.replicas == expected
    assert (normalized.scaling_limited.status, normalized.scaling_limited.reason) == limited


def test_scale_events_of_the_period_count_against_the_policy() -> None:
    """Percent 50 per 60 s: after a scale-down from 16 to 10 (6 removed 30 s ago), the period
    started at 16, so it may go to 8 -- not to 5."""
    history = History()
    history.record_scale(NOW - timedelta(seconds=30), current=16, desired=10)
    behavior = {"scaleUp": _UP, "scaleDown": _DOWN}
    assert normalize(history, NOW, current=10, desired=1, min_replicas=1, max_replicas=20, behavior=behavior).replicas == 8
    assert normalize(History(), NOW, current=10, desired=1, min_replicas=1, max_replicas=20, behavior=behavior).replicas == 5


def test_stabilization_windows() -> None:
    """The highest recommendation of the scale-down window holds a scale-down back, and without
    ``behavior`` kube's 5 minute downscale window applies."""
    history = History()
    behavior = {"scaleUp": _UP, "scaleDown": _rules("Max", 60, ("Percent", 100, 15))}
    first = normalize(history, NOW - timedelta(seconds=30), current=8, desired=8, min_replicas=1, max_replicas=20,
                      behavior=behavior)
    assert (first.replicas, first.able_to_scale.reason) == (8, "ReadyForNewScale")
    held = normalize(history, NOW, current=8, desired=2, min_replicas=1, max_replicas=20, behavior=behavior)
    assert (held.replicas, held.able_to_scale.reason) == (8, "ScaleDownStabilized")
    later = normalize(history, NOW + timedelta(seconds=61), current=8, desired=2, min_replicas=1, max_replicas=20,
                      behavior=behavior)
    assert later.replicas == 2
    legacy = History()
    normalize(legacy, NOW - timedelta(seconds=200), current=6, desired=6, min_replicas=1, max_replicas=20, behavior=None)
    assert normalize(legacy, NOW, current=6, desired=2, min_replicas=1, max_replicas=20, behavior=None).replicas == 6
    assert normalize(legacy, NOW + timedelta(seconds=301), current=6, desired=2, min_replicas=1, max_replicas=20,
                     behavior=None).replicas == 2


_GPU_PODS = {"type": "Pods", "pods": {"metric": {"name": "DCGM_FI_DEV_GPU_UTIL"},
                                      "target": {"type": "AverageValue", "averageValue": "50"}}}
_GPU_RESOURCE = {"type": "Resource", "resource": {"name": "nvidia.com/gpu",
                                                  "target": {"type": "Utilization", "averageUtilization": 50}}}
_CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}


def test_gpu_metrics_give_kubes_metric_statuses() -> None:
    evaluation = evaluate([_GPU_PODS, _GPU_RESOURCE], ["a", "b"], {"a": 90.0, "b": 90.0}, current=2)
    assert (evaluation.replicas, evaluation.metric, evaluation.failure) == (4, "pods metric DCGM_FI_DEV_GPU_UTIL", None)
    assert evaluation.statuses == [
        {"type": "Pods", "pods": {"metric": {"name": "DCGM_FI_DEV_GPU_UTIL"}, "current": {"averageValue": "90"}}},
        {"type": "Resource", "resource": {"name": "nvidia.com/gpu",
                                          "current": {"averageUtilization": 90, "averageValue": "900m"}}},
    ]
    assert milli_quantity(12.5) == "12500m"


def test_metrics_the_hub_cannot_answer_stop_scaling() -> None:
    """Without the members' pods and resource metrics (no source of them), cpu is unavailable."""
    only_cpu = evaluate([_CPU], ["a"], {"a": 90.0}, current=1)
    assert only_cpu.replicas == -1 and only_cpu.failure is not None
    assert only_cpu.failure.reason == "FailedGetResourceMetric"
    assert only_cpu.failure.message.startswith(
        "the HPA was unable to compute the replica count: failed to get cpu utilization: "
        "unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API")
    assert only_cpu.statuses == [{"type": ""}]
    # A valid metric still scales up; it may not scale down while another metric is unavailable.
    assert evaluate([_CPU, _GPU_PODS], ["a"], {"a": 90.0}, current=1).replicas == 2
    assert evaluate([_CPU, _GPU_PODS], ["a", "b"], {"a": 5.0, "b": 5.0}, current=2).replicas == -1
    external = {"type": "External", "external": {"metric": {"name": "queue_depth"},
                                                 "target": {"type": "Value", "value": "10"}}}
    failure = evaluate([external], ["a"], {}, current=1).failure
    assert failure is not None and failure.reason == "FailedGetExternalMetric" and "queue_depth" in failure.error
    unmeasured = evaluate([_GPU_PODS], ["a"], {}, current=1).failure
    assert unmeasured is not None and unmeasured.reason == "FailedGetPodsMetric"
    # Several fail: the condition is the first's, as kube's.
    both = evaluate([external, _GPU_PODS], ["a"], {}, current=1)
    assert both.failure is not None and both.failure.reason == "FailedGetExternalMetric"
    assert both.error == ("invalid metrics (2 invalid out of 2), first error is: failed to get queue_depth external "
                          f"metric value: {both.failure.error}")
    assert [f.reason for f in both.failures] == ["FailedGetExternalMetric", "FailedGetPodsMetric"]
    assert both.failures[1].error.startswith("unable to get metric DCGM_FI_DEV_GPU_UTIL: ")
    # A valid metric scales up while another fails: each failure is still reported.
    partly = evaluate([external, _GPU_PODS], ["a"], {"a": 90.0}, current=1)
    assert (partly.replicas, partly.failure, [f.reason for f in partly.failures]) == (2, None, ["FailedGetExternalMetric"])


def test_hpa_selectors_find_pods_two_federated_hpas_select() -> None:
    """kube's hpaSelectors: within a namespace, and only among FederatedHPAs whose selector is known."""
    selectors = HPASelectors()
    for key in (("ml", "web"), ("ml", "all"), ("other", "web")):
        selectors.known(key)
    web = [{"app": "web", "tier": "front"}]
    # "all" is known but has not been synced: it selects nothing yet.
    assert selectors.ambiguity(("ml", "web"), "app=web", web) is None
    assert selectors.ambiguity(("other", "web"), "app=web", web) is None
    ambiguous = selectors.ambiguity(("ml", "all"), "tier in (front,back)", web)
    assert ambiguous is not None
    assert (ambiguous.condition.reason, ambiguous.reason) == ("AmbiguousSelector", "AmbiguousSelector")
    assert ambiguous.message == "pods by selector tier in (front,back) are controlled by multiple HPAs: [ml/all ml/web]"
    # The pods of another workload that only "all" selects are not ambiguous; nor are none.
    assert selectors.ambiguity(("ml", "all"), "tier in (front,back)", [{"app": "api", "tier": "back"}]) is None
    assert selectors.ambiguity(("ml", "web"), "app=web", []) is None
    selectors.forget(("ml", "all"))
    assert selectors.ambiguity(("ml", "web"), "app=web", web) is None
