"""kube's validation of PodDisruptionBudget (``pkg/apis/policy/validation``), PriorityClass
(``pkg/apis/scheduling/validation``), RuntimeClass (``pkg/apis/node/validation``), StorageClass
(``pkg/apis/storage/validation``: not its parameters' sizes or allowed topologies) and
HorizontalPodAutoscaler (``pkg/apis/autoscaling/validation``: its replica bounds, target
reference, metrics and behavior).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.label_selectors import selector_errors
from controlplane.apis.kube.names import dns_label_errors, path_segment_errors, qualified_name_errors
from controlplane.apis.kube.validate_apps import positive_int_or_percent_errors
from controlplane.apis.kube.validate_pod import labels_errors, tolerations_errors
from controlplane.apis.kube.validate_resources import parse, requirements_errors, shown
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

_UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
_PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
_RECLAIM_POLICIES = ("Delete", "Retain")
_VOLUME_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
#: ``scheduling.HighestUserDefinablePriority``.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
#: ``scheduling.SystemPriorityClasses``: name → (value, globalDefault).
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}


def validate_pod_disruption_budget(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidatePodDisruptionBudget`` (policy/v1: the whole spec may change on update)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errors.append(field.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for key in ("minAvailable", "maxUnavailable"):
        errors += positive_int_or_percent_errors(spec.get(key), f"spec.{key}")
    if spec.get("selector") is not None:
        errors += selector_errors(spec.get("selector"), "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errors.append(field.not_supported("spec.unhealthyPodEvictionPolicy", policy, _UNHEALTHY_POD_EVICTION_POLICIES))
    return errors


def global_default_priority_class(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The PriorityClass a pod without ``priorityClassName`` gets, as kube's Priority admission
    picks it: the one marked ``globalDefault`` (the lowest valued, should a race have marked two;
    then by name), or None."""
    defaults = [pc for pc in classes if pc.get("globalDefault") is True]

    def value(pc: Mapping[str, Any]) -> int:
        number = pc.get("value")
        return number if isinstance(number, int) and not isinstance(number, bool) else 0

    return min(defaults, key=lambda pc: (value(pc), str(field.mapping(pc.get("metadata")).get("name"))), default=None)


def second_default_priority_class(obj: Obj, others: list[Obj]) -> str | None:
    """kube's Priority admission plugin: a PriorityClass marked ``globalDefault`` while another
    one is is forbidden, on create and on update alike; the reason, or None."""
    if obj.get("globalDefault") is not True:
        return None
    current = global_default_priority_class(others)
    if current is None:
        return None
    name = field.mapping(current.get("metadata")).get("name")
    return f"PriorityClass {name} is already marked as default. Only one default can exist"


