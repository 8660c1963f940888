"""Karmada's ``kube`` Lua library for customization scripts, and the ReplicaRequirements forms.

Scripts call ``local kube = require("kube")`` and use ``kube.accuratePodRequirements``,
``kube.getPodDependencies``, ``kube.resourceAdd`` and ``kube.getResourceQuantity``; each is a
pure function of JSON values here (the Lua runtime converts tables in and out). Karmada's
``ReplicaRequirements`` nests node constraints under ``nodeClaim`` (``nodeSelector``,
``tolerations``, ``hardNodeAffinity``); :func:`requirements_from_karmada` reads that form into the
hub's :class:`ReplicaRequirements`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controlplane.apis.quantity import KubeQuantity, parse_kube_quantity, parse_quantity
from controlplane.interpreter.dependencies import pod_template_dependencies, sorted_dependencies
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

__all__ = ["KUBE_LIBRARY", "requirements_from_karmada", "requirements_to_karmada"]


def requirements_to_karmada(req: ReplicaRequirements) -> dict[str, Any]:
    """The hub's requirements in Karmada's ``ReplicaRequirements`` form."""
    spec = req.to_spec()
    claim: dict[str, Any] = {}
    if spec.get("nodeSelector"):
        claim["nodeSelector"] = spec["nodeSelector"]
    if spec.get("tolerations"):
        claim["tolerations"] = spec["tolerations"]
    affinity = (spec.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if affinity:
        claim["hardNodeAffinity"] = affinity
    out: dict[str, Any] = {"resourceRequest": spec.get("resourceRequest") or {}}
    if claim:
        out["nodeClaim"] = claim
    if spec.get("priorityClassName"):
        out["priorityClassName"] = spec["priorityClassName"]
    return out


def requirements_from_karmada(value: Any) -> ReplicaRequirements:
    """Karmada's ``ReplicaRequirements`` (as a script returns it) as the hub's; None is no requirement."""
    if value is None:
        return ReplicaRequirements()
    if not isinstance(value, Mapping):
        raise ValueError(f"the requirement must be a table (ReplicaRequirements), not {type(value).__name__}")
    claim = value.get("nodeClaim") or {}
    if not isinstance(claim, Mapping):
        raise ValueError("requirement.nodeClaim must be a table")
    spec: dict[str, Any] = {
        "resourceRequest": value.get("resourceRequest") or {},
        "nodeSelector": claim.get("nodeSelector") or {},
        "tolerations": claim.get("tolerations") or [],
        "priorityClassName": value.get("priorityClassName"),
    }
    if claim.get("hardNodeAffinity"):
        spec["nodeAffinity"] = claim["hardNodeAffinity"]
    return ReplicaRequirements.from_spec(spec)


def accurate_pod_requirements(template: Any) -> dict[str, Any]:
    """``kube.accuratePodRequirements(podTemplate)``."""
    return requirements_to_karmada(requirements(template if isinstance(template, Mapping) else None))


def get_pod_dependencies(template: Any, namespace: Any = None) -> list[dict[str, Any]]:
    """``kube.getPodDependencies(podTemplate, namespace)``: dependency entries of the template."""
    found = pod_template_dependencies(template if isinstance(template, Mapping) else None)
    out: list[dict[str, Any]] = []
    for dep in sorted_dependencies(found):
        entry: dict[str, Any] = {"apiVersion": dep.api_version, "kind": dep.kind, "name": dep.name}
        if namespace:
            entry["namespace"] = str(namespace)
        out.append(entry)
    return out


def resource_add(first: Any, second: Any) -> str:
    """``kube.resourceAdd(q1, q2)``: the sum in the first quantity's format, as kube's
    ``Quantity.Add`` prints it (nil counts as 0)."""
    a = parse_kube_quantity(first if first is not None else 0)
    b = parse_kube_quantity(second if second is not None else 0)
    return str(KubeQuantity(a.value + b.value, a.format))


def get_resource_quantity(value: Any) -> float | int:
    """``kube.getResourceQuantity(q)``: the quantity's value as a number."""
    number = parse_quantity(value if value is not None else 0)
    return int(number) if number == number.to_integral_value() else float(number)


KUBE_LIBRARY: Mapping[str, Callable[..., Any]] = {
    "accuratePodRequirements": accurate_pod_requirements,
    "getPodDependencies": get_pod_dependencies,
    "resourceAdd": resource_add,
    "getResourceQuantity": get_resource_quantity,
}
