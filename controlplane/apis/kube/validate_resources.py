"""kube's validation of resource lists: names, quantities, requests against limits.

As ``validateResourceRequirements`` and ``ValidateResourceQuantityValue`` in
pkg/apis/core/validation: a quantity must parse and not be negative; extended resources
(any name with a domain outside ``kubernetes.io``, such as ``nvidia.com/gpu``) are whole
numbers, must have a limit, and a request equal to it; cpu and memory requests may not
exceed their limits.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.quantity import FORMAT_WRONG, QuantityError, milli_value, parse_quantity

QUANTITY_MESSAGE = FORMAT_WRONG

_STANDARD_CONTAINER = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD = _STANDARD_CONTAINER | frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "storage", "services.nodeports", "services.loadbalancers",
    "requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
})
_INTEGER = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})


def parse(value: Any) -> Decimal | None:
    """A quantity as kube's ``Quantity.UnmarshalJSON`` reads it (a string or a JSON number);
    None when it does not parse."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        return parse_quantity(value if isinstance(value, str) else repr(value))
    except QuantityError:
        return None


_DECIMAL_SUFFIXES = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0), ("m", -3), ("u", -6))
_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_BINARY_SUFFIX_NAMES = tuple(suffix for suffix, _ in _BINARY_SUFFIXES)


def shown(raw: Any, value: Decimal) -> str:
    """The quantity in kube's canonical form, as ``Quantity.String`` prints it in messages:
    binary-suffixed amounts keep the largest whole binary suffix (``1536Mi`` → ``1536Mi``,
    ``2048Mi`` → ``2Gi``), other amounts the largest whole SI suffix (``0.5`` → ``500m``,
    ``1.5`` → ``1500m``, ``1000`` → ``1k``); exponent forms are shown as written."""
    text = raw if isinstance(raw, str) else ""
    binary = text.endswith(_BINARY_SUFFIX_NAMES)
    if "e" in text.lower() and not binary:
        return text
    if value == 0:
        return "0"
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    if binary and magnitude == magnitude.to_integral_value():
        whole = int(magnitude)
        for suffix, power in _BINARY_SUFFIXES:
            if whole and whole % (1 << power) == 0:
                return f"{sign}{whole >> power}{suffix}"
        return f"{sign}{whole}"
    for suffix, power in _DECIMAL_SUFFIXES:
        scaled = magnitude.scaleb(-power)
        if scaled == scaled.to_integral_value():
            return f"{sign}{int(scaled)}{suffix}"
    return f"{sign}{int(magnitude.scaleb(9).to_integral_value(rounding=ROUND_CEILING))}n"


def is_native(name: str) -> bool:
    """``IsNativeResource``: no domain, or a ``kubernetes.io`` one."""
    return "/" not in name or "kubernetes.io/" in name


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: a domain-qualified name outside kubernetes.io (``nvidia.com/gpu``)."""
    if is_native(name) or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)


def overcommit_allowed(name: str) -> bool:
    """``IsOvercommitAllowed``: requests may be below limits (cpu, memory), not for extended
    resources and hugepages."""
    return is_native(name) and not is_hugepages(name)


@lru_cache(maxsize=4096)
def _container_resource_name_messages(name: str) -> tuple[str, ...]:
    """``validateContainerResourceName``'s messages for ``name``."""
    errors = qualified_name_errors(name)
    if errors:
        return tuple(errors)
    if "/" not in name:
        if name not in _STANDARD and not is_hugepages(name):
            return ("must be a standard resource type or fully qualified",)
        if name not in _STANDARD_CONTAINER and not is_hugepages(name):
            return ("must be a standard resource for containers",)
    elif not is_native(name) and not is_extended(name):
        return ("doesn't follow extended resource name standard",)
    return ()


def _container_resource_name_errors(name: str, path: str) -> list[FieldError]:
    return [field.invalid(path, name, msg) for msg in _container_resource_name_messages(name)]


@lru_cache(maxsize=4096)
def _is_integer_resource(name: str) -> bool:
    return name in _INTEGER or is_extended(name)


def quantity_errors(name: str, raw: Any, path: str) -> tuple[Decimal | None, list[FieldError]]:
    """``ValidateResourceQuantityValue``: the parsed value (None: unparseable) and its errors."""
    if raw is None:
        return Decimal(0), []
    value = parse(raw)
    if value is None:
        return None, [field.invalid(path, raw, QUANTITY_MESSAGE)]
    errors = []
    if value < 0:
        errors.append(field.invalid(path, shown(raw, value), field.IS_NEGATIVE))
    # As kube's ``MilliValue() % 1000``: a value past int64 (1e400) is no integer it can count.
    if _is_integer_resource(name) and milli_value(value) % 1000 != 0:
        errors.append(field.invalid(path, shown(raw, value), "must be an integer"))
    return value, errors


def requirements_errors(resources: Any, path: str) -> list[FieldError]:
    """``ValidateContainerResourceRequirements`` of a container's ``resources``."""
    resources = field.mapping(resources)
    limits_path, requests_path = f"{path}.limits", f"{path}.requests"
    errors: list[FieldError] = []
    limits: dict[str, Decimal | None] = {}
    for name, raw in field.mapping(resources.get("limits")).items():
        key_path = f"{limits_path}[{name}]"
        errors += _container_resource_name_errors(name, key_path)
        limits[name], found = quantity_errors(name, raw, key_path)
        errors += found
    has_compute = any(name in ("cpu", "memory") for name in limits)
    has_hugepages = any(is_hugepages(name) for name in limits)
    for name, raw in field.mapping(resources.get("requests")).items():
        key_path = f"{requests_path}[{name}]"
        errors += _container_resource_name_errors(name, key_path)
        value, found = quantity_errors(name, raw, key_path)
        errors += found
        has_compute = has_compute or name in ("cpu", "memory")
        has_hugepages = has_hugepages or is_hugepages(name)
        if name in limits:
            limit = limits[name]
            if value is None or limit is None:
                continue
            limit_raw = field.mapping(resources.get("limits")).get(name)
            if value != limit and not overcommit_allowed(name):
                errors.append(
                    field.invalid(
                        requests_path, shown(raw, value),
                        f"must be equal to {name} limit of {shown(limit_raw, limit)}",
                    )
                )
            elif value > limit:
                errors.append(
                    field.invalid(
                        requests_path, shown(raw, value),
                        f"must be less than or equal to {name} limit of {shown(limit_raw, limit)}",
                    )
                )
        elif not overcommit_allowed(name):
            errors.append(field.required(limits_path, "Limit must be set for non overcommitable resources"))
    if has_hugepages and not has_compute:
        errors.append(field.forbidden(path, "HugePages require cpu or memory"))
    return errors


def resource_name_errors(name: str, path: str, *, container: bool) -> list[FieldError]:
    """``validateContainerResourceName`` (``container``) or ``validateResourceName``: a qualified
    name, and a standard resource when it has no domain."""
    if container:
        return _container_resource_name_errors(name, path)
    messages = qualified_name_errors(name)
    if not messages and "/" not in name and name not in _STANDARD and not is_hugepages(name):
        messages = ["must be a standard resource type or fully qualified"]
    return [field.invalid(path, name, message) for message in messages]
