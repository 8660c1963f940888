"""Karmada's ``autoscaling.karmada.io/v1alpha1`` FederatedHPA and CronFederatedHPA: names,
defaults and Karmada's webhook validation, in its words.

A FederatedHPA's spec and status are kube's ``autoscaling/v2`` HorizontalPodAutoscaler's, so
its defaulting (Karmada's mutating webhook: ``lifted.SetDefaultsFederatedHPA``) and validation
(``lifted.ValidateFederatedHPA``, kube's without scale to zero) are kube's, from
:mod:`controlplane.apis.kube`. A CronFederatedHPA's rules are checked as Karmada's
``cronfederatedhpa`` webhook checks them; a schedule must parse as a CronJob's does
(:mod:`controlplane.apis.kube.cronschedule`) and as the controller reads it (croniter: five
fields or a descriptor such as ``@hourly``; ``@every`` is not one). A refusal is Karmada's webhook's:
``admission webhook "federatedhpa.karmada.io" denied the request: <errors>``.

In: objects as written. Out: defaults applied in place, or (webhook, message) of a refusal.
Pure; no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from controlplane.apis.kube import field
from controlplane.apis.kube.cronschedule import schedule_error
from controlplane.apis.kube.defaults_groups import horizontal_pod_autoscaler_spec
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import path_segment_errors
from controlplane.apis.kube.objects import set_nil_default
from controlplane.apis.kube.validate_groups import validate_horizontal_pod_autoscaler
from controlplane.apis.views import ObjectView

API_GROUP: Final = "autoscaling.karmada.io"
API_VERSION: Final = "autoscaling.karmada.io/v1alpha1"
FEDERATED_HPA_KIND: Final = "FederatedHPA"
CRON_FEDERATED_HPA_KIND: Final = "CronFederatedHPA"
FEDERATED_HPA_WEBHOOK: Final = "federatedhpa.karmada.io"
CRON_FEDERATED_HPA_WEBHOOK: Final = "cronfederatedhpa.karmada.io"
#: The CRD's defaults of a rule's history limits.
DEFAULT_HISTORY_LIMIT: Final = 3
MAX_HISTORY_LIMIT: Final = 32
RULE_NAME_MAX_LENGTH: Final = 32
_INT32_MAX: Final = 2**31 - 1


def default_federated_hpa(obj: dict[str, Any]) -> None:
    """Karmada's ``SetDefaultsFederatedHPA``: kube's HPA defaults (one minimum replica, 80 % CPU
    when no metric is given, a given ``behavior``'s unset rules filled). The status is left as it
    is: the zero status Karmada's webhook writes is dropped by a create and replaced by the stored
    one on an update, as for any CRD with a status subresource."""
    horizontal_pod_autoscaler_spec(obj)


def federated_hpa_denial(obj: dict[str, Any]) -> tuple[str, str] | None:
    """Karmada's ``ValidateFederatedHPA`` of the spec (kube's HPA validation; minReplicas at
    least 1, as Karmada does not scale to zero), after its mutating webhook's defaults."""
    defaulted = copy.deepcopy(obj)
    default_federated_hpa(defaulted)
    errors = validate_horizontal_pod_autoscaler(defaulted, None)
    return (FEDERATED_HPA_WEBHOOK, field.error_list_text(errors)) if errors else None


def default_cron_federated_hpa(obj: dict[str, Any]) -> None:
    """The CRD's defaults: each rule not suspended, keeping 3 successful and 3 failed executions
    (an unset or null field; on create, update and read from storage, as kube's structural
    defaulting)."""
    spec = obj.get("spec")
    rules = spec.get("rules") if isinstance(spec, dict) else None
    for rule in rules if isinstance(rules, list) else ():
        if isinstance(rule, dict):
            set_nil_default(rule, "suspend", False)
            set_nil_default(rule, "successfulHistoryLimit", DEFAULT_HISTORY_LIMIT)
            set_nil_default(rule, "failedHistoryLimit", DEFAULT_HISTORY_LIMIT)


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _scaling_replicas_errors(rule: dict[str, Any], path: str, *, scales_fhpa: bool, kind: str) -> list[FieldError]:
    """Karmada's ``validateCronFederatedHPAScalingReplicas``."""
    errors: list[FieldError] = []
    if scales_fhpa:
        low, high = rule.get("targetMinReplicas"), rule.get("targetMaxReplicas")
        if low is None and high is None:
            errors.append(field.invalid(f"{path}.targetMaxReplicas", "",
                                        "targetMinReplicas and targetMaxReplicas cannot be nil at the same time "
                                        "if you want to scale FederatedHPA"))
        if _int_or(low, 1) <= 0:
            errors.append(field.invalid(f"{path}.targetMinReplicas", "", "targetMinReplicas should be larger than 0"))
        if _int_or(high, _INT32_MAX) <= 0:
            errors.append(field.invalid(f"{path}.targetMaxReplicas", "", "targetMaxReplicas should be larger than 0"))
        if _int_or(low, 1) > _int_or(high, _INT32_MAX):
            errors.append(field.invalid(f"{path}.targetMinReplicas", "",
                                        "targetMaxReplicas should be larger than or equal to targetMinReplicas"))
        return errors
    if rule.get("targetReplicas") is None:
        errors.append(field.invalid(f"{path}.targetReplicas", "",
                                    f"targetReplicas cannot be nil if you want to scale {kind}"))
    if _int_or(rule.get("targetReplicas"), 0) < 0:
        errors.append(field.invalid(f"{path}.targetReplicas", "", "targetReplicas should be larger than or equal to 0"))
    return errors


