"""Which kinds kube keeps a ``metadata.generation`` for, and how to tell that an object changed
in more than its metadata and status, with or without one.

kube-apiserver sets ``generation: 1`` on create and bumps it when the spec changes only where a
kind's registry strategy does (its ``PrepareForCreate``/``PrepareForUpdate``): the workload kinds,
PodDisruptionBudget, Ingress, IngressClass, NetworkPolicy, CustomResourceDefinition and every
custom resource. The other built-in kinds keep none: a ConfigMap, Secret or Service read back from
kube has no ``generation``. As of the version the hub serves (v1.32): Pods have one only from
v1.33 on, HorizontalPodAutoscalers only behind the later ``HPAGeneration`` gate.

Any object: kube's ``BeforeUpdate`` copies the stored ``generation`` into every update, so a
request never moves it; ``BeforeCreate`` leaves what a create request gives for a kind whose
strategy does not set it.

In: a group and kind, or an object before and after an update. Out: booleans. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: (group, kind) of kube's built-in kinds the hub serves whose strategy keeps no generation.
WITHOUT_GENERATION: Final[frozenset[tuple[str, str]]] = frozenset({
    ("", "ConfigMap"),
    ("", "Endpoints"),
    ("", "Event"),
    ("", "LimitRange"),
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "PersistentVolumeClaim"),
    ("", "Pod"),
    ("", "ResourceQuota"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("apiregistration.k8s.io", "APIService"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("coordination.k8s.io", "Lease"),
    ("events.k8s.io", "Event"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
})

#: Metadata whose change moves a kind's generation as its spec does (kube's strategies): a
#: Deployment's annotations (its controller copies them to the ReplicaSets), an EndpointSlice's
#: labels (its strategy bumps on everything but metadata, and on labels).
GENERATION_METADATA: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    ("apps", "Deployment"): ("annotations",),
    ("discovery.k8s.io", "EndpointSlice"): ("labels",),
}

#: Metadata a write of the status subresource takes from the request: kube's status strategies
#: reset the spec and labels only, for a Deployment (its controller records its
#: ``deployment.kubernetes.io/revision`` annotation with UpdateStatus, so its generation stays).
#: Every other kind's status write keeps the stored metadata.
STATUS_WRITE_METADATA: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    ("apps", "Deployment"): ("annotations",),
}

#: Parts of an object that never count as its content (what a generation stands for).
_NOT_CONTENT: Final = frozenset({"metadata", "status"})


def status_write_metadata(
    group: str, kind: str, *, stored: Mapping[str, Any], request: Mapping[str, Any]
) -> dict[str, Any]:
    """The metadata a write of the status subresource stores: the stored one, with the fields of
    :data:`STATUS_WRITE_METADATA` as the request has them (set, or absent)."""
    out = dict(stored)
    for key in STATUS_WRITE_METADATA.get((group, kind), ()):
        out.pop(key, None)
        if request.get(key):
            out[key] = request[key]
    return out


def keeps_generation(group: str, kind: str) -> bool:
    """Whether kube keeps a ``metadata.generation`` for objects of ``kind`` in ``group``."""
    return (group, kind) not in WITHOUT_GENERATION


def generation_content(obj: Mapping[str, Any], *, group: str, kind: str, has_status: bool) -> dict[str, Any]:
    """What of ``obj`` moves its generation when it changes, as kube's strategies count it: all
    but metadata and, for a kind with a status subresource, status (a custom resource without one
    counts its status too); plus the metadata fields of :data:`GENERATION_METADATA` (a
    Deployment's annotations, an EndpointSlice's labels)."""
    ignored = _NOT_CONTENT if has_status else {"metadata"}
    out = {key: value for key, value in obj.items() if key not in ignored}
    meta = obj.get("metadata") or {}
    for field in GENERATION_METADATA.get((group, kind), ()):
        out[f"metadata.{field}"] = meta.get(field) or {}
    return out


def content_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` (the same object before an update) in more than its
    metadata and status: its spec, a ConfigMap's or Secret's data, a Service's ports.

    By the generation where the kind keeps one and both carry it (one look-up); otherwise by
    comparing the two objects without metadata and status. A kind without a generation that
    carries one anyway (stored by an older hub, which gave every kind one, or given at create)
    is compared by content too: its generation no longer moves.
    """
    before = old.get("metadata") or {}
    after = new.get("metadata") or {}
    if "generation" in before and "generation" in after:
        api_version = str(new.get("apiVersion") or "")
        group = api_version.rpartition("/")[0]
        if keeps_generation(group, str(new.get("kind") or "")):
            return bool(before["generation"] != after["generation"])
    keys = (old.keys() | new.keys()) - _NOT_CONTENT
    return any(old.get(key) != new.get(key) for key in keys)
