"""kube's conversion of a HorizontalPodAutoscaler between autoscaling/v2 and autoscaling/v1
(``pkg/apis/autoscaling/v1/conversion.go``), over plain dicts. Pure: no I/O.

kube stores HPAs as autoscaling/v2 (its internal type has v2's shape) and serves autoscaling/v1 by
converting on every read and write. v1 knows one metric, ``targetCPUUtilizationPercentage`` (the
first CPU ``Utilization`` metric); the rest of v2 travels in annotations, in the exact JSON kube
writes, and is taken out of them again on the way back:

* ``autoscaling.alpha.kubernetes.io/metrics``: the other metrics, as v1's (alpha) ``MetricSpec``;
* ``autoscaling.alpha.kubernetes.io/behavior``: ``spec.behavior``, marshalled from kube's internal
  type, which has no JSON tags (``{"ScaleUp":{"StabilizationWindowSeconds":0,...}}``);
* ``autoscaling.alpha.kubernetes.io/current-metrics``: ``status.currentMetrics`` as v1's ``MetricStatus``;
* ``autoscaling.alpha.kubernetes.io/conditions``: ``status.conditions``.

An annotation whose JSON does not decode is ignored, as kube ignores it; a v1 HPA with no metric
at all gets kube's implicit 80 % CPU. :func:`v2_to_v1` and :func:`v1_to_v2` take an object and
return a new one (the input is not changed); metadata other than the four annotations is kept.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from controlplane.apis.quantity import QuantityError, canonical_quantity
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_json

V1 = "autoscaling/v1"
V2 = "autoscaling/v2"
METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
#: ``DropRoundTripHorizontalPodAutoscalerAnnotations``: never stored, never served by v2.
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION)
#: The annotations that carry v2's status in v1: a write of v1's main resource keeps the stored
#: ones (kube keeps the stored status), a write of its status subresource takes the request's.
STATUS_ANNOTATIONS = (CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION)
#: ``autoscaling.DefaultCPUUtilization``.
DEFAULT_CPU_UTILIZATION = 80


class _Undecodable(ValueError):
    """An annotation Go's ``json.Unmarshal`` would refuse into its type (kube then ignores it)."""


# --- Go's encoding/json ----------------------------------------------------------------------


def _quantity(value: Any) -> str:
    """A ``resource.Quantity`` as Go marshals it (canonical); the zero Quantity is ``"0"``."""
    if value is None:
        return "0"
    try:
        return canonical_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return str(value)


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj``'s value for the Go field ``name``: its exact key, else one equal ignoring case (as
    ``json.Unmarshal`` matches them); None when absent."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    found = None
    for key, value in obj.items():
        if key.casefold() == folded:
            found = value
    return found


