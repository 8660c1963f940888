"""kube-apiserver's audit flags for `gpufed controlplane`: ``--audit-policy-file``, the log's
``--audit-log-*`` and the webhook's ``--audit-webhook-*``, with kube's names and defaults.

A bad value is a one-line error naming its flag, given before anything starts: argparse refuses
what one flag cannot be (a mode, a format, a number), :func:`audit_conflicts` what flags cannot be
together, and :func:`audit_config` reads the policy and the webhook's kubeconfig (``PolicyError``).

In: argv. Out: :class:`AuditConfig`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from controlplane.apiserver.audit import (
    FORMATS,
    LOG_BATCH,
    MODES,
    VERSION,
    AuditConfig,
    BatchSettings,
    LogSettings,
    TruncateSettings,
    WebhookSettings,
)
from gpufed.argtypes import duration, go_bool, positive_duration, positive_number, whole_number

_TRUNCATE = TruncateSettings()


def _batch_flags(parser: argparse.ArgumentParser, plugin: str, defaults: BatchSettings) -> None:
    prefix = f"--audit-{plugin}"
    parser.add_argument(f"{prefix}-mode", default=defaults.mode, choices=MODES,
                        help=f"batch: buffered, sent by a task of its own; blocking: each event in the request's "
                             f"path; blocking-strict: also fail a request whose RequestReceived event cannot be "
                             f"recorded (default {defaults.mode})")
    parser.add_argument(f"{prefix}-batch-buffer-size", type=whole_number(1), default=defaults.buffer_size, metavar="N",
                        help=f"batch mode: events waiting at most; more are dropped and counted "
                             f"(default {defaults.buffer_size})")
    parser.add_argument(f"{prefix}-batch-max-size", type=whole_number(1), default=defaults.max_size, metavar="N",
                        help=f"batch mode: events in one batch at most (default {defaults.max_size})")
    parser.add_argument(f"{prefix}-batch-max-wait", type=duration, default=f"{defaults.max_wait_seconds:g}s",
                        metavar="DURATION",
                        help=f"batch mode: send a batch that is not full after this long (default "
                             f"{defaults.max_wait_seconds:g}s{': at once' if not defaults.max_wait_seconds else ''})")
    parser.add_argument(f"{prefix}-batch-throttle-enable", type=go_bool, nargs="?", const=True,
                        default=defaults.throttle_enable, metavar="BOOL",
                        help=f"batch mode: limit the batches sent a second (default {str(defaults.throttle_enable).lower()})")
    parser.add_argument(f"{prefix}-batch-throttle-qps", type=positive_number("a number of batches a second"),
                        default=defaults.throttle_qps, metavar="QPS",
                        help=f"batch mode, throttled: batches a second on average (default {defaults.throttle_qps:g})")
    parser.add_argument(f"{prefix}-batch-throttle-burst", type=whole_number(1), default=defaults.throttle_burst,
                        metavar="N",
                        help=f"batch mode, throttled: batches sent at once after a quiet spell "
                             f"(default {defaults.throttle_burst})")
    parser.add_argument(f"{prefix}-truncate-enabled", type=go_bool, nargs="?", const=True, default=False,
                        metavar="BOOL",
                        help="drop the objects of events larger than the maximum, then the events still too large, "
                             "and split batches larger than theirs (default false)")
    parser.add_argument(f"{prefix}-truncate-max-batch-size", type=whole_number(1), default=_TRUNCATE.max_batch_size,
                        metavar="BYTES", help=f"truncating: bytes of events in one batch at most "
                                              f"(default {_TRUNCATE.max_batch_size})")
    parser.add_argument(f"{prefix}-truncate-max-event-size", type=whole_number(1), default=_TRUNCATE.max_event_size,
                        metavar="BYTES", help=f"truncating: bytes of one event at most (default {_TRUNCATE.max_event_size})")
    parser.add_argument(f"{prefix}-version", default=VERSION, metavar="GROUP/VERSION",
                        help=f"the events' API group and version ({VERSION}, the only one)")


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--audit-policy-file", type=Path, metavar="FILE",
                        help="an audit.k8s.io/v1 Policy: which requests are audited, at which level "
                             "(needs --audit-log-path, --audit-webhook-config-file or both)")
    parser.add_argument("--audit-log-path", metavar="FILE",
                        help="write the audit events here, one line each ('-': standard output)")
    parser.add_argument("--audit-log-format", default="json", choices=FORMATS,
                        help="json: one audit.k8s.io/v1 Event each line; legacy: kube's one-line text (default json)")
    parser.add_argument("--audit-log-maxsize", type=int, default=0, metavar="MB",
                        help="rotate the audit log when it would pass this size (default 0: 100 MB)")
    parser.add_argument("--audit-log-maxbackup", type=int, default=0, metavar="N",
                        help="rotated audit logs to keep (default 0: all)")
    parser.add_argument("--audit-log-maxage", type=int, default=0, metavar="DAYS",
                        help="remove rotated audit logs older than this (default 0: never)")
    parser.add_argument("--audit-log-compress", type=go_bool, nargs="?", const=True, default=False, metavar="BOOL",
                        help="gzip the rotated audit logs (default false)")
    _batch_flags(parser, "log", LOG_BATCH)
    parser.add_argument("--audit-webhook-config-file", type=Path, metavar="FILE",
                        help="send the audit events as audit.k8s.io/v1 EventLists to the server of this kubeconfig "
                             "(its certificate-authority(-data), its user's token or client certificate)")
    parser.add_argument("--audit-webhook-initial-backoff", type=positive_duration, default="10s", metavar="DURATION",
                        help="wait this long before retrying a failed batch, 1.5 times longer each try (default 10s)")
    _batch_flags(parser, "webhook", BatchSettings())


def audit_conflicts(args: argparse.Namespace) -> str | None:
    """Audit flags that cannot work together, as the one-line error to print; None when they can."""
    backends = args.audit_log_path is not None or args.audit_webhook_config_file is not None
    if args.audit_policy_file is not None and not backends:
        return "--audit-policy-file needs --audit-log-path, --audit-webhook-config-file or both"
    if args.audit_policy_file is None and backends:
        return "--audit-log-path and --audit-webhook-config-file need --audit-policy-file"
    if min(args.audit_log_maxsize, args.audit_log_maxbackup, args.audit_log_maxage) < 0:
        return "--audit-log-maxsize, --audit-log-maxbackup and --audit-log-maxage cannot be negative"
    for plugin in ("log", "webhook"):
        version = getattr(args, f"audit_{plugin}_version")
        if version != VERSION:
            return f'--audit-{plugin}-version {version}: invalid group version, allowed versions are ["{VERSION}"]'
        batch_size = getattr(args, f"audit_{plugin}_truncate_max_batch_size")
        event_size = getattr(args, f"audit_{plugin}_truncate_max_event_size")
        if batch_size < event_size:
            return (f"--audit-{plugin}-truncate-max-batch-size {batch_size} must be greater than or equal to "
                    f"--audit-{plugin}-truncate-max-event-size ({event_size})")
    return None


def _batch(args: argparse.Namespace, plugin: str) -> BatchSettings:
    def flag(name: str) -> Any:
        return getattr(args, f"audit_{plugin}_{name}")

    return BatchSettings(
        mode=flag("mode"), buffer_size=flag("batch_buffer_size"), max_size=flag("batch_max_size"),
        max_wait_seconds=flag("batch_max_wait").total_seconds(), throttle_enable=flag("batch_throttle_enable"),
        throttle_qps=flag("batch_throttle_qps"), throttle_burst=flag("batch_throttle_burst"),
    )


def _truncate(args: argparse.Namespace, plugin: str) -> TruncateSettings:
    return TruncateSettings(
        enabled=getattr(args, f"audit_{plugin}_truncate_enabled"),
        max_batch_size=getattr(args, f"audit_{plugin}_truncate_max_batch_size"),
        max_event_size=getattr(args, f"audit_{plugin}_truncate_max_event_size"),
    )


def audit_config(args: argparse.Namespace) -> AuditConfig | None:
    """The audit flags (None without ``--audit-policy-file``)."""
    if args.audit_policy_file is None:
        return None
    log = None
    if args.audit_log_path is not None:
        log = LogSettings(args.audit_log_path, max_size_mb=args.audit_log_maxsize, max_backups=args.audit_log_maxbackup,
                          max_age_days=args.audit_log_maxage, format=args.audit_log_format,
                          compress=args.audit_log_compress, batch=_batch(args, "log"), truncate=_truncate(args, "log"))
    webhook = None
    if args.audit_webhook_config_file is not None:
        webhook = WebhookSettings(args.audit_webhook_config_file, batch=_batch(args, "webhook"),
                                  truncate=_truncate(args, "webhook"),
                                  initial_backoff_seconds=args.audit_webhook_initial_backoff.total_seconds())
    return AuditConfig(args.audit_policy_file, log, webhook)
