"""kube's validation of Dynamic Resource Allocation (``pkg/apis/resource/validation``, resource.k8s.io/v1):
DeviceClass, ResourceClaim (its spec immutable), ResourceClaimTemplate (its spec immutable) and
ResourceSlice (the fields the hub can check without a driver).

Checked as kube checks them: request and subrequest names (DNS labels, each once), exactly one of
``exactly`` and ``firstAvailable``, a ``deviceClassName`` (a DNS subdomain), ``allocationMode``
``ExactCount`` (``count`` above zero) or ``All`` (no ``count``), at most 32 requests, selectors,
constraints and configs, at most 8 ``firstAvailable`` subrequests, a CEL selector's expression
present and at most 10 Ki bytes, tolerations' operators and effects. Not checked: whether a CEL
expression compiles (the hub has no CEL environment for devices; the member's API server checks
it when the object lands there), capacity requests, and a claim's status beyond its shape.

In: objects as plain dicts. Out: kube's field errors. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import dns_label_errors, dns_subdomain_errors
from controlplane.apis.untyped import Obj

#: ``resource.DeviceRequestsMaxSize`` and the other list bounds of resource/v1 (types.go).
REQUESTS_MAX: Final = 32
SELECTORS_MAX: Final = 32
CONSTRAINTS_MAX: Final = 32
CONFIG_MAX: Final = 32
FIRST_AVAILABLE_MAX: Final = 8
TOLERATIONS_MAX: Final = 16
#: ``resource.CELSelectorExpressionMaxLength``.
CEL_EXPRESSION_MAX: Final = 10 * 1024

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
ALLOCATION_MODES: Final = (ALL, EXACT_COUNT)
_TOLERATION_OPERATORS: Final = ("Equal", "Exists")
_TOLERATION_EFFECTS: Final = ("NoExecute", "NoSchedule")


def validate_device_class(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateDeviceClass``: its selectors and configs (its name is checked as every kind's)."""
    spec = field.mapping(obj.get("spec"))
    errors = _selectors_errors(spec.get("selectors"), "spec.selectors")
    errors += _bounded(spec.get("config"), "spec.config", CONFIG_MAX)
    for path, config in field.indexed(spec.get("config"), "spec.config"):
        errors += _opaque_errors(config, path)
    return errors


