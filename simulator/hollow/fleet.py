"""A hollow fleet: many hollow member clusters, each with the real member agent, in one process.

In: a :class:`FleetPlan` (how many clusters, nodes per cluster, GPUs per node, GPU models) and
one :class:`~member_agent.config.AgentConfig` per cluster (the hub's URL, its CA hash, a
bootstrap token, a state dir). Out, while :meth:`HollowFleet.run` runs: one
:class:`~simulator.hollow.member.HollowMember` per cluster and one
:class:`member_agent.agent.Agent` per cluster, all in this event loop; every agent joins
the hub with its bootstrap token and from then on sends the hub what a ``gpufed agent``
process sends (leases, capacity reports, Work watches and statuses) over its own HTTPS
connection. The agent reaches its member through :class:`~simulator.hollow.api.HollowKubeApi`.
:meth:`HollowFleet.stats` gives the figures the command prints (RSS per node).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from controlplane.lifecycle import Service
from member_agent.agent import Agent
from member_agent.config import AgentConfig
from member_agent.kubeapi import KubeTransport
from simulator.hollow.api import HollowKubeApi
from simulator.hollow.member import HollowMember
from simulator.hollow.nodes import hollow_profile

log = logging.getLogger(__name__)

DEFAULT_MODEL = "NVIDIA-A100-SXM4-80GB"


@dataclass(frozen=True, slots=True)
class FleetPlan:
    clusters: int
    nodes: int
    gpus_per_node: int = 8
    #: GPU products, given to the clusters in turn.
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    prefix: str = "hollow"
    seed: int = 0

    def names(self) -> list[str]:
        return [f"{self.prefix}-{index}" for index in range(self.clusters)]

    def member(self, index: int) -> HollowMember:
        profile = hollow_profile(
            self.names()[index], nodes=self.nodes, gpus_per_node=self.gpus_per_node,
            product=self.models[index % len(self.models)],
        )
        return HollowMember(profile, seed=self.seed + index)


def rss_bytes() -> int:
    """This process's resident set size (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(slots=True)
class FleetStats:
    clusters: int
    nodes: int
    registered: int = 0
    reported: int = 0
    member_requests: int = 0
    rss_before: int = 0
    rss: int = 0
    build_seconds: float = 0.0
    join_seconds: float | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def rss_per_node(self) -> float:
        total = self.clusters * self.nodes
        return (self.rss - self.rss_before) / total if total else 0.0


class HollowFleet(Service):
    """The hollow members and their agents; ``await run()`` until :meth:`request_stop`."""

    def __init__(self, plan: FleetPlan, configs: Sequence[AgentConfig]) -> None:
        super().__init__("hollow-fleet")
        if len(configs) != plan.clusters:
            raise ValueError(f"{plan.clusters} clusters need {plan.clusters} agent configs, got {len(configs)}")
        self.plan = plan
        self.configs = list(configs)
        self.members: list[HollowMember] = []
        self.apis: list[HollowKubeApi] = []
        self.agents: list[Agent] = []
        self.stats_ = FleetStats(plan.clusters, plan.nodes)
        self._joined = asyncio.Event()

    def joined(self) -> asyncio.Event:
        """Set once every agent has registered its cluster and written a capacity report."""
        return self._joined

    def ready(self) -> asyncio.Event | None:
        return self._joined

    def stats(self) -> FleetStats:
        stats = self.stats_
        stats.registered = sum(agent.registered.is_set() for agent in self.agents)
        stats.reported = sum(agent.reports_written > 0 for agent in self.agents)
        stats.member_requests = sum(api.requests for api in self.apis)
        stats.rss = rss_bytes()
        return stats

    async def _build(self) -> None:
        self.stats_.rss_before = rss_bytes()
        began = time.monotonic()
        for index, config in enumerate(self.configs):
            member = self.plan.member(index)
            if member.name != config.cluster_name:
                raise ValueError(f"agent config {index} is for {config.cluster_name}, not {member.name}")
            api = HollowKubeApi(member, timeout=config.request_timeout)
            self.members.append(member)
            self.apis.append(api)
            self.agents.append(Agent(config, member_client=_client_of(api)))
            await asyncio.sleep(0)
        self.stats_.build_seconds = time.monotonic() - began

    async def _watch_join(self) -> None:
        began = time.monotonic()
        await asyncio.gather(*(agent.registered.wait() for agent in self.agents))
        # The agent counts its reports; it has no event for the first one.
        while not all(agent.reports_written > 0 for agent in self.agents):  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        self.stats_.join_seconds = time.monotonic() - began
        self._joined.set()

    async def run(self) -> None:
        await self._build()
        log.info("hollow fleet: %d clusters x %d nodes built in %.1f s", self.plan.clusters,
                 self.plan.nodes, self.stats_.build_seconds)
        joining = asyncio.create_task(self._watch_join())
        try:
            async with asyncio.TaskGroup() as group:
                for agent in self.agents:
                    group.create_task(agent.run(), name=f"agent-{agent.config.cluster_name}")
                await self._stop.wait()
                for agent in self.agents:
                    agent.request_stop()
        finally:
            joining.cancel()


def _client_of(api: HollowKubeApi) -> _HollowClient:
    return _HollowClient(api)


@dataclass(frozen=True, slots=True)
class _HollowClient:
    """The agent's member-client factory for one hollow member (see ``Agent(member_client=...)``)."""

    api: HollowKubeApi

    async def __call__(self, _config: AgentConfig) -> KubeTransport:
        return self.api
