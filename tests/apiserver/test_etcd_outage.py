"""The hub during an etcd outage: every request fails fast with ``503 ServiceUnavailable``
and a ``Retry-After`` header (kube's answer), the Status does not name etcd's address, no
traceback is logged per request, and the hub serves again once etcd is back.

A real hub on a real etcd that is stopped and started again (same data, same address).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from controlplane.storage import EmbeddedEtcd, EtcdClientTransport
from controlplane.storage.embedded import SOCKET_NAME

pytestmark = pytest.mark.waiting

#: The outage answer took 10 s (the etcd client's retry budget) before; it must be seconds
#: at most for the first request of an outage and immediate once the outage is known.
FIRST_ANSWER_SECONDS = 4.0
LATER_ANSWER_SECONDS = 1.0
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(params=[EtcdClientTransport.UNIX, EtcdClientTransport.TLS])
async def etcd(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[EmbeddedEtcd]:
    etcd = EmbeddedEtcd(
        tmp_path / "etcd", log_file=tmp_path / "etcd.log", unsafe_no_fsync=True, transport=request.param
    )
    await etcd.start()
    try:
        yield etcd
    finally:
        await etcd.stop()


async def call(session: aiohttp.ClientSession, hub: Hub, method: str, path: str, token: str,
               body: dict[str, object] | None = None) -> tuple[int, dict[str, str], dict[str, object], float]:
    started = time.monotonic()
    async with session.request(
        method, f"{hub.url}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
    ) as resp:
        payload = await resp.json(content_type=None)
        return resp.status, dict(resp.headers), payload, time.monotonic() - started


async def test_an_etcd_outage_is_a_fast_503_with_retry_after_and_the_hub_recovers(
    tmp_path: Path, etcd: EmbeddedEtcd, caplog: pytest.LogCaptureFixture
) -> None:
    config = HubConfig(
        state_dir=tmp_path / "hub", port=0, etcd_endpoints=(etcd.client_url,), etcd_tls=etcd.client_tls,
        leader_lease_ttl=2,
    )
    # Where etcd listens is no business of API clients: neither its port nor its socket's name.
    port = SOCKET_NAME if etcd.transport is EtcdClientTransport.UNIX else str(urlsplit(etcd.client_url).port)
    async with Hub(config) as hub:
        assert hub.tokens is not None
        admin = load_kubeconfig(hub.kubeconfig_path)
        # A token the hub has not seen yet: authenticating it needs etcd.
        viewer = (await hub.tokens.create(role=Role.VIEWER, name="outage-viewer")).token
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(admin.ca_pem))
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
            status, _, _, _ = await call(session, hub, "GET", CONFIGMAPS, admin.token)
            assert status == 200

            watch = await session.get(
                f"{hub.url}{CONFIGMAPS}?watch=1&timeoutSeconds=60", headers={"Authorization": f"Bearer {admin.token}"}
            )
            await etcd.stop()
            caplog.clear()
            # An open watch ends with an ERROR event carrying the same 503 Status.
            async with asyncio.timeout(10):
                line = await watch.content.readline()
            watch.close()
            event = json.loads(line)
            print("watch:", event)
            assert event["type"] == "ERROR" and event["object"]["code"] == 503, event
            assert port not in event["object"]["message"]
            requests = [
                ("GET", CONFIGMAPS, admin.token, None),
                ("POST", CONFIGMAPS, admin.token,
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during-outage"}}),
                ("GET", f"{CONFIGMAPS}/anything", admin.token, None),
                ("GET", CONFIGMAPS, viewer, None),
                ("DELETE", f"{CONFIGMAPS}/anything", admin.token, None),
            ]
            timings = []
            for method, path, token, body in requests * 2:
                status, headers, payload, seconds = await call(session, hub, method, path, token, body)
                timings.append(seconds)
                assert status == 503, (method, path, payload)
                assert payload["reason"] == "ServiceUnavailable" and payload["code"] == 503
                assert headers.get("Retry-After") == "1"
                message = str(payload["message"])
                assert "etcd" in message and port not in message and "127.0.0.1" not in message
            print(f"answers during the outage took {', '.join(f'{t:.2f}s' for t in timings)}")
            assert timings[0] < FIRST_ANSWER_SECONDS
            assert max(timings[1:]) < LATER_ANSWER_SECONDS
            # Readiness probes during the outage: the change is logged once, not once per probe
            # (informers: tests/controllers/test_informing.py).
            for _probe in range(4):
                async with session.get(f"{hub.url}/readyz") as resp:
                    assert resp.status == 500
                    assert "[-]etcd failed: reason withheld\n" in await resp.text()
            # /livez leaves etcd out (kube's): ok without credentials and with a token the hub had
            # read before the outage (judged by that record, as kube's informer caches answer).
            for headers in ({}, {"Authorization": f"Bearer {admin.token}"}):
                async with session.get(f"{hub.url}/livez", headers=headers) as resp:
                    assert (resp.status, await resp.text()) == (200, "ok"), headers
            readiness = [r.getMessage() for r in caplog.records
                         if r.levelno == logging.WARNING and r.getMessage().startswith("readiness check failed")]
            assert len(readiness) <= 1, readiness
            tracebacks = [r for r in caplog.records if r.exc_info and r.name.startswith("controlplane.apiserver")]
            assert not tracebacks, [r.getMessage() for r in tracebacks]
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR and "unhandled" in r.getMessage()]

            await etcd.start()
            for _attempt in range(100):  # 20 s for etcd to be back and the gate to reopen
                if (await call(session, hub, "GET", CONFIGMAPS, viewer))[0] == 200:
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError("the hub did not serve again after etcd came back")
            status, _, _, _ = await call(
                session, hub, "POST", CONFIGMAPS, admin.token,
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-outage"}},
            )
            assert status == 201
