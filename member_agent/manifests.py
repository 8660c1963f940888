"""A Work's manifests as the member agent reads them: which member object each one is
(:class:`Identifier`), the apply bodies in apply order, the ownership labels, and the pure
decisions over them (apply or leave a foreign object alone, what to prune, what to release).

In: Work objects and live member objects (plain mappings). Out: values; no I/O. The
:class:`~member_agent.applying.WorkApplier` performs these decisions.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis import kueue_jobs
from controlplane.apis.conflictresolution import DEFAULT_CONFLICT_RESOLUTION, ConflictResolution
from controlplane.apis.kueue_names import LABEL_QUEUE_NAME


class ApplyDecision(StrEnum):
    APPLY = "Apply"
    SKIP_CONFLICT = "SkipConflict"


#: Apply order: namespaces and definitions first, then the policies and quotas pods are admitted
#: under, then what workloads refer to, then the workloads, then what refers to them (Helm's
#: install order, with CustomResourceDefinitions before everything but namespaces so a custom
#: kind's objects find it served). A kind not listed goes with the workloads.
_KIND_ORDER = {
    "Namespace": 0,
    "CustomResourceDefinition": 1,
    "PriorityClass": 2,
    "NetworkPolicy": 2,
    "ResourceQuota": 2,
    "LimitRange": 2,
    "PodDisruptionBudget": 2,
    "StorageClass": 2,
    "RuntimeClass": 2,
    "DeviceClass": 2,
    "IngressClass": 2,
    "ServiceAccount": 3,
    "ConfigMap": 3,
    "Secret": 3,
    "PersistentVolumeClaim": 3,
    "ResourceClaim": 3,
    "ResourceClaimTemplate": 3,
    "ClusterRole": 3,
    "Role": 3,
    "ClusterRoleBinding": 4,
    "RoleBinding": 4,
    "Service": 5,
    "HorizontalPodAutoscaler": 11,
    "Ingress": 11,
}
_SERVER_SET_METADATA = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
)


@dataclass(frozen=True, slots=True)
class Identifier:
    """Which member object a manifest is: the Work status' ``identifier``."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str
    ordinal: int

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def object_key(self) -> tuple[str, str, str, str]:
        """Identity of the member object regardless of API version or position in the Work."""
        return (self.group, self.kind, self.namespace, self.name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "version": self.version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "ordinal": self.ordinal,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Identifier:
        return cls(
            group=str(data.get("group") or ""),
            version=str(data.get("version") or ""),
            kind=str(data.get("kind") or ""),
            namespace=str(data.get("namespace") or ""),
            name=str(data.get("name") or ""),
            ordinal=int(data.get("ordinal") or 0),
        )

    def describe(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.kind} {self.name}{where}"


def identifier_of(manifest: Mapping[str, Any], ordinal: int) -> Identifier:
    api_version = str(manifest.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    metadata = manifest.get("metadata") or {}
    return Identifier(
        group=group,
        version=version,
        kind=str(manifest.get("kind") or ""),
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        ordinal=ordinal,
    )


def work_key(work: Mapping[str, Any]) -> str:
    metadata = work.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def ownership_labels(work_namespace: str, work_name: str) -> dict[str, str]:
    return {
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
        c.LABEL_WORK_NAMESPACE: work_namespace,
        c.LABEL_WORK_NAME: work_name,
    }


def owned_by(live: Mapping[str, Any], *, work_namespace: str, work_name: str) -> bool:
    labels = (live.get("metadata") or {}).get("labels") or {}
    return bool(
        labels.get(c.LABEL_WORK_NAME) == work_name and labels.get(c.LABEL_WORK_NAMESPACE) == work_namespace
    )


def preserves_on_deletion(work: Mapping[str, Any]) -> bool:
    """Whether the Work's objects stay in the member when the Work is deleted."""
    return (work.get("spec") or {}).get("preserveResourcesOnDeletion") is True


def released(live: Mapping[str, Any], *, work_namespace: str, work_name: str) -> dict[str, Any] | None:
    """``live`` without gpufed's ownership labels, for an update; None when the object is not this
    Work's (nothing to release). Its other labels, annotations and spec are left as they are."""
    if not owned_by(live, work_namespace=work_namespace, work_name=work_name):
        return None
    metadata = dict(live.get("metadata") or {})
    labels = {
        key: value
        for key, value in (metadata.get("labels") or {}).items()
        if key not in (c.LABEL_WORK_NAME, c.LABEL_WORK_NAMESPACE)
        and not (key == c.LABEL_MANAGED_BY and value == c.MANAGED_BY_VALUE)
    }
    metadata["labels"] = labels
    metadata.pop("managedFields", None)  # omitted: the member keeps its field ownership as it is
    return {**live, "metadata": metadata}


def conflict_resolution(work: Mapping[str, Any]) -> ConflictResolution:
    value = (work.get("spec") or {}).get("conflictResolution")
    return ConflictResolution.OVERWRITE if value == ConflictResolution.OVERWRITE else DEFAULT_CONFLICT_RESOLUTION


def desired_manifests(work: Mapping[str, Any]) -> list[tuple[Identifier, dict[str, Any]]]:
    """The Work's manifests as apply bodies (ownership labels added, server fields removed),
    in apply order."""
    metadata = work.get("metadata") or {}
    labels = ownership_labels(str(metadata.get("namespace")), str(metadata.get("name")))
    manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
    out: list[tuple[Identifier, dict[str, Any]]] = []
    for ordinal, manifest in enumerate(manifests):
        if not isinstance(manifest, Mapping):
            continue
        body = {k: v for k, v in manifest.items() if k != "status"}
        meta = {k: v for k, v in (manifest.get("metadata") or {}).items() if k not in _SERVER_SET_METADATA}
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
        body["metadata"] = meta
        out.append((identifier_of(manifest, ordinal), body))
    out.sort(key=lambda item: (_KIND_ORDER.get(item[0].kind, 10), item[0].ordinal))
    return out


def decide_apply(
    live: Mapping[str, Any] | None, *, work_namespace: str, work_name: str, resolution: ConflictResolution
) -> ApplyDecision:
    """Whether to apply over ``live`` (None: the object does not exist yet)."""
    if live is None or owned_by(live, work_namespace=work_namespace, work_name=work_name):
        return ApplyDecision.APPLY
    if resolution == ConflictResolution.OVERWRITE:
        return ApplyDecision.APPLY
    return ApplyDecision.SKIP_CONFLICT


def with_member_kueue_suspend(body: dict[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """Two-level admission: a queued job (label ``kueue.x-k8s.io/queue-name``, which the hub
    leaves only in the Works of members that run Kueue) is created suspended, and from then on its
    suspend flag is the member's Kueue's to flip. An update of the existing ``live`` object keeps
    the flag as the member has it, so the Work never suspends again a job the member's Kueue
    admitted (nor starts one it holds). ``body`` unchanged when not such a job."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    have = kueue_jobs.job_suspend(live)
    if LABEL_QUEUE_NAME not in labels or have is None:
        return body
    out = copy.deepcopy(body)
    kueue_jobs.set_job_suspend(out, have)
    return out


#: The kinds whose ``spec.replicas`` a member keeps under the retain-replicas label (Karmada's
#: default interpreter retains them for Deployments and StatefulSets).
_REPLICA_RETAINING_KINDS = frozenset({("apps", "Deployment"), ("apps", "StatefulSet")})


def with_member_replicas(body: dict[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """A Deployment or StatefulSet labelled ``resourcetemplate.karmada.io/retain-replicas: "true"``
    (an HPA scales it in each member) is updated with the ``spec.replicas`` the ``live`` member
    object has, so re-applying the Work never undoes the member's HPA. ``body`` unchanged
    otherwise, or when the member object shows no replicas."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    group = str(body.get("apiVersion") or "").rpartition("/")[0]
    if labels.get(c.LABEL_RETAIN_REPLICAS) != c.RETAIN_REPLICAS_VALUE:
        return body
    if (group, body.get("kind")) not in _REPLICA_RETAINING_KINDS:
        return body
    have = (live.get("spec") or {}).get("replicas")
    if not isinstance(have, int) or isinstance(have, bool):
        return body
    out = copy.deepcopy(body)
    out.setdefault("spec", {})["replicas"] = have
    return out


def prune_targets(previous: Iterable[Identifier], desired: Iterable[Identifier]) -> list[Identifier]:
    """Objects applied before that the Work no longer holds (compared by group/kind/namespace/name)."""
    wanted = {ident.object_key for ident in desired}
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for ident in previous:
        if ident.object_key in wanted or ident.object_key in seen:
            continue
        seen.add(ident.object_key)
        out.append(ident)
    # Workloads before the namespaces that hold them.
    return sorted(out, key=lambda i: (-_KIND_ORDER.get(i.kind, 10), i.namespace, i.name))
