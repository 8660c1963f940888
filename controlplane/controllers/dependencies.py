"""``propagateDeps``: the ConfigMaps, Secrets, ServiceAccount and PVCs a workload's pods need
follow it to exactly the clusters it runs in (Karmada's dependencies distributor).

In: bindings claimed by a policy with ``propagateDeps: true`` (the *parents*), their hub
workloads (the interpreter's ``dependencies`` lists what their pod templates reference), the
referenced objects on the hub, and the parents' scheduling results. Out:

* per referenced object that exists on the hub, one **attached** ResourceBinding
  ``<name>-<kind lower>`` in the parents' namespace: ``spec.resource`` names the object,
  ``spec.clusters`` is the union of its parents' clusters (those in ``spec.clusters`` and
  those still holding an evicted copy during a graceful eviction), no placement, no policy,
  and ``spec.requiredBy``, the parents with their clusters (as in Karmada). The binding
  controller renders it into one
  Work per cluster as it does for any plain object; the scheduler leaves it alone
  (:func:`is_attached`). One object needed by several workloads has one attached binding,
  so a member never gets two Works for the same object. When no parent needs it any more
  (the parent is deleted, stops referencing it, or its policy turns ``propagateDeps`` off)
  the attached binding is deleted, and with it its Works and the member copies;
* on each parent binding, the condition ``DependenciesPropagated``: True while every
  referenced object follows the workload, False (reason ``DependencyMissing``) naming the
  objects that are referenced but not on the hub, plus a ``DependencyMissing`` Warning Event
  on the workload when that list changes. The workload propagates either way, as in Karmada.

An object that a policy also selects directly keeps its own (independent) binding: its own
policy decides where it goes, and nothing here writes to it. Karmada also sends it to the
parents' clusters; gpufed does not (the parent's condition names the policy that places it).

Two queues: parents (key: the parent binding's ``(namespace, name)``) fan out to their
dependencies and report; dependencies (key: :class:`DependencyKey`) compute their parents
afresh from the cached bindings on every reconcile, so a restarted hub rebuilds everything
from the store and never drops a parent it has not looked at yet.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.apis.work_v1alpha1 import ConditionType, ScheduledReason, binding_name
from controlplane.apiserver import errors
from controlplane.apiserver.objects import WatchEventType
from controlplane.controllers.context import (
    INDEX_NAMESPACE,
    INDEX_POLICY,
    ControllerContext,
    policy_key,
    policy_ref_of_binding,
)
from controlplane.controllers.events import EventReason, EventType, record_event
from controlplane.controllers.failover import evicting_clusters
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workloads import find_condition, is_deleting, with_condition
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.dependencies import DEPENDENCY_KINDS, Dependency
from controlplane.interpreter.registry import group_of
from policies.matching import PolicyRef

log = logging.getLogger(__name__)

BindingKey = tuple[str, str]

class DependencyConditionType(StrEnum):
    """The condition this controller sets on a parent binding."""

    DEPENDENCIES_PROPAGATED = "DependenciesPropagated"


class DependenciesReason(StrEnum):
    PROPAGATED = "DependenciesPropagated"
    """Every referenced object exists and follows the workload (or has a policy of its own)."""
    MISSING = "DependencyMissing"
    """Some referenced object is not on the hub; the workload propagates without it."""


@dataclass(frozen=True, slots=True, order=True)
class DependencyKey:
    """An object some workload's pods reference: the key of the dependencies queue."""

    namespace: str
    kind: str
    name: str
    api_version: str = "v1"

    @property
    def binding_name(self) -> str:
        return binding_name(self.name, self.kind)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @classmethod
    def of(cls, namespace: str, dependency: Dependency) -> DependencyKey:
        return cls(namespace, dependency.kind, dependency.name, dependency.api_version)


@dataclass(frozen=True, slots=True, order=True)
class BindingSnapshot:
    """One parent of an attached binding and the clusters it runs in (Karmada's BindingSnapshot)."""

    namespace: str
    name: str
    clusters: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "clusters": [{"name": c} for c in sorted(self.clusters)]}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> BindingSnapshot:
        clusters = tuple(
            sorted(str(c.get("name")) for c in data.get("clusters") or () if isinstance(c, Mapping) and c.get("name"))
        )
        return cls(str(data.get("namespace") or ""), str(data.get("name") or ""), clusters)


