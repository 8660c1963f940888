"""Keeps a :class:`~.dispatching.FlowController` following the stored FlowSchemas and
PriorityLevelConfigurations, as kube's APF config controller follows its informers: a list, then a
watch, of each kind; every change recompiles the configuration (a handful of objects), which the next
requests are classified and limited by. No restart needed; a watch that breaks is listed again. It
also runs the controller's borrowing timer (:meth:`~.dispatching.FlowController.keep_adjusting`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from controlplane.apis.kube.flowcontrol import GROUP
from controlplane.apiserver.flowcontrol.dispatching import FlowController
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.following import follow_kind
from controlplane.apiserver.resources import ResourceType

logger = logging.getLogger(__name__)

_KINDS: Final = ("FlowSchema", "PriorityLevelConfiguration")


class ConfigurationWatch:
    """The objects of both kinds as last seen, handed to the controller on every change."""

    def __init__(self, objects: ObjectStore, controller: FlowController) -> None:
        self._objects = objects
        self._controller = controller
        self._types: dict[str, ResourceType] = {}
        for kind in _KINDS:
            rt = objects.registry.for_kind(f"{GROUP}/v1", kind)
            if rt is not None:
                self._types[kind] = rt
        self._seen: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in self._types}
        self._synced = {kind: asyncio.Event() for kind in self._types}

    async def wait_synced(self) -> None:
        for event in self._synced.values():
            await event.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """Follow both kinds until ``stop`` (nothing when the registry serves neither), and share the
        seats between the levels anew every 10 s, as kube's config controller does."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._controller.keep_adjusting(stop))
            for kind in self._types:
                group.create_task(self._keep(kind, stop))

    async def _keep(self, kind: str, stop: asyncio.Event) -> None:
        await follow_kind(
            self._objects, self._types[kind], self._seen[kind], changed=self._apply, synced=self._synced[kind], stop=stop,
        )

    def _apply(self) -> None:
        try:
            self._controller.update(
                self._seen.get("FlowSchema", {}).values(), self._seen.get("PriorityLevelConfiguration", {}).values()
            )
        except Exception:  # objects validated when written: one stored before a rule cannot stop the others
            logger.exception("the FlowSchemas and PriorityLevelConfigurations do not compile; keeping the last ones")