def _decoded_object(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Undecodable(value)
    return value


def _decoded_string(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Undecodable(value)
    return value


def _decoded_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise _Undecodable(value)
    return value


def _decoded_quantity(value: Any) -> str | None:
    """A Quantity field: a JSON string or number that parses (canonical), None when null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Undecodable(value)
    try:
        return canonical_quantity(value)
    except (QuantityError, ValueError) as exc:
        raise _Undecodable(value) from exc


def _decoded_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Undecodable(value)
    return value


def _annotation(annotations: Mapping[str, Any], key: str, parse: Callable[[Any], Any]) -> Any:
    """``parse`` of the JSON in annotation ``key``; None when absent or not decodable."""
    text = annotations.get(key)
    if not isinstance(text, str):
        return None
    try:
        return parse(json.loads(text))
    except (ValueError, TypeError):
        return None


# --- label selectors and references -----------------------------------------------------------


def _selector(value: Any) -> Obj | None:
    """A ``metav1.LabelSelector`` as Go marshals it (matchLabels, then matchExpressions)."""
    if not isinstance(value, dict):
        return None
    out: Obj = {}
    if value.get("matchLabels"):
        out["matchLabels"] = dict(sorted(value["matchLabels"].items()))
    if value.get("matchExpressions"):
        exprs = []
        for expr in value["matchExpressions"]:
            one: Obj = {"key": expr.get("key", ""), "operator": expr.get("operator", "")}
            if expr.get("values"):
                one["values"] = list(expr["values"])
            exprs.append(one)
        out["matchExpressions"] = exprs
    return out


def _decoded_selector(value: Any) -> Obj | None:
    selector = _decoded_object(value)
    if selector is None:
        return None
    labels = _decoded_object(_field(selector, "matchLabels"))
    exprs = _decoded_list(_field(selector, "matchExpressions"))
    out: Obj = {}
    if labels:
        out["matchLabels"] = {str(k): _decoded_string(v) for k, v in labels.items()}
    if exprs:
        out["matchExpressions"] = []
        for raw in exprs:
            expr = _decoded_object(raw) or {}
            one: Obj = {"key": _decoded_string(_field(expr, "key")), "operator": _decoded_string(_field(expr, "operator"))}
            values = [_decoded_string(v) for v in _decoded_list(_field(expr, "values"))]
            if values:
                one["values"] = values
            out["matchExpressions"].append(one)
    return out


def _reference(value: Any) -> Obj:
    """A ``CrossVersionObjectReference`` as Go marshals it (kind, name, apiVersion if set)."""
    ref = value if isinstance(value, dict) else {}
    out: Obj = {"kind": ref.get("kind") or "", "name": ref.get("name") or ""}
    if ref.get("apiVersion"):
        out["apiVersion"] = ref["apiVersion"]
    return out


def _decoded_reference(value: Any) -> Obj:
    ref = _decoded_object(value) or {}
    out: Obj = {"kind": _decoded_string(_field(ref, "kind")), "name": _decoded_string(_field(ref, "name"))}
    api_version = _decoded_string(_field(ref, "apiVersion"))
    if api_version:
        out["apiVersion"] = api_version
    return out


def _put(out: Obj, key: str, value: Any) -> Obj:
    if value is not None:
        out[key] = value
    return out


def _metric_identifier(source: Mapping[str, Any], selector: str = "selector") -> Obj:
    """v2's ``MetricIdentifier`` of a decoded v1 metric source: its ``metricName`` and the
    selector under ``selector`` (an External source's is ``metricSelector``)."""
    name = _decoded_string(_field(source, "metricName"))
    return _put({"name": name}, "selector", _decoded_selector(_field(source, selector)))


# --- metrics: v2 (kube's internal type) to v1's annotation types --------------------------------


def _is_cpu_utilization(metric: Any) -> bool:
    """A ``Resource`` metric on cpu with an ``averageUtilization`` target: what v1's
    ``targetCPUUtilizationPercentage`` is."""
    if not isinstance(metric, dict) or metric.get("type") != "Resource":
        return False
    resource = metric.get("resource")
    return (
        isinstance(resource, dict) and resource.get("name") == "cpu"
        and isinstance(resource.get("target"), dict) and resource["target"].get("averageUtilization") is not None
    )


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _v1_metric(metric: Obj, *, side: Literal["target", "current"]) -> Obj:
    """``Convert_autoscaling_MetricSpec_To_v1_MetricSpec`` (``side`` "target") and
    ``Convert_autoscaling_MetricStatus_To_v1_MetricStatus`` (``side`` "current"): the same
    conversion of a spec's targets and a status's current values, whose v1 fields are named after
    the side (``targetValue``, ``currentValue``). Two fields are required in a status and optional
    in a spec: a resource metric's average value and an external metric's value."""
    status = side == "current"
    required = _quantity if status else _optional_quantity
    out: Obj = {"type": metric.get("type") or ""}
    source = metric.get("object")
    if isinstance(source, dict):
        values, ident = _mapping(source.get(side)), _mapping(source.get("metric"))
        out["object"] = _put(_put({
            "target": _reference(source.get("describedObject")),
            "metricName": ident.get("name") or "",
            f"{side}Value": _quantity(values.get("value")),
        }, "selector", _selector(ident.get("selector"))), "averageValue", _optional_quantity(values.get("averageValue")))
    source = metric.get("pods")
    if isinstance(source, dict):
        values, ident = _mapping(source.get(side)), _mapping(source.get("metric"))
        out["pods"] = _put({
            "metricName": ident.get("name") or "",
            f"{side}AverageValue": _quantity(values.get("averageValue")),
        }, "selector", _selector(ident.get("selector")))
    for key in ("resource", "containerResource"):
        source = metric.get(key)
        if isinstance(source, dict):
            values = _mapping(source.get(side))
            converted = _put(_put({"name": source.get("name") or ""},
                                  f"{side}AverageUtilization", values.get("averageUtilization")),
                             f"{side}AverageValue", required(values.get("averageValue")))
            if key == "containerResource":
                converted["container"] = source.get("container") or ""
            out[key] = converted
    source = metric.get("external")
    if isinstance(source, dict):
        values, ident = _mapping(source.get(side)), _mapping(source.get("metric"))
        out["external"] = _put(_put(_put({"metricName": ident.get("name") or ""},
                                         "metricSelector", _selector(ident.get("selector"))),
                                    f"{side}Value", required(values.get("value"))),
                               f"{side}AverageValue", _optional_quantity(values.get("averageValue")))
    return _ordered(out, ("type", "object", "pods", "resource", "containerResource", "external"))


def _optional_quantity(value: Any) -> str | None:
    return None if value is None else _quantity(value)


#: The spec's and the status's fields that v1 and v2 share, beside ``scaleTargetRef``.
_SHARED_SPEC = ("minReplicas", "maxReplicas")
_SHARED_STATUS = ("observedGeneration", "lastScaleTime")


def _set_fields(obj: Obj, keys: tuple[str, ...]) -> Obj:
    """The fields of ``obj`` among ``keys`` that are set (not null), in the order of ``keys``."""
    return {key: obj[key] for key in keys if obj.get(key) is not None}


def _ordered(obj: Obj, keys: tuple[str, ...]) -> Obj:
    return {key: obj[key] for key in keys if key in obj}


def _v1_condition(condition: Obj) -> Obj:
    """A condition as v1's ``HorizontalPodAutoscalerCondition`` marshals it (a zero
    ``lastTransitionTime`` is ``null``: ``metav1.Time`` is a struct, never omitted)."""
    out: Obj = {
        "type": condition.get("type") or "",
        "status": condition.get("status") or "",
        "lastTransitionTime": condition.get("lastTransitionTime"),
    }
    for key in ("reason", "message"):
        if condition.get(key):
            out[key] = condition[key]
    return out


def _internal_behavior(behavior: Obj) -> Obj:
    """``spec.behavior`` as ``json.Marshal`` writes kube's internal type (Go field names, nil as null)."""

    def rules(value: Any) -> Obj | None:
        if not isinstance(value, dict):
            return None
        policies = value.get("policies")
        return {
            "StabilizationWindowSeconds": value.get("stabilizationWindowSeconds"),
            "SelectPolicy": value.get("selectPolicy"),
            "Policies": None if not isinstance(policies, list) else [
                {"Type": p.get("type") or "", "Value": p.get("value") or 0, "PeriodSeconds": p.get("periodSeconds") or 0}
                for p in policies if isinstance(p, dict)
            ],
        }

    return {"ScaleUp": rules(behavior.get("scaleUp")), "ScaleDown": rules(behavior.get("scaleDown"))}


def v2_to_v1(obj: Mapping[str, Any]) -> Obj:
    """``Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`` of an
    autoscaling/v2 HPA: a new autoscaling/v1 object."""
    meta = copy.deepcopy(_mapping(obj.get("metadata")))
    annotations = {k: v for k, v in _mapping(meta.get("annotations")).items() if k not in ROUND_TRIP_ANNOTATIONS}
    spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))
    metrics = [m for m in spec.get("metrics") or () if isinstance(m, dict)]
    current_metrics = [m for m in status.get("currentMetrics") or () if isinstance(m, dict)]
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    other_metrics = [_v1_metric(m, side="target") for m in metrics if not _is_cpu_utilization(m)]
    if other_metrics:
        annotations[METRICS_ANNOTATION] = go_json(other_metrics)
    if current_metrics:
        annotations[CURRENT_METRICS_ANNOTATION] = go_json([_v1_metric(m, side="current") for m in current_metrics])
    if isinstance(spec.get("behavior"), dict):
        annotations[BEHAVIOR_ANNOTATION] = go_json(_internal_behavior(spec["behavior"]))
    if conditions:
        annotations[CONDITIONS_ANNOTATION] = go_json([_v1_condition(c) for c in conditions])
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)

    v1_spec: Obj = {}
    if "scaleTargetRef" in spec:
        v1_spec["scaleTargetRef"] = copy.deepcopy(spec["scaleTargetRef"])
    v1_spec.update(_set_fields(spec, _SHARED_SPEC))
    cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
    if cpu is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]

    v1_status: Obj = _set_fields(status, _SHARED_STATUS)
    v1_status["currentReplicas"] = status.get("currentReplicas") or 0
    v1_status["desiredReplicas"] = status.get("desiredReplicas") or 0
    for metric in current_metrics:  # the last CPU utilization wins, as in kube
        resource = _mapping(metric.get("resource"))
        utilization = _mapping(resource.get("current")).get("averageUtilization")
        if metric.get("type") == "Resource" and resource.get("name") == "cpu" and utilization is not None:
            v1_status["currentCPUUtilizationPercentage"] = utilization

    out: Obj = {"apiVersion": V1, "kind": obj.get("kind") or "HorizontalPodAutoscaler", "metadata": meta}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            out[key] = copy.deepcopy(value)
    out["spec"] = v1_spec
    out["status"] = v1_status
    return out


