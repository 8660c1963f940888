"""kube-apiserver's audit truncation (``--audit-{log,webhook}-truncate-enabled``): an event larger
than ``-truncate-max-event-size`` bytes (100 KiB) loses its ``requestObject`` and
``responseObject`` and gains the annotation ``audit.k8s.io/truncated: "true"``; one still too large
(or at ``Metadata``, with no object to drop) is dropped and counted as
``apiserver_audit_error_total{plugin="truncate"}``. Events handed over together are split into
batches of at most ``-truncate-max-batch-size`` bytes (10 MiB) of events.

Sizes are those of the events' JSON, as sent. In batch mode the batches are split after the buffer
has made them, so that no POST carries more than the maximum.

In: events (dicts). Out: the same, truncated or dropped, to the backend. I/O: none of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from controlplane.apiserver.audit.buffered import Delegate
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.codec import dumps_any_text

PLUGIN: Final = "truncate"
ANNOTATION: Final = "audit.k8s.io/truncated"
_OBJECT_LEVELS: Final = frozenset({"Request", "RequestResponse"})


@dataclass(frozen=True, slots=True)
class TruncateSettings:
    """``--audit-<backend>-truncate-*``, with kube's defaults."""

    enabled: bool = False
    max_batch_size: int = 10 * 1024 * 1024
    max_event_size: int = 100 * 1024


class Truncating:
    """A :class:`Delegate` that truncates, drops and splits before handing events to ``delegate``."""

    def __init__(self, delegate: Delegate, settings: TruncateSettings, metrics: AuditMetrics) -> None:
        self.delegate = delegate
        self.settings = settings
        self.metrics = metrics

    async def process(self, events: list[dict[str, Any]], *, final: bool = False) -> bool:
        success = True
        dropped = 0
        batch: list[dict[str, Any]] = []
        batch_size = 0
        for event in events:
            size = len(dumps_any_text(event))
            if size > self.settings.max_event_size and event.get("level") in _OBJECT_LEVELS:
                event = truncated(event)
                size = len(dumps_any_text(event))
            if size > self.settings.max_event_size:
                dropped += 1
                continue
            if batch and batch_size + size > self.settings.max_batch_size:
                success = await self.delegate.process(batch, final=final) and success
                batch, batch_size = [], 0
            batch.append(event)
            batch_size += size
        if batch:
            success = await self.delegate.process(batch, final=final) and success
        if dropped:
            self.metrics.lost(PLUGIN, dropped, "event is too large even after truncating")
        return success

    def start(self) -> None:
        self.delegate.start()

    async def close(self) -> None:
        await self.delegate.close()


def truncated(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` without its objects, annotated as kube's truncate plugin annotates it."""
    out = {k: v for k, v in event.items() if k not in ("requestObject", "responseObject")}
    out["annotations"] = {**(event.get("annotations") or {}), ANNOTATION: "true"}
    return out
