"""Why a workload's pods do not run in the member, as the Work status says it.

A placed workload's pods may wait for the member's scheduler (``PodScheduled`` False:
:func:`unschedulable_summary`), be placed but unable to start (a container waiting for a reason
that does not pass by itself, e.g. ``CreateContainerConfigError``: :func:`not_starting_summary`),
or never be created because the member's API refuses them (a Deployment's or ReplicaSet's
``ReplicaFailure`` condition: :func:`failed_create_summary`). A pod the member's scheduler
leaves unplaced for want of storage -- its PersistentVolumeClaim does not exist, or is not bound
because the StorageClass it names is missing (:class:`~member_agent.claims.ClaimStates` finds
which) -- waits for an object, not for room: :func:`storage_wait_summary` reports it with the
pods that cannot start, and :func:`unschedulable_summary` leaves it out, so the hub neither moves
it elsewhere nor counts it as capacity trouble. :class:`PendingPods` keeps, from the agent's pod
cache, the few pods these look at.

In: a member workload object and pods (as the agent's cache trims them). Out: small summaries for
``manifestStatuses[]``. Pure, apart from :class:`PendingPods`' own bookkeeping.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from controlplane.apis.pods import (
    missing_claim,
    pod_claims,
    stuck_container,
    unschedulable_condition,
    waits_for_unbound_claims,
)
from controlplane.apis.untyped import as_int


def _pod_belongs_to(pod: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    w_meta = workload.get("metadata") or {}
    kind, name, uid = workload.get("kind"), w_meta.get("name"), w_meta.get("uid")
    if kind == "Pod":
        return bool(meta.get("name") == name)
    template_hash = (meta.get("labels") or {}).get("pod-template-hash")
    for ref in meta.get("ownerReferences") or []:
        if uid and ref.get("uid") == uid:
            return True
        if ref.get("kind") == kind and ref.get("name") == name:
            return True
        if (
            kind == "Deployment"
            and ref.get("kind") == "ReplicaSet"
            and template_hash
            and ref.get("name") == f"{name}-{template_hash}"
        ):
            return True
    return False


def _pods_of(workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """The pods among ``pods`` that ``workload`` owns (directly or through its ReplicaSets)."""
    namespace = (workload.get("metadata") or {}).get("namespace")
    for pod in pods:
        if (pod.get("metadata") or {}).get("namespace") == namespace and _pod_belongs_to(pod, workload):
            yield pod


#: Why a claim the member has is not bound, as :class:`~member_agent.claims.ClaimStates` found it
#: (``{"name": "data", "storageClassName": "fast", "message": 'storageclass.storage.k8s.io "fast"
#: not found'}``), by (namespace, claim name); None when nothing known keeps it unbound.
ClaimTrouble = Callable[[str, str], Mapping[str, Any] | None]


def no_claim_trouble(namespace: str, name: str) -> Mapping[str, Any] | None:
    return None


def claims_to_check(pods: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, claim) of the claims of the pods the member's scheduler leaves unplaced because
    a claim is not bound: the only claims a status pass asks about."""
    wanted: set[tuple[str, str]] = set()
    for pod in pods:
        cond = unschedulable_condition(pod)
        if cond is not None and waits_for_unbound_claims(str(cond.get("message") or "")):
            namespace = str((pod.get("metadata") or {}).get("namespace") or "")
            wanted.update((namespace, name) for name in pod_claims(pod.get("spec") or {}))
    return wanted


def _storage_wait(
    pod: Mapping[str, Any], claims: ClaimTrouble
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None] | None:
    """The PodScheduled=False condition of a pod that waits for storage the member lacks (its
    claim is missing, or a claim is unbound for a known trouble, which comes along), or None."""
    cond = unschedulable_condition(pod)
    if cond is None:
        return None
    message = str(cond.get("message") or "")
    if missing_claim(message) is not None:
        return cond, None
    if waits_for_unbound_claims(message):
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        for name in pod_claims(pod.get("spec") or {}):
            trouble = claims(namespace, name)
            if trouble is not None:
                return cond, trouble
    return None


def unschedulable_for_room(pod: Mapping[str, Any], claims: ClaimTrouble = no_claim_trouble) -> Mapping[str, Any] | None:
    """The PodScheduled=False condition of a pod the member's scheduler could not place for want
    of room (:func:`unschedulable_condition`), or None; a pod that waits for storage the member
    lacks is None too (:func:`storage_wait_summary` reports it). The one test of what the Work
    status calls ``unschedulable`` and the capacity report counts in ``unschedulableWorkloads``."""
    cond = unschedulable_condition(pod)
    if cond is None or _storage_wait(pod, claims) is not None:
        return None
    return cond


