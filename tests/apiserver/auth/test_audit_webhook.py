"""The audit webhook on a real hub, as kube-apiserver's ``--audit-webhook-config-file`` in batch
mode: EventLists POSTed over HTTPS to a real receiver (its own CA, from the kubeconfig), alongside
the log file when both are given; what the buffer holds is sent at shutdown; a receiver that is down
never holds a request up, and the events past the buffer are dropped and counted in
``apiserver_audit_error_total{plugin="buffered"}``."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.apiserver.audit import AuditConfig, BatchSettings, LogSettings, PolicyError, WebhookSettings
from controlplane.apiserver.kubeconfig import load_kubeconfig, write_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import build_parser
from gpufed.commands.controlplane import conflicting_flags
from tests import hubmetrics
from tests.webhookserver import WebhookServer, webhook_server

from .realhub import Client, eventually

POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
    "rules": [
        {"level": "Metadata", "resources": [{"group": "", "resources": ["configmaps"]}], "verbs": ["create"]},
        {"level": "None"},
    ],
}


@pytest.fixture
async def receiver(tmp_path: Path) -> AsyncIterator[WebhookServer]:
    async with webhook_server(tmp_path / "receiver") as running:
        yield running


def webhook_config(tmp_path: Path, server: str, ca_pem: bytes, **settings: Any) -> AuditConfig:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    kubeconfig = tmp_path / "audit-webhook.kubeconfig"
    write_kubeconfig(kubeconfig, server=server, ca_pem=ca_pem, token="audit-token", user="audit")
    log = settings.pop("log_path", None)
    backoff = settings.pop("initial_backoff_seconds", 10.0)
    batch = BatchSettings(**settings)
    return AuditConfig(policy, LogSettings(log) if log else None,
                       WebhookSettings(kubeconfig, batch=batch, initial_backoff_seconds=backoff))


async def create_configmaps(hub: Hub, names: list[str]) -> None:
    credentials = load_kubeconfig(hub.kubeconfig_path)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    async with aiohttp.ClientSession(connector=connector) as session:
        admin = Client(session, hub, credentials.token)
        for name in names:
            code, created = await admin("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}})
            assert code == 201, created


def batches(receiver: WebhookServer) -> list[dict[str, Any]]:
    return receiver.received["/audit"]


def sent(receiver: WebhookServer) -> list[dict[str, Any]]:
    return [event for batch in batches(receiver) for event in batch["items"]]


async def metric(hub: Hub, name: str, **labels: str) -> float:
    return sum(value for found, value in await hubmetrics.samples(hub, name) if found == labels)


async def test_events_go_to_the_webhook_in_batches_and_to_the_log(tmp_path: Path, receiver: WebhookServer) -> None:
    log = tmp_path / "audit.log"
    config = webhook_config(tmp_path, f"{receiver.url}/audit", base64.b64decode(receiver.ca_bundle),
                            log_path=str(log), max_size=3, max_wait_seconds=1.0)
    names = [f"settings-{i}" for i in range(4)]
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=config)) as hub:
        # The process's metrics: other hubs of this process counted before.
        events, errors = await metric(hub, "apiserver_audit_event_total"), await metric(hub, "apiserver_audit_error_total", plugin="webhook")
        await create_configmaps(hub, names)

        async def all_sent() -> bool:
            return len(sent(receiver)) == 2 * len(names)

        await eventually(all_sent)
        # Counted once each, whichever backends take it; none lost.
        assert await metric(hub, "apiserver_audit_event_total") - events == 2 * len(names)
        assert await metric(hub, "apiserver_audit_error_total", plugin="webhook") - errors == 0
    assert {(b["apiVersion"], b["kind"]) for b in batches(receiver)} == {("audit.k8s.io/v1", "EventList")}
    assert all(len(b["items"]) <= 3 for b in batches(receiver))
    written = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(json.dumps(e, sort_keys=True) for e in sent(receiver)) == sorted(json.dumps(e, sort_keys=True) for e in written)
    complete = [e for e in sent(receiver) if e["stage"] == "ResponseComplete"]
    assert sorted(e["objectRef"]["name"] for e in complete) == names
    assert all(e["kind"] == "Event" and e["level"] == "Metadata" and e["verb"] == "create" for e in complete)


async def test_what_the_buffer_holds_is_sent_at_shutdown(tmp_path: Path, receiver: WebhookServer) -> None:
    # kube's defaults: a batch of 400 or 30 s -- neither comes before the hub stops.
    config = webhook_config(tmp_path, f"{receiver.url}/audit", base64.b64decode(receiver.ca_bundle))
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=config)) as hub:
        await create_configmaps(hub, ["early", "late"])
        assert sent(receiver) == []
    assert [e["stage"] for e in sent(receiver)] == ["RequestReceived", "ResponseComplete"] * 2
    assert [e["objectRef"].get("name") for e in sent(receiver)] == [None, "early", None, "late"]


@pytest.mark.parametrize(("path", "posts", "lost"), [("/audit-once-500", 2, 0), ("/audit-refused", 1, 2)],
                         ids=["500-retried", "400-dropped"])
async def test_a_failed_batch_is_retried_as_kube_retries_it(
    tmp_path: Path, receiver: WebhookServer, path: str, posts: int, lost: int,
) -> None:
    config = webhook_config(tmp_path, f"{receiver.url}{path}", base64.b64decode(receiver.ca_bundle),
                            max_size=2, initial_backoff_seconds=0.05)
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=config)) as hub:
        errors = await metric(hub, "apiserver_audit_error_total", plugin="webhook")
        await create_configmaps(hub, ["once"])

        async def answered() -> bool:
            return len(receiver.received[path]) == posts and await metric(
                hub, "apiserver_audit_error_total", plugin="webhook") - errors == lost

        await eventually(answered)
    assert len(receiver.received[path]) == posts
    assert all(b["items"] == receiver.received[path][0]["items"] for b in receiver.received[path])


async def test_a_receiver_that_is_down_holds_no_request_and_the_overflow_is_counted(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ca = tmp_path / "ca.pem"
    async with webhook_server(tmp_path / "unused") as other:  # any CA will do: nothing answers
        ca.write_bytes(base64.b64decode(other.ca_bundle))
    config = webhook_config(tmp_path, f"https://127.0.0.1:{port}/audit", ca.read_bytes(), buffer_size=5)
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=config)) as hub:
        events, errors = await metric(hub, "apiserver_audit_event_total"), await metric(hub, "apiserver_audit_error_total", plugin="buffered")
        await create_configmaps(hub, [f"cm-{i}" for i in range(6)])  # every request answered (201)
        assert await metric(hub, "apiserver_audit_event_total") - events == 12
        # Five wait in the buffer; the other seven were dropped and counted.
        assert await metric(hub, "apiserver_audit_error_total", plugin="buffered") - errors == 7


async def test_a_webhook_kubeconfig_that_cannot_be_read_stops_the_hub(tmp_path: Path) -> None:
    config = webhook_config(tmp_path, "https://127.0.0.1:1/audit", b"")
    assert config.webhook is not None
    config.webhook.config_file.write_text("kind: Config\nclusters: []\n")
    with pytest.raises(PolicyError, match=r"--audit-webhook-config-file .*: .* has no current-context"):
        async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=config)):
            pass


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--audit-policy-file", "p.yaml"], "--audit-policy-file needs --audit-log-path, --audit-webhook-config-file or both"),
        (["--audit-webhook-config-file", "k"], "--audit-log-path and --audit-webhook-config-file need --audit-policy-file"),
        (["--audit-policy-file", "p.yaml", "--audit-webhook-config-file", "k"], None),
        (["--audit-policy-file", "p.yaml", "--audit-log-path", "a.log", "--audit-webhook-config-file", "k"], None),
    ],
    ids=["policy-alone", "webhook-without-policy", "policy-and-webhook", "both-backends"],
)
def test_the_audit_policy_goes_with_either_backend(flags: list[str], message: str | None) -> None:
    assert conflicting_flags(build_parser().parse_args(["controlplane", *flags])) == message
