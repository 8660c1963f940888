"""Warnings and a condition for policies that select a kind gpufed cannot propagate.

A ``resourceSelectors`` entry naming a kind the hub does not serve (a CRD not installed, a typo
in ``apiVersion``), a cluster-scoped kind other than :data:`PROPAGATABLE_CLUSTER_KINDS` (gpufed
propagates namespaced objects and those) or one of the
hub's own kinds (Events, Leases, Works…) is accepted — the kind may be served later — but the
policy selects nothing through it, which the author should hear at apply time (kubectl prints
each as ``Warning: ...``) and see on the policy afterwards: its ``ResourceSelectorsServed``
condition (:func:`selectors_served_condition`), which the hub keeps current as CRDs come and go.

In: a policy document and :data:`KindLookup`, what the hub knows of a kind. Out: warning strings,
a condition. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

#: The policy condition that says whether every resource selector names a propagatable kind.
SELECTORS_SERVED = "ResourceSelectorsServed"

#: (group, kind) of the cluster-scoped kinds a ClusterPropagationPolicy may propagate: those a
#: workload or an operator needs in every member it runs in, as Karmada users propagate them.
#: CustomResourceDefinitions (a custom kind's objects need it served), RuntimeClasses (GPU charts'
#: ``nvidia``: pods name it in ``runtimeClassName``), PriorityClasses (``priorityClassName``: a
#: member refuses a pod naming a missing one), StorageClasses (``storageClassName``: a claim naming
#: a missing one stays Pending), IngressClasses (``ingressClassName``) and ClusterRoles and
#: ClusterRoleBindings (an operator's permissions in the member), and DeviceClasses (a DRA claim's
#: ``deviceClassName``; NVIDIA's driver installs its own in each member), and Kubeflow Trainer's
#: ClusterTrainingRuntimes (a TrainJob's runtime, which the member's trainer resolves there).
PROPAGATABLE_CLUSTER_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("trainer.kubeflow.org", "ClusterTrainingRuntime"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("node.k8s.io", "RuntimeClass"),
        ("resource.k8s.io", "DeviceClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "StorageClass"),
        ("networking.k8s.io", "IngressClass"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    }
)


def _plural(kind: str) -> str:
    return kind + ("es" if kind.endswith("s") else "s")


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


#: Those kinds as a warning names them.
_CLUSTER_KINDS_TEXT = _listed(sorted(_plural(kind) for _, kind in PROPAGATABLE_CLUSTER_KINDS))


class KindStatus(StrEnum):
    PROPAGATABLE = "propagatable"
    UNSERVED = "unserved"
    CLUSTER_SCOPED = "cluster-scoped"
    HUB_ONLY = "hub-only"
    #: An empty apiVersion or kind, which Karmada's CRD takes and which names no kind.
    EMPTY = "empty"


#: (apiVersion, kind) -> what the hub knows of it.
KindLookup = Callable[[str, str], KindStatus]


class SelectorsServedReason(StrEnum):
    SERVED = "KindsServed"
    UNSERVED_KIND = "UnservedKind"
    UNPROPAGATABLE_KIND = "UnpropagatableKind"


@dataclass(frozen=True, slots=True)
class Unpropagatable:
    """A ``spec.resourceSelectors[index]`` whose kind cannot be propagated, and why."""

    index: int
    api_version: str
    kind: str
    status: KindStatus


def unpropagatable_selectors(policy: Mapping[str, Any], lookup: KindLookup) -> list[Unpropagatable]:
    """The resource selectors of ``policy`` naming a kind the hub cannot propagate, in order."""
    out: list[Unpropagatable] = []
    selectors = (policy.get("spec") or {}).get("resourceSelectors")
    if not isinstance(selectors, list):
        return out
    for index, selector in enumerate(selectors):
        if not isinstance(selector, Mapping):
            continue
        api_version, kind = selector.get("apiVersion"), selector.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            continue  # left to validation: both are required strings
        status = lookup(api_version, kind) if api_version and kind else KindStatus.EMPTY
        if status is not KindStatus.PROPAGATABLE:
            out.append(Unpropagatable(index, api_version, kind, status))
    return out


def unpropagatable_selector_warnings(policy: Mapping[str, Any], lookup: KindLookup) -> list[str]:
    """One warning per ``spec.resourceSelectors[i]`` whose kind cannot be propagated."""
    out: list[str] = []
    for found in unpropagatable_selectors(policy, lookup):
        where, status = f"spec.resourceSelectors[{found.index}]", found.status
        kind, api_version = found.kind, found.api_version
        if status is KindStatus.EMPTY:
            out.append(f"{where}: an empty apiVersion or kind names no kind, so this selector matches nothing")
        elif status is KindStatus.UNSERVED:
            out.append(
                f"{where}: the hub does not serve kind {kind} in {api_version}, so this selector matches "
                "nothing; check apiVersion and kind (kubectl api-resources lists what the hub serves)"
            )
        elif status is KindStatus.CLUSTER_SCOPED:
            out.append(
                f"{where}: {kind} ({api_version}) is cluster-scoped and gpufed propagates namespaced kinds "
                f"and, of the cluster-scoped ones, only {_CLUSTER_KINDS_TEXT}, so this selector matches nothing"
            )
        elif status is KindStatus.HUB_ONLY:
            out.append(
                f"{where}: {kind} ({api_version}) is part of the hub's own machinery and never propagates, "
                "so this selector matches nothing"
            )
    return out


def selectors_served_condition(policy: Mapping[str, Any], lookup: KindLookup) -> dict[str, str]:
    """The policy's ``ResourceSelectorsServed`` condition (without times): False, naming the kinds,
    while a selector names a kind the hub does not serve (reason ``UnservedKind``) or serves but
    cannot propagate (``UnpropagatableKind``); True otherwise."""
    found = unpropagatable_selectors(policy, lookup)
    if not found:
        return {
            "type": SELECTORS_SERVED, "status": "True", "reason": str(SelectorsServedReason.SERVED),
            "message": "every resource selector names a kind the hub propagates",
        }
    unserved = [f for f in found if f.status in (KindStatus.UNSERVED, KindStatus.EMPTY)]
    parts = [
        f"spec.resourceSelectors[{f.index}] names no kind (an empty apiVersion or kind)"
        if f.status is KindStatus.EMPTY
        else f"spec.resourceSelectors[{f.index}] {f.kind} ({f.api_version}) is {_WHY[f.status]}"
        for f in found
    ]
    message = "these selectors match nothing: " + "; ".join(parts)
    if any(f.status is KindStatus.UNSERVED for f in found):  # a CRD cannot help an empty selector
        message += " (a kind is served once its CustomResourceDefinition is applied; kubectl api-resources lists what the hub serves)"
    reason = SelectorsServedReason.UNSERVED_KIND if unserved else SelectorsServedReason.UNPROPAGATABLE_KIND
    return {"type": SELECTORS_SERVED, "status": "False", "reason": str(reason), "message": message}


_WHY: Mapping[KindStatus, str] = {
    KindStatus.UNSERVED: "not served by the hub",
    KindStatus.CLUSTER_SCOPED: f"cluster-scoped (gpufed propagates namespaced kinds, {_CLUSTER_KINDS_TEXT})",
    KindStatus.HUB_ONLY: "part of the hub's own machinery",
    KindStatus.PROPAGATABLE: "propagatable",
}
