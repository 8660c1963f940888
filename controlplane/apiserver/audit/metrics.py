"""The audit metrics, under kube-apiserver's names (no ``gpufed_`` prefix):

* ``apiserver_audit_event_total`` -- every audit event the audit filter made and handed to the
  backends (once per event, whichever backends take it);
* ``apiserver_audit_error_total{plugin}`` -- events a backend lost: ``log`` (a write to the file
  failed), ``webhook`` (the buffer was full, or the batch could not be sent).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.events = Counter(
            "apiserver_audit_event", "Counter of audit events generated and sent to the audit backend.",
            registry=registry,
        )
        self.errors = Counter(
            "apiserver_audit_error",
            "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
            ["plugin"], registry=registry,
        )

    def lost(self, plugin: str, count: int = 1) -> None:
        self.errors.labels(plugin=plugin).inc(count)
