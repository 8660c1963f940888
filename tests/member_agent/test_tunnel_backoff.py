"""The proxy tunnel's reconnect backoff: from the agent's flags, doubling from the initial pause
up to the maximum (with jitter), back to the initial pause after a connection that stayed up."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from gpufed.cli import build_parser
from member_agent import config as agent_config
from member_agent.tunnel import MAX_BACKOFF, MIN_BACKOFF, AgentTunnel, ReconnectBackoff

BASE = ("agent", "--hub", "https://hub:6443", "--cluster-name", "onprem-a", "--state-dir", "/tmp/x")


def test_the_flags_set_the_backoff_and_default_to_half_a_second_and_thirty() -> None:
    default = agent_config.config_from_args(build_parser().parse_args(BASE))
    assert (default.proxy_reconnect_initial_backoff, default.proxy_reconnect_max_backoff) == (MIN_BACKOFF, MAX_BACKOFF) == (0.5, 30.0)
    cfg = agent_config.config_from_args(build_parser().parse_args(
        [*BASE, "--proxy-reconnect-initial-backoff", "2", "--proxy-reconnect-max-backoff", "120"]
    ))
    assert (cfg.proxy_reconnect_initial_backoff, cfg.proxy_reconnect_max_backoff) == (2.0, 120.0)


def test_the_pause_doubles_up_to_the_maximum_with_jitter_and_resets_after_a_stable_connection() -> None:
    backoff = ReconnectBackoff(1.0, 5.0)
    bases = []
    for _ in range(5):
        base = backoff.base
        delay = backoff.next_delay(stable=False)
        assert base <= delay <= base * 1.5
        bases.append(base)
    assert bases == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert 1.0 <= backoff.next_delay(stable=True) <= 1.5
    assert backoff.base == 2.0
    with pytest.raises(ValueError, match="initial"):
        ReconnectBackoff(3.0, 1.0)


async def test_the_tunnel_waits_by_its_backoff_between_failed_connects() -> None:
    class Unreachable(AgentTunnel):
        attempts = 0

        async def _connect_once(self) -> None:
            self.attempts += 1
            raise OSError("connection refused")

    async with ApiClient(Configuration()) as hub, ApiClient(Configuration()) as member:
        tunnel = Unreachable(cluster="c1", hub=hub, member=member, backoff=ReconnectBackoff(0.001, 0.004))
        task = asyncio.create_task(tunnel.run())
        async with asyncio.timeout(10):
            while True:
                if tunnel.attempts >= 5:
                    break
                await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # Four pauses taken (1, 2, 4, 4 ms) and the next one capped at the maximum.
    assert tunnel.backoff.base == 0.004
