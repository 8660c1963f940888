"""kube's conversion of a HorizontalPodAutoscaler between autoscaling/v2 and autoscaling/v1
(``pkg/apis/autoscaling/v1/conversion.go``): the spec cases of kube's ``conversion_test.go``, the
round-trip annotations in kube's exact JSON, and round trips both ways (pure functions)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.kube.convert_autoscaling import (
    BEHAVIOR_ANNOTATION,
    CONDITIONS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    METRICS_ANNOTATION,
    v1_to_v2,
    v2_to_v1,
)
from controlplane.gojson import go_json

Obj = dict[str, Any]
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def cpu(utilization: int) -> Obj:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}}


def cpu_average_value(value: str) -> Obj:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": value}}}


def memory(value: str) -> Obj:
    return {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": value}}}


def v2(*, metrics: list[Obj] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    meta: Obj = {"name": "web", "namespace": "default"}
    if annotations is not None:
        meta["annotations"] = annotations
    body: Obj = {"scaleTargetRef": dict(REF), "minReplicas": 1, "maxReplicas": 3, **spec}
    if metrics is not None:
        body["metrics"] = metrics
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta, "spec": body}


def v1(annotations: dict[str, str] | None = None, status: Obj | None = None, **spec: Any) -> Obj:
    meta: Obj = {"name": "web", "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    obj: Obj = {
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": meta,
        "spec": {"scaleTargetRef": dict(REF), "minReplicas": 1, "maxReplicas": 3, **spec},
    }
    if status is not None:
        obj["status"] = status
    return obj


# TestConvert_autoscaling_HorizontalPodAutoscalerSpec_To_v1_HorizontalPodAutoscalerSpec (#101370): the
# first CPU *utilization* metric is v1's target, whatever comes before it.
@pytest.mark.parametrize(("metrics", "target"), [
    pytest.param([cpu_average_value("300m"), cpu(70)], 70, id="TestConversionWithCPUAverageValueAndUtilizationBoth1"),
    pytest.param([], None, id="TestConversionWithoutMetrics"),
    pytest.param([cpu(60)], 60, id="TestConversionWithCPUUtilizationOnly"),
    pytest.param([cpu(60), cpu(90)], 60, id="the first of two"),
])
def test_v1_target_is_the_first_cpu_utilization_metric(metrics: list[Obj], target: int | None) -> None:
    spec = v2_to_v1(v2(metrics=metrics))["spec"]
    assert spec.get("targetCPUUtilizationPercentage") == target
    assert (spec["minReplicas"], spec["maxReplicas"], spec["scaleTargetRef"]) == (1, 3, REF)


def test_other_metrics_travel_in_kubes_annotation_json() -> None:
    obj = v2(metrics=[cpu_average_value("300m"), cpu(70), memory("1Gi")])
    annotations = v2_to_v1(obj)["metadata"]["annotations"]
    assert annotations == {METRICS_ANNOTATION: (
        '[{"type":"Resource","resource":{"name":"cpu","targetAverageValue":"300m"}},'
        '{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1Gi"}}]'
    )}


def test_every_source_type_in_the_metrics_annotation() -> None:
    selector = {"matchLabels": {"queue": "a&b"}}
    metrics = [
        {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": selector},
                                  "target": {"type": "AverageValue", "averageValue": "1k"}}},
        {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
                                      "metric": {"name": "hits"}, "target": {"type": "Value", "value": "10"}}},
        {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                                                            "target": {"type": "Utilization", "averageUtilization": 50}}},
    ]
    annotation = v2_to_v1(v2(metrics=metrics))["metadata"]["annotations"][METRICS_ANNOTATION]
    assert annotation == (
        '[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"1k","selector":{"matchLabels":{"queue":"a\\u0026b"}}}},'
        '{"type":"Object","object":{"target":{"kind":"Ingress","name":"main","apiVersion":"networking.k8s.io/v1"},'
        '"metricName":"hits","targetValue":"10"}},'
        '{"type":"External","external":{"metricName":"queue","targetAverageValue":"30"}},'
        '{"type":"ContainerResource","containerResource":{"name":"cpu","targetAverageUtilization":50,"container":"app"}}]'
    )
    # v1 -> v2 gives them back, in kube's shape: an Object target always has a value (kube's
    # ``&in.TargetValue``); no v1 target, so no CPU metric is appended.
    back = v1_to_v2(v2_to_v1(v2(metrics=metrics)))["spec"]["metrics"]
    assert back == metrics


def test_behavior_travels_as_kubes_internal_type() -> None:
    behavior = {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
        "scaleDown": {"selectPolicy": "Min", "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]},
    }
    converted = v2_to_v1(v2(metrics=[cpu(50)], behavior=behavior))
    assert converted["metadata"]["annotations"] == {BEHAVIOR_ANNOTATION: (
        '{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15}]},'
        '"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Min","Policies":[{"Type":"Percent","Value":10,"PeriodSeconds":60}]}}'
    )}
    assert v1_to_v2(converted)["spec"]["behavior"] == behavior


def test_status_metrics_and_conditions_travel_in_annotations() -> None:
    status = {
        "currentReplicas": 2, "desiredReplicas": 3,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42, "averageValue": "120m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "ReadyForNewScale"}],
    }
    obj = {**v2(metrics=[cpu(50)]), "status": status}
    converted = v2_to_v1(obj)
    assert converted["status"] == {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 42}
    assert converted["metadata"]["annotations"] == {
        CURRENT_METRICS_ANNOTATION: '[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":42,"currentAverageValue":"120m"}}]',
        CONDITIONS_ANNOTATION: '[{"type":"AbleToScale","status":"True","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"ReadyForNewScale"}]',
    }
    assert v1_to_v2(converted) == obj


def test_every_source_type_in_the_current_metrics_annotation() -> None:
    """v1's ``MetricStatus`` of each source, in kube's field order; an External metric's
    ``currentValue`` is not a pointer (``"0"`` when v2 has no value), its average value is."""
    selector = {"matchLabels": {"queue": "a"}}
    current = [
        {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": selector}, "current": {"averageValue": "1k"}}},
        {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
                                      "metric": {"name": "hits"}, "current": {"value": "10", "averageValue": "5"}}},
        {"type": "External", "external": {"metric": {"name": "queue", "selector": selector}, "current": {"averageValue": "30"}}},
        {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app", "current": {"averageValue": "1Gi"}}},
    ]
    obj = {**v2(metrics=[cpu(50)]), "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentMetrics": current}}
    converted = v2_to_v1(obj)
    assert converted["metadata"]["annotations"][CURRENT_METRICS_ANNOTATION] == (
        '[{"type":"Pods","pods":{"metricName":"qps","currentAverageValue":"1k","selector":{"matchLabels":{"queue":"a"}}}},'
        '{"type":"Object","object":{"target":{"kind":"Ingress","name":"main","apiVersion":"networking.k8s.io/v1"},'
        '"metricName":"hits","currentValue":"10","averageValue":"5"}},'
        '{"type":"External","external":{"metricName":"queue","metricSelector":{"matchLabels":{"queue":"a"}},'
        '"currentValue":"0","currentAverageValue":"30"}},'
        '{"type":"ContainerResource","containerResource":{"name":"memory","currentAverageValue":"1Gi","container":"app"}}]'
    )
    back = v1_to_v2(converted)["status"]["currentMetrics"]
    assert back[2]["external"] == {"metric": {"name": "queue", "selector": selector}, "current": {"value": "0", "averageValue": "30"}}
    assert [back[i] for i in (0, 1, 3)] == [current[i] for i in (0, 1, 3)]


def test_the_fields_both_versions_have_are_carried_over_when_set() -> None:
    status = {"observedGeneration": 4, "lastScaleTime": "2025-01-01T00:00:00Z", "currentReplicas": 2, "desiredReplicas": 2}
    obj = {**v2(metrics=[cpu(50)], minReplicas=None), "status": status}
    converted = v2_to_v1(obj)
    assert converted["spec"] == {"scaleTargetRef": REF, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}
    assert converted["status"] == status
    back = v1_to_v2(converted)
    assert (back["spec"]["maxReplicas"], "minReplicas" in back["spec"]) == (3, False)
    assert back["status"] == status


def test_a_status_metric_without_a_value_comes_back_with_kubes_zero() -> None:
    """v1's ``currentAverageValue`` is not a pointer: kube writes ``"0"`` and reads it back."""
    obj = {**v2(metrics=[cpu(50)]), "status": {"desiredReplicas": 1, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}]}}
    back = v1_to_v2(v2_to_v1(obj))
    assert back["status"]["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "0", "averageUtilization": 42}}}
    ]


