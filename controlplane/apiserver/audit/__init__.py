"""kube-apiserver's auditing: a policy (:mod:`.policy`), the log it writes to (:mod:`.backend`)
and the filter that records each request (:mod:`.recording`), configured as kube-apiserver's
``--audit-policy-file`` and ``--audit-log-*`` flags (:class:`AuditConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from controlplane.apiserver.audit.backend import AuditLog
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

__all__ = [
    "AUTHENTICATED_AS", "AUTHORIZATION", "REQUEST_ATTRIBUTES", "AuditConfig", "AuditLog", "AuditPolicy", "Auditor",
    "Level", "PolicyError", "Stage", "add_validation_failure", "annotate",
    "audit_id_header",
]


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """``--audit-policy-file`` and ``--audit-log-path`` (``-``: standard output), with the log's
    ``--audit-log-maxsize`` (megabytes), ``--audit-log-maxbackup`` and ``--audit-log-maxage`` (days)."""

    policy_file: Path
    log_path: str
    max_size_mb: int = 0
    max_backups: int = 0
    max_age_days: int = 0

    def auditor(self) -> Auditor:
        """The audit filter; :class:`PolicyError` naming the file when its policy is not kube's."""
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
        log = AuditLog(self.log_path, max_size_mb=self.max_size_mb, max_backups=self.max_backups,
                       max_age_days=self.max_age_days)
        return Auditor(policy, log)
