"""The waste report's pending demand and the scheduler agree about where a workload may run.

The report reads the hub's Cluster and ResourceBinding objects its own way; the scheduler
builds cluster snapshots and runs its placement filters. Both run here on the same random
fleets and placements (cluster affinity by names, exclusions, labels and fields; fallback
affinity terms; taints and cluster tolerations), and the clusters the report allows a waiting
workload must be exactly those the scheduler's ClusterAffinity and TaintToleration filters
admit for a binding that runs nowhere.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.reports.snapshot import sample_from_cluster_statuses
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.framework import BindingRequest, CycleState, Profile, run_filters
from controlplane.scheduler.core.plugins import ClusterAffinity, TaintToleration
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
TAINTS = (
    {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
)
TOLERATIONS = (
    {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
    {"operator": "Exists"},
)
PLACEMENT_ONLY = Profile(filters=(ClusterAffinity(), TaintToleration()), scorers=())


def random_cluster(rng: random.Random, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"provider": rng.choice(("onprem", "aws", "gcp")), "pricing": {"A100": 2.0}}
    if rng.random() < 0.8:
        spec["region"] = rng.choice(("eu-west", "us-east"))
    taints = [t for t in TAINTS if rng.random() < 0.3]
    if taints:
        spec["taints"] = taints
    labels = {"env": rng.choice(("prod", "dev"))}
    if rng.random() < 0.5:
        labels["gpu"] = rng.choice(("a100", "h100"))
    return {
        "apiVersion": "cluster.gpufed.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeShapes": []},
    }


def random_term(rng: random.Random, names: list[str]) -> dict[str, Any]:
    term: dict[str, Any] = {}
    if rng.random() < 0.3:
        term["clusterNames"] = rng.sample(names, rng.randint(1, len(names)))
    if rng.random() < 0.3:
        term["exclude"] = rng.sample(names, 1)
    if rng.random() < 0.4:
        term["labelSelector"] = rng.choice(
            (
                {"matchLabels": {"env": "prod"}},
                {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                {"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["h100"]}]},
            )
        )
    if rng.random() < 0.3:
        term["fieldSelector"] = {
            "matchExpressions": [
                rng.choice(
                    (
                        {"key": "provider", "operator": "In", "values": ["aws", "gcp"]},
                        {"key": "region", "operator": "NotIn", "values": ["us-east"]},
                    )
                )
            ]
        }
    return term


def random_placement(rng: random.Random, names: list[str]) -> dict[str, Any]:
    placement: dict[str, Any] = {}
    if rng.random() < 0.3:
        placement["clusterAffinities"] = [
            {"affinityName": f"term-{i}", **random_term(rng, names)} for i in range(rng.randint(1, 3))
        ]
    elif rng.random() < 0.8:
        placement["clusterAffinity"] = random_term(rng, names)
    tolerations = [t for t in TOLERATIONS if rng.random() < 0.25]
    if tolerations:
        placement["clusterTolerations"] = tolerations
    return placement


def report_allows(clusters: list[dict[str, Any]], placement: dict[str, Any]) -> frozenset[str] | None:
    binding = {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "ResourceBinding",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "train", "namespace": "ml"},
            "replicas": 2,
            "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "1"}},
            "placement": placement,
        },
    }
    sample = sample_from_cluster_statuses(clusters, [binding], [], now=NOW)
    [pending] = sample.pending
    return pending.clusters


def scheduler_admits(clusters: list[dict[str, Any]], placement: dict[str, Any]) -> frozenset[str]:
    snapshots = [ClusterSnapshot.from_cluster(c) for c in clusters]
    request = BindingRequest(
        "ml/train",
        2,
        ReplicaRequirements.build({"nvidia.com/gpu": 1}),
        placement=Placement.model_validate(placement),
    )
    cache = SchedulerCache()
    admitted: set[str] = set()
    for term in request.placement.affinity_terms():
        state = CycleState(request=request, term=term, reservations=None, now=NOW, cache=cache)
        passed, _ = run_filters(PLACEMENT_ONLY, state, snapshots)
        admitted.update(c.name for c in passed)
    return frozenset(admitted)


@pytest.mark.parametrize("seed", range(4))
def test_the_report_allows_exactly_the_clusters_the_scheduler_admits(seed: int) -> None:
    rng = random.Random(seed)
    some_admitted = some_rejected = 0
    for _ in range(60):
        names = [f"c{i}" for i in range(rng.randint(1, 6))]
        clusters = [random_cluster(rng, name) for name in names]
        placement = random_placement(rng, names)
        admitted = scheduler_admits(clusters, placement)
        allowed = report_allows(clusters, placement)
        assert allowed == admitted, (clusters, placement)
        some_admitted += bool(admitted)
        some_rejected += len(admitted) < len(names)
    assert some_admitted and some_rejected  # the cases exercise both answers


def test_one_sample_judges_each_distinct_placement_once_with_the_same_answers(monkeypatch) -> None:
    """A sample of many bindings (the bindings of one policy share a placement) judges each
    distinct placement once over the clusters, and every binding gets the answer it gets alone."""
    import controlplane.reports.demand as demand

    rng = random.Random(7)
    names = [f"c{i}" for i in range(6)]
    clusters = [random_cluster(rng, name) for name in names]
    placements = [random_placement(rng, names) for _ in range(5)]
    alone = [report_allows(clusters, placement) for placement in placements]
    bindings = []
    for index in range(200):
        which = index % len(placements)
        bindings.append({
            "apiVersion": "work.gpufed.io/v1alpha1",
            "kind": "ResourceBinding",
            "metadata": {"name": f"train-{index}", "namespace": "ml"},
            "spec": {
                "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"train-{index}", "namespace": "ml"},
                "replicas": 1,
                "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "1"}},
                # A copy, as each binding stored carries its own; keys in another order.
                "placement": dict(reversed(list(placements[which].items()))),
            },
        })
    judged = []
    real = demand.admitted_clusters

    def counting(views, placement):
        judged.append(placement)
        return real(views, placement)

    monkeypatch.setattr(demand, "admitted_clusters", counting)
    sample = sample_from_cluster_statuses(clusters, bindings, [], now=NOW)
    distinct = {repr(sorted(p.items())) for p in placements}
    assert len(judged) == len(distinct)
    by_workload = {p.workload: p.clusters for p in sample.pending}
    assert len(by_workload) == len(bindings)
    for index in range(len(bindings)):
        assert by_workload[f"Deployment/train-{index}"] == alone[index % len(placements)]