# --- v1 (with its annotations) to v2 ------------------------------------------------------------


def _v2_resource_source(source: Mapping[str, Any], key: str, side: str, values: Obj) -> Obj:
    """A decoded v1 ``resource`` or ``containerResource`` source (``key``) as v2's, with its
    ``target`` or ``current`` (``side``) ``values``."""
    converted: Obj = {"name": _decoded_string(_field(source, "name")), side: values}
    if key == "containerResource":
        converted["container"] = _decoded_string(_field(source, "container"))
    return converted


def _v2_metric_spec(raw: Any) -> Obj:
    """``Convert_v1_MetricSpec_To_autoscaling_MetricSpec`` of one decoded annotation entry."""
    metric = _decoded_object(raw) or {}
    out: Obj = {"type": _decoded_string(_field(metric, "type"))}
    source = _decoded_object(_field(metric, "object"))
    if source is not None:
        average = _decoded_quantity(_field(source, "averageValue"))
        target = _put({"type": "Value" if average is None else "AverageValue",
                       "value": _decoded_quantity(_field(source, "targetValue")) or "0"}, "averageValue", average)
        out["object"] = {
            "describedObject": _decoded_reference(_field(source, "target")),
            "target": target,
            "metric": _metric_identifier(source),
        }
    source = _decoded_object(_field(metric, "pods"))
    if source is not None:
        out["pods"] = {
            "metric": _metric_identifier(source),
            "target": {"type": "AverageValue",
                       "averageValue": _decoded_quantity(_field(source, "targetAverageValue")) or "0"},
        }
    for key in ("resource", "containerResource"):
        source = _decoded_object(_field(metric, key))
        if source is not None:
            utilization = _decoded_int(_field(source, "targetAverageUtilization"))
            target = _put(_put({"type": "AverageValue" if utilization is None else "Utilization"},
                               "averageValue", _decoded_quantity(_field(source, "targetAverageValue"))),
                          "averageUtilization", utilization)
            out[key] = _v2_resource_source(source, key, "target", target)
    source = _decoded_object(_field(metric, "external"))
    if source is not None:
        value = _decoded_quantity(_field(source, "targetValue"))
        target = _put(_put({"type": "AverageValue" if value is None else "Value"}, "value", value),
                      "averageValue", _decoded_quantity(_field(source, "targetAverageValue")))
        out["external"] = {
            "metric": _metric_identifier(source, "metricSelector"),
            "target": target,
        }
    return _ordered(out, ("type", "object", "pods", "resource", "containerResource", "external"))


