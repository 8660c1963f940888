"""Recommendations with hand-computed savings: move, repartition, right-size."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.sample import FleetSample, WorkloadConstraints
from controlplane.reports.summary import RecommendationKind, WasteReport

from .builders import A100, H100, T0, at, cluster, demand, fleet, gpu, gpus, mig, node, pod


def report_for(build: Callable[[float], FleetSample], *, hours: int = 2) -> WasteReport:
    accumulator = Accumulator()
    for minute in range(0, hours * 60 + 1, 5):
        accumulator.add(build(minute))
    return accumulator.query(T0, at(hours * 60))


def cloud_burst(minutes: float, *, constraints: bool) -> FleetSample:
    """12 replicas of ml/infer on cloud H100 ($4.10/h) while 12 on-prem A100s ($0.60/h) sit free."""
    cloud = cluster(
        "aws-east",
        [node(f"c{i}", [gpu(0, pod(f"infer-{i}", workload="infer"), 0.9)], product=H100) for i in range(12)],
        pricing={H100: 4.10},
        provider="aws",
        tier=1,
    )
    onprem = cluster("dc1", [node("a1", gpus(8)), node("a2", gpus(4))], pricing={A100: 0.60})
    known = [WorkloadConstraints("ml", "Deployment/infer")] if constraints else []
    return fleet(cloud, onprem, time=at(minutes), workloads=known)


def test_move_cloud_replicas_to_free_onprem_gpus() -> None:
    report = report_for(lambda m: cloud_burst(m, constraints=True))
    [move] = [r for r in report.recommendations if r.kind == RecommendationKind.MOVE]
    assert move.savings_usd_per_day == pytest.approx(12 * (4.10 - 0.60) * 24)
    assert move.text == (
        "12 replicas of ml/infer run on aws-east NVIDIA-H100-80GB-HBM3 at $4.10/h while 12 GPUs of"
        " NVIDIA-A100-SXM4-80GB in dc1 ($0.60/h) sat free: moving them saves $1,008.00/day"
    )


def test_no_move_to_another_model_without_knowing_the_workload_accepts_it() -> None:
    report = report_for(lambda m: cloud_burst(m, constraints=False))
    assert [r for r in report.recommendations if r.kind == RecommendationKind.MOVE] == []


def test_no_move_to_a_more_expensive_or_higher_tier_cluster() -> None:
    def build(minutes: float) -> FleetSample:
        onprem = cluster("dc1", [node("a1", [gpu(0, pod("p", workload="w"), 0.9)])], pricing={A100: 1.0})
        cloud = cluster("cloud", [node("c1", gpus(1))], pricing={A100: 0.5}, provider="aws", tier=1)
        return fleet(onprem, cloud, time=at(minutes), workloads=[WorkloadConstraints("ml", "Deployment/w")])

    assert [r for r in report_for(build).recommendations if r.kind == RecommendationKind.MOVE] == []


def test_repartition_stranded_mig_slices() -> None:
    """14 free 1g.10gb slices (2 GPUs' worth) stranded while 2 replicas wait for 3g.40gb."""

    def build(minutes: float) -> FleetSample:
        nodes = [node(f"m{g}", [mig(0, "1g.10gb", instance=i) for i in range(7)]) for g in range(2)]
        return fleet(
            cluster("dc1", nodes, pricing={A100: 2.0}),
            pending=[demand({"nvidia.com/mig-3g.40gb": 1}, replicas=2)],
            time=at(minutes),
        )

    report = report_for(build)
    [repartition] = [r for r in report.recommendations if r.kind == RecommendationKind.REPARTITION]
    # stranded 2 GPUs, waiting 2 x 3/7 GPU: repartitioning can put 6/7 GPU to work.
    assert repartition.savings_usd_per_day == pytest.approx(6 / 7 * 2.0 * 24)
    assert repartition.text.startswith(
        "dc1 NVIDIA-A100-SXM4-80GB nodes: 14 free 1g.10gb slices stranded while 3g.40gb requests wait: repartition"
    )


def test_right_size_idle_workload() -> None:
    def build(minutes: float) -> FleetSample:
        devices = [gpu(i, pod(f"nb-{i}", workload="notebook"), 0.03) for i in range(4)]
        return fleet(cluster("dc1", [node("a1", devices)], pricing={A100: 1.5}), time=at(minutes))

    report = report_for(build, hours=3)
    [right_size] = report.recommendations
    assert right_size.kind == RecommendationKind.RIGHT_SIZE
    # 4 GPUs idle for 3 h at $1.50 = $18 over 3 h of observation = $144/day
    assert right_size.savings_usd_per_day == pytest.approx(144.0)
    assert "ml/notebook holds 4.0 GPUs at 3% mean utilization" in right_size.text


def test_recommendations_are_sorted_by_savings() -> None:
    def build(minutes: float) -> FleetSample:
        sample = cloud_burst(minutes, constraints=True)
        idle = cluster(
            "dc2", [node("b1", [gpu(0, pod("nb", workload="notebook"), 0.0)])], pricing={A100: 1.0}
        )
        return fleet(*sample.clusters, idle, time=sample.time, workloads=sample.workloads.values())

    savings = [r.savings_usd_per_day for r in report_for(build).recommendations]
    assert savings == sorted(savings, reverse=True)
    assert len(savings) == 2
