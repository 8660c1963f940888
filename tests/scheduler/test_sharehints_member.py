"""Share remainder hints: both sides of the FGD check keep to the nodes the replica may go to (its node
selector and tolerations against the nodes' labels and taints), each node's growth is the one the ties
of tier and price remember, and ``gpufed explain`` words a share's hint as its own. On small
hand-computed fleets of 2-GPU nodes and the mix of 3/4 1-GPU replicas and 1/4 shares of 500
(tests/scheduler/test_sharehints.py): the share grows the mix's fragmentation by -350 thousandths on a
node of (1000, 600) free, -300 on (1000, 800) and +375 on an empty node (1000, 1000)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.apis.constants import ANNOTATION_PACKING_HINTS
from controlplane.apis.fragmentation import TaskShape
from controlplane.apis.pods import FrozenToleration
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.clusterfit import node_row, row_growth
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.sharehints import ShareHint, share_hint, tightest_remainder
from controlplane.scheduler.core.tiebreak import growth_memo
from gpufed.commands.explain import render_explanation

from .builders import cluster
from .test_packhints_demand import EIGHT, cache_after
from .test_sharehints import SHARE, WHOLE_GPU_DEMAND, fleet, node, share_request
from .test_tiebreak import CPU, NOW, reasons

TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
TOLERATES = {"tolerations": [FrozenToleration(key="dedicated", operator="Equal", value="inference")]}
IN_POOL_A = {"node_selector": {"pool": "a"}}
TASK = TaskShape(CPU, SHARE, 1)


def decide(*shapes: dict[str, Any], constraints: dict[str, Any] | None = None) -> Any:
    return schedule(
        share_request(constraints=constraints),
        [cluster("c", *shapes, node_scoring="LeastAllocated")],
        now=NOW,
        cache=cache_after(*WHOLE_GPU_DEMAND),
    )


def spread_words(growth: str, spread: str) -> str:
    return f"grows by at least {growth} GPUs there against {spread} on the nodes the member's node scoring"


# ------------------------------------------------------------------------ the member's pick


def test_a_tainted_empty_node_the_replica_does_not_tolerate_is_not_the_members_pick() -> None:
    """``tight`` (1000, 600) and two empty nodes tainted ``dedicated=inference:NoSchedule``. The
    replica that does not tolerate the taint can only go to ``tight``: the member puts it there by
    itself, both sides grow by -350, no hint. The replica that tolerates it is put by the member on an
    empty node (+375): the hint toward ``tight`` pays."""
    shapes = (node(1, 1600, "tight"), node(2, 2000, taints=[TAINT]))
    untolerated = decide(*shapes)
    assert untolerated.clusters == {"c": 1}
    assert untolerated.packing == {}
    tolerated = decide(*shapes, constraints=TOLERATES)
    assert tolerated.packing == {"c": ("tight",)}
    assert any(spread_words("-0.35", "0.38") in reason for reason in reasons(tolerated, "c"))


def test_the_member_picks_among_the_nodes_the_replica_tolerates() -> None:
    """With ``loose`` (1000, 800) untainted too, the member's LeastAllocated pick among the nodes the
    replica tolerates is ``loose`` (65 of 100 free thousandths after the share against 55 on ``tight``):
    -300, not the tainted empty nodes' +375; ``tight`` (-350) still grows less, so the hint is given,
    with the member's side at -0.30."""
    result = decide(node(1, 1600, "tight"), node(1, 1800, "loose"), node(2, 2000, taints=[TAINT]))
    assert result.packing == {"c": ("tight",)}
    assert any(spread_words("-0.35", "-0.30") in reason for reason in reasons(result, "c"))


def test_the_tightest_remainder_names_only_nodes_the_replica_tolerates() -> None:
    """``tight`` tainted, ``loose`` and two empty nodes not: the replica that does not tolerate the
    taint is packed toward ``loose`` (-300 against the empty node's +375); the one that does, toward
    ``tight``."""
    shapes = (node(1, 1600, "tight", taints=[TAINT]), node(1, 1800, "loose"), node(2, 2000))
    assert decide(*shapes).packing == {"c": ("loose",)}
    assert decide(*shapes, constraints=TOLERATES).packing == {"c": ("tight",)}


