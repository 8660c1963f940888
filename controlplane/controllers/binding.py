"""The binding controller: a scheduled binding -> one Work per chosen cluster.

In: a ResourceBinding with ``spec.clusters``, its hub workload, the OverridePolicies and
ClusterOverridePolicies that select the workload, the claiming policy (for
``conflictResolution`` and ``suspension``) and the Clusters (for the overrides'
``targetCluster``). Out: in ``gpufed-es-<cluster>`` (created when missing) a Work named
``<namespace>-<name>-<kind>`` labelled ``work.gpufed.io/binding=<binding>`` and
``work.gpufed.io/namespace=<namespace>``, holding the workload rendered for that cluster
(``works.render_manifest``: replicas revised (by a ReviseReplica webhook first, see
``webhookinterpreting``), GPU shape rewritten, Kueue's queue label kept
for a member that runs Kueue and stripped otherwise, overrides applied); Works
of clusters no longer chosen are deleted, and so are all of a binding's Works once the
binding or its workload is gone or being deleted. The Work of a cluster with a graceful
eviction task (``spec.gracefulEvictionTasks``) is left exactly as it is — neither rewritten
nor deleted — until the task ends (see ``evicting``): it keeps the old replicas running
while their replacements start elsewhere.

``preserveResourcesOnDeletion``: each Work carries the binding's flag (an attached binding's
Works, ``propagateDeps``, carry it when any binding that needs the object has it, as
Karmada's dependencies distributor aggregates it). The agent leaves a deleted Work's objects
in the member when its flag is set. Only deleting the workload (or its binding) should do
that. (Karmada's execution controller preserves on any deletion of a flagged Work, orphaned
Works of a rescheduling included; gpufed follows its documented meaning: "when the resource
template is deleted".) An attached binding whose needing binding is gone keeps the flag its
Works have, so the copies of a deleted, preserved workload's ConfigMaps and Secrets stay with it.

A preserving Work whose cluster left the placement (rescheduling, scale-down, failover) is
therefore *released* before it is deleted (:func:`release_step`):

1. its flag is cleared and the annotation ``work.gpufed.io/preserve-cleared-at`` records when;
2. it is deleted only once its agent has seen the cleared flag: the Work's ``Applied``
   condition has an ``observedGeneration`` at least the Work's generation (the agent records
   the flag of every generation it applies in its ledger, so from then on it deletes the copy
   on the Work's deletion, even after a restart or a reconnection that only shows it gone);
3. or at once when the Cluster is gone or being deleted (its agent will not come back);
4. or, for an agent that does not apply it (the Work is suspended, its member API is down),
   once the cluster has been Ready for ``graceful_eviction_timeout_seconds`` since the clearing
   (counted from the later of the clearing and the Ready condition's last transition): an
   agent connected that long has the cleared flag from its watch and deletes the copy too.

While the cluster is not Ready the Work stays, however long: an agent cut off when the flag
was cleared (exactly the failover case) sees only the deletion when it comes back and would
fall back to the flag it last applied, releasing a copy that then runs unmanaged, twice,
holding GPUs. A cluster that never comes back is removed with its Cluster object, which ends
the wait (3). Deleting the workload meanwhile deletes the Work at once; its flag is already
cleared, so that copy goes too, as it should: its cluster had left the placement before.
A Work whose cluster is chosen again loses the annotation when it is rewritten.

A Work is written only when what it should hold differs from what it holds (compare and
swap on its resourceVersion), so reconciling again, or a restarted hub, rewrites nothing.
When an override rule cannot be applied for a cluster, that cluster's Work is left as it
is (not created when absent) and an ``OverrideFailed`` Event names the rule.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from controlplane.apis.cluster_v1alpha1 import runs_kueue
from controlplane.apis.constants import execution_namespace
from controlplane.apis.events import EventType
from controlplane.apis.kube.generation import content_changed
from controlplane.apis.timestamps import parse_time
from controlplane.apis.untyped import as_int
from controlplane.apis.views import BindingView, ClusterObjectView, ObjectView, WorkView
from controlplane.apis.work_v1alpha1 import BindingKey, binding_name
from controlplane.controllers.context import (
    INDEX_BINDING,
    INDEX_CLUSTER,
    INDEX_NAMESPACE,
    INDEX_POLICY,
    UNSYNCED_RETRY_SECONDS,
    ControllerContext,
    not_listed,
    policy_key,
    policy_ref_of_binding,
)
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.failover import evicting_clusters
from controlplane.controllers.informing import spec_unchanged
from controlplane.controllers.reconciling import KeyedController, OwnWrites
from controlplane.controllers.webhookinterpreting import revised_by_webhook
from controlplane.controllers.workloads import binding_namespace, is_deleting, shape_problem
from controlplane.controllers.works import (
    binding_key_of_work,
    build_work,
    cluster_of_namespace,
    decode_packing,
    decode_shapes,
    decode_steering,
    preserves,
    render_manifest,
    work_differs,
    work_name,
    works_preserve,
)
from controlplane.interpreter import interpreter_for
from controlplane.objectclient import WatchEventType, errors
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import ClusterView
from policies.matching import PolicyRef, collect_override_rules
from policies.models import AnyPropagationPolicy

log = logging.getLogger(__name__)


# TODO(constants): move to controlplane/apis/constants.py.
ANNOTATION_PRESERVE_CLEARED = "work.gpufed.io/preserve-cleared-at"
"""On a Work: when (RFC 3339) its ``preserveResourcesOnDeletion`` was cleared because its
cluster left the placement; the Work waits for its agent to apply that generation."""

RELEASE_RECHECK_SECONDS = 60.0
"""How often a released Work past its timeout in a cluster that is not Ready is looked at again
(the agent's status report, or the Cluster's deletion, bring it back sooner)."""


class ReleaseVerdict(StrEnum):
    """What to do next with the Work of a cluster that left the placement."""

    CLEAR = "ClearFlag"
    """It preserves: clear the flag (and record when) before anything else."""
    WAIT = "Wait"
    """The flag is cleared, but the agent may not know yet: keep the Work for now."""
    DELETE = "Delete"


@dataclass(frozen=True, slots=True)
class ReleaseStep:
    verdict: ReleaseVerdict
    why: str
    again: float | None = None
    """For WAIT: seconds until the verdict may change by time alone."""


def applied_generation(work: Mapping[str, Any]) -> int | None:
    """The ``observedGeneration`` of the Work's ``Applied`` condition (None when not reported)."""
    for cond in WorkView(work).conditions:
        if isinstance(cond, Mapping) and cond.get("type") == "Applied":
            value = cond.get("observedGeneration")
            return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def ready_since(cluster: Mapping[str, Any]) -> datetime | None:
    """Since when the Cluster is Ready (its Ready condition's ``lastTransitionTime``); None when
    it is not Ready. An unreadable or missing time counts as the start of time."""
    for cond in ClusterObjectView(cluster).conditions:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            if cond.get("status") != "True":
                return None
            try:
                return parse_time(str(cond.get("lastTransitionTime")))
            except ValueError:
                return datetime.min.replace(tzinfo=UTC)
    return None


