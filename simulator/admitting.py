"""kube-apiserver's ServiceAccount and Priority admission plugins, for a simulated member's pods.

A real member refuses to create a pod whose ServiceAccount does not exist in its namespace:
403 Forbidden ``pods "web-7f9c4-" is forbidden: error looking up service account
ml/runner: serviceaccount "runner" not found``. The workload controllers then report the
refusal on their object (:mod:`simulator.controlling`), and no pod runs. A pod that names
no account gets ``default`` (written into ``spec.serviceAccountName``, as kube's plugin
does), which kube-controller-manager creates in every namespace (the hub's
:class:`~controlplane.controllers.serviceaccounts.ServiceAccountsController`, which a
simulated member runs too); as kube's plugin, the lookup of ``default`` is retried for a
moment, so a pod created right after its namespace does not lose that race. Mirror pods
(static pods of a kubelet) are not checked.

The refusal names the pod by its ``generateName`` when it has one: kube's controllers let
the API server draw a pod's name, so kube names it by the prefix; the simulated controllers
draw it themselves and send both (:func:`simulator.controllers.base.new_pod`).

Likewise a pod whose ``priorityClassName`` names a PriorityClass the member lacks: 403
``pods "web-7f9c4-" is forbidden: no PriorityClass with name high was found`` (kube's Priority
plugin). A pod that passes gets ``spec.priority`` (and ``preemptionPolicy``) from its class; one
that names none gets the global default class's, or priority 0 when there is none. A pod that
sets ``spec.priority`` itself to another value is refused, as kube refuses it. The classes
``system-node-critical`` and ``system-cluster-critical`` exist in every member
(:data:`SYSTEM_PRIORITY_CLASSES`, created with the member's namespaces).

In: the member's object client (to read ServiceAccounts and PriorityClasses). Out:
:class:`ServiceAccountAdmission` and :class:`PriorityAdmission`, each a
:data:`~controlplane.apiserver.admission.CheckCreate`, which :func:`admit_pods` gives the
member's ``ObjectStore`` (``check_creates``), so that every pod create through it (the API's ``POST``, a
server-side apply that creates, the simulated controllers') passes the checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from controlplane.apis.kube.validate_groups import SYSTEM_PRIORITY_CLASSES, global_default_priority_class
from controlplane.interpreter.dependencies import DEFAULT_SERVICE_ACCOUNT
from controlplane.objectclient import ObjectClient, ResourceType, errors

#: The annotation that marks a kubelet's mirror pod (kube's ``MirrorPodAnnotationKey``).
MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"
#: Lookups of ``default`` before the pod is refused (kube's plugin tries ten times).
_DEFAULT_ACCOUNT_ATTEMPTS: Final = 10
_RETRY_SECONDS: Final = 0.15


#: kube's ``PreemptLowerPriority``: a pod's preemption policy when its class sets none.
_PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
_SYSTEM_CLASS_DESCRIPTIONS: Final = {
    "system-node-critical": "Used for system critical pods that must not be moved from their current node.",
    "system-cluster-critical": (
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
    ),
}


def system_priority_classes() -> list[dict[str, Any]]:
    """The PriorityClasses kube-apiserver creates at start-up, in every cluster."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "description": _SYSTEM_CLASS_DESCRIPTIONS[name], "preemptionPolicy": _PREEMPT_LOWER_PRIORITY,
        }
        for name, value in SYSTEM_PRIORITY_CLASSES.items()
    ]


def _pod_name(pod: dict[str, Any]) -> str:
    """How kube names a pod it refuses: by ``generateName`` when it has one (see the module doc)."""
    meta = pod.get("metadata") or {}
    return str(meta.get("generateName") or meta.get("name") or "")


def _forbidden(pod: dict[str, Any], why: str) -> errors.Forbidden:
    """kube's ``admission.NewForbidden`` for a pod: ``pods "<name>" is forbidden: <why>``."""
    name = _pod_name(pod)
    return errors.Forbidden(f'pods "{name}" is forbidden: {why}', target=errors.Target(name=name, kind="pods"))


