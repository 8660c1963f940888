"""Waste states of single devices, table-driven, for every rule and edge of DESIGN.md's table."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pytest

from controlplane.reports.classify import DeviceState, WasteState, classify, classify_fleet
from controlplane.reports.fleet import DeviceSample, FleetSample, PendingDemand, PendingReason

from .builders import A100, GPU, H100, cluster, demand, fleet, gpu, gpus, mig, node, pod

BUSY = WasteState.BUSY
IDLE = WasteState.IDLE_ALLOCATED
NEEDED = WasteState.FREE_NEEDED
FRAGMENTED = WasteState.FREE_FRAGMENTED
SPARE = WasteState.FREE_SPARE
UNAVAILABLE = WasteState.UNAVAILABLE


def states_of(sample: FleetSample, **kwargs: bool) -> list[WasteState]:
    return [s.state for s in classify(sample, **kwargs)]


def one_gpu_fleet(
    *, utilization: float | None, allocated: bool = True, **cluster_kwargs: bool
) -> FleetSample:
    holder = pod("p") if allocated else None
    return fleet(cluster("a", [node("n1", [gpu(0, holder, utilization)])]))


@pytest.mark.parametrize(
    ("utilization", "expected"),
    [
        (0.50, BUSY),
        (0.10, BUSY),  # at the threshold counts as busy
        (0.0999, IDLE),
        (0.03, IDLE),  # a replica at 3 % utilization
        (0.0, IDLE),
        (None, WasteState.UNMEASURED),  # no utilization measured: neither busy nor idle
    ],
)
def test_allocated_devices_are_busy_or_idle_by_threshold(
    utilization: float | None, expected: WasteState
) -> None:
    assert states_of(one_gpu_fleet(utilization=utilization)) == [expected]


def test_threshold_is_configurable() -> None:
    sample = one_gpu_fleet(utilization=0.3)
    assert [s.state for s in classify(sample, threshold=0.5)] == [IDLE]
    assert [s.state for s in classify(sample, threshold=0.3)] == [BUSY]


@pytest.mark.parametrize(
    ("cluster_ready", "node_ready", "allocated"),
    [(False, True, True), (False, True, False), (True, False, True), (True, False, False)],
)
def test_not_ready_cluster_or_node_is_unavailable_first(
    cluster_ready: bool, node_ready: bool, allocated: bool
) -> None:
    holder = pod("p") if allocated else None
    sample = fleet(
        cluster("a", [node("n1", [gpu(0, holder, 0.9)], ready=node_ready)], ready=cluster_ready),
        pending=[demand({GPU: 1})],
    )
    [state] = classify(sample)
    assert state.state == UNAVAILABLE
    assert state.workload == ("Deployment/p" if allocated else None)


@pytest.mark.parametrize(("cluster_schedulable", "node_schedulable"), [(False, True), (True, False)])
def test_free_devices_of_cordoned_nodes_and_clusters_are_unavailable(
    cluster_schedulable: bool, node_schedulable: bool
) -> None:
    sample = fleet(
        cluster(
            "a",
            [node("n1", [gpu(0, pod("p"), 0.9), gpu(1)], schedulable=node_schedulable)],
            schedulable=cluster_schedulable,
        ),
        pending=[demand({GPU: 1})],
    )
    assert states_of(sample) == [BUSY, UNAVAILABLE]


# Each case: the fleet's free devices, the pending demand, and the expected state per device
# (in cluster, node, device order). Cluster "a" holds the devices; "b" is another cluster.
FREE_CASES = [
    pytest.param([gpu(0)], [], [SPARE], id="nothing-pending-is-spare"),
    pytest.param([gpu(0)], [demand({GPU: 1})], [NEEDED], id="matching-whole-gpu-request-is-needed"),
    pytest.param(
        [gpu(0)],
        [demand({"cpu": 1000, "memory": 2**30})],
        [SPARE],
        id="pending-without-gpu-request-is-ignored",
    ),
    pytest.param([gpu(0)], [demand({GPU: 1}, replicas=0)], [SPARE], id="zero-replicas-is-not-demand"),
    pytest.param(
        [mig(0, "1g.10gb")],
        [demand({"nvidia.com/mig-3g.40gb": 1})],
        [FRAGMENTED],
        id="free-1g-slice-while-only-3g-requests-wait-is-fragmented",
    ),
    pytest.param(
        [mig(0, "3g.40gb")],
        [demand({"nvidia.com/mig-3g.40gb": 1})],
        [NEEDED],
        id="same-mig-profile-is-needed",
    ),
    pytest.param(
        [gpu(0)],
        [demand({"nvidia.com/mig-3g.40gb": 1})],
        [FRAGMENTED],
        id="whole-gpu-while-mig-requests-wait",
    ),
    pytest.param(
        [mig(0, "3g.40gb")], [demand({GPU: 1})], [FRAGMENTED], id="mig-slice-while-whole-gpu-requests-wait"
    ),
    pytest.param([gpu(0)], [demand({GPU: 4})], [FRAGMENTED], id="too-few-gpus-on-the-node-for-one-replica"),
    pytest.param(list(gpus(4)), [demand({GPU: 4})], [NEEDED] * 4, id="four-free-gpus-fit-a-4-gpu-replica"),
    pytest.param(
        list(gpus(6)),
        [demand({GPU: 4}, replicas=2)],
        [NEEDED] * 4 + [FRAGMENTED] * 2,
        id="second-4-gpu-replica-cannot-use-the-2-left",
    ),
    pytest.param(
        list(gpus(3)),
        [demand({GPU: 1})],
        [NEEDED, SPARE, SPARE],
        id="only-as-many-needed-as-pending-replicas-use",
    ),
    pytest.param([gpu(0)], [demand({GPU: 1}, products=[H100])], [SPARE], id="wrong-product-is-spare"),
    pytest.param([gpu(0)], [demand({GPU: 1}, products=[A100])], [NEEDED], id="right-product-is-needed"),
    pytest.param(
        [gpu(0)], [demand({GPU: 1}, clusters=["b"])], [SPARE], id="demand-for-another-cluster-is-spare"
    ),
    pytest.param(
        [gpu(0)],
        [demand({GPU: 1}, excluded_clusters=["a"])],
        [SPARE],
        id="member-unschedulable-demand-excludes-its-member",
    ),
    pytest.param(
        [mig(0, "1g.10gb"), mig(0, "3g.40gb", instance=1)],
        [demand({"nvidia.com/mig-3g.40gb": 1})],
        [SPARE, NEEDED],
        id="demand-fully-matched-strands-nothing",
    ),
    pytest.param(
        [mig(0, "1g.10gb"), mig(0, "3g.40gb", instance=1)],
        [demand({"nvidia.com/mig-3g.40gb": 1}, replicas=2)],
        [FRAGMENTED, NEEDED],
        id="unmet-demand-strands-the-wrong-profile",
    ),
]


@pytest.mark.parametrize(("devices", "pending", "expected"), FREE_CASES)
def test_free_device_states(
    devices: list[DeviceSample], pending: list[PendingDemand], expected: list[WasteState]
) -> None:
    sample = fleet(cluster("a", [node("n1", devices)]), cluster("b", []), pending=pending)
    assert states_of(sample) == expected


def test_free_h100_while_an_h100_workload_waits_in_another_cluster_is_needed() -> None:
    sample = fleet(
        cluster("onprem", [node("h1", gpus(1), product=H100)]),
        cluster("cloud", [node("c1", [gpu(0, pod("other"), 0.9)], product=H100)]),
        # pods the cloud member could not schedule: they may run anywhere but there
        pending=[demand({GPU: 1}, products=[H100], excluded_clusters=["cloud"], workload="Deployment/infer")],
    )
    [free, busy] = classify(sample)
    assert (free.cluster, free.state, free.demand) == ("onprem", NEEDED, ("ml", "Deployment/infer"))
    assert busy.state == BUSY


def test_literal_mode_marks_every_fitting_device_needed() -> None:
    sample = fleet(cluster("a", [node("n1", gpus(3)), node("n2", gpus(1))]), pending=[demand({GPU: 2})])
    assert states_of(sample, cap_needed_by_demand=False) == [NEEDED, NEEDED, NEEDED, FRAGMENTED]
    # matched: the one replica takes two GPUs of n1; with nothing left waiting, the rest is spare
    assert states_of(sample) == [NEEDED, NEEDED, SPARE, SPARE]


def test_matching_prefers_lower_tier_then_cheaper_clusters() -> None:
    sample = fleet(
        cluster("cloud", [node("c1", gpus(1))], pricing={A100: 4.0}, provider="aws", tier=1),
        cluster("onprem-dear", [node("d1", gpus(1))], pricing={A100: 2.0}),
        cluster("onprem-cheap", [node("o1", gpus(1))], pricing={A100: 1.0}),
        pending=[demand({GPU: 1}, replicas=2)],
    )
    by_cluster = {s.cluster: s.state for s in classify(sample)}
    assert by_cluster == {"cloud": SPARE, "onprem-dear": NEEDED, "onprem-cheap": NEEDED}


def test_unmet_demand_is_reported() -> None:
    sample = fleet(cluster("a", [node("n1", gpus(1))]), pending=[demand({GPU: 1}, replicas=3)])
    result = classify_fleet(sample)
    assert [(u.demand.workload, u.replicas) for u in result.unmet] == [("Deployment/wait", 2)]


def test_unpartitioned_mig_remainder_is_stranded_when_mig_work_waits() -> None:
    from controlplane.reports.fleet import UNPARTITIONED, DeviceSample

    remainder = DeviceSample("0", "MIG-0-r", UNPARTITIONED, 4 / 7)
    sample = fleet(
        cluster("a", [node("n1", [mig(0, "3g.40gb", holder=pod("p"), utilization=0.5), remainder])]),
        pending=[demand({"nvidia.com/mig-2g.20gb": 1})],
    )
    assert states_of(sample) == [BUSY, FRAGMENTED]
    assert states_of(fleet(*sample.clusters)) == [BUSY, SPARE]


def test_each_gpu_shares_add_up_to_one_gpu() -> None:
    """An H100 "all-balanced" layout plus a whole GPU: every physical GPU's states sum to 1."""
    layout = [
        mig(0, "1g.10gb", instance=0, holder=pod("a"), utilization=0.5),
        mig(0, "1g.10gb", instance=1),
        mig(0, "2g.20gb", instance=2, holder=pod("b"), utilization=0.01),
        mig(0, "3g.40gb", instance=3),
        gpu(1, pod("c"), 0.9),
    ]
    sample = fleet(cluster("a", [node("n1", layout)]), pending=[demand({"nvidia.com/mig-3g.40gb": 1})])
    per_gpu: dict[str, float] = defaultdict(float)
    states: list[DeviceState] = classify(sample)
    for state in states:
        per_gpu[state.gpu] += state.share
    assert per_gpu == {"0": pytest.approx(1.0), "1": pytest.approx(1.0)}
    assert [(s.profile, round(s.share * 7), s.state) for s in states] == [
        ("1g.10gb", 1, BUSY),
        ("1g.10gb", 1, SPARE),  # the 3g request is matched, so the free 1g is not stranded
        ("2g.20gb", 2, IDLE),
        ("3g.40gb", 3, NEEDED),
        (None, 7, BUSY),
    ]


