"""``propagateDeps``: the ConfigMaps, Secrets, ServiceAccount and PVCs a workload's pods need
follow it to exactly the clusters it runs in (Karmada's dependencies distributor).

In: bindings with ``spec.propagateDeps: true`` (the *parents*; the detector copies the
claiming policy's field there, so a binding that outlives its policy keeps its objects), their hub
workloads (the interpreter's ``dependencies`` lists what their pod templates reference; an
InterpretDependency webhook's answer, asked when the parent is reconciled, wins over it unless a
customization's script lists them; a failed call leaves the previous answer, and while a webhook
has never answered for a workload here, nothing its attached bindings record it needing is taken away), the
referenced objects on the hub, and the parents' scheduling results. Out:

* per referenced object that exists on the hub, one **attached** ResourceBinding
  ``<name>-<kind lower>`` in the parents' namespace: ``spec.resource`` names the object,
  ``spec.clusters`` is the union of its parents' clusters (those in ``spec.clusters`` and
  those still holding an evicted copy during a graceful eviction), no placement, no policy,
  and ``spec.requiredBy``, the parents with their clusters (as in Karmada). The binding
  controller renders it into one
  Work per cluster as it does for any plain object; the scheduler leaves it alone
  (:func:`~controlplane.controllers.attachments.is_attached`). One object needed by several
  workloads has one attached binding, so a member never gets two Works for the same object. When no parent needs it any more
  (the parent is deleted, stops referencing it, or its policy turns ``propagateDeps`` off)
  the attached binding is deleted, and with it its Works and the member copies;
* ``preserveResourcesOnDeletion``: a parent whose binding preserves stays in ``requiredBy``
  (with its clusters) while its workload is being deleted, until its binding is gone; then
  the attached Works in the clusters only it needed are deleted here, flag and all, so the
  agents leave those copies with the preserved workload (the binding controller would clear
  the flag first, as for any cluster that leaves a placement; a ``purgeMode: Never`` graceful
  eviction task, reason ``PreservedWorkloadDeleted``, keeps it off those Works meanwhile). In clusters other parents
  still need, it stays listed (*released*: its binding gone) so their Works keep the flag
  until no parent needs those clusters;
* on each parent binding, the condition ``DependenciesPropagated``: True while every
  referenced object follows the workload, False (reason ``DependencyMissing``) naming the
  objects that are referenced but not on the hub, plus a ``DependencyMissing`` Warning Event
  on the workload when that list changes. The workload propagates either way, as in Karmada.

An object that a policy also selects directly keeps its own (independent) binding while that
policy exists: its own policy decides where it goes, and nothing here writes to it. Once the
policy is deleted, such a binding is taken back as an attached one when workloads need the
object (no policy or placement; ``requiredBy`` and the parents' clusters). Karmada also sends it to the
parents' clusters; gpufed does not (the parent's condition names the policy that places it).

Two queues: parents (key: the parent binding's ``(namespace, name)``) fan out to their
dependencies and report; dependencies (key: :class:`DependencyKey`) find their parents among
the bindings last found to need them plus those queued but not yet looked at in this term,
and check each against the cached bindings and workloads. Every change that can alter what a
binding needs queues it as a parent first, so a restarted hub (or a new leader), which starts
with every binding queued, rebuilds everything from the store and never drops a parent it has
not looked at yet; a reconcile costs what its own parents cost, not the namespace's size.
A parent's workload or an object in an informer that has not listed yet (a custom kind just
watched, or one whose list fails on its conversion webhook) is waited for, as the detector and
the binding controller wait (:func:`~controlplane.controllers.context.not_listed`): never taken
for gone, so no attached binding (and no member copy) is deleted meanwhile.

The pure side -- keys, parent snapshots, the attached binding's spec, the condition -- is in
:mod:`controlplane.controllers.attachments`; this module reads the caches and writes.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.apis.events import EventType
from controlplane.apis.kube.generation import content_changed, keeps_generation
from controlplane.apis.views import BindingView, ObjectView
from controlplane.apis.work_v1alpha1 import BindingKey, ConditionType, ScheduledReason, binding_name
from controlplane.controllers.attachments import (
    BindingSnapshot,
    DependencyKey,
    attached_spec,
    binding_is_for,
    dependencies_condition,
    describe_parents,
    describe_policy,
    held_clusters,
    is_attached,
    is_parent_candidate,
    missing_text,
    parent_clusters,
    propagates_deps,
    required_by,
)
from controlplane.controllers.context import (
    INDEX_BINDING,
    INDEX_POLICY,
    UNSYNCED_RETRY_SECONDS,
    ControllerContext,
    not_listed,
    policy_key,
    policy_ref_of_binding,
)
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.informing import spec_unchanged
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.webhookinterpreting import webhook_dependencies
from controlplane.controllers.workloads import find_condition, is_deleting, with_condition
from controlplane.controllers.works import cluster_of_namespace, preserves
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.dependencies import Dependency, is_dependency
from controlplane.interpreter.registry import group_of
from controlplane.interpreter.shape import malformed
from controlplane.interpreter.webhook_calls import webhook_interprets
from controlplane.objectclient import WatchEventType, errors
from policies.matching import PolicyRef

log = logging.getLogger(__name__)



# --- the controller -------------------------------------------------------------------------


class DependenciesController:
    """Two loops: parents (keys: binding ``(namespace, name)``) and dependencies (:class:`DependencyKey`)."""

    name = "dependencies"

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.parents: ReconcileLoop[BindingKey] = ReconcileLoop(
            "dependencies-parents", self.reconcile_parent, workers=ctx.settings.workers, metrics=ctx.workqueue_metrics
        )
        self.loop: ReconcileLoop[DependencyKey] = ReconcileLoop(
            self.name, self.reconcile_dependency, workers=ctx.settings.workers, metrics=ctx.workqueue_metrics
        )
        # Per workload (api group, kind, namespace, name): (generation, its dependencies).
        self._memo: dict[tuple[str, str, str, str], tuple[Any, tuple[Dependency, ...]]] = {}
        # What each parent was last found to need: where to look when that changes. Decisions
        # never read it (a new term starts empty and recomputes from the store).
        self._needed: dict[BindingKey, frozenset[DependencyKey]] = {}
        self._needed_by: dict[DependencyKey, set[BindingKey]] = {}  # the same, the other way round
        # Per namespace: bindings queued as parents and not reconciled since. With ``_needed_by``
        # these are every binding that can need an object (each candidate is checked afresh).
        self._unseen: dict[str, set[BindingKey]] = {}
        # Per parent: the missing objects its last DependencyMissing Event named.
        self._reported: dict[BindingKey, str] = {}
        ctx.bindings.add_handler(self._on_binding)
        ctx.add_workload_handler(self._on_object)
        for rt in ctx.propagation_types:
            ctx.informer(rt).add_handler(self._on_policy)

    @property
    def loops(self) -> list[ReconcileLoop[Any]]:
        return [self.parents, self.loop]

    # --- event handlers -----------------------------------------------------------------

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = ObjectView(obj).metadata
        if spec_unchanged(old, obj, event) and (
            is_deleting(old) == is_deleting(obj)
        ):
            return  # a status write
        resource = BindingView(obj).resource
        if is_dependency(str(resource.get("apiVersion")), str(resource.get("kind"))):
            dependency = DependencyKey(str(meta.get("namespace") or ""), str(resource["kind"]), str(resource.get("name")),
                                       str(resource.get("apiVersion")))
            await self.loop.add(dependency)
            await self._requeue_parents_of(dependency)  # their condition says whether a policy places it
        key = (str(meta.get("namespace") or ""), str(meta.get("name")))
        if is_parent_candidate(obj) or (old is not None and is_parent_candidate(old)) or key in self._needed:
            await self._queue_parent(key)

    async def _on_object(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = ObjectView(obj).metadata
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        kind, api_version = str(obj.get("kind")), str(obj.get("apiVersion"))
        if is_dependency(api_version, kind):
            # Created or deleted (or replaced): its attached binding appears or goes, and the
            # parents' condition changes. Edits reach the Works through the binding controller.
            if event is WatchEventType.MODIFIED and old is not None and (
                ObjectView(old).metadata.get("uid") == meta.get("uid") and is_deleting(old) == is_deleting(obj)
            ):
                return
            key = DependencyKey(namespace, kind, name, api_version)
            await self.loop.add(key)
            await self._requeue_parents_of(key)
            return
        if interpreter_for(api_version, kind) is None and self._dependency_webhook(obj) is None:
            return
        if event is WatchEventType.DELETED:
            self._memo.pop((group_of(api_version), kind, namespace, name), None)
        if event is WatchEventType.MODIFIED and old is not None and (
            not content_changed(old, obj) and is_deleting(old) == is_deleting(obj)
        ):
            return
        parent = (namespace, binding_name(name, kind))
        if self.ctx.bindings.get(*parent) is not None or parent in self._needed:
            await self._queue_parent(parent)

    async def _queue_parent(self, key: BindingKey) -> None:
        """Queue a binding whose needs may have changed; until it is reconciled it is a possible
        parent of every dependency of its namespace (:meth:`parents_of`)."""
        self._unseen.setdefault(key[0], set()).add(key)
        await self.parents.add(key)

    def _seen(self, key: BindingKey) -> None:
        unseen = self._unseen.get(key[0])
        if unseen is not None:
            unseen.discard(key)
            if not unseen:
                del self._unseen[key[0]]

    async def _requeue_parents_of(self, key: DependencyKey) -> None:
        for parent in sorted(self._needed_by.get(key, ())):
            await self.parents.add(parent)

    def _remember(self, parent: BindingKey, keys: frozenset[DependencyKey]) -> frozenset[DependencyKey]:
        """Record what ``parent`` needs now; returns what it needed before."""
        before = self._needed.pop(parent, frozenset())
        for key in before - keys:
            holders = self._needed_by.get(key)
            if holders is not None:
                holders.discard(parent)
                if not holders:
                    del self._needed_by[key]
        for key in keys:
            self._needed_by.setdefault(key, set()).add(parent)
        if keys:
            self._needed[parent] = keys
        return before

    async def _on_policy(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A policy created or deleted: an object's binding it claims is independent only while
        it exists (parents' ``propagateDeps`` reaches here through their bindings)."""
        if event is WatchEventType.MODIFIED:
            return
        meta = ObjectView(obj).metadata
        ref = PolicyRef(kind=str(obj.get("kind")), name=str(meta.get("name")), namespace=meta.get("namespace") or None)
        for binding in self.ctx.bindings.by_index(INDEX_POLICY, policy_key(ref)):
            resource = BindingView(binding).resource
            if is_dependency(str(resource.get("apiVersion")), str(resource.get("kind"))):
                namespace = ObjectView(binding).namespace
                dependency = DependencyKey(namespace, str(resource["kind"]), str(resource.get("name")),
                                           str(resource.get("apiVersion")))
                await self.loop.add(dependency)
                await self._requeue_parents_of(dependency)

    # --- what a parent needs ------------------------------------------------------------

    def _is_independent(self, binding: Mapping[str, Any] | None, key: DependencyKey) -> bool:
        """Whether ``binding`` is ``key``'s own: a policy that still exists claims the object."""
        if binding is None or not binding_is_for(binding, key) or is_attached(binding):
            return False
        ref = policy_ref_of_binding(dict(binding))
        return ref is not None and self.ctx.propagation_policy(ref) is not None

    def _policy_propagates_deps(self, binding: Mapping[str, Any]) -> bool:
        """The claiming policy's ``propagateDeps``, while it exists: a binding written before the
        detector copied the field keeps its objects until the detector rewrites it."""
        ref = policy_ref_of_binding(dict(binding))
        policy = self.ctx.propagation_policy(ref) if ref is not None else None
        return bool(policy is not None and policy.spec.propagate_deps)

    def _workload_of(self, binding: Mapping[str, Any], *, deleting: bool = False) -> dict[str, Any] | None:
        """The binding's cached hub workload; one being deleted only with ``deleting``."""
        resource = BindingView(binding).resource
        informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
        if informer is None or not resource.get("name"):
            return None
        workload = informer.get(resource.get("namespace"), str(resource["name"]))
        if workload is None or (is_deleting(workload) and not deleting):
            return None
        return workload

    def _dependency_webhook(self, workload: Mapping[str, Any]) -> str | None:
        """The InterpretDependency webhook that lists the workload's dependencies, if any: its uid and
        its configuration's resourceVersion (an edited configuration asks again)."""
        webhooks = self.ctx.interpreter_webhooks
        if webhooks is None or not webhook_interprets(webhooks, dict(workload), "InterpretDependency"):
            return None
        hook = webhooks.hook_for(str(workload.get("apiVersion")), str(workload.get("kind")), "InterpretDependency")
        return f"{hook.uid}@{hook.resource_version}" if hook is not None else None

    def _memo_key(self, workload: Mapping[str, Any], webhook: str | None) -> tuple[tuple[str, str, str, str], Any]:
        """The workload's key in the memo and the version of its spec and of who lists its
        dependencies (the webhook, or the interpreter: a customization installed anew is another)."""
        api_version, kind = str(workload.get("apiVersion")), str(workload.get("kind"))
        meta = ObjectView(workload).metadata
        memo_key = (group_of(api_version), kind, str(meta.get("namespace") or ""), str(meta.get("name")))
        # Its spec's version: the generation where kube keeps one, else any write's.
        generation = meta.get("generation") if keeps_generation(group_of(api_version), kind) else None
        interpreter = interpreter_for(api_version, kind) if webhook is None else None
        return memo_key, (meta.get("uid"), generation or meta.get("resourceVersion"), webhook, interpreter)

    def _dependencies_of(self, workload: Mapping[str, Any]) -> tuple[Dependency, ...]:
        webhook = self._dependency_webhook(workload)
        interpreter = interpreter_for(str(workload.get("apiVersion")), str(workload.get("kind")))
        if interpreter is None and webhook is None:
            return ()
        memo_key, version = self._memo_key(workload, webhook)
        cached = self._memo.get(memo_key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if webhook is not None or malformed(workload) is not None or interpreter is None:
            # The detector reports a malformed one on the workload; until it is fixed its objects
            # stay where they are. A webhook's answer is asked for when the parent is reconciled
            # (:meth:`_ask_webhook`); until it comes, the previous one stands.
            return cached[1] if cached is not None else ()
        found = tuple(interpreter.dependencies(dict(workload)))
        self._memo[memo_key] = (version, found)
        return found

    async def _ask_webhook(self, binding: Mapping[str, Any] | None) -> None:
        """Put the answer of the parent's InterpretDependency webhook in the memo, unless it is
        there for the workload's current spec. A failed call raises (with Karmada's event) and
        leaves the memo as it was: the parent is retried with backoff."""
        workload = self._parent_workload(binding)
        webhook = self._dependency_webhook(workload) if workload is not None else None
        if workload is None or webhook is None or malformed(workload) is not None:
            return
        memo_key, version = self._memo_key(workload, webhook)
        cached = self._memo.get(memo_key)
        if cached is not None and cached[0] == version:
            return
        found = await webhook_dependencies(self.ctx, workload)
        if found is not None:
            self._memo[memo_key] = (version, tuple(found))

    def _unanswered(self, binding: Mapping[str, Any] | None) -> bool:
        """Whether ``binding``'s workload has an InterpretDependency webhook that has never answered
        for it here (a restarted hub, or every call failed): what it needs is unknown. One that
        answered for an earlier spec has its previous answer stand."""
        workload = self._parent_workload(binding)
        webhook = self._dependency_webhook(workload) if workload is not None else None
        if workload is None or webhook is None or malformed(workload) is not None:
            return False
        return self._memo_key(workload, webhook)[0] not in self._memo

    def _parent_workload(self, binding: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The workload whose dependencies the parent ``binding`` propagates along: none unless it
        says ``propagateDeps`` and it and its workload are alive — or it preserves and is being
        deleted (its workload or itself), so the objects stay with the member copies it leaves behind."""
        if binding is None or not is_parent_candidate(binding) or is_attached(binding):
            return None
        if not propagates_deps(binding) and not self._policy_propagates_deps(binding):
            return None
        return self._workload_of(binding, deleting=preserves(binding))

    def needed_by(self, binding: Mapping[str, Any] | None) -> tuple[Dependency, ...]:
        """What the parent ``binding`` propagates along (:meth:`_parent_workload`'s dependencies)."""
        workload = self._parent_workload(binding)
        return self._dependencies_of(workload) if workload is not None else ()

    def _unlisted(self, binding: Mapping[str, Any] | None) -> bool:
        """Whether ``binding``'s workload is in an informer not listed yet: what it needs is unknown."""
        resource = BindingView(binding).resource if binding is not None else {}
        return not_listed(self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind"))))

    def parents_of(self, key: DependencyKey) -> list[BindingSnapshot] | None:
        """Every binding of ``key.namespace`` whose workload needs ``key``, with its clusters;
        None while a candidate's workload informer has not listed (it may need ``key``).

        Candidates are the bindings last found to need it and those not looked at since they
        changed (at the start of a term: all of them); each is checked against the cache."""
        wanted = Dependency(key.kind, key.name, key.api_version)
        candidates = self._needed_by.get(key, set()) | self._unseen.get(key.namespace, set())
        recorded = {(p.namespace, p.name) for p in required_by(self.ctx.bindings.get(key.namespace, key.binding_name)) or ()}
        out: list[BindingSnapshot] = []
        for namespace, name in sorted(candidates):
            binding = self.ctx.bindings.get(namespace, name)
            if self._unlisted(binding) or ((namespace, name) in recorded and self._unanswered(binding)):
                return None  # it may still need ``key``: wait, never take it away meanwhile
            if binding is not None and wanted in self.needed_by(binding):
                out.append(BindingSnapshot(key.namespace, name, parent_clusters(binding)))
        return out

    def _dependency_object(self, key: DependencyKey) -> dict[str, Any] | None:
        informer = self.ctx.workload_informer(key.api_version, key.kind)
        obj = informer.get(key.namespace, key.name) if informer is not None else None
        return None if obj is None or is_deleting(obj) else obj

    # --- reconcile: a parent ------------------------------------------------------------

    async def reconcile_parent(self, key: BindingKey) -> float | None:
        binding = self.ctx.bindings.get(key[0], key[1])
        if self._unlisted(binding):
            return UNSYNCED_RETRY_SECONDS  # not listed yet: an absent workload says nothing (it stays unseen)
        await self._ask_webhook(binding)  # a failed call leaves it unseen
        self._seen(key)
        needed = self.needed_by(binding)
        keys = frozenset(DependencyKey.of(key[0], d) for d in needed)
        before = self._remember(key, keys)
        for dep_key in sorted(keys | before):
            await self.loop.add(dep_key)
        if binding is None or is_deleting(binding) or is_attached(binding):
            self._reported.pop(key, None)
            return None
        following: list[Dependency] = []
        missing: list[Dependency] = []
        independent: dict[Dependency, str] = {}
        for dependency in needed:
            dep_key = DependencyKey.of(key[0], dependency)
            if self._dependency_object(dep_key) is None:
                missing.append(dependency)
                continue
            own = self.ctx.bindings.get(key[0], dep_key.binding_name)
            if self._is_independent(own, dep_key):
                independent[dependency] = describe_policy(BindingView(own).policy)
            else:
                following.append(dependency)
        await self.write_parent_condition(binding, dependencies_condition(following, missing, independent), missing=missing)
        return None

    async def write_parent_condition(
        self, binding: dict[str, Any], condition: dict[str, Any] | None, *, missing: Sequence[Dependency]
    ) -> None:
        """Set (or, with None, remove) ``condition`` on the parent ``binding``; a binding deleted
        meanwhile is left alone. A ``DependencyMissing`` Event names newly missing objects first."""
        ctx = self.ctx
        ctype = str(ConditionType.DEPENDENCIES_PROPAGATED)
        conditions = ObjectView(binding).conditions
        current = find_condition(conditions, ctype)
        if condition is None:
            if current is None:
                return
            status = {**ObjectView(binding).status, "conditions": [c for c in conditions if c.get("type") != ctype]}
            await self._update_parent_status(binding, status)
            return
        if current is not None and all(current.get(k) == v for k, v in condition.items()):
            return
        key: BindingKey = (str(binding["metadata"].get("namespace") or ""), str(binding["metadata"].get("name")))
        if missing:
            # The Event first: once the condition names these objects, they count as reported
            # (and a status write that loses a race is retried without a second Event).
            text = missing_text(missing)
            reported = self._reported.get(key) == text or (
                current is not None and str(current.get("message") or "").startswith(text)
            )
            workload = self._workload_of(binding)
            if not reported and workload is not None:
                await record_event(
                    ctx, workload, type=EventType.WARNING,
                    reason=EventReason.DEPENDENCY_MISSING, message=text,
                )
                self._reported[key] = text
        else:
            self._reported.pop(key, None)
        status = copy.deepcopy(binding.get("status") or {})
        status["conditions"] = with_condition(conditions, condition, now=ctx.now_text())
        await self._update_parent_status(binding, status)

    async def _update_parent_status(self, binding: dict[str, Any], status: dict[str, Any]) -> None:
        try:
            await self.ctx.objects.update_status(self.ctx.binding_rt, {**binding, "status": status})
        except errors.NotFound:
            return  # deleted meanwhile: nothing left to report on

    # --- reconcile: a dependency ----------------------------------------------------------

    async def reconcile_dependency(self, key: DependencyKey) -> float | None:
        ctx = self.ctx
        existing = ctx.bindings.get(key.namespace, key.binding_name)
        if existing is not None and not binding_is_for(existing, key):
            log.warning("%s: binding %s/%s belongs to another object; not propagated", key, key.namespace, key.binding_name)
            return None
        if self._is_independent(existing, key):
            await self._release_independent(existing or {})
            return None
        if existing is not None and is_deleting(existing):
            return None  # its DELETED event brings the object back here
        if not_listed(ctx.workload_informer(key.api_version, key.kind)):
            return UNSYNCED_RETRY_SECONDS  # the object's informer has not listed: absent says nothing
        obj = self._dependency_object(key)
        parents = self.parents_of(key) if obj is not None else []
        if parents is None:
            return UNSYNCED_RETRY_SECONDS  # a candidate parent's workload informer has not listed, or its webhook not answered
        orphan = existing is not None and not is_attached(existing)  # its policy was deleted
        if obj is None or not parents:
            if existing is not None and not orphan:
                await ctx.delete(ctx.binding_rt, key.namespace, key.binding_name)
                log.info("attached binding %s/%s deleted: no workload needs %s", key.namespace, key.binding_name, key)
            return None
        released: list[BindingSnapshot] = []
        holds: list[str] = []
        if existing is not None and not orphan:
            released, holds = await self._leave_preserved_copies(key, existing, parents)
        if orphan:
            log.info("binding %s/%s: its policy is gone; %s follows the workloads that need it", key.namespace, key.binding_name, key)
        await self._write_attached(key, obj, parents, existing, released=released, holds=holds)
        # A held Work is deleted on a later pass; look again until the cache shows it gone.
        return ctx.settings.deletion_poll_seconds if holds else None

    async def _leave_preserved_copies(
        self, key: DependencyKey, existing: Mapping[str, Any], parents: Sequence[BindingSnapshot]
    ) -> tuple[list[BindingSnapshot], list[str]]:
        """Leave the member copies of a preserved parent whose binding is gone with it. Returns
        the gone parents to keep listed (*released*) and the clusters to hold.

        A parent that preserves stays in ``requiredBy`` until its binding is gone. Then, in the
        clusters only it needed, its flagged Works must be deleted with the flag (the binding
        controller would clear it first, as for any cluster that leaves a placement): the
        cluster leaves the binding with a hold (:class:`~controlplane.apis.work_v1alpha1.HoldReason`), under which the binding
        controller leaves its Work alone, and once the cached binding shows the hold the Work
        is deleted here and the hold dropped. The agents leave those copies running with the
        preserved workload. In the clusters other parents still need, the copy stays gpufed's
        for them, but the gone parent stays listed (its binding missing, so the Works keep their
        flag, ``works.works_preserve``) until no parent needs those clusters either: the copy is
        never deleted from under the preserved workload. Only flagged Works count (otherwise no
        parent preserved)."""
        ctx = self.ctx
        live = {p.name for p in parents}
        still = {c for p in parents for c in p.clusters}
        works: dict[str, dict[str, Any]] = {}
        for work in ctx.works.by_index(INDEX_BINDING, (key.namespace, key.binding_name)):
            cluster = cluster_of_namespace(ObjectView(work).namespace)
            if cluster is not None:
                works[cluster] = work
        flagged = {cluster for cluster, work in works.items() if preserves(work)}
        released: list[BindingSnapshot] = []
        gone: set[str] = set()
        for recorded in required_by(existing) or ():
            if recorded.name in live or ctx.bindings.get(recorded.namespace or key.namespace, recorded.name) is not None:
                continue
            gone.update(c for c in recorded.clusters if c not in still)
            shared = tuple(c for c in recorded.clusters if c in still and c in flagged)
            if shared:
                released.append(BindingSnapshot(recorded.namespace or key.namespace, recorded.name, shared))
        held = held_clusters(existing) - still
        for cluster in sorted(held & set(works)):
            meta = ObjectView(works[cluster]).metadata
            await ctx.delete(ctx.work_rt, meta.get("namespace"), str(meta.get("name")))
            log.info("work %s/%s deleted with its flag: a preserved workload keeps %s there", meta.get("namespace"), meta.get("name"), key)
        holds = sorted((gone & flagged) | (held & set(works)))
        return released, holds

    async def _release_independent(self, binding: Mapping[str, Any]) -> None:
        """A policy claims the object itself now: its binding is the policy's, without parents."""
        if "requiredBy" not in ObjectView(binding).spec or is_deleting(binding):
            return
        updated = copy.deepcopy(dict(binding))
        del updated["spec"]["requiredBy"]
        await self.ctx.objects.update(self.ctx.binding_rt, updated)

    async def _write_attached(
        self,
        key: DependencyKey,
        obj: Mapping[str, Any],
        parents: Sequence[BindingSnapshot],
        existing: dict[str, Any] | None,
        *,
        released: Sequence[BindingSnapshot] = (),
        holds: Sequence[str] = (),
    ) -> None:
        ctx = self.ctx
        spec = attached_spec(key, obj, [*parents, *released], holds=holds)  # released: within the parents' clusters
        if existing is None:
            created = await self._create(
                {
                    "apiVersion": ctx.binding_rt.api_version,
                    "kind": ctx.binding_rt.kind,
                    "metadata": {"name": key.binding_name, "namespace": key.namespace},
                    "spec": spec,
                }
            )
            if created is None:
                return  # created by an earlier reconcile the cache has not seen: its ADDED event requeues
            log.info("attached binding %s/%s created for %s", key.namespace, key.binding_name, key)
            await self._write_attached_status(created, parents)
            return
        current = existing
        if existing.get("spec") != spec:
            updated = copy.deepcopy(existing)
            updated["spec"] = spec
            current = await ctx.objects.update(ctx.binding_rt, updated)
        await self._write_attached_status(current, parents)

    async def _create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Create ``obj``; None when it exists already (the cache lags a create of our own)."""
        try:
            return await self.ctx.objects.create(self.ctx.binding_rt, obj)
        except errors.AlreadyExists:
            return None

    async def _write_attached_status(self, binding: dict[str, Any], parents: Sequence[BindingSnapshot]) -> None:
        """``Scheduled=True``: an attached binding is placed by its parents, never by the scheduler."""
        status = copy.deepcopy(binding.get("status") or {})
        condition = {
            "type": str(ConditionType.SCHEDULED),
            "status": "True",
            "reason": str(ScheduledReason.SUCCESS),
            "message": describe_parents(parents),
        }
        current = find_condition(status.get("conditions"), ConditionType.SCHEDULED)
        if current is not None and all(current.get(k) == v for k, v in condition.items()):
            return
        status["conditions"] = with_condition(status.get("conditions"), condition, now=self.ctx.now_text())
        await self.ctx.objects.update_status(self.ctx.binding_rt, {**binding, "status": status})


__all__ = ["DependenciesController"]
