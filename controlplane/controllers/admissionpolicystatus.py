"""ValidatingAdmissionPolicy status: each policy's ``status.typeChecking`` and ``observedGeneration``.

As kube-controller-manager's ``validatingadmissionpolicy-status`` controller: a policy whose
``metadata.generation`` is newer than its ``status.observedGeneration`` (a new policy, a spec
change) has its validations' expressions type-checked against the schemas of the kinds it
matches (:mod:`controlplane.apis.kube.policytypechecking`), and its status written through the
``status`` subresource as kube's apply writes it: ``observedGeneration`` the generation checked,
``typeChecking.expressionWarnings`` the warnings (``typeChecking: {}`` when there are none),
the rest of the status kept. The warnings only inform: the policy is enforced whatever they say.

The kinds and their schemas come from the composition root (the hub's registry and served
OpenAPI), as kube's come from its RESTMapper and schema resolver; checking runs off the event
loop. A policy already checked at its generation is not checked again (as kube, a CRD's schema
changing later does not re-check the policies over it until their next change).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controlplane.apis.kube.policytypechecking import KindsFor, SchemaFor, expression_warnings
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)

#: kube's controller name, its status writes' field manager.
CONTROLLER_NAME = "validatingadmissionpolicy-status"


class AdmissionPolicyStatusController:
    """Keeps the type-checking status of the ValidatingAdmissionPolicies of ``objects``."""

    def __init__(
        self, objects: ObjectClient, *, kinds_for: KindsFor, schema_for: SchemaFor,
        workqueue_metrics: WorkqueueMetrics | None = None,
    ) -> None:
        self._objects = objects
        self._kinds_for, self._schema_for = kinds_for, schema_for
        self._rt = objects.registry.require("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
        self.policies = Informer(objects, self._rt)
        self._loop: ReconcileLoop[str] = ReconcileLoop(CONTROLLER_NAME, self.reconcile, workers=1, metrics=workqueue_metrics)
        self.policies.add_handler(self._on_policy)

    async def _on_policy(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            await self._loop.add(str(obj["metadata"]["name"]))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.policies.run())
            group.create_task(self._loop.run())

    async def reconcile(self, name: str) -> None:
        policy = self.policies.get(None, name)
        if policy is None:
            return
        generation = int(policy["metadata"].get("generation") or 0)
        status = policy.get("status") or {}
        if generation <= int(status.get("observedGeneration") or 0):
            return
        warnings = await asyncio.to_thread(expression_warnings, policy, self._kinds_for, self._schema_for)
        checking: dict[str, Any] = {"expressionWarnings": warnings} if warnings else {}
        written = {**status, "observedGeneration": generation, "typeChecking": checking}
        with contextlib.suppress(errors.NotFound):  # deleted meanwhile; a Conflict is retried by the loop
            await self._objects.update_status(self._rt, {**policy, "status": written}, field_manager=CONTROLLER_NAME)
            log.info("ValidatingAdmissionPolicy %s type-checked at generation %d: %d warning(s)", name, generation, len(warnings))