def release_step(
    work: Mapping[str, Any], *, cluster: Mapping[str, Any] | None, now: datetime, timeout_seconds: float
) -> ReleaseStep:
    """The next step for a Work whose cluster left the placement (``cluster``: its Cluster, None
    when gone); see the module docstring for the rule. Pure."""
    view = WorkView(work)
    if cluster is None or ClusterObjectView(cluster).is_deleting:
        return ReleaseStep(ReleaseVerdict.DELETE, "its cluster is removed")
    if preserves(work):
        return ReleaseStep(ReleaseVerdict.CLEAR, "it preserves its objects on deletion")
    cleared_text = view.annotations.get(ANNOTATION_PRESERVE_CLEARED)
    if cleared_text is None:
        return ReleaseStep(ReleaseVerdict.DELETE, "it does not preserve its objects")
    generation = int(view.generation or 0)
    seen = applied_generation(work)
    if seen is not None and seen >= generation:
        return ReleaseStep(ReleaseVerdict.DELETE, f"its agent applied generation {seen} without the flag")
    ready = ready_since(cluster)
    if ready is None:
        return ReleaseStep(
            ReleaseVerdict.WAIT, "its cluster is not Ready: its agent must see the cleared flag first",
            again=RELEASE_RECHECK_SECONDS,
        )
    try:
        cleared = parse_time(str(cleared_text))
    except ValueError:
        cleared = ready  # unreadable: count from the cluster's readiness alone
    waited = (now - max(cleared, ready)).total_seconds()
    if waited < timeout_seconds:
        return ReleaseStep(
            ReleaseVerdict.WAIT, "its agent has not applied the cleared flag yet", again=timeout_seconds - waited
        )
    return ReleaseStep(
        ReleaseVerdict.DELETE,
        f"its cluster has been Ready for {timeout_seconds:g}s since the flag was cleared, its agent "
        "has the cleared flag from its watch",
    )


