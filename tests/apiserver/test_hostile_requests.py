"""Each malformed input the hardening run answered with a 500 now gets a 4xx ``Status``,
over HTTP, against the object layer on a real etcd; the alias bomb is answered at once."""

from __future__ import annotations

import io
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import EtcdStore


def alias_bomb(levels: int = 8, fanout: int = 9) -> bytes:
    """The "billion laughs" document: each level repeats the previous one ``fanout`` times."""
    lines = [b"l0: &l0 [" + b",".join([b"lol"] * fanout) + b"]"]
    for level in range(1, levels + 1):
        refs = b",".join([b"*l%d" % (level - 1)] * fanout)
        lines.append(b"l%d: &l%d [%s]" % (level, level, refs))
    return b"\n".join(lines) + b"\n"


def nested_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
YAML = {"Content-Type": "application/yaml"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
JSON = {"Content-Type": "application/json"}
BIG = str(2**64)
#: Over etcd's default 1.5 MiB request limit, under the hub's 3 MiB body limit (a Lease: kube
#: refuses a ConfigMap over 1 MiB before it reaches the store).
HUGE = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "huge"},
                   "spec": {"holderIdentity": "x" * 2_900_000}}).encode()
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


@pytest.fixture
async def etcd_api(etcd_endpoint: str, api_registry: Registry) -> AsyncIterator[Client]:
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/hostile-{time.monotonic_ns()}") as store:
        objects = ObjectStore(store, api_registry)
        await objects.bootstrap()
        app = create_app(objects, api_registry)
        async with TestClient(TestServer(app)) as client:
            seed = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"}}
            assert (await client.post(CONFIGMAPS, json=seed)).status == 201
            yield client


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "code", "reason"),
    [
        ("POST", CONFIGMAPS, YAML, alias_bomb(), 400, "BadRequest"),
        ("PATCH", f"{CONFIGMAPS}/seed?fieldManager=t", APPLY, alias_bomb(), 400, "BadRequest"),
        ("PATCH", f"{CONFIGMAPS}/seed?fieldManager=t", APPLY,
         b"apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: seed, labels: *m}\n", 400, "BadRequest"),
        ("PATCH", f"{CONFIGMAPS}/seed?fieldManager=t", APPLY,
         b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: seed}\ndata: {a: !!binary aGk=}\n", 400, "BadRequest"),
        ("POST", CONFIGMAPS, YAML, b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n, generation: " + BIG.encode()
         + b"}\n", 400, "BadRequest"),
        ("POST", CONFIGMAPS, JSON, nested_json(1000), 400, "BadRequest"),
        ("GET", f"{CONFIGMAPS}?limit={BIG}", {}, None, 400, "BadRequest"),
        ("GET", f"{CONFIGMAPS}?resourceVersion={BIG}&resourceVersionMatch=Exact", {}, None, 400, "BadRequest"),
        ("GET", f"{CONFIGMAPS}?resourceVersion={2**63}&resourceVersionMatch=Exact", {}, None, 504, "Timeout"),
        ("GET", f"{CONFIGMAPS}?resourceVersion={2**62}&resourceVersionMatch=Exact", {}, None, 504, "Timeout"),
        ("POST", LEASES, JSON, HUGE, 413, "RequestEntityTooLarge"),
        ("DELETE", f"{CONFIGMAPS}/seed", JSON, b'{"preconditions":"x"}', 400, "BadRequest"),
        ("DELETE", f"{CONFIGMAPS}/seed", JSON, b'{"preconditions":{"uid":1}}', 400, "BadRequest"),
        ("DELETE", f"{CONFIGMAPS}/seed", JSON, b'{"gracePeriodSeconds":"x"}', 400, "BadRequest"),
    ],
    ids=[
        "alias-bomb-create", "alias-bomb-apply", "recursive-anchor-apply", "binary-apply", "yaml-int-2^64",
        "json-1000-deep", "limit-2^64", "resourceVersion-2^64", "exact-list-past-int64",
        "resourceVersion-ahead-of-the-store", "object-over-etcd-limit", "delete-preconditions-string",
        "delete-preconditions-uid-int", "delete-grace-string",
    ],
)
async def test_malformed_input_gets_a_4xx_status(
    etcd_api: Client, method: str, path: str, headers: dict[str, str], body: bytes | None, code: int, reason: str
) -> None:
    started = time.perf_counter()
    data = io.BytesIO(body) if body is not None and len(body) > 1_000_000 else body  # aiohttp warns on big bytes
    response = await etcd_api.request(method, path, headers=headers, data=data)
    elapsed = time.perf_counter() - started
    status = await response.json()
    print(f"{method} {path[:60]}: {response.status} in {elapsed * 1000:.0f} ms: {status.get('message', '')[:100]}")
    assert (response.status, status["kind"], status["reason"]) == (code, "Status", reason), status
    assert "127.0.0.1" not in status["message"] and "etcd at" not in status["message"]
    if reason == "Timeout":  # kube's answer to a resourceVersion ahead of the store
        assert [c["reason"] for c in status["details"]["causes"]] == ["ResourceVersionTooLarge"]
    # The seed survived every refused request.
    assert (await etcd_api.get(f"{CONFIGMAPS}/seed")).status == 200


async def test_a_watch_from_past_etcds_revisions_waits_for_them(etcd_api: Client) -> None:
    """A watch at a uint64 resourceVersion etcd's int64 revisions never reach is kube's 200 stream
    that waits for it (etcd is never asked about it), ended by its timeout with no event."""
    response = await etcd_api.get(CONFIGMAPS, params={"watch": "1", "resourceVersion": str(2**63 - 1), "timeoutSeconds": "1"})
    assert response.status == 200
    assert await response.text() == ""
