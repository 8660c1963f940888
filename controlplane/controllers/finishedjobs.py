"""The hub's ttl-after-finished controller: a finished Job deleted ``ttlSecondsAfterFinished`` later.

A member's copy of a Job never carries the TTL (:mod:`controlplane.interpreter.pruning`): the
member's own ttl-after-finished controller would delete it, the agent's next resync would create
it again, and it would run again (Karmada issue #2197). The TTL is honoured here instead, as
Karmada recommends running kube's controller on its control plane: a hub Job whose status, folded
from its members', says it finished (its ``Complete`` or ``Failed`` condition True, stamped with
the hub's time: :func:`~controlplane.interpreter.stamp_finish`) is deleted
``ttlSecondsAfterFinished`` after that condition's ``lastTransitionTime``
(:func:`~controlplane.interpreter.job.ttl_expiry`). The deletion then goes as any hub deletion
does (:mod:`controlplane.controllers.deleting`): the binding and the Works first, and each agent
deletes the member's Job and, with it, its pods.

In: the hub's Jobs (informer). Out: their deletion, with a uid precondition (a Job created anew
under the same name is not deleted for its predecessor). Level-based and restart-safe: the due
time is read from the stored status each time; a Job not due yet is looked at again when it is.
"""

from __future__ import annotations

import logging
from typing import Any

from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting
from controlplane.interpreter.job import ttl_expiry
from controlplane.objectclient import Preconditions, WatchEventType, errors

log = logging.getLogger(__name__)

JOB_API_VERSION = "batch/v1"
JOB_KIND = "Job"


class FinishedJobsController(KeyedController[tuple[str, str]]):
    """Deletes finished hub Jobs once their TTL runs out (keys: namespace and name)."""

    name = "ttl-after-finished"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(JOB_API_VERSION, JOB_KIND, self._on_job)

    async def _on_job(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED and ttl_expiry(obj) is not None and not is_deleting(obj):
            view = ObjectView(obj)
            await self.loop.add((view.namespace, view.name))

    async def reconcile(self, key: tuple[str, str]) -> float | None:
        """Delete the Job when its TTL ran out; else the seconds left (None: nothing to wait for)."""
        rt = self.rt
        if rt is None:
            return None
        namespace, name = key
        job = await self.ctx.get(rt, namespace, name)
        if job is None or is_deleting(job):
            return None
        expiry = ttl_expiry(job)
        if expiry is None:
            return None  # no TTL, or not finished: a later change queues it again
        left = (expiry - self.ctx.now()).total_seconds()
        if left > 0:
            return left
        view = ObjectView(job)
        try:
            await self.ctx.objects.delete(
                rt, namespace=namespace, name=name, preconditions=Preconditions(uid=view.uid),
                propagation_policy="Foreground",
            )
        except errors.NotFound:
            return None
        log.info("job %s/%s deleted: finished, and its ttlSecondsAfterFinished (%ss) passed",
                 namespace, name, view.spec.get("ttlSecondsAfterFinished"))
        return None