def _v2_metric_status(raw: Any) -> Obj:
    """``Convert_v1_MetricStatus_To_autoscaling_MetricStatus`` of one decoded annotation entry."""
    metric = _decoded_object(raw) or {}
    out: Obj = {"type": _decoded_string(_field(metric, "type"))}
    source = _decoded_object(_field(metric, "object"))
    if source is not None:
        out["object"] = {
            "metric": _metric_identifier(source),
            "current": _put({"value": _decoded_quantity(_field(source, "currentValue")) or "0"},
                            "averageValue", _decoded_quantity(_field(source, "averageValue"))),
            "describedObject": _decoded_reference(_field(source, "target")),
        }
    source = _decoded_object(_field(metric, "pods"))
    if source is not None:
        out["pods"] = {
            "metric": _metric_identifier(source),
            "current": {"averageValue": _decoded_quantity(_field(source, "currentAverageValue")) or "0"},
        }
    for key in ("resource", "containerResource"):
        source = _decoded_object(_field(metric, key))
        if source is not None:
            current = _put({"averageValue": _decoded_quantity(_field(source, "currentAverageValue")) or "0"},
                           "averageUtilization", _decoded_int(_field(source, "currentAverageUtilization")))
            out[key] = _v2_resource_source(source, key, "current", current)
    source = _decoded_object(_field(metric, "external"))
    if source is not None:
        out["external"] = {
            "metric": _metric_identifier(source, "metricSelector"),
            "current": _put({"value": _decoded_quantity(_field(source, "currentValue")) or "0"},
                            "averageValue", _decoded_quantity(_field(source, "currentAverageValue"))),
        }
    return _ordered(out, ("type", "object", "pods", "resource", "containerResource", "external"))


