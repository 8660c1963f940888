"""Re-deciding a placed binding (core/rescheduling.py) and the never-fit decision's helpers
(core/neverfit.py): table-driven, over snapshots as agents report them. (``replicas_moved``'s
table is in tests/controllers/test_finished_work.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import ScheduledReason
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.neverfit import capacity_facts, never_fit_result
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.rescheduling import (
    decide_with_evictions,
    decide_with_moves,
    placement_broken,
)
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

from .builders import H100, cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
ONE_GPU = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 1000})
TIERED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}}
ONPREM_ONLY = {"clusterAffinity": {"clusterNames": ["onprem"]}, **TIERED}
AFFINITIES = {
    "clusterAffinities": [
        {"affinityName": "local", "clusterNames": ["onprem"]},
        {"affinityName": "burst", "clusterNames": ["cloud"]},
    ],
    **TIERED,
}


def request(
    replicas: int, placement: dict[str, Any] | None = None, *, previous: dict[str, int] | None = None, **extra: Any
) -> BindingRequest:
    return BindingRequest(
        key="ns/train",
        replicas=replicas,
        requirements=ONE_GPU,
        placement=Placement.model_validate(placement or TIERED),
        previous=previous or {},
        **extra,
    )


def gang(workers: int, *, previous: dict[str, int]) -> BindingRequest:
    components = (
        Component("Master", 1, ReplicaRequirements.build({"cpu": 1000})),
        Component("Worker", workers, ONE_GPU),
    )
    return request(workers + 1, previous=previous, gang=True, components=components)


def fleet(*, cloud: bool = True) -> list[ClusterSnapshot]:
    """onprem: 6 nodes with one free GPU each; cloud: 2 nodes with 8 free GPUs each."""
    clusters = [cluster("onprem", shape(6, gpus=1))]
    if cloud:
        clusters.append(cluster("cloud", shape(2, gpus=8), provider="aws"))
    return clusters


def check_decided(
    decided: tuple[BindingRequest, ScheduleResult] | None,
    *,
    previous: dict[str, int] | None,
    clusters: dict[str, int] | None,
) -> BindingRequest | None:
    """``decided`` is None when ``clusters`` is, else it places ``clusters`` (fully) from
    ``previous``; returns the request as decided."""
    if clusters is None:
        assert decided is None
        return None
    assert decided is not None
    request_decided, result = decided
    assert dict(request_decided.previous) == previous
    assert result.clusters == clusters
    assert result.condition.status
    return request_decided


@pytest.mark.parametrize(
    ("placement", "previous", "affinity_name", "names", "broken"),
    [
        pytest.param(TIERED, {"onprem": 2, "cloud": 1}, None, ("onprem", "cloud"), None, id="all-there"),
        pytest.param(TIERED, {"onprem": 2, "cloud": 1}, None, ("onprem",), "cluster cloud is gone", id="gone"),
        pytest.param(
            ONPREM_ONLY, {"cloud": 2}, None, ("onprem", "cloud"),
            "cluster cloud no longer matches the placement's cluster affinity", id="affinity-lost",
        ),
        pytest.param(AFFINITIES, {"cloud": 2}, "burst", ("onprem", "cloud"), None, id="observed-term-holds"),
        pytest.param(
            AFFINITIES, {"cloud": 2}, None, ("onprem", "cloud"),
            "cluster cloud no longer matches the placement's cluster affinity", id="first-term-without-observed",
        ),
        pytest.param(TIERED, {}, None, (), None, id="not-placed"),
    ],
)
def test_placement_broken(
    placement: dict[str, Any],
    previous: dict[str, int],
    affinity_name: str | None,
    names: tuple[str, ...],
    broken: str | None,
) -> None:
    snapshots = {s.name: s for s in fleet() if s.name in names}
    req = request(3, placement, previous=previous, previous_affinity_name=affinity_name)
    assert placement_broken(req, snapshots) == broken


@pytest.mark.parametrize(
    ("req", "moves", "reasons", "cloud", "previous", "clusters"),
    [
        pytest.param(
            request(4, previous={"onprem": 4}), {"onprem": 2}, None, True, {"onprem": 2}, {"onprem": 2, "cloud": 2},
            id="unplaceable-replicas-go-elsewhere",
        ),
        pytest.param(
            request(4, previous={"onprem": 4}), {"onprem": 2}, {"onprem": "report confirms it"}, True,
            {"onprem": 2}, {"onprem": 2, "cloud": 2}, id="reason-given",
        ),
        pytest.param(
            request(4, previous={"onprem": 4}), {"onprem": 9}, None, True, {}, {"cloud": 4},
            id="more-than-it-runs-empties-it",
        ),
        pytest.param(request(4, previous={"onprem": 4}), {"onprem": 2}, None, False, None, None, id="no-room-elsewhere"),
        pytest.param(gang(3, previous={"onprem": 4}), {"onprem": 1}, None, True, {}, {"cloud": 4}, id="gang-moves-whole"),
    ],
)
def test_decide_with_moves(
    req: BindingRequest,
    moves: dict[str, int],
    reasons: dict[str, str] | None,
    cloud: bool,
    previous: dict[str, int] | None,
    clusters: dict[str, int] | None,
) -> None:
    decided = decide_with_moves(req, fleet(cloud=cloud), moves, reasons=reasons, reservations=Reservations(), now=NOW)
    moved = check_decided(decided, previous=previous, clusters=clusters)
    if moved is None:
        return
    why = (reasons or {}).get("onprem") or f"the member reported {moves['onprem']} replica(s) unschedulable: moved elsewhere"
    assert moved.keep_only == {"onprem": why}


@pytest.mark.parametrize(
    ("req", "leaving", "previous", "clusters"),
    [
        pytest.param(request(4, previous={"onprem": 4}), ["elsewhere"], None, None, id="not-running-there"),
        pytest.param(request(4, previous={"onprem": 4}), ["onprem"], {}, {"cloud": 4}, id="evicted-to-room"),
        pytest.param(
            request(4, previous={"onprem": 2, "cloud": 2}), ["cloud"], {"onprem": 2}, {"onprem": 4},
            id="the-others-stay",
        ),
        pytest.param(request(8, previous={"cloud": 8}), ["cloud"], None, None, id="no-room-elsewhere"),
        pytest.param(gang(3, previous={"onprem": 4}), ["onprem"], {}, {"cloud": 4}, id="gang-leaves-whole"),
    ],
)
def test_decide_with_evictions(
    req: BindingRequest, leaving: list[str], previous: dict[str, int] | None, clusters: dict[str, int] | None
) -> None:
    decided = decide_with_evictions(req, fleet(), leaving, reservations=Reservations(), now=NOW)
    check_decided(decided, previous=previous, clusters=clusters)
    assert decided is None or not set(leaving) & set(decided[1].clusters)


@pytest.mark.parametrize(
    ("changed", "same"),
    [
        pytest.param(shape(2, gpus=8, allocatable={"nvidia.com/gpu": 8}), True, id="free-gpus-only"),
        pytest.param(shape(2, gpus=4, labels={"zone": "b"}), False, id="labels"),
        pytest.param(shape(2, gpus=4, taints=[{"key": "k", "effect": "NoSchedule"}]), False, id="taints"),
        pytest.param(shape(2, gpus=4, allocatable={"nvidia.com/gpu": 4}), False, id="allocatable"),
        pytest.param(shape(2, gpus=4, product=H100, allocatable={"nvidia.com/gpu": 8}), False, id="gpu-model"),
        # A gang's pods at once fit by the nodes' number, too.
        pytest.param(shape(3, gpus=8, allocatable={"nvidia.com/gpu": 8}), False, id="more-nodes-alike"),
    ],
)
def test_capacity_facts_change_only_with_what_could_ever_run(changed: dict[str, Any], same: bool) -> None:
    before = cluster("c", shape(2, gpus=4, allocatable={"nvidia.com/gpu": 8}))
    after = cluster("c", changed, report_time="2024-05-01T10:05:00Z")
    assert (capacity_facts(before) == capacity_facts(after)) is same


def test_never_fit_result_keeps_the_explanation_and_says_why() -> None:
    req = request(2)
    placed_nothing = schedule(req, [cluster("onprem", shape(1, gpus=0))], reservations=Reservations(), now=NOW)
    result = never_fit_result(req, placed_nothing, "can never fit: too big")
    assert (result.condition.status, result.condition.reason, result.condition.message) == (
        False, ScheduledReason.NEVER_FITS, "can never fit: too big",
    )
    assert result.clusters == {} and result.placed == 0 and result.unplaced == 2
    assert result.explanation == placed_nothing.explanation