def _account_not_found(namespace: str, account: str) -> str:
    """Why kube refuses a pod whose ServiceAccount ``namespace/account`` does not exist."""
    return f'error looking up service account {namespace}/{account}: serviceaccount "{account}" not found'


def _admitted_pod(rt: ResourceType, obj: dict[str, Any]) -> bool:
    """A pod the plugins look at: not a kubelet's mirror pod."""
    if rt.group or rt.kind != "Pod":
        return False
    return MIRROR_POD_ANNOTATION not in (obj["metadata"].get("annotations") or {})


class ServiceAccountAdmission:
    """Refuses (403) a pod whose ServiceAccount is missing; awaited by the object layer on creates."""

    def __init__(self, objects: ObjectClient, *, retry_seconds: float = _RETRY_SECONDS) -> None:
        self._objects = objects
        self._accounts_rt = objects.registry.require("v1", "ServiceAccount")
        self._retry_seconds = retry_seconds

    async def __call__(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if not _admitted_pod(rt, obj):
            return
        meta = obj["metadata"]
        spec = obj.setdefault("spec", {})
        account = str(spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT)
        spec["serviceAccountName"] = account
        namespace = str(meta.get("namespace") or "default")
        attempts = _DEFAULT_ACCOUNT_ATTEMPTS if account == DEFAULT_SERVICE_ACCOUNT else 1
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self._retry_seconds)
            try:
                await self._objects.get(self._accounts_rt, namespace=namespace, name=account)
            except errors.NotFound:
                continue
            return
        raise _forbidden(obj, _account_not_found(namespace, account))


class PriorityAdmission:
    """Refuses (403) a pod whose PriorityClass is missing and sets its priority from its class;
    awaited by the object layer on creates."""

    def __init__(self, objects: ObjectClient) -> None:
        self._objects = objects
        self._classes_rt = objects.registry.require("scheduling.k8s.io/v1", "PriorityClass")

    async def __call__(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if not _admitted_pod(rt, obj):
            return
        spec = obj.setdefault("spec", {})
        name = str(spec.get("priorityClassName") or "")
        if name:
            try:
                found: dict[str, Any] | None = await self._objects.get(self._classes_rt, name=name)
            except errors.NotFound:
                raise _forbidden(obj, f"no PriorityClass with name {name} was found") from None
        else:
            found = await self._default_class()
            if found is not None:
                spec["priorityClassName"] = found["metadata"]["name"]
        priority = int(found.get("value") or 0) if found is not None else 0
        given = spec.get("priority")
        if given is not None and given != priority:
            raise _forbidden(obj, (
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {priority} from the given PriorityClass name"
            ))
        spec["priority"] = priority
        spec["preemptionPolicy"] = (found or {}).get("preemptionPolicy") or _PREEMPT_LOWER_PRIORITY

    async def _default_class(self) -> dict[str, Any] | None:
        """The class marked ``globalDefault`` (the lowest value if several are), or None."""
        listed = await self._objects.list(self._classes_rt)
        found = global_default_priority_class(listed.items)
        return None if found is None else dict(found)



#: An admission check the object layer awaits on every create (its ``CheckCreate``).
Check = Callable[[ResourceType, dict[str, Any]], Awaitable[None]]


def admit_pods(objects: ObjectClient, check_creates: Callable[[Check], None]) -> None:
    """Give a member's store (its ``check_creates``) the admission plugins of the kinds it
    serves, in kube's order."""
    if objects.registry.for_kind("v1", "ServiceAccount") is not None:
        check_creates(ServiceAccountAdmission(objects))
    if objects.registry.for_kind("scheduling.k8s.io/v1", "PriorityClass") is not None:
        check_creates(PriorityAdmission(objects))
