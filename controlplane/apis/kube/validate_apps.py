"""kube's validation of apps/v1: Deployment, ReplicaSet, StatefulSet, DaemonSet.

As pkg/apis/apps/validation and the apps registry strategies: replica counts and
durations are not negative, the selector is required (not for DaemonSet), not empty and
selects the template, the pod template is valid and restarts ``Always``, rollout
strategies are well formed; on update ``spec.selector`` is immutable, and a StatefulSet
may change only its replicas, ordinals, template, update strategy, PVC retention policy
and minReadySeconds.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.label_selectors import (
    is_empty,
    normalized,
    selector_errors,
    shown,
    template_match_errors,
)
from controlplane.apis.kube.names import percent_errors
from controlplane.apis.kube.validate_pod import pod_template_errors, restart_policy, template_metadata_errors
from controlplane.apis.untyped import Obj, json_int
from controlplane.gojson import go_json, go_quote


def _int_or_string(value: Any) -> GoValue:
    """``%#v`` of an ``intstr.IntOrString``."""
    if isinstance(value, str):
        return GoValue(f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_quote(value)}}}')
    return GoValue(f'intstr.IntOrString{{Type:0, IntVal:{value}, StrVal:""}}')


def _percent_value(value: Any) -> int | None:
    if isinstance(value, str) and not percent_errors(value):
        return int(value[:-1])
    return None


def _int_or_percent_value(value: Any) -> int:
    """``getIntOrPercentValue``: the number of an int, or of a valid percent."""
    percent = _percent_value(value)
    if percent is not None:
        return percent
    return json_int(value)