# --- pure helpers ---------------------------------------------------------------------------


def required_by(binding: Mapping[str, Any] | None) -> list[BindingSnapshot] | None:
    """The parents an attached binding records, or None when ``binding`` records none."""
    data = ((binding or {}).get("spec") or {}).get("requiredBy")
    if data is None:
        return None
    return [BindingSnapshot.from_wire(item) for item in data if isinstance(item, Mapping)]


def encode_required_by(parents: Sequence[BindingSnapshot]) -> list[dict[str, Any]]:
    """``spec.requiredBy`` for ``parents``, in a stable order (so an unchanged list writes nothing)."""
    return [p.to_wire() for p in sorted(parents)]


def is_attached(binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` exists only because workloads need its object (``propagateDeps``):
    it records parents and has no placement or policy of its own. The scheduler skips these;
    their clusters are their parents'."""
    spec = (binding or {}).get("spec") or {}
    return required_by(binding) is not None and spec.get("placement") is None and not spec.get("policy")


def is_parent_candidate(binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` is claimed by a policy (only those can propagate dependencies)."""
    spec = (binding or {}).get("spec") or {}
    return bool(spec.get("policy")) and not is_deleting(binding)


def parent_clusters(binding: Mapping[str, Any]) -> tuple[str, ...]:
    """Where a parent's pods run: its chosen clusters plus those keeping an evicted copy for now."""
    spec = binding.get("spec") or {}
    names = {str(t.get("name")) for t in spec.get("clusters") or () if isinstance(t, Mapping) and t.get("name")}
    return tuple(sorted(names | set(evicting_clusters(spec))))


def attached_spec(key: DependencyKey, obj: Mapping[str, Any], parents: Sequence[BindingSnapshot]) -> dict[str, Any]:
    """The spec of the attached binding of ``obj`` needed by ``parents``."""
    resource: dict[str, Any] = {
        "apiVersion": str(obj.get("apiVersion") or key.api_version),
        "kind": key.kind,
        "namespace": key.namespace,
        "name": key.name,
    }
    uid = (obj.get("metadata") or {}).get("uid")
    if uid:
        resource["uid"] = uid
    clusters = sorted({c for parent in parents for c in parent.clusters})
    return {
        "resource": resource,
        "replicas": 0,
        "gang": False,
        "clusters": [{"name": c} for c in clusters],
        "requiredBy": encode_required_by(parents),
    }


def binding_is_for(binding: Mapping[str, Any] | None, key: DependencyKey) -> bool:
    resource = ((binding or {}).get("spec") or {}).get("resource") or {}
    return bool(
        resource.get("kind") == key.kind
        and resource.get("name") == key.name
        and group_of(str(resource.get("apiVersion"))) == group_of(key.api_version)
    )


def describe_parents(parents: Sequence[BindingSnapshot]) -> str:
    parts = [f"{p.name} ({', '.join(p.clusters) or 'not scheduled yet'})" for p in sorted(parents)]
    return "follows the bindings that need it: " + "; ".join(parts)


def _describe_policy(policy: Mapping[str, Any]) -> str:
    kind, name, namespace = policy.get("kind"), policy.get("name"), policy.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def missing_text(missing: Sequence[Dependency]) -> str:
    """What the parent's condition and Event say about referenced objects not on the hub."""
    one = len(missing) == 1
    return (
        ", ".join(str(d) for d in missing)
        + (" is" if one else " are")
        + " referenced by the pod template but not on the hub; the workload propagates without "
        + ("it" if one else "them")
        + " (create "
        + ("it" if one else "them")
        + " on the hub and "
        + ("it follows" if one else "they follow")
        + ")"
    )


def dependencies_condition(
    following: Sequence[Dependency],
    missing: Sequence[Dependency],
    independent: Mapping[Dependency, str],
) -> dict[str, Any] | None:
    """The parent's ``DependenciesPropagated`` condition (None when it references nothing).

    ``independent`` maps an object that a policy selects directly to that policy's description.
    """
    if not following and not missing and not independent:
        return None
    parts: list[str] = []
    if missing:
        parts.append(missing_text(missing))
    if following:
        parts.append("following the workload to its clusters: " + ", ".join(str(d) for d in following))
    for dependency, policy in sorted(independent.items()):
        parts.append(f"{dependency} is placed by its own policy {policy}, not by this workload's placement")
    return {
        "type": str(DependencyConditionType.DEPENDENCIES_PROPAGATED),
        "status": "False" if missing else "True",
        "reason": str(DependenciesReason.MISSING if missing else DependenciesReason.PROPAGATED),
        "message": "; ".join(parts),
    }


# --- the controller -------------------------------------------------------------------------


class DependenciesController:
    """Two loops: parents (keys: binding ``(namespace, name)``) and dependencies (:class:`DependencyKey`)."""

    name = "dependencies"

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.parents: ReconcileLoop[BindingKey] = ReconcileLoop(
            "dependencies-parents", self.reconcile_parent, workers=ctx.settings.workers
        )
        self.loop: ReconcileLoop[DependencyKey] = ReconcileLoop(
            self.name, self.reconcile_dependency, workers=ctx.settings.workers
        )
        # Per workload (api group, kind, namespace, name): (generation, its dependencies).
        self._memo: dict[tuple[str, str, str, str], tuple[Any, tuple[Dependency, ...]]] = {}
        # What each parent was last found to need: where to look when that changes. Decisions
        # never read it (a new term starts empty and recomputes from the store).
        self._needed: dict[BindingKey, frozenset[DependencyKey]] = {}
        self._needed_by: dict[DependencyKey, set[BindingKey]] = {}  # the same, the other way round
        ctx.bindings.add_handler(self._on_binding)
        for rt in ctx.workload_types:
            ctx.informer(rt).add_handler(self._on_object)
        for rt in ctx.propagation_types:
            ctx.informer(rt).add_handler(self._on_policy)

    @property
    def loops(self) -> list[ReconcileLoop[Any]]:
        return [self.parents, self.loop]

    # --- event handlers -----------------------------------------------------------------

    async def _on_binding(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if event is WatchEventType.MODIFIED and old is not None and old.get("spec") == obj.get("spec") and (
            is_deleting(old) == is_deleting(obj)
        ):
            return  # a status write
        resource = (obj.get("spec") or {}).get("resource") or {}
        if resource.get("kind") in DEPENDENCY_KINDS and group_of(str(resource.get("apiVersion"))) == "":
            dependency = DependencyKey(str(meta.get("namespace") or ""), str(resource["kind"]), str(resource.get("name")))
            await self.loop.add(dependency)
            await self._requeue_parents_of(dependency)  # their condition says whether a policy places it
        key = (str(meta.get("namespace") or ""), str(meta.get("name")))
        if is_parent_candidate(obj) or (old is not None and is_parent_candidate(old)) or key in self._needed:
            await self.parents.add(key)

    async def _on_object(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        kind, api_version = str(obj.get("kind")), str(obj.get("apiVersion"))
        if kind in DEPENDENCY_KINDS and group_of(api_version) == "":
            # Created or deleted (or replaced): its attached binding appears or goes, and the
            # parents' condition changes. Edits reach the Works through the binding controller.
            if event is WatchEventType.MODIFIED and old is not None and (
                (old.get("metadata") or {}).get("uid") == meta.get("uid") and is_deleting(old) == is_deleting(obj)
            ):
                return
            key = DependencyKey(namespace, kind, name)
            await self.loop.add(key)
            await self._requeue_parents_of(key)
            return
        if interpreter_for(api_version, kind) is None:
            return
        if event is WatchEventType.DELETED:
            self._memo.pop((group_of(api_version), kind, namespace, name), None)
        if event is WatchEventType.MODIFIED and old is not None and (
            (old.get("metadata") or {}).get("generation") == meta.get("generation")
            and is_deleting(old) == is_deleting(obj)
        ):
            return
        parent = (namespace, binding_name(name, kind))
        if self.ctx.bindings.get(*parent) is not None or parent in self._needed:
            await self.parents.add(parent)

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
        before = ((old or {}).get("spec") or {}).get("propagateDeps")
        after = (obj.get("spec") or {}).get("propagateDeps")
        if event is WatchEventType.MODIFIED and bool(before) == bool(after):
            return
        meta = obj.get("metadata") or {}
        ref = PolicyRef(kind=str(obj.get("kind")), name=str(meta.get("name")), namespace=meta.get("namespace") or None)
        for key in self.ctx.bindings.index_keys(INDEX_POLICY, policy_key(ref)):
            await self.parents.add((str(key[0]), str(key[1])))

    # --- what a parent needs ------------------------------------------------------------

    def _propagates_deps(self, binding: Mapping[str, Any]) -> bool:
        ref = policy_ref_of_binding(dict(binding))
        policy = self.ctx.propagation_policy(ref) if ref else None
        return bool(policy is not None and policy.spec.propagate_deps)

    def _workload_of(self, binding: Mapping[str, Any]) -> dict[str, Any] | None:
        resource = (binding.get("spec") or {}).get("resource") or {}
        informer = self.ctx.workload_informer(str(resource.get("apiVersion")), str(resource.get("kind")))
        if informer is None or not resource.get("name"):
            return None
        workload = informer.get(resource.get("namespace"), str(resource["name"]))
        if workload is None or is_deleting(workload):
            return None
        return workload

    def _dependencies_of(self, workload: Mapping[str, Any]) -> tuple[Dependency, ...]:
        api_version, kind = str(workload.get("apiVersion")), str(workload.get("kind"))
        interpreter = interpreter_for(api_version, kind)
        if interpreter is None:
            return ()
        meta = workload.get("metadata") or {}
        memo_key = (group_of(api_version), kind, str(meta.get("namespace") or ""), str(meta.get("name")))
        version = (meta.get("uid"), meta.get("generation") or meta.get("resourceVersion"))
        cached = self._memo.get(memo_key)
        if cached is not None and cached[0] == version:
            return cached[1]
        found = tuple(interpreter.dependencies(dict(workload)))
        self._memo[memo_key] = (version, found)
        return found

    def needed_by(self, binding: Mapping[str, Any] | None) -> tuple[Dependency, ...]:
        """What the parent ``binding`` propagates along: nothing unless its policy says
        ``propagateDeps`` and it and its workload are alive."""
        if binding is None or not is_parent_candidate(binding) or is_attached(binding):
            return ()
        if not self._propagates_deps(binding):
            return ()
        workload = self._workload_of(binding)
        return self._dependencies_of(workload) if workload is not None else ()

    def parents_of(self, key: DependencyKey) -> list[BindingSnapshot]:
        """Every live binding of ``key.namespace`` whose workload needs ``key``, with its clusters."""
        wanted = Dependency(key.kind, key.name, key.api_version)
        out: list[BindingSnapshot] = []
        for binding in self.ctx.bindings.by_index(INDEX_NAMESPACE, key.namespace):
            if wanted in self.needed_by(binding):
                meta = binding.get("metadata") or {}
                out.append(BindingSnapshot(key.namespace, str(meta.get("name")), parent_clusters(binding)))
        return sorted(out)

    def _dependency_object(self, key: DependencyKey) -> dict[str, Any] | None:
        informer = self.ctx.workload_informer(key.api_version, key.kind)
        obj = informer.get(key.namespace, key.name) if informer is not None else None
        return None if obj is None or is_deleting(obj) else obj

    # --- reconcile: a parent ------------------------------------------------------------

    async def reconcile_parent(self, key: BindingKey) -> float | None:
        binding = self.ctx.bindings.get(key[0], key[1])
        needed = self.needed_by(binding)
        keys = frozenset(DependencyKey.of(key[0], d) for d in needed)
        before = self._remember(key, keys)
        for dep_key in sorted(keys | before):
            await self.loop.add(dep_key)
        if binding is None or is_deleting(binding) or is_attached(binding):
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
            policy = ((own or {}).get("spec") or {}).get("policy")
            if binding_is_for(own, dep_key) and policy and not is_attached(own):
                independent[dependency] = _describe_policy(policy)
            else:
                following.append(dependency)
        await self._write_parent_condition(binding, dependencies_condition(following, missing, independent), missing)
        return None

    async def _write_parent_condition(
        self, binding: dict[str, Any], condition: dict[str, Any] | None, missing: Sequence[Dependency]
    ) -> None:
        ctx = self.ctx
        ctype = str(DependencyConditionType.DEPENDENCIES_PROPAGATED)
        conditions = (binding.get("status") or {}).get("conditions") or []
        current = find_condition(conditions, ctype)
        if condition is None:
            if current is None:
                return
            status = {**(binding.get("status") or {}), "conditions": [c for c in conditions if c.get("type") != ctype]}
            await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})
            return
        if current is not None and all(current.get(k) == v for k, v in condition.items()):
            return
        status = copy.deepcopy(binding.get("status") or {})
        status["conditions"] = with_condition(conditions, condition, now=ctx.now_text())
        await ctx.objects.update_status(ctx.binding_rt, {**binding, "status": status})
        if not missing:
            return
        text = missing_text(missing)
        if current is not None and str(current.get("message") or "").startswith(text):
            return  # the same objects were missing already: reported then
        workload = self._workload_of(binding)
        if workload is not None:
            await record_event(
                ctx, workload, type=EventType.WARNING,
                reason=EventReason.DEPENDENCY_MISSING, message=text,
            )

    # --- reconcile: a dependency ----------------------------------------------------------

    async def reconcile_dependency(self, key: DependencyKey) -> float | None:
        ctx = self.ctx
        existing = ctx.bindings.get(key.namespace, key.binding_name)
        if existing is not None and not binding_is_for(existing, key):
            log.warning("%s: binding %s/%s belongs to another object; not propagated", key, key.namespace, key.binding_name)
            return None
        if existing is not None and not is_attached(existing):
            await self._release_independent(existing)
            return None
        obj = self._dependency_object(key)
        parents = self.parents_of(key) if obj is not None else []
        if obj is None or not parents:
            if existing is not None and not is_deleting(existing):
                await ctx.delete(ctx.binding_rt, key.namespace, key.binding_name)
                log.info("attached binding %s/%s deleted: no workload needs %s", key.namespace, key.binding_name, key)
            return None
        await self._write_attached(key, obj, parents, existing)
        return None

    async def _release_independent(self, binding: dict[str, Any]) -> None:
        """A policy claims the object itself now: its binding is the policy's, without parents."""
        if "requiredBy" not in (binding.get("spec") or {}) or is_deleting(binding):
            return
        updated = copy.deepcopy(binding)
        del updated["spec"]["requiredBy"]
        await self.ctx.objects.update(self.ctx.binding_rt, updated)

    async def _write_attached(
        self,
        key: DependencyKey,
        obj: Mapping[str, Any],
        parents: Sequence[BindingSnapshot],
        existing: dict[str, Any] | None,
    ) -> None:
        ctx = self.ctx
        spec = attached_spec(key, obj, parents)
        if existing is None:
            created = await self._create(
                {
                    "apiVersion": ctx.binding_rt.api_version,
                    "kind": ctx.binding_rt.kind,
                    "metadata": {"name": key.binding_name, "namespace": key.namespace},
                    "spec": spec,
                }
            )
            log.info("attached binding %s/%s created for %s", key.namespace, key.binding_name, key)
            await self._write_attached_status(created, parents)
            return
        if is_deleting(existing):
            raise errors.Conflict(f"binding {key.namespace}/{key.binding_name} is being deleted")
        current = existing
        if existing.get("spec") != spec:
            updated = copy.deepcopy(existing)
            updated["spec"] = spec
            current = await ctx.objects.update(ctx.binding_rt, updated)
        await self._write_attached_status(current, parents)

    async def _create(self, obj: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.ctx.objects.create(self.ctx.binding_rt, obj)
        except errors.AlreadyExists:
            meta = obj["metadata"]
            raise errors.Conflict(f"binding {meta['namespace']}/{meta['name']} exists already") from None

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


__all__ = [
    "BindingSnapshot",
    "DependenciesController",
    "DependenciesReason",
    "DependencyConditionType",
    "DependencyKey",
    "attached_spec",
    "dependencies_condition",
    "encode_required_by",
    "is_attached",
    "missing_text",
    "parent_clusters",
    "required_by",
]
