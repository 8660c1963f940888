"""kube's NodeAffinity (preferred terms) and TaintToleration (PreferNoSchedule) scores in the
simulated member, on small hand-computed node sets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from controlplane.apis.constants import LABEL_GPU_PRODUCT
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.model import Scoring
from simulator.scheduling.preferences import normalized
from simulator.scheduling.reading import pod_request

T4 = "Tesla-T4"
V100 = "Tesla-V100-SXM2-16GB"


def _node(name: str, *, cpu: int, gpus: int, product: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {LABEL_GPU_PRODUCT: product, "pool": name}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": str(cpu), "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _state(*nodes: dict[str, Any], scoring: Scoring) -> ClusterState:
    state = ClusterState(scoring=scoring, seed=3)
    for node in nodes:
        state.add_node(node)
    return state


def _pod(name: str, *, gpus: int = 1, cpu: str = "4", **spec: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu, "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "resources": resources}], **spec},
    }


def _preferring(*terms: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    entries = [{"weight": weight, "preference": {"matchExpressions": exprs}} for weight, exprs in terms]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": entries}}


NOT_T4 = [{"key": LABEL_GPU_PRODUCT, "operator": "NotIn", "values": [T4]}]


@pytest.mark.parametrize(
    ("raw", "reverse", "expected"),
    [
        ([0, 3, 5], False, [0, 60, 100]),
        ([1, 2, 3], False, [33, 66, 100]),
        ([0, 0], False, [0, 0]),
        ([0, 1, 2], True, [100, 50, 0]),
        ([1, 3], True, [67, 0]),
        ([0, 0], True, [100, 100]),
    ],
)
def test_normalized_is_kubes_default_normalize_score(raw: list[int], reverse: bool, expected: list[int]) -> None:
    assert normalized(np.array(raw, dtype=np.int64), reverse=reverse).tolist() == expected


@pytest.mark.parametrize("scoring", [Scoring.BEST_FIT, Scoring.FGD, Scoring.MOST_ALLOCATED])
def test_preferred_term_beats_the_members_resource_score(scoring: Scoring) -> None:
    # A pod of 1 GPU: best-fit (and most-allocated, and FGD) put it on the small T4 node, which it
    # leaves fuller; a preferred term against T4 (NodeAffinity weight 2 x 100) outweighs the
    # resource score (weight 1, at most 100), so it lands on the V100 node.
    nodes = (_node("t4", cpu=16, gpus=1, product=T4), _node("v100", cpu=96, gpus=8, product=V100))
    plain = _state(*nodes, scoring=scoring)
    assert plain.schedule([pod_request(_pod("p"))]).bindings[0].node == "t4"
    steered = _state(*nodes, scoring=scoring)
    pod = pod_request(_pod("p", affinity=_preferring((1, NOT_T4))))
    assert steered.schedule([pod]).bindings[0].node == "v100"


def test_preferred_scores_are_weighted_sums_normalised_over_the_feasible_nodes() -> None:
    # Identical nodes, so least-allocated scores them alike; the terms' weights (3 on a, 1 on b,
    # both on c) give raw 3, 1, 4 -> 75, 25, 100 -> x2 = 150, 50, 200 on top, and TaintToleration
    # 100 x 3 on every node (no node has a PreferNoSchedule taint).
    nodes = [_node(n, cpu=32, gpus=4, product=V100) for n in ("a", "b", "c")]
    state = _state(*nodes, scoring=Scoring.LEAST_ALLOCATED)
    pool_in = lambda *v: [{"key": "pool", "operator": "In", "values": list(v)}]  # noqa: E731
    pod = pod_request(_pod("p", affinity=_preferring((3, pool_in("a", "c")), (1, pool_in("b", "c")), (0, pool_in("a")))))
    plain = pod_request(_pod("q"))
    order = [state.nodes[n] for n in ("a", "b", "c")]
    base = state.score_nodes(plain, order)
    assert [s - b for s, b in zip(state.score_nodes(pod, order), base, strict=True)] == [450, 350, 500]
    # Normalised over the nodes scored: without c, a's 3 is the top.
    assert [s - b for s, b in zip(state.score_nodes(pod, order[:2]), base[:2], strict=True)] == [500, 366]
    assert state.schedule([pod]).bindings[0].node == "c"


def test_an_empty_preferred_term_matches_no_node() -> None:
    nodes = [_node(n, cpu=32, gpus=4, product=V100) for n in ("a", "b")]
    state = _state(*nodes, scoring=Scoring.LEAST_ALLOCATED)
    pod = pod_request(_pod("p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {}}
    ]}}))
    order = [state.nodes["a"], state.nodes["b"]]
    assert state.score_nodes(pod, order) == state.score_nodes(pod_request(_pod("q")), order)


def test_prefer_no_schedule_taints_not_tolerated_lose_taint_tolerations_weight() -> None:
    taint = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    nodes = (_node("spot", cpu=96, gpus=8, product=V100, taints=taint), _node("plain", cpu=96, gpus=8, product=V100))
    state = _state(*nodes, scoring=Scoring.LEAST_ALLOCATED)
    order = [state.nodes["spot"], state.nodes["plain"]]
    # Raw counts 1 and 0, reverse-normalised to 0 and 100, weighed 3.
    assert state.score_nodes(pod_request(_pod("p")), order) == [s + d for s, d in zip([93, 93], [0, 300], strict=True)]
    tolerating = pod_request(_pod("q", tolerations=[{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]))
    spot, plain = state.score_nodes(tolerating, order)
    assert spot == plain
    # Under random scoring the untolerated taint still decides.
    random_state = _state(*nodes, scoring=Scoring.RANDOM)
    assert {random_state.schedule([pod_request(_pod(f"r{i}"))]).bindings[0].node for i in range(6)} == {"plain"}


def test_without_preferences_every_node_gets_the_same_preference_score() -> None:
    # No preferred term and no PreferNoSchedule taint: nothing is added, so placements are the
    # member scoring's alone (and the seeded tie-breaks draw as before).
    nodes = [_node(f"n{i}", cpu=32, gpus=4, product=V100) for i in range(4)]
    state = _state(*nodes, scoring=Scoring.BEST_FIT)
    rows = np.arange(4, dtype=np.intp)
    assert state._preferences.scores(pod_request(_pod("p")), rows, state._order) is None
    preferred = pod_request(_pod("q", affinity=_preferring((1, NOT_T4))))
    scores = state._preferences.scores(preferred, rows, state._order)
    assert scores is not None and scores.tolist() == [500] * 4  # every node matches: no choice changes
