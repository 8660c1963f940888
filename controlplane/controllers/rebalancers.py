"""Karmada's WorkloadRebalancer: a fresh placement of the listed workloads, on request.

In: ``apps.karmada.io/v1alpha1`` WorkloadRebalancers (informer) and the ResourceBindings of the
workloads they list. Out: each found binding's ``spec.rescheduleTriggeredAt`` set to now (the
scheduler then places it afresh, as if it ran nowhere, once: see
:func:`~controlplane.apis.apps_karmada_v1alpha1.requested_after_last_decision`), the
rebalancer's ``status.observedWorkloads`` (Successful, or Failed with
``ReferencedBindingNotFound``), ``observedGeneration`` and ``finishTime``, and its deletion
``spec.ttlSecondsAfterFinished`` after ``finishTime``. A custom kind's workload is found in any
version its CRD serves (its binding names the storage one), as a policy's selector finds it.

As in Karmada, a new generation (workloads added to the list) triggers the workloads that did
not succeed yet; those that did keep their result and are not placed again.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from controlplane.apis.apps_karmada_v1alpha1 import (
    API_VERSION,
    KIND,
    RebalanceFailedReason,
    RebalanceResult,
    WorkloadRebalancerView,
)
from controlplane.apis.timestamps import format_micro_time, format_time, parse_time
from controlplane.apis.views import BindingView
from controlplane.apis.work_v1alpha1 import binding_name
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import is_deleting
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)



def _ref_key(ref: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (str(ref.get("apiVersion")), str(ref.get("kind")), str(ref.get("namespace") or ""), str(ref.get("name")))


class RebalancerController(KeyedController[str]):
    """Reconciles WorkloadRebalancers (keys: their names)."""

    name = "workload-rebalancers"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.rt = ctx.watch_kind(API_VERSION, KIND, self._on_rebalancer)

    async def _on_rebalancer(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            await self.loop.add(str((obj.get("metadata") or {}).get("name")))

    async def reconcile(self, name: str) -> float | None:
        ctx, rt = self.ctx, self.rt
        if rt is None:
            return None
        obj = await ctx.get(rt, None, name)
        if obj is None or is_deleting(obj):
            return None
        view = WorkloadRebalancerView(obj)
        if view.finish_time and view.observed_generation == view.generation:
            return await self._expire(obj)
        done = {
            _ref_key(w.get("workload") or {}): w
            for w in view.observed_workloads
            if w.get("result") == RebalanceResult.SUCCESSFUL
        }
        observed: list[Mapping[str, Any]] = []
        for workload in view.workloads:
            previous = done.get(_ref_key(workload))
            if previous is not None:
                observed.append(previous)
                continue
            try:
                found = await self._trigger(workload)
            except errors.Conflict:
                return CONFLICT_RETRY_SECONDS  # the binding changed under us: try again
            entry: dict[str, Any] = {"workload": dict(workload), "result": str(RebalanceResult.SUCCESSFUL)}
            if not found:
                entry["result"] = str(RebalanceResult.FAILED)
                entry["reason"] = str(RebalanceFailedReason.REFERENCED_BINDING_NOT_FOUND)
            observed.append(entry)
        new_status = {
            **copy.deepcopy(view.status),
            "observedWorkloads": observed,
            "observedGeneration": view.generation,
            "finishTime": ctx.now_text(),
        }
        updated, requeue_after = await ctx.write_status(rt, {**obj, "status": new_status})
        if updated is None:
            return requeue_after
        results = ", ".join(f"{w['workload'].get('name')}: {w['result']}" for w in observed)
        log.info("WorkloadRebalancer %s: %s", name, results)
        return await self._expire(updated)

    async def _trigger(self, workload: Mapping[str, Any]) -> bool:
        """Ask for a fresh placement of ``workload``'s binding; False when it has none."""
        ctx = self.ctx
        namespace = str(workload.get("namespace") or "") or None
        binding = await ctx.get(ctx.binding_rt, namespace, binding_name(str(workload.get("name")), str(workload.get("kind"))))
        resource = BindingView(binding).resource
        if binding is None or not self._names_version(str(workload.get("apiVersion")), resource):
            return False
        written = copy.deepcopy(binding)
        written["spec"]["rescheduleTriggeredAt"] = format_micro_time(ctx.now())
        try:
            await ctx.objects.update(ctx.binding_rt, written)
        except errors.NotFound:
            return False
        return True

    def _names_version(self, named: str, resource: Mapping[str, Any]) -> bool:
        """Whether a workload naming ``named`` is the bound ``resource``: its apiVersion, or for a
        custom kind (bound in its storage version) any served version of its CRD."""
        bound = str(resource.get("apiVersion"))
        if named == bound:
            return True
        rt = self.ctx.registry.for_kind(bound, str(resource.get("kind")))
        served_as = self.ctx.served_as(rt) if rt is not None else None
        return served_as is not None and served_as(named)

    async def _expire(self, obj: dict[str, Any]) -> float | None:
        """Delete the rebalancer ``ttlSecondsAfterFinished`` after it finished; else the seconds left."""
        view = WorkloadRebalancerView(obj)
        ttl, finished = view.ttl_seconds_after_finished, view.finish_time
        if ttl is None or not finished or self.rt is None:
            return None
        left = (parse_time(finished) + timedelta(seconds=int(ttl)) - self.ctx.now()).total_seconds()
        if left > 0:
            return left
        name = view.name
        try:
            await self.ctx.objects.delete(self.rt, name=name)
        except errors.NotFound:
            return None
        log.info("WorkloadRebalancer %s deleted %ss after it finished (at %s)", name, ttl, format_time(self.ctx.now()))
        return None
