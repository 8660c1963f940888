"""The simulated member's EndpointSlice controller, as a running loop.

In: the member's ``ObjectClient`` (serving Services and EndpointSlices) and its pod informer.
Out: :class:`EndpointSliceController`, whose :meth:`~EndpointSliceController.run` keeps every
Service with a selector's slices as kube-controller-manager's endpointslice controller does
(:mod:`simulator.controllers.endpointslice` decides what they hold). Cheap for large members:
only Services with a selector are cached; a pod's change queues the Services of its namespace
whose selector matches its old or new labels (pods and Services are indexed by namespace, so no
change walks every pod); only the slices this controller manages are watched, and a slice's own
update does not queue its Service (only its deletion does). Slices of a deleted Service are
deleted with it (what the garbage collector does for their ownerReference).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Hashable, Iterable
from typing import Any, Final

from controlplane.apis.kube.endpointslices import API_VERSION, KIND, LABEL_MANAGED_BY, MANAGED_BY_CONTROLLER
from controlplane.controllers.informing import Informer
from controlplane.objectclient import ObjectClient, WatchEventType, errors
from simulator.controllers.endpointslice import reconcile_endpointslices, selects
from simulator.informers import INDEX_OWNER, as_handler, cached, object_key, owned_informer

logger = logging.getLogger(__name__)

_INDEX_NAMESPACE: Final = "namespace"


def _namespace_index(obj: dict[str, Any]) -> Iterable[Hashable]:
    return (str(obj["metadata"].get("namespace") or ""),)


def _has_selector(service: dict[str, Any]) -> bool:
    return bool((service.get("spec") or {}).get("selector"))


class EndpointSliceController:
    """The EndpointSlices of every Service with a selector, kept to its pods."""

    def __init__(self, objects: ObjectClient, *, pods: Informer, rng: random.Random) -> None:
        registry = objects.registry
        self._objects = objects
        self._rng = rng
        self._slice_rt = registry.require(API_VERSION, KIND)
        self.services = Informer(objects, registry.require("v1", "Service"), keep=_has_selector)
        self.services.add_index(_INDEX_NAMESPACE, _namespace_index)
        self.services.add_handler(as_handler(self._on_service))
        self.slices = owned_informer(
            objects,
            self._slice_rt,
            self._on_slice,
            label_selector=f"{LABEL_MANAGED_BY}={MANAGED_BY_CONTROLLER}",
        )
        self._pods = pods
        pods.add_index(_INDEX_NAMESPACE, _namespace_index)
        pods.add_handler(as_handler(self._on_pod))
        self._queue: set[str] = set()
        #: Services whose slice update met a conflict: synced again on their slices' next event.
        self._conflicted: set[str] = set()
        self._wake = asyncio.Event()

    @classmethod
    def if_served(
        cls, objects: ObjectClient, *, pods: Informer, rng: random.Random
    ) -> EndpointSliceController | None:
        """The controller of a member serving Services and EndpointSlices; None for one that does not."""
        registry = objects.registry
        if registry.for_kind(API_VERSION, KIND) is None or registry.for_kind("v1", "Service") is None:
            return None
        return cls(objects, pods=pods, rng=rng)

    @property
    def informers(self) -> list[Informer]:
        return [self.services, self.slices]

    def _add(self, key: str) -> None:
        self._queue.add(key)
        self._wake.set()

    def _on_service(
        self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        obj = new or old
        assert obj is not None
        if new is None:
            uid = str(obj["metadata"].get("uid") or "")
            self._queue.update(f"gone:{object_key(s)}" for s in self.slices.by_index(INDEX_OWNER, uid))
            self._wake.set()
            return
        self._add(object_key(obj))

    def _on_slice(
        self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        obj = new or old
        assert obj is not None
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Service" and ref.get("controller"):
                key = f"{obj['metadata'].get('namespace')}/{ref.get('name')}"
                if new is None or key in self._conflicted:
                    self._conflicted.discard(key)
                    self._add(key)

    def _on_pod(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new or old
        assert obj is not None
        namespace = str(obj["metadata"].get("namespace") or "")
        labels = [(o["metadata"].get("labels") or {}) for o in (old, new) if o is not None]
        for service in self.services.by_index(_INDEX_NAMESPACE, namespace):
            if any(selects(service, lab) for lab in labels):
                self._add(object_key(service))

    async def run(self) -> None:
        for service in self.services.items():
            self._add(object_key(service))
        while True:
            await self._wake.wait()
            self._wake.clear()
            keys, self._queue = self._queue, set()
            for key in sorted(keys):
                try:
                    await self._sync(key)
                except errors.ApiError as exc:
                    logger.warning("cannot sync the EndpointSlices of %s: %s", key, exc)

    async def _sync(self, key: str) -> None:
        if key.startswith("gone:"):
            doomed = cached(self.slices, key.removeprefix("gone:"))
            if doomed is not None:
                with contextlib.suppress(errors.NotFound):
                    await self._objects.delete(
                        self._slice_rt,
                        namespace=doomed["metadata"].get("namespace"),
                        name=doomed["metadata"]["name"],
                    )
            return
        service = cached(self.services, key)
        if service is None:
            return
        meta = service["metadata"]
        pods = self._pods.by_index(_INDEX_NAMESPACE, str(meta.get("namespace") or ""))
        owned = self.slices.by_index(INDEX_OWNER, str(meta.get("uid") or ""))
        changes = reconcile_endpointslices(service, pods, owned, rng=self._rng)
        for obj in changes.create:
            with contextlib.suppress(errors.AlreadyExists):
                await self._objects.create(self._slice_rt, obj)
        for obj in changes.update:
            try:
                await self._objects.update(self._slice_rt, obj)
            except errors.Conflict:
                self._conflicted.add(key)  # the newer slice is on its way: sync once it has come
            except errors.NotFound:
                pass  # its DELETED event queues the Service
        for name in changes.delete:
            with contextlib.suppress(errors.NotFound):
                await self._objects.delete(self._slice_rt, namespace=meta.get("namespace"), name=name)
