"""The agent's watches on the kinds its Works hold: status passes read them, and a kind no Work
holds any more is no longer watched (until a Work needs it again).

A real hub (HTTPS, tokens, embedded etcd) and a simulated member API run in-process on
127.0.0.1; the member records every request it answers, so the tests see the agent's traffic.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import hub as hub_module
from controlplane.apiserver import errors
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.tls import ca_hash
from controlplane.hubconfig import HubConfig
from member_agent.agent import Agent
from member_agent.config import AgentConfig
from member_agent.manifests import desired_manifests
from tests.member_agent.memberapi import served_member

Hub = Any

pytestmark = [pytest.mark.timeout(120), pytest.mark.waiting]

CLUSTER = "sim-w"
WORK_NS = f"gpufed-es-{CLUSTER}"
DEPLOYMENTS = ("apps/v1", "Deployment")
CONFIGMAPS = ("v1", "ConfigMap")


@dataclass
class Member:
    objects: ObjectStore
    kubeconfig: Path
    requests: list[tuple[str, str, str]] = field(default_factory=list)

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self.objects.registry.require(api_version, kind), namespace=namespace, name=name)
        except errors.NotFound:
            return None

    def object_gets(self) -> list[str]:
        """GETs of single namespaced objects (not lists, watches or discovery)."""
        return [
            path
            for method, path, query in self.requests
            if method == "GET" and "watch=" not in query and "/namespaces/" in path and path.count("/") >= 6
        ]

    def lists_of(self, collection: str) -> int:
        """Label-selected lists of a collection: one each time the agent starts watching it."""
        return sum(
            1
            for method, path, query in self.requests
            if method == "GET" and path == collection and "watch=" not in query and "labelSelector" in query
        )


async def until(probe: Callable[[], Awaitable[Any]], *, what: str, within: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while True:
        last = await probe()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with hub_module.Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        assert running.objects is not None
        namespace = running.objects.registry.require("v1", "Namespace")
        await running.objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK_NS}})
        yield running


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[Member]:
    async with served_member(Registry(core_resources(), workload_resources(), coordination_resources())) as served:
        kubeconfig = tmp_path / "member.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": served.url}}],
            "users": [{"name": "agent", "user": {"token": "unused"}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "agent"}}],
            "current-context": "sim",
        }))
        yield Member(objects=served.objects, kubeconfig=kubeconfig, requests=served.requests)


async def start_config(hub: Hub, member: Member, state_dir: Path) -> AgentConfig:
    assert hub.pki is not None and hub.tokens is not None
    issued = await hub.tokens.create(
        role=Role.BOOTSTRAP, name="join", cluster=CLUSTER, ttl=dt.timedelta(hours=1), one_time=True
    )
    return AgentConfig.model_validate({
        "hub": hub.url,
        "hub_ca_hash": ca_hash(hub.pki.ca_pem),
        "bootstrap_token": issued.token,
        "cluster_name": CLUSTER,
        "kubeconfig": member.kubeconfig,
        "state_dir": state_dir,
        "heartbeat_interval": 5.0,
        "report_interval": 5.0,
        # Status passes over every Work, often: each must be served from the watches.
        "status_resync_interval": 0.3,
    })


def work(name: str, manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": name, "namespace": WORK_NS},
        "spec": {"workload": {"manifests": manifests}},
    }


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "m", "image": "i"}]}},
        },
    }


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ml"}, "data": {"k": "v"}}


async def test_status_passes_send_no_request_and_unused_kinds_are_unwatched(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    assert hub.objects is not None
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")

    async def applied(name: str) -> dict[str, Any] | None:
        try:
            item = await hub.objects.get(work_rt, namespace=WORK_NS, name=name)
        except errors.NotFound:
            return None
        conditions = {c["type"]: c for c in (item.get("status") or {}).get("conditions") or []}
        return item if conditions.get("Applied", {}).get("status") == "True" else None

    async with Agent(await start_config(hub, member, tmp_path / "agent")) as agent:
        await hub.objects.create(work_rt, work("a", [deployment("a"), configmap("a")]))
        await hub.objects.create(work_rt, work("b", [deployment("b"), configmap("b")]))
        await until(lambda: applied("a"), what="work a applied")
        await until(lambda: applied("b"), what="work b applied")

        async def watching(kinds: set[tuple[str, str]]) -> bool:
            return agent.watched_kinds == kinds

        await until(lambda: watching({DEPLOYMENTS, CONFIGMAPS}), what="watches on both kinds")
        assert any(task.get_name() == "watch-configmaps.v1" and not task.done() for task in asyncio.all_tasks())

        async def cached_everything() -> bool:
            items = [await hub.objects.get(work_rt, namespace=WORK_NS, name=name) for name in ("a", "b")]
            return all(
                agent.cached_object(ident) is not None for item in items for ident, _ in desired_manifests(item)
            )

        await until(cached_everything, what="the watches to hold all four objects")

        # Several passes over both Works: every member object is read from the watches.
        gets_before, passes_before = len(member.object_gets()), agent.status_passes

        async def passes_done() -> bool:
            return agent.status_passes >= passes_before + 6

        await until(passes_done, what="six status passes")
        assert member.object_gets()[gets_before:] == []

        # Work a drops its ConfigMap; b still holds one: the ConfigMap watch stays.
        configmap_lists = member.lists_of("/api/v1/configmaps")
        current = await hub.objects.get(work_rt, namespace=WORK_NS, name="a")
        current["spec"]["workload"]["manifests"] = [deployment("a")]
        await hub.objects.update(work_rt, current)

        async def configmap_a_pruned() -> bool:
            return await member.get("v1", "ConfigMap", "a", "ml") is None

        await until(configmap_a_pruned, what="ConfigMap a pruned")
        assert agent.watched_kinds == {DEPLOYMENTS, CONFIGMAPS}

        # Work b goes: nothing holds a ConfigMap any more, so its watch stops; a still holds a Deployment.
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="b")

        async def b_pruned() -> bool:
            return (
                await member.get("v1", "ConfigMap", "b", "ml") is None
                and await member.get("apps/v1", "Deployment", "b", "ml") is None
            )

        await until(b_pruned, what="work b's objects pruned")
        await until(lambda: watching({DEPLOYMENTS}), what="the ConfigMap watch to stop")

        async def configmap_watch_ended() -> bool:
            return not any(
                task.get_name() == "watch-configmaps.v1" and not task.done() for task in asyncio.all_tasks()
            )

        await until(configmap_watch_ended, what="the ConfigMap informer's task to end")

        # Work a goes too: no watch is left.
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="a")
        await until(lambda: watching(set()), what="the Deployment watch to stop")
        assert await member.get("apps/v1", "Deployment", "a", "ml") is None

        # A Work needs ConfigMaps again: the watch starts again (a fresh list) and serves its status.
        await hub.objects.create(work_rt, work("c", [configmap("c")]))
        await until(lambda: applied("c"), what="work c applied")
        await until(lambda: watching({CONFIGMAPS}), what="the ConfigMap watch to start again")

        async def listed_again() -> bool:
            return member.lists_of("/api/v1/configmaps") > configmap_lists

        await until(listed_again, what="a new list of ConfigMaps")
        assert member.lists_of("/apis/apps/v1/deployments") >= 1


async def test_the_resync_repairs_every_work_a_batch_at_a_time_and_new_works_go_first(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    """Every Work is applied again each resync (a member object deleted behind the agent's back
    comes back), :data:`RESYNC_BATCH` per pass of the worker; a Work the hub writes meanwhile is
    applied at the next pass, before the resync's remaining Works, not after all of them."""
    from member_agent.syncing import RESYNC_BATCH

    assert hub.objects is not None
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    count = 5 * RESYNC_BATCH
    config = (await start_config(hub, member, tmp_path / "agent")).model_copy(
        update={"resync_interval": 3600.0, "status_resync_interval": 3600.0}
    )
    async with Agent(config) as agent:
        for index in range(count):
            await hub.objects.create(work_rt, work(f"w{index}", [configmap(f"c{index}")]))

        async def all_applied() -> bool:
            return all([await member.get("v1", "ConfigMap", f"c{i}", "ml") is not None for i in range(count)])

        await until(all_applied, what="every Work applied")
        configmaps = member.objects.registry.require("v1", "ConfigMap")
        for index in range(count):  # drift: the member loses every object
            await member.objects.delete(configmaps, namespace="ml", name=f"c{index}")
        applies_before = sum(1 for method, _, _ in member.requests if method == "PATCH")

        # The resync is due: the worker takes it a batch per pass; a new Work goes first.
        agent._resync_due.update(agent.works.objects if agent.works is not None else ())
        agent._work_due.set()
        await hub.objects.create(work_rt, work("late", [configmap("late")]))
        await until(lambda: member.get("v1", "ConfigMap", "late", "ml"), what="the new Work applied")
        restored_then = sum([await member.get("v1", "ConfigMap", f"c{i}", "ml") is not None for i in range(count)])
        assert restored_then < count, "the new Work waited for the whole resync"
        await until(all_applied, what="every object the resync restores")
        assert sum(1 for method, _, _ in member.requests if method == "PATCH") - applies_before >= count + 1