def test_a_node_selector_restricts_both_sides() -> None:
    """``tight`` and the empty nodes in pool b, ``loose`` in pool a. Without a selector the share is
    packed toward ``tight``. A replica selecting pool a: the tightest remainder it may take is
    ``loose``'s, and the only node the member may put it on is ``loose`` too: no hint. With an empty
    node in pool a, the member puts it there (+375), and the hint toward ``loose`` (-300) pays."""
    pool_a, pool_b = {"labels": {"pool": "a"}}, {"labels": {"pool": "b"}}
    shapes = (node(1, 1600, "tight", **pool_b), node(1, 1800, "loose", **pool_a), node(2, 2000, **pool_b))
    assert decide(*shapes).packing == {"c": ("tight",)}
    selected = decide(*shapes, constraints=IN_POOL_A)
    assert selected.clusters == {"c": 1}
    assert selected.packing == {}
    requirements = share_request(constraints=IN_POOL_A).requirements
    remainder, tightest = tightest_remainder(cluster("c", *shapes), requirements, TASK)
    assert (remainder, [s.hostnames for s in tightest]) == (800, [("loose",)])
    with_room = decide(*shapes, node(1, 2000, **pool_a), constraints=IN_POOL_A)
    assert with_room.packing == {"c": ("loose",)}
    assert any(spread_words("-0.30", "0.38") in reason for reason in reasons(with_room, "c"))


# ------------------------------------------------------------------------ the memo


def test_the_hint_reads_the_ties_growth_memo_and_answers_as_recomputed() -> None:
    """Each node's growth is the ties' (``SchedulerCache.growths``, per mix version and task): the
    memo's entries are what :func:`row_growth` computes, a warm cache answers as a cold one, a growth
    the memo already holds is read, not computed again, and the hint is remembered per snapshot, mix
    version and requirements (another replica's requirements on the same snapshot answer for it)."""
    (snapshot,) = fleet()
    requirements = share_request().requirements
    cache = cache_after(*WHOLE_GPU_DEMAND, TASK)  # with the share, as a decision of it records it
    cold = SchedulerCache(demand=cache.demand.copy())
    hint = share_hint(snapshot, requirements, TASK, cache)
    assert hint == ShareHint(("tight",), SHARE, 600, pytest.approx(-350.0), pytest.approx(375.0))
    mix = cache.demand.mix()
    memo = growth_memo(cache, TASK)
    tight = next(node_row(s) for s in snapshot.shapes if s.hostnames == ("tight",))
    empty = next(node_row(s) for s in snapshot.shapes if s.count == 2)
    assert {tight, empty} <= memo.keys()
    assert all(memo[row] == row_growth(row, TASK, mix) for row in memo)
    assert share_hint(snapshot, requirements, TASK, cache) is hint
    assert share_hint(snapshot, requirements, TASK, cold) == hint

    planted = SchedulerCache(demand=cache.demand.copy())
    planted.demand.mix()
    growth_memo(planted, TASK)[tight] = -900.0
    assert share_hint(snapshot, requirements, TASK, planted) == hint._replace(growth=-900.0)

    selected = share_request(constraints=IN_POOL_A).requirements
    assert share_hint(snapshot, selected, TASK, cache) is None  # no node of pool a: nothing holds it


# ------------------------------------------------------------------------ gpufed explain


def explained(packing: dict[str, tuple[str, ...]], cluster_reasons: tuple[str, ...]) -> str:
    """``gpufed explain``'s text for a binding of the decision's packing hints and reasons, as the
    scheduler writes them (the annotation, ``status.explanation``)."""
    workload = {"kind": "Deployment", "metadata": {"name": "share", "namespace": "ns"}}
    binding = {
        "metadata": {
            "annotations": {ANNOTATION_PACKING_HINTS: json.dumps({k: list(v) for k, v in packing.items()})}
        },
        "spec": {"policy": {"kind": "PropagationPolicy", "namespace": "ns", "name": "p"}, "replicas": 1},
        "status": {
            "explanation": [{"cluster": "c", "chosen": True, "replicas": 1, "reasons": list(cluster_reasons)}]
        },
    }
    return render_explanation(workload, binding)


def test_explain_words_a_shares_hint_as_its_own() -> None:
    """A share's hint: the nodes of the tightest remainder, the share filling a GPU already shared.
    The same share under the multi-GPU packing hints (four 8-GPU arrivals open them): whole nodes kept
    free."""
    shared = schedule(share_request(), fleet(), now=NOW, cache=cache_after(*WHOLE_GPU_DEMAND))
    text = explained(shared.packing, reasons(shared, "c"))
    assert (
        "Packing:     in c, 1 node(s) whose shared GPUs have the tightest free remainder that holds the share "
        "preferred: tight (a preferred node-affinity term in the Work, so the share fills a GPU already shared "
        "instead of breaking a whole one)"
    ) in text
    assert "whole nodes stay free" not in text
    packed = schedule(share_request(), fleet(), now=NOW, cache=cache_after(*(EIGHT,) * 4, *WHOLE_GPU_DEMAND))
    text = explained(packed.packing, reasons(packed, "c"))
    assert (
        "Packing:     in c, 3 node(s) already running GPU work preferred: loose, sliver, tight (a preferred "
        "node-affinity term in the Work, so whole nodes stay free)"
    ) in text
    assert "tightest free remainder" not in text.split("CLUSTER")[0]
