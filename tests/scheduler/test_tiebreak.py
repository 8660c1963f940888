"""Ties of tier and price: fleet fragmentation and GPU scarcity decide, on small hand-computed fleets."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.fragmentation import DemandMix, TaskShape
from controlplane.interpreter.requirements import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ReplicaRequirements,
)
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.clusterfit import (
    free_by_model,
    gpu_vector,
    row_growth,
    scarcity,
    summed,
    task_of,
)
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.demand import DemandHistory
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape, fleet_key
from controlplane.scheduler.core.tiebreak import summed_free
from policies.models import Placement

from .builders import cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
T4 = "Tesla-T4"
V100 = "Tesla-V100-SXM2-16GB"
CPU = 1000


def tiered(**tiered_overflow: Any) -> Placement:
    scheduling: dict[str, Any] = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}
    if tiered_overflow:
        scheduling["tieredOverflow"] = tiered_overflow
    return Placement.model_validate({"replicaScheduling": scheduling})


def one_gpu(key: str, *, placement: Placement | None = None) -> BindingRequest:
    return BindingRequest(
        key=key,
        replicas=1,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": CPU}),
        placement=placement or tiered(),
    )


def observe(cache: SchedulerCache, task: TaskShape, times: int, prefix: str) -> None:
    for index in range(times):
        cache.demand.observe(f"ns/{prefix}{index}", task)


def reasons(result: ScheduleResult, name: str) -> tuple[str, ...]:
    return next(entry.reasons for entry in result.explanation if entry.cluster == name)


# --------------------------------------------------------------------------------- fragmentation


def test_one_gpu_replica_fills_a_partly_used_node_rather_than_breaking_a_whole_one() -> None:
    """Half the recent demand wants 4 GPUs on one node, half 1 GPU. ``a-whole`` has a node with 4
    free GPUs, ``b-partly`` one with 2. By name the replica would go to ``a-whole``.

    F(node) = p4 x (free GPUs when 4 do not fit) (1-GPU tasks never leave a whole GPU unusable), with
    p4 = 50/101 (the decided replica is a 1-GPU arrival too): ``a-whole`` grows from 0 to
    3000 p4 = +1.49 GPUs, ``b-partly`` from 2000 p4 to 1000 p4 = -0.50 GPUs.
    """
    cache = SchedulerCache()
    observe(cache, TaskShape(CPU, 1000, 4), 50, "big")
    observe(cache, TaskShape(CPU, 1000, 1), 50, "small")
    fleet = [cluster("a-whole", shape(1, gpus=4)), cluster("b-partly", shape(1, gpus=2, allocatable={"nvidia.com/gpu": 4}))]
    result = schedule(one_gpu("ns/job"), fleet, now=NOW, cache=cache)
    assert result.clusters == {"b-partly": 1}
    assert "decided by fragmentation (fragmentation -0.50 GPUs" in reasons(result, "b-partly")[-1]
    assert "#2 of 2 clusters tied on tier and price" in reasons(result, "a-whole")[0]
    assert "fragmentation +1.49 GPUs" in reasons(result, "a-whole")[0]


def test_row_growth_by_hand() -> None:
    mix = DemandMix(((TaskShape(0, 1000, 4), 0.5), (TaskShape(0, 1000, 1), 0.5)))
    task = TaskShape(0, 1000, 1)
    assert row_growth(("A100", 64_000, (1000,) * 4), task, mix) == pytest.approx(1500.0)
    assert row_growth(("A100", 64_000, (1000,) * 2), task, mix) == pytest.approx(-500.0)
    assert row_growth(("A100", 64_000, (400,)), task, mix) is None  # no whole GPU left
    share = TaskShape(0, 300, 1)
    # Best fit: the share goes on the GPU with 400 free, leaving 100 no task of the mix can use.
    assert row_growth(("A100", 64_000, (1000, 400)), share, mix) == pytest.approx(0.5 * -300 + 0.5 * -300)


def test_free_thousandths_of_shared_gpus_spread_over_them() -> None:
    node = NodeShape.from_dict(
        {
            "count": 1,
            "labels": {"nvidia.com/gpu.product": "A100"},
            "free": {"cpu": 8000, "nvidia.com/gpu": 4, "nvidia.com/gpu-milli": 4700},
            "allocatable": {"cpu": 8000, "nvidia.com/gpu": 6, "nvidia.com/gpu-milli": 8000},
            "gpu": {"product": "A100", "count": 8},
        }
    )
    assert gpu_vector(node) == (1000, 1000, 1000, 1000, 350, 350)


def test_task_of_reads_gpu_models_from_selector_and_affinity() -> None:
    pinned = ReplicaRequirements.build({"nvidia.com/gpu": 2}, node_selector={"nvidia.com/gpu.product": T4})
    assert task_of(pinned) == TaskShape(0, 1000, 2, (T4,))
    either = ReplicaRequirements.build(
        {"nvidia.com/gpu-milli": 500, "cpu": 2000},
        node_affinity=[NodeSelectorTerm(expressions=(NodeSelectorRequirement("nvidia.com/gpu.product", "In", (V100, T4)),))],
    )
    assert task_of(either) == TaskShape(2000, 500, 1, tuple(sorted((T4, V100))))
    assert task_of(ReplicaRequirements.build({"nvidia.com/mig-1g.10gb": 1})) is None


# --------------------------------------------------------------------------------- scarcity


def t4_and_v100(*, t4_price: float | None = None) -> list[ClusterSnapshot]:
    pricing = {T4: t4_price} if t4_price is not None else None
    return [
        cluster("a-t4", shape(1, gpus=8, product=T4), pricing=pricing),
        cluster("b-v100", shape(1, gpus=8, product=V100)),
    ]


def flexible_and_t4_only(cache: SchedulerCache) -> None:
    """100 recent 1-GPU arrivals that take any model, 3 of 2 GPUs that accept only a T4 (under 5 %
    of the arrivals: not in the mix, so fragmentation sees only the flexible ones and ties)."""
    observe(cache, TaskShape(CPU, 1000, 1), 100, "flex")
    observe(cache, TaskShape(CPU, 1000, 2, (T4,)), 3, "t4only")


def test_flexible_replica_leaves_the_t4_cluster_to_t4_only_demand() -> None:
    """Scarcity of the T4s: 6 GPUs of T4-only demand against 8 free T4s: 0.75 per T4 GPU taken."""
    cache = SchedulerCache()
    flexible_and_t4_only(cache)
    result = schedule(one_gpu("ns/job"), t4_and_v100(), now=NOW, cache=cache)
    assert result.clusters == {"b-v100": 1}
    assert "decided by scarcity" in reasons(result, "b-v100")[-1]
    assert "scarcity 0.75 GPUs" in reasons(result, "a-t4")[0]


def test_without_constrained_demand_or_with_scarcity_off_the_tie_falls_through() -> None:
    cache = SchedulerCache()
    observe(cache, TaskShape(CPU, 1000, 1), 100, "flex")
    result = schedule(one_gpu("ns/job"), t4_and_v100(), now=NOW, cache=cache)
    assert result.clusters == {"a-t4": 1}
    assert "decided by name" in reasons(result, "a-t4")[-1]
    cache = SchedulerCache()
    flexible_and_t4_only(cache)
    off = tiered(scarcityAware=False)
    result = schedule(one_gpu("ns/job", placement=off), t4_and_v100(), now=NOW, cache=cache)
    assert result.clusters == {"a-t4": 1}


def test_price_order_holds_whatever_the_scarcity() -> None:
    cache = SchedulerCache()
    flexible_and_t4_only(cache)
    fleet = t4_and_v100(t4_price=0.5)
    fleet[1] = cluster("b-v100", shape(1, gpus=8, product=V100), pricing={V100: 2.5})
    result = schedule(one_gpu("ns/job"), fleet, now=NOW, cache=cache)
    assert result.clusters == {"a-t4": 1}


def test_scarcity_by_hand() -> None:
    flexible = TaskShape(0, 1000, 2)
    # Half the cluster's free GPUs are T4s, whose constrained demand exceeds the fleet's free T4s.
    cost = scarcity(flexible, {T4: 4.0, V100: 4.0}, {T4: 4.0, V100: 12.0}, {T4: 10.0})
    assert cost == pytest.approx(2 * 0.5 * 1.0)
    assert scarcity(TaskShape(0, 1000, 1, (V100,)), {T4: 4.0, V100: 4.0}, {T4: 4.0}, {T4: 10.0}) == 0.0


# --------------------------------------------------------------------------------- the demand history


def test_demand_history_is_bounded_and_counts_a_binding_once() -> None:
    history = DemandHistory(limit=3)
    t4 = TaskShape(0, 1000, 2, (T4,))
    either = TaskShape(0, 500, 1, (T4, V100))
    history.observe("ns/a", t4)
    history.observe("ns/a", t4)  # decided again: not a new arrival
    history.observe("ns/b", either)
    assert len(history) == 2
    assert history.constrained() == {T4: 2.25, V100: 0.25}
    for key in ("ns/c", "ns/d"):
        history.observe(key, TaskShape(0, 1000, 1))
    assert len(history) == 3  # ns/a left the window
    assert history.constrained() == {T4: 0.25, V100: 0.25}


def test_the_mix_is_learned_from_arrivals_and_versioned() -> None:
    history = DemandHistory()
    assert not history.mix()
    for index in range(64):
        history.observe(f"ns/{index}", TaskShape(0, 1000, 1))
    mix = history.mix()
    assert mix.shapes == ((TaskShape(0, 1000, 1), 1.0),)
    version = history.version
    history.observe("ns/new", TaskShape(0, 1000, 8))
    assert history.mix() is mix and history.version == version  # not enough new arrivals yet


def test_the_fleets_free_gpus_summed_again_after_reports_equal_a_full_sum_to_the_last_bit() -> None:
    """``summed_free`` starts from the fleet it summed last and sums again only the models of the
    clusters that reported since: each total must be the float a full sum in fleet order gives
    (shares of a GPU make them inexact), including models that appear or leave the fleet."""
    rng = random.Random(7)
    products = ("A100", "T4", "V100", "H100")

    def report(name: str) -> ClusterSnapshot:
        shapes = []
        for product in rng.sample(products, rng.randint(0, 2)):
            milli = rng.randint(1, 7999)
            shapes.append(shape(rng.randint(1, 9), gpus=milli // 1000, product=product,
                                extra={"nvidia.com/gpu-milli": milli}, allocatable={"nvidia.com/gpu": 4}))
        return cluster(name, *shapes)

    cache = SchedulerCache()
    fleet = [report(f"c{i}") for i in range(8)]
    seen: set[str] = set()
    for _ in range(60):
        total = summed_free(cache, fleet, fleet_key(fleet))
        full = summed(free_by_model(c) for c in fleet)
        assert total == full  # floats compared exactly
        seen.update(full)
        for index in rng.sample(range(len(fleet)), rng.randint(1, 3)):
            fleet[index] = report(fleet[index].name)
    assert seen == set(products)
