"""v1 Events on hub workloads, so ``kubectl describe deployment x`` shows what the hub decided.

In: the involved object (a hub workload dict), a type, a reason and a message. Out: one
``v1`` Event in the object's namespace, named ``<object name>.<unique suffix>``. Events
are best effort: failing to record one is logged and never fails a reconcile. Callers
record an Event only when their decision changes, so repeated reconciles do not flood; an
Event recorded again (a retried failure) is, as client-go's recorder makes it, the same Event
with its ``count`` grown and ``lastTimestamp`` moved (the context's
:class:`~controlplane.controllers.eventcorrelating.EventCorrelator`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.views import ObjectView
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.eventcorrelating import Correlated
from controlplane.objectclient import ResourceType, errors

log = logging.getLogger(__name__)

COMPONENT = "gpufed-hub"


class EventReason(StrEnum):
    SCHEDULED = "Scheduled"
    FAILED_SCHEDULING = "FailedScheduling"
    REPLICAS_MOVED = "ReplicasMoved"
    MOVE_ABANDONED = "MoveAbandoned"
    OVERRIDE_FAILED = "OverrideFailed"
    POLICY_PREEMPTED = "PolicyPreempted"
    REPLICAS_EVICTED = "ReplicasEvicted"
    SPOT_RECLAIMED = "SpotReclaimed"
    EVICTION_WAITING = "EvictionWaiting"
    EVICTION_COMPLETED = "EvictionCompleted"
    DEPENDENCY_MISSING = "DependencyMissing"
    SCHEDULE_PRIORITY_UNRESOLVED = "SchedulePriorityUnresolved"
    #: A DRA claim's DeviceClass has selectors gpufed does not read: its devices are not counted.
    DEVICE_CLASS_NOT_READ = "DeviceClassNotRead"
    INVALID_OBJECT = "InvalidObject"
    KIND_NOT_SERVED = "KindNotServed"
    PODS_NOT_STARTING = "PodsNotStarting"
    SCRIPT_FAILED = "InterpreterScriptFailed"
    SELECTORS_NOT_SERVED = "ResourceSelectorsNotServed"
    SELECTORS_SERVED = "ResourceSelectorsServed"
    # Karmada's, when a resource interpreter webhook fails (on the workload; the last two on the Work).
    APPLY_POLICY_FAILED = "ApplyPolicyFailed"
    SYNC_WORK_FAILED = "SyncWorkFailed"
    AGGREGATE_STATUS_FAILED = "AggregateStatusFailed"
    GET_DEPENDENCIES_FAILED = "GetDependenciesFailed"
    REFLECT_STATUS_FAILED = "ReflectStatusFailed"
    INTERPRET_HEALTH_FAILED = "InterpretHealthFailed"
    # kube's garbage collector's.
    OWNER_REF_INVALID_NAMESPACE = "OwnerRefInvalidNamespace"
    # kube's HPA controller's, on a FederatedHPA.
    SUCCESSFUL_RESCALE = "SuccessfulRescale"
    FAILED_RESCALE = "FailedRescale"
    FAILED_GET_SCALE = "FailedGetScale"
    FAILED_GET_SCALE_TARGET_REF = "FailedGetScaleTargetRef"
    FAILED_GET_BINDINGS = "FailedGetBindings"
    FAILED_GET_TARGET_CLUSTERS = "FailedGetTargetClusters"
    AMBIGUOUS_SELECTOR = "AmbiguousSelector"
    SELECTOR_REQUIRED = "SelectorRequired"
    INVALID_SELECTOR = "InvalidSelector"
    FAILED_COMPUTE_METRICS_REPLICAS = "FailedComputeMetricsReplicas"
    FAILED_GET_RESOURCE_METRIC = "FailedGetResourceMetric"
    FAILED_GET_CONTAINER_RESOURCE_METRIC = "FailedGetContainerResourceMetric"
    FAILED_GET_PODS_METRIC = "FailedGetPodsMetric"
    FAILED_GET_OBJECT_METRIC = "FailedGetObjectMetric"
    FAILED_GET_EXTERNAL_METRIC = "FailedGetExternalMetric"
    INVALID_METRIC_SOURCE_TYPE = "InvalidMetricSourceType"
    # Karmada's CronFederatedHPA controller's.
    SCALE_FAILED = "ScaleFailed"
    START_RULE_FAILED = "StartRuleFailed"
    # Kueue's reasons on a Workload (fleet admission).
    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    PENDING = "Pending"
    PREEMPTED = "Preempted"
    EVICTED_PODS_READY_TIMEOUT = "EvictedDueToPodsReadyTimeout"
    EVICTED_REQUEUING_LIMIT = "EvictedDueToDeactivatedDueToRequeuingLimitExceeded"
    EVICTED_DEACTIVATED = "EvictedDueToDeactivated"
    EVICTED_CLUSTER_QUEUE_STOPPED = "EvictedDueToClusterQueueStopped"
    EVICTED_LOCAL_QUEUE_STOPPED = "EvictedDueToLocalQueueStopped"
    EVICTED_ADMISSION_CHECK = "EvictedDueToAdmissionCheck"
    ADMISSION_CHECK_REJECTED = "AdmissionCheckRejected"
    # Kueue's job reconciler's, on the queued job itself (``jobframework/events.go``).
    STOPPED = "Stopped"
    STARTED = "Started"
    CREATED_WORKLOAD = "CreatedWorkload"
    UPDATED_WORKLOAD = "UpdatedWorkload"
    DELETED_WORKLOAD = "DeletedWorkload"
    # Kueue's pod controller's, on the Pods of a pod group and its Workload.
    ERR_WORKLOAD_COMPOSE = "ErrWorkloadCompose"
    EXCESS_POD_DELETED = "ExcessPodDeleted"
    OWNER_REFERENCES_ADDED = "OwnerReferencesAdded"
    FINISHED_WORKLOAD = "FinishedWorkload"
    UPDATED_ADMISSION_CHECK = "UpdatedAdmissionCheck"
    # Karmada's cluster-taint-policy controller's, on the Cluster.
    TAINT_CLUSTER_SUCCEED = "TaintClusterSucceed"


async def record_event(
    ctx: ControllerContext,
    involved: Mapping[str, Any],
    *,
    type: EventType,
    reason: EventReason | str,
    message: str,
) -> None:
    if not ctx.settings.record_events or ctx.event_rt is None:
        return
    meta = ObjectView(involved).metadata
    namespace = meta.get("namespace") or "default"
    now = ctx.now_text()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": str(reason),
        "message": message,
        "type": str(type),
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    correlated = ctx.event_correlator.correlate(event, now=ctx.now())
    try:
        stored = await _write(ctx, ctx.event_rt, correlated)
    except (errors.ApiError, errors.StorageError) as exc:
        log.info("could not record event %s on %s/%s: %s", reason, namespace, meta.get("name"), exc)
        return
    ctx.event_correlator.written(correlated, stored)


async def _write(ctx: ControllerContext, rt: ResourceType, correlated: Correlated) -> dict[str, Any]:
    """client-go's ``recordToSink``: a repeated Event updates the one written (its ``count``,
    ``lastTimestamp`` and ``message``); one deleted meanwhile is created again with its count."""
    event = correlated.event
    meta = event["metadata"]
    if correlated.updates:
        try:
            existing = await ctx.objects.get(rt, namespace=meta["namespace"], name=meta["name"])
            return await ctx.objects.update(rt, {**existing, "count": event["count"],
                                                 "lastTimestamp": event["lastTimestamp"], "message": event["message"]})
        except errors.NotFound:
            pass
    return await ctx.objects.create(rt, event)
