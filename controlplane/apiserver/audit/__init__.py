"""kube-apiserver's auditing: a policy (:mod:`.policy`), the backends it sends events to (the log
file, :mod:`.backend`, in JSON or kube's :mod:`.legacy` text; the webhook, :mod:`.webhook`; both,
:mod:`.union`), each in its mode (:mod:`.buffered`) and truncating (:mod:`.truncate`), and the
filter that records each request (:mod:`.recording`), configured as kube-apiserver's
``--audit-policy-file``, ``--audit-log-*`` and ``--audit-webhook-*`` flags (:class:`AuditConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from controlplane.apiserver.audit.backend import FORMATS, AuditLog, LogSettings
from controlplane.apiserver.audit.buffered import LOG_BATCH, MODES, BatchSettings
from controlplane.apiserver.audit.metrics import AuditMetrics
from controlplane.apiserver.audit.policy import AuditPolicy, Level, PolicyError, Stage
from controlplane.apiserver.audit.recording import (
    AUTHENTICATED_AS,
    AUTHORIZATION,
    PANIC,
    REQUEST_ATTRIBUTES,
    Auditor,
    add_validation_failure,
    annotate,
    audit_id_header,
)
from controlplane.apiserver.audit.truncate import TruncateSettings
from controlplane.apiserver.audit.union import AuditBackends, Backend, backend
from controlplane.apiserver.audit.webhook import AuditWebhook, WebhookSettings
from controlplane.apiserver.kubeconfig import KubeconfigError

__all__ = [
    "AUTHENTICATED_AS", "AUTHORIZATION", "FORMATS", "LOG_BATCH", "MODES", "PANIC", "REQUEST_ATTRIBUTES", "VERSION",
    "AuditConfig", "AuditLog", "AuditMetrics", "AuditPolicy", "Auditor", "BatchSettings", "Level", "LogSettings",
    "PolicyError", "Stage", "TruncateSettings", "WebhookSettings", "add_validation_failure",
    "annotate", "audit_id_header",
]

#: The only group version the hub writes its events in (kube 1.32's only one).
VERSION = "audit.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """``--audit-policy-file``, the ``--audit-log-*`` flags (``log``; None: no log file) and the
    ``--audit-webhook-*`` flags (``webhook``; None: no webhook)."""

    policy_file: Path
    log: LogSettings | None = None
    webhook: WebhookSettings | None = None

    def policy(self) -> AuditPolicy:
        """The policy; :class:`PolicyError` naming the file when it cannot be used."""
        try:
            document = yaml.safe_load(self.policy_file.read_text())
        except OSError as exc:
            raise PolicyError(f"--audit-policy-file {self.policy_file}: cannot read it: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            raise PolicyError(f"--audit-policy-file {self.policy_file}: not YAML: {exc}") from exc
        try:
            return AuditPolicy.parse(document)
        except PolicyError as exc:
            raise PolicyError(f"--audit-policy-file {self.policy_file}: {exc}") from exc

    def _webhook(self, metrics: AuditMetrics) -> AuditWebhook | None:
        if self.webhook is None:
            return None
        try:
            return AuditWebhook(self.webhook, metrics)
        except (KubeconfigError, OSError) as exc:
            raise PolicyError(f"--audit-webhook-config-file {self.webhook.config_file}: {exc}") from exc

    def check(self) -> None:
        """What :meth:`auditor` would refuse (the policy, the webhook's kubeconfig), without opening
        the log file or starting anything: :class:`PolicyError` naming the flag."""
        self.policy()
        self._webhook(AuditMetrics())

    def auditor(self, metrics: AuditMetrics | None = None) -> Auditor:
        """The audit filter; :class:`PolicyError` naming the flag when its policy (or the webhook's
        kubeconfig) cannot be used."""
        policy = self.policy()
        metrics = metrics if metrics is not None else AuditMetrics()
        backends: list[Backend] = []
        if (webhook := self._webhook(metrics)) is not None:
            assert self.webhook is not None
            backends.append(backend(webhook, self.webhook.batch, self.webhook.truncate, metrics))
        if self.log is not None:
            log = AuditLog.of(self.log, metrics)
            backends.insert(0, backend(log, self.log.batch, self.log.truncate, metrics))
        return Auditor(policy, AuditBackends(metrics, backends))
