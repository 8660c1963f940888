"""Share remainder hints (``tieredOverflow.shareRemainderHints``): a share of one GPU in thousandths, in a spreading
member, packed toward the tightest remainder of a shared GPU that holds it, where FGD says it pays;
on small hand-computed fleets of 2-GPU nodes."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.fragmentation import TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.packhints import MAX_HINTED
from controlplane.scheduler.core.sharehints import tightest_remainder

from .builders import cluster, shape
from .test_packhints import HOSTNAME
from .test_packhints_demand import EIGHT, ONE, cache_after
from .test_tiebreak import CPU, NOW, reasons, tiered

SHARE = 500


def node(
    count: int, free_milli: int, *hostnames: str, cpu: int = 64_000, **labels_and_taints: Any
) -> dict[str, Any]:
    """``count`` nodes of 2 GPUs with ``free_milli`` thousandths free; a GPU hosting shares is no
    longer counted in the allocatable ``nvidia.com/gpu`` (as the agent reports it); ``labels``,
    ``taints`` as :func:`~tests.scheduler.builders.shape`'s."""
    whole = free_milli // 1000
    shared = 2 - whole if free_milli % 1000 else 0
    out = shape(
        count,
        gpus=whole,
        cpu=cpu,
        extra={"nvidia.com/gpu-milli": free_milli},
        allocatable={"nvidia.com/gpu": 2 - shared, "nvidia.com/gpu-milli": 2000},
        **labels_and_taints,
    )
    out["gpu"]["count"] = 2
    if hostnames:
        out["hostnames"] = list(hostnames)
    return out


def fleet(node_scoring: str | None = "LeastAllocated") -> list[Any]:
    """One cluster: ``tight`` (one whole GPU and a remainder of 600 thousandths), ``loose`` (a remainder
    of 800), ``sliver`` (a remainder of 400: too small for the share) and two empty nodes."""
    return [
        cluster(
            "c",
            node(1, 1600, "tight"),
            node(1, 1800, "loose"),
            node(1, 1400, "sliver"),
            node(2, 2000),
            node_scoring=node_scoring,
        )
    ]


def share_request(
    milli: int = SHARE, *, constraints: dict[str, Any] | None = None, **tiered_overflow: Any
) -> BindingRequest:
    """One replica of ``milli`` thousandths of a GPU (a whole GPU from 1000); ``constraints``: its
    ``node_selector``, ``tolerations`` (as ``ReplicaRequirements.build`` takes them)."""
    resources = (
        {"nvidia.com/gpu-milli": milli, "cpu": CPU} if milli < 1000 else {"nvidia.com/gpu": 1, "cpu": CPU}
    )
    return BindingRequest(
        key="ns/share",
        replicas=1,
        requirements=ReplicaRequirements.build(resources, **(constraints or {})),
        placement=tiered(**tiered_overflow),
        previous={},
    )


#: Recent demand mostly of whole GPUs: with the decided share, 3/4 1-GPU replicas and 1/4 shares of 500.
WHOLE_GPU_DEMAND = (ONE, ONE, ONE)


def test_the_share_goes_to_the_tightest_remainder_that_holds_it() -> None:
    """The mix (3/4 1-GPU, 1/4 shares of 500) on ``tight`` (1000, 600): before, 600 x 3/4 = 450 are
    lost to 1-GPU replicas; after (1000, 100), 100 x 3/4 + 100 x 1/4 = 100: growth -350. On an empty
    node (the member's least-allocated pick, most free thousandths): before 0, after (1000, 500)
    500 x 3/4 = 375: growth +375. The share is packed toward ``tight``, not ``loose`` nor ``sliver``."""
    result = schedule(share_request(), fleet(), now=NOW, cache=cache_after(*WHOLE_GPU_DEMAND))
    assert result.clusters == {"c": 1}
    assert result.packing == {"c": ("tight",)}
    assert (
        "share of 500/1000 of a GPU packed inside the cluster toward 1 node(s) whose shared GPUs have the "
        "tightest free remainder that holds it (600 thousandths; tight; preferred node affinity, weight 1): "
        "the recent demand's GPU fragmentation grows by at least -0.35 GPUs there against 0.38 on the nodes the "
        "member's node scoring LeastAllocated would pick, which spreads replicas over empty nodes (shareRemainderHints; "
        "packing hints wait for multi-GPU demand)"
    ) in reasons(result, "c")


