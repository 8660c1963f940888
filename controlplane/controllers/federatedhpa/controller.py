"""The FederatedHPA controller: kube's HPA, over the pods of every member cluster.

In: ``autoscaling.karmada.io/v1alpha1`` FederatedHPAs (informer), the workloads they target
(read through the hub's store), the Cluster objects (informer), whose reports carry each
pod's GPU utilization, and -- for cpu and memory metrics -- the target's pods in the members with
their ``metrics.k8s.io`` usage (the context's :class:`~.podmetrics.PodMetricsSource`, read once
per sync). Out: the target's ``spec.replicas`` (what its ``scale`` subresource sets;
the hub then divides the replicas over clusters as for any replica change), the FederatedHPA's
status as kube's HPA controller writes it (``currentReplicas``, ``desiredReplicas``,
``currentMetrics``, ``lastScaleTime``, conditions ``AbleToScale``, ``ScalingActive``,
``ScalingLimited``) and Events (``SuccessfulRescale``, ``FailedGetScale``, Karmada's
``FailedGetScaleTargetRef``, ``FailedGetBindings`` and ``FailedGetTargetClusters``, ``AmbiguousSelector``, ``FailedGet*Metric``...).

Each FederatedHPA is looked at every ``--horizontal-pod-autoscaler-sync-period`` (the key comes
back after that delay: one queue and one timer for them all) and at once when its spec changes.
The recent recommendations and scale events the behaviour rules read, and each FederatedHPA's
selector (kube's ``hpaSelectors``, for ``AmbiguousSelector``), live in memory, as in kube; a new
leader starts them afresh. As in Karmada, a failure's Warning Event is recorded at every sync it
fails at; the hub's Event correlation (client-go's) counts the repeats on one Event.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controlplane.apis.autoscaling_karmada_v1alpha1 import API_VERSION, FEDERATED_HPA_KIND, FederatedHPAView
from controlplane.apis.events import EventType
from controlplane.apis.timestamps import format_time
from controlplane.apis.untyped import dig
from controlplane.apis.views import BindingView, ObjectView
from controlplane.controllers.binding import ready_since
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.federatedhpa.behavior import Condition, History, normalize
from controlplane.controllers.federatedhpa.calculating import calibration_of
from controlplane.controllers.federatedhpa.metrics import evaluate, needs_pod_metrics
from controlplane.controllers.federatedhpa.podmetrics import MemberPods
from controlplane.controllers.federatedhpa.resources import FleetPods
from controlplane.controllers.federatedhpa.selecting import (
    HPASelectors,
    InvalidSelector,
    scale_selector,
    selected,
)
from controlplane.controllers.informing import ObjectKey
from controlplane.controllers.pods import OwnerKey, PodUtilization, gpu_utilization_by_owner
from controlplane.controllers.reconciling import KeyedController
from controlplane.controllers.workloads import PropagatedReason, WorkloadConditionType, is_deleting
from controlplane.objectclient import WatchEventType, errors

log = logging.getLogger(__name__)

_CONDITION_ORDER = ("AbleToScale", "ScalingActive", "ScalingLimited")
#: Karmada's error when the target's binding places it in no cluster (its trailing space included).
NO_TARGET_CLUSTERS = "Binding has no schedulable clusters. "
#: Karmada's error when its members' scales hold no replicas: none is Ready, the target is at 0, or
#: its kind has no scale subresource (a member's scale client cannot read one).
NO_REPLICAS = "failed to get replicas in any of clusters, possibly because all of clusters are not ready"
#: Karmada's ``AbleToScale`` reason when the target has no binding (its Event's is ``FailedGetBindings``).
FAILED_GET_BINDING = "FailedGetBinding"
#: The Propagated reasons of a target a policy selects (Karmada would have labelled it as claimed).
_SELECTED = frozenset({PropagatedReason.CLAIMED, PropagatedReason.WAITING_FOR_QUOTA, PropagatedReason.INVALID_OBJECT})


def no_binding_error(target: Mapping[str, Any]) -> str:
    """Karmada's error for a target it finds no binding of (its trailing space included), in its
    order: a target without labels; one no policy claims (Karmada reads the claim from a policy
    label; the hub from the target's ``Propagated`` condition); one claimed, its binding not made
    yet (a queued workload held for quota, say)."""
    propagated = next((c for c in dig(target, "status", "conditions") or () if isinstance(c, Mapping)
                       and c.get("type") == WorkloadConditionType.PROPAGATED), {})
    if propagated.get("reason") in _SELECTED:
        return "Length of binding list is zero. "
    return "No label of policy found. " if dig(target, "metadata", "labels") else "Target resource has no label. "


def set_condition(status: dict[str, Any], condition_type: str, condition: Condition, *, now: datetime) -> None:
    """kube's ``setCondition``: the transition time moves only when the status changes."""
    conditions: list[dict[str, Any]] = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == condition_type), None)
    transition = old.get("lastTransitionTime") if old is not None and old.get("status") == condition.status else None
    new = {"type": condition_type, "status": condition.status, "lastTransitionTime": transition or format_time(now),
           "reason": condition.reason, "message": condition.message}
    conditions = [new if c is old else c for c in conditions] if old is not None else [*conditions, new]
    status["conditions"] = sorted(conditions, key=lambda c: _CONDITION_ORDER.index(c["type"])
                                  if c.get("type") in _CONDITION_ORDER else len(_CONDITION_ORDER))