def validate_resource_claim(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateResourceClaim`` (and, on update, ``ValidateResourceClaimUpdate``: the spec is immutable)."""
    errors = claim_spec_errors(obj.get("spec"), "spec")
    if old is not None:
        errors += field.immutable(obj.get("spec"), old.get("spec"), "spec")
    return errors


def validate_resource_claim_template(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateResourceClaimTemplate``: the claim spec it stamps out under ``spec.spec``, immutable."""
    template = field.mapping(obj.get("spec"))
    errors = claim_spec_errors(template.get("spec"), "spec.spec")
    if old is not None:
        errors += field.immutable(obj.get("spec"), old.get("spec"), "spec")
    return errors


def validate_resource_slice(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateResourceSlice``'s required fields: a driver, a pool, and exactly one of ``nodeName``,
    ``nodeSelector``, ``allNodes`` and ``perDeviceNodeSelection``."""
    spec = field.mapping(obj.get("spec"))
    errors = _subdomain_errors(spec.get("driver"), "spec.driver")
    pool = field.mapping(spec.get("pool"))
    if not pool.get("name"):
        errors.append(field.required("spec.pool.name", ""))
    if not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] <= 0:
        errors.append(field.invalid("spec.pool.resourceSliceCount", pool.get("resourceSliceCount", 0),
                                    "must be greater than zero"))
    chosen = [name for name in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(name)]
    if not chosen:
        errors.append(field.required(
            "spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
    elif len(chosen) > 1:
        errors.append(field.invalid(
            "spec", field.GoValue("{" + ", ".join(chosen) + "}"),
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, "
            "but multiple fields are set"))
    if old is not None:
        errors += field.immutable(spec.get("driver"), field.mapping(old.get("spec")).get("driver"), "spec.driver")
    return errors


def claim_spec_errors(spec: Any, path: str) -> list[FieldError]:
    """``validateResourceClaimSpec``: the device requests, constraints and configs of a claim."""
    devices = field.mapping(field.mapping(spec).get("devices"))
    base = f"{path}.devices"
    requests = field.items(devices.get("requests"))
    errors = _bounded(requests, f"{base}.requests", REQUESTS_MAX)
    seen: set[str] = set()
    for request_path, request in field.indexed(requests, f"{base}.requests"):
        errors += _request_errors(request, request_path, seen)
    errors += _bounded(devices.get("constraints"), f"{base}.constraints", CONSTRAINTS_MAX)
    for constraint_path, constraint in field.indexed(devices.get("constraints"), f"{base}.constraints"):
        for index, name in enumerate(field.items(constraint.get("requests"))):
            if isinstance(name, str) and name.split("/")[0] not in seen:
                errors.append(field.invalid(f"{constraint_path}.requests[{index}]", name,
                                            "must be the name of a request in the claim or the name of a "
                                            "request and a subrequest separated by '/'"))
    errors += _bounded(devices.get("config"), f"{base}.config", CONFIG_MAX)
    for config_path, config in field.indexed(devices.get("config"), f"{base}.config"):
        errors += _opaque_errors(config, config_path)
    return errors


def _request_errors(request: dict[str, Any], path: str, seen: set[str]) -> list[FieldError]:
    """``validateDeviceRequest``: a unique DNS-label name and exactly one of ``exactly`` / ``firstAvailable``."""
    errors = _name_errors(request.get("name"), f"{path}.name", seen)
    exactly, first_available = request.get("exactly"), request.get("firstAvailable")
    if exactly is not None and first_available is not None:
        errors.append(field.invalid(path, None,
                                    "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
    elif exactly is not None:
        errors += _exact_errors(field.mapping(exactly), f"{path}.exactly")
    elif first_available is not None:
        subrequests = field.items(first_available)
        if not subrequests:
            errors.append(field.required(f"{path}.firstAvailable", ""))
        errors += _bounded(subrequests, f"{path}.firstAvailable", FIRST_AVAILABLE_MAX)
        names: set[str] = set()
        for sub_path, sub in field.indexed(subrequests, f"{path}.firstAvailable"):
            errors += _name_errors(sub.get("name"), f"{sub_path}.name", names)
            errors += _exact_errors(sub, sub_path)
    else:
        errors.append(field.required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    return errors


def _exact_errors(request: dict[str, Any], path: str) -> list[FieldError]:
    """``validateExactDeviceRequest`` (and a subrequest's, which has the same fields)."""
    errors = _subdomain_errors(request.get("deviceClassName"), f"{path}.deviceClassName")
    errors += _selectors_errors(request.get("selectors"), f"{path}.selectors")
    mode, count = request.get("allocationMode"), request.get("count", 0)
    if mode == ALL:
        if count:
            errors.append(field.invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == EXACT_COUNT:
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            errors.append(field.invalid(f"{path}.count", count, "must be greater than zero"))
    else:
        errors.append(field.not_supported(f"{path}.allocationMode", mode or "", ALLOCATION_MODES))
    errors += _bounded(request.get("tolerations"), f"{path}.tolerations", TOLERATIONS_MAX)
    for toleration_path, toleration in field.indexed(request.get("tolerations"), f"{path}.tolerations"):
        operator, effect = toleration.get("operator", "Equal"), toleration.get("effect")
        if operator not in _TOLERATION_OPERATORS:
            errors.append(field.not_supported(f"{toleration_path}.operator", operator, _TOLERATION_OPERATORS))
        if effect and effect not in _TOLERATION_EFFECTS:
            errors.append(field.not_supported(f"{toleration_path}.effect", effect, _TOLERATION_EFFECTS))
    return errors


def _selectors_errors(selectors: Any, path: str) -> list[FieldError]:
    """``validateSelectorSlice``: each selector a CEL one, its expression present and bounded."""
    errors = _bounded(selectors, path, SELECTORS_MAX)
    for selector_path, selector in field.indexed(selectors, path):
        cel = selector.get("cel")
        if not isinstance(cel, dict):
            errors.append(field.required(f"{selector_path}.cel", ""))
            continue
        expression = cel.get("expression")
        if not expression:
            errors.append(field.required(f"{selector_path}.cel.expression", ""))
        elif isinstance(expression, str) and len(expression.encode()) > CEL_EXPRESSION_MAX:
            errors.append(field.too_long(f"{selector_path}.cel.expression", CEL_EXPRESSION_MAX))
    return errors


def _opaque_errors(config: dict[str, Any], path: str) -> list[FieldError]:
    """``validateOpaqueConfiguration``: an opaque config names its driver and carries parameters."""
    opaque = config.get("opaque")
    if not isinstance(opaque, dict):
        return [field.required(path, "exactly one of `opaque` is required")]
    errors = _subdomain_errors(opaque.get("driver"), f"{path}.opaque.driver")
    if opaque.get("parameters") is None:
        errors.append(field.required(f"{path}.opaque.parameters", ""))
    return errors


def _subdomain_errors(value: Any, path: str) -> list[FieldError]:
    """A required name that is a DNS subdomain (a device class, a driver)."""
    if not value:
        return [field.required(path, "")]
    shown = str(value)
    return [field.invalid(path, shown, msg) for msg in dns_subdomain_errors(shown)]


def _name_errors(name: Any, path: str, seen: set[str]) -> list[FieldError]:
    if not name:
        return [field.required(path, "")]
    shown = str(name)
    errors = [field.invalid(path, shown, msg) for msg in dns_label_errors(shown)]
    if shown in seen:
        errors.append(field.duplicate(path, shown))
    seen.add(shown)
    return errors


def _bounded(values: Any, path: str, maximum: int) -> list[FieldError]:
    count = len(field.items(values))
    return [field.too_many(path, count, maximum)] if count > maximum else []
