"""`gpufed controlplane`: run one hub replica."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from gpufed.logging_setup import configure_logging

log = logging.getLogger("gpufed.controlplane")


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:6443'); port 0 picks a free port."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT (e.g. 127.0.0.1:6443), not {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _leader_lease_ttl(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"expected whole seconds >= 2 (etcd's minimum lease), not {text!r}")
    return int(text)


def _whole_seconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected whole seconds >= 0, not {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", type=Path, default=Path(".gpufed"),
                        help="where the PKI, the embedded etcd's data and hub.kubeconfig live (default .gpufed)")
    parser.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 6443), metavar="HOST:PORT",
                        help="address to serve HTTPS on; port 0 picks a free port (default 127.0.0.1:6443)")
    parser.add_argument("--etcd-endpoints", default="", metavar="URLS",
                        help="comma-separated etcd client URLs; none starts an embedded etcd under the state dir")
    parser.add_argument("--tls-san", action="append", default=[], metavar="NAME",
                        help="extra DNS name or IP for the serving certificate (repeatable)")
    parser.add_argument("--cluster-monitor-grace-period", type=_positive_seconds, default=40.0, metavar="SECONDS",
                        help="how long a cluster may miss heartbeats before it is Unknown (default 40)")
    parser.add_argument("--default-unreachable-toleration-seconds", type=_whole_seconds, default=300,
                        metavar="SECONDS",
                        help="failover: how long replicas stay in an unreachable cluster when their placement has "
                             "no toleration for cluster.gpufed.io/unreachable:NoExecute (default 300)")
    parser.add_argument("--default-not-ready-toleration-seconds", type=_whole_seconds, default=300,
                        metavar="SECONDS",
                        help="failover: the same for a cluster whose agent reports it not ready "
                             "(cluster.gpufed.io/not-ready:NoExecute; default 300)")
    parser.add_argument("--graceful-eviction-timeout", type=_whole_seconds, default=600, metavar="SECONDS",
                        help="failover: how long an evicted copy keeps running while its replacement starts, "
                             "when the policy sets no failover gracePeriodSeconds (default 600)")
    parser.add_argument("--unschedulable-grace-seconds", type=_positive_seconds, default=120.0, metavar="SECONDS",
                        help="how long replicas a member reports unschedulable wait there before the hub moves "
                             "them to another cluster (default 120)")
    parser.add_argument("--leader-lease-ttl", type=_leader_lease_ttl, default=10, metavar="SECONDS",
                        help="TTL of the etcd lease behind controller leadership among hub replicas; a dead "
                             "leader is replaced within it (default 10, minimum 2)")
    parser.add_argument("--identity", default="", metavar="NAME",
                        help="this replica's name in leader election (default: host-pid-random)")
    parser.add_argument("--waste-sample-interval", type=_positive_seconds, default=60.0, metavar="SECONDS",
                        help="seconds between two fleet samples of the GPU waste accounting (default 60)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, component="hub")
    from controlplane.hub import Hub, HubConfig, run_until_signalled
    from controlplane.storage.embedded import EtcdStartError
    from controlplane.storage.interface import Unavailable

    host, port = args.listen
    config = HubConfig(
        state_dir=args.state_dir,
        host=host,
        port=port,
        etcd_endpoints=tuple(e.strip() for e in args.etcd_endpoints.split(",") if e.strip()),
        tls_hosts=tuple(args.tls_san),
        cluster_monitor_grace_period=args.cluster_monitor_grace_period,
        default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
        default_not_ready_toleration_seconds=args.default_not_ready_toleration_seconds,
        graceful_eviction_timeout=args.graceful_eviction_timeout,
        unschedulable_grace_seconds=args.unschedulable_grace_seconds,
        leader_lease_ttl=args.leader_lease_ttl,
        identity=args.identity,
        waste_sample_interval=args.waste_sample_interval,
    )
    try:
        asyncio.run(run_until_signalled(Hub(config)))
    except (Unavailable, EtcdStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot serve on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