def validate_priority_class(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidatePriorityClass`` / ``ValidatePriorityClassUpdate``."""
    name = str(field.mapping(obj.get("metadata")).get("name") or "")
    value = obj.get("value", 0)
    errors: list[FieldError] = []
    if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        problem = _system_priority_class_problem(name, value, obj.get("globalDefault"))
        if problem:
            errors.append(field.forbidden(
                "metadata.name",
                f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved for system use only. "
                f"error: {problem}",
            ))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(field.forbidden(
            "value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        ))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in _PREEMPTION_POLICIES:
        errors.append(field.not_supported("preemptionPolicy", policy, _PREEMPTION_POLICIES))
    if old is not None:
        if value != old.get("value", 0):
            errors.append(field.forbidden("value", "may not be changed in an update."))
        errors += field.immutable(policy, old.get("preemptionPolicy"), "preemptionPolicy")
    return errors


def validate_runtime_class(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateRuntimeClass`` (and ``ValidateRuntimeClassUpdate``: the handler is immutable)."""
    handler = obj.get("handler")
    shown_handler = "" if handler is None else str(handler)
    errors = [field.invalid("handler", shown_handler, msg) for msg in dns_label_errors(shown_handler)]
    overhead = obj.get("overhead")
    if isinstance(overhead, dict):
        # kube checks the pod's fixed overhead as a container's limits.
        errors += requirements_errors({"limits": overhead.get("podFixed")}, "overhead")
    scheduling = obj.get("scheduling")
    if isinstance(scheduling, dict):
        errors += labels_errors(scheduling.get("nodeSelector"), "scheduling.nodeSelector")
        errors += _runtime_class_tolerations_errors(scheduling.get("tolerations"), "scheduling.tolerations")
    if old is not None:
        errors += field.immutable(handler, old.get("handler"), "handler", shown=shown_handler)
    return errors


def _runtime_class_tolerations_errors(tolerations: Any, path: str) -> list[FieldError]:
    """``ValidateTolerations``, and each toleration (key, operator, value, effect) listed once."""
    errors = tolerations_errors(tolerations, path)
    seen: set[tuple[str, ...]] = set()
    for index_path, toleration in field.indexed(tolerations, path):
        key = tuple(str(toleration.get(name) or "") for name in _TOLERATION_KEYS)
        if key in seen:
            errors.append(field.duplicate(index_path, _go_toleration(toleration)))
        seen.add(key)
    return errors


_TOLERATION_KEYS = ("key", "operator", "value", "effect")


def _go_toleration(toleration: Obj) -> GoValue:
    """A toleration as Go's ``%#v`` prints kube's internal ``core.Toleration`` (a set
    ``tolerationSeconds``, a pointer Go prints as an address, as its value)."""
    seconds = toleration.get("tolerationSeconds")
    parts = [f"{name.title()}:{go_quote(str(toleration.get(name) or ''))}" for name in _TOLERATION_KEYS]
    parts.append(f"TolerationSeconds:{'(*int64)(nil)' if seconds is None else f'&{seconds}'}")
    return GoValue("core.Toleration{" + ", ".join(parts) + "}")


def _system_priority_class_problem(name: str, value: Any, global_default: Any) -> str:
    """``IsKnownSystemPriorityClass``'s error, or "" for a known system class as defined."""
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known:
        return f"value of {name} PriorityClass must be {known}"
    if bool(global_default):
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def validate_horizontal_pod_autoscaler(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateHorizontalPodAutoscaler``: replica bounds and ``scaleTargetRef``."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    min_replicas, max_replicas = spec.get("minReplicas"), spec.get("maxReplicas", 0)
    if isinstance(min_replicas, int) and min_replicas < 1:
        errors.append(field.invalid("spec.minReplicas", min_replicas, "must be greater than or equal to 1"))
    if isinstance(max_replicas, int):
        if max_replicas < 1:
            errors.append(field.invalid("spec.maxReplicas", max_replicas, "must be greater than 0"))
        if isinstance(min_replicas, int) and max_replicas < min_replicas:
            errors.append(field.invalid("spec.maxReplicas", max_replicas, "must be greater than or equal to `minReplicas`"))
    ref = field.mapping(spec.get("scaleTargetRef"))
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        path = f"spec.scaleTargetRef.{key}"
        if not value:
            errors.append(field.required(path))
        else:
            errors += [field.invalid(path, value, msg) for msg in path_segment_errors(value)]
    errors += _metrics_errors(field.items(spec.get("metrics")), min_replicas)
    behavior = spec.get("behavior")
    if behavior is not None:
        for key in ("scaleUp", "scaleDown"):
            rules = field.mapping(behavior).get(key) if isinstance(behavior, dict) else None
            if rules is not None:
                errors += _scaling_rules_errors(field.mapping(rules), f"spec.behavior.{key}")
    return errors


_METRIC_SOURCES = {
    "Object": "object", "Pods": "pods", "Resource": "resource", "External": "external",
    "ContainerResource": "containerResource",
}
_TARGET_TYPES = ("Utilization", "Value", "AverageValue")
_SELECT_POLICIES = ("Max", "Min", "Disabled")
_POLICY_TYPES = ("Pods", "Percent")
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800


def _metrics_errors(metrics: list[Any], min_replicas: Any) -> list[FieldError]:
    """``validateMetrics``: each metric's source, and an Object or External one to scale to zero."""
    errors: list[FieldError] = []
    for path, metric in field.indexed(metrics, "spec.metrics"):
        errors += _metric_errors(metric, path)
    if min_replicas == 0 and not any(field.mapping(m).get("type") in ("Object", "External") for m in metrics):
        errors.append(field.forbidden(
            "spec.metrics", "must specify at least one Object or External metric to support scaling to zero replicas"
        ))
    return errors


def _metric_errors(metric: Obj, path: str) -> list[FieldError]:
    """``validateMetricSpec``: a known type, and the source of that type only."""
    kind = str(metric.get("type") or "")
    errors: list[FieldError] = []
    if not kind:
        errors.append(field.required(f"{path}.type", "must specify a metric source type"))
    if kind not in _METRIC_SOURCES:
        errors.append(field.not_supported(f"{path}.type", kind, _METRIC_SOURCES))
    present = [key for key in _METRIC_SOURCES.values() if metric.get(key) is not None]
    if present:
        errors += _source_errors(present[0], field.mapping(metric.get(present[0])), f"{path}.{present[0]}")
    expected = _METRIC_SOURCES.get(kind, "")
    if expected not in present:
        errors.append(field.required(
            f"{path}.{expected}", f"must populate information for the given metric source ({expected})"
        ))
    if len(present) != 1:
        errors += [
            field.forbidden(f"{path}.{key}", "must populate the given metric source only")
            for key in present if key != expected
        ]
    return errors


def _source_errors(key: str, source: Obj, path: str) -> list[FieldError]:
    """``validate{Object,Pods,Resource,External,ContainerResource}Source``."""
    errors: list[FieldError] = []
    target = field.mapping(source.get("target"))
    if key in ("resource", "containerResource"):
        if not source.get("name"):
            errors.append(field.required(f"{path}.name", "must specify a resource name"))
        if key == "containerResource":
            container = str(source.get("container") or "")
            if not container:
                errors.append(field.required(f"{path}.container", "must specify a container"))
            errors += [field.invalid(f"{path}.container", container, m) for m in dns_label_errors(container)] \
                if container else []
        return errors + _target_errors(target, f"{path}.target")
    if key == "object":
        described = field.mapping(source.get("describedObject"))
        for part in ("kind", "name"):
            value = str(described.get(part) or "")
            part_path = f"{path}.describedObject.{part}"
            errors += [field.required(part_path)] if not value else [
                field.invalid(part_path, value, m) for m in path_segment_errors(value)
            ]
    metric = field.mapping(source.get("metric"))
    name = str(metric.get("name") or "")
    if not name:
        errors.append(field.required(f"{path}.metric.name", "must specify a metric name"))
    else:
        errors += [field.invalid(f"{path}.metric.name", name, m) for m in path_segment_errors(name)]
    if metric.get("selector") is not None:
        errors += selector_errors(metric.get("selector"), f"{path}.metric.selector")
    errors += _target_errors(target, f"{path}.target")
    wanted, average = target.get("value"), target.get("averageValue")
    if key == "pods" and average is None:
        errors.append(field.required(f"{path}.target.averageValue", "must specify a positive target averageValue"))
    elif key == "object" and wanted is None and average is None:
        errors.append(field.required(f"{path}.target.averageValue", "must set either a target value or averageValue"))
    elif key == "external" and wanted is None and average is None:
        errors.append(field.required(
            f"{path}.target.averageValue", "must set either a target value for metric or a per-pod target"
        ))
    elif key == "external" and wanted is not None and average is not None:
        errors.append(field.forbidden(
            f"{path}.target.value", "may not set both a target value for metric and a per-pod target"
        ))
    return errors


def _target_errors(target: Obj, path: str) -> list[FieldError]:
    """``validateMetricTarget``: a type, and positive values."""
    kind = target.get("type")
    if not kind:
        return [field.required(f"{path}.type", "must specify a metric target type")]
    errors: list[FieldError] = []
    if kind not in _TARGET_TYPES:
        errors.append(field.invalid(f"{path}.type", kind, "must be either Utilization, Value, or AverageValue"))
    for key in ("value", "averageValue"):
        raw = target.get(key)
        quantity = parse(raw) if raw is not None else None
        if quantity is not None and quantity <= 0:
            errors.append(field.invalid(f"{path}.{key}", shown(raw, quantity), "must be positive"))
    utilization = target.get("averageUtilization")
    if isinstance(utilization, int) and utilization < 1:
        errors.append(field.invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return errors


def _scaling_rules_errors(rules: Obj, path: str) -> list[FieldError]:
    """``validateScalingRules``: the stabilization window, select policy and each policy."""
    errors: list[FieldError] = []
    window = rules.get("stabilizationWindowSeconds")
    if isinstance(window, int) and window < 0:
        errors.append(field.invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"))
    if isinstance(window, int) and window > MAX_STABILIZATION_WINDOW_SECONDS:
        errors.append(field.invalid(
            f"{path}.stabilizationWindowSeconds", window, f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"
        ))
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        errors.append(field.not_supported(f"{path}.selectPolicy", select, _SELECT_POLICIES))
    policies = field.items(rules.get("policies"))
    if not policies:
        errors.append(field.required(f"{path}.policies", "must specify at least one Policy"))
    for policy_path, policy in field.indexed(policies, f"{path}.policies"):
        if policy.get("type") not in _POLICY_TYPES:
            errors.append(field.not_supported(f"{policy_path}.type", policy.get("type") or "", _POLICY_TYPES))
        value, period = policy.get("value", 0), policy.get("periodSeconds", 0)
        if isinstance(value, int) and value <= 0:
            errors.append(field.invalid(f"{policy_path}.value", value, "must be greater than zero"))
        if isinstance(period, int) and period <= 0:
            errors.append(field.invalid(f"{policy_path}.periodSeconds", period, "must be greater than zero"))
        if isinstance(period, int) and period > MAX_PERIOD_SECONDS:
            errors.append(field.invalid(
                f"{policy_path}.periodSeconds", period, f"must be less than or equal to {MAX_PERIOD_SECONDS}"
            ))
    return errors


def validate_storage_class(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateStorageClass`` / ``ValidateStorageClassUpdate``."""
    provisioner = str(obj.get("provisioner") or "")
    errors: list[FieldError] = []
    if not provisioner:
        errors.append(field.required("provisioner"))
    else:
        errors += [field.invalid("provisioner", provisioner, msg) for msg in qualified_name_errors(provisioner.lower())]
    reclaim = obj.get("reclaimPolicy")
    if reclaim and reclaim not in _RECLAIM_POLICIES:
        errors.append(field.not_supported("reclaimPolicy", reclaim, _RECLAIM_POLICIES))
    mode = obj.get("volumeBindingMode")
    if mode is None:
        errors.append(field.required("volumeBindingMode"))
    elif mode not in _VOLUME_BINDING_MODES:
        errors.append(field.not_supported("volumeBindingMode", mode, _VOLUME_BINDING_MODES))
    if old is not None:
        for key in ("parameters", "provisioner", "reclaimPolicy"):
            if (obj.get(key) or None) != (old.get(key) or None):
                errors.append(field.forbidden(key, f"updates to {key} are forbidden."))
        errors += field.immutable(mode, old.get("volumeBindingMode"), "volumeBindingMode")
    return errors
