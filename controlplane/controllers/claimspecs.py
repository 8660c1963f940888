"""The hub's ResourceClaimTemplates, ResourceClaims and DeviceClasses, as the detector reads them
to count a workload's DRA GPUs (:mod:`controlplane.apis.dra`).

A workload's replica requirements depend on objects beside it: the claim templates (and shared
claims) its pod templates name. :class:`ClaimSpecs` watches them and the DeviceClasses, and reads them
as :class:`~controlplane.apis.drareading.ClaimReader` does (the waste report reads its listings the same way); :meth:`ClaimSpecs.resolved`
gives the copy of a workload the interpreter reads (its claim templates of NVIDIA's GPU class
written as ``nvidia.com/gpu`` requests and a product selector; a ResourceClaim the pods name
directly is one set of devices they share, counted once per cluster: :meth:`ClaimSpecs.shared`,
and per role of a multi-role workload: :meth:`ClaimSpecs.roles_shared`; a request's DeviceClass, when the hub holds it, read for what its selectors pin, and those it
cannot read named by :meth:`ClaimSpecs.unread`), and a template or claim created, replaced or
deleted re-queues the bound workloads of its namespace that name claims (a DeviceClass: of every
namespace), so a Deployment applied
in the same ``kubectl apply`` as its template (either first) ends with the GPUs counted.

In: the controller context's informers. Out: workload copies; workload refs queued. No writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from controlplane.apis.dra import (
    CLAIM,
    DEVICE_CLASS,
    RESOURCE_API_VERSION,
    TEMPLATE,
    claim_spec_of,
    references_claims,
)
from controlplane.apis.drareading import ClaimReader, class_spec
from controlplane.apis.views import BindingView, ObjectView
from controlplane.controllers.context import INDEX_NAMESPACE, ControllerContext
from controlplane.controllers.informing import Informer
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.base import PodTemplateKind
from controlplane.objectclient import WatchEventType

#: Called with a binding whose workload may count differently now.
Requeue = Callable[[dict[str, Any]], Awaitable[None]]


class ClaimSpecs(ClaimReader):
    """The claim specs the hub holds, by kind, namespace and name, read as
    :class:`~controlplane.apis.drareading.ClaimReader` reads them."""

    def __init__(self, ctx: ControllerContext, requeue: Requeue) -> None:
        self.ctx = ctx
        self._requeue = requeue
        self._informers: dict[str, Informer] = {}
        for kind in (TEMPLATE, CLAIM, DEVICE_CLASS):
            rt = ctx.watch_kind(RESOURCE_API_VERSION, kind, self._on_claim)
            if rt is not None:
                self._informers[kind] = ctx.informer(rt)

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        """The spec of the hub's DeviceClass ``name``; None when the hub holds none."""
        informer = self._informers.get(DEVICE_CLASS)
        return class_spec(informer.get(None, name) if informer is not None else None)

    def spec(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The claim spec of a template (its ``spec.spec``) or a claim (its ``spec``); None when absent."""
        informer = self._informers.get(kind)
        return claim_spec_of(kind, informer.get(namespace, name) if informer is not None else None)

    def roles_shared(self, workload: dict[str, Any]) -> dict[str, dict[str, int]]:
        """The GPUs of the ResourceClaims each role of a multi-role ``workload`` (JobSet, Kubeflow's
        jobs, RayCluster: its interpreter's pod sets) names directly, for the roles that name any."""
        if not references_claims(workload):
            return {}
        interpreter = interpreter_for(str(workload.get("apiVersion")), str(workload.get("kind")))
        if not isinstance(interpreter, PodTemplateKind):
            return {}
        roles = [(name, parent.get(key)) for name, (parent, key) in interpreter.pod_set_slots(workload)]
        return self.shared_by_role(workload, [(name, template) for name, template in roles if isinstance(template, Mapping)])

    async def _on_claim(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec"):
            return
        namespace = ObjectView(obj).namespace
        # A DeviceClass (cluster-scoped) may change what a claim of any namespace counts.
        bindings = self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace) if namespace else self.ctx.bindings.items()
        for binding in bindings:
            resource = BindingView(binding).resource
            informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
            workload = (
                informer.get(str(resource.get("namespace") or ""), str(resource.get("name"))) if informer is not None else None
            )
            if workload is not None and references_claims(workload):
                await self._requeue(binding)