@pytest.mark.parametrize("obj", [
    pytest.param(v1(targetCPUUtilizationPercentage=70), id="cpu target"),
    pytest.param(v1({CURRENT_METRICS_ANNOTATION: '[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":30,"currentAverageValue":"0"}}]'},
                    status={"currentReplicas": 1, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 30},
                    targetCPUUtilizationPercentage=70), id="cpu status (and kube's annotation of it)"),
    pytest.param(v1({METRICS_ANNOTATION: '[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1Gi"}}]',
                     "team": "ml"}, targetCPUUtilizationPercentage=70), id="memory and cpu"),
])
def test_v1_round_trips_through_v2(obj: Obj) -> None:
    expected = {**obj, "status": obj.get("status") or {"currentReplicas": 0, "desiredReplicas": 0}}
    assert v2_to_v1(v1_to_v2(obj)) == expected


@pytest.mark.parametrize("obj", [
    pytest.param(v2(metrics=[cpu(70)]), id="cpu"),
    pytest.param(v2(metrics=[memory("1Gi"), cpu(70)], annotations={"team": "ml"}), id="memory, then cpu"),
    pytest.param(v2(metrics=[memory("512Mi")]), id="memory only"),
])
def test_v2_round_trips_through_v1(obj: Obj) -> None:
    assert v1_to_v2(v2_to_v1(obj)) == obj