def unschedulable_summary(
    workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *, claims: ClaimTrouble = no_claim_trouble
) -> dict[str, Any] | None:
    """How many of the workload's pods the member scheduler could not place for want of room, and
    why (the most common PodScheduled=False message): :func:`unschedulable_for_room`. None when
    there are none."""
    messages: Counter[str] = Counter()
    for pod in _pods_of(workload, pods):
        cond = unschedulable_for_room(pod, claims)
        if cond is not None:
            messages[str(cond.get("message") or cond.get("reason") or "")] += 1
    if not messages:
        return None
    return {"pods": messages.total(), "message": messages.most_common(1)[0][0]}


def not_starting_summary(
    workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """How many of the workload's pods were placed but cannot start, and why (the most common
    waiting reason and message, e.g. ``CreateContainerConfigError``: ``configmap "app-config"
    not found``). None when no pod waits so."""
    why: Counter[tuple[str, str]] = Counter()
    for pod in _pods_of(workload, pods):
        waiting = stuck_container(pod)
        if waiting is not None:
            why[(str(waiting.get("reason") or ""), str(waiting.get("message") or ""))] += 1
    if not why:
        return None
    (reason, message), _ = why.most_common(1)[0]
    out: dict[str, Any] = {"pods": sum(why.values()), "reason": reason}
    if message:
        out["message"] = message
    return out


def storage_wait_summary(
    workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], *, claims: ClaimTrouble
) -> dict[str, Any] | None:
    """How many of the workload's pods the member's scheduler leaves unplaced for storage it
    lacks, and why: the condition's reason (``Unschedulable``) and message (``0/3 nodes are
    available: persistentvolumeclaim "data" not found. ...``), and for a claim that exists but is
    not bound, the ``claim`` and its trouble (``claims``). None when no pod waits so."""
    why: Counter[str] = Counter()
    for pod in _pods_of(workload, pods):
        waiting = _storage_wait(pod, claims)
        if waiting is not None:
            cond, trouble = waiting
            entry: dict[str, Any] = {"reason": str(cond.get("reason") or ""), "message": str(cond.get("message") or "")}
            if trouble is not None:
                entry["claim"] = dict(trouble)
            why[json.dumps(entry, sort_keys=True)] += 1
    if not why:
        return None
    common, _ = why.most_common(1)[0]
    return {"pods": why.total(), **json.loads(common)}


def failed_create_summary(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pods a Deployment or ReplicaSet is missing because the member's API refuses to create
    them (its condition ``ReplicaFailure`` True, e.g. ``pods "web-7f9c4-" is forbidden: error
    looking up service account ml/runner: ...``): how many, reason ``FailedCreate`` and the
    condition's message. None when nothing was refused or no pod is missing."""
    status = workload.get("status") or {}
    failure = next(
        (
            cond for cond in status.get("conditions") or []
            if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True"
        ),
        None,
    )
    if failure is None:
        return None
    spec = workload.get("spec") or {}
    missing = as_int(spec.get("replicas"), 1) - as_int(status.get("replicas"))
    if missing <= 0:
        return None
    out: dict[str, Any] = {"pods": missing, "reason": str(failure.get("reason") or "FailedCreate")}
    if failure.get("message"):
        out["message"] = str(failure["message"])
    return out


class PendingPods:
    """The pods that do not run yet and say why: those the member's scheduler has not placed
    (no ``spec.nodeName``) and those placed whose containers cannot start by themselves
    (:func:`stuck_container`), by namespace: all :func:`unschedulable_summary` and
    :func:`not_starting_summary` look at. Kept from the pod cache's changes, so a status pass
    reads the few such pods of a Work's namespaces instead of every pod of the cluster (with
    40,000 pods and hundreds of Works, a status round was seconds of the agent's loop)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Mapping[str, Any]]] = {}

    def changed(self, key: str, pod: Mapping[str, Any] | None) -> None:
        """Record the pod cache's entry for ``key`` (``namespace/name``) as it is now (None: gone)."""
        namespace = key.partition("/")[0]
        if pod is not None and (not (pod.get("spec") or {}).get("nodeName") or stuck_container(pod) is not None):
            self._by_namespace.setdefault(namespace, {})[key] = pod
            return
        held = self._by_namespace.get(namespace)
        if held is not None and held.pop(key, None) is not None and not held:
            del self._by_namespace[namespace]

    def clear(self) -> None:
        """Forget every pod (a new pod cache starts empty and reports each pod it lists)."""
        self._by_namespace.clear()

    def __call__(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return tuple((self._by_namespace.get(namespace) or {}).values())
