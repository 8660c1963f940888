"""What the hub says when a member reports a workload's pods that cannot start or be created.

The member agent reports, per Work manifest, pods that were placed but do not start (the
kubelet's reason and message: ``CreateContainerConfigError: configmap "app-config" not found``)
and pods its API refused to create (``FailedCreate``: a missing ServiceAccount or PriorityClass,
as kube's admission plugins word it). The status controller turns each new report into a
``PodsNotStarting`` Warning Event on the hub workload: the member's words, and, for an object
the member lacks (:func:`missing_dependency`), how it gets there. A ConfigMap, Secret or
ServiceAccount goes with a policy's selector or ``propagateDeps``; a PriorityClass is
cluster-scoped and goes with a ClusterPropagationPolicy. Propagating cannot help when the hub
lacks the object too: the hint then says to create it first.

In: a Work manifest's ``notStarting`` summary. Out: strings and (kind, name) pairs. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


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
_CLUSTER_SCOPED: Final = frozenset({"PriorityClass"})
#: The reason a controller gives for pods the member's API refused to create.
FAILED_CREATE: Final = "FailedCreate"


def reason_and_message(stuck: Any) -> tuple[str, str] | None:
    """The (reason, message) of a ``notStarting`` summary, None when there is none."""
    return (str(stuck.get("reason") or ""), str(stuck.get("message") or "")) if isinstance(stuck, Mapping) else None


def missing_dependency(message: str) -> MissingDependency | None:
    """The ConfigMap, Secret, ServiceAccount or PriorityClass a member's message says it lacks
    (the kubelet's ``configmap "x" not found``, the API's refusal of a pod whose ServiceAccount
    or PriorityClass is missing), or None."""
    missing = _MISSING_OBJECT.match(message)
    if missing:
        return MissingDependency("v1", "ConfigMap" if missing.group(1) == "configmap" else "Secret", missing.group(2))
    account = _MISSING_ACCOUNT.search(message)
    if account:
        return MissingDependency("v1", "ServiceAccount", account.group(1))
    priority_class = _MISSING_PRIORITY_CLASS.search(message)
    if priority_class:
        return MissingDependency("scheduling.k8s.io/v1", "PriorityClass", priority_class.group(1))
    return None


def pods_not_starting_message(cluster: str, stuck: Mapping[str, Any], *, on_hub: bool = True) -> str:
    """``cluster onprem-a100: 2 pod(s) cannot start: CreateContainerConfigError: configmap
    "app-config" not found`` (``cannot be created: FailedCreate: ...`` for pods the member's API
    refused), and for an object the member does not have (:func:`missing_dependency`) how it
    gets there; ``on_hub``: whether the hub has it to send."""
    reason, message = reason_and_message(stuck) or ("", "")
    # The member's API refused to create them: there is no pod to start.
    what = "cannot be created" if reason == FAILED_CREATE else "cannot start"
    text = f"cluster {cluster}: {stuck.get('pods')} pod(s) {what}: {reason}"
    if message:
        text += f": {message}"
    dependency = missing_dependency(message)
    if dependency is None:
        return text
    named = f"{dependency.kind} {dependency.name}"
    if on_hub:
        return text + f" (propagate {named} to the cluster: {dependency.propagation()})"
    where = "on the hub" if dependency.cluster_scoped else "in the workload's namespace"
    return text + f" ({named} is not on the hub either: create it {where}, then {dependency.propagation(alternatives=' or')})"
