"""Deleting objects: now, or (with finalizers) marked with a ``deletionTimestamp`` and kept.

:class:`Deleter` checks DeleteOptions (preconditions on uid and resourceVersion,
``propagationPolicy`` and the legacy ``orphanDependents``, with kube's 422s). Where a garbage
collector runs (the hub's objects), it puts on or takes off the collector's finalizers as kube's
registry store does (:mod:`controlplane.apis.kube.garbagecollection`: ``foregroundDeletion`` for
Foreground, ``orphan`` for Orphan; a second delete of an object being deleted may swap them, and
one that leaves no finalizer deletes it). It deletes with a compare-and-swap on the object's
revision (re-reading and retrying when a concurrent write wins). A namespace's delete answers
at once, as kube's: the namespace marked ``Terminating`` (``deletionTimestamp``); its content is
the namespace controller's (:mod:`controlplane.controllers.namespaces`), and it is removed
once empty (see :mod:`~controlplane.apiserver.objects.namespaces`). A namespace deleted again once
it is terminating is removed if it is empty. The dependents themselves are the hub's garbage
collector's (:mod:`controlplane.controllers.garbagecollecting`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from controlplane.apis.apiextensions.builtin import is_view, refusal
from controlplane.apis.kube.garbagecollection import default_policy, deletion_finalizers
from controlplane.apis.kube.namespaces import IMMORTAL_NAMESPACES
from controlplane.apis.kube.requestoptions import delete_options_errors
from controlplane.apiserver import codec, errors
from controlplane.apiserver.admission import Operation, WebhookRequest
from controlplane.apiserver.allocating import Allocations, NoAllocations
from controlplane.apiserver.objects.namespaces import NamespaceLifecycle
from controlplane.apiserver.objects.reading import (
    check_preconditions,
    decode,
    get_kv,
    stored_form,
)
from controlplane.apiserver.objects.swapping import LostRace, delete_stored, swap_call
from controlplane.apiserver.objects.values import (
    DeleteOptions,
    DeleteResult,
)
from controlplane.apiserver.objects.writing import PATCH_RETRIES
from controlplane.apiserver.resources import ResourceType
from controlplane.storage import interface as storage


class Deleter:
    """Deletes objects from ``store``; ``now`` gives the deletionTimestamp."""

    def __init__(
        self,
        store: storage.Store,
        namespaces: NamespaceLifecycle,
        *,
        now: Callable[[], str],
        garbage_collection: bool = False,
    ) -> None:
        self._garbage_collection = garbage_collection
        self._store = store
        self._namespaces = namespaces
        self.now = now
        #: Told of every delete, to free what the object held (a Service's cluster IP).
        self.allocations: Allocations = NoAllocations()

    async def delete(
        self,
        rt: ResourceType,
        *,
        namespace: str | None,
        name: str,
        options: DeleteOptions,
    ) -> DeleteResult:
        """Delete now, or (with finalizers) mark with ``deletionTimestamp`` and keep."""
        check_delete_options(options)
        namespace = namespace if rt.namespaced else None
        for _attempt in range(PATCH_RETRIES):
            kv = await get_kv(self._store, rt, namespace=namespace, name=name)
            obj = decode(rt, kv)
            if is_view(obj):  # a CRD the hub publishes for a kind it serves built in: deleting it would delete the kind's objects
                raise errors.Forbidden(refusal(name), target=errors.Target(name=name, group=rt.group, kind=rt.plural))
            check_preconditions(rt, obj, options.preconditions)
            if options.webhooks is not None:
                # Mutating webhooks see a delete too (and may refuse it); then the validating ones.
                request = WebhookRequest(Operation.DELETE, rt, name, namespace, None, obj, dry_run=options.dry_run)
                await options.webhooks.mutate(request)
                await options.webhooks.validate(request)
            try:
                if rt is self._namespaces.type:
                    return await self._delete_namespace(kv, obj, dry_run=options.dry_run)
                return await self.delete_kv(rt, kv, obj, options=options)
            except LostRace:
                continue
        raise errors.conflict_modified(plural=rt.plural, group=rt.group, name=name)

    async def delete_kv(
        self, rt: ResourceType, kv: storage.KeyValue, obj: dict[str, Any], *, options: DeleteOptions
    ) -> DeleteResult:
        meta = obj["metadata"]
        name = meta["name"]
        finalizers = meta.get("finalizers") or []
        changed = deletion_finalizers(
            finalizers, policy=default_policy(rt.group, rt.version, rt.kind),
            orphan_dependents=options.orphan_dependents, propagation=options.propagation_policy,
        ) if self._garbage_collection else None
        kept = finalizers if changed is None else changed
        if kept:
            if meta.get("deletionTimestamp") and changed is None:
                return DeleteResult(obj, deleted=False)
            marked = copy.deepcopy(obj)
            marked["metadata"]["finalizers"] = kept
            mark_as_deleting(marked["metadata"], now=self.now)
            if options.dry_run:
                return DeleteResult(marked, deleted=False)
            written = await swap_call(rt, name, self._store.update(
                kv.key, stored_form(rt, marked, replacing=kv, part="metadata"), expected_revision=kv.mod_revision
            ))
            marked["metadata"]["resourceVersion"] = str(written.mod_revision)
            return DeleteResult(marked, deleted=False)
        if options.dry_run:
            return DeleteResult(obj, deleted=True)
        await delete_stored(self._store, rt, kv, obj, allocations=self.allocations, namespaces=self._namespaces)
        return DeleteResult(obj, deleted=True)

    async def _delete_namespace(self, kv: storage.KeyValue, ns: dict[str, Any], *, dry_run: bool) -> DeleteResult:
        rt = self._namespaces.type
        assert rt is not None
        name = ns["metadata"]["name"]
        if name in IMMORTAL_NAMESPACES:
            raise errors.Forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                target=errors.Target(name=name, kind="namespaces"),
            )
        if dry_run:
            return DeleteResult(ns, deleted=False)
        self._namespaces.forget(name)
        if not ns["metadata"].get("deletionTimestamp"):
            ns = copy.deepcopy(ns)
            ns["metadata"]["deletionTimestamp"] = self.now()  # kube's namespace registry: no generation bump
            ns["metadata"]["deletionGracePeriodSeconds"] = 0
            ns.setdefault("status", {})["phase"] = "Terminating"
            written = await swap_call(rt, name, self._store.update(kv.key, codec.encode(ns), expected_revision=kv.mod_revision))
            ns["metadata"]["resourceVersion"] = str(written.mod_revision)
            return DeleteResult(ns, deleted=False)
        finished = await self._namespaces.finish(name)
        return DeleteResult(finished or ns, deleted=finished is not None)


def mark_as_deleting(meta: dict[str, Any], *, now: Callable[[], str]) -> None:
    """kube's markAsDeleting: the first mark sets the ``deletionTimestamp`` and bumps a
    ``generation`` the object has (> 0), so a controller that watches generations sees the
    deletion; a later one keeps both. The grace period is 0 either way."""
    if not meta.get("deletionTimestamp"):
        generation = meta.get("generation")
        if isinstance(generation, int) and generation > 0:
            meta["generation"] = generation + 1
        meta["deletionTimestamp"] = now()
    meta["deletionGracePeriodSeconds"] = 0


def check_delete_options(options: DeleteOptions) -> None:
    """kube's ValidateDeleteOptions: 422 when ``orphanDependents`` and ``propagationPolicy`` are both
    set or the policy is not one of the three (the HTTP layer checks a request's ``dryRun`` too)."""
    found = delete_options_errors(policy=options.propagation_policy, orphan=options.orphan_dependents, dry_run=())
    if found:
        raise errors.invalid_options("DeleteOptions", found)
