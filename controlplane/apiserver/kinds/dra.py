"""resource.k8s.io/v1, Dynamic Resource Allocation as kube-apiserver serves it: DeviceClass (cluster),
ResourceClaim (namespaced, with a status subresource), ResourceClaimTemplate (namespaced) and
ResourceSlice (cluster; on the hub only a record: no driver publishes there), with kube's
printer columns (``printers.go``: a claim's STATE).

:func:`~controlplane.apiserver.kinds.builtin_kind_resources` lists them, so the hub and the simulated
members serve them alike; kube's validation and defaulting are attached there (``with_kube_rules``); the schemas (``kubectl
explain``) are kube's own, served for any built-in kind.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controlplane.apis.untyped import dig
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn, path

GROUP = "resource.k8s.io"


def _claim_state(obj: dict[str, Any], _now: datetime) -> str:
    """``resourceClaimState``: deleted, then pending (unallocated) or allocated, reserved while a pod
    holds it (deallocating once deleted and no longer held), comma-joined."""
    raw = obj.get("status")
    status: dict[str, Any] = raw if isinstance(raw, dict) else {}
    deleted = bool(dig(obj, "metadata", "deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
        elif deleted:
            states.append("deallocating")
    return ",".join(states)


#: Each is deleted as kube's registry deletes it (``ReturnDeletedObject``): the answer is the object.
DEVICE_CLASS = ResourceType(
    GROUP, "v1", "DeviceClass", "deviceclasses", "deviceclass", namespaced=False,
    strategic_merge=True, returns_deleted_object=True, columns=(AGE,),
)
RESOURCE_CLAIM = ResourceType(
    GROUP, "v1", "ResourceClaim", "resourceclaims", "resourceclaim", namespaced=True, has_status=True,
    strategic_merge=True, returns_deleted_object=True,
    columns=(TableColumn("State", _claim_state, description="A summary of the claim's allocation."), AGE),
)
RESOURCE_CLAIM_TEMPLATE = ResourceType(
    GROUP, "v1", "ResourceClaimTemplate", "resourceclaimtemplates", "resourceclaimtemplate", namespaced=True,
    strategic_merge=True, returns_deleted_object=True, columns=(AGE,),
)
RESOURCE_SLICE = ResourceType(
    GROUP, "v1", "ResourceSlice", "resourceslices", "resourceslice", namespaced=False,
    strategic_merge=True, returns_deleted_object=True, columns=(
        TableColumn("Node", path("spec.nodeName")),
        TableColumn("Driver", path("spec.driver")),
        TableColumn("Pool", path("spec.pool.name")),
        AGE,
    ),
)
