"""Namespace lifecycle: whether content may be created in a namespace, and when a
terminating namespace is finally removed.

As in kube, deleting a namespace marks it ``Terminating`` (a ``deletionTimestamp``); the
namespace controller deletes its content (:mod:`controlplane.controllers.namespaces`), and
it is removed once nothing is left in it and no finalizer holds it (of its ``spec.finalizers`` but
``kubernetes``, or of its ``metadata.finalizers``); creating in a missing
namespace is NotFound and in a terminating one Forbidden. :class:`NamespaceLifecycle`
caches each existing, active namespace for a short while (creates check it on every
write) and lets concurrent creates share one store read per namespace. Which namespaces
always exist and which cannot be deleted is kube's (:mod:`controlplane.apis.kube.namespaces`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis.kube.namespaces import without_lifecycle_finalizer
from controlplane.apiserver import codec, errors
from controlplane.apiserver.objects.reading import store_call
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.storage import interface as storage

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class NamespaceState:
    exists: bool
    terminating: bool
    expires: float = field(default=0.0)


class NamespaceLifecycle:
    """The namespaces of ``registry`` (none when it serves no Namespace kind) in ``store``."""

    def __init__(self, store: storage.Store, registry: Registry, *, cache_seconds: float) -> None:
        self._store = store
        self._registry = registry
        self._cache_seconds = cache_seconds
        self._states: dict[str, NamespaceState] = {}
        # One store read per namespace at a time: concurrent creates share it (single flight).
        self._reads: dict[str, asyncio.Future[NamespaceState]] = {}
        #: The Namespace kind, or None when the registry has none (no namespace checks then).
        self.type = registry.get("", "v1", "namespaces")

    def forget(self, name: str) -> None:
        """Drop what is cached about namespace ``name`` (it was created, or is going away)."""
        self._states.pop(name, None)

    async def state(self, name: str) -> NamespaceState:
        cached = self._states.get(name)
        if cached is not None and cached.expires > time.monotonic():
            return cached
        pending = self._reads.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        read = asyncio.ensure_future(self._read_state(name))
        self._reads[name] = read
        read.add_done_callback(lambda _: self._reads.pop(name, None))
        return await asyncio.shield(read)

    async def _read_state(self, name: str) -> NamespaceState:
        assert self.type is not None
        now = time.monotonic()
        try:
            kv = await self._store.get(self.type.key(namespace=None, name=name))
        except storage.NotFound:
            state = NamespaceState(exists=False, terminating=False)
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural="namespaces", group="", name=name) from exc
        else:
            ns = codec.decode(kv)
            terminating = bool(ns["metadata"].get("deletionTimestamp"))
            state = NamespaceState(exists=True, terminating=terminating)
        # Only an existing, active namespace is cached: creation must see a new one at once.
        if state.exists and not state.terminating:
            state.expires = now + self._cache_seconds
            self._states[name] = state
        return state

    async def require(self, rt: ResourceType, namespace: str, name: str) -> None:
        if self.type is None:
            return
        state = await self.state(namespace)
        if not state.exists:
            raise errors.not_found(plural="namespaces", group="", name=namespace)
        if state.terminating:
            raise errors.Forbidden(
                f'{rt.qualified()} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                target=errors.Target(name=name, group=rt.group, kind=rt.plural),
                causes=[
                    errors.Cause(
                        errors.CauseType.NAMESPACE_TERMINATING,
                        f"namespace {namespace} is being terminated",
                        "metadata.namespace",
                    )
                ],
            )

    async def is_empty(self, namespace: str) -> bool:
        for rt in self._registry.namespaced_types():
            listed = await store_call(rt, "", self._store.list(rt.key_prefix(namespace), limit=1))
            if listed.items:
                return False
        return True

    async def finish(self, name: str) -> dict[str, Any] | None:
        """Remove a terminating namespace once it is empty; return it when removed. One whose
        ``spec.finalizers`` name others than ``kubernetes``, or that has ``metadata.finalizers``,
        loses ``kubernetes`` only (as kube's namespace controller finalizes it) and stays
        ``Terminating`` until the ``finalize`` subresource takes the others off and an update
        the metadata's (kube's ``ShouldDeleteNamespaceDuringUpdate`` wants both empty)."""
        assert self.type is not None
        if not await self.is_empty(name):
            return None
        key = self.type.key(namespace=None, name=name)
        try:
            kv = await self._store.get(key)
            ns = codec.decode(kv)
            if not ns["metadata"].get("deletionTimestamp"):
                return None
            kept = without_lifecycle_finalizer(ns)
            # The user's spec.finalizers hold it until ``finalize`` takes them off, its
            # metadata.finalizers until an update does (then that update deletes it).
            if kept is not None or ns["metadata"].get("finalizers"):
                spec = ns.get("spec")
                if isinstance(spec, dict) and kept != spec.get("finalizers"):
                    ns["spec"] = {k: v for k, v in spec.items() if k != "finalizers"} | (
                        {"finalizers": kept} if kept else {}
                    )
                    await self._store.update(key, codec.encode(ns), expected_revision=kv.mod_revision)
                return None
            deleted = await self._store.delete(key, expected_revision=kv.mod_revision)
        except (storage.NotFound, storage.Conflict):
            return None
        except storage.StorageError as exc:
            raise errors.from_storage_error(exc, plural="namespaces", group="", name=name) from exc
        ns["metadata"]["resourceVersion"] = str(deleted.mod_revision)
        self._states.pop(name, None)
        logger.debug("namespace finalized", extra={"namespace": name})
        return ns

    async def content_deleted(self, namespace: str) -> None:
        if self.type is None:
            return
        state = await self.state(namespace)
        if state.exists and state.terminating:
            await self.finish(namespace)
