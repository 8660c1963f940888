"""Custom kinds with a ``scale`` subresource get replicas: keeps their interpreters in force.

The hub's :class:`~controlplane.apiserver.crd.registry.DynamicRegistry` serves the kinds of the
established CRDs. Every time it changes, :class:`ScaleInterpreters` builds one
:class:`~controlplane.interpreter.scaled.ScaleInterpreter` per custom kind whose CRD has a scale
subresource (the storage version's, else the first served version's that has one) and installs
the set in the interpreter registry at once (synchronously, within the registry's change, so no
object of a new kind is interpreted without it). A CRD that goes, or loses its scale
subresource, takes its interpreter with it. The workloads and bindings of every kind whose
interpretation changed are then requeued (``on_kind_changed``), so that replicas, per-cluster
shares and the folded status follow.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from controlplane.interpreter.registry import set_scaled
from controlplane.interpreter.scaled import ScaleInterpreter
from controlplane.objectclient import DynamicRegistry, Registry, ResourceType

log = logging.getLogger(__name__)

KindChanged = Callable[[str, str], Awaitable[None]]


def scale_interpreters(types: Iterable[ResourceType]) -> list[tuple[str, ScaleInterpreter]]:
    """The interpreters of the custom kinds among ``types`` that have a scale subresource, each
    with the apiVersion its kind's objects are stored as."""
    chosen: dict[tuple[str, str], ResourceType] = {}
    for rt in types:
        if rt.custom is None or rt.scale is None:
            continue
        key = (rt.group, rt.kind)
        if key not in chosen or not rt.stored_in_version:  # the storage version wins
            chosen[key] = rt
    out: list[tuple[str, ScaleInterpreter]] = []
    for (group, kind), rt in sorted(chosen.items()):
        assert rt.scale is not None
        try:
            out.append((f"{group}/{rt.version}", ScaleInterpreter(
                group, kind,
                spec_replicas=tuple(rt.scale.spec_replicas.split(".")),
                status_replicas=tuple(rt.scale.status_replicas.split(".")),
                label_selector=tuple(rt.scale.label_selector.split(".")) if rt.scale.label_selector else (),
            )))
        except ValueError as exc:  # only a CRD written around the API's validation gets here
            log.warning("%s.%s: its scale subresource gives it no replicas: %s", kind, group, exc)
    return out


class ScaleInterpreters:
    """Follows ``registry``'s custom kinds with scale interpreters (see the module docstring)."""

    def __init__(self, registry: Registry, on_kind_changed: KindChanged | None = None) -> None:
        self._registry = registry
        self._on_kind_changed = on_kind_changed
        #: (group, kind) → the apiVersion of the kind's objects, for the kinds given an interpreter.
        self._api_versions: dict[tuple[str, str], str] = {}
        #: (apiVersion, kind) of the kinds whose interpretation changed and whose objects wait.
        self._changed: list[tuple[str, str]] = []
        self._wake = asyncio.Event()

    def install(self) -> list[tuple[str, str]]:
        """Install the interpreters the registry's kinds call for; the (group, kind) keys changed."""
        wanted = scale_interpreters(self._registry)
        self._api_versions.update({(i.group, i.kind): api_version for api_version, i in wanted})
        changed = set_scaled(i for _, i in wanted)
        self._changed.extend((self._api_versions[key], key[1]) for key in changed)
        if changed:
            self._wake.set()
        return changed

    async def run(self) -> None:
        """Install now and on every change of the served kinds, requeueing the changed kinds'
        objects, until cancelled."""
        dynamic = self._registry if isinstance(self._registry, DynamicRegistry) else None
        if dynamic is not None:
            dynamic.add_listener(self._on_registry_change)
        try:
            self.install()
            while True:
                await self._wake.wait()
                self._wake.clear()
                changed, self._changed = self._changed, []
                for api_version, kind in changed:
                    if self._on_kind_changed is not None:
                        await self._on_kind_changed(api_version, kind)
        finally:
            if dynamic is not None:
                dynamic.remove_listener(self._on_registry_change)

    def _on_registry_change(self) -> None:
        self.install()

    def forget(self) -> None:
        """Remove the interpreters this follower installed (the controllers stop)."""
        set_scaled(())
        self._changed.clear()
        self._api_versions.clear()
