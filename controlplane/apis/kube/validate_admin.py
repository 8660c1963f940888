"""kube's validation of the namespace administration kinds (``pkg/apis/core/validation``):
LimitRange (limit types, resource names, min ≤ default request ≤ default ≤ max, ratios),
ResourceQuota (quota resource names and values, scopes and the scope selector) and
ServiceAccount (kube checks only its metadata, which the API server does for every kind).
ResourceQuota status is written by the quota controller and not checked here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.kube.validate_resources import (
    QUANTITY_MESSAGE,
    is_hugepages,
    overcommit_allowed,
    parse,
    quantity_errors,
    resource_name_errors,
    shown,
)
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

_LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_LIMIT_KEYS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
#: ``standardQuotaResources``.
_QUOTA_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
    "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})
_POD_COUNT = frozenset({"pods"})
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity")
_EXISTS_ONLY_SCOPES = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")
_CONFLICTING_SCOPES = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_EXISTS_ONLY_MESSAGE = (
    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
    "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)


def _limit_type_errors(value: str, path: str) -> list[FieldError]:
    """``validateLimitRangeTypeName``."""
    messages = qualified_name_errors(value)
    if not messages and "/" not in value and value not in _LIMIT_TYPES:
        messages = ["must be a standard limit type or fully qualified"]
    return [field.invalid(path, value, message) for message in messages]


def _quantities(item: Obj, key: str, path: str, limit_type: str) -> tuple[dict[str, tuple[Any, Decimal]], list[FieldError]]:
    """The resource names of ``item[key]`` checked, and the quantities that parse (raw, value)."""
    values: dict[str, tuple[Any, Decimal]] = {}
    errors: list[FieldError] = []
    for name, raw in field.mapping(item.get(key)).items():
        key_path = f"{path}.{key}[{name}]"
        errors += resource_name_errors(str(name), key_path, container=limit_type in ("Pod", "Container"))
        value = parse(raw)
        if value is None:
            errors.append(field.invalid(key_path, raw, QUANTITY_MESSAGE))
        else:
            values[str(name)] = (raw, value)
    return values, errors


def _q(pair: tuple[Any, Decimal]) -> str:
    return shown(*pair)


def _bound_errors(path: str, name: str, found: dict[str, dict[str, tuple[Any, Decimal]]]) -> list[FieldError]:
    """The comparisons of one resource's min, max, default, defaultRequest and ratio."""
    low, high = found["min"].get(name), found["max"].get(name)
    default, request = found["default"].get(name), found["defaultRequest"].get(name)
    ratio = found["maxLimitRequestRatio"].get(name)
    errors: list[FieldError] = []

    def check(worse: bool, key: str, value: tuple[Any, Decimal], detail: str) -> None:
        if worse:
            errors.append(field.invalid(f"{path}.{key}[{name}]", _q(value), detail))

    if low and high:
        check(low[1] > high[1], "min", low, f"min value {_q(low)} is greater than max value {_q(high)}")
    if request and low:
        check(low[1] > request[1], "defaultRequest", request,
              f"min value {_q(low)} is greater than default request value {_q(request)}")
    if request and high:
        check(request[1] > high[1], "defaultRequest", request,
              f"default request value {_q(request)} is greater than max value {_q(high)}")
    if request and default:
        check(request[1] > default[1], "defaultRequest", request,
              f"default request value {_q(request)} is greater than default limit value {_q(default)}")
    if default and low:
        check(low[1] > default[1], "default", low, f"min value {_q(low)} is greater than default value {_q(default)}")
    if default and high:
        check(default[1] > high[1], "default", high,
              f"default value {_q(default)} is greater than max value {_q(high)}")
    if ratio:
        check(ratio[1] < 1, "maxLimitRequestRatio", ratio, f"ratio {_q(ratio)} is less than 1")
        if low and high and low[1] > 0:
            bound = high[1] / low[1]
            check(ratio[1] > bound, "maxLimitRequestRatio", ratio,
                  f"ratio {_q(ratio)} is greater than max/min = {float(bound):f}")
    if default and request and not overcommit_allowed(name):
        check(default[1] != request[1], "defaultRequest", request,
              f"default value {_q(default)} must equal to defaultRequest value {_q(request)} in {name}")
    return errors