def positive_int_or_percent_errors(value: Any, path: str) -> list[FieldError]:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if value is None:
        return []
    if isinstance(value, str):
        errors = [field.invalid(path, _int_or_string(value), msg) for msg in percent_errors(value)]
        percent = _percent_value(value)
        if percent is not None and percent > 100:
            errors.append(field.invalid(path, _int_or_string(value), "must not be greater than 100%"))
        return errors
    if isinstance(value, bool) or not isinstance(value, int):
        return [field.invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    return field.nonnegative(value, path)


def _selector_and_template_errors(spec: Obj, *, kind: str, required: bool) -> tuple[bool, list[FieldError]]:
    """The selector (required, not empty), and whether it parses: ``LabelSelectorAsSelector``."""
    selector = spec.get("selector")
    if selector is None:
        return True, [field.required("spec.selector")] if required else []
    if not isinstance(selector, dict):
        return False, []  # the caller says how kube reports a selector it cannot read
    errors = selector_errors(selector, "spec.selector")
    parses = not errors
    if is_empty(selector):
        errors.append(field.invalid("spec.selector", shown(selector), f"empty selector is invalid for {kind}"))
    return parses, errors


def _replica_set_template_errors(spec: Obj, *, kind: str) -> list[FieldError]:
    """``ValidatePodTemplateSpecForReplicaSet``: selected, valid, restarting ``Always``."""
    template = field.mapping(spec.get("template"))
    errors = template_match_errors(spec.get("selector"), template, "spec.template")
    errors += pod_template_errors(template, "spec.template")
    errors += _restart_always_errors(template, kind)
    return errors


def _restart_always_errors(template: Any, kind: str) -> list[FieldError]:
    errors: list[FieldError] = []
    policy = restart_policy(template)
    if policy != "Always":
        errors.append(field.not_supported("spec.template.spec.restartPolicy", policy, ("Always",)))
    if field.mapping(field.mapping(template).get("spec")).get("activeDeadlineSeconds") is not None:
        errors.append(field.forbidden(
            "spec.template.spec.activeDeadlineSeconds", f"activeDeadlineSeconds in {kind} is not Supported"
        ))
    return errors


def _selector_immutable(new: Obj, old: Obj | None) -> list[FieldError]:
    if old is None:
        return []
    new_selector = field.mapping(new.get("spec")).get("selector")
    old_selector = field.mapping(old.get("spec")).get("selector")
    if normalized(new_selector) == normalized(old_selector):
        return []
    return [field.invalid("spec.selector", shown(new_selector), field.IMMUTABLE)]


def _replica_set_spec_errors(spec: Obj, *, kind: str) -> list[FieldError]:
    errors = field.nonnegative(spec.get("replicas"), "spec.replicas")
    errors += field.nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    parses, found = _selector_and_template_errors(spec, kind="deployment", required=True)
    errors += found
    if parses:
        errors += _replica_set_template_errors(spec, kind=kind)
    else:
        errors.append(field.invalid("spec.selector", shown(spec.get("selector")), "invalid label selector"))
    return errors


def _deployment_strategy_errors(strategy: Any) -> list[FieldError]:
    """``ValidateDeploymentStrategy`` (absent parts are kube's defaults: RollingUpdate, 25%/25%)."""
    if strategy is None:
        return []
    strategy = field.mapping(strategy)
    kind = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    path = "spec.strategy.rollingUpdate"
    if kind == "Recreate":
        if rolling is not None:
            return [field.forbidden(path, "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate":
        pointer = "(*apps.RollingUpdateDeployment)(nil)" if rolling is None else "&apps.RollingUpdateDeployment{...}"
        value = GoValue(f"apps.DeploymentStrategy{{Type:{go_quote(str(kind))}, RollingUpdate:{pointer}}}")
        return [field.not_supported("spec.strategy", value, ("Recreate", "RollingUpdate"))]
    if rolling is None:
        return []
    rolling = field.mapping(rolling)
    unavailable, surge = rolling.get("maxUnavailable", "25%"), rolling.get("maxSurge", "25%")
    errors = positive_int_or_percent_errors(unavailable, f"{path}.maxUnavailable")
    errors += positive_int_or_percent_errors(surge, f"{path}.maxSurge")
    if _int_or_percent_value(unavailable) == 0 and _int_or_percent_value(surge) == 0:
        errors.append(field.invalid(
            f"{path}.maxUnavailable", _int_or_string(unavailable), "may not be 0 when `maxSurge` is 0"
        ))
    return errors


def validate_deployment(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateDeployment`` / ``ValidateDeploymentUpdate`` and the strategy's selector rule."""
    spec = field.mapping(obj.get("spec"))
    errors = _replica_set_spec_errors(spec, kind="ReplicaSet")
    errors += _deployment_strategy_errors(spec.get("strategy"))
    if spec.get("revisionHistoryLimit") is not None:
        errors += field.nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        found = field.nonnegative(deadline, "spec.progressDeadlineSeconds")
        errors += found
        min_ready = spec.get("minReadySeconds") or 0
        if not found and isinstance(min_ready, int) and deadline <= min_ready:
            errors.append(field.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return errors + _selector_immutable(obj, old)


def validate_replica_set(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateReplicaSet`` / ``ValidateReplicaSetUpdate``."""
    return _replica_set_spec_errors(field.mapping(obj.get("spec")), kind="ReplicaSet") + _selector_immutable(obj, old)


def _rolling_update_stateful_set_errors(rolling: Obj, path: str) -> list[FieldError]:
    errors = field.nonnegative(rolling.get("partition"), f"{path}.partition")
    unavailable = rolling.get("maxUnavailable")
    if unavailable is not None:
        errors += positive_int_or_percent_errors(unavailable, f"{path}.maxUnavailable")
        if _int_or_percent_value(unavailable) == 0:
            errors.append(field.invalid(f"{path}.maxUnavailable", _int_or_string(unavailable), "cannot be 0"))
    return errors


def _stateful_set_strategy_errors(spec: Obj) -> list[FieldError]:
    policy = spec.get("podManagementPolicy")
    errors: list[FieldError] = []
    if policy and policy not in ("OrderedReady", "Parallel"):
        errors.append(field.invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = field.mapping(spec.get("updateStrategy"))
    kind = strategy.get("type") or "RollingUpdate"
    rolling = strategy.get("rollingUpdate")
    if kind == "OnDelete":
        if rolling is not None:
            errors.append(field.invalid(
                "spec.updateStrategy.rollingUpdate", rolling, "only allowed for updateStrategy 'RollingUpdate'"
            ))
    elif kind == "RollingUpdate":
        if rolling is not None:
            errors += _rolling_update_stateful_set_errors(field.mapping(rolling), "spec.updateStrategy.rollingUpdate")
    else:
        errors.append(field.invalid("spec.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'"))
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        for key in ("whenDeleted", "whenScaled"):
            value = field.mapping(retention).get(key)
            if value and value not in ("Retain", "Delete"):
                errors.append(field.not_supported(
                    f"spec.persistentVolumeClaimRetentionPolicy.{key}", value, ("Retain", "Delete")
                ))
    return errors


#: What a StatefulSet update may change (``ValidateStatefulSetUpdate``).
STATEFUL_SET_MUTABLE = frozenset({
    "replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds",
})


def validate_stateful_set(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateStatefulSet`` / ``ValidateStatefulSetUpdate``. As in kube, the pod template is
    checked only for its labels, annotations and restart policy (pods are validated when made)."""
    spec = field.mapping(obj.get("spec"))
    errors = _stateful_set_strategy_errors(spec)
    errors += field.nonnegative(spec.get("replicas"), "spec.replicas")
    errors += field.nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    errors += field.nonnegative(field.mapping(spec.get("ordinals")).get("start"), "spec.ordinals.start")
    parses, found = _selector_and_template_errors(spec, kind="statefulset", required=True)
    errors += found
    template = field.mapping(spec.get("template"))
    if not parses:
        errors.append(field.invalid("spec.selector", shown(spec.get("selector")), ""))
    else:
        errors += template_match_errors(spec.get("selector"), template, "spec.template")
        errors += template_metadata_errors(template, "spec.template")
    errors += _restart_always_errors(template, "StatefulSet")
    if old is not None:
        old_spec = field.mapping(old.get("spec"))
        changed = sorted(
            key for key in set(spec) | set(old_spec)
            if key not in STATEFUL_SET_MUTABLE and key in old_spec and spec.get(key) != old_spec.get(key)
        )
        if changed:
            errors.append(field.forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ))
    return errors


def _daemon_set_strategy_errors(strategy: Any) -> list[FieldError]:
    """``ValidateDaemonSetUpdateStrategy`` (absent: RollingUpdate, maxUnavailable 1, maxSurge 0)."""
    if strategy is None:
        return []
    strategy = field.mapping(strategy)
    kind = strategy.get("type") or "RollingUpdate"
    path = "spec.updateStrategy"
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        return [field.not_supported(path, strategy, ("RollingUpdate", "OnDelete"))]
    rolling = strategy.get("rollingUpdate")
    if rolling is None:
        return []
    rolling = field.mapping(rolling)
    unavailable, surge = rolling.get("maxUnavailable", 1), rolling.get("maxSurge", 0)
    errors = positive_int_or_percent_errors(unavailable, f"{path}.rollingUpdate.maxUnavailable")
    errors += positive_int_or_percent_errors(surge, f"{path}.rollingUpdate.maxSurge")
    has_unavailable, has_surge = _int_or_percent_value(unavailable) != 0, _int_or_percent_value(surge) != 0
    if has_unavailable and has_surge:
        errors.append(field.invalid(
            f"{path}.rollingUpdate.maxSurge", _int_or_string(surge), "may not be set when maxUnavailable is non-zero"
        ))
    elif not has_unavailable and not has_surge:
        errors.append(field.required(f"{path}.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errors


def validate_daemon_set(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateDaemonSet`` / ``ValidateDaemonSetUpdate`` and the strategy's selector rule."""
    spec = field.mapping(obj.get("spec"))
    parses, errors = _selector_and_template_errors(spec, kind="daemonset", required=False)
    template = spec.get("template")
    if parses:
        errors += template_match_errors(spec.get("selector"), template, "spec.template")
    elif not errors:
        errors.append(field.invalid("spec.selector", spec.get("selector"), "invalid label selector"))
    errors += pod_template_errors(template, "spec.template")
    errors += _restart_always_errors(template, "DaemonSet")
    errors += field.nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    errors += field.nonnegative(spec.get("templateGeneration"), "spec.templateGeneration")
    errors += _daemon_set_strategy_errors(spec.get("updateStrategy"))
    errors += field.nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
    return errors + _selector_immutable(obj, old)


def validate_controller_revision(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateControllerRevision`` / ``ValidateControllerRevisionUpdate``: its data is
    mandatory, then immutable; its revision not negative."""
    errors: list[FieldError] = []
    if obj.get("data") is None:
        errors.append(field.required("data", "data is mandatory"))
    errors += field.nonnegative(obj.get("revision"), "revision")
    if old is not None:
        errors += field.immutable(obj.get("data"), old.get("data"), "data", shown=_revision_data(obj.get("data")))
    return errors


def _revision_data(data: Any) -> Any:
    """A ControllerRevision's ``data`` as kube prints it in an error: its internal type holds the
    JSON as a ``*runtime.Unknown``, which ``field.Invalid`` prints with ``%#v`` (the bytes of
    Go's ``json.Marshal`` of the value, one by one); no data is a nil object, ``"null"``."""
    if data is None:
        return "null"
    raw = ", ".join(f"0x{byte:x}" for byte in go_json(data, sort_keys=True).encode())
    return GoValue(
        f'runtime.Unknown{{TypeMeta:runtime.TypeMeta{{APIVersion:"", Kind:""}}, Raw:[]uint8{{{raw}}}, '
        'ContentEncoding:"", ContentType:"application/json"}'
    )
