"""`gpufed controlplane`'s flags reach the hub's configuration: with no flag the configuration is
the hub's own defaults, and each flag sets its field."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from controlplane.admission.requeuing import RequeuingTimestamp, WaitForPodsReady
from controlplane.apiserver.flowcontrol import FlowControlConfig
from controlplane.apiserver.flowcontrol.maxinflight import MaxInFlightConfig
from controlplane.apiserver.serviceallocation.ranges import IPRange, PortRange
from controlplane.apiserver.serving import ServingLimits
from controlplane.apiserver.watching import WatchLimits
from controlplane.controllers.context import ControllerSettings
from controlplane.hubconfig import HubConfig
from controlplane.storage.connecting import EtcdClientTls
from controlplane.storage.embedded import EtcdClientTransport
from gpufed.commands.controlplane import add_arguments, hub_config


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_without_flags_the_configuration_is_the_hubs_default() -> None:
    config = hub_config(parse())
    assert config == HubConfig(state_dir=Path(".gpufed"))


def test_every_flag_sets_its_field(tmp_path: Path) -> None:
    ca, cert, key = (tmp_path / name for name in ("ca.crt", "client.crt", "client.key"))
    config = hub_config(parse(
        "--state-dir", str(tmp_path), "--listen", "0.0.0.0:7443",
        "--etcd-endpoints", "https://a:2379, https://b:2379", "--etcd-cafile", str(ca),
        "--etcd-certfile", str(cert), "--etcd-keyfile", str(key), "--etcd-binary", "/opt/etcd",
        "--embedded-etcd-transport", "tls", "--etcd-max-response-bytes", str(64 << 20),
        "--tls-cert-file", "/s.crt", "--tls-private-key-file", "/s.key", "--tls-ca-file", "/s-ca.crt",
        "--tls-san", "hub.example.com", "--tls-san", "10.0.0.1", "--anonymous-auth=false",
        "--service-cluster-ip-range", "10.200.0.0/16", "--service-node-port-range", "31000-31999",
        "--cluster-monitor-grace-period", "55", "--default-unreachable-toleration-seconds", "60",
        "--default-not-ready-toleration-seconds", "70", "--unhealthy-fleet-threshold", "0.4",
        "--kueue-fair-sharing", "--federated-quota-enforcement", "--graceful-eviction-timeout", "90", "--unschedulable-grace-seconds", "45",
        "--horizontal-pod-autoscaler-sync-period", "20",
        "--kueue-wait-for-pods-ready-timeout", "300", "--kueue-requeuing-backoff-base-seconds", "7",
        "--kueue-requeuing-backoff-max-seconds", "700", "--kueue-requeuing-backoff-limit-count", "3",
        "--kueue-requeuing-timestamp", "Creation",
        "--legacy-service-account-token-clean-up-period", "48h", "--leader-lease-ttl", "4",
        "--cluster-signing-duration", "720h",
        "--identity", "hub-a", "--waste-sample-interval", "15", "--waste-bucket-length", "5",
        "--request-header-timeout", "3", "--request-timeout", "30s", "--max-pending-connections", "64", "--max-requests-inflight", "80",
        "--max-mutating-requests-inflight", "40", "--enable-priority-and-fairness=false",
        "--watch-buffer-bytes", "1048576", "--watch-buffer-events", "500", "--watch-slow-client-timeout", "12",
        "--debug-write-journal", "100",
    ))
    assert dataclasses.replace(config, serving_limits=ServingLimits()) == HubConfig(
        state_dir=tmp_path, host="0.0.0.0", port=7443,
        etcd_endpoints=("https://a:2379", "https://b:2379"),
        etcd_tls=EtcdClientTls(ca_file=ca, cert_file=cert, key_file=key), etcd_binary=Path("/opt/etcd"),
        embedded_etcd_transport=EtcdClientTransport.TLS, etcd_max_response_bytes=64 << 20,
        tls_cert_file=Path("/s.crt"), tls_private_key_file=Path("/s.key"), tls_ca_file=Path("/s-ca.crt"),
        tls_hosts=("hub.example.com", "10.0.0.1"), anonymous_auth=False,
        service_cluster_ips=IPRange.parse("10.200.0.0/16"), service_node_ports=PortRange.parse("31000-31999"),
        cluster_monitor_grace_period=55.0, unhealthy_fleet_threshold=0.4,
        controllers=ControllerSettings(
            default_unreachable_toleration_seconds=60, default_not_ready_toleration_seconds=70,
            kueue_fair_sharing=True, federated_quota_enforcement=True, graceful_eviction_timeout_seconds=90,
            unschedulable_grace_seconds=45.0, federated_hpa_sync_seconds=20.0,
            wait_for_pods_ready=WaitForPodsReady(
                timeout_seconds=300, backoff_base_seconds=7, backoff_max_seconds=700, backoff_limit_count=3,
                timestamp=RequeuingTimestamp.CREATION,
            ),
        ),
        legacy_token_clean_up_period=dt.timedelta(hours=48), leader_lease_ttl=4, identity="hub-a",
        cluster_signing_duration=dt.timedelta(days=30),
        waste_sample_interval=15.0, waste_bucket_length=5,
        watch_limits=WatchLimits(max_bytes=1 << 20, max_events=500, slow_timeout=12.0), write_journal=100,
    )
    limits = config.serving_limits
    assert (limits.request_header_timeout, limits.max_pending_connections, limits.max_requests_inflight) == (3, 64, 80)
    assert limits.request_timeout == 30
    assert hub_config(parse()).serving_limits.request_timeout == 60
    # Without APF, kube's max-in-flight filter: each flag its own limit.
    assert (limits.max_mutating_requests_inflight, limits.flow_control()) == (40, MaxInFlightConfig(80, 40))


def test_apf_shares_both_inflight_flags_sum() -> None:
    limits = hub_config(parse("--max-requests-inflight", "80", "--max-mutating-requests-inflight", "40")).serving_limits
    assert limits.flow_control() == FlowControlConfig(total_concurrency=120)
    for value, enabled in (("true", True), ("False", False), ("0", False)):
        assert hub_config(parse(f"--enable-priority-and-fairness={value}")).serving_limits.enable_priority_and_fairness is enabled
    assert hub_config(parse("--enable-priority-and-fairness")).serving_limits.enable_priority_and_fairness is True


def test_no_execute_taint_policies_are_refused_unless_the_hub_is_told_to_admit_them() -> None:
    assert hub_config(parse()).allow_no_execute_taint_policy is False
    assert hub_config(parse("--allow-no-execute-taint-policy")).allow_no_execute_taint_policy is True
    assert hub_config(parse("--allow-no-execute-taint-policy=false")).allow_no_execute_taint_policy is False


@pytest.mark.parametrize("flag", ["--flowcontrol-shares", "--flowcontrol-queue-length", "--flowcontrol-queue-wait-seconds"])
def test_the_removed_flowcontrol_flags_name_the_objects_instead(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(flag, "5")
    error = capsys.readouterr().err
    assert f"argument {flag}: removed: API Priority and Fairness is configured by FlowSchema and " in error
    assert "PriorityLevelConfiguration" in error


@pytest.mark.parametrize("value", ["0", "7", "90", "2.5", "-5", "five"])
def test_a_bucket_length_that_does_not_divide_a_minute_is_refused_at_start(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(f"--waste-bucket-length={value}")
    error = capsys.readouterr().err
    assert "--waste-bucket-length" in error, error
    if value.isdigit():
        assert "divides a minute (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)" in error, error
