"""A deleted Work with ``preserveResourcesOnDeletion`` leaves its objects running in the member,
released from gpufed (no ownership labels, out of the ledger); any other deleted Work takes
its objects with it — including one whose flag the hub cleared just before deleting it (a
cluster leaving the placement), and one deleted while the agent was down.

The agent's side of the hub's release rule: the ledger holds the flag of the generation the
agent last applied (or, suspended, last saw), so a Work whose cleared flag the agent applied
— after coming back from being away — and which is then deleted while it is down again has its
objects deleted, not released. And an apply decides ownership on the live object: a watch
cache lagging behind a release must not let a new Work take the released object over.

The pure parts (what releasing changes, the ledger's record) are table-driven; the rest runs
the agent against a real hub (HTTPS, embedded etcd) and a simulated member API, in-process on
127.0.0.1, as ``test_agent_integration`` does.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration
from pydantic import SecretStr

from controlplane import hub as hub_module
from controlplane.apiserver import app as app_module
from controlplane.apiserver import errors
from controlplane.apiserver.identity import Role
from controlplane.apiserver.kinds.coordination import coordination_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.tls import ca_hash
from controlplane.hubconfig import HubConfig
from controlplane.storage import MemoryStore
from member_agent import applying, manifests
from member_agent.agent import Agent
from member_agent.config import AgentConfig
from member_agent.kubeapi import KubeApi
from member_agent.ledger import JOURNAL_FILE, LEDGER_FILE, Ledger
from simulator.nodes import build_nodes
from simulator.profile import parse_fleet

pytestmark = pytest.mark.waiting

Hub = Any

T = TypeVar("T")
CLUSTER = "sim-p"
WORK_NS = f"gpufed-es-{CLUSTER}"
OWNERSHIP = {
    "app.kubernetes.io/managed-by": "gpufed",
    "work.gpufed.io/namespace": WORK_NS,
    "work.gpufed.io/name": "keep",
}


# --- pure ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({**OWNERSHIP, "app": "web"}, {"app": "web"}),
        (OWNERSHIP, {}),
        # A managed-by of someone else's is theirs: only gpufed's value goes.
        ({**OWNERSHIP, "app.kubernetes.io/managed-by": "helm"}, {"app.kubernetes.io/managed-by": "helm"}),
        # A user label in gpufed's domain (policy selection) is the user's and stays.
        ({**OWNERSHIP, "gpufed.io/burst": "true"}, {"gpufed.io/burst": "true"}),
    ],
)
def test_released_drops_only_the_ownership_labels(labels: dict[str, str], expected: dict[str, str]) -> None:
    live: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "ml", "labels": labels, "annotations": {"note": "x"},
            "resourceVersion": "7", "managedFields": [{"manager": "gpufed-agent"}],
        },
        "spec": {"replicas": 3},
    }
    body = manifests.released(live, work_namespace=WORK_NS, work_name="keep")
    assert body is not None
    assert body["metadata"]["labels"] == expected
    assert body["metadata"]["annotations"] == {"note": "x"}
    assert body["metadata"]["resourceVersion"] == "7"  # a compare-and-swap update
    assert "managedFields" not in body["metadata"]
    assert body["spec"] == {"replicas": 3}
    assert live["metadata"]["labels"] == labels  # not modified


@pytest.mark.parametrize(
    "labels",
    [{"app": "web"}, {**OWNERSHIP, "work.gpufed.io/name": "another"}],
)
def test_an_object_of_no_or_another_work_is_not_released(labels: dict[str, str]) -> None:
    live = {"metadata": {"name": "web", "labels": labels}}
    assert manifests.released(live, work_namespace=WORK_NS, work_name="keep") is None


@pytest.mark.parametrize(("spec", "expected"), [({}, False), ({"preserveResourcesOnDeletion": True}, True),
                                                ({"preserveResourcesOnDeletion": False}, False)])
def test_preserves_on_deletion(spec: dict[str, Any], expected: bool) -> None:
    assert manifests.preserves_on_deletion({"spec": spec}) is expected


def test_the_ledger_remembers_the_flag_across_restarts_and_reads_its_first_format(tmp_path: Path) -> None:
    ident = {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "ml", "name": "web", "ordinal": 0}
    ledger = Ledger(tmp_path)
    ledger.set("ns/keep", [ident], preserve=True)
    ledger.set("ns/plain", [ident], preserve=False)
    ledger.set("ns/keep", [ident])  # None keeps the flag
    again = Ledger(tmp_path)
    assert again.preserves("ns/keep") and not again.preserves("ns/plain")
    assert again.get("ns/keep") == [ident]
    again.drop("ns/keep")
    assert not Ledger(tmp_path).preserves("ns/keep") and "ns/keep" not in Ledger(tmp_path)

    # An older agent's state directory: the first format, and no journal.
    (tmp_path / JOURNAL_FILE).unlink()
    (tmp_path / LEDGER_FILE).write_text(json.dumps({"ns/old": [ident]}))
    first = Ledger(tmp_path)
    assert first.keys() == ["ns/old"] and first.get("ns/old") == [ident] and not first.preserves("ns/old")


# --- the agent -------------------------------------------------------------------------------


async def eventually(probe: Callable[[], Awaitable[T | None]], *, within: float = 30.0, what: str) -> T:
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while True:
        found = await probe()
        if found:
            return found
        last = found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.1)


@dataclass
class Member:
    objects: ObjectStore
    kubeconfig: Path
    url: str

    async def get(self, api_version: str, kind: str, name: str, namespace: str = "ml") -> dict[str, Any] | None:
        try:
            rt = self.objects.registry.require(api_version, kind)
            return await self.objects.get(rt, namespace=namespace, name=name)
        except errors.NotFound:
            return None


FLEET = {"clusters": [{"name": CLUSTER, "nodeGroups": [
    {"name": "whole", "count": 1, "cpu": 64, "memoryGiB": 512, "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8}},
]}]}


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with hub_module.Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        namespace = running.objects.registry.require("v1", "Namespace")
        await running.objects.create(namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK_NS}})
        yield running


@pytest.fixture
async def member(tmp_path: Path) -> AsyncIterator[Member]:
    async with MemoryStore() as store:
        registry = Registry(core_resources(), workload_resources(), coordination_resources())
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        node_type = registry.require("v1", "Node")
        for node in build_nodes(parse_fleet(FLEET).clusters[0]):
            created = await objects.create(node_type, node)
            await objects.update_status(node_type, {**created, "status": node["status"]})
        runner = web.AppRunner(app_module.create_app(objects, registry), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        kubeconfig = tmp_path / "member.kubeconfig"
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": url}}],
            "users": [{"name": "agent", "user": {"token": "unused"}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "agent"}}],
            "current-context": "sim",
        }))
        try:
            yield Member(objects=objects, kubeconfig=kubeconfig, url=url)
        finally:
            await runner.cleanup()


def config(hub: Hub, member: Member, state_dir: Path, *, token: str | None) -> AgentConfig:
    return AgentConfig(
        hub=hub.url, hub_ca_hash=ca_hash(hub.pki.ca_pem), bootstrap_token=SecretStr(token) if token else None,
        cluster_name=CLUSTER, kubeconfig=member.kubeconfig, state_dir=state_dir, provider="onprem",
        heartbeat_interval=0.5, report_interval=1.0, report_debounce=0.1, status_resync_interval=3600,
    )


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml", "labels": {"app": name}},
        "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "main", "image": f"{name}:1"}]}},
        },
    }


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ml"}, "data": {"k": "v"}}


def work(name: str, manifests: list[dict[str, Any]], *, preserve: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"workload": {"manifests": manifests}}
    if preserve:
        spec["preserveResourcesOnDeletion"] = True
    return {"apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work", "metadata": {"name": name, "namespace": WORK_NS},
            "spec": spec}


def gpufed_labels(obj: dict[str, Any] | None) -> dict[str, str]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in labels.items() if k.startswith("work.gpufed.io/") or k == "app.kubernetes.io/managed-by"}


async def test_deleting_works_releases_or_deletes_their_objects(hub: Hub, member: Member, tmp_path: Path) -> None:
    issued = await hub.tokens.create(
        role=Role.BOOTSTRAP, name="join-sim-p", cluster=CLUSTER, ttl=dt.timedelta(hours=1), one_time=True
    )
    state_dir = tmp_path / "agent"
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")

    async def applied(name: str) -> dict[str, Any] | None:
        try:
            found = await hub.objects.get(work_rt, namespace=WORK_NS, name=name)
        except errors.NotFound:
            return None
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}
        return conditions.get("Applied")

    async def gone(api_version: str, kind: str, name: str) -> bool:
        return await member.get(api_version, kind, name) is None

    async with Agent(config(hub, member, state_dir, token=issued.token)):
        await hub.objects.create(work_rt, work("keep", [deployment("kept"), configmap("kept-settings")], preserve=True))
        await hub.objects.create(work_rt, work("drop", [deployment("dropped")], preserve=False))
        await hub.objects.create(work_rt, work("moved", [configmap("moved-settings")], preserve=True))
        for name in ("keep", "drop", "moved"):

            def applied_now(name: str = name) -> Awaitable[dict[str, Any] | None]:
                return applied(name)

            condition = await eventually(applied_now, what=f"work {name} applied")
            assert condition["status"] == "True", condition
        assert gpufed_labels(await member.get("apps/v1", "Deployment", "kept")) == OWNERSHIP

        # The workload was deleted on the hub: its Work goes with the flag set.
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="keep")

        async def released() -> dict[str, Any] | None:
            live = await member.get("apps/v1", "Deployment", "kept")
            return live if live is not None and not gpufed_labels(live) else None

        kept = await eventually(released, what="the preserved Deployment without gpufed's labels")
        assert kept["metadata"]["labels"] == {"app": "kept"}
        assert kept["spec"]["replicas"] == 2 and kept["spec"]["template"]["spec"]["containers"][0]["image"] == "kept:1"
        settings = await eventually(
            lambda: _unlabelled(member.get("v1", "ConfigMap", "kept-settings")), what="the preserved ConfigMap released"
        )
        assert settings["data"] == {"k": "v"}

        # A Work without the flag takes its objects with it.
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="drop")
        await eventually(lambda: gone("apps/v1", "Deployment", "dropped"), what="the unpreserved Deployment deleted")

        # Its cluster left the placement: the hub clears the flag, then deletes the Work at once.
        # (Suspended meanwhile, so the agent does not apply the update: only what it saw counts.)
        moved = await hub.objects.get(work_rt, namespace=WORK_NS, name="moved")
        del moved["spec"]["preserveResourcesOnDeletion"]
        moved["spec"]["suspendDispatching"] = True
        await hub.objects.update(work_rt, moved)

        async def flag_seen_cleared() -> bool:
            return not Ledger(state_dir).preserves(f"{WORK_NS}/moved")

        await eventually(flag_seen_cleared, what="the agent to record the suspended Work's cleared flag")
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="moved")
        await eventually(lambda: gone("v1", "ConfigMap", "moved-settings"), what="the moved Work's ConfigMap deleted")

        # The released objects are the member's own now: a new Work (Abort) does not take them.
        await hub.objects.create(work_rt, work("keep", [deployment("kept")], preserve=False))
        condition = await eventually(lambda: applied("keep"), what="the new Work's Applied condition")
        assert condition["status"] == "False" and condition["reason"] == "ApplyConflict", condition
        untouched = await member.get("apps/v1", "Deployment", "kept")
        assert not gpufed_labels(untouched)
        await hub.objects.delete(work_rt, namespace=WORK_NS, name="keep")

        # One more preserved Work, deleted while the agent is down (below).
        await hub.objects.create(work_rt, work("offline", [configmap("offline-settings")], preserve=True))
        await eventually(lambda: applied("offline"), what="work offline applied")

    ledger = Ledger(state_dir)
    assert f"{WORK_NS}/drop" not in ledger and f"{WORK_NS}/moved" not in ledger
    assert ledger.preserves(f"{WORK_NS}/offline")
    await hub.objects.delete(work_rt, namespace=WORK_NS, name="offline")
    # The released Deployment is no longer the agent's: deleting a Work of that name must not touch it.
    assert await member.get("apps/v1", "Deployment", "kept") is not None

    async with Agent(config(hub, member, state_dir, token=None)):
        offline = await eventually(
            lambda: _unlabelled(member.get("v1", "ConfigMap", "offline-settings")),
            what="the ConfigMap of the Work deleted while the agent was down, released",
        )
        assert offline["data"] == {"k": "v"}
    assert f"{WORK_NS}/offline" not in Ledger(state_dir)
    assert await member.get("apps/v1", "Deployment", "kept") is not None


async def _unlabelled(probe: Awaitable[dict[str, Any] | None]) -> dict[str, Any] | None:
    live = await probe
    return live if live is not None and not gpufed_labels(live) else None


async def test_an_apply_checks_ownership_on_the_member_not_a_lagging_cache(member: Member, tmp_path: Path) -> None:
    """Right after a release the watch may still hold the object with gpufed's labels: a Work of
    the same name re-created then must meet the released object as a conflict."""
    namespace_rt = member.objects.registry.require("v1", "Namespace")
    await member.objects.create(namespace_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    await member.objects.create(member.objects.registry.require("apps/v1", "Deployment"), deployment("kept"))
    stale = deployment("kept")  # as the watch last saw it, before the release
    stale["metadata"]["labels"] = {**OWNERSHIP, "app": "kept"}

    def lagging(ident: manifests.Identifier) -> dict[str, Any] | None:
        return stale if (ident.kind, ident.name) == ("Deployment", "kept") else None

    api = KubeApi(ApiClient(configuration=Configuration(host=member.url)), timeout=10)
    try:
        applier = applying.WorkApplier(member=api, ledger=Ledger(tmp_path), cached=lagging)
        again = deployment("kept")
        again["spec"]["replicas"] = 5
        status = await applier.reconcile(work("keep", [again], preserve=False), now="2026-01-01T00:00:00Z")
    finally:
        await api.close()
    applied = {cond["type"]: cond for cond in status["conditions"]}["Applied"]
    assert applied["status"] == "False" and applied["reason"] == "ApplyConflict", applied
    untouched = await member.get("apps/v1", "Deployment", "kept")
    assert untouched is not None and not gpufed_labels(untouched) and untouched["spec"]["replicas"] == 2


async def test_a_cleared_flag_the_agent_applied_or_saw_suspended_outlives_a_restart(
    hub: Hub, member: Member, tmp_path: Path
) -> None:
    issued = await hub.tokens.create(
        role=Role.BOOTSTRAP, name="join-sim-p", cluster=CLUSTER, ttl=dt.timedelta(hours=1), one_time=True
    )
    state_dir = tmp_path / "agent"
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")

    async def applied_at(name: str, generation: int) -> bool:
        found = await hub.objects.get(work_rt, namespace=WORK_NS, name=name)
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}
        return (conditions.get("Applied") or {}).get("observedGeneration") == generation

    async def clear_flag(name: str, *, suspend: bool) -> int:
        """As the binding controller releases the Work of a cluster that left the placement."""
        current = await hub.objects.get(work_rt, namespace=WORK_NS, name=name)
        del current["spec"]["preserveResourcesOnDeletion"]
        if suspend:
            current["spec"]["suspendDispatching"] = True
        updated = await hub.objects.update(work_rt, current)
        return int(updated["metadata"]["generation"])

    async with Agent(config(hub, member, state_dir, token=issued.token)):
        await hub.objects.create(work_rt, work("paused", [configmap("paused-settings")], preserve=True))
        await hub.objects.create(work_rt, work("away", [configmap("away-settings")], preserve=True))
        await eventually(lambda: applied_at("paused", 1), what="work paused applied")
        await eventually(lambda: applied_at("away", 1), what="work away applied")
        # Suspended: not applied, but the cleared flag is what the agent must remember.
        await clear_flag("paused", suspend=True)

        async def recorded() -> bool:
            return not Ledger(state_dir).preserves(f"{WORK_NS}/paused")

        await eventually(recorded, what="the ledger to record the suspended Work's cleared flag")
    assert Ledger(state_dir).preserves(f"{WORK_NS}/away")

    # Cleared while the agent is away; the hub waits until it has applied that generation.
    generation = await clear_flag("away", suspend=False)
    async with Agent(config(hub, member, state_dir, token=None)):
        await eventually(lambda: applied_at("away", generation), what="the cleared generation applied")
    ledger = Ledger(state_dir)
    assert not ledger.preserves(f"{WORK_NS}/away") and not ledger.preserves(f"{WORK_NS}/paused")

    # Deleted while the agent is down again: on its return it sees only that they are gone.
    await hub.objects.delete(work_rt, namespace=WORK_NS, name="away")
    await hub.objects.delete(work_rt, namespace=WORK_NS, name="paused")
    async with Agent(config(hub, member, state_dir, token=None)):
        for name in ("away-settings", "paused-settings"):

            async def deleted(name: str = name) -> bool:
                return await member.get("v1", "ConfigMap", name) is None

            await eventually(deleted, what=f"ConfigMap {name} deleted, not released")
    assert Ledger(state_dir).keys() == []
