"""Rare node steering: in a cluster whose member spreads (kube's LeastAllocated), a small replica is
steered off the GPU model whose nodes alone hold recent larger replicas; on small hand-computed
fleets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.constants import ANNOTATION_GPU_STEERING
from controlplane.apis.fragmentation import GPU_MILLI, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.demand import DemandHistory
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.rarenodes import kept_models, parts, rare_models
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from gpufed.commands.explain import _steering_lines

from .builders import cluster, shape
from .test_packhints import named
from .test_tiebreak import NOW, reasons, tiered

GIB = 1024**3
#: An 8-GPU replica of 120 cores: only the 128-core nodes hold it.
WIDE = TaskShape(cpu_milli=120_000, gpu_milli=GPU_MILLI, num_gpu=8)
#: An 8-GPU replica of 64 cores: every 8-GPU node holds it.
NARROW = TaskShape(cpu_milli=64_000, gpu_milli=GPU_MILLI, num_gpu=8)


def fleet(node_scoring: str | None = "LeastAllocated", big_cpu: int = 128_000) -> list[Any]:
    """One cluster: two empty 8-GPU ``BIG`` nodes of ``big_cpu`` millicores, three empty 8-GPU ``STD``
    nodes of 96 cores and one ``STD`` node with 4 GPUs in use (named by the agent, so packing hints
    have a node to name); its agent reports ``node_scoring``."""
    big = shape(2, gpus=8, product="BIG", cpu=big_cpu, allocatable={"nvidia.com/gpu": 8})
    big["gpu"]["count"] = 8
    std = shape(3, gpus=8, product="STD", cpu=96_000, allocatable={"nvidia.com/gpu": 8})
    std["gpu"]["count"] = 8
    used = named(1, 4, "node-a", cpu=96_000)
    used["labels"]["nvidia.com/gpu.product"] = "STD"
    return [cluster("c", big, std, used, node_scoring=node_scoring)]


def cache_after(*tasks: TaskShape) -> SchedulerCache:
    """A scheduler cache whose recent demand holds one arrival of each of ``tasks``."""
    cache = SchedulerCache()
    for i, task in enumerate(tasks):
        cache.demand.observe(f"ns/earlier-{i}", task)
    return cache


def request(gpus: int = 1, cpu: int = 4_000, **tiered_overflow: Any) -> BindingRequest:
    return BindingRequest(
        key="ns/job",
        replicas=1,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": gpus, "cpu": cpu}),
        placement=tiered(**tiered_overflow),
    )


def test_a_shape_only_some_models_hold_is_rare_and_its_models_are_those() -> None:
    capacities = [("BIG", 128_000, 512 * GIB, 8), ("STD", 96_000, 512 * GIB, 8), ("T4", 64_000, 256 * GIB, 2)]

    def rare(need: tuple[TaskShape, int]) -> frozenset[str]:
        return rare_models(*parts(need, capacities))

    assert parts((WIDE, 0), capacities) == (frozenset({"BIG", "STD"}), frozenset({"BIG"}))
    assert rare((WIDE, 0)) == frozenset({"BIG"})
    # Every model with 8-GPU nodes holds the 64-core one; the 2-GPU T4 nodes do not count.
    assert rare((NARROW, 0)) == frozenset()
    # A replica of 600 GiB: no node holds it, nothing to keep.
    assert rare((WIDE, 600 * GIB)) == frozenset()
    # Constrained to STD, which cannot hold it: nothing either.
    assert rare((TaskShape(120_000, GPU_MILLI, 8, ("STD",)), 0)) == frozenset()
    # The fleet's parts are the union of its clusters': BIG nodes in one cluster, STD in another.
    big, std = parts((WIDE, 0), capacities[:1]), parts((WIDE, 0), capacities[1:])
    assert rare_models(big[0] | std[0], big[1] | std[1]) == frozenset({"BIG"})


def test_a_replica_is_steered_off_the_models_of_rare_shapes_of_more_gpus_than_it_asks() -> None:
    rare = [(8, frozenset({"BIG"})), (4, frozenset({"MID"}))]
    one = TaskShape(4_000, GPU_MILLI, 1)
    assert kept_models(one, rare, ("BIG", "MID", "STD")) == ("BIG", "MID")
    assert kept_models(TaskShape(4_000, GPU_MILLI, 4), rare, ("BIG", "MID", "STD")) == ("BIG",)
    assert kept_models(TaskShape(4_000, GPU_MILLI, 8), rare, ("BIG", "MID", "STD")) == ()
    # A share of one GPU takes one GPU of a node; a replica without GPUs takes the node's CPU.
    assert kept_models(TaskShape(4_000, 500, 1), rare, ("BIG",)) == ("BIG",)
    assert kept_models(TaskShape(4_000, 0, 0), rare, ("BIG",)) == ("BIG",)
    # Only the cluster's own models.
    assert kept_models(one, rare, ("STD",)) == ()


def test_the_multi_gpu_needs_count_the_window_and_forget_what_leaves_it() -> None:
    history = DemandHistory(limit=2)
    history.observe("a", WIDE, 640 * GIB)
    history.observe("b", TaskShape(4_000, GPU_MILLI, 1))
    assert history.multi_gpu_needs() == {(WIDE, 640 * GIB): 1}
    history.observe("c", NARROW)  # "a" leaves
    assert history.multi_gpu_needs() == {(NARROW, 0): 1}
    assert history.copy().multi_gpu_needs() == history.multi_gpu_needs()


def test_a_small_replica_in_a_spreading_member_is_steered_off_the_rare_nodes() -> None:
    # Four 120-core 8-GPU arrivals: only the BIG nodes hold them, and they open the packing hints.
    result = schedule(request(), fleet(), now=NOW, cache=cache_after(*(WIDE,) * 4))
    assert result.clusters == {"c": 1}
    assert result.steering == {"c": ("BIG",)}
    assert result.packing == {"c": ("node-a",)}
    assert any(
        "steered inside the cluster away from BIG" in r and "LeastAllocated" in r
        for r in reasons(result, "c")
    )


@pytest.mark.parametrize(
    ("earlier", "gpus", "node_scoring", "big_cpu", "fields"),
    [
        # Four multi-GPU arrivals open the packing hints; only three of them are the rare shape.
        pytest.param(
            (WIDE,) * 3 + (NARROW,), 1, "LeastAllocated", 128_000, {}, id="three-arrivals-are-too-few"
        ),
        pytest.param((WIDE,) * 4, 8, "LeastAllocated", 128_000, {}, id="as-many-gpus-as-the-rare-shape"),
        pytest.param((WIDE,) * 4, 1, "MostAllocated", 128_000, {}, id="a-member-that-packs-by-itself"),
        pytest.param((WIDE,) * 4, 1, "LeastAllocated", 96_000, {}, id="every-8-gpu-node-alike"),
        pytest.param((NARROW,) * 4, 1, "LeastAllocated", 128_000, {}, id="a-shape-every-node-holds"),
        pytest.param((WIDE,) * 4, 1, "LeastAllocated", 128_000, {"rareNodeSteering": False}, id="turned-off"),
        pytest.param(
            (WIDE,) * 4, 1, "LeastAllocated", 128_000, {"packingHints": False}, id="no-packing-hints"
        ),
        pytest.param(
            (WIDE,) * 4,
            1,
            "LeastAllocated",
            128_000,
            {"packingHintsMultiGPUPercent": 100},
            id="hints-waiting",
        ),
    ],
)
def test_no_rare_node_steering(
    earlier: tuple[TaskShape, ...], gpus: int, node_scoring: str, big_cpu: int, fields: dict[str, Any]
) -> None:
    result = schedule(
        request(gpus, **fields), fleet(node_scoring, big_cpu=big_cpu), now=NOW, cache=cache_after(*earlier)
    )
    assert result.clusters == {"c": 1}
    assert result.steering == {}


def test_gpufed_explain_says_why_a_cluster_was_steered() -> None:
    result = schedule(request(), fleet(), now=NOW, cache=cache_after(*(WIDE,) * 4))
    binding = {
        "metadata": {"annotations": {ANNOTATION_GPU_STEERING: json.dumps({"c": ["BIG"], "d": ["T4"]})}}
    }
    explanation = [{"cluster": "c", "reasons": list(reasons(result, "c"))}, {"cluster": "d", "reasons": []}]
    lines = _steering_lines(binding, explanation)
    assert lines[0].startswith("Steering:    in c, nodes other than BIG preferred")
    assert lines[0].endswith("or their nodes alone hold recent larger replicas)")
    assert lines[1].endswith("replicas that accept only those models need them)")


def full(cpu: int) -> ClusterSnapshot:
    """Cluster d: two 8-GPU STD nodes of ``cpu`` millicores, every GPU in use (it takes no replica now)."""
    nodes = shape(2, gpus=0, product="STD", cpu=cpu, allocatable={"nvidia.com/gpu": 8})
    nodes["gpu"]["count"] = 8
    return cluster("d", nodes, node_scoring="LeastAllocated")


def test_the_rare_models_follow_the_clusters_that_report_again() -> None:
    cache = cache_after(*(WIDE,) * 4)
    first = schedule(request(), [*fleet(), full(96_000)], now=NOW, cache=cache)
    assert first.clusters == {"c": 1}
    assert first.steering == {"c": ("BIG",)}
    # d reports again with 128-core STD nodes: every model with 8-GPU nodes holds the shape now.
    assert schedule(request(), [*fleet(), full(128_000)], now=NOW, cache=cache).steering == {}
    # and back.
    assert schedule(request(), [*fleet(), full(96_000)], now=NOW, cache=cache).steering == {"c": ("BIG",)}
