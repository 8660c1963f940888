"""Spot node groups and reclaims in a simulated member: labels, notice taint, nodes and pods gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apis import spot
from controlplane.apiserver.objects import ObjectStore
from controlplane.storage.memory import MemoryStore
from simulator.clock import ManualClock
from simulator.cluster import SimulatedCluster
from simulator.nodes import build_nodes
from simulator.profile import ProfileError, parse_fleet
from simulator.reclaiming import Reclaimer, ReclaimError, ReclaimRequest, choose_nodes
from simulator.resources import member_registry
from tests.simulator.test_sim_cluster import Sim

L4 = {"cpu": 48, "memoryGiB": 192, "gpu": {"product": "NVIDIA-L4", "count": 4}}


def _profile(provider: str = "gcp", **cluster: Any) -> Any:
    groups = cluster.pop("nodeGroups", [{"name": "spot", "count": 3, "spot": True, **L4}, {"name": "base", **L4}])
    return parse_fleet({"clusters": [{"name": "c", "provider": provider, "nodeGroups": groups, **cluster}]}).clusters[0]


@pytest.mark.parametrize(
    ("provider", "label"),
    [
        ("gcp", ("cloud.google.com/gke-spot", "true")),
        ("aws", ("eks.amazonaws.com/capacityType", "SPOT")),
        ("onprem", ("karpenter.sh/capacity-type", "spot")),
    ],
)
def test_spot_groups_carry_the_providers_label(provider: str, label: tuple[str, str]) -> None:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in build_nodes(_profile(provider))}
    assert nodes["c-spot-0"][label[0]] == label[1]
    assert spot.is_spot(nodes["c-spot-0"])
    assert not spot.is_spot(nodes["c-base-0"])


def test_cluster_wide_spot_and_existing_label() -> None:
    profile = _profile(spot=True, nodeGroups=[{"name": "g", "labels": {"karpenter.sh/capacity-type": "spot"}, **L4}])
    (node,) = build_nodes(profile)
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert "cloud.google.com/gke-spot" not in node["metadata"]["labels"]


@pytest.mark.parametrize(
    ("reclaim", "message"),
    [
        ({"everySeconds": 60, "pool": "base"}, "reclaim.pool: no spot node group 'base'"),
        ({"everySeconds": 0}, "greater than 0"),
    ],
)
def test_reclaim_schedule_is_validated(reclaim: dict[str, Any], message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        _profile(reclaim=reclaim)


def test_reclaim_needs_a_spot_group() -> None:
    with pytest.raises(ProfileError, match="no spot node group"):
        _profile(reclaim={"everySeconds": 60}, nodeGroups=[{"name": "base", **L4}])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"nodes": 0}, "nodes must be"),
        ({"nodes": True}, "nodes must be"),
        ({"nodes": 1, "notice": -1}, "notice must be"),
        ({"nodes": 1, "pool": 3}, "pool must be"),
        ([1], "JSON object"),
    ],
)
def test_bad_requests_are_refused(body: Any, message: str) -> None:
    with pytest.raises(ReclaimError, match=message):
        ReclaimRequest.from_json(body)


def test_busiest_spot_nodes_go_first() -> None:
    nodes = build_nodes(_profile())
    pods = [{"spec": {"nodeName": "c-spot-2"}}, {"spec": {"nodeName": "c-spot-2"}}, {"spec": {"nodeName": "c-spot-1"}}]
    assert choose_nodes(nodes, pods, count=2, pool=None, busy=set()) == ["c-spot-2", "c-spot-1"]
    assert choose_nodes(nodes, pods, count=5, pool=None, busy={"c-spot-2"}) == ["c-spot-1", "c-spot-0"]
    assert choose_nodes(nodes, pods, count=5, pool="base", busy=set()) == []


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    profile = _profile(simulation={"startupDelaySeconds": 1})
    objects = ObjectStore(MemoryStore(), member_registry())
    await objects.bootstrap()
    clock = ManualClock()
    async with SimulatedCluster(profile, objects, clock=clock, seed=1) as cluster:
        yield Sim(cluster, objects, clock)


async def _deploy(sim: Sim, replicas: int) -> None:
    await sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "infer", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "x"}},
                "template": {
                    "metadata": {"labels": {"app": "x"}},
                    "spec": {
                        "nodeSelector": {"cloud.google.com/gke-spot": "true"},
                        "containers": [{"name": "m", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 4}}}],
                    },
                },
            },
        }
    )

    async def running() -> bool:
        return sum(p["status"].get("phase") == "Running" for p in await sim.pods()) == replicas

    await sim.until(running)


async def test_reclaim_takes_nodes_and_their_pods(sim: Sim) -> None:
    await _deploy(sim, 2)
    reclaimer = Reclaimer(sim.cluster.profile, sim.objects, {})
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in await sim.pods()}
    result = await reclaimer.reclaim(ReclaimRequest(nodes=2))
    assert result.pods == 2
    assert sorted(result.nodes) == sorted(before.values())  # the busy ones
    node_names = {n["metadata"]["name"] for n in (await sim.objects.list(sim.rt("v1", "Node"))).items}
    assert not set(result.nodes) & node_names
    assert len(node_names) == 2 and "c-base-0" in node_names

    async def replaced() -> list[dict[str, Any]]:
        pods = await sim.pods()
        return [p for p in pods if p["metadata"]["name"] not in before] if len(pods) == 2 else []

    # The Deployment's pods come back; one spot node is left for two: one waits.
    pods = await sim.until(replaced)
    assert len(pods) == 2
    with pytest.raises(ReclaimError, match="no spot node group 'base'"):
        await reclaimer.reclaim(ReclaimRequest(nodes=1, pool="base"))


async def test_notice_taints_first_then_the_node_goes(sim: Sim) -> None:
    await _deploy(sim, 1)
    released = asyncio.Event()

    async def sleep(_: float) -> None:
        await released.wait()

    reclaimer = Reclaimer(sim.cluster.profile, sim.objects, {}, sleep=sleep)
    result = await reclaimer.reclaim(ReclaimRequest(nodes=1, notice=30))
    (name,) = result.nodes
    node = await sim.objects.get(sim.rt("v1", "Node"), name=name)
    assert spot.has_reclaim_notice(node["spec"]["taints"])
    # The noticed node is not chosen again: the two others go, then none is left.
    await reclaimer.reclaim(ReclaimRequest(nodes=2))
    with pytest.raises(ReclaimError, match="no spot node left"):
        await reclaimer.reclaim(ReclaimRequest(nodes=1))
    assert reclaimer.reclaimed == 2
    released.set()
    for _ in range(500):
        if reclaimer.reclaimed == 3:
            break
        await asyncio.sleep(0.01)
    names = {n["metadata"]["name"] for n in (await sim.objects.list(sim.rt("v1", "Node"))).items}
    assert names == {"c-base-0"}
    await reclaimer.close()

