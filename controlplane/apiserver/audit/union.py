"""The backends one hub sends its audit events to, as kube-apiserver's union backend: the log file
(``--audit-log-path``), the webhook (``--audit-webhook-config-file``), or both when both are given,
each truncating (``--audit-*-truncate-enabled``) and in its mode (``--audit-*-mode``, :mod:`.buffered`).
Every event is counted once (``apiserver_audit_event_total``) and handed to each backend.

In: events (dicts). Out: the backends' writes; :meth:`AuditBackends.start` and :meth:`close` run
their tasks and sessions.
"""

from __future__ import annotations

from typing import Any, Protocol

from controlplane.apiserver.audit.buffered import BatchSettings, Delegate, taking
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.audit.truncate import TruncateSettings, Truncating


class Backend(Protocol):
    async def process(self, events: list[dict[str, Any]]) -> bool: ...

    def start(self) -> None: ...

    async def close(self) -> None: ...


def backend(delegate: Delegate, batch: BatchSettings, truncate: TruncateSettings, metrics: AuditMetrics) -> Backend:
    """``delegate`` as its flags configure it: truncating when enabled, in its mode."""
    if truncate.enabled:
        delegate = Truncating(delegate, truncate, metrics)
    return taking(delegate, batch, metrics)


class AuditBackends:
    def __init__(self, metrics: AuditMetrics, backends: list[Backend]) -> None:
        self.metrics = metrics
        self.backends = backends

    async def process(self, event: dict[str, Any]) -> bool:
        """Hand ``event`` to every backend; False when one in ``blocking-strict`` mode failed."""
        self.metrics.events.inc()
        success = True
        for each in self.backends:
            success = await each.process([event]) and success
        return success

    def start(self) -> None:
        for each in self.backends:
            each.start()

    async def close(self) -> None:
        for each in self.backends:
            await each.close()