def test_prices_are_per_model_and_cluster() -> None:
    sample = fleet(
        cluster(
            "a",
            [node("n1", gpus(1), product=A100), node("n2", gpus(1), product=H100)],
            pricing={A100: 1.5, H100: 4.1},
        ),
    )
    assert [(s.product, s.price_per_gpu_hour, s.cost_per_hour) for s in classify(sample)] == [
        (A100, 1.5, 1.5),
        (H100, 4.1, 4.1),
    ]


def never(requests: dict[str, int], *, replicas: int = 2) -> PendingDemand:
    return replace(demand(requests, replicas=replicas, workload="Deployment/huge"), reason=PendingReason.NEVER_FITS,
                   message="can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 8")


@pytest.mark.parametrize(
    ("pending", "expected"),
    [
        # 64 GPUs per pod on 8-GPU nodes: not fragmentation, the free GPUs stay spare.
        pytest.param([never({GPU: 64})], [SPARE] * 8, id="never-fit-alone"),
        # The same request still marked Unplaced (before the scheduler's verdict) strands them all.
        pytest.param([demand({GPU: 64}, replicas=2)], [FRAGMENTED] * 8, id="unplaced-strands"),
        # Other waiting work is matched as usual; the never-fitting request adds nothing.
        pytest.param([never({GPU: 64}), demand({GPU: 2})], [NEEDED] * 2 + [SPARE] * 6, id="next-to-real-demand"),
        pytest.param([never({"nvidia.com/gpu.shared": 1})], [SPARE] * 8, id="time-sliced-share"),
    ],
)
def test_a_request_that_can_never_fit_is_not_fragmentation(
    pending: list[PendingDemand], expected: list[WasteState]
) -> None:
    sample = fleet(cluster("a", [node("n1", gpus(8))]), pending=pending)
    classification = classify_fleet(sample)
    assert sorted((s.state for s in classification.states), key=list(WasteState).index) == expected
    assert [d.workload for d in classification.never_fit] == [d.workload for d in pending if d.reason == PendingReason.NEVER_FITS]