def _rule_errors(rule: dict[str, Any], path: str, *, scales_fhpa: bool, kind: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name = rule.get("name")
    if not isinstance(name, str) or not name:
        errors.append(field.required(f"{path}.name"))
    elif len(name) > RULE_NAME_MAX_LENGTH:
        errors.append(field.too_long(f"{path}.name", RULE_NAME_MAX_LENGTH))
    schedule = rule.get("schedule")
    if not isinstance(schedule, str) or schedule_error(schedule) is not None or not croniter.is_valid(schedule):
        errors.append(field.invalid(f"{path}.schedule", schedule if isinstance(schedule, str) else "",
                                    "invalid cron format"))
    zone = rule.get("timeZone")
    if zone is not None and timezone_error(zone) is not None:
        errors.append(field.invalid(f"{path}.timeZone", zone, timezone_error(zone) or ""))
    for key, low in (("successfulHistoryLimit", 1), ("failedHistoryLimit", 0)):
        limit = rule.get(key)
        if limit is not None and not low <= _int_or(limit, -1) <= MAX_HISTORY_LIMIT:
            errors.append(field.invalid(f"{path}.{key}", limit,
                                        f"should be between {low} and {MAX_HISTORY_LIMIT}"))
    return errors + _scaling_replicas_errors(rule, path, scales_fhpa=scales_fhpa, kind=kind)


def timezone_error(zone: Any) -> str | None:
    """Go's ``time.LoadLocation`` error for ``zone``; None for a known zone ("" and "UTC" included)."""
    if not isinstance(zone, str):
        return "unknown time zone"
    if zone in ("", "UTC", "Local"):
        return None
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {zone}"
    return None


def cron_federated_hpa_errors(obj: dict[str, Any]) -> list[FieldError]:
    """Karmada's ``validateCronFederatedHPASpec``."""
    spec = field.mapping(obj.get("spec"))
    ref = field.mapping(spec.get("scaleTargetRef"))
    kind = str(ref.get("kind") or "")
    scales_fhpa = ref.get("apiVersion") == API_VERSION
    if scales_fhpa and kind != FEDERATED_HPA_KIND:
        return [field.invalid("spec.scaleTargetRef.kind", kind,
                              f"invalid scaleTargetRef kind: {kind}, only support {FEDERATED_HPA_KIND}")]
    errors: list[FieldError] = []
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        if not value:
            errors.append(field.required(f"spec.scaleTargetRef.{key}"))
        else:
            errors += [field.invalid(f"spec.scaleTargetRef.{key}", value, msg) for msg in path_segment_errors(value)]
    seen: set[str] = set()
    for path, rule in field.indexed(field.items(spec.get("rules")), "spec.rules"):
        name = rule.get("name")
        if isinstance(name, str) and name in seen:
            errors.append(field.duplicate(f"{path}.name", name))
        seen.add(str(name))
        errors += _rule_errors(rule, path, scales_fhpa=scales_fhpa, kind=kind)
    return errors


def cron_federated_hpa_denial(obj: dict[str, Any]) -> tuple[str, str] | None:
    """Karmada's ``cronfederatedhpa`` webhook's refusal of ``obj`` (with the CRD's defaults), or None."""
    defaulted = copy.deepcopy(obj)
    default_cron_federated_hpa(defaulted)
    errors = cron_federated_hpa_errors(defaulted)
    return (CRON_FEDERATED_HPA_WEBHOOK, field.error_list_text(errors)) if errors else None


class _ScalerView(ObjectView):
    __slots__ = ()

    @property
    def scale_target_ref(self) -> Mapping[str, Any]:
        """``spec.scaleTargetRef``: the scaled object's apiVersion, kind and name."""
        return self.spec.get("scaleTargetRef") or {}


class FederatedHPAView(_ScalerView):
    """A stored FederatedHPA as its controller reads it (see :mod:`controlplane.apis.views`)."""

    __slots__ = ()

    @property
    def metrics(self) -> Sequence[Mapping[str, Any]]:
        """``spec.metrics``: kube's v2 metric specs."""
        return self.spec.get("metrics") or ()

    @property
    def min_replicas(self) -> int:
        """``spec.minReplicas``, 1 when unset (kube's default; Karmada allows no scale to zero)."""
        return int(self.spec.get("minReplicas") or 1)

    @property
    def max_replicas(self) -> int:
        """``spec.maxReplicas`` (required; 0 when missing)."""
        return int(self.spec.get("maxReplicas") or 0)

    @property
    def behavior(self) -> Mapping[str, Any] | None:
        """``spec.behavior`` as stored (None: kube's default scaling rules, no scale events kept)."""
        return self.spec.get("behavior")


class CronFederatedHPAView(_ScalerView):
    """A stored CronFederatedHPA as its controller reads it (see :mod:`controlplane.apis.views`)."""

    __slots__ = ()

    @property
    def rules(self) -> Sequence[Mapping[str, Any]]:
        """``spec.rules``: the scheduled scalings."""
        return self.spec.get("rules") or ()

    @property
    def execution_histories(self) -> list[dict[str, Any]]:
        """``status.executionHistories``: one record per rule (entries that are not objects left
        out), as stored: a new status carries the unchanged ones over."""
        return [h for h in self.status.get("executionHistories") or () if isinstance(h, dict)]
