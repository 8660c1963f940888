"""A hollow member's EndpointSlices: kube's endpointslice controller, at a cost a member of
thousands of nodes and pods can pay.

The slices are those of the full simulated member (the same builder:
:func:`~simulator.controllers.endpointslice.pod_entry`, :func:`~simulator.controllers.endpointslice.packed`,
:func:`~simulator.controllers.endpointslice.reconcile_desired`), kept incrementally: each Service
with a selector holds its endpoints by pod name, a pod placed or removed updates the entries of
the Services of its namespace that select it (no pod is looked at again), and only the Services
whose entries changed have their slices rebuilt, once per member write. A Service's own write
(created, changed) reads the pods of its namespace that it selects, once.

In: Services and pod manifests as the hollow member changes them. Out: :meth:`HollowEndpointSlices.changes`,
the slice writes the member stores (and publishes to its watchers). Pure: no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any, Final

from controlplane.apis.kube.endpointslices import LABEL_MANAGED_BY, LABEL_SERVICE_NAME, MANAGED_BY_CONTROLLER
from simulator.controllers.endpointslice import (
    Entry,
    SliceChanges,
    packed,
    pod_entry,
    reconcile_desired,
    selects,
)

COLLECTION: Final = "discovery.k8s.io/v1/endpointslices"
#: (namespace, Service name)
ServiceKey = tuple[str, str]


class HollowEndpointSlices:
    """The endpoints of every Service with a selector, and the slices this controller wrote."""

    def __init__(self, *, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._services: dict[str, dict[str, dict[str, Any]]] = {}
        self._entries: dict[ServiceKey, dict[str, Entry]] = {}
        #: The slices written for each Service, by name (the member's stored objects).
        self.owned: dict[ServiceKey, dict[str, dict[str, Any]]] = {}
        self._dirty: set[ServiceKey] = set()

    def service_changed(
        self,
        namespace: str,
        name: str,
        service: Mapping[str, Any] | None,
        pods: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        """A Service written (``pods``: those of its namespace it may select) or deleted (None)."""
        key = (namespace, name)
        if service is None or not (service.get("spec") or {}).get("selector"):
            self._services.get(namespace, {}).pop(name, None)
            self._entries.pop(key, None)
        else:
            self._services.setdefault(namespace, {})[name] = dict(service)
            entries = {}
            for pod in pods:
                entry = pod_entry(service, pod)
                if entry is not None:
                    entries[str(pod["metadata"]["name"])] = entry
            self._entries[key] = entries
        self._dirty.add(key)

    def selecting(self, namespace: str, labels: Mapping[str, Any]) -> bool:
        """Whether a Service of the namespace selects a pod of ``labels``."""
        return any(selects(s, labels) for s in self._services.get(namespace, {}).values())

    def pod_changed(
        self, namespace: str, name: str, labels: Mapping[str, Any], pod: Mapping[str, Any] | None
    ) -> None:
        """A pod placed or changed (its manifest), or removed (None)."""
        for service_name, service in self._services.get(namespace, {}).items():
            if not selects(service, labels):
                continue
            key = (namespace, service_name)
            entries = self._entries.setdefault(key, {})
            entry = pod_entry(service, pod) if pod is not None else None
            if entry is None:
                if entries.pop(name, None) is not None:
                    self._dirty.add(key)
            elif entries.get(name) != entry:
                entries[name] = entry
                self._dirty.add(key)

    def slice_deleted(self, obj: Mapping[str, Any]) -> None:
        """A slice deleted by a client: one this controller wrote is written again."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(LABEL_MANAGED_BY) != MANAGED_BY_CONTROLLER:
            return
        key = (str(meta.get("namespace") or ""), str(labels.get(LABEL_SERVICE_NAME) or ""))
        if self.owned.get(key, {}).pop(str(meta.get("name")), None) is not None:
            self._dirty.add(key)

    def changes(self) -> list[tuple[ServiceKey, SliceChanges]]:
        """The slice writes of every Service whose endpoints changed since the last call (a
        deleted Service: its slices deleted). The caller stores them; :attr:`owned` already
        holds the created and updated slices (the caller's stored objects are these dicts)."""
        out = []
        for key in sorted(self._dirty):
            namespace, name = key
            owned = self.owned.setdefault(key, {})
            service = self._services.get(namespace, {}).get(name)
            if service is None:
                changes = SliceChanges(delete=sorted(owned))
            else:
                changes = reconcile_desired(
                    service, packed(self._entries.get(key, {})), list(owned.values()), rng=self._rng
                )
            for obj in changes.create + changes.update:
                owned[str(obj["metadata"]["name"])] = obj
            for gone in changes.delete:
                owned.pop(gone, None)
            if not owned:
                del self.owned[key]
            out.append((key, changes))
        self._dirty.clear()
        return out
