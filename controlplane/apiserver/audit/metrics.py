"""The audit metrics, under kube-apiserver's names (no ``gpufed_`` prefix):

* ``apiserver_audit_event_total`` -- every audit event the audit filter made and handed to the
  backends (once per event, whichever backends take it);
* ``apiserver_audit_error_total{plugin}`` -- events a backend lost: ``log`` (a write to the file
  failed), ``webhook`` (the batch could not be sent), ``buffered`` (a batch-mode buffer was full),
  ``truncate`` (an event too large even without its objects);
* ``apiserver_audit_requests_rejected_total`` -- requests refused because their ``RequestReceived``
  event could not be recorded (``blocking-strict``).

Each loss is also logged as kube's plugin error, at most once a minute per plugin.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from controlplane.metricstability import Stability, kube_help

log = logging.getLogger(__name__)

_ERROR_LOG_PERIOD_SECONDS: Final = 60.0


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.events = Counter(
            "apiserver_audit_event", kube_help(Stability.ALPHA, "Counter of audit events generated and sent to the audit backend."),
            registry=registry,
        )
        self.errors = Counter(
            "apiserver_audit_error",
            kube_help(
                Stability.ALPHA,
                "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected "
                "by the error.",
            ),
            ["plugin"], registry=registry,
        )
        self.rejected = Counter(
            "apiserver_audit_requests_rejected",
            kube_help(Stability.ALPHA, "Counter of apiserver requests rejected due to an error in audit logging backend."),
            registry=registry,
        )
        self._last_logged: dict[str, float] = {}

    def lost(self, plugin: str, count: int = 1, reason: str = "") -> None:
        self.errors.labels(plugin=plugin).inc(count)
        now = time.monotonic()
        if reason and now - self._last_logged.get(plugin, -_ERROR_LOG_PERIOD_SECONDS) >= _ERROR_LOG_PERIOD_SECONDS:
            self._last_logged[plugin] = now
            log.error("Error in audit plugin '%s' affecting %d audit events: %s", plugin, count, reason)
