"""Reading v1 Pod and Node objects into what the simulated member's scheduler works on.

In: a Pod or Node dict (and, for a node, the device plugin's inventory when known); out:
:class:`~.model.PodRequest` (effective requests as kube computes them, node selector,
required and preferred affinity, tolerations, gang and min-member) and :class:`~.model.NodeState`
(allocatable, taints, including kube's not-ready taint on a node that is not Ready, free
devices and the GPU thousandths each GPU resource's unit is). Malformed quantities raise
ValueError / QuantityError. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from controlplane.apis.gpus import is_nvidia_resource
from controlplane.apis.pods import FrozenTaint, FrozenToleration, pod_claims, pod_requests
from controlplane.apis.quantity import QuantityError, to_int
from simulator.devices import NodeInventory
from simulator.scheduling.model import (
    ANNOTATION_MIN_MEMBER,
    GANG_OWNER_KINDS,
    GPU_MILLI,
    LABEL_POD_GROUP,
    RESOURCE_GPU_MILLI,
    TAINT_NOT_READY,
    NodeState,
    PodRequest,
    PreferredTerm,
    Requirement,
    SelectorTerm,
)

_MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(\d+)g\.")
_MIG_SLICES: Final = 7


def _term(term: Mapping[str, Any]) -> SelectorTerm:
    reqs = [
        Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()))
        for e in term.get("matchExpressions") or []
    ]
    reqs += [
        Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()), field=True)
        for e in term.get("matchFields") or []
    ]
    return tuple(reqs)


def _terms(affinity: Mapping[str, Any] | None) -> tuple[SelectorTerm, ...] | None:
    required = (
        ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return None
    return tuple(_term(term) for term in terms)


def preferred_terms(affinity: Mapping[str, Any] | None) -> tuple[PreferredTerm, ...]:
    """The ``nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution`` entries of a pod's
    ``affinity`` as (weight, term), in order."""
    entries = ((affinity or {}).get("nodeAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution")
    return tuple((int(e.get("weight") or 0), _term(e.get("preference") or {})) for e in entries or ())


def pod_request(pod: Mapping[str, Any]) -> PodRequest:
    """Read a v1 Pod dict. Raises ValueError for a malformed quantity."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    name = meta["name"]
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    gang: str | None = None
    min_member = 0
    group = labels.get(LABEL_POD_GROUP)
    if group:
        gang = f"{namespace}/{group}"
        try:
            min_member = max(0, int(annotations.get(ANNOTATION_MIN_MEMBER, 0)))
        except ValueError:
            min_member = 0
    else:
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") in GANG_OWNER_KINDS:
                gang = f"{namespace}/{ref['kind']}/{ref['name']}"
                break
    try:
        requests = pod_requests(spec)
    except QuantityError as exc:
        raise ValueError(f"pod {namespace}/{name}: {exc}") from exc
    tolerations = tuple(
        FrozenToleration(
            t.get("key") or "",
            t.get("operator") or "Equal",
            t.get("value") or "",
            t.get("effect") or "",
        )
        for t in spec.get("tolerations") or []
    )
    return PodRequest(
        key=f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        requests=requests,
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=_terms(spec.get("affinity")),
        preferred=preferred_terms(spec.get("affinity")),
        tolerations=tolerations,
        gang=gang,
        min_member=min_member,
        priority=int(spec.get("priority") or 0),
        node_name=spec.get("nodeName") or None,
        claims=pod_claims(spec),
    )


def node_state(node: Mapping[str, Any], inventory: NodeInventory | None = None) -> NodeState:
    """Read a v1 Node dict (a node that is not Ready gets kube's not-ready taint)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = [
        FrozenTaint(t["key"], t.get("value") or "", t["effect"])
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute", "PreferNoSchedule")
    ]
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    if not ready and not any(t.key == TAINT_NOT_READY for t in taints):
        taints.append(FrozenTaint(TAINT_NOT_READY, "", "NoSchedule"))
    allocatable = {name: to_int(name, qty) for name, qty in (status.get("allocatable") or {}).items()}
    state = NodeState(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=allocatable,
        inventory=inventory,
    )
    if inventory is not None:
        state.free_devices = {resource: list(devices) for resource, devices in inventory.devices.items()}
    state.gpu_milli = gpu_milli_per_unit(allocatable, inventory)
    return state


def gpu_milli_per_unit(allocatable: Mapping[str, int], inventory: NodeInventory | None) -> dict[str, int]:
    """Thousandths of a GPU one unit of each ``nvidia.com/*`` resource a node advertises is.

    From the device plugin's devices when the inventory is known (a whole GPU 1000, a MIG
    instance compute slices / 7 of that, a time-sliced share 1/N); otherwise 1000 for
    ``nvidia.com/gpu``, the profile's slices for ``nvidia.com/mig-<N>g.*``, 1 for
    :data:`RESOURCE_GPU_MILLI` and 0 for anything else.
    """
    units: dict[str, int] = {}
    devices = inventory.devices if inventory is not None else {}
    for resource in allocatable:
        if not is_nvidia_resource(resource):
            continue
        known = devices.get(resource)
        mig = _MIG_RESOURCE.match(resource)
        if resource == RESOURCE_GPU_MILLI:
            units[resource] = 1
        elif known:
            units[resource] = round(known[0].share * GPU_MILLI)
        elif resource == "nvidia.com/gpu":
            units[resource] = GPU_MILLI
        elif mig is not None:
            units[resource] = round(int(mig.group(1)) * GPU_MILLI / _MIG_SLICES)
        else:
            units[resource] = 0
    return units