def validate_limit_range(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateLimitRange`` (create and update alike)."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for path, item in field.indexed(field.mapping(obj.get("spec")).get("limits"), "spec.limits"):
        limit_type = str(item.get("type") or "")
        errors += _limit_type_errors(limit_type, f"{path}.type")
        if limit_type in seen:
            errors.append(field.duplicate(f"{path}.type", limit_type))
        seen.add(limit_type)
        found: dict[str, dict[str, tuple[Any, Decimal]]] = {}
        for key in _LIMIT_KEYS:
            if key == "maxLimitRequestRatio" and limit_type == "Pod":
                found[key] = {}
                continue
            found[key], more = _quantities(item, key, path, limit_type)
            errors += more
        if limit_type == "Pod":
            for key in ("default", "defaultRequest"):
                if field.mapping(item.get(key)):
                    errors.append(field.forbidden(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
        if limit_type == "PersistentVolumeClaim" and "storage" not in found["min"] and "storage" not in found["max"]:
            errors.append(field.required(
                f"{path}.limits", "either minimum or maximum storage value is required, but neither was provided"
            ))
        for name in sorted({name for values in found.values() for name in values}):
            errors += _bound_errors(path, name, found)
    return errors


def quota_list_errors(resources: Obj, path: str) -> list[FieldError]:
    """A quota's resource list (``path[name]``): each name one a quota may limit, each value a
    valid quantity for it (``ValidateResourceQuotaResourceName``, ``ValidateResourceQuantityValue``)."""
    errors: list[FieldError] = []
    for name, raw in resources.items():
        key_path = f"{path}[{name}]"
        errors += _quota_resource_errors(str(name), key_path)
        errors += quantity_errors(str(name), raw, key_path)[1]
    return errors


def _quota_resource_errors(name: str, path: str) -> list[FieldError]:
    """``ValidateResourceQuotaResourceName``."""
    errors = resource_name_errors(name, path, container=False)
    if "/" not in name and name not in _QUOTA_RESOURCES and not _is_quota_hugepages(name):
        errors.append(field.invalid(path, name, "must be a standard resource for quota"))
    return errors


def _is_quota_hugepages(name: str) -> bool:
    return is_hugepages(name) or is_hugepages(name.removeprefix("requests."))


def _scope_fits(scope: str, resource: str) -> bool:
    """``IsResourceQuotaScopeValidForResource``."""
    if scope == "BestEffort":
        return resource in _POD_COUNT
    if scope in _SCOPES:
        return resource in _POD_COUNT or resource in _POD_COMPUTE
    return True


def _scopes_shown(scopes: list[Any]) -> GoValue:
    return GoValue("[]core.ResourceQuotaScope{" + ", ".join(go_quote(str(s)) for s in scopes) + "}")


def _scope_errors(scopes: list[Any], hard: list[str]) -> list[FieldError]:
    """``validateResourceQuotaScopes``."""
    errors: list[FieldError] = []
    shown_scopes = _scopes_shown(scopes)
    for scope in scopes:
        if scope not in _SCOPES:
            errors.append(field.invalid("spec.scopes", shown_scopes, "unsupported scope"))
        for resource in hard:
            if resource in _QUOTA_RESOURCES and not _scope_fits(str(scope), resource):
                errors.append(field.invalid("spec.scopes", shown_scopes, "unsupported scope applied to resource"))
    for pair in _CONFLICTING_SCOPES:
        if set(pair) <= set(scopes):
            errors.append(field.invalid("spec.scopes", shown_scopes, "conflicting scopes"))
    return errors


def _scope_selector_errors(selector: Obj, hard: list[str]) -> list[FieldError]:
    """``validateScopedResourceSelectorRequirement``."""
    path = "spec.scopeSelector.matchExpressions"
    errors: list[FieldError] = []
    names: set[str] = set()
    for req in map(field.mapping, field.items(selector.get("matchExpressions"))):
        scope, operator, values = str(req.get("scopeName") or ""), req.get("operator"), field.items(req.get("values"))
        if scope not in _SCOPES:
            errors.append(field.invalid(f"{path}.scopeName", scope, "unsupported scope"))
        for resource in hard:
            if resource in _QUOTA_RESOURCES and not _scope_fits(scope, resource):
                errors.append(field.invalid(path, selector, "unsupported scope applied to resource"))
        if scope in _EXISTS_ONLY_SCOPES and operator != "Exists":
            errors.append(field.invalid(f"{path}.operator", operator, _EXISTS_ONLY_MESSAGE))
        errors += _scope_operator_errors(operator, values, path)
        names.add(scope)
    for pair in _CONFLICTING_SCOPES:
        if set(pair) <= names:
            errors.append(field.invalid(path, selector, "conflicting scopes"))
    return errors


def _scope_operator_errors(operator: Any, values: list[Any], path: str) -> list[FieldError]:
    """The operator of a scope selector's requirement, and the values it takes (none for Exists)."""
    listing = operator in ("In", "NotIn")
    if not listing and operator not in ("Exists", "DoesNotExist"):
        return [field.invalid(f"{path}.operator", operator, "not a valid selector operator")]
    if listing and not values:
        return [field.required(
            f"{path}.values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
        )]
    if not listing and values:
        return [field.invalid(
            f"{path}.values", field.go_strings(values),
            "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
        )]
    return []


def validate_resource_quota(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateResourceQuota`` / ``ValidateResourceQuotaUpdate`` (its scopes are immutable)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    hard = field.mapping(spec.get("hard"))
    errors += quota_list_errors(hard, "spec.hard")
    names = sorted(str(name) for name in hard)
    scopes = field.items(spec.get("scopes"))
    if scopes:
        errors += _scope_errors(scopes, names)
    if spec.get("scopeSelector") is not None:
        errors += _scope_selector_errors(field.mapping(spec.get("scopeSelector")), names)
    if old is not None:
        old_scopes = field.items(field.mapping(old.get("spec")).get("scopes"))
        if set(map(str, old_scopes)) != set(map(str, scopes)):
            errors.append(field.invalid("spec.scopes", _scopes_shown(scopes), field.IMMUTABLE))
    return errors


def validate_service_account(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateServiceAccount``: kube checks only the metadata (a DNS-subdomain name), which the
    API server checks for every kind; its ``secrets`` and ``imagePullSecrets`` are free references."""
    return []
