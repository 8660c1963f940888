"""The audit backends' parts, as kube-apiserver's: the batch throttle (client-go's token bucket),
truncation (plugin/pkg/audit/truncate), the legacy log format (``audit.EventString``), compressed
rotation (lumberjack's ``Compress``), and the audit flags refused before anything starts."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.apiserver.audit import AuditLog, AuditMetrics, BatchSettings, WebhookSettings
from controlplane.apiserver.audit.buffered import Buffered, Throttle
from controlplane.apiserver.audit.legacy import event_string
from controlplane.apiserver.audit.truncate import TruncateSettings, Truncating
from controlplane.apiserver.audit.webhook import AuditWebhook
from controlplane.apiserver.kubeconfig import write_kubeconfig
from gpufed.cli import build_parser
from gpufed.commands.controlplane import conflicting_flags
from tests.webhookserver import webhook_server

EVENT: dict[str, Any] = {
    "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse", "auditID": "a1",
    "stage": "ResponseComplete", "requestURI": "/api/v1/namespaces/default/configmaps", "verb": "create",
    "user": {"username": "alice", "groups": ["team-a", "system:authenticated"]},
    "sourceIPs": ["10.0.0.7", "127.0.0.1"], "userAgent": "kubectl/v1.32.0",
    "objectRef": {"resource": "configmaps", "namespace": "default", "name": "big", "apiVersion": "v1"},
    "responseStatus": {"metadata": {}, "code": 201},
    "requestObject": {"metadata": {"name": "big"}, "data": {"k": "x" * 500}},
    "responseObject": {"metadata": {"name": "big"}, "data": {"k": "x" * 500}},
    "requestReceivedTimestamp": "2026-01-02T03:04:05.120000Z", "stageTimestamp": "2026-01-02T03:04:05.130000Z",
    "annotations": {"authorization.k8s.io/decision": "allow"},
}


def test_the_throttle_is_a_token_bucket() -> None:
    now = [100.0]
    throttle = Throttle(qps=4, burst=2, clock=lambda: now[0])
    assert [throttle.reserve() for _ in range(4)] == [0.0, 0.0, 0.25, 0.5]  # the burst, then 4 a second
    now[0] += 10  # refilled, to the burst at most
    assert [throttle.reserve() for _ in range(3)] == [0.0, 0.0, 0.25]


def test_the_legacy_format_is_kubes_event_string() -> None:
    impersonated = {**EVENT, "impersonatedUser": {"username": "bob", "groups": ["dev"]}}
    assert event_string(impersonated) == (
        '2026-01-02T03:04:05.12Z AUDIT: id="a1" stage="ResponseComplete" ip="10.0.0.7" method="create" '
        'user="alice" groups="\\"team-a\\",\\"system:authenticated\\"" as="bob" asgroups="\\"dev\\"" '
        'user-agent="kubectl/v1.32.0" namespace="default" uri="/api/v1/namespaces/default/configmaps" response="201"')
    received = {"auditID": "a2", "stage": "RequestReceived", "verb": "list", "user": {}, "requestURI": "/api",
                "requestReceivedTimestamp": "2026-01-02T03:04:05.000000Z"}
    assert event_string(received) == (
        '2026-01-02T03:04:05Z AUDIT: id="a2" stage="RequestReceived" ip="<unknown>" method="list" user="<none>" '
        'groups="<none>" as="<self>" asgroups="<lookup>" user-agent="" namespace="<none>" uri="/api" '
        'response="<deferred>"')


async def test_the_log_writes_the_legacy_format_when_asked(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.log"), format="legacy")
    assert log.write(EVENT)
    await log.close()
    assert (tmp_path / "audit.log").read_text() == event_string(EVENT) + "\n"


async def test_truncation_drops_objects_then_events_that_stay_too_large(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    metrics = AuditMetrics()
    truncating = Truncating(AuditLog(str(path)), TruncateSettings(enabled=True, max_event_size=1000), metrics)
    metadata = {k: v for k, v in EVENT.items() if k not in ("requestObject", "responseObject")}
    huge = {**metadata, "level": "Metadata", "userAgent": "x" * 2000}
    assert await truncating.process([EVENT, metadata, huge])
    await truncating.close()
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert written[0] == {**metadata, "annotations": {**EVENT["annotations"], "audit.k8s.io/truncated": "true"}}
    assert written[1] == metadata  # small enough as it is
    assert len(written) == 2  # the third had no object to drop: dropped, counted
    assert metrics.errors.labels(plugin="truncate")._value.get() == 1


async def test_rotated_files_are_compressed_when_asked(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.log"), max_backups=2, compress=True)
    log.max_bytes = 300
    for i in range(12):
        log.write({"kind": "Event", "auditID": str(i), "pad": "x" * 60})
    await log.close()
    backups = log.backups()
    assert len(backups) == 2 and all(b.name.endswith(".log.gz") for b in backups), backups
    assert all(os.stat(b).st_mode & 0o777 == 0o600 for b in backups)
    seen = [json.loads(line)["auditID"] for b in backups for line in gzip.decompress(b.read_bytes()).splitlines()]
    seen += [json.loads(line)["auditID"] for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert seen == [str(i) for i in range(12 - len(seen), 12)]


async def test_a_throttled_buffer_waits_for_its_next_batch(tmp_path: Path) -> None:
    async with webhook_server(tmp_path / "receiver") as receiver:
        kubeconfig = tmp_path / "k"
        write_kubeconfig(kubeconfig, server=f"{receiver.url}/audit", ca_pem=base64.b64decode(receiver.ca_bundle),
                         token="t", user="audit")
        metrics = AuditMetrics()
        settings = BatchSettings(max_size=1, max_wait_seconds=600, throttle_qps=0.001, throttle_burst=1)
        buffered = Buffered(AuditWebhook(WebhookSettings(kubeconfig, batch=settings), metrics), settings, metrics)
        assert buffered.throttle is not None
        buffered.start()
        try:
            for i in range(3):
                await buffered.process([{**EVENT, "auditID": str(i)}])
            async with asyncio.timeout(20):
                while not buffered.throttle.waiting:  # noqa: ASYNC110 - the state the test waits for
                    await asyncio.sleep(0.01)
            # One batch went at once (the burst); the others wait in the buffer for tokens.
            assert [[e["auditID"] for e in b["items"]] for b in receiver.received["/audit"]] == [["0"]]
            assert [e["auditID"] for e in buffered.buffer] == ["1", "2"]
        finally:
            await buffered.close()  # what waits is sent at shutdown, unthrottled
        assert [[e["auditID"] for e in b["items"]] for b in receiver.received["/audit"]] == [["0"], ["1"], ["2"]]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--audit-webhook-version", "audit.k8s.io/v1beta1"],
         '--audit-webhook-version audit.k8s.io/v1beta1: invalid group version, allowed versions are ["audit.k8s.io/v1"]'),
        (["--audit-log-truncate-max-event-size", "2000", "--audit-log-truncate-max-batch-size", "1000"],
         "--audit-log-truncate-max-batch-size 1000 must be greater than or equal to --audit-log-truncate-max-event-size (2000)"),
        (["--audit-log-mode", "batch", "--audit-webhook-batch-throttle-enable=false"], None),
    ],
    ids=["version", "truncate-sizes", "fine"],
)
def test_audit_flags_that_cannot_work_are_refused(flags: list[str], message: str | None) -> None:
    argv = ["controlplane", "--audit-policy-file", "p.yaml", "--audit-log-path", "a.log",
            "--audit-webhook-config-file", "k", *flags]
    assert conflicting_flags(build_parser().parse_args(argv)) == message


def test_the_audit_flags_defaults_are_kubes() -> None:
    from gpufed.commands.auditflags import audit_config

    args = build_parser().parse_args(["controlplane", "--audit-policy-file", "p.yaml", "--audit-log-path", "a.log",
                                      "--audit-webhook-config-file", "k"])
    config = audit_config(args)
    assert config is not None and config.log is not None and config.webhook is not None
    assert config.log.batch == BatchSettings(mode="blocking", max_size=1, max_wait_seconds=0, throttle_enable=False)
    assert config.webhook.batch == BatchSettings(mode="batch", buffer_size=10000, max_size=400, max_wait_seconds=30,
                                                 throttle_enable=True, throttle_qps=10, throttle_burst=15)
    assert config.log.truncate == config.webhook.truncate == TruncateSettings(False, 10 * 1024 * 1024, 100 * 1024)
    assert (config.log.format, config.log.compress) == ("json", False)


@pytest.mark.parametrize(
    ("flag", "contents", "message"),
    [
        ("--audit-policy-file", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]\n", 'rules[0].level: Unsupported value: "Everything"'),
        ("--audit-webhook-config-file", "kind: Config\nclusters: []\n", "has no current-context"),
    ],
    ids=["policy", "webhook-kubeconfig"],
)
def test_a_bad_audit_file_stops_the_hub_before_anything_starts(
    tmp_path: Path, flag: str, contents: str, message: str,
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None"}]}))
    bad = tmp_path / "bad.yaml"
    bad.write_text(contents)
    files = {"--audit-policy-file": policy, "--audit-webhook-config-file": tmp_path / "none"}
    files[flag] = bad
    state = tmp_path / "hub"
    argv = [sys.executable, "-m", "gpufed.cli", "controlplane", "--state-dir", str(state), "--listen", "127.0.0.1:0",
            *[str(x) for pair in files.items() for x in pair]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 2, done.stderr
    assert f"error: {flag} {bad}: " in done.stderr and message in done.stderr
    assert not state.exists()  # no state directory, no etcd: nothing started
