"""The backends one hub sends its audit events to, as kube-apiserver's union backend: the log file
(``--audit-log-path``), the webhook (``--audit-webhook-config-file``), or both when both are given.
Every event is counted once (``apiserver_audit_event_total``) and handed to each backend; a write the
log file loses is counted as ``apiserver_audit_error_total{plugin="log"}``.

In: events (dicts). Out: the backends' writes; :meth:`AuditBackends.start` and :meth:`close` run
the webhook's sending task.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.audit.backend import AuditLog
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.audit.webhook import AuditWebhook


class AuditBackends:
    def __init__(self, metrics: AuditMetrics, *, log: AuditLog | None = None, webhook: AuditWebhook | None = None) -> None:
        self.metrics = metrics
        self.log = log
        self.webhook = webhook

    def write(self, event: dict[str, Any]) -> None:
        self.metrics.events.inc()
        if self.log is not None:
            lost = self.log.errors
            self.log.write(event)
            if self.log.errors > lost:
                self.metrics.lost("log", self.log.errors - lost)
        if self.webhook is not None:
            self.webhook.write(event)

    def start(self) -> None:
        if self.webhook is not None:
            self.webhook.start()

    async def close(self) -> None:
        if self.webhook is not None:
            await self.webhook.close()
        if self.log is not None:
            self.log.close()
