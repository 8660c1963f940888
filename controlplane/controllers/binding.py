"""The binding controller: a scheduled binding -> one Work per chosen cluster.

In: a ResourceBinding with ``spec.clusters``, its hub workload, the OverridePolicies and
ClusterOverridePolicies that select the workload, the claiming policy (for
``conflictResolution`` and ``suspension``) and the Clusters (for the overrides'
``targetCluster``). Out: in ``gpufed-es-<cluster>`` (created when missing) a Work named
``<namespace>-<name>-<kind>`` labelled ``work.gpufed.io/binding=<binding>`` and
``work.gpufed.io/namespace=<namespace>``, holding the workload rendered for that cluster
(``works.render_manifest``: replicas revised, GPU shape rewritten, overrides applied); Works
of clusters no longer chosen are deleted, and so are all of a binding's Works once the
binding or its workload is gone or being deleted. The Work of a cluster with a graceful
eviction task (``spec.gracefulEvictionTasks``) is left exactly as it is — neither rewritten
nor deleted — until the task ends (see ``evicting``): it keeps the old replicas running
while their replacements start elsewhere.

``preserveResourcesOnDeletion``: each Work carries the binding's flag (an attached binding's
Works, ``propagateDeps``, carry it when any binding that needs the object has it, as
Karmada's dependencies distributor aggregates it). The agent leaves a deleted Work's objects
in the member when its flag is set. Only deleting the workload (or its binding) should do
that, so a Work deleted because its cluster left the placement (rescheduling, scale-down,
failover, the cluster's removal) first has its flag cleared, then is deleted: the agent sees
the update before the deletion, and deletes that cluster's copy as usual. (Karmada's
execution controller preserves on any deletion of a flagged Work, orphaned Works of a
rescheduling included; gpufed follows its documented meaning: "when the resource template
is deleted".) An attached binding whose needing binding is gone keeps the flag its Works
have, so the copies of a deleted, preserved workload's ConfigMaps and Secrets stay with it.

A Work is written only when what it should hold differs from what it holds (compare and
swap on its resourceVersion), so reconciling again, or a restarted hub, rewrites nothing.
When an override rule cannot be applied for a cluster, that cluster's Work is left as it
is (not created when absent) and an ``OverrideFailed`` Event names the rule.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any

from controlplane.apis.work_v1alpha1 import binding_name
from controlplane.apiserver import errors
from controlplane.apiserver.objects import WatchEventType
from controlplane.controllers.context import (
    INDEX_BINDING,
    INDEX_CLUSTER,
    INDEX_NAMESPACE,
    INDEX_POLICY,
    ControllerContext,
    policy_key,
    policy_ref_of_binding,
)
from controlplane.controllers.events import EventReason, EventType, record_event
from controlplane.controllers.failover import evicting_clusters
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workloads import is_deleting
from controlplane.controllers.works import (
    binding_key_of_work,
    build_work,
    cluster_of_namespace,
    decode_shapes,
    preserves,
    render_manifest,
    work_differs,
    work_name,
    works_preserve,
)
from controlplane.interpreter import interpreter_for
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import ClusterView
from policies.matching import PolicyRef, collect_override_rules
from policies.models import AnyPropagationPolicy

log = logging.getLogger(__name__)

BindingKey = tuple[str, str]


def _workload_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether a workload changed in what its Works carry (not a status-only write)."""
    if old is None:
        return True
    before, after = old.get("metadata") or {}, new.get("metadata") or {}
    return any(
        before.get(key) != after.get(key) for key in ("generation", "labels", "annotations", "deletionTimestamp")
    )


def _suspended(policy: AnyPropagationPolicy | None, cluster: str) -> bool:
    suspension = policy.spec.suspension if policy else None
    if suspension is None:
        return False
    if suspension.dispatching:
        return True
    on = suspension.dispatching_on_clusters
    return bool(on and cluster in (on.cluster_names or ()))


