"""The leader's keeper of API Priority and Fairness objects: kube's config ensurer and the
``Dangling`` condition of its config controller.

kube's bootstrap objects (:mod:`controlplane.apis.kube.flowcontrol_bootstrap`) are created when
missing; the mandatory ones (``exempt``, ``catch-all``) are put back to their spec and annotation
whenever they differ, the suggested ones only while annotated ``apf.kubernetes.io/autoupdate-spec:
"true"`` (an admin who sets it ``"false"`` keeps their edits). Every FlowSchema gets the condition
``Dangling``: ``False``/``Found`` when its priority level exists, ``True``/``NotFound`` when not, with
kube's message. Level-based: an event of either kind queues the keys it may change; each reconcile
is one compare-and-swap write (a conflict is retried with what the cache then holds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from controlplane.apis.kube.flowcontrol import GROUP, FlowSchemaView
from controlplane.apis.kube.flowcontrol_bootstrap import (
    FLOW_SCHEMAS,
    MANDATORY_FLOW_SCHEMAS,
    MANDATORY_PRIORITY_LEVELS,
    PRIORITY_LEVELS,
    bootstrap_object,
    ensured,
)
from controlplane.apis.timestamps import format_time
from controlplane.controllers.informing import Informer
from controlplane.controllers.reconciling import ReconcileLoop
from controlplane.controllers.workqueuemetrics import WorkqueueMetrics
from controlplane.gojson import go_quote
from controlplane.objectclient import ObjectClient, WatchEventType, errors

log = logging.getLogger(__name__)

FLOW_SCHEMA: Final = "FlowSchema"
PRIORITY_LEVEL: Final = "PriorityLevelConfiguration"
DANGLING: Final = "Dangling"
Key = tuple[str, str]


def dangling_condition(schema: dict[str, Any], *, level_exists: bool) -> dict[str, str]:
    """kube's ``Dangling`` condition of ``schema`` (without its transition time)."""
    level = FlowSchemaView(schema).priority_level
    if level_exists:
        return {"type": DANGLING, "status": "False", "reason": "Found",
                "message": f"This FlowSchema references the PriorityLevelConfiguration object named {go_quote(level)} and it exists"}
    return {"type": DANGLING, "status": "True", "reason": "NotFound",
            "message": f"This FlowSchema references the PriorityLevelConfiguration object named {go_quote(level)} but there is no such object"}


class FlowControlConfigController:
    """Keeps the bootstrap objects and each FlowSchema's ``Dangling`` condition."""

    def __init__(
        self, objects: ObjectClient, *, workqueue_metrics: WorkqueueMetrics | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._objects = objects
        self._clock = clock
        self._types = {kind: objects.registry.require(f"{GROUP}/v1", kind) for kind in (FLOW_SCHEMA, PRIORITY_LEVEL)}
        self.informers = {kind: Informer(objects, rt) for kind, rt in self._types.items()}
        self._loop: ReconcileLoop[Key] = ReconcileLoop(
            "flowcontrol-config", self.reconcile, workers=1, metrics=workqueue_metrics
        )
        self.informers[FLOW_SCHEMA].add_handler(self._on_flow_schema)
        self.informers[PRIORITY_LEVEL].add_handler(self._on_priority_level)

    async def _on_flow_schema(self, _event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        await self._loop.add((FLOW_SCHEMA, str(obj["metadata"]["name"])))

    async def _on_priority_level(self, _event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        await self._loop.add((PRIORITY_LEVEL, name))
        for schema in self.informers[FLOW_SCHEMA].items():  # their Dangling condition may change
            if FlowSchemaView(schema).priority_level == name:
                await self._loop.add((FLOW_SCHEMA, str(schema["metadata"]["name"])))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for informer in self.informers.values():
                group.create_task(informer.run())
            for informer in self.informers.values():
                await informer.synced.wait()
            # Levels first: the schemas created next find theirs.
            for name in PRIORITY_LEVELS:
                await self._loop.add((PRIORITY_LEVEL, name))
            for name in FLOW_SCHEMAS:
                await self._loop.add((FLOW_SCHEMA, name))
            group.create_task(self._loop.run())

    async def reconcile(self, key: Key) -> None:
        kind, name = key
        stored = self.informers[kind].get(None, name)
        rt = self._types[kind]
        if stored is None:
            wanted = bootstrap_object(kind, name)
            if wanted is not None:
                try:
                    await self._objects.create(rt, wanted)
                except errors.AlreadyExists:
                    return
                log.info("created the %s %s of kube's bootstrap configuration", kind, name)
            return
        if name in (FLOW_SCHEMAS if kind == FLOW_SCHEMA else PRIORITY_LEVELS):
            mandatory = name in (MANDATORY_FLOW_SCHEMAS if kind == FLOW_SCHEMA else MANDATORY_PRIORITY_LEVELS)
            updated = ensured(stored, mandatory=mandatory)
            if updated is not None:
                stored = await self._objects.update(rt, updated)
                log.info("put the %s %s back to kube's bootstrap configuration", kind, name)
        if kind == FLOW_SCHEMA:
            await self._write_dangling(stored)

    async def _write_dangling(self, schema: dict[str, Any]) -> None:
        view = FlowSchemaView(schema)
        wanted = dangling_condition(schema, level_exists=self.informers[PRIORITY_LEVEL].get(None, view.priority_level) is not None)
        conditions = [c for c in view.conditions if isinstance(c, dict)]
        current = next((c for c in conditions if c.get("type") == DANGLING), None)
        if current is not None and all(current.get(k) == v for k, v in wanted.items()):
            return
        changed = current is None or current.get("status") != wanted["status"]
        stamp = format_time(self._clock()) if changed else str(current.get("lastTransitionTime") or "") if current else ""
        condition = {**wanted, "lastTransitionTime": stamp or format_time(self._clock())}
        others = [c for c in conditions if c.get("type") != DANGLING]
        await self._objects.update_status(self._types[FLOW_SCHEMA], {**schema, "status": {
            **view.status, "conditions": [*others, condition],
        }})