def _workload_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether a workload changed in what its Works carry (not a status-only write): its
    content (a ConfigMap's data as a Deployment's spec), labels, annotations or deletion."""
    if old is None:
        return True
    before, after = ObjectView(old).metadata, ObjectView(new).metadata
    return any(
        before.get(key) != after.get(key) for key in ("labels", "annotations", "deletionTimestamp")
    ) or content_changed(old, new)


def _suspended(policy: AnyPropagationPolicy | None, cluster: str) -> bool:
    suspension = policy.spec.suspension if policy else None
    if suspension is None:
        return False
    if suspension.dispatching:
        return True
    on = suspension.dispatching_on_clusters
    return bool(on and cluster in (on.cluster_names or ()))


def _differs(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """:func:`work_differs`, and a Work released while its cluster was out of the placement."""
    annotations = ObjectView(existing).annotations
    return work_differs(existing, desired) or ANNOTATION_PRESERVE_CLEARED in annotations


class BindingController(KeyedController[BindingKey]):
    """Reconciles bindings (keys: ``(namespace, name)``) into Works."""

    name = "binding"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._views: dict[str, tuple[str, ClusterView]] = {}
        self._namespaces: set[str] = set()
        self._override_errors: dict[tuple[BindingKey, str], str] = {}
        #: Bindings whose workload is malformed, with the message last reported for each.
        self._invalid: dict[BindingKey, str] = {}
        #: The Works its reconciles created: their ADDED events bring nothing new back.
        self._created_works = OwnWrites()
        ctx.bindings.add_handler(self._on_binding)
        ctx.works.add_handler(self._on_work)
        ctx.clusters.add_handler(self._on_cluster)
        ctx.add_workload_handler(self._on_workload)
        for rt in ctx.override_types:
            ctx.informer(rt).add_handler(self._on_override_policy)
        for rt in ctx.propagation_types:
            ctx.informer(rt).add_handler(self._on_propagation_policy)

    # --- event handlers ---------------------------------------------------------------

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if spec_unchanged(old, obj, event) and (
            old["metadata"].get("annotations") == obj["metadata"].get("annotations")
        ) and not is_deleting(obj):
            return
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace")), str(meta["name"])
        await self.loop.add((namespace, name))
        if old is not None and preserves(old) != preserves(obj):
            # The attached bindings of the objects it needs carry the flag too.
            for attached in self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace):
                needed_by = BindingView(attached).spec.get("requiredBy") or ()
                if any(str(parent.get("name")) == name for parent in needed_by):
                    await self.loop.add((namespace, str(attached["metadata"]["name"])))

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.ADDED and self._created_works.is_echo(obj):
            return  # created by the reconcile of its binding, which made the rest of it too
        if spec_unchanged(old, obj, event) and (
            old["metadata"].get("labels") == obj["metadata"].get("labels")
        ) and ANNOTATION_PRESERVE_CLEARED not in (obj["metadata"].get("annotations") or {}):
            return  # a status report (one of a released Work's may end its wait)
        key = binding_key_of_work(obj)
        if key is not None:
            await self.loop.add(key)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and not _workload_changed(old, obj):
            return
        meta = obj["metadata"]
        key = (binding_namespace(meta.get("namespace")), binding_name(str(meta["name"]), str(obj.get("kind"))))
        if self.ctx.bindings.get(*key) is None and not self.ctx.works.index_keys(INDEX_BINDING, key):
            return  # not propagated (yet): the binding's own events bring it here
        await self.loop.add(key)

    async def _on_override_policy(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if spec_unchanged(old, obj, event):
            return
        namespace = ObjectView(obj).metadata.get("namespace")
        keys = (
            self.ctx.bindings.index_keys(INDEX_NAMESPACE, namespace)
            if namespace
            else [(b["metadata"].get("namespace") or "", b["metadata"]["name"]) for b in self.ctx.bindings.items()]
        )
        for key in keys:
            await self.loop.add(key)

    async def _on_propagation_policy(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if spec_unchanged(old, obj, event):
            return
        meta = ObjectView(obj).metadata
        ref = PolicyRef(kind=str(obj.get("kind")), name=str(meta.get("name")), namespace=meta.get("namespace") or None)
        for key in self.ctx.bindings.index_keys(INDEX_POLICY, policy_key(ref)):
            await self.loop.add(key)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = ObjectView(obj).metadata
        removed = event is WatchEventType.DELETED or bool(meta.get("deletionTimestamp"))
        if removed or (old is not None and ready_since(old) != ready_since(obj)):
            # Released Works wait in the cluster's namespace for its agent: the cluster's removal
            # ends that, and its readiness starts (or stops) the clock of a connected agent.
            namespace = execution_namespace(str(meta.get("name")))
            for work in self.ctx.works.items():
                work_meta = WorkView(work).metadata
                if work_meta.get("namespace") == namespace and ANNOTATION_PRESERVE_CLEARED in (
                    work_meta.get("annotations") or {}
                ):
                    binding = binding_key_of_work(work)
                    if binding is not None:
                        await self.loop.add(binding)
        if spec_unchanged(old, obj, event) and (
            ObjectView(old).metadata.get("labels") == meta.get("labels")
        ):
            return  # a capacity report: overrides do not depend on it
        for key in self.ctx.bindings.index_keys(INDEX_CLUSTER, str(meta.get("name"))):
            await self.loop.add(key)

    # --- reconcile --------------------------------------------------------------------

    def _view(self, cluster: str) -> ClusterView:
        obj = self.ctx.clusters.get(None, cluster)
        if obj is None:
            return ClusterView(name=cluster)
        version = str(obj["metadata"].get("resourceVersion"))
        cached = self._views.get(cluster)
        if cached is not None and cached[0] == version:
            return cached[1]
        view = ClusterSnapshot.from_cluster(obj).view
        self._views[cluster] = (version, view)
        return view

    def _preserve(self, binding: dict[str, Any], existing: list[dict[str, Any]]) -> bool:
        """The ``preserveResourcesOnDeletion`` the binding's Works carry (see the module docstring)."""
        needed_by = BindingView(binding).spec.get("requiredBy")
        namespace = str(binding["metadata"].get("namespace"))
        parents = [
            self.ctx.bindings.get(str(parent.get("namespace") or namespace), str(parent.get("name")))
            for parent in needed_by or ()
        ]
        return works_preserve(binding, parents=parents, existing=existing)

    async def _release_and_delete(self, key: BindingKey, works: list[dict[str, Any]]) -> float | None:
        """Delete the Works whose cluster left the placement, a preserving one only once it is
        released (:func:`release_step`); return when to look again (None: nothing waits)."""
        ctx = self.ctx
        again: float | None = None
        for work in works:
            meta = work["metadata"]
            namespace, name = meta.get("namespace"), str(meta["name"])
            cluster_name = cluster_of_namespace(str(namespace or ""))
            cluster = ctx.clusters.get(None, cluster_name) if cluster_name else None
            timeout = float(ctx.settings.graceful_eviction_timeout_seconds)
            step = release_step(work, cluster=cluster, now=ctx.now(), timeout_seconds=timeout)
            if step.verdict is ReleaseVerdict.CLEAR:
                released = copy.deepcopy(work)
                released["spec"].pop("preserveResourcesOnDeletion", None)
                annotations = released["metadata"].setdefault("annotations", {})
                annotations[ANNOTATION_PRESERVE_CLEARED] = ctx.now_text()
                try:
                    work = await ctx.objects.update(ctx.work_rt, released)
                except errors.NotFound:
                    continue
                log.info("work %s/%s: no longer preserved (its cluster left the placement); deleted once "
                         "its agent has applied that", namespace, name)
                step = release_step(work, cluster=cluster, now=ctx.now(), timeout_seconds=timeout)
            if step.verdict is ReleaseVerdict.WAIT:
                log.debug("work %s/%s kept: %s", namespace, name, step.why)
                if step.again is not None:
                    again = step.again if again is None else min(again, step.again)
                continue
            await ctx.delete(ctx.work_rt, namespace, name)
            log.info("work %s/%s of binding %s/%s deleted: %s", namespace, name, *key, step.why)
        return again

    async def _delete_works(self, key: BindingKey, works: list[dict[str, Any]]) -> None:
        for work in works:
            meta = work["metadata"]
            await self.ctx.delete(self.ctx.work_rt, meta.get("namespace"), meta["name"])
            log.info("work %s/%s of binding %s/%s deleted", meta.get("namespace"), meta["name"], *key)

    async def reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        existing = ctx.works.by_index(INDEX_BINDING, key)
        binding = ctx.bindings.get(key[0], key[1])  # cached: Work writes are compare-and-swaps
        resource = BindingView(binding).resource
        api_version, kind = str(resource.get("apiVersion")), str(resource.get("kind"))
        informer = ctx.workload_informer(api_version, kind)
        if not_listed(informer):
            return UNSYNCED_RETRY_SECONDS  # not listed yet: its Works stay until the workload is known gone
        workload = informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None
        if binding is None or is_deleting(binding) or workload is None or is_deleting(workload):
            await self._delete_works(key, existing)
            return None
        targets = BindingView(binding).spec.get("clusters")
        if targets is None:
            return None  # not scheduled yet
        invalid = shape_problem(informer.rt, workload) if informer is not None else None
        if invalid is not None:
            await self._workload_invalid(key, workload, invalid.message)
            return None  # looked at again when the workload changes
        self._invalid.pop(key, None)
        interpreter = interpreter_for(api_version, kind)
        served_as = ctx.served_as(informer.rt) if informer is not None else None
        rules = collect_override_rules(workload, ctx.override_policies(key[0]), served_as=served_as)
        policy_ref = policy_ref_of_binding(binding)
        policy = ctx.propagation_policy(policy_ref) if policy_ref else None
        shapes = decode_shapes(binding)
        steering = decode_steering(binding)
        packing = decode_packing(binding)
        preserve = self._preserve(binding, existing)
        name = work_name(key[0], str(resource.get("name")), kind)
        keep: set[str] = set()
        split = {str(t["name"]): int(t.get("replicas") or 0) for t in targets}
        for target in targets:
            cluster = str(target["name"])
            keep.add(cluster)
            revised = await revised_by_webhook(  # before the pure rendering; a failed call writes no Work
                ctx, workload, binding, int(target.get("replicas") or 0), f"{execution_namespace(cluster)}/{name}"
            )
            rendered = render_manifest(
                revised,
                interpreter=interpreter,
                replicas=int(target.get("replicas") or 0),
                shape=shapes.get(cluster),
                rules=rules,
                cluster=self._view(cluster),
                member_runs_kueue=runs_kueue(ctx.clusters.get(None, cluster)),
                split=split,
                steering=steering.get(cluster, ()),
                packing=packing.get(cluster, ()),
            )
            if rendered.error is not None:
                await self._override_failed(key, cluster, workload, str(rendered.error))
                continue
            self._override_errors.pop((key, cluster), None)
            desired = build_work(
                cluster=cluster,
                name=name,
                binding_namespace=key[0],
                binding=key[1],
                manifest=rendered.manifest,
                conflict_resolution=policy.spec.conflict_resolution if policy else None,
                suspend_dispatching=_suspended(policy, cluster),
                preserve_resources_on_deletion=preserve,
                resource_generation=as_int(ObjectView(workload).generation) or None,
            )
            await self._write_work(desired)
        keep |= evicting_clusters(binding.get("spec") or {})  # graceful eviction: the old copy stays for now
        stale = [
            w for w in existing if cluster_of_namespace(str(w["metadata"].get("namespace") or "")) not in keep
        ]
        return await self._release_and_delete(key, stale)

    async def _write_work(self, desired: dict[str, Any]) -> None:
        ctx = self.ctx
        namespace, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
        cached = ctx.works.get(namespace, name)
        if cached is not None and not _differs(cached, desired):
            return
        # A Work the informer has not seen is most likely new: create it without reading first
        # (one etcd call instead of two); one that exists after all is read and compared.
        if cached is None and await self._created(desired):
            return
        current = await ctx.get(ctx.work_rt, namespace, name)
        if current is None:  # deleted meanwhile: the retry (after the informer has seen it) creates it
            raise errors.conflict_modified(plural=ctx.work_rt.plural, group=ctx.work_rt.group, name=name)
        if not _differs(current, desired):
            return
        updated = copy.deepcopy(current)
        updated["spec"] = desired["spec"]
        updated["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}), **desired["metadata"]["labels"]}
        annotations = desired["metadata"].get("annotations")
        if annotations:
            updated["metadata"]["annotations"] = {**(current["metadata"].get("annotations") or {}), **annotations}
        (updated["metadata"].get("annotations") or {}).pop(ANNOTATION_PRESERVE_CLEARED, None)  # chosen again
        await ctx.objects.update(ctx.work_rt, updated)
        log.info("work %s/%s updated", namespace, name)

    async def _created(self, work: dict[str, Any]) -> bool:
        """Create ``work``; False when it already exists."""
        namespace, name = work["metadata"]["namespace"], work["metadata"]["name"]
        await self.ctx.ensure_namespace(namespace)
        try:
            self._created_works.wrote(await self.ctx.objects.create(self.ctx.work_rt, work))
        except errors.AlreadyExists:
            return False
        log.info("work %s/%s created", namespace, name)
        return True

    async def _workload_invalid(self, key: BindingKey, workload: dict[str, Any], message: str) -> None:
        """The workload became malformed after it was placed: its Works stay as they are."""
        if self._invalid.get(key) == message:
            return
        self._invalid[key] = message
        log.warning("binding %s/%s: its workload is malformed (%s); its Works are left as they were", *key, message)
        await record_event(
            self.ctx, workload, type=EventType.WARNING, reason=EventReason.INVALID_OBJECT,
            message=f"{message}; its Works in the member clusters are left as they were",
        )

    async def _override_failed(self, key: BindingKey, cluster: str, workload: dict[str, Any], message: str) -> None:
        log.warning("overrides for binding %s/%s in cluster %s failed: %s", *key, cluster, message)
        if self._override_errors.get((key, cluster)) == message:
            return
        self._override_errors[(key, cluster)] = message
        await record_event(
            self.ctx, workload, type=EventType.WARNING, reason=EventReason.OVERRIDE_FAILED,
            message=f"cluster {cluster}: {message}; its Work is left as it was",
        )


__all__ = [
    "ANNOTATION_PRESERVE_CLEARED",
    "BindingController",
    "ReleaseStep",
    "ReleaseVerdict",
    "applied_generation",
    "ready_since",
    "release_step",
]
