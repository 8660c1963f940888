"""The pure decision that brings burst replicas back to a cheaper tier (core/returning.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.returning import (
    Move,
    ReturnSettings,
    free_gpu_units,
    plan_return,
    propose_return,
    return_order,
    returnable,
    room_grew,
    surge_time_left,
)
from policies.models import Placement, TierRebalance

from .builders import A100, cluster, shape, tiered_placement

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ORDER = {"onprem-a100": (0, 1.20), "onprem-b": (0, 0.35), "cloud-h100": (1, 4.10), "cloud-cheap": (1, 2.00)}
OPEN = ReturnSettings(min_saving_per_hour=1.0, min_move_interval_seconds=300, max_surge="100%")


@pytest.mark.parametrize(
    ("previous", "gains", "settings", "last", "move", "reason"),
    [
        # 4 replicas back from the cloud to on-prem: 4 GPUs x ($4.10 - $1.20)
        ({"cloud-h100": 4}, {"onprem-a100": 4}, OPEN, None, Move("cloud-h100", "onprem-a100", 4, 11.60), None),
        # only as many as on-prem has room for
        ({"onprem-a100": 2, "cloud-h100": 6}, {"onprem-a100": 3}, OPEN, None, Move("cloud-h100", "onprem-a100", 3, 8.70), None),
        # the most expensive cluster goes first, to the cheapest cluster with room
        (
            {"cloud-cheap": 2, "cloud-h100": 2},
            {"onprem-a100": 4, "onprem-b": 1},
            OPEN,
            None,
            Move("cloud-h100", "onprem-b", 1, 3.75),
            None,
        ),
        # maxSurge bounds one move: 25% of 8 replicas
        (
            {"cloud-h100": 8},
            {"onprem-a100": 8},
            ReturnSettings(max_surge="25%"),
            None,
            Move("cloud-h100", "onprem-a100", 2, 5.80),
            None,
        ),
        ({"cloud-h100": 8}, {"onprem-a100": 8}, ReturnSettings(max_surge=3), None, Move("cloud-h100", "onprem-a100", 3, 8.70), None),
        # gains only in a dearer cluster (the probe overflowed to the cloud): nothing to bring back
        ({"onprem-a100": 2, "cloud-cheap": 2}, {"cloud-h100": 2}, OPEN, None, None, "no cheaper cluster has room"),
        ({"cloud-h100": 4}, {}, OPEN, None, None, "no cheaper cluster has room"),
        # hysteresis: the saving is too small
        (
            {"cloud-cheap": 1},
            {"onprem-a100": 1},
            ReturnSettings(min_saving_per_hour=5),
            None,
            None,
            "would save $0.80/h, below the policy's minimum of $5.00/h",
        ),
        # hysteresis: the last move was too recent
        ({"cloud-h100": 4}, {"onprem-a100": 4}, OPEN, NOW - timedelta(seconds=100), None, "less than 300s ago"),
        ({"cloud-h100": 4}, {"onprem-a100": 4}, OPEN, NOW - timedelta(seconds=301), Move("cloud-h100", "onprem-a100", 4, 11.60), None),
        ({"cloud-h100": 4}, {"onprem-a100": 4}, ReturnSettings(enabled=False), None, None, "disabled"),
        # everything already runs in the cheapest cluster it could
        ({"onprem-a100": 4}, {"onprem-a100": 1}, OPEN, None, None, "no cheaper cluster has room"),
    ],
)
def test_plan_return(
    previous: dict[str, int],
    gains: dict[str, int],
    settings: ReturnSettings,
    last: datetime | None,
    move: Move | None,
    reason: str | None,
) -> None:
    plan = plan_return(previous, gains, ORDER, gpus_per_replica=1, settings=settings, last_move=last, now=NOW)
    assert plan.move == move
    if reason is not None:
        assert reason in plan.reason
    else:
        assert plan.reason == plan.move.describe() if plan.move else True


def test_a_recent_move_says_when_to_look_again() -> None:
    plan = plan_return(
        {"cloud-h100": 4}, {"onprem-a100": 4}, ORDER, gpus_per_replica=1, settings=OPEN,
        last_move=NOW - timedelta(seconds=100), now=NOW,
    )
    assert plan.wait_seconds == pytest.approx(200)


def test_the_saving_counts_every_gpu_of_a_replica() -> None:
    plan = plan_return({"cloud-h100": 2}, {"onprem-a100": 2}, ORDER, gpus_per_replica=4, settings=OPEN, last_move=None, now=NOW)
    assert plan.move is not None and plan.move.saving_per_hour == pytest.approx(23.20)
    assert plan.move.describe() == "moved 2 replicas cloud-h100 \u2192 onprem-a100: saves $23.20/h"


def test_returnable_counts_replicas_outside_the_cheapest_cluster() -> None:
    assert returnable({"onprem-a100": 2, "cloud-h100": 6, "cloud-cheap": 1}, ORDER) == 9
    assert returnable({"cloud-h100": 6}, ORDER) == 6
    assert returnable({"onprem-b": 6}, ORDER) == 0
    assert returnable({}, ORDER) == 0


def test_policy_defaults_and_surge() -> None:
    defaults = ReturnSettings.from_policy(None)
    assert (defaults.enabled, defaults.min_saving_per_hour, defaults.min_move_interval_seconds) == (True, 1.0, 300)
    assert defaults.surge(8) == 2 and defaults.surge(1) == 1
    custom = ReturnSettings.from_policy(
        TierRebalance.model_validate({"enabled": False, "minSavingPerHour": 0.5, "minMoveIntervalSeconds": 5, "maxSurge": "50%"})
    )
    assert (custom.enabled, custom.min_saving_per_hour, custom.min_move_interval_seconds, custom.surge(5)) == (False, 0.5, 5, 3)
    assert defaults.surge_timeout_seconds == 600
    assert ReturnSettings.from_policy(TierRebalance.model_validate({"surgeTimeoutSeconds": 30})).surge_timeout_seconds == 30


def test_a_surge_has_until_its_timeout() -> None:
    settings = ReturnSettings(surge_timeout_seconds=60)
    assert surge_time_left(NOW - timedelta(seconds=45), NOW, settings) == 15
    assert surge_time_left(NOW - timedelta(seconds=60), NOW, settings) == 0
    assert surge_time_left(NOW - timedelta(seconds=90), NOW, settings) == -30
    assert surge_time_left(None, NOW, settings) == 60  # no start recorded: counts from now


@pytest.mark.parametrize(
    ("onprem_gpus", "rebalance", "move", "reason"),
    [
        # on-prem has room for 2 of the 4 cloud replicas: 2 x ($4.10 - $1.20)
        (2, {"maxSurge": "100%"}, Move("cloud", "onprem", 2, 5.80), None),
        # the surge budget bounds what the probe may add: 25% of 4 replicas
        (8, {}, Move("cloud", "onprem", 1, 2.90), None),
        (0, {}, None, "no cheaper cluster has room"),
        (8, {"enabled": False}, None, "rebalancing is disabled by the policy"),
    ],
)
def test_propose_return_asks_the_scheduler_where_a_surge_would_go(
    onprem_gpus: int, rebalance: dict[str, object], move: Move | None, reason: str | None
) -> None:
    snapshots = [
        cluster("cloud", shape(1, gpus=8), provider="aws", pricing={A100: 4.10}),
        cluster("onprem", shape(1, gpus=onprem_gpus), pricing={A100: 1.20}),
    ]
    request = BindingRequest(
        key="default/web",
        replicas=4,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=tiered_placement(**rebalance),
        previous={"cloud": 4},
    )
    plan = propose_return(request, snapshots, last_move=None, now=NOW)
    assert plan.move == move
    if reason is not None:
        assert plan.reason == reason


def banded_placement(band: float | None, **rebalance: object) -> Placement:
    """``tiered_placement`` with ``tieredOverflow.priceBandPercent`` set to ``band`` (unset when None)."""
    tiered: dict[str, object] = {"rebalance": rebalance}
    if band is not None:
        tiered["priceBandPercent"] = band
    return Placement.model_validate(
        {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow", "tieredOverflow": tiered}}
    )


EASY = {"minSavingPerHour": 0.1, "maxSurge": "100%"}


@pytest.mark.parametrize(
    ("band", "cloud_running", "cheap_gpus", "returnable_replicas", "move", "reason"),
    [
        # on-prem "dear" ($1.50) runs the 4 replicas, on-prem "cheap" ($1.20) has room:
        # without a band, or with one too narrow to join them, they move: 4 x $0.30
        (None, False, 8, 4, Move("dear", "cheap", 4, 1.20), None),
        (0, False, 8, 4, Move("dear", "cheap", 4, 1.20), None),
        (10, False, 8, 4, Move("dear", "cheap", 4, 1.20), None),  # $1.20 + 10% = $1.32 < $1.50
        # a band holding both prices ties the two clusters, as the division does: nothing moves
        (50, False, 8, 0, None, "no replica runs outside the cheapest cluster"),
        (25, False, 8, 0, None, "no replica runs outside the cheapest cluster"),  # $1.20 + 25% = $1.50
        # from the cloud, the band's dearer cluster is a strictly better rank; the saving is the
        # real price difference, 4 x ($4.10 - $1.50), not the band start's
        (50, True, 0, 4, Move("cloud", "dear", 4, 10.40), None),
    ],
)
def test_returns_rank_clusters_by_tier_and_price_band(
    band: float | None, cloud_running: bool, cheap_gpus: int, returnable_replicas: int, move: Move | None, reason: str | None
) -> None:
    snapshots = [
        cluster("cheap", shape(1, gpus=cheap_gpus), pricing={A100: 1.20}),
        cluster("cloud", shape(1, gpus=0), provider="aws", pricing={A100: 4.10}),
        cluster("dear", shape(1, gpus=8 if cloud_running else 0), pricing={A100: 1.50}),
    ]
    request = BindingRequest(
        key="default/web",
        replicas=4,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=banded_placement(band, **EASY),
        previous={"cloud" if cloud_running else "dear": 4},
    )
    assert returnable(request.previous, return_order(request, snapshots)) == returnable_replicas
    plan = propose_return(request, snapshots, last_move=None, now=NOW)
    assert plan.move == move
    if reason is not None:
        assert plan.reason == reason


# "dear" ($1.50) and "cheap" ($1.20) share a band starting at $1.20; "cloud" is a tier above.
BANDED = {"cheap": (0, 1.20), "dear": (0, 1.20), "cloud": (1, 4.10)}
PRICES = {"cheap": 1.20, "dear": 1.50, "cloud": 4.10}


@pytest.mark.parametrize(
    ("previous", "gains", "move", "reason"),
    [
        ({"dear": 4}, {"cheap": 4}, None, "cheap has room but ties with dear on tier and price band"),
        # the worst-ranked cluster the binding runs in goes first; the target is the best-ranked with room
        ({"dear": 2, "cloud": 2}, {"cheap": 4}, Move("cloud", "cheap", 2, 5.80), None),
        ({"cloud": 2}, {"dear": 1, "cheap": 1}, Move("cloud", "cheap", 1, 2.90), None),
        ({"cloud": 2}, {"dear": 2}, Move("cloud", "dear", 2, 5.20), None),
    ],
)
def test_plan_return_needs_a_better_band_and_saves_the_real_difference(
    previous: dict[str, int], gains: dict[str, int], move: Move | None, reason: str | None
) -> None:
    plan = plan_return(
        previous, gains, BANDED, gpus_per_replica=1, settings=OPEN, last_move=None, now=NOW, prices=PRICES
    )
    assert plan.move == move
    if reason is not None:
        assert plan.reason == reason
    assert returnable({"dear": 4}, BANDED) == 0 and returnable({"dear": 1, "cloud": 3}, BANDED) == 3


@pytest.mark.parametrize("bad", [{"maxSurge": 0}, {"maxSurge": "0%"}, {"maxSurge": "120%"}, {"maxSurge": "x"}, {"minSavingPerHour": -1}])
def test_policy_rejects_bad_settings(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TierRebalance.model_validate(bad)


def test_room_grows_only_when_a_report_shows_more_free_gpus() -> None:
    full, two, four = cluster("onprem"), cluster("onprem", shape(1, gpus=2)), cluster("onprem", shape(2, gpus=2))
    mig = cluster("onprem", shape(1, extra={"nvidia.com/mig-1g.10gb": 7}))
    assert free_gpu_units(four) == 4 and free_gpu_units(mig) == 7 and free_gpu_units(None) == 0
    assert room_grew(full, two) and room_grew(two, four) and room_grew(None, two) and room_grew(full, mig)
    assert not room_grew(four, two) and not room_grew(two, two) and not room_grew(None, full)
