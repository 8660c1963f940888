"""Bytes at the hub's HTTP edge that no well-behaved client sends, answered as kube-apiserver
answers them, over a raw socket on the runner and site the hub serves its API with:

- a request body with ``Content-Encoding: gzip`` is read as the bytes it is (Go's net/http
  never inflates a request body, so neither does kube-apiserver): a gzipped object is kube's
  decode error, and the hub never inflates a body it is sent;
- header values that are not UTF-8 (``Impersonate-User: \\xff``), which kube reads as bytes and
  its JSON encoder writes with U+FFFD in their place, are echoed in a Status the same way: the
  Status is JSON, never a plain-text 500 or a traceback, and so does the audit log.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web

from controlplane.apiserver.app import create_app
from controlplane.apiserver.audit import AuditConfig, Auditor, LogSettings
from controlplane.apiserver.auth import TokenStore
from controlplane.apiserver.identity import Authorizer, Decision, RequestAttributes, Role
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.serving import GuardedTCPSite, ServingLimits, api_runner
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@asynccontextmanager
async def _served(app: web.Application, limits: ServingLimits | None = None) -> AsyncIterator[int]:
    runner = api_runner(app)
    await runner.setup()
    site = GuardedTCPSite(runner, "127.0.0.1", 0, ssl_context=None, limits=limits or ServingLimits())
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


class _NoImpersonation:
    """Allows everything but impersonation, bob's name aside."""

    def authorize(self, attributes: RequestAttributes) -> Decision:
        return Decision(
            attributes.verb != "impersonate" or (attributes.resource, attributes.name) == ("users", "bob")
        )


class _AllowAll:
    def authorize(self, attributes: RequestAttributes) -> Decision:
        return Decision(True)


@asynccontextmanager
async def _with_admin(
    registry: Registry, authorizer: Authorizer, audit: Auditor | None = None
) -> AsyncIterator[tuple[int, str]]:
    """The port of an API server with token authentication over a fresh store, and an admin's token."""
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        tokens = TokenStore(memory)
        token = (await tokens.create(role=Role.ADMIN, name="ada")).token
        app = create_app(objects, registry, authenticator=tokens, authorizer=authorizer, audit=audit)
        async with _served(app) as port:
            yield port, token


@pytest.fixture
async def hub(api_registry: Registry) -> AsyncIterator[tuple[int, str]]:
    async with _with_admin(api_registry, _NoImpersonation()) as served:
        yield served


async def _exchange(port: int, head: bytes, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """One request (``head`` holds its request line and headers) on a connection of its own: the
    answer's status code, headers and body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), headers, content


def _status(content: bytes) -> dict[str, object]:
    status = orjson.loads(content)
    assert status["kind"] == "Status", status
    return status  # type: ignore[no-any-return]


async def test_a_gzip_body_is_read_as_it_is_sent(hub: tuple[int, str]) -> None:
    port, token = hub
    config_map = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "zipped"}})
    zipped = gzip.compress(config_map)
    head = (
        f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: {len(zipped)}\r\n"
    ).encode()
    code, _, content = await _exchange(port, head, zipped)
    status = _status(content)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert "the object provided is unrecognized" in str(status["message"]), status
    assert "invalid character '\\x1f' looking for beginning of value" in str(status["message"]), status


async def test_a_gzip_body_without_credentials_is_not_inflated(
    hub: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import zlib

    inflated: list[int] = []
    real = zlib.decompressobj

    def counting(*args: object, **kwargs: object) -> object:
        inflated.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zlib, "decompressobj", counting)
    port, _ = hub
    bomb = gzip.compress(bytes(8 << 20))  # 8 MiB of zeros in about 8 KB
    head = (
        f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\n"
        f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n"
    ).encode()
    code, _, content = await _exchange(port, head, bomb)
    assert (code, _status(content)["reason"]) == (401, "Unauthorized")
    assert inflated == []


@pytest.mark.parametrize(
    ("header", "echoed"),
    [
        pytest.param(b"Impersonate-User: \xff", "\ufffd", id="user"),
        pytest.param(b"Impersonate-User: bob\r\nImpersonate-Group: a\xffb", "a\ufffdb", id="group"),
        pytest.param(b"Impersonate-User: bob\r\nImpersonate-Uid: \xfe\xff", "\ufffd\ufffd", id="uid"),
        pytest.param(b"Impersonate-User: bob\r\nImpersonate-Extra-Scopes: \xff", "\ufffd", id="extra"),
    ],
)
async def test_header_bytes_that_are_not_utf8_are_echoed_as_kube_writes_them(
    hub: tuple[int, str], header: bytes, echoed: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    port, token = hub
    head = (
        f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\n".encode()
        + header
        + b"\r\n"
    )
    code, headers, content = await _exchange(port, head)
    assert b"application/json" in headers, (code, headers, content)
    status = _status(content)
    assert code == status["code"] and code in (400, 403), status
    assert echoed in str(status["message"]), status
    assert not caplog.records, [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("log_format", ["json", "legacy"])
async def test_the_audit_log_writes_such_bytes_as_kube_does(
    api_registry: Registry, tmp_path: Path, log_format: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The audit log records the User-Agent and the impersonated user as sent, bytes that are not
    UTF-8 as U+FFFD (the request was a 500 while its event could not be written)."""
    caplog.set_level(logging.ERROR)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]})
    )
    log = tmp_path / "audit.log"
    auditor = AuditConfig(policy, LogSettings(str(log), format=log_format)).auditor()
    async with _with_admin(api_registry, _AllowAll(), auditor) as (port, token):
        head = f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\n".encode()
        code, _, content = await _exchange(
            port, head + b"User-Agent: kubectl\xff/1\r\nImpersonate-User: b\xffb\r\n"
        )
    assert code == 200, content
    written = log.read_text(encoding="utf-8")
    assert "kubectl\ufffd/1" in written and "b\ufffdb" in written, written
    assert not caplog.records, [r.getMessage() for r in caplog.records]


async def test_writes_store_such_bytes_as_kube_does() -> None:
    """What a write takes from a header is stored with U+FFFD for such bytes, as kube's encoder
    stores it: the manager named by a User-Agent (a 500 while the object could not be encoded), the
    same for each of the client's writes."""
    async with _with_admin(hub_registry(), _AllowAll()) as (port, token):

        async def send(method: str, path: str, media: str, body: bytes, extra: bytes) -> dict[str, Any]:
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: {media}\r\nContent-Length: {len(body)}\r\n"
            ).encode()
            code, _, content = await _exchange(port, head + extra, body)
            assert code in (200, 201), content
            return orjson.loads(content)  # type: ignore[no-any-return]

        agent = b"User-Agent: deploy\xff/1.0\r\n"
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "a"},
            "data": {"k": "v"},
        }
        await send("POST", CONFIGMAPS, "application/json", orjson.dumps(config_map), agent)
        patched = await send(
            "PATCH", f"{CONFIGMAPS}/a", "application/merge-patch+json", b'{"data":{"k":"w"}}', agent
        )
        assert [entry["manager"] for entry in patched["metadata"]["managedFields"]] == ["deploy\ufffd"]


def test_an_object_holding_such_a_string_is_stored_with_u_fffd() -> None:
    """The store's encoder, under every write: a string taken from a header is stored as kube's
    encoder writes it, not refused by orjson."""
    from controlplane.apiserver import codec
    from controlplane.storage.interface import KeyValue

    stored = codec.encode(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"user": "b\udcffb"}}
    )
    assert codec.decode(KeyValue("k", stored, 1, 1))["data"]["user"] == "b\ufffdb"
