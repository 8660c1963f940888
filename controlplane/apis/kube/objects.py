"""Walking a built-in object as kube's typed structs see it: maps that may be absent or malformed.

Defaulters only fill what is missing from well-formed parts of an object; a part of the
wrong type (a list where a map belongs) is left as written for validation to report. Here
are the small accessors they share, and kube's quantity fields (``ResourceList`` entries are
canonicalised and rounded up to a thousandth, as ``SetDefaults_ResourceList`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from controlplane.apis.quantity import QuantityError, canonical_quantity


def child(parent: Any, key: str) -> dict[str, Any] | None:
    """``parent[key]`` when both are maps; None otherwise."""
    if not isinstance(parent, dict):
        return None
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def drop_keys(parent: Any, key: str, names: Iterable[str]) -> None:
    """Remove ``names`` from the map ``parent[key]``, and the map itself once it is empty."""
    mapping = child(parent, key)
    if mapping is None:
        return
    for name in names:
        mapping.pop(name, None)
    if not mapping:
        del parent[key]


def ensure(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    """``parent[key]``, created empty when absent or null; None when it holds something else."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else None


def items(parent: Any, key: str) -> Iterator[dict[str, Any]]:
    """The map entries of the list ``parent[key]`` (other entries are skipped)."""
    if not isinstance(parent, dict):
        return
    value = parent.get(key)
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def set_default(parent: dict[str, Any], key: str, value: Any) -> None:
    """kube's ``if x == nil/"" { x = value }``: absent, null and empty string count as unset."""
    if parent.get(key) in (None, ""):
        parent[key] = value


def set_nil_default(parent: dict[str, Any], key: str, value: Any) -> None:
    """A pointer field's ``if x == nil { x = value }``, and a CRD's structural default: only
    absent and null count as unset (an empty string is a value)."""
    if parent.get(key) is None:
        parent[key] = value


def quantity(parent: Any, key: str) -> None:
    """A single ``resource.Quantity`` field in kube's canonical form (left as is when invalid)."""
    if isinstance(parent, dict) and key in parent:
        parent[key] = _canonical(parent[key], round_milli=False)


def resource_list(parent: Any, key: str) -> None:
    """A ``ResourceList`` (name -> quantity) canonical and rounded up to milli precision."""
    resources = child(parent, key)
    if resources is None:
        return
    for name, value in resources.items():
        resources[name] = _canonical(value, round_milli=True)


def resource_requirements(parent: Any, key: str = "resources") -> None:
    """``ResourceRequirements.limits`` and ``.requests``."""
    requirements = child(parent, key)
    resource_list(requirements, "limits")
    resource_list(requirements, "requests")


def _canonical(value: Any, *, round_milli: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    try:
        return canonical_quantity(value, round_milli=round_milli)
    except QuantityError:
        return value