def test_the_share_is_hinted_without_steering_too() -> None:
    """The clusters a decision hints are worked out for steering or hints; with steering off, the share
    alone asks for them."""
    result = schedule(
        share_request(scarcitySteering=False), fleet(), now=NOW, cache=cache_after(*WHOLE_GPU_DEMAND)
    )
    assert result.packing == {"c": ("tight",)}


def test_no_hint_where_fgd_prefers_the_node_the_member_picks() -> None:
    """Recent demand of shares of 500 only (the decided one): on ``tight`` the share leaves a sliver
    of 100 no share of the mix uses (growth +100); on an empty node (1000, 500) both GPUs still hold
    one (growth 0). The member's own pick is better: no hint."""
    result = schedule(share_request(), fleet(), now=NOW, cache=SchedulerCache())
    assert result.clusters == {"c": 1}
    assert result.packing == {}
    assert not any("packed" in r for r in reasons(result, "c"))


def test_while_multi_gpu_demand_opens_the_packing_hints_the_share_gets_those_instead() -> None:
    """Four 8-GPU arrivals open the shipped packing hints: every named node that holds the share (on a
    whole free GPU too: ``sliver``), the fewest free thousandths first, and their words."""
    result = schedule(share_request(), fleet(), now=NOW, cache=cache_after(*(EIGHT,) * 4, *WHOLE_GPU_DEMAND))
    assert result.packing == {"c": ("loose", "sliver", "tight")}
    words = [r for r in reasons(result, "c") if "packed" in r]
    assert len(words) == 1
    assert words[0].startswith("packed inside the cluster toward 3 node(s) already running GPU work")


@pytest.mark.parametrize(
    ("node_scoring", "milli", "tiered_overflow"),
    [
        pytest.param("MostAllocated", SHARE, {}, id="a-member-that-packs-itself"),
        pytest.param(None, SHARE, {}, id="a-member-not-reporting-its-scoring"),
        pytest.param("LeastAllocated", 1000, {}, id="a-whole-gpu-replica"),
        pytest.param("LeastAllocated", SHARE, {"shareRemainderHints": False}, id="switched-off"),
        pytest.param("LeastAllocated", SHARE, {"packingHints": False}, id="packing-hints-switched-off"),
    ],
)
def test_no_share_hint_unless_a_spreading_member_a_share_and_asked_for(
    node_scoring: str | None, milli: int, tiered_overflow: dict[str, Any]
) -> None:
    result = schedule(
        share_request(milli, **tiered_overflow),
        fleet(node_scoring),
        now=NOW,
        cache=cache_after(*WHOLE_GPU_DEMAND),
    )
    assert result.clusters == {"c": 1}
    assert result.packing == {}


def test_shapes_of_one_tightest_remainder_are_named_together_at_most_32() -> None:
    """Two shapes with a remainder of 600 (one short of CPU for the replica of 1 core), one of 700,
    one of 400; 40 nodes of the 600 one with room named. Only the 600 ones that hold the replica,
    sorted, at most 32; a replica that names its nodes gets none, nor does a whole GPU (no remainder
    of a shared GPU holds it)."""
    many = [f"n-{i:02}" for i in range(40)]
    fleet_of = cluster(
        "c",
        node(1, 1700, "seven"),
        node(40, 1600, *many),
        node(1, 1600, "no-cpu", cpu=500),
        node(1, 1400, "four"),
    )
    requirements = share_request().requirements
    task = TaskShape(CPU, SHARE, 1)
    remainder, shapes = tightest_remainder(fleet_of, requirements, task)
    assert remainder == 600
    assert [s.hostnames for s in shapes] == [tuple(many)]
    assert len(many[:MAX_HINTED]) == 32
    pinned = ReplicaRequirements.build(
        {"nvidia.com/gpu-milli": SHARE, "cpu": CPU}, node_selector={HOSTNAME: "n-01"}
    )
    assert tightest_remainder(fleet_of, pinned, task) == (0, ())
    whole = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": CPU})
    assert tightest_remainder(fleet_of, whole, TaskShape(CPU, 1000, 1)) == (0, ())


def test_the_hint_names_at_most_32_nodes() -> None:
    """40 nodes with the tightest remainder, the member's pick an empty node: 32 names."""
    many = [f"n-{i:02}" for i in range(40)]
    result = schedule(
        share_request(),
        [cluster("c", node(40, 1600, *many), node(2, 2000), node_scoring="LeastAllocated")],
        now=NOW,
        cache=cache_after(*WHOLE_GPU_DEMAND),
    )
    assert result.packing == {"c": tuple(many[:MAX_HINTED])}
