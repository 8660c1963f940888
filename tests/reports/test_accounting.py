"""Integration over time: reconciliation, money, rollup boundaries, gaps, retention, dump/load."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from controlplane.reports.accounting import Accumulator
from controlplane.reports.classify import WasteState
from controlplane.reports.fleet import FleetSample
from controlplane.reports.rollups import Resolution
from controlplane.reports.summary import Dimension

from .builders import A100, GPU, H100, T0, at, cluster, demand, fleet, gpu, gpus, mig, node, pod

S = WasteState


def mixed_fleet(minutes: float) -> FleetSample:
    """On-prem: 2 A100 (one busy, one idle-allocated at 3 %) and one H100 MIG GPU (3g busy, 4/7 free);
    cloud: 1 H100 busy and 1 H100 free. Prices: A100 $1/h, on-prem H100 $2/h, cloud H100 $4.10/h.
    An H100 replica waits, restricted to the cloud cluster."""
    onprem = cluster(
        "onprem",
        [
            node("a1", [gpu(0, pod("train"), 0.8), gpu(1, pod("idle"), 0.03)], product=A100),
            node(
                "h1",
                [
                    mig(0, "3g.40gb", instance=1, holder=pod("mig"), utilization=0.5),
                    mig(0, "4g.40gb", instance=2),
                ],
                product=H100,
            ),
        ],
        pricing={A100: 1.0, H100: 2.0},
    )
    cloud = cluster(
        "cloud",
        [node("c1", [gpu(0, pod("infer"), 0.9), gpu(1)], product=H100)],
        pricing={H100: 4.1},
        provider="aws",
        tier=1,
    )
    return fleet(
        onprem, cloud, pending=[demand({GPU: 1}, products=[H100], clusters=["cloud"])], time=at(minutes)
    )


def run(
    accumulator: Accumulator, minutes: range, build: Callable[[float], FleetSample] = mixed_fleet
) -> Accumulator:
    for minute in minutes:
        assert accumulator.add(build(minute))
    return accumulator


def test_states_and_money_are_hand_computed_and_reconcile() -> None:
    accumulator = run(Accumulator(), range(0, 181))  # samples 00:00 .. 03:00, integrated up to 03:00
    report = accumulator.query(T0, at(180))
    hours = report.totals.gpu_hours
    cost = report.totals.cost_usd
    assert report.observed_seconds == pytest.approx(3 * 3600)
    # 5 physical GPUs x 3 h = 15 GPU-hours, whatever the states.
    assert report.totals.total_gpu_hours == pytest.approx(15.0)
    assert hours[S.BUSY] == pytest.approx(3 * (1 + 3 / 7 + 1))  # a1 GPU0, 3g slice, cloud H100
    assert hours[S.IDLE_ALLOCATED] == pytest.approx(3.0)
    assert hours[S.FREE_NEEDED] == pytest.approx(3.0)  # the free cloud H100 the waiting replica fits
    assert hours[S.FREE_FRAGMENTED] == pytest.approx(0.0)
    assert hours[S.FREE_SPARE] == pytest.approx(3 * 4 / 7)  # the 4g slice: demand is for the cloud only
    assert hours[S.UNAVAILABLE] == pytest.approx(0.0)
    assert cost[S.BUSY] == pytest.approx(3 * (1.0 + 3 / 7 * 2.0 + 4.1))
    assert cost[S.IDLE_ALLOCATED] == pytest.approx(3 * 1.0)
    assert cost[S.FREE_NEEDED] == pytest.approx(3 * 4.1)
    assert cost[S.FREE_SPARE] == pytest.approx(3 * 4 / 7 * 2.0)
    assert report.totals.waste_pct == pytest.approx(100 * 6 / 15)


def test_per_gpu_hours_reconcile_by_profile_and_model() -> None:
    report = run(Accumulator(), range(0, 61)).query(T0, at(60), by=[Dimension.PROFILE])
    by_profile = {g.key["profile"]: g.totals.total_gpu_hours for g in report.groups}
    assert by_profile == {
        None: pytest.approx(4.0),
        "3g.40gb": pytest.approx(3 / 7),
        "4g.40gb": pytest.approx(4 / 7),
    }
    by_model = {
        g.key["model"]: g.totals.total_gpu_hours
        for g in run(Accumulator(), range(0, 61)).query(T0, at(60), by=["model"]).groups
    }
    assert by_model == {A100: pytest.approx(2.0), H100: pytest.approx(3.0)}


@pytest.mark.parametrize(
    ("by", "expected_keys"),
    [
        (["cluster"], [{"cluster": "cloud"}, {"cluster": "onprem"}]),
        (["namespace"], [{"namespace": "ml"}, {"namespace": None}]),
        (
            ["cluster", "workload"],
            [
                {"cluster": "cloud", "namespace": "ml", "workload": "Deployment/infer"},
                {"cluster": "cloud", "namespace": None, "workload": None},
                {"cluster": "onprem", "namespace": "ml", "workload": "Deployment/train"},
                {"cluster": "onprem", "namespace": "ml", "workload": "Deployment/idle"},
                {"cluster": "onprem", "namespace": "ml", "workload": "Deployment/mig"},
                {"cluster": "onprem", "namespace": None, "workload": None},
            ],
        ),
    ],
)
def test_group_keys(by: list[str], expected_keys: list[dict[str, str | None]]) -> None:
    report = run(Accumulator(), range(0, 11)).query(T0, at(10), by=by)
    assert sorted(
        (dict(g.key) for g in report.groups), key=lambda k: sorted((a, b or "") for a, b in k.items())
    ) == (sorted(expected_keys, key=lambda k: sorted((a, b or "") for a, b in k.items())))
    assert sum(g.totals.total_gpu_hours for g in report.groups) == pytest.approx(
        report.totals.total_gpu_hours
    )


def test_top_idle_workload_has_mean_utilization_and_idle_cost() -> None:
    report = run(Accumulator(), range(0, 121)).query(T0, at(120))
    top = report.workloads[0]
    assert (top.namespace, top.workload) == ("ml", "Deployment/idle")
    assert top.allocated_gpus == pytest.approx(1.0)
    assert top.mean_utilization == pytest.approx(0.03)
    assert top.idle_gpu_hours == pytest.approx(2.0)
    assert top.idle_cost_usd == pytest.approx(2.0)


def test_interval_splits_at_minute_boundaries() -> None:
    def single(minutes: float) -> FleetSample:
        return fleet(cluster("a", [node("n", gpus(1))], pricing={A100: 3.6}), time=at(minutes))

    accumulator = Accumulator()
    accumulator.add(single(0.5))  # 00:00:30
    accumulator.add(single(1.5))  # 00:01:30
    first = accumulator.query(at(0), at(1))
    second = accumulator.query(at(1), at(2))
    assert first.totals.total_gpu_hours == pytest.approx(30 / 3600)
    assert second.totals.total_gpu_hours == pytest.approx(30 / 3600)
    assert first.totals.total_cost_usd == pytest.approx(0.03)
    # The newest sample is held until its successor arrives.
    assert accumulator.query(at(2), at(3)).totals.total_gpu_hours == 0.0


def test_gap_beyond_max_interval_counts_as_unavailable() -> None:
    def single(minutes: float) -> FleetSample:
        return fleet(
            cluster("a", [node("n", [gpu(0, pod("p"), 0.9)])], pricing={A100: 2.0}), time=at(minutes)
        )

    accumulator = Accumulator(max_interval=timedelta(minutes=5))
    accumulator.add(single(0))
    accumulator.add(single(20))
    report = accumulator.query(at(0), at(20))
    assert report.totals.gpu_hours[S.BUSY] == pytest.approx(5 / 60)
    assert report.totals.gpu_hours[S.UNAVAILABLE] == pytest.approx(15 / 60)
    assert report.totals.cost_usd[S.UNAVAILABLE] == pytest.approx(15 / 60 * 2.0)
    assert report.totals.total_gpu_hours == pytest.approx(20 / 60)
    assert report.observed_seconds == pytest.approx(300)
    assert report.unobserved_seconds == pytest.approx(900)


def test_older_or_equal_samples_are_ignored() -> None:
    accumulator = Accumulator()
    assert accumulator.add(mixed_fleet(10))
    assert not accumulator.add(mixed_fleet(10))
    assert not accumulator.add(mixed_fleet(5))
    assert accumulator.add(mixed_fleet(11))
    assert accumulator.query(T0, at(60)).totals.total_gpu_hours == pytest.approx(5 / 60)


def test_old_windows_read_hour_buckets_and_agree_with_minutes() -> None:
    accumulator = run(Accumulator(), range(0, 3 * 24 * 60 + 1, 5))  # three days, a sample every 5 min
    newest = at(3 * 24 * 60)
    day_one = accumulator.query(T0, T0 + timedelta(days=1))  # older than 48 h: hour buckets only
    assert day_one.totals.total_gpu_hours == pytest.approx(5 * 24)
    assert day_one.totals.gpu_hours[S.FREE_NEEDED] == pytest.approx(24)
    last_day = accumulator.query(newest - timedelta(days=1), newest)  # minute buckets
    for state in S:
        assert last_day.totals.gpu_hours[state] == pytest.approx(day_one.totals.gpu_hours[state])
    # A window straddling the split point reconciles too.
    straddle = accumulator.query(newest - timedelta(hours=60), newest)
    assert straddle.totals.total_gpu_hours == pytest.approx(5 * 60)


def test_memory_stays_bounded_over_a_simulated_year() -> None:
    def small(minutes: float) -> FleetSample:
        return fleet(cluster("a", [node("n", [gpu(0, pod("p"), 0.5), gpu(1)])]), time=at(minutes))

    accumulator = Accumulator(max_interval=timedelta(hours=1))
    for hour in range(365 * 24 + 1):
        accumulator.add(small(hour * 60))
    counts = accumulator.bucket_counts()
    assert counts[Resolution.MINUTE] == 48 * 60
    assert counts[Resolution.HOUR] == 90 * 24
    newest = at(365 * 24 * 60)
    assert accumulator.query(newest - timedelta(days=90), newest).totals.total_gpu_hours == pytest.approx(
        2 * 90 * 24
    )
    # Anything older than the retention is gone.
    assert accumulator.query(T0, newest - timedelta(days=91)).totals.total_gpu_hours == 0.0


def test_dump_and_load_round_trip() -> None:
    accumulator = run(Accumulator(threshold=0.2, max_interval=timedelta(minutes=2)), range(0, 130, 1))
    restored = Accumulator.load(accumulator.dump())
    for window in ((T0, at(129)), (at(30), at(60))):
        assert restored.query(*window, by=["workload"]) == accumulator.query(*window, by=["workload"])
    assert (restored.threshold, restored.max_interval) == (0.2, timedelta(minutes=2))
    # The held sample survives: the next sample integrates the interval since it.
    accumulator.add(mixed_fleet(131))
    restored.add(mixed_fleet(131))
    assert restored.query(T0, at(131)) == accumulator.query(T0, at(131))


def test_load_rejects_unknown_versions() -> None:
    with pytest.raises(ValueError, match="version"):
        Accumulator.load(b'{"version": 99}')


def test_query_window_must_be_ordered() -> None:
    with pytest.raises(ValueError):
        Accumulator().query(at(10), at(10))


def test_empty_accumulator_reports_zero() -> None:
    report = Accumulator().query(T0, at(60), by=["cluster"])
    assert report.totals.total_gpu_hours == 0.0
    assert report.groups == ()
    assert report.recommendations == ()