def _v2_condition(raw: Any) -> Obj:
    condition = _decoded_object(raw) or {}
    out: Obj = {
        "type": _decoded_string(_field(condition, "type")),
        "status": _decoded_string(_field(condition, "status")),
    }
    when = _field(condition, "lastTransitionTime")
    if when is not None:
        out["lastTransitionTime"] = _decoded_string(when)
    for key in ("reason", "message"):
        value = _decoded_string(_field(condition, key))
        if value:
            out[key] = value
    return out


def _v2_behavior(raw: Any) -> Obj | None:
    """The behavior annotation (kube's internal type, field names matched ignoring case) as v2's
    ``spec.behavior``; None when it sets neither direction (kube then drops it)."""
    behavior = _decoded_object(raw)
    if behavior is None:
        raise _Undecodable(raw)

    def rules(value: Any) -> Obj | None:
        given = _decoded_object(value)
        if given is None:
            return None
        out: Obj = {}
        window = _decoded_int(_field(given, "StabilizationWindowSeconds"))
        if window is not None:
            out["stabilizationWindowSeconds"] = window
        select = _field(given, "SelectPolicy")
        if select is not None:
            out["selectPolicy"] = _decoded_string(select)
        policies = _field(given, "Policies")
        if policies is not None:
            out["policies"] = [
                {
                    "type": _decoded_string(_field(p, "Type")),
                    "value": _decoded_int(_field(p, "Value")) or 0,
                    "periodSeconds": _decoded_int(_field(p, "PeriodSeconds")) or 0,
                }
                for p in (_decoded_object(item) or {} for item in _decoded_list(policies))
            ]
        return out

    up, down = rules(_field(behavior, "ScaleUp")), rules(_field(behavior, "ScaleDown"))
    if up is None and down is None:
        return None
    return _put(_put({}, "scaleUp", up), "scaleDown", down)


def _decoded_items(parse: Callable[[Any], Obj]) -> Callable[[Any], list[Obj]]:
    def decode_all(value: Any) -> list[Obj]:
        return [parse(item) for item in _decoded_list(value)]

    return decode_all


def v1_to_v2(obj: Mapping[str, Any]) -> Obj:
    """``Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`` of an
    autoscaling/v1 HPA: a new autoscaling/v2 object, its round-trip annotations taken out."""
    meta = copy.deepcopy(_mapping(obj.get("metadata")))
    annotations = _mapping(meta.get("annotations"))
    spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))

    v2_spec: Obj = {}
    if "scaleTargetRef" in spec:
        v2_spec["scaleTargetRef"] = copy.deepcopy(spec["scaleTargetRef"])
    v2_spec.update(_set_fields(spec, _SHARED_SPEC))
    metrics: list[Obj] = []
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics = [_cpu_metric(spec["targetCPUUtilizationPercentage"])]
    others = _annotation(annotations, METRICS_ANNOTATION, _decoded_items(_v2_metric_spec))
    if others is not None:
        metrics = others + metrics[:1]
    behavior = _annotation(annotations, BEHAVIOR_ANNOTATION, _v2_behavior)
    # autoscaling/v1 formerly had an implicit default applied in the controller (kube's comment).
    v2_spec["metrics"] = metrics or [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    if behavior is not None:
        v2_spec["behavior"] = behavior

    v2_status: Obj = _set_fields(status, _SHARED_STATUS)
    if status.get("currentReplicas"):
        v2_status["currentReplicas"] = status["currentReplicas"]
    if status.get("desiredReplicas"):
        v2_status["desiredReplicas"] = status["desiredReplicas"]
    current: list[Obj] | None = None
    if status.get("currentCPUUtilizationPercentage") is not None:
        current = [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]},
        }}]
    from_annotation = _annotation(annotations, CURRENT_METRICS_ANNOTATION, _decoded_items(_v2_metric_status))
    if from_annotation is not None:
        current = from_annotation  # "the ones here have more information"
    if current:
        v2_status["currentMetrics"] = current
    conditions = _annotation(annotations, CONDITIONS_ANNOTATION, _decoded_items(_v2_condition))
    if conditions:
        v2_status["conditions"] = conditions
    if v2_status:  # v2's desiredReplicas is always written once there is a status (not omitempty)
        v2_status.setdefault("desiredReplicas", 0)

    kept = {k: v for k, v in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}
    if kept:
        meta["annotations"] = kept
    else:
        meta.pop("annotations", None)
    out: Obj = {"apiVersion": V2, "kind": obj.get("kind") or "HorizontalPodAutoscaler", "metadata": meta}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            out[key] = copy.deepcopy(value)
    out["spec"] = v2_spec
    if v2_status:
        out["status"] = v2_status
    return out


def _cpu_metric(utilization: Any) -> Obj:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}}
