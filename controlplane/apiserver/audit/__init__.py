"""kube-apiserver's auditing: a policy (:mod:`.policy`), the backends it sends events to (the log
file, :mod:`.backend`; the webhook, :mod:`.webhook`; both, :mod:`.union`) and the filter that records
each request (:mod:`.recording`), configured as kube-apiserver's ``--audit-policy-file``,
``--audit-log-*`` and ``--audit-webhook-*`` flags (:class:`AuditConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from controlplane.apiserver.audit.backend import AuditLog
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.audit.policy import AuditPolicy, Level, PolicyError, Stage
from controlplane.apiserver.audit.recording import (
    AUTHENTICATED_AS,
    AUTHORIZATION,
    REQUEST_ATTRIBUTES,
    Auditor,
    add_validation_failure,
    annotate,
    audit_id_header,
)
from controlplane.apiserver.audit.union import AuditBackends
from controlplane.apiserver.audit.webhook import AuditWebhook, WebhookSettings
from controlplane.apiserver.kubeconfig import KubeconfigError

__all__ = [
    "AUTHENTICATED_AS", "AUTHORIZATION", "REQUEST_ATTRIBUTES", "AuditConfig", "AuditLog", "AuditMetrics", "AuditPolicy",
    "Auditor", "Level", "PolicyError", "Stage", "WebhookSettings", "add_validation_failure", "annotate",
    "audit_id_header",
]


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """``--audit-policy-file`` with ``--audit-log-path`` (``-``: standard output; None: no log file),
    the log's ``--audit-log-maxsize`` (megabytes), ``--audit-log-maxbackup`` and ``--audit-log-maxage``
    (days), and ``--audit-webhook-*`` (``webhook``; None: no webhook)."""

    policy_file: Path
    log_path: str | None
    max_size_mb: int = 0
    max_backups: int = 0
    max_age_days: int = 0
    webhook: WebhookSettings | None = None

    def auditor(self, metrics: AuditMetrics | None = None) -> Auditor:
        """The audit filter; :class:`PolicyError` naming the file when its policy (or the webhook's
        kubeconfig) cannot be used."""
        try:
            document = yaml.safe_load(self.policy_file.read_text())
        except OSError as exc:
            raise PolicyError(f"--audit-policy-file {self.policy_file}: cannot read it: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            raise PolicyError(f"--audit-policy-file {self.policy_file}: not YAML: {exc}") from exc
        try:
            policy = AuditPolicy.parse(document)
        except PolicyError as exc:
            raise PolicyError(f"--audit-policy-file {self.policy_file}: {exc}") from exc
        metrics = metrics if metrics is not None else AuditMetrics()
        webhook = None
        if self.webhook is not None:
            try:
                webhook = AuditWebhook(self.webhook, metrics)
            except (KubeconfigError, OSError) as exc:
                raise PolicyError(f"--audit-webhook-config-file {self.webhook.config_file}: {exc}") from exc
        log = None
        if self.log_path is not None:
            log = AuditLog(self.log_path, max_size_mb=self.max_size_mb, max_backups=self.max_backups,
                           max_age_days=self.max_age_days)
        return Auditor(policy, AuditBackends(metrics, log=log, webhook=webhook))
