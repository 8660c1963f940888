"""The detector: workload x policies -> one ResourceBinding per claimed workload.

In: hub workloads (every namespaced kind the hub serves but its own machinery; kinds without
an interpreter propagate whole, see ``workloads.is_plain``), PropagationPolicies and ClusterPropagationPolicies (both API groups) and
the existing bindings. Out, per workload:

* claimed by a policy (``policies.matching.select_policy``, Karmada's order and sticky claims; a
  selector naming any served version of a CRD selects its objects, which are read and bound in the
  CRD's storage version): the workload gets the ``gpufed.io/propagation`` finalizer (so deleting it
  cleans up the members first, see ``deleting``), a ResourceBinding ``<name>-<kind>`` in its
  namespace with ``spec.resource``, replicas, per-replica requirements (with the GPUs its pods' DRA
  claims ask for, see ``claimspecs``), gang, components, the
  policy's placement and GPU shapes (``gpuShapes``) and ``spec.policy`` (everything a placement
  depends on, so a change to any of it moves the binding's generation and the scheduler decides
  again), the policy's ``preserveResourcesOnDeletion`` (``spec.preserveResourcesOnDeletion``, which
  the binding controller copies into each Work), its ``propagateDeps`` (``spec.propagateDeps``,
  which the dependencies controller reads, so the workload's ConfigMaps and Secrets stay with it
  after the policy is deleted) and its ``schedulePriority`` resolved to an integer
  (``spec.schedulePriority.priority``, the scheduler's queue order; see below), and the status
  condition ``Propagated=True`` (reason ``PolicyClaimed``); the workload and its binding carry
  Karmada's claim marks, the policy's permanent id and name (``policies.claims``). An InterpretReplica webhook's replicas and
  requirements win over the interpreter's (``webhookinterpreting``; after the checks; a failed call writes nothing);
* claimed by none and never propagated: ``Propagated=False`` reason ``NoPolicyMatched``;
  the workload stays on the hub only;
* a TrainJob whose runtime the hub does not have (``trainingruntimes``: its nodes, GPUs and pod
  template are the runtime's): no binding, ``Propagated=False`` reason ``RuntimeNotFound`` naming
  the runtime, until it exists (a binding written before stays as it is);
* claimed before but by no policy now (the policy was deleted or no longer selects it):
  like Karmada, the binding stays and the workload keeps running where it was placed
  (``Propagated=True`` reason ``PolicyRemoved``), both without the claim marks; deleting the workload removes it.

``schedulePriority`` (Karmada's priority scheduling): with ``priorityClassSource:
KubePriorityClass`` the priority is the ``value`` of the hub's ``scheduling.k8s.io/v1``
PriorityClass ``priorityClassName`` (without a name: the PriorityClass marked ``globalDefault``,
else 0). The binding's condition ``SchedulePriorityResolved`` says where it came from. A
PriorityClass the hub does not have (or another source, which Karmada reserves for later) gives
priority 0, ``SchedulePriorityResolved=False`` and a warning in the log; the binding is written all
the same, and fixed once the PriorityClass appears. (Karmada's detector instead creates no binding
until the PriorityClass exists: the workload would not run at all for want of an ordering hint.)

Reconciled again whenever the workload's spec, labels or deletion state change, any
policy that selects it (or claims it) changes, its binding changes, or a PriorityClass
changes (for the workloads whose policy has ``schedulePriority``). Writes only what
differs (the scheduler owns ``spec.clusters``), each a compare-and-swap.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from controlplane.admission.multikueue import restrict_to_clusters
from controlplane.apis.apiextensions.builtin import is_generated, is_view
from controlplane.apis.constants import FINALIZER_WORKLOAD
from controlplane.apis.events import EventType
from controlplane.apis.kube.generation import content_changed
from controlplane.apis.revisions import is_deployment_replica_set
from controlplane.apis.views import BindingView, ObjectView
from controlplane.controllers.admissiongate import AdmissionGate, constrain_placement
from controlplane.controllers.claimspecs import ClaimSpecs
from controlplane.controllers.context import (
    INDEX_NAMESPACE,
    INDEX_POLICY,
    UNSYNCED_RETRY_SECONDS,
    ControllerContext,
    not_listed,
    policy_key,
    policy_ref_of_binding,
)
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.informing import spec_unchanged
from controlplane.controllers.prioritycondition import set_priority_condition
from controlplane.controllers.reconciling import KeyedController, OwnWrites
from controlplane.controllers.schedulepriority import PriorityResolution, resolve_schedule_priority
from controlplane.controllers.trainingruntimes import TrainingRuntimes
from controlplane.controllers.webhookinterpreting import webhook_replicas
from controlplane.controllers.workloads import (
    PropagatedReason,
    WorkloadConditionType,
    WorkloadRef,
    condition_is_true,
    is_deleting,
    is_plain,
    keeps_propagated_condition,
    shape_problem,
    with_condition,
    with_job_suspension,
)
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.dependencies import is_root_ca_config_map
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.interpreter.shape import InvalidObject
from controlplane.objectclient import ResourceType, WatchEventType, errors
from policies.claims import with_claim_marks
from policies.defaulting import placement_as_stored
from policies.matching import PolicyMatch, PolicyRef, is_reserved_namespace, policy_ref, select_policy
from policies.models import AnyPropagationPolicy

log = logging.getLogger(__name__)

PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
PRIORITY_CLASS_KIND = "PriorityClass"
def binding_priority(binding: Mapping[str, Any] | None) -> int:
    """A binding's ``spec.schedulePriority.priority`` (0 when it has none): its scheduling order."""
    return BindingView(binding).priority


