"""Share fit ties (``tieredOverflow.shareFitTies``): a share of one GPU tied on tier, price and cost
between members that pack by themselves goes to the cluster of the tightest node that holds it, while
shares are most of the recent demand; on a small hand-computed fleet of 2-GPU nodes."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.fragmentation import TaskShape
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.snapshot import ClusterSnapshot

from .builders import cluster
from .test_packhints_demand import EIGHT, HALF, cache_after
from .test_sharehints import node, share_request
from .test_tiebreak import NOW, reasons


def fleet(node_scoring: str = "MostAllocated") -> list[ClusterSnapshot]:
    """``a``: one empty node (2 free GPUs). ``b``: a node with one whole GPU and a remainder of 500
    thousandths, and an empty node (3.5 free GPUs). For a share of 500 under a demand of such shares
    the fragmentation growth is 0 in both (an empty node keeps (1000, 500), the remainder goes to
    (1000, 0): no free thousandth a share of 500 cannot use), so the tie goes past cost."""
    return [
        cluster("a", node(1, 2000), node_scoring=node_scoring),
        cluster("b", node(1, 1500), node(1, 2000), node_scoring=node_scoring),
    ]


def test_the_share_goes_to_the_cluster_whose_node_it_fills() -> None:
    """Shares are all of the recent demand (the decided one). The tightest node holding the share keeps
    1500 thousandths in ``a`` (an empty node) and 1000 in ``b`` (the remainder filled): ``b``, though ``a``
    has fewer free GPUs (2 against 3.5)."""
    result = schedule(share_request(), fleet(), now=NOW, cache=SchedulerCache())
    assert result.clusters == {"b": 1}
    assert (
        "first of 2 clusters tied on tier and price, decided by tightest node for the share (fragmentation "
        "+0.00 GPUs, scarcity 0.00 GPUs, 1000 thousandths left on its tightest node, 3.5 free GPUs)"
    ) in reasons(result, "b")
    assert "1500 thousandths left on its tightest node, 2 free GPUs" in " ".join(reasons(result, "a"))


@pytest.mark.parametrize(
    ("node_scoring", "earlier", "milli", "tiered_overflow"),
    [
        pytest.param("MostAllocated", (), 500, {"shareFitTies": False}, id="switched-off"),
        pytest.param("LeastAllocated", (), 500, {}, id="spreading-members"),
        pytest.param("FragmentationAware", (), 500, {}, id="fgd-members"),
        # 8000 + 500 + 500 thousandths: the shares ask for 11 % of the recent GPUs (an 8-GPU replica fits
        # no node here, so its part of the growth is -500 in both clusters: the cost still ties).
        pytest.param("MostAllocated", (EIGHT, HALF), 500, {}, id="shares-under-half-the-demand"),
        pytest.param("MostAllocated", (), 1000, {}, id="a-whole-gpu-replica"),
    ],
)
def test_fewest_free_gpus_decide_otherwise(
    node_scoring: str, earlier: tuple[TaskShape, ...], milli: int, tiered_overflow: dict[str, Any]
) -> None:
    result = schedule(
        share_request(milli, **tiered_overflow), fleet(node_scoring), now=NOW, cache=cache_after(*earlier)
    )
    assert result.clusters == {"a": 1}
    assert not any("tightest node" in r for r in reasons(result, "a"))


def test_at_half_the_recent_gpus_the_tie_goes_by_the_tightest_node() -> None:
    """An earlier 8-GPU arrival (8000 thousandths; it fits no node, so the cost still ties) and 16 shares of
    500 (15 earlier, the decided one): 50 %."""
    result = schedule(share_request(), fleet(), now=NOW, cache=cache_after(EIGHT, *(HALF,) * 15))
    assert result.clusters == {"b": 1}
