"""The audit backends' modes on a real hub, as kube-apiserver's ``--audit-{log,webhook}-mode``:
``blocking`` sends each event in the request's path, ``blocking-strict`` also fails a request whose
``RequestReceived`` event (recorded once the request is authenticated) cannot be recorded, ``batch``
buffers (the log too); truncation, the webhook's throttling and its client certificate; a handler
that fails unexpectedly is a ``Panic`` event."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controlplane.apiserver.audit import (
    AuditConfig,
    BatchSettings,
    LogSettings,
    TruncateSettings,
    WebhookSettings,
)
from controlplane.apiserver.endpoints import Endpoints
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import load_kubeconfig, write_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from tests import hubmetrics
from tests.webhookserver import WebhookServer, client_certificate, webhook_server

from .realhub import Client, eventually

POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
    "rules": [
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}]},
        {"level": "Metadata", "nonResourceURLs": ["/version"]},
        {"level": "None"},
    ],
}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def receiver(tmp_path: Path) -> AsyncIterator[WebhookServer]:
    async with webhook_server(tmp_path / "receiver") as running:
        yield running


def policy_file(tmp_path: Path) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    return policy


def webhook(tmp_path: Path, receiver: WebhookServer, path: str, **settings: Any) -> WebhookSettings:
    kubeconfig = tmp_path / "audit-webhook.kubeconfig"
    write_kubeconfig(kubeconfig, server=f"{receiver.url}{path}", ca_pem=base64.b64decode(receiver.ca_bundle),
                     token="audit-token", user="audit")
    truncate = settings.pop("truncate", TruncateSettings())
    return WebhookSettings(kubeconfig, batch=BatchSettings(**settings), truncate=truncate)


@asynccontextmanager
async def audited(tmp_path: Path, config: AuditConfig) -> AsyncIterator[tuple[Hub, aiohttp.ClientSession, Client]]:
    """A hub auditing as ``config``, a session to it and its admin."""
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0, audit=config)) as hub:
        credentials = load_kubeconfig(hub.kubeconfig_path)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
        async with aiohttp.ClientSession(connector=connector) as session:
            yield hub, session, Client(session, hub, credentials.token)


def sent(receiver: WebhookServer, path: str = "/audit") -> list[dict[str, Any]]:
    return [event for batch in receiver.received[path] for event in batch["items"]]


async def test_blocking_sends_each_event_before_the_request_is_answered(tmp_path: Path, receiver: WebhookServer) -> None:
    config = AuditConfig(policy_file(tmp_path), webhook=webhook(tmp_path, receiver, "/audit", mode="blocking"))
    async with audited(tmp_path, config) as (_, _, admin):
        code, _ = await admin("POST", CONFIGMAPS, {"metadata": {"name": "first"}})
        assert code == 201
        # Already there: each event was POSTed (one EventList each) in the request's path.
        assert [e["stage"] for e in sent(receiver)] == ["RequestReceived", "ResponseComplete"]
        assert [len(b["items"]) for b in receiver.received["/audit"]] == [1, 1]


@pytest.mark.parametrize(("mode", "answered"), [("blocking", 201), ("blocking-strict", 500)])
async def test_blocking_strict_fails_a_request_whose_request_received_event_is_lost(
    tmp_path: Path, receiver: WebhookServer, mode: str, answered: int,
) -> None:
    config = AuditConfig(policy_file(tmp_path), webhook=webhook(tmp_path, receiver, "/audit-refused", mode=mode))
    async with audited(tmp_path, config) as (hub, session, admin):
        rejected = sum(v for _, v in await hubmetrics.samples(hub, "apiserver_audit_requests_rejected_total"))
        code, status = await admin("POST", CONFIGMAPS, {"metadata": {"name": "unrecorded"}})
        assert code == answered, status
        stored, _ = await admin("GET", f"{CONFIGMAPS}/unrecorded")
        assert hub.tokens is not None
        alice = await hub.tokens.create(role=Role.USER, name="alice")
        # Recorded after authentication, before authorization: kube's order.
        refused, _ = await Client(session, hub, alice.token)("DELETE", f"{CONFIGMAPS}/unrecorded")
        now_rejected = sum(v for _, v in await hubmetrics.samples(hub, "apiserver_audit_requests_rejected_total"))
    if mode == "blocking":
        assert (stored, refused, now_rejected - rejected) == (200, 403, 0)
        return
    assert status["kind"] == "Status" and status["reason"] == "InternalError" and status["code"] == 500
    assert status["message"] == f'Internal Server Error: "{CONFIGMAPS}": failed to store audit event'
    # The handler never ran: nothing stored; the GET and the refused DELETE failed alike.
    assert (stored, refused, now_rejected - rejected) == (500, 500, 3)


async def test_the_log_in_batch_mode_writes_from_its_buffer(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    batch = BatchSettings(mode="batch", max_size=3, max_wait_seconds=600, throttle_enable=False)
    config = AuditConfig(policy_file(tmp_path), LogSettings(str(log), batch=batch))
    async with audited(tmp_path, config) as (_, _, admin):
        assert (await admin("POST", CONFIGMAPS, {"metadata": {"name": "one"}}))[0] == 201
        assert log.read_text() == ""  # two events wait for a third
        assert (await admin("POST", CONFIGMAPS, {"metadata": {"name": "two"}}))[0] == 201

        async def batch_written() -> bool:
            return len(log.read_text().splitlines()) == 3

        await eventually(batch_written)
    # The fourth at shutdown.
    stages = [json.loads(line)["stage"] for line in log.read_text().splitlines()]
    assert stages == ["RequestReceived", "ResponseComplete"] * 2


async def test_truncation_drops_the_objects_of_large_events_and_splits_batches(
    tmp_path: Path, receiver: WebhookServer,
) -> None:
    truncate = TruncateSettings(enabled=True, max_batch_size=2000, max_event_size=2000)
    settings = webhook(tmp_path, receiver, "/audit", max_size=4, max_wait_seconds=600, truncate=truncate)
    config = AuditConfig(policy_file(tmp_path), webhook=settings)
    async with audited(tmp_path, config) as (_, _, admin):
        assert (await admin("POST", CONFIGMAPS, {"metadata": {"name": "big"}, "data": {"k": "x" * 3000}}))[0] == 201
        assert (await admin("POST", CONFIGMAPS, {"metadata": {"name": "small"}, "data": {"k": "y"}}))[0] == 201

        async def all_sent() -> bool:
            return len(sent(receiver)) == 4

        await eventually(all_sent)
    [big] = [e for e in sent(receiver) if e["stage"] == "ResponseComplete" and e["objectRef"]["name"] == "big"]
    assert "requestObject" not in big and "responseObject" not in big
    assert big["annotations"]["audit.k8s.io/truncated"] == "true"
    [small] = [e for e in sent(receiver) if e["stage"] == "ResponseComplete" and e["objectRef"]["name"] == "small"]
    assert small["requestObject"]["data"] == {"k": "y"} and "audit.k8s.io/truncated" not in small["annotations"]
    # One batch of four from the buffer, POSTed in parts of at most 2000 bytes of events.
    posts = receiver.received["/audit"]
    assert len(posts) >= 2
    assert all(sum(len(json.dumps(e, separators=(",", ":"))) for e in post["items"]) <= 2000 for post in posts)


async def test_the_webhook_presents_its_kubeconfigs_client_certificate(tmp_path: Path) -> None:
    async with webhook_server(tmp_path / "receiver", client_certificates=True) as receiver:
        cert, key = client_certificate(tmp_path / "receiver", "kube-apiserver-audit")
        kubeconfig = tmp_path / "audit-webhook.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "audit",
            "clusters": [{"name": "r", "cluster": {"server": f"{receiver.url}/audit",
                                                   "certificate-authority-data": receiver.ca_bundle}}],
            "users": [{"name": "u", "user": {"client-certificate-data": base64.b64encode(cert).decode(),
                                             "client-key": "audit.key"}}],
            "contexts": [{"name": "audit", "context": {"cluster": "r", "user": "u"}}],
        }))
        (tmp_path / "audit.key").write_bytes(key)  # a file, relative to the kubeconfig
        config = AuditConfig(policy_file(tmp_path), webhook=WebhookSettings(kubeconfig, batch=BatchSettings(mode="blocking")))
        async with audited(tmp_path, config) as (_, _, admin):
            assert (await admin("POST", CONFIGMAPS, {"metadata": {"name": "c"}}))[0] == 201
        assert [e["stage"] for e in sent(receiver)] == ["RequestReceived", "ResponseComplete"]


async def test_a_handler_that_fails_is_a_panic_event_and_a_500_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(_self: Endpoints, _request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        raise RuntimeError("version table missing")

    monkeypatch.setattr(Endpoints, "version", broken)
    log = tmp_path / "audit.log"
    config = AuditConfig(policy_file(tmp_path), LogSettings(str(log)))
    async with audited(tmp_path, config) as (_, _, admin):
        code, status = await admin("GET", "/version")
    assert code == 500 and status["kind"] == "Status" and status["reason"] == "InternalError"
    assert "version table missing" not in json.dumps(status) and "Traceback" not in json.dumps(status)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["stage"] for e in events] == ["RequestReceived", "Panic"]
    assert events[1]["responseStatus"] == {
        "metadata": {}, "status": "Failure", "reason": "InternalError", "code": 500,
        "message": "APIServer panic'd: RuntimeError: version table missing"}
