"""What the hub says when a member reports a workload's pods that cannot start or be created.

The member agent reports, per Work manifest, pods that were placed but do not start (the
kubelet's reason and message: ``CreateContainerConfigError: configmap "app-config" not found``)
pods its API refused to create (``FailedCreate``: a missing ServiceAccount or PriorityClass,
as kube's admission plugins word it), and pods its scheduler leaves unplaced for storage it lacks
(``Unschedulable``: ``persistentvolumeclaim "data" not found``, or ``pod has unbound immediate
PersistentVolumeClaims`` with the ``claim`` whose StorageClass is missing). The status controller turns each new report into a
``PodsNotStarting`` Warning Event on the hub workload: the member's words, and, for an object
the member lacks (:func:`missing_dependency`), how it gets there. A ConfigMap, Secret or
ServiceAccount or PersistentVolumeClaim goes with a policy's selector or ``propagateDeps``; a
PriorityClass or StorageClass is cluster-scoped and goes with a ClusterPropagationPolicy. Propagating cannot help when the hub
lacks the object too: the hint then says to create it first.

In: a Work manifest's ``notStarting`` summary. Out: strings and (kind, name) pairs. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.pods import missing_claim


@dataclass(frozen=True, slots=True)
class MissingDependency:
    """An object a member's message says it lacks."""

    api_version: str
    kind: str
    name: str

    @property
    def cluster_scoped(self) -> bool:
        return self.kind in _CLUSTER_SCOPED

    def propagation(self, *, alternatives: str = ", or") -> str:
        """How the object gets to a member: the policy that can select it (and ``propagateDeps``
        for a namespaced one, joined by ``alternatives``)."""
        if self.cluster_scoped:
            return "select it in a ClusterPropagationPolicy"
        return f"select it in a policy{alternatives} set propagateDeps: true in the workload's policy"


#: The kubelet's message for an object a container's configuration reads and the member lacks.
_MISSING_OBJECT: Final = re.compile(r'^(configmap|secret) "([^"]+)" not found$')
#: The member API's refusal of a pod whose ServiceAccount it lacks (kube's ServiceAccount admission).
_MISSING_ACCOUNT: Final = re.compile(r'error looking up service account [^:]+: serviceaccount "([^"]+)" not found$')
#: The member API's refusal of a pod whose PriorityClass it lacks (kube's Priority admission).
_MISSING_PRIORITY_CLASS: Final = re.compile(r"no PriorityClass with name (\S+) was found$")
#: The member API's NotFound for a StorageClass (the PV controller's ``ProvisioningFailed`` words).
_MISSING_STORAGE_CLASS: Final = re.compile(r'^storageclass(?:es)?\.storage\.k8s\.io "([^"]+)" not found$')
_CLUSTER_SCOPED: Final = frozenset({"PriorityClass", "StorageClass"})
#: The reason a controller gives for pods the member's API refused to create.
FAILED_CREATE: Final = "FailedCreate"
#: The reason kube-scheduler gives for pods it cannot place (here: for want of storage).
UNSCHEDULABLE: Final = "Unschedulable"


def reason_and_message(stuck: Any) -> tuple[str, str] | None:
    """The (reason, message) of a ``notStarting`` summary, None when there is none."""
    return (str(stuck.get("reason") or ""), str(stuck.get("message") or "")) if isinstance(stuck, Mapping) else None


def _claim_trouble(stuck: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (claim, message) of the unbound claim a ``notStarting`` summary names, or None."""
    claim = stuck.get("claim")
    if not isinstance(claim, Mapping) or not claim.get("name"):
        return None
    return str(claim["name"]), str(claim.get("message") or "")


def what_is_said(stuck: Any) -> tuple[str, str, tuple[str, str] | None] | None:
    """All a ``notStarting`` summary says (reason, message, the unbound claim's trouble): a
    change in any of it is news. None when there is none."""
    said = reason_and_message(stuck)
    return (*said, _claim_trouble(stuck)) if said is not None else None


def dependency_of(stuck: Mapping[str, Any]) -> MissingDependency | None:
    """The object a ``notStarting`` summary says the member lacks: its unbound claim's
    StorageClass, else what its message names (:func:`missing_dependency`)."""
    claim = _claim_trouble(stuck)
    if claim is not None and (storage_class := _MISSING_STORAGE_CLASS.match(claim[1])):
        return MissingDependency("storage.k8s.io/v1", "StorageClass", storage_class.group(1))
    return missing_dependency(str(stuck.get("message") or ""))


def missing_dependency(message: str) -> MissingDependency | None:
    """The ConfigMap, Secret, ServiceAccount, PriorityClass or PersistentVolumeClaim a member's
    message says it lacks (the kubelet's ``configmap "x" not found``, the API's refusal of a pod
    whose ServiceAccount or PriorityClass is missing, the scheduler's ``persistentvolumeclaim "x"
    not found``), or None."""
    missing = _MISSING_OBJECT.match(message)
    if missing:
        return MissingDependency("v1", "ConfigMap" if missing.group(1) == "configmap" else "Secret", missing.group(2))
    account = _MISSING_ACCOUNT.search(message)
    if account:
        return MissingDependency("v1", "ServiceAccount", account.group(1))
    priority_class = _MISSING_PRIORITY_CLASS.search(message)
    if priority_class:
        return MissingDependency("scheduling.k8s.io/v1", "PriorityClass", priority_class.group(1))
    claim = missing_claim(message)
    if claim is not None:
        return MissingDependency("v1", "PersistentVolumeClaim", claim)
    return None


def pods_not_starting_message(cluster: str, stuck: Mapping[str, Any], *, on_hub: bool = True) -> str:
    """``cluster onprem-a100: 2 pod(s) cannot start: CreateContainerConfigError: configmap
    "app-config" not found`` (``cannot be created: FailedCreate: ...`` for pods the member's API
    refused, ``cannot be scheduled: Unschedulable: ...`` for pods waiting for storage, with
    ``; PersistentVolumeClaim data: <why it is unbound>``), and for an object the member does not
    have (:func:`dependency_of`) how it gets there; ``on_hub``: whether the hub has it to send."""
    reason, message = reason_and_message(stuck) or ("", "")
    # The member's API refused to create them: there is no pod to start; or none is placed yet.
    what = {FAILED_CREATE: "cannot be created", UNSCHEDULABLE: "cannot be scheduled"}.get(reason, "cannot start")
    text = f"cluster {cluster}: {stuck.get('pods')} pod(s) {what}: {reason}"
    if message:
        text += f": {message}"
    claim = _claim_trouble(stuck)
    if claim is not None:
        text += f"; PersistentVolumeClaim {claim[0]}: {claim[1]}"
    dependency = dependency_of(stuck)
    if dependency is None:
        return text
    named = f"{dependency.kind} {dependency.name}"
    if on_hub:
        return text + f" (propagate {named} to the cluster: {dependency.propagation()})"
    where = "on the hub" if dependency.cluster_scoped else "in the workload's namespace"
    return text + f" ({named} is not on the hub either: create it {where}, then {dependency.propagation(alternatives=' or')})"
