"""A waste pass reuses what did not change since the last one, and gives the same figures.

At 100 clusters x 5,000 nodes a pass has 4 million devices; an agent's periodic report of an
unchanged cluster must not rebuild them (:class:`ClusterNodesCache`), classify them again
(:class:`ClassificationMemo`) or sum their cells again (:class:`CellRatesMemo`). Each test
checks both halves: the reuse happens (the very same objects) and the result equals a pass
that reuses nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.reports.classify import ClassificationMemo, classify_fleet
from controlplane.reports.fleet import ClusterSample
from controlplane.reports.rollups import CellRatesMemo, cell_rates
from controlplane.reports.snapshot import ClusterNodesCache, sample_from_cluster_statuses

from .builders import A100, GPU, T0, at, cluster, demand, fleet, gpu, gpus, node, pod
from .test_snapshot import cluster_object, k8s_node, k8s_pod


def _clusters() -> list[dict[str, Any]]:
    nodes = [
        k8s_node("n1", product=A100, resources={GPU: 8}),
        k8s_node("n2", product=A100, resources={GPU: 8}),
    ]
    pods = [k8s_pod("infer-abc12-x", "n1", {GPU: 2})]
    util = {"n1": [{"gpu": i, "uuid": f"G{i}", "utilization": 0.5 if i < 2 else 0.0} for i in range(8)]}
    return [
        cluster_object("dc1", nodes, pods, util, pricing={A100: 2.0}),
        cluster_object("dc2", nodes, [], {}, pricing={A100: 1.0}),
    ]


def _work(cluster: str, name: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": f"gpufed-es-{cluster}", "name": name},
        "spec": {"workload": {"manifests": [{"kind": "Deployment", "metadata": {"namespace": "ml", "name": name}}]}},
    }


def test_a_report_that_only_renews_its_time_keeps_the_nodes_and_a_changed_one_rebuilds_them() -> None:
    cache = ClusterNodesCache()
    first = _clusters()
    before = sample_from_cluster_statuses(first, [], [], now=T0, cache=cache)

    again = copy.deepcopy(first)  # decoded anew, as every list from the store is
    for obj in again:
        obj["status"]["lastReportTime"] = "2024-05-01T00:00:30Z"
    same = sample_from_cluster_statuses(again, [], [], now=at(1), cache=cache)
    assert [c.nodes for c in same.clusters] == [c.nodes for c in before.clusters]
    assert all(a.nodes is b.nodes for a, b in zip(same.clusters, before.clusters, strict=True))
    assert (cache.builds, cache.hits) == (2, 2)

    changed = copy.deepcopy(again)
    changed[1]["status"]["nodeShapes"][0]["count"] -= 1  # dc2 lost a node
    changed[1]["status"]["gpuSummary"][0]["capacity"] -= 8
    rebuilt = sample_from_cluster_statuses(changed, [], [], now=at(2), cache=cache)
    fresh = sample_from_cluster_statuses(changed, [], [], now=at(2))
    assert rebuilt.clusters[0].nodes is before.clusters[0].nodes
    assert rebuilt.clusters[1].nodes is not before.clusters[1].nodes
    assert [c.nodes for c in rebuilt.clusters] == [c.nodes for c in fresh.clusters]
    assert sum(len(n.devices) for n in rebuilt.clusters[1].nodes) == 8


def test_a_new_propagated_workload_rebuilds_the_nodes_of_its_cluster() -> None:
    """Owners by name come from the Works: a pod reported without an owner is put under a
    workload propagated later, so the Works are part of what the cached nodes depend on."""
    objs = _clusters()
    holder = objs[0]["status"]["utilization"]
    cache = ClusterNodesCache()
    before = sample_from_cluster_statuses(objs, [], [], now=T0, cache=cache)
    works = [_work("dc1", "infer"), _work("dc2", "other")]
    after = sample_from_cluster_statuses(objs, [], works, now=at(1), cache=cache)
    fresh = sample_from_cluster_statuses(objs, [], works, now=at(1))
    assert [c.nodes for c in after.clusters] == [c.nodes for c in fresh.clusters]
    assert after.clusters[0].nodes is not before.clusters[0].nodes
    assert objs[0]["status"]["utilization"] is holder


def test_memoized_classification_and_cells_equal_fresh_ones_and_reuse_untouched_clusters() -> None:
    busy = pod("train")
    dc1 = cluster("dc1", [node("a", [gpu(0, busy, 0.9), gpu(1)]), node("b", gpus(4))], pricing={A100: 2.0})
    dc2 = cluster("dc2", [node("c", gpus(2))], pricing={A100: 1.0}, tier=1)
    dc3 = cluster("dc3", [node("d", gpus(1))], ready=False)
    waiting = demand({GPU: 2}, replicas=1, clusters=["dc2"])
    fragmenting = demand({GPU: 4}, replicas=3, clusters=["dc1"])
    samples = [
        fleet(dc1, dc2, dc3, time=at(0)),
        fleet(dc1, dc2, dc3, time=at(1)),
        fleet(dc1, dc2, dc3, pending=[waiting], time=at(2)),
        fleet(dc1, dc2, dc3, pending=[waiting, fragmenting], time=at(3)),
        fleet(dc1, dc2, dc3, time=at(4)),
    ]
    for cap in (True, False):
        memo, cells = ClassificationMemo(), CellRatesMemo()
        previous, previous_pending = None, samples[0].pending
        for sample in samples:
            got = classify_fleet(sample, cap_needed_by_demand=cap, memo=memo)
            want = classify_fleet(sample, cap_needed_by_demand=cap)
            assert got.states == want.states and got.unmet == want.unmet
            assert tuple(s for part in got.parts for s in part) == got.states
            assert cells.rates(got.parts) == cell_rates(want.states)
            if previous is not None and not sample.pending and not previous_pending:
                assert all(a is b for a, b in zip(got.parts, previous.parts, strict=True))
            previous, previous_pending = got, sample.pending
    # With a demand only for dc2, dc1's and dc3's states are the memo's, dc2's are new.
    memo = ClassificationMemo()
    idle = classify_fleet(samples[0], memo=memo)
    matched = classify_fleet(samples[2], memo=memo)
    assert matched.parts[0] is idle.parts[0] and matched.parts[2] is idle.parts[2]
    assert matched.parts[1] is not idle.parts[1]
    assert {s.state.value for s in matched.parts[1]} == {"free-needed"}
    # A cluster that changes readiness is classified again.
    down = classify_fleet(fleet(cluster("dc1", dc1.nodes, ready=False, pricing={A100: 2.0}), dc2, dc3, time=at(5)), memo=memo)
    assert {s.state.value for s in down.parts[0]} == {"unavailable"}


def _holders(sample: ClusterSample) -> set[str]:
    return {d.allocated_to.workload for n in sample.nodes for d in n.devices if d.allocated_to}


def test_a_pod_whose_cluster_has_no_work_left_is_put_under_its_workload_propagated_elsewhere() -> None:
    """The last replicas of ``llm`` moved from dc1 to dc2: dc1's Work is deleted while its pod
    still terminates and the agent reports it without an owner. It is ``llm``'s (propagated to
    dc2), not ``Pod/<name>``; a pod no workload of its namespace matches stays a bare pod."""
    nodes = [k8s_node("n1", product=A100, resources={GPU: 8})]
    pods = [k8s_pod("llm-784b978b67-2kzc4", "n1", {GPU: 2}), k8s_pod("stray-1", "n1", {GPU: 1})]
    for p in pods:
        del p["metadata"]["ownerReferences"]
    util = {"n1": [{"gpu": i, "uuid": f"G{i}", "utilization": 0.0} for i in range(8)]}
    objs = [
        cluster_object("dc1", nodes, pods, util, pricing={A100: 2.0}),
        cluster_object("dc2", nodes, [], {}, pricing={A100: 1.0}),
    ]
    works = [_work("dc2", "llm")]
    cache = ClusterNodesCache()
    for sample in (
        sample_from_cluster_statuses(objs, [], works, now=T0),
        sample_from_cluster_statuses(objs, [], works, now=T0, cache=cache),
    ):
        assert _holders(sample.clusters[0]) == {"Deployment/llm", "Pod/stray-1"}
    again = sample_from_cluster_statuses(copy.deepcopy(objs), [], works, now=at(1), cache=cache)
    assert again.clusters[0].nodes is sample.clusters[0].nodes
    gone = sample_from_cluster_statuses(objs, [], [], now=at(2), cache=cache)
    assert _holders(gone.clusters[0]) == {"Pod/llm-784b978b67-2kzc4", "Pod/stray-1"}