def describe_policy(ref: PolicyRef) -> str:
    return f"{ref.kind} {ref.namespace}/{ref.name}" if ref.namespace else f"{ref.kind} {ref.name}"


def _meta_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether a workload changed in anything the detector reads (not a status-only write)."""
    if old is None:
        return True
    before, after = ObjectView(old).metadata, ObjectView(new).metadata
    return any(
        before.get(key) != after.get(key)
        for key in ("labels", "deletionTimestamp", "finalizers", "uid")
    ) or content_changed(old, new)


def _with_shared(requirements: ReplicaRequirements, shared: Mapping[str, int] | None) -> ReplicaRequirements:
    """``requirements`` with ``shared`` as the devices its replicas in a cluster hold together."""
    if not shared:
        return requirements
    return dataclasses.replace(requirements, shared=tuple(sorted(shared.items()))).interned()


def binding_spec(
    workload: dict[str, Any],
    policy: AnyPropagationPolicy,
    existing: dict[str, Any] | None,
    *,
    schedule_priority: int | None = None,
    webhook_replicas: dict[str, Any] | None = None,
    shared: Mapping[str, int] | None = None,
    roles_shared: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The binding spec for ``workload`` claimed by ``policy``, keeping the scheduler's fields.
    ``schedule_priority``: the policy's ``schedulePriority`` resolved (None when it has none);
    ``webhook_replicas``: an InterpretReplica webhook's answer, which wins over the interpreter
    (its requirements with ``shared`` added: the webhook cannot know the hub's claims);
    ``shared``: the devices its replicas in a cluster hold together, once (its shared DRA claims');
    ``roles_shared``: the same per role, for the components of the roles whose pods name such claims."""
    meta = ObjectView(workload).metadata
    api_version, kind = str(workload.get("apiVersion")), str(workload.get("kind"))
    interpreter = interpreter_for(api_version, kind)
    resource: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "namespace": meta.get("namespace")}
    resource["name"] = meta.get("name")
    for key in ("uid", "resourceVersion", "generation"):
        if meta.get(key) is not None:
            resource[key] = meta[key]
    spec: dict[str, Any] = {"resource": resource}
    if interpreter is not None:
        spec["replicas"] = interpreter.replicas(workload)
        requirements = interpreter.replica_requirements(workload)
        spec["replicaRequirements"] = _with_shared(requirements, shared).to_spec()
        gang = policy.spec.gang if policy.spec.gang is not None else interpreter.is_gang(workload)
        spec["gang"] = bool(gang)
        components = [
            dataclasses.replace(c, requirements=_with_shared(c.requirements, (roles_shared or {}).get(c.name)))
            for c in interpreter.components(workload)
        ]
        if components:
            spec["components"] = [component.to_spec() for component in components]
    else:
        spec["replicas"] = 0
        spec["gang"] = False
    if webhook_replicas is not None:
        spec["replicas"], spec["replicaRequirements"] = webhook_replicas["replicas"], dict(webhook_replicas["replicaRequirements"])
        if shared:  # Karmada's ReplicaRequirements has no shared part: the hub's claims add it
            spec["replicaRequirements"]["sharedResourceRequest"] = ReplicaRequirements.build(shared=shared).to_spec()["sharedResourceRequest"]
    if policy.spec.placement is not None:
        spec["placement"] = _kept_placement(policy.spec.placement.to_wire(), existing)
    if policy.spec.gpu_shapes is not None:
        # Part of the binding so that editing them moves its generation: the scheduler decides again.
        spec["gpuShapes"] = policy.spec.gpu_shapes.to_wire()
    ref = policy_ref(policy)
    spec["policy"] = {"kind": ref.kind, "name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}
    if policy.spec.preserve_resources_on_deletion:
        spec["preserveResourcesOnDeletion"] = True
    if policy.spec.propagate_deps:
        # Read from here by the dependencies controller: the binding outlives its policy.
        spec["propagateDeps"] = True
    if schedule_priority is not None:
        spec["schedulePriority"] = {"priority": schedule_priority}
    for owned_by_scheduler in SCHEDULER_SPEC_FIELDS:
        value = ((existing or {}).get("spec") or {}).get(owned_by_scheduler)
        if value is not None:
            spec[owned_by_scheduler] = value
    return spec


def _kept_placement(placement: dict[str, Any], existing: dict[str, Any] | None) -> dict[str, Any]:
    """``placement``, or the binding's own copy when the two differ only in the defaults a policy
    is now stored with (:func:`policies.defaulting.placement_as_stored`): a policy stored before
    them does not move its bindings' generation, and so does not have them scheduled again."""
    kept = BindingView(existing).spec.get("placement") if existing is not None else None
    if isinstance(kept, dict) and kept != placement and placement_as_stored(kept) == placement_as_stored(placement):
        return kept
    return placement


def _scheduler_change_only(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a binding's spec changed only in what the scheduler owns (its placement), which
    the detector keeps as it is: nothing for it to reconcile."""
    before, after = BindingView(old).spec, BindingView(new).spec
    keys = (before.keys() | after.keys()) - SCHEDULER_SPEC_FIELDS
    return all(before.get(key) == after.get(key) for key in keys)


def _comparable(spec: dict[str, Any] | None) -> dict[str, Any]:
    """A binding spec without the workload's resourceVersion (it moves on every status write),
    for comparing only: it shares everything else with ``spec``."""
    spec = spec or {}
    resource = spec.get("resource")
    if isinstance(resource, dict) and "resourceVersion" in resource:
        spec = {**spec, "resource": {k: v for k, v in resource.items() if k != "resourceVersion"}}
    return spec


#: Fields of a binding's spec the scheduler writes; the detector's spec keeps them as they are.
SCHEDULER_SPEC_FIELDS = frozenset({"clusters", "gracefulEvictionTasks", "rescheduleTriggeredAt"})


class Detector(KeyedController[WorkloadRef]):
    """Reconciles workloads (keys: :class:`WorkloadRef`) into bindings."""

    name = "detector"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        ctx.add_workload_handler(self._on_workload)
        for rt in ctx.propagation_types:
            ctx.informer(rt).add_handler(self._on_policy)
        ctx.bindings.add_handler(self._on_binding)
        priority_class_rt = ctx.watch_kind(PRIORITY_CLASS_API_VERSION, PRIORITY_CLASS_KIND, self._on_priority_class)
        self._priority_classes = ctx.informer(priority_class_rt) if priority_class_rt is not None else None
        self._claims = ClaimSpecs(ctx, self._add_bound_workload)  # DRA GPUs count in the requirements
        # A TrainJob's nodes and GPUs are its runtime's.
        self._runtimes = TrainingRuntimes(ctx, lambda obj: self.loop.add(WorkloadRef.of(obj)))
        # A queued workload (label kueue.x-k8s.io/queue-name) propagates only once its Workload is admitted.
        self.admission = AdmissionGate(ctx, self.loop.add)
        # The binding it creates and the workload it claims, in one reconcile: their events
        # bring back what that reconcile made.
        self._own_writes = OwnWrites()

    # --- event handlers ---------------------------------------------------------------

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and (self._own_writes.is_echo(obj) or not _meta_changed(old, obj)):
            return
        if is_deployment_replica_set(obj) or is_root_ca_config_map(obj):
            return  # a Deployment's history on the hub (rollouthistory), the hub's root CA: never propagated
        ref = WorkloadRef.of(obj)
        if is_plain(ref.api_version, ref.kind) and not self._plain_object_matters(ref):
            return  # a ConfigMap (DaemonSet...) no policy selects: nothing to propagate, no status to set
        await self.loop.add(ref)

    def _plain_object_matters(self, ref: WorkloadRef) -> bool:
        ctx = self.ctx
        return ctx.binding_for(ref.binding_namespace, ref.name, ref.kind) is not None or ctx.policy_selects_kind(
            ref.namespace or None, ref.api_version, ref.kind
        )

    async def _on_policy(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        view = ObjectView(obj)
        if spec_unchanged(old, obj, event) and (
            ObjectView(old).deletion_timestamp == view.deletion_timestamp
        ):
            return
        refs: set[WorkloadRef] = set()
        namespace = view.namespace or None
        ref = PolicyRef(kind=str(obj.get("kind")), name=str(view.metadata.get("name")), namespace=namespace)
        for binding in self.ctx.bindings.by_index(INDEX_POLICY, policy_key(ref)):
            resource = BindingView(binding).resource
            if resource.get("name"):
                refs.add(
                    WorkloadRef(
                        str(resource.get("apiVersion")), str(resource.get("kind")),
                        str(resource.get("namespace") or ""), str(resource["name"]),
                    )
                )
        selected: set[tuple[str, str]] = set()
        for version in (obj, old):
            for selector in ObjectView(version).spec.get("resourceSelectors") or ():
                selected.add((str(selector.get("apiVersion")), str(selector.get("kind"))))
        for api_version, kind in selected:
            informer = self.ctx.workload_informer(api_version, kind)
            if informer is None:
                continue
            items = informer.by_index(INDEX_NAMESPACE, namespace) if namespace else informer.items()
            refs.update(WorkloadRef.of(item) for item in items)
        for workload in sorted(refs):
            await self.loop.add(workload)

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED and self._own_writes.is_echo(obj):
            return
        if event is WatchEventType.MODIFIED and old is not None and (
            ObjectView(old).generation == ObjectView(obj).generation or _scheduler_change_only(old, obj)
        ):
            return
        await self._add_bound_workload(obj)

    async def _add_bound_workload(self, binding: dict[str, Any]) -> None:
        """Queue the workload a binding's ``spec.resource`` names (when it names one)."""
        resource = BindingView(binding).resource
        if resource.get("name") and resource.get("kind"):
            await self.loop.add(
                WorkloadRef(
                    str(resource.get("apiVersion")), str(resource["kind"]),
                    str(resource.get("namespace") or ""), str(resource["name"]),
                )
            )

    async def _on_priority_class(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if event is WatchEventType.MODIFIED and old is not None and all(
            old.get(key) == obj.get(key) for key in ("value", "globalDefault")
        ):
            return
        for binding in self.ctx.bindings.items():
            claimed_by = policy_ref_of_binding(binding)
            policy = self.ctx.propagation_policy(claimed_by) if claimed_by else None
            if policy is None or policy.spec.schedule_priority is None:
                continue
            await self._add_bound_workload(binding)

    # --- reconcile --------------------------------------------------------------------

    async def reconcile(self, ref: WorkloadRef) -> float | None:
        ctx = self.ctx
        informer = ctx.workload_informer(ref.api_version, ref.kind)
        if informer is None:
            return None
        if not_listed(informer):
            return UNSYNCED_RETRY_SECONDS  # not listed yet (a kind just watched, its list failing): absent says nothing
        rt = informer.rt  # as watched (a CRD's storage version), whatever version the ref names: its objects' own
        # Cached reads: every write below is a compare-and-swap, so a stale copy only loses a race.
        workload = ctx.cached(rt, ref.namespace, ref.name)
        binding = ctx.bindings.get(ref.binding_namespace, ref.binding_name)
        if binding is not None and not ref.bound_by(binding):
            binding = None  # another kind's binding that happens to share the name
        if workload is None:
            if binding is not None:
                # Gone without passing through the finalizer (it was removed by hand).
                log.info("workload %s is gone; deleting its binding", ref)
                await ctx.delete(ctx.binding_rt, ref.binding_namespace, ref.binding_name)
            return None
        if is_root_ca_config_map(workload) and not is_deleting(workload):
            if binding is not None:
                # Bound by a policy before the hub kept it out: the binding goes (its Works with it),
                # so the hub's CA reaches no member's own root CA ConfigMap.
                log.info("the hub's root CA ConfigMap %s is never propagated; deleting its binding", ref)
                await ctx.delete(ctx.binding_rt, ref.binding_namespace, ref.binding_name)
            return None
        if is_deleting(workload) or is_reserved_namespace(ref.namespace) or is_deployment_replica_set(workload):
            return None
        if is_generated(workload):
            return None  # a CRD the hub made for a kind it serves built in: a member's would be overwritten

        claimed_by = policy_ref_of_binding(binding)
        policies = ctx.propagation_policies(ref.namespace)
        match = select_policy(workload, policies, claimed_by=claimed_by, served_as=ctx.served_as(rt))
        if match is None:
            workload = await self._release(rt, workload, binding)
            if binding is None:
                await self._set_propagated(
                    rt, workload, False, PropagatedReason.NO_POLICY_MATCHED,
                    "no PropagationPolicy or ClusterPropagationPolicy selects this workload; "
                    "it stays on the hub and runs in no member cluster",
                )
            else:
                former = describe_policy(claimed_by) if claimed_by else "a policy"
                await self._set_propagated(
                    rt, workload, True, PropagatedReason.POLICY_REMOVED,
                    f"{former} no longer claims this workload; it keeps running where it was placed "
                    "(delete the workload to remove it from the members)",
                )
            return None

        gate = self.admission.gate(workload)
        if gate.held is not None and (binding is None or gate.evicted):
            if binding is not None:
                # Preempted: its Works go, and with them its pods in every member.
                log.info("workload %s evicted by admission; deleting its binding", ref)
                await ctx.delete(ctx.binding_rt, ref.binding_namespace, ref.binding_name)
            await self._set_propagated(rt, workload, False, PropagatedReason.WAITING_FOR_QUOTA, gate.held)
            return None
        priority = resolve_schedule_priority(
            match.policy.spec.schedule_priority,
            priority_classes=self._priority_classes.items() if self._priority_classes is not None else (),
        )
        refused = _refusal(rt, workload)  # a webhook is called only for an object the checks accept, as a script is run
        if refused is None and self._runtimes.unlisted(workload):
            return UNSYNCED_RETRY_SECONDS
        if refused is None and (missing := self._runtimes.missing(workload)) is not None:
            if binding is None:  # else the binding written earlier stands: its pods run where they are
                await self._set_propagated(rt, workload, False, PropagatedReason.RUNTIME_NOT_FOUND, missing)
            return None
        replicas = await webhook_replicas(ctx, workload, match.ref) if refused is None else None
        # Read with its DRA claims' GPUs, and a TrainJob with its runtime.
        spec = refused or _interpret(
            workload, match, binding, priority=priority, replicas=replicas, claims=self._claims,
            runtimes=self._runtimes,
        )
        if isinstance(spec, InvalidObject):
            # A value, not a retry: nothing changes until the object does (its next event).
            await self._report_invalid(rt, workload, spec)
            return None
        for unread in self._claims.unread(workload):
            await record_event(ctx, workload, type=EventType.WARNING, reason=EventReason.DEVICE_CLASS_NOT_READ,
                               message=f"{unread}; the devices its requests ask are not counted in placement")
        constrain_placement(spec, gate.cluster_labels)
        restrict_to_clusters(spec, gate.cluster_names)
        # The workload's claim first (finalizer, claim marks, Propagated: one write), then the
        # binding, as Karmada claims a template before it builds the binding: a Deployment's
        # marked annotations move its generation, which the binding then names from the start. A
        # workload deleted in between: the deletion controller finds no binding and lets it go;
        # a binding written after that is deleted by the reconcile of the workload gone (above).
        claimed = await self._claim(rt, workload, match, f"claimed by {describe_policy(match.ref)}")
        if claimed is not None:
            self._own_writes.wrote(claimed)
            workload = claimed
            meta = ObjectView(claimed).metadata
            spec["resource"].update({k: meta[k] for k in ("resourceVersion", "generation") if meta.get(k) is not None})
        written = await self._write_binding(ref, workload, match, binding, spec=spec)
        if written is not binding:
            self._own_writes.wrote(written)
        await set_priority_condition(ctx, written, priority, workload=workload)
        return None

    async def _claim(
        self, rt: ResourceType, workload: dict[str, Any], match: PolicyMatch, message: str
    ) -> dict[str, Any] | None:
        """The workload's finalizer, Karmada's claim marks (:mod:`policies.claims`) and
        ``Propagated=True`` (Claimed): one write where they change."""
        finalizers = list(ObjectView(workload).finalizers)
        body = workload
        # The object layer copies what it writes: the cached workload is not changed here.
        if (marked := with_claim_marks(workload["metadata"], match.policy)) is not None:
            body = {**workload, "metadata": marked}
        if FINALIZER_WORKLOAD not in finalizers:
            body = {**body, "metadata": {**body["metadata"], "finalizers": [*finalizers, FINALIZER_WORKLOAD]}}
        status = self._propagated_status(rt, workload, True, PropagatedReason.CLAIMED, message)
        if status is None:
            return await self.ctx.objects.update(rt, body) if body is not workload else None
        if body is workload:
            return await self.ctx.objects.update_status(rt, {**workload, "status": status})
        return await self.ctx.objects.update_with_status(rt, {**body, "status": status})

    async def _release(self, rt: ResourceType, workload: dict[str, Any], binding: dict[str, Any] | None) -> dict[str, Any]:
        """No policy claims the workload now: Karmada's claim marks leave its binding (which stays),
        then the workload (``handleResourceTemplateAndBindingCleanup``'s order); the workload as written."""
        for kind_rt, obj in ((self.ctx.binding_rt, binding), (rt, workload)):
            if obj is not None and (released := with_claim_marks(obj["metadata"], None)) is not None:
                written = await self.ctx.objects.update(kind_rt, {**obj, "metadata": released})
                self._own_writes.wrote(written)
                workload = written if obj is workload else workload
        return workload

    async def _write_binding(
        self,
        ref: WorkloadRef,
        workload: dict[str, Any],
        match: PolicyMatch,
        binding: dict[str, Any] | None,
        *,
        spec: dict[str, Any],
    ) -> dict[str, Any]:
        """Create or update the binding with ``spec``; return it as written (or as it is, when unchanged)."""
        ctx = self.ctx
        if binding is None:
            if not ref.namespace:
                await ctx.ensure_namespace(ref.binding_namespace)
            metadata = {"name": ref.binding_name, "namespace": ref.binding_namespace}
            created = {
                "apiVersion": ctx.binding_rt.api_version,
                "kind": ctx.binding_rt.kind,
                "metadata": with_claim_marks(metadata, match.policy) or metadata,
                "spec": spec,
            }
            try:
                written = await ctx.objects.create(ctx.binding_rt, created)
            except errors.AlreadyExists:
                # Created by an earlier reconcile whose event the cache has not seen yet.
                raise errors.Conflict(f"binding {ref.binding_namespace}/{ref.binding_name} exists already") from None
            log.info("binding %s/%s created for %s (%s)", ref.binding_namespace, ref.binding_name, ref, describe_policy(match.ref))
            return written
        marked = with_claim_marks(binding["metadata"], match.policy)  # the policy's marks, as on the workload
        if marked is None and _comparable(binding.get("spec")) == _comparable(spec):
            return binding
        updated = copy.deepcopy(binding)
        updated["spec"] = spec
        if marked is not None:
            updated["metadata"] = marked
        written = await ctx.objects.update(ctx.binding_rt, updated)
        if match.preempted is not None:
            await record_event(
                ctx, workload, type=EventType.NORMAL, reason=EventReason.POLICY_PREEMPTED,
                message=f"{describe_policy(match.ref)} preempted {describe_policy(match.preempted)}",
            )
        return written

    async def _report_invalid(self, rt: ResourceType, workload: dict[str, Any], invalid: InvalidObject) -> None:
        """``Propagated=False`` (InvalidObject) and a Warning Event naming the field, once per change."""
        message = f"not propagated: {invalid.message}; correct the object and it propagates"
        meta = ObjectView(workload).metadata
        changed = await self._set_propagated(rt, workload, False, PropagatedReason.INVALID_OBJECT, message)
        if changed:
            log.warning(
                "%s %s/%s is malformed: %s", workload.get("kind"), meta.get("namespace"), meta.get("name"), invalid.message
            )
            await record_event(
                self.ctx, workload, type=EventType.WARNING, reason=EventReason.INVALID_OBJECT, message=message
            )

    async def _set_propagated(
        self, rt: ResourceType, workload: dict[str, Any], status: bool, reason: PropagatedReason, message: str
    ) -> bool:
        """Set the ``Propagated`` condition; True when it changed (or the kind keeps no status)."""
        if not keeps_propagated_condition(rt):
            return True
        status_block = self._propagated_status(rt, workload, status, reason, message)
        if status_block is None:
            return False
        await self.ctx.objects.update_status(rt, {**workload, "status": status_block})
        return True

    def _propagated_status(
        self, rt: ResourceType, workload: dict[str, Any], status: bool, reason: PropagatedReason, message: str
    ) -> dict[str, Any] | None:
        """The workload's status with the ``Propagated`` condition set (and a job's suspension
        while the hub holds it, :func:`with_job_suspension`); None: set so already, or kept by no status."""
        if not keeps_propagated_condition(rt):
            return None
        view, now = ObjectView(workload), self.ctx.now_text()
        wanted = {"type": str(WorkloadConditionType.PROPAGATED), "status": str(status), "reason": str(reason), "message": message}
        current = workload.get("status")
        current = current if isinstance(current, dict) else {}
        new = {**current, "conditions": with_condition(view.conditions, wanted, now=now)}
        if not (status and condition_is_true(workload, WorkloadConditionType.PROPAGATED)):  # held, or claimed now
            new = with_job_suspension(rt, workload, new, now=now)
        return None if new == current else new


def _refusal(rt: ResourceType, workload: dict[str, Any]) -> InvalidObject | None:
    """Why the workload cannot be read or is one kube would refuse (stored before the API validated its kind)."""
    invalid = shape_problem(rt, workload)
    # A CRD the hub lists for a kind it serves built in carries the server's mark, which a create refuses.
    old = workload if is_view(workload) else None
    refused = rt.validate(workload, old) if invalid is None and rt.validate is not None else []
    if refused:
        return InvalidObject(path=refused[0].field, expected="object", found="object", body=refused[0].message)
    return invalid


def _interpret(
    workload: dict[str, Any],
    match: PolicyMatch,
    binding: dict[str, Any] | None,
    *,
    priority: PriorityResolution | None,
    replicas: dict[str, Any] | None = None,
    claims: ClaimSpecs | None = None,
    runtimes: TrainingRuntimes | None = None,
) -> dict[str, Any] | InvalidObject:
    """The binding spec of a workload :func:`_refusal` accepts, or :class:`InvalidObject` when it cannot be read.
    ``claims``: the hub's DRA objects, for the GPUs its pods claim and the devices they share; ``runtimes``:
    the TrainingRuntimes a TrainJob is read with. All of it is read inside the guard: a shape the checks
    before do not know (a custom kind's pod spec, which no check reads) is the object's InvalidObject,
    not a retry. No I/O."""
    try:
        readable = claims.resolved(workload) if claims is not None else workload
        readable = runtimes.resolved(readable) if runtimes is not None else readable
        shared = claims.shared(workload) if claims is not None else None
        roles_shared = claims.roles_shared(workload) if claims is not None else None
        return binding_spec(
            readable, match.policy, binding, schedule_priority=priority.priority if priority is not None else None,
            webhook_replicas=replicas, shared=shared, roles_shared=roles_shared,
        )
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # A shape the check above does not know yet: still a value, with what the reader hit.
        return InvalidObject(
            path="<object>", expected="object", found="object", detail=f"cannot be read ({type(exc).__name__}: {exc})"
        )


__all__ = ["Detector", "PriorityResolution", "binding_priority", "binding_spec", "describe_policy", "resolve_schedule_priority"]
