"""Recommendations with hand-computed savings: move, repartition, right-size; only for workloads
that hold GPUs now, with GPUs held now apart from GPU-hours over the window, never counted twice."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.fleet import FleetSample, WorkloadConstraints
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
        " NVIDIA-A100-SXM4-80GB in dc1 ($0.60/h) sit free: moving them saves $1,008.00/day"
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
    # 4 GPUs held now at $1.50/h, idle all the time they were measured: $144/day
    assert right_size.savings_usd_per_day == pytest.approx(144.0)
    assert right_size.text == (
        "ml/notebook holds 4 GPUs now; over the window 12.0 of its 12.0 measured GPU-hours were idle"
        " (3% mean utilization, $18.00): right-size or scale it down: saves $144.00/day"
    )


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


def test_no_recommendation_for_a_workload_that_is_gone() -> None:
    """ml/notebook idled for 100 minutes and was deleted: nothing to right-size any more, but the
    window's idle workloads still show what it cost (holding 0 GPUs now)."""

    def build(minutes: float) -> FleetSample:
        holder = pod("nb-0", workload="notebook") if minutes < 100 else None
        return fleet(cluster("dc1", [node("a1", [gpu(0, holder, 0.03 if holder else None)])], pricing={A100: 1.5}),
                     time=at(minutes))

    report = report_for(build)
    assert report.recommendations == ()
    [usage] = report.workloads
    assert (usage.workload, usage.gpus_now, usage.live) == ("Deployment/notebook", 0.0, False)
    assert usage.idle_gpu_hours == pytest.approx(100 / 60)


def test_gpus_held_now_are_not_a_window_average() -> None:
    """6 GPUs held idle for the last 90 s of a 15-minute window: 6 GPUs now (not "0.6 GPUs"),
    0.15 GPU-hours over the window, and right-sizing saves 6 x $2/h x 24 h a day."""
    accumulator = Accumulator()
    for seconds in range(0, 15 * 60 + 1, 30):
        holder = seconds >= 15 * 60 - 90
        devices = [gpu(i, pod(f"big-{i}", workload="big") if holder else None, 0.0 if holder else None)
                   for i in range(6)]
        accumulator.add(fleet(cluster("dc1", [node("a1", devices)], pricing={A100: 2.0}),
                              time=at(seconds / 60)))
    report = accumulator.query(T0, at(15))
    [usage] = report.workloads
    assert usage.allocated_gpus == pytest.approx(0.6)  # the window's mean, kept for the JSON contract
    assert usage.gpus_now == 6
    assert usage.allocated_gpu_hours == pytest.approx(0.15)
    [right_size] = report.recommendations
    assert right_size.text.startswith("ml/big holds 6 GPUs now; over the window 0.15 of its 0.15 measured GPU-hours")
    assert right_size.savings_usd_per_day == pytest.approx(6 * 2.0 * 24)


def test_right_size_and_move_of_one_workload_do_not_count_the_same_gpus_twice() -> None:
    """4 replicas of ml/infer on cloud H100s ($4.10/h), half of them idle, while on-prem A100s
    ($0.60/h) sit free: right-sizing saves the idle half, and the move covers only the 2 replicas
    still needed, so the two savings add up to what doing both saves."""

    def build(minutes: float) -> FleetSample:
        devices = [gpu(i, pod(f"infer-{i}", workload="infer"), 0.9 if i < 2 else 0.02) for i in range(4)]
        cloud = cluster("aws-east", [node("c1", devices, product=H100)], pricing={H100: 4.10},
                        provider="aws", tier=1)
        onprem = cluster("dc1", [node("a1", gpus(8))], pricing={A100: 0.60})
        return fleet(cloud, onprem, time=at(minutes), workloads=[WorkloadConstraints("ml", "Deployment/infer")])

    report = report_for(build)
    by_kind = {r.kind: r for r in report.recommendations}
    assert set(by_kind) == {RecommendationKind.RIGHT_SIZE, RecommendationKind.MOVE}
    right_size, move = by_kind[RecommendationKind.RIGHT_SIZE], by_kind[RecommendationKind.MOVE]
    assert right_size.savings_usd_per_day == pytest.approx(2 * 4.10 * 24)
    assert move.savings_usd_per_day == pytest.approx(2 * (4.10 - 0.60) * 24)
    assert move.text.startswith("2 replicas it still needs after right-sizing of ml/infer run on aws-east")
    # Doing both: 2 GPUs gone, 2 moved from $4.10 to $0.60.
    before, after = 4 * 4.10 * 24, 2 * 0.60 * 24
    assert right_size.savings_usd_per_day + move.savings_usd_per_day == pytest.approx(before - after)


def test_a_move_whose_free_destination_is_gone_is_not_recommended() -> None:
    """The on-prem GPUs were free for most of the window but are taken now: nothing to move to."""

    def build(minutes: float) -> FleetSample:
        sample = cloud_burst(minutes, constraints=True)
        if minutes < 110:
            return sample
        taken = cluster("dc1", [node("a1", [gpu(i, pod(f"x-{i}", workload="x"), 0.9) for i in range(8)]),
                                node("a2", [gpu(i, pod(f"y-{i}", workload="y"), 0.9) for i in range(4)])],
                        pricing={A100: 0.60})
        return fleet(sample.clusters[0], taken, time=sample.time, workloads=sample.workloads.values())

    report = report_for(build)
    assert report.opportunities and report.opportunities[0].savings_usd > 0
    assert [r for r in report.recommendations if r.kind == RecommendationKind.MOVE] == []