def status_set(status: dict[str, Any], *, current: int, desired: int,
               metrics: list[dict[str, Any]] | None) -> dict[str, Any]:
    """kube's (and Karmada's) ``setStatus``: the status made anew from the replicas, the metrics'
    statuses, and the old status's ``lastScaleTime`` and conditions (no ``observedGeneration``:
    neither controller writes one)."""
    out: dict[str, Any] = {"desiredReplicas": desired, "currentMetrics": metrics or None}
    if current:  # omitempty
        out["currentReplicas"] = current
    for kept in ("lastScaleTime", "conditions"):
        if status.get(kept):
            out[kept] = status[kept]
    return out


def current_replicas_set(status: dict[str, Any], current: int) -> dict[str, Any]:
    """Karmada's ``setCurrentReplicasInStatus``: the current replicas, the desired replicas and the
    metrics' statuses of the last sync kept."""
    return status_set(status, current=current, desired=int(status.get("desiredReplicas") or 0),
                      metrics=status.get("currentMetrics"))


class FederatedHPAController(KeyedController[ObjectKey]):
    """Reconciles FederatedHPAs (keys: namespace, name)."""

    name = "federated-hpa"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, workers=1)
        self.sync_seconds = ctx.settings.federated_hpa_sync_seconds
        self.histories: dict[ObjectKey, History] = {}
        self.selectors = HPASelectors()
        #: Per cluster, the resourceVersion of its Cluster object and its report read per workload.
        self.reports: dict[str, tuple[str, dict[OwnerKey, PodUtilization]]] = {}
        self.rt = ctx.watch_kind(API_VERSION, FEDERATED_HPA_KIND, self._on_fhpa)

    async def _on_fhpa(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        key = (view.namespace, view.name)
        if event is WatchEventType.DELETED:
            self.histories.pop(key, None)
            self.selectors.forget(key)
            return
        # A status write (ours) does not bring the sync forward; a new spec does.
        if old is None or ObjectView(old).generation != view.generation:
            await self.loop.add(key)

    async def reconcile(self, key: ObjectKey) -> float | None:
        if self.rt is None:
            return None
        namespace, name = key
        fhpa = await self.ctx.get(self.rt, namespace, name)
        if fhpa is None or is_deleting(fhpa):
            self.histories.pop(key, None)
            self.selectors.forget(key)
            return None
        self.selectors.known(key)
        try:
            await self._sync(fhpa)
        except errors.Conflict:
            return CONFLICT_RETRY_SECONDS
        except errors.NotFound:
            return None
        return self.sync_seconds

    async def _sync(self, fhpa: dict[str, Any]) -> None:
        """kube's ``reconcileAutoscaler``."""
        ctx, now = self.ctx, self.ctx.now()
        view = FederatedHPAView(fhpa)
        namespace, name = view.namespace, view.name
        original = copy.deepcopy(dict(view.status))
        status: dict[str, Any] = copy.deepcopy(original)
        ref = view.scale_target_ref
        kind, target_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        reference = f"{kind}/{target_name}"
        target_rt = ctx.registry.for_kind(str(ref.get("apiVersion") or ""), kind)
        target = None if target_rt is None else await ctx.get(target_rt, namespace, target_name)
        if target_rt is None or target is None:
            # Karmada reads the target itself first: FailedGetScaleTargetRef, with the read's error.
            problem = (f'no matches for kind "{kind}" in version "{ref.get("apiVersion")}"' if target_rt is None
                       else f'{target_rt.plural}.{target_rt.group or ""}'.rstrip(".") + f' "{target_name}" not found')
            await self._unable_to_scale(fhpa, original, status, EventReason.FAILED_GET_SCALE_TARGET_REF,
                                        "the HPA controller was unable to get the target reference object", problem,
                                        now=now)
            return
        binding = ctx.binding_for(namespace, target_name, target_rt.kind)
        if binding is None:
            await self._unable_to_scale(fhpa, original, status, EventReason.FAILED_GET_BINDINGS,
                                        "the HPA controller was unable to get the binding by scaleTargetRef",
                                        no_binding_error(target), now=now, condition_reason=FAILED_GET_BINDING)
            return
        if not BindingView(binding).clusters:
            await self._unable_to_scale(fhpa, original, status, EventReason.FAILED_GET_TARGET_CLUSTERS,
                                        "the HPA controller was unable to get the target clusters from binding",
                                        NO_TARGET_CLUSTERS, now=now)
            return
        if target_rt.scale is None:
            # Karmada asks each member for the target's scale, which a kind without one does not
            # have: no member gives replicas.
            await self._failed_get_scale(fhpa, original, status, NO_REPLICAS, now=now)
            return
        spec_path = target_rt.scale.spec_replicas.split(".")
        current = dig(target, *spec_path)
        current = current if isinstance(current, int) and not isinstance(current, bool) else 1
        placed, counted = self._members(binding)
        metrics = view.metrics
        selector = scale_selector(target_rt, target)
        members: list[MemberPods] | None = None
        if ctx.pod_metrics is not None and needs_pod_metrics(metrics) and isinstance(selector, str):
            # Karmada lists each target cluster's pods first and leaves out, replicas and all, a
            # cluster it cannot list them in.
            members = [m for m in await ctx.pod_metrics.pod_metrics(namespace, selector)
                       if m.answered and m.cluster in counted]
            counted &= {m.cluster for m in members}
        # Karmada sums its members' scales and stops when they hold no replicas: a target at 0
        # replicas (its binding then places 0) stops here too, so its ``ScalingDisabled`` branch
        # (the members' sum at 0) is never reached.
        if not sum(placed[member] for member in counted):
            await self._failed_get_scale(fhpa, original, status, NO_REPLICAS, now=now)
            return
        set_condition(status, "AbleToScale", Condition(
            "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale"), now=now)
        min_replicas, max_replicas = view.min_replicas, view.max_replicas
        desired, rescale_reason = current, ""
        history = self.histories.setdefault((namespace, name), History())
        history.record_initial(now, current)
        metric_statuses: list[dict[str, Any]] | None = None
        if current > max_replicas:
            desired, rescale_reason = max_replicas, "Current number of replicas above Spec.MaxReplicas"
        elif current < min_replicas:
            desired, rescale_reason = min_replicas, "Current number of replicas below Spec.MinReplicas"
        else:
            pods, samples, _ = self._pod_samples((namespace, kind, target_name), counted)
            if isinstance(selector, str):
                pod_labels = (self._pod_labels(members) if members is not None
                              else self._gpu_pod_labels((namespace, kind, target_name), selector, counted, target))
                selector = self.selectors.ambiguity((namespace, name), selector, pod_labels) or selector
            if isinstance(selector, InvalidSelector):
                await self._warn(fhpa, (selector.reason, selector.message),
                                 (EventReason.FAILED_COMPUTE_METRICS_REPLICAS, selector.message))
                set_condition(status, "ScalingActive", selector.condition, now=now)
                await self._write_status(fhpa, original, current_replicas_set(status, current))
                log.info("FederatedHPA %s/%s: failed to compute desired number of replicas based on listed "
                         "metrics for %s: %s", namespace, name, reference, selector.message)
                return
            fleet = None if members is None else FleetPods(namespace, members, now)
            evaluation = evaluate(metrics, pods, samples, current=current, fleet=fleet,
                                  calibration=calibration_of(placed, counted, current_replicas=current))
            metric_statuses = evaluation.statuses
            # kube's Warning Event of each metric that failed, whether or not the others scale.
            await self._warn(fhpa, *((EventReason(f.reason), f.error) for f in evaluation.failures))
            if evaluation.failure is not None:
                failure = Condition("False", evaluation.failure.reason, evaluation.failure.message)
                await self._warn(fhpa, (EventReason.FAILED_COMPUTE_METRICS_REPLICAS, evaluation.error))
                set_condition(status, "ScalingActive", failure, now=now)
                await self._write_status(fhpa, original, current_replicas_set(status, current))
                log.info("FederatedHPA %s/%s: failed to compute desired number of replicas based on listed "
                         "metrics for %s: %s", namespace, name, reference, evaluation.error)
                return
            set_condition(status, "ScalingActive", Condition(
                "True", "ValidMetricFound",
                f"the HPA was able to successfully calculate a replica count from {evaluation.metric}"), now=now)
            normalized = normalize(history, now, current=current, desired=evaluation.replicas,
                                   min_replicas=min_replicas, max_replicas=max_replicas,
                                   behavior=view.behavior)
            set_condition(status, "AbleToScale", normalized.able_to_scale, now=now)
            set_condition(status, "ScalingLimited", normalized.scaling_limited, now=now)
            desired = normalized.replicas
            if desired > current:
                rescale_reason = f"{evaluation.metric} above target"
            elif desired < current:
                rescale_reason = "All metrics below target"
        if desired != current and rescale_reason:
            scaled = copy.deepcopy(target)
            parent = dig(scaled, *spec_path[:-1])
            if isinstance(parent, dict):
                parent[spec_path[-1]] = desired
            try:
                await ctx.objects.update(target_rt, scaled)
            except (errors.Conflict, errors.NotFound):
                raise
            except errors.ApiError as exc:
                set_condition(status, "AbleToScale", Condition(
                    "False", "FailedUpdateScale", f"the HPA controller was unable to update the target scale: {exc}"),
                    now=now)
                await record_event(ctx, fhpa, type=EventType.WARNING, reason=EventReason.FAILED_RESCALE,
                                   message=f"New size: {desired}; reason: {rescale_reason}; error: {exc}")
                await self._write_status(fhpa, original, current_replicas_set(status, current))
                return
            set_condition(status, "AbleToScale", Condition(
                "True", "SucceededRescale", f"the HPA controller was able to update the target scale to {desired}"),
                now=now)
            await record_event(ctx, fhpa, type=EventType.NORMAL, reason=EventReason.SUCCESSFUL_RESCALE,
                               message=f"New size: {desired}; reason: {rescale_reason}")
            if view.behavior is not None:  # kube keeps scale events for the behaviour's policies only
                history.record_scale(now, current=current, desired=desired)
            status["lastScaleTime"] = format_time(now)
            log.info("FederatedHPA %s/%s: %s %s -> %s (%s)", namespace, name, reference, current, desired, rescale_reason)
        await self._write_status(fhpa, original, status_set(status, current=current, desired=desired,
                                                            metrics=metric_statuses))

    def _members(self, binding: dict[str, Any]) -> tuple[dict[str, int], set[str]]:
        """Karmada's target clusters: the replicas the target's ``binding`` places in each member,
        and the members among them that are Ready, whose pods are counted."""
        placed = {str(c["name"]): int(c.get("replicas") or 0) for c in BindingView(binding).clusters if c.get("name")}
        ready = {str((c.get("metadata") or {}).get("name")) for c in self.ctx.clusters.items()
                 if ready_since(c) is not None}
        return placed, {member for member in placed if member in ready}

    @staticmethod
    def _pod_labels(members: list[MemberPods]) -> list[Mapping[str, str]]:
        """The labels of the pods the members' pod lists give for the selector."""
        return [dict(dig(pod, "metadata", "labels") or {}) for member in members for pod in member.pods]

    def _gpu_pod_labels(self, owner: OwnerKey, selector: str, counted: set[str],
                        target: dict[str, Any]) -> list[Mapping[str, str]]:
        """kube's pods by selector, from the GPU reports of the ``counted`` members (as
        :meth:`_pod_samples` last read them): the labels of the namespace's GPU pods the selector
        selects; a pod of the target whose report gives no labels (an older agent's, or a large
        member's, which lists no pod) counts with its pod template's."""
        template = dig(target, "spec", "template", "metadata", "labels")
        out: list[dict[str, str]] = []
        for cluster in counted:
            for held_by, (names, _, labels) in (self.reports.get(cluster) or ("", {}))[1].items():
                if held_by[0] != owner[0]:
                    continue
                for pod in names:
                    known = labels.get(pod)
                    if known is None and held_by == owner and isinstance(template, dict):
                        known = {str(k): str(v) for k, v in template.items()}
                    if known is not None:
                        out.append(known)
        return selected(selector, out)

    def _pod_samples(self, owner: OwnerKey, counted: set[str]) -> PodUtilization:
        """The target's GPU pods in the ``counted`` members and the
        utilization of those measured, each pod named by its cluster and its name there. Each
        cluster's report is read once per version (:attr:`reports`), however many FederatedHPAs
        look at it."""
        pods: list[str] = []
        samples: dict[str, float] = {}
        labels: dict[str, dict[str, str]] = {}
        seen: set[str] = set()
        for cluster in self.ctx.clusters.items():
            meta = cluster.get("metadata") or {}
            cluster_name, version = str(meta.get("name")), str(meta.get("resourceVersion"))
            seen.add(cluster_name)
            if cluster_name not in counted:
                continue
            cached = self.reports.get(cluster_name)
            if cached is None or cached[0] != version:
                cached = self.reports[cluster_name] = (version, gpu_utilization_by_owner(cluster))
            names, measured, known = cached[1].get(owner, ([], {}, {}))
            pods += [f"{cluster_name}/{pod}" for pod in names]
            samples.update({f"{cluster_name}/{pod}": value for pod, value in measured.items()})
            labels.update({f"{cluster_name}/{pod}": value for pod, value in known.items()})
        for gone in set(self.reports) - seen:
            del self.reports[gone]
        return pods, samples, labels

    async def _failed_get_scale(self, fhpa: dict[str, Any], original: dict[str, Any], status: dict[str, Any],
                                problem: str, *, now: datetime) -> None:
        """kube's ``FailedGetScale``."""
        await self._unable_to_scale(fhpa, original, status, EventReason.FAILED_GET_SCALE,
                                    "the HPA controller was unable to get the target's current scale", problem, now=now)

    async def _unable_to_scale(self, fhpa: dict[str, Any], original: dict[str, Any], status: dict[str, Any],
                               reason: EventReason, what: str, problem: str, *, now: datetime,
                               condition_reason: str | None = None) -> None:
        """``AbleToScale`` ``False`` with ``condition_reason`` (default: ``reason``) and ``what:
        problem``, and the Warning Event ``reason``, ``problem``."""
        failure = Condition("False", condition_reason or reason, f"{what}: {problem}")
        await self._warn(fhpa, (reason, problem))
        set_condition(status, "AbleToScale", failure, now=now)
        await self._write_status(fhpa, original, status)

    async def _warn(self, fhpa: dict[str, Any], *events: tuple[EventReason, str]) -> None:
        """kube's Warning ``events`` (reason, message), recorded at every sync that fails."""
        for reason, message in events:
            await record_event(self.ctx, fhpa, type=EventType.WARNING, reason=reason, message=message)

    async def _write_status(self, fhpa: dict[str, Any], original: dict[str, Any], status: dict[str, Any]) -> None:
        # ``desiredReplicas`` is written even at 0, as Go writes the status (no ``omitempty``; the
        # CRD's schema requires it, so a status without it fails kubectl's validation of a get).
        status = {"desiredReplicas": 0, **status}
        if status == original or self.rt is None:
            return
        await self.ctx.objects.update_status(self.rt, {**fhpa, "status": status})
