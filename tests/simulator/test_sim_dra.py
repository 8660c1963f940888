"""A simulated member runs pods that ask for GPUs through DRA claims: a claim of NVIDIA's GPU class
needs that many GPUs on one node (of the model a productName selector names), a claim of its MIG
class that pins a profile a slice of that profile, and a pod naming a template the member does not
hold yet waits for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from .test_sim_cluster import Sim, _sim

H100 = {"name": "h100", "count": 1, "cpu": 96, "memoryGiB": 1024, "gpu": {"product": "NVIDIA-H100-80GB-HBM3", "count": 8}}
A100 = {"name": "a100", "count": 2, "cpu": 96, "memoryGiB": 1024, "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 4}}
PINNED = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    async for value in _sim([A100, H100]):
        yield value


def template(name: str, count: int, selector: str | None = None, device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def pod(name: str, claim_template: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim_template}],
        "containers": [{"name": "main", "image": "vllm:1", "resources": {"claims": [{"name": "gpu"}]}}],
    }}


async def _still(sim: Sim) -> bool:
    return True  # one scheduling round of virtual time has passed


async def node_of(sim: Sim, name: str) -> str | None:
    found = await sim.get("v1", "Pod", name)
    return found["spec"].get("nodeName") or None


async def test_a_claim_needs_its_gpus_on_one_node(sim: Sim) -> None:
    await sim.create(template("six", 6))
    await sim.create(template("four", 4))
    await sim.create(pod("big", "six"))
    assert (await sim.until(lambda: node_of(sim, "big"))).startswith("c-h100-")  # only the H100 node has 6 GPUs
    await sim.create(pod("small", "four"))
    assert (await sim.until(lambda: node_of(sim, "small"))).startswith("c-a100-")  # 2 left on the H100 node
    await sim.create(pod("third", "four"))
    await sim.until(lambda: node_of(sim, "third"))
    await sim.create(pod("too-many", "six"))  # no node has 6 GPUs free now
    await scheduled_others(sim, "too-many")
    assert await node_of(sim, "too-many") is None


async def scheduled_others(sim: Sim, waiting: str) -> None:
    """Let the scheduler look at ``waiting`` (it reports it FailedScheduling) before asserting it is still unplaced."""

    async def reported() -> bool:
        events = (await sim.objects.list(sim.rt("v1", "Event"), namespace="default")).items
        return any(e["involvedObject"]["name"] == waiting and e["reason"] == "FailedScheduling" for e in events)

    await sim.until(reported)


async def test_a_product_selector_places_on_that_model_and_a_missing_template_waits(sim: Sim) -> None:
    await sim.create(pod("pinned", "one-h100"))  # its template comes later
    for _ in range(10):  # ten scheduling rounds of virtual time
        sim.clock.advance(1.0)
        await sim.until(lambda: _still(sim))
    assert await node_of(sim, "pinned") is None
    await sim.create(template("one-h100", 1, PINNED))
    assert (await sim.until(lambda: node_of(sim, "pinned"))).startswith("c-h100-")


MIG = {"name": "mig", "count": 1, "cpu": 64, "memoryGiB": 512, "gpu": {
    "product": "NVIDIA-H100-80GB-HBM3", "count": 1, "mig": {"strategy": "mixed", "layout": ["3g.40gb", "1g.10gb", "1g.10gb"]}}}
SLICE_1G = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"


@pytest.fixture
async def mig_sim() -> AsyncIterator[Sim]:
    async for value in _sim([A100, MIG]):
        yield value


async def test_a_mig_claim_takes_a_slice_of_its_profile(mig_sim: Sim) -> None:
    sim = mig_sim
    await sim.create(template("slice", 1, SLICE_1G, "mig.nvidia.com"))
    await sim.create(pod("first", "slice"))
    assert (await sim.until(lambda: node_of(sim, "first"))).startswith("c-mig-")
    await sim.create(pod("second", "slice"))
    assert (await sim.until(lambda: node_of(sim, "second"))).startswith("c-mig-")
    await sim.create(pod("third", "slice"))  # the node's two 1g.10gb slices are taken
    await scheduled_others(sim, "third")
    assert await node_of(sim, "third") is None


def shared_pod(name: str, claim: str, cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        "containers": [{"name": "main", "image": "vllm:1",
                        "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpu"}]}}],
    }}


async def unschedulable_message(sim: Sim, name: str) -> str | None:
    found = await sim.get("v1", "Pod", name)
    return next((c.get("message") for c in (found.get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)


async def test_a_claim_pods_share_is_allocated_once_on_one_node_and_freed_with_its_last_pod(sim: Sim) -> None:
    """Three pods name one ResourceClaim of 6 GPUs: the first pod allocates it on the only node with
    6 GPUs, the others join it there taking no GPU more (held per pod, the second would find no
    node); a pod naming it that does not fit that node is told the claim is not available on the
    others, after their fit; with its last pod gone the claim's GPUs are free again."""
    claim = template("pool", 6)
    claim.update(kind="ResourceClaim", spec=claim["spec"]["spec"])
    await sim.create(claim)
    for name in ("share-a", "share-b", "share-c"):
        await sim.create(shared_pod(name, "pool"))
    nodes = {name: await sim.until(lambda name=name: node_of(sim, name)) for name in ("share-a", "share-b", "share-c")}
    assert len(set(nodes.values())) == 1 and nodes["share-a"].startswith("c-h100-"), nodes
    assert sim.cluster.state.nodes[nodes["share-a"]].requested["nvidia.com/gpu"] == 6  # not 18

    await sim.create(shared_pod("share-big", "pool", cpu="94"))  # 93 CPUs left on the claim's node
    message = await sim.until(lambda: unschedulable_message(sim, "share-big"))
    assert message == "0/3 nodes are available: 1 Insufficient cpu, 2 resourceclaim not available on the node."

    for name in ("share-a", "share-b", "share-c", "share-big"):
        await sim.objects.delete(sim.rt("v1", "Pod"), namespace="default", name=name)
    await sim.create(template("eight", 8))
    await sim.create(pod("whole-board", "eight"))  # the claim was deallocated with its last pod
    assert (await sim.until(lambda: node_of(sim, "whole-board"))).startswith("c-h100-")


async def test_a_device_class_of_the_members_own_pins_the_model(sim: Sim) -> None:
    """A template asking 1 device of the member's DeviceClass that selects NVIDIA's H100 GPUs lands
    on the H100 node (the A100 nodes have GPUs free too)."""
    await sim.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100.example.com"},
                      "spec": {"selectors": [{"cel": {"expression": (
                          "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
                          f" && {PINNED}")}}]}})
    claim = template("one-h100", 1)
    claim["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "h100.example.com"
    await sim.create(claim)
    for name in ("h-1", "h-2", "h-3"):
        await sim.create(pod(name, "one-h100"))
        assert (await sim.until(lambda name=name: node_of(sim, name))).startswith("c-h100-")
