"""kube-apiserver's ServiceAccount admission plugin, for a simulated member's pods.

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

In: the member's object client (to read ServiceAccounts). Out: :class:`ServiceAccountAdmission`,
a :data:`~controlplane.apiserver.admission.CheckCreate` that the member's composition root
gives its ``ObjectStore`` (``check_creates``), so that every pod create through it (the
API's ``POST``, a server-side apply that creates, the simulated controllers') passes the check.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from controlplane.interpreter.dependencies import DEFAULT_SERVICE_ACCOUNT
from controlplane.objectclient import ObjectClient, ResourceType, errors

#: The annotation that marks a kubelet's mirror pod (kube's ``MirrorPodAnnotationKey``).
MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"
#: Lookups of ``default`` before the pod is refused (kube's plugin tries ten times).
_DEFAULT_ACCOUNT_ATTEMPTS: Final = 10
_RETRY_SECONDS: Final = 0.15


def missing_account_message(pod: dict[str, Any], namespace: str, account: str) -> str:
    """kube's refusal of ``pod`` whose ServiceAccount ``namespace/account`` does not exist."""
    meta = pod.get("metadata") or {}
    name = meta.get("generateName") or meta.get("name") or ""
    return (
        f'pods "{name}" is forbidden: error looking up service account {namespace}/{account}: '
        f'serviceaccount "{account}" not found'
    )


class ServiceAccountAdmission:
    """Refuses (403) a pod whose ServiceAccount is missing; awaited by the object layer on creates."""

    def __init__(self, objects: ObjectClient, *, retry_seconds: float = _RETRY_SECONDS) -> None:
        self._objects = objects
        self._accounts_rt = objects.registry.require("v1", "ServiceAccount")
        self._retry_seconds = retry_seconds

    async def __call__(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.group or rt.kind != "Pod":
            return
        meta = obj["metadata"]
        if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}):
            return
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
        name = str(meta.get("generateName") or meta.get("name") or "")
        raise errors.Forbidden(
            missing_account_message(obj, namespace, account),
            target=errors.Target(name=name, kind="pods"),
        )