def test_metric_order_is_kubes_the_cpu_target_comes_last() -> None:
    """v2 -> v1 -> v2 moves the CPU target after the other metrics (kube appends it)."""
    back = v1_to_v2(v2_to_v1(v2(metrics=[cpu(70), memory("1Gi")])))
    assert back["spec"]["metrics"] == [memory("1Gi"), cpu(70)]


def test_a_v1_hpa_without_a_target_gets_kubes_implicit_80_percent() -> None:
    assert v1_to_v2(v1())["spec"]["metrics"] == [cpu(80)]


# After kube's TestHorizontalPodAutoscalerAnnotations: round-trip annotations that do not decode are
# ignored, and none of them reaches v2 (or comes back from v1 other than as written by conversion).
@pytest.mark.parametrize("value", ["", "abc", "{}", "null", '[{"type": 1}]'])
def test_undecodable_round_trip_annotations_are_ignored_and_dropped(value: str) -> None:
    annotations = {key: value for key in (METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION)}
    converted = v1_to_v2(v1({**annotations, "team": "ml"}, targetCPUUtilizationPercentage=70))
    assert converted["metadata"]["annotations"] == {"team": "ml"}
    assert converted["spec"]["metrics"] == [cpu(70)]
    assert "behavior" not in converted["spec"]
    assert v2_to_v1(v2(metrics=[cpu(70)], annotations=annotations))["metadata"] == {"name": "web", "namespace": "default"}


def test_annotation_fields_match_ignoring_case_as_gos_decoder_does() -> None:
    behavior = json.dumps({"scaleDown": {"stabilizationWindowSeconds": 30, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}})
    converted = v1_to_v2(v1({BEHAVIOR_ANNOTATION: behavior}, targetCPUUtilizationPercentage=70))
    assert converted["spec"]["behavior"] == {
        "scaleDown": {"stabilizationWindowSeconds": 30, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
    }


def test_go_json_escapes_as_go_does() -> None:
    assert go_json({"a": "<b>&\u2028", "n": [1, None]}) == '{"a":"\\u003cb\\u003e\\u0026\\u2028","n":[1,null]}'


def test_the_input_is_not_changed() -> None:
    obj = v2(metrics=[memory("1Gi"), cpu(70)], annotations={"team": "ml"})
    before = json.dumps(obj)
    v1_to_v2(v2_to_v1(obj))
    assert json.dumps(obj) == before
