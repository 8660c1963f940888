"""A real hub with simulated members and their agents (with the cluster proxy) in one process,
for tests that read the members through the hub."""

from __future__ import annotations

import contextlib
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controlplane import hub as hub_module
from controlplane.apiserver.identity import Role
from controlplane.apiserver.tls import ca_hash
from controlplane.hubconfig import HubConfig
from member_agent.agent import Agent
from member_agent.config import AgentConfig
from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig
from tests.proxy.test_proxy_tunnel import Fleet


@dataclass
class TwoMembers:
    fleet: Fleet
    sims: dict[str, SimServer]
    agents: dict[str, Agent]

    async def get(self, path: str, *, who: str = "admin") -> tuple[int, Any]:
        return await self.fleet.request("GET", path, who=who)


@contextlib.asynccontextmanager
async def two_members(tmp_path: Path, fleet_profile: dict[str, Any], **hub_options: Any) -> AsyncIterator[TwoMembers]:
    """The hub (``HubConfig`` with ``hub_options``), and a simulated member (time 20 times as fast)
    with its agent per cluster of ``fleet_profile``; the first member is ``fleet.sim``."""
    profiles = parse_fleet(fleet_profile).clusters
    config = HubConfig(state_dir=tmp_path / "hub", port=0, **hub_options)
    async with hub_module.Hub(config) as hub:
        tokens = {role.value: (await hub.tokens.create(role=role, name=f"{role.value}-user")).token
                  for role in (Role.ADMIN, Role.VIEWER)}
        sims: dict[str, SimServer] = {}
        agents: dict[str, Agent] = {}
        try:
            for profile in profiles:
                sim = SimServer(SimServerConfig(profile=profile, state_dir=tmp_path / profile.name,
                                                time_scale=20.0, snapshot_interval=None))
                await sim.__aenter__()
                sims[profile.name] = sim
                join = await hub.tokens.create(role=Role.BOOTSTRAP, name=f"join-{profile.name}", cluster=profile.name,
                                               one_time=True, ttl=dt.timedelta(hours=1))
                agent = Agent(AgentConfig(
                    hub=hub.url, hub_ca_hash=ca_hash(hub.pki.ca_pem), bootstrap_token=join.token,
                    cluster_name=profile.name, kubeconfig=sim.kubeconfig_path, state_dir=tmp_path / f"agent-{profile.name}",
                    enable_proxy=True,
                ))
                await agent.__aenter__()
                agents[profile.name] = agent
            context = ssl.create_default_context(cadata=hub.pki.ca_pem.decode())
            first = profiles[0].name
            yield TwoMembers(Fleet(hub, sims[first], agents[first], tokens, context), sims, agents)
        finally:
            for agent in agents.values():
                await agent.__aexit__(None, None, None)
            for sim in sims.values():
                await sim.__aexit__(None, None, None)
