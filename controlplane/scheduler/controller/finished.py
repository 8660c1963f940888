"""Whether a binding's workload finished: the guard that keeps finished work where it ran.

In: a ResourceBinding (dict), the hub workload it describes (from the informer) and the
binding's Works. Out: the workload's :class:`~controlplane.interpreter.FinishedPhase`, or None
while it runs (or for kinds that never finish).

A run-to-completion workload (Job, PyTorchJob, MPIJob, RayJob) that its interpreter says
Succeeded or Failed is never moved, re-placed, failed over or run again, whatever its member
reports afterwards (a worker pod recreated Pending, an Unhealthy copy, a cluster tainted or
gone): its pods are done, and placing it anywhere else would run it a second time. The hub
workload's merged status says so once the status controller has written it; the members'
statuses in the Works say so as soon as the agent reports them (the same report may carry
the finished status and a pod the member cannot place), so both are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.views import BindingView, ObjectView
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.works import cluster_of_namespace, main_manifest
from controlplane.interpreter import FinishedPhase, interpreter_for


def finished_phase(ctx: ControllerContext, binding: Mapping[str, Any]) -> FinishedPhase | None:
    """The terminal phase of ``binding``'s workload, from its hub status or its members' statuses."""
    view = BindingView(binding)
    resource = view.resource
    api_version, kind = str(resource.get("apiVersion")), str(resource.get("kind"))
    interpreter = interpreter_for(api_version, kind)
    if interpreter is None:
        return None
    informer = ctx.workload_informer(api_version, kind)
    workload = informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None
    if workload is not None:
        uid = resource.get("uid")
        if uid and ObjectView(workload).metadata.get("uid") != uid:
            return None  # the binding still describes an earlier object of that name
        phase = interpreter.finished(workload.get("status"))
        if phase is not None:
            return phase
    works: dict[str, dict[str, Any]] = {}
    for work in ctx.works.by_index(INDEX_BINDING, (str(view.metadata.get("namespace")), str(view.metadata.get("name")))):
        cluster = cluster_of_namespace(str(work["metadata"].get("namespace") or ""))
        if cluster is not None:
            works[cluster] = work
    targets = [str(t.get("name")) for t in view.clusters]
    phases = []
    for cluster in targets:
        share = works.get(cluster)
        manifest = main_manifest(share, resource) if share is not None else None
        phases.append(interpreter.finished((manifest or {}).get("status")))
    # As the status aggregation reads them: Failed as soon as one share failed, Succeeded when all did.
    if FinishedPhase.FAILED in phases:
        return FinishedPhase.FAILED
    if phases and all(p is FinishedPhase.SUCCEEDED for p in phases):
        return FinishedPhase.SUCCEEDED
    return None