class BindingController:
    """Reconciles bindings (keys: ``(namespace, name)``) into Works."""

    name = "binding"

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.loop: ReconcileLoop[BindingKey] = ReconcileLoop(self.name, self.reconcile, workers=ctx.settings.workers)
        self._views: dict[str, tuple[str, ClusterView]] = {}
        self._namespaces: set[str] = set()
        self._override_errors: dict[tuple[BindingKey, str], str] = {}
        ctx.bindings.add_handler(self._on_binding)
        ctx.works.add_handler(self._on_work)
        ctx.clusters.add_handler(self._on_cluster)
        for rt in ctx.workload_types:
            ctx.informer(rt).add_handler(self._on_workload)
        for rt in ctx.override_types:
            ctx.informer(rt).add_handler(self._on_override_policy)
        for rt in ctx.propagation_types:
            ctx.informer(rt).add_handler(self._on_propagation_policy)

    # --- event handlers ---------------------------------------------------------------

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and (
            old.get("spec") == obj.get("spec") and old["metadata"].get("annotations") == obj["metadata"].get("annotations")
        ) and not is_deleting(obj):
            return
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace")), str(meta["name"])
        await self.loop.add((namespace, name))
        if old is not None and preserves(old) != preserves(obj):
            # The attached bindings of the objects it needs carry the flag too.
            for attached in self.ctx.bindings.by_index(INDEX_NAMESPACE, namespace):
                needed_by = (attached.get("spec") or {}).get("requiredBy") or ()
                if any(str(parent.get("name")) == name for parent in needed_by):
                    await self.loop.add((namespace, str(attached["metadata"]["name"])))

    async def _on_work(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec") and (
            old["metadata"].get("labels") == obj["metadata"].get("labels")
        ):
            return  # a status report
        key = binding_key_of_work(obj)
        if key is not None:
            await self.loop.add(key)

    async def _on_workload(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event is WatchEventType.MODIFIED and not _workload_changed(old, obj):
            return
        meta = obj["metadata"]
        key = (str(meta.get("namespace")), binding_name(str(meta["name"]), str(obj.get("kind"))))
        if self.ctx.bindings.get(*key) is None and not self.ctx.works.index_keys(INDEX_BINDING, key):
            return  # not propagated (yet): the binding's own events bring it here
        await self.loop.add(key)

    async def _on_override_policy(
        self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec"):
            return
        namespace = (obj.get("metadata") or {}).get("namespace")
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
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec"):
            return
        meta = obj.get("metadata") or {}
        ref = PolicyRef(kind=str(obj.get("kind")), name=str(meta.get("name")), namespace=meta.get("namespace") or None)
        for key in self.ctx.bindings.index_keys(INDEX_POLICY, policy_key(ref)):
            await self.loop.add(key)

    async def _on_cluster(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec") and (
            (old.get("metadata") or {}).get("labels") == meta.get("labels")
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

    async def _ensure_namespace(self, namespace: str) -> None:
        if namespace in self._namespaces:
            return
        ctx = self.ctx
        if await ctx.get(ctx.namespace_rt, None, namespace) is None:
            with contextlib.suppress(errors.AlreadyExists):
                await ctx.objects.create(
                    ctx.namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
        self._namespaces.add(namespace)

    def _preserve(self, binding: dict[str, Any], existing: list[dict[str, Any]]) -> bool:
        """The ``preserveResourcesOnDeletion`` the binding's Works carry (see the module docstring)."""
        needed_by = (binding.get("spec") or {}).get("requiredBy")
        namespace = str(binding["metadata"].get("namespace"))
        parents = [
            self.ctx.bindings.get(str(parent.get("namespace") or namespace), str(parent.get("name")))
            for parent in needed_by or ()
        ]
        return works_preserve(binding, parents=parents, existing=existing)

    async def _release_and_delete(self, key: BindingKey, works: list[dict[str, Any]]) -> None:
        """Delete Works whose cluster left the placement: a preserving one is first updated without
        the flag, so the agent deletes that cluster's copy rather than leaving it behind."""
        for work in works:
            if not preserves(work):
                continue
            released = copy.deepcopy(work)
            released["spec"].pop("preserveResourcesOnDeletion", None)
            meta = work["metadata"]
            try:
                await self.ctx.objects.update(self.ctx.work_rt, released)
            except errors.NotFound:
                continue
            log.info("work %s/%s: no longer preserved (its cluster left the placement)", meta.get("namespace"), meta["name"])
        await self._delete_works(key, works)

    async def _delete_works(self, key: BindingKey, works: list[dict[str, Any]]) -> None:
        for work in works:
            meta = work["metadata"]
            await self.ctx.delete(self.ctx.work_rt, meta.get("namespace"), meta["name"])
            log.info("work %s/%s of binding %s/%s deleted", meta.get("namespace"), meta["name"], *key)

    async def reconcile(self, key: BindingKey) -> float | None:
        ctx = self.ctx
        existing = ctx.works.by_index(INDEX_BINDING, key)
        binding = ctx.bindings.get(key[0], key[1])  # cached: Work writes are compare-and-swaps
        resource = ((binding or {}).get("spec") or {}).get("resource") or {}
        api_version, kind = str(resource.get("apiVersion")), str(resource.get("kind"))
        informer = ctx.workload_informer(api_version, kind)
        workload = informer.get(resource.get("namespace"), str(resource.get("name"))) if informer else None
        if binding is None or is_deleting(binding) or workload is None or is_deleting(workload):
            await self._delete_works(key, existing)
            return None
        targets = (binding.get("spec") or {}).get("clusters")
        if targets is None:
            return None  # not scheduled yet
        interpreter = interpreter_for(api_version, kind)
        rules = collect_override_rules(workload, ctx.override_policies(key[0]))
        policy_ref = policy_ref_of_binding(binding)
        policy = ctx.propagation_policy(policy_ref) if policy_ref else None
        shapes = decode_shapes(binding)
        preserve = self._preserve(binding, existing)
        name = work_name(key[0], str(resource.get("name")), kind)
        keep: set[str] = set()
        for target in targets:
            cluster = str(target["name"])
            keep.add(cluster)
            rendered = render_manifest(
                workload,
                interpreter=interpreter,
                replicas=int(target.get("replicas") or 0),
                shape=shapes.get(cluster),
                rules=rules,
                cluster=self._view(cluster),
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
            )
            await self._write_work(desired)
        keep |= evicting_clusters(binding.get("spec") or {})  # graceful eviction: the old copy stays for now
        stale = [
            w for w in existing if cluster_of_namespace(str(w["metadata"].get("namespace") or "")) not in keep
        ]
        await self._release_and_delete(key, stale)
        return None

    async def _write_work(self, desired: dict[str, Any]) -> None:
        ctx = self.ctx
        namespace, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
        cached = ctx.works.get(namespace, name)
        if cached is not None and not work_differs(cached, desired):
            return
        current = await ctx.get(ctx.work_rt, namespace, name)
        if current is None:
            await self._ensure_namespace(namespace)
            await ctx.objects.create(ctx.work_rt, desired)
            log.info("work %s/%s created", namespace, name)
            return
        if not work_differs(current, desired):
            return
        updated = copy.deepcopy(current)
        updated["spec"] = desired["spec"]
        updated["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}), **desired["metadata"]["labels"]}
        await ctx.objects.update(ctx.work_rt, updated)
        log.info("work %s/%s updated", namespace, name)

    async def _override_failed(self, key: BindingKey, cluster: str, workload: dict[str, Any], message: str) -> None:
        log.warning("overrides for binding %s/%s in cluster %s failed: %s", *key, cluster, message)
        if self._override_errors.get((key, cluster)) == message:
            return
        self._override_errors[(key, cluster)] = message
        await record_event(
            self.ctx, workload, type=EventType.WARNING, reason=EventReason.OVERRIDE_FAILED,
            message=f"cluster {cluster}: {message}; its Work is left as it was",
        )


__all__ = ["BindingController"]
