"""The hub keeps its embedded etcd running: killed, etcd is started again on the same data
directory and transport, the hub serves again by itself, and what is written afterwards stays.

The restart schedule is checked on a stand-in for etcd; the rest on a real hub with its own
embedded etcd, SIGKILLed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import cast

import aiohttp
import pytest

from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from controlplane.processes import Backoff
from controlplane.storage import EtcdClientTransport
from controlplane.storage.embedded import EmbeddedEtcd, EtcdStartError
from controlplane.storage.etcdkeeper import (
    ETCD_RESTART_BACKOFF,
    EtcdRestartMetrics,
    exit_reason,
    keep_etcd_running,
)

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
RESTARTS = "gpufed_embedded_etcd_restarts_total"


def test_the_restart_schedule_doubles_from_one_second_to_thirty() -> None:
    delays = [ETCD_RESTART_BACKOFF.delay(n) for n in range(1, 9)]
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]
    assert ETCD_RESTART_BACKOFF.stable_after == 60
    # gpufed up's schedule is the same one, with its jitter added.
    assert Backoff().delay(3, uniform=0.5) == 4.5
    assert Backoff().delay(9, uniform=1.0) == 30


def test_an_exit_code_names_the_signal_that_ended_the_process() -> None:
    assert exit_reason(-9) == "exit code -9 (SIGKILL)"
    assert exit_reason(2) == "exit code 2"


class StandInEtcd:
    """Exits after each of ``uptimes`` (seconds up before it exits); fails to start ``failures`` times."""

    def __init__(self, uptimes: list[float], *, failures: int = 0, error: Exception | None = None) -> None:
        self._uptimes = uptimes
        self._failures = failures
        self._error = error
        self.uptime = 0.0
        self.log_file = Path("etcd.log")
        self.pid = 4242
        self.starts = 0

    async def wait_exit(self) -> int | None:
        if not self._uptimes:
            return None  # stopped
        self.uptime = self._uptimes.pop(0)
        return -signal.SIGKILL

    async def restart(self) -> str:
        if self._failures:
            self._failures -= 1
            raise self._error or EtcdStartError("etcd exited with code 1 before becoming healthy\nlog lines")
        self.starts += 1
        return "unix:///etcd.sock:0"


async def keep(etcd: StandInEtcd, metrics: EtcdRestartMetrics | None = None) -> list[float]:
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    await keep_etcd_running(cast(EmbeddedEtcd, etcd), metrics=metrics, sleep=sleep)
    return waited


async def test_restarts_back_off_and_start_over_once_etcd_stayed_up() -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    metrics = EtcdRestartMetrics(registry)
    etcd = StandInEtcd([0.5, 3, 10, 59, 61, 5])
    assert await keep(etcd, metrics) == [1, 2, 4, 8, 1, 2]
    assert etcd.starts == 6
    assert registry.get_sample_value(RESTARTS) == 6


async def test_a_restart_that_fails_is_tried_again_later(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "controlplane.storage.etcdkeeper")
    etcd = StandInEtcd([1], failures=2)
    assert await keep(etcd) == [1, 2, 4]
    assert etcd.starts == 1
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith(
        "embedded etcd exited with exit code -9 (SIGKILL) after 1s up; restarting it in 1s"
    )
    assert (
        "did not start again (etcd exited with code 1 before becoming healthy); next try in 2s" in messages[1]
    )
    assert messages[-1] == "embedded etcd is running again at unix:///etcd.sock:0 (pid 4242)"


async def test_a_restart_that_cannot_even_run_etcd_is_tried_again_later(caplog: pytest.LogCaptureFixture) -> None:
    """The binary gone (an upgrade), the disk full: the keeper tries again on its schedule, it does
    not end (which left etcd down for good and failed the hub's shutdown)."""
    caplog.set_level(logging.WARNING, "controlplane.storage.etcdkeeper")
    gone = FileNotFoundError(2, "No such file or directory", "/usr/bin/etcd")
    etcd = StandInEtcd([1], failures=1, error=gone)
    assert await keep(etcd) == [1, 2]
    assert etcd.starts == 1
    assert "did not start again ([Errno 2] No such file or directory: '/usr/bin/etcd')" in caplog.records[1].getMessage()


async def write_until_it_succeeds(session: aiohttp.ClientSession, url: str, token: str, name: str) -> None:
    """POST a ConfigMap until the hub answers 201 (503 while etcd is away)."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}
    async with asyncio.timeout(60):
        while True:
            async with session.post(
                f"{url}{CONFIGMAPS}", json=body, headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                if resp.status == 201:
                    return
                assert resp.status == 503, await resp.text()
            await asyncio.sleep(0.2)


async def read(session: aiohttp.ClientSession, url: str, token: str, name: str) -> dict[str, str]:
    async with session.get(f"{url}{CONFIGMAPS}/{name}", headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200, await resp.text()
        data: dict[str, str] = (await resp.json())["data"]
        return data


@pytest.mark.waiting
@pytest.mark.parametrize("transport", [EtcdClientTransport.UNIX, EtcdClientTransport.TLS])
async def test_a_killed_embedded_etcd_comes_back_and_the_hub_serves_again(
    tmp_path: Path, transport: EtcdClientTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "controlplane.storage.etcdkeeper")
    config = HubConfig(state_dir=tmp_path / "hub", port=0, embedded_etcd_transport=transport)
    async with Hub(config) as hub:
        assert hub.etcd is not None and hub.etcd.pid is not None
        etcd, first_pid = hub.etcd, hub.etcd.pid
        url = etcd.client_url
        admin = load_kubeconfig(hub.kubeconfig_path)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(admin.ca_pem))
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as session:
            await write_until_it_succeeds(session, hub.url, admin.token, "before")
            restarts = hub.metrics.registry.get_sample_value(RESTARTS) or 0.0  # the process's registry
            os.kill(first_pid, signal.SIGKILL)
            await write_until_it_succeeds(session, hub.url, admin.token, "after")
            assert await read(session, hub.url, admin.token, "after") == {"k": "after"}
        assert etcd.pid is not None and etcd.pid != first_pid
        assert etcd.client_url == url and etcd.transport is transport
        assert hub.metrics.registry.get_sample_value(RESTARTS) == restarts + 1
        exits = [r.getMessage() for r in caplog.records if "exited with" in r.getMessage()]
        assert len(exits) == 1 and "exit code -9 (SIGKILL)" in exits[0], exits
    assert not etcd.running  # the hub's stop is not an exit: nothing started it again

    # The write made after the restart is in etcd's data directory: a new hub reads it.
    async with Hub(config) as hub:
        admin = load_kubeconfig(hub.kubeconfig_path)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(admin.ca_pem))
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as session:
            assert await read(session, hub.url, admin.token, "after") == {"k": "after"}
