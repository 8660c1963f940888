"""kube's validation of PodDisruptionBudget (``pkg/apis/policy/validation``), PriorityClass
(``pkg/apis/scheduling/validation``), StorageClass (``pkg/apis/storage/validation``: not its
parameters' sizes or allowed topologies) and HorizontalPodAutoscaler
(``pkg/apis/autoscaling/validation``: its replica bounds and target reference; the metric and
behavior rules are not checked here).
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.label_selectors import selector_errors
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.kube.validate_apps import positive_int_or_percent_errors

Obj = dict[str, Any]

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
            errors += [field.invalid(path, value, msg) for msg in _path_segment_errors(value)]
    return errors


def _path_segment_errors(name: str) -> list[str]:
    """``IsValidPathSegmentName``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


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
