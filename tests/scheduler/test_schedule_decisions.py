"""Scheduling decisions: division modes, tiered overflow, gangs, affinity fallback, GPU shapes, explanations."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import ResourceBinding, ScheduledReason
from controlplane.interpreter.base import Component
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import reserve_decision, schedule
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import GpuShapeAlternative, Placement

from .builders import A100, H100, cluster, shape

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
ONE_GPU = ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 1000})
TIERED = {
    "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}
}


def request(
    replicas: int,
    placement: dict[str, Any] | None = None,
    *,
    req: ReplicaRequirements = ONE_GPU,
    previous: dict[str, int] | None = None,
    **extra: Any,
) -> BindingRequest:
    return BindingRequest(
        key="ns/train",
        replicas=replicas,
        requirements=req,
        placement=Placement.model_validate(placement or {}),
        previous=previous or {},
        **extra,
    )


def explained(result: ScheduleResult, name: str) -> str:
    [entry] = [e for e in result.explanation if e.cluster == name]
    return " | ".join(entry.reasons)


def onprem_and_cloud(onprem_free: int = 6) -> list[ClusterSnapshot]:
    return [
        cluster("onprem", shape(onprem_free, gpus=1)),
        cluster("cloud", shape(2, gpus=8), provider="aws", pricing={A100: 4.1}),
    ]


def test_tiered_overflow_fills_onprem_then_cloud_and_shrinks_cloud_first() -> None:
    clusters = onprem_and_cloud(6)
    first = schedule(request(10, TIERED), clusters, now=NOW)
    assert first.clusters == {"onprem": 6, "cloud": 4}
    assert first.condition.status and first.condition.reason is ScheduledReason.SUCCESS
    # Scale to 4: the expensive tier gives its replicas back first.
    down = schedule(request(4, TIERED, previous=first.clusters), clusters, now=NOW)
    assert down.clusters == {"onprem": 4}


def test_tiered_overflow_prefers_the_cheaper_cloud() -> None:
    clusters = [
        cluster("onprem", shape(2, gpus=1)),
        cluster("aws", shape(2, gpus=8), provider="aws", pricing={A100: 4.1}),
        cluster("gcp", shape(2, gpus=8), provider="gcp", pricing={A100: 3.2}),
    ]
    result = schedule(request(5, TIERED), clusters, now=NOW)
    assert result.clusters == {"onprem": 2, "gcp": 3}
    assert "not needed" in explained(result, "aws")


def test_not_enough_capacity_places_what_fits_and_says_so() -> None:
    result = schedule(request(30, TIERED), onprem_and_cloud(6), now=NOW)
    assert result.clusters == {"onprem": 6, "cloud": 16}
    assert result.unplaced == 8
    assert not result.condition.status
    assert result.condition.reason is ScheduledReason.UNSCHEDULABLE


def test_duplicated_only_where_every_replica_fits() -> None:
    clusters = [cluster("full", shape(2, gpus=1)), cluster("roomy", shape(1, gpus=8))]
    result = schedule(request(4), clusters, now=NOW)  # no replicaScheduling: Duplicated
    assert result.clusters == {"roomy": 4}
    assert "holds 2 of 4 replicas (Duplicated needs all)" in explained(result, "full")


def test_duplicated_with_nothing_room_anywhere_is_unschedulable() -> None:
    result = schedule(request(4), [cluster("full", shape(2, gpus=1))], now=NOW)
    assert result.clusters == {}
    assert result.condition.reason is ScheduledReason.UNSCHEDULABLE
    assert result.unplaced == 4


def test_static_weights_split_by_webster() -> None:
    placement = {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {
                "staticWeightList": [
                    {"targetCluster": {"clusterNames": ["a"]}, "weight": 2},
                    {"targetCluster": {"clusterNames": ["b"]}, "weight": 1},
                ]
            },
        }
    }
    clusters = [cluster("a", shape(4, gpus=8)), cluster("b", shape(4, gpus=8))]
    assert schedule(request(9, placement), clusters, now=NOW).clusters == {"a": 6, "b": 3}


def test_dynamic_weights_follow_available_replicas() -> None:
    placement = {
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"},
        }
    }
    clusters = [
        cluster("a", shape(6, gpus=1)),
        cluster("b", shape(12, gpus=1)),
        cluster("c", shape(18, gpus=1)),
    ]
    assert schedule(request(12, placement), clusters, now=NOW).clusters == {"a": 2, "b": 4, "c": 6}


def test_aggregated_uses_fewest_clusters() -> None:
    placement = {
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
    }
    clusters = [cluster("a", shape(3, gpus=1)), cluster("b", shape(2, gpus=8))]
    assert schedule(request(10, placement), clusters, now=NOW).clusters == {"b": 10}


def gang_request(
    workers: int, gpus_per_worker: int, placement: dict[str, Any] | None = None, **extra: Any
) -> BindingRequest:
    worker = ReplicaRequirements.build({"nvidia.com/gpu": gpus_per_worker, "cpu": 1000})
    components = (
        Component("Master", 1, ReplicaRequirements.build({"cpu": 1000})),
        Component("Worker", workers, worker),
    )
    return request(workers + 1, placement or TIERED, req=worker, gang=True, components=components, **extra)


def test_gang_lands_whole_in_the_best_cluster_that_holds_it() -> None:
    clusters = [
        cluster("onprem", shape(8, gpus=1)),  # 8 free GPUs, but no node with 4
        cluster("cloud", shape(2, gpus=8), provider="aws", pricing={A100: 4.1}),
        cluster("cloud-dear", shape(2, gpus=8), provider="azure", pricing={A100: 6.0}),
    ]
    result = schedule(gang_request(3, 4), clusters, now=NOW)
    assert result.clusters == {"cloud": 4}
    assert result.condition.status
    assert "gang does not fit" in explained(result, "onprem")
    assert "insufficient nvidia.com/gpu: need 4, 1 free" in explained(result, "onprem")


def test_gang_that_fits_nowhere_waits_with_reasons() -> None:
    clusters = [cluster("onprem", shape(8, gpus=1)), cluster("cloud", shape(1, gpus=4), provider="aws")]
    result = schedule(gang_request(3, 4), clusters, now=NOW)
    assert result.clusters == {}
    assert result.unplaced == 4
    assert result.condition.reason is ScheduledReason.UNSCHEDULABLE
    assert all("gang does not fit" in explained(result, name) for name in ("onprem", "cloud"))


def test_gang_stays_where_it_runs() -> None:
    clusters = [cluster("onprem", shape(2, gpus=8)), cluster("cloud", shape(2, gpus=8), provider="aws")]
    # The cloud copy is running, so the report shows cloud's GPUs as used; the gang still stays.
    clusters[1] = cluster("cloud", shape(2, gpus=0, allocatable={"nvidia.com/gpu": 8}), provider="aws")
    result = schedule(gang_request(3, 4, previous={"cloud": 4}), clusters, now=NOW)
    assert result.clusters == {"cloud": 4}


AFFINITIES = {
    "clusterAffinities": [
        {
            "affinityName": "local",
            "fieldSelector": {
                "matchExpressions": [{"key": "provider", "operator": "In", "values": ["onprem"]}]
            },
        },
        {"affinityName": "burst", "clusterNames": ["cloud"]},
    ],
    **TIERED,
}


@pytest.mark.parametrize(
    ("onprem_free", "replicas", "clusters", "affinity"),
    [
        (6, 4, {"onprem": 4}, "local"),
        (6, 8, {"cloud": 8}, "burst"),  # the first term cannot hold 8: the whole workload falls back
    ],
)
def test_cluster_affinities_fall_back_only_when_needed(
    onprem_free: int, replicas: int, clusters: dict[str, int], affinity: str
) -> None:
    result = schedule(request(replicas, AFFINITIES), onprem_and_cloud(onprem_free), now=NOW)
    assert result.clusters == clusters
    assert result.affinity_name == affinity
    assert result.condition.status


def test_cluster_affinities_keep_the_observed_term() -> None:
    result = schedule(
        request(2, AFFINITIES, previous={"cloud": 2}, previous_affinity_name="burst"),
        onprem_and_cloud(6),
        now=NOW,
    )
    assert result.affinity_name == "burst"
    assert result.clusters == {"cloud": 2}


def test_single_affinity_has_no_affinity_name() -> None:
    result = schedule(
        request(1, {"clusterAffinity": {"clusterNames": ["onprem"]}, **TIERED}), onprem_and_cloud(), now=NOW
    )
    assert result.affinity_name is None
    assert result.clusters == {"onprem": 1}


MIG_3G = ReplicaRequirements.build({"nvidia.com/mig-3g.40gb": 1, "cpu": 1000})


def test_alternative_gpu_shapes_are_chosen_per_cluster() -> None:
    clusters = [
        cluster("mig", shape(4, product=H100, extra={"nvidia.com/mig-3g.40gb": 2})),
        cluster("whole", shape(1, gpus=8), provider="aws", pricing={A100: 4.1}),
    ]
    shapes = (
        GpuShape.from_alternative(
            GpuShapeAlternative.model_validate({"resources": {"nvidia.com/mig-3g.40gb": 1}})
        ),
    )
    result = schedule(request(12, TIERED, gpu_shapes=shapes), clusters, now=NOW)
    assert result.clusters == {"mig": 8, "whole": 4}
    assert result.shapes == {"mig": {"nvidia.com/mig-3g.40gb": 1}}  # "whole" keeps the workload's own request
    assert result.requirements["mig"] == MIG_3G
    assert "GPU shape nvidia.com/mig-3g.40gb=1 (alternative)" in explained(result, "mig")


def test_without_alternatives_the_mig_cluster_is_rejected_with_reasons() -> None:
    clusters = [cluster("mig", shape(4, product=H100, extra={"nvidia.com/mig-1g.10gb": 7}))]
    result = schedule(request(1, TIERED, req=MIG_3G), clusters, now=NOW)
    assert result.clusters == {}
    assert "GpuFeasibility: insufficient nvidia.com/mig-3g.40gb: need 1, 0 free" in explained(result, "mig")


def test_explanations_name_the_reason_for_every_rejected_cluster() -> None:
    clusters = [
        cluster("picked", shape(2, gpus=8)),
        cluster("tainted", shape(2, gpus=8), taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
        cluster("excluded", shape(2, gpus=8)),
        cluster("cordoned", shape(2, gpus=8), unschedulable=True),
        cluster("down", shape(2, gpus=8), ready=False),
        cluster("full", shape(8, gpus=1)),
    ]
    placement = {"clusterAffinity": {"exclude": ["excluded"]}, **TIERED}
    result = schedule(
        request(2, placement, req=ReplicaRequirements.build({"nvidia.com/gpu": 4})), clusters, now=NOW
    )
    assert result.clusters == {"picked": 2}
    assert "TaintToleration: cluster has taint maintenance:NoSchedule" in explained(result, "tainted")
    assert "ClusterAffinity: excluded by clusterAffinity.exclude" in explained(result, "excluded")
    assert "Cordon: cluster is cordoned" in explained(result, "cordoned")
    assert "ClusterReady: cluster is not Ready" in explained(result, "down")
    assert "GpuFeasibility: insufficient nvidia.com/gpu: need 4, 1 free" in explained(result, "full")
    assert [e.chosen for e in result.explanation if e.cluster == "picked"] == [True]
    wire = {e.cluster: e.to_wire() for e in result.explanation}
    assert wire["picked"]["replicas"] == 2 and wire["picked"]["tier"] == 0


def test_no_cluster_fit_when_placement_rules_out_everything() -> None:
    result = schedule(
        request(1, {"clusterAffinity": {"clusterNames": ["nowhere"]}}), onprem_and_cloud(), now=NOW
    )
    assert result.condition.reason is ScheduledReason.NO_CLUSTER_FIT
    assert result.condition.message.startswith("0/2 clusters are available")


def test_cordoned_cluster_keeps_its_replicas_but_takes_no_more() -> None:
    clusters = [
        cluster("onprem", shape(8, gpus=1), unschedulable=True),
        cluster("cloud", shape(2, gpus=8), provider="aws"),
    ]
    result = schedule(request(8, TIERED, previous={"onprem": 3}), clusters, now=NOW)
    assert result.clusters == {"onprem": 3, "cloud": 5}


def test_tolerated_cluster_taint() -> None:
    clusters = [
        cluster("spot", shape(1, gpus=8), taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}])
    ]
    placement = {"clusterTolerations": [{"key": "spot", "operator": "Equal", "value": "true"}], **TIERED}
    assert schedule(request(2, placement), clusters, now=NOW).clusters == {"spot": 2}


def test_spread_constraints_pick_groups() -> None:
    clusters = [
        cluster("a", shape(2, gpus=8), region="eu"),
        cluster("b", shape(1, gpus=8), region="eu"),
        cluster("c", shape(1, gpus=8), region="us"),
        cluster("noregion", shape(4, gpus=8)),
    ]
    placement = {
        "spreadConstraints": [
            {"spreadByField": "region", "minGroups": 2, "maxGroups": 2},
            {"spreadByField": "cluster", "minGroups": 2},
        ],
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"},
        },
    }
    result = schedule(request(8, placement), clusters, now=NOW)
    assert "noregion" not in result.clusters
    assert "SpreadConstraint: cluster has no region" in explained(result, "noregion")
    assert sum(result.clusters.values()) == 8
    assert {"a", "c"} <= set(result.clusters)


def test_two_bindings_in_a_row_do_not_double_book() -> None:
    clusters = [cluster("onprem", shape(1, gpus=4)), cluster("cloud", shape(1, gpus=4), provider="aws")]
    reservations = Reservations()
    first_request = request(1, TIERED, req=ReplicaRequirements.build({"nvidia.com/gpu": 4}))
    first = schedule(first_request, clusters, reservations=reservations, now=NOW)
    assert first.clusters == {"onprem": 1}
    reserve_decision(reservations, first_request, first, now=NOW)
    second_request = BindingRequest(
        key="ns/other", replicas=1, requirements=first_request.requirements, placement=first_request.placement
    )
    second = schedule(second_request, clusters, reservations=reservations, now=NOW)
    assert second.clusters == {"cloud": 1}
    # Rescheduling the first binding does not count its own reservation against itself.
    again = schedule(
        request(1, TIERED, req=first_request.requirements, previous={"onprem": 1}),
        clusters,
        reservations=reservations,
        now=NOW,
    )
    assert again.clusters == {"onprem": 1}


def test_gang_reservation_covers_every_pod() -> None:
    clusters = [cluster("cloud", shape(2, gpus=8), provider="aws")]
    reservations = Reservations()
    gang = gang_request(3, 4)
    result = schedule(gang, clusters, reservations=reservations, now=NOW)
    reserve_decision(reservations, gang, result, now=NOW)
    assert reservations.reserved_replicas("ns/train", "cloud") == 4
    other = BindingRequest(
        key="ns/b",
        replicas=1,
        requirements=ReplicaRequirements.build({"nvidia.com/gpu": 8}),
        placement=Placement.model_validate(TIERED),
    )
    assert schedule(other, clusters, reservations=reservations, now=NOW).clusters == {}


def test_decisions_are_deterministic_whatever_the_input_order() -> None:
    clusters = [cluster(f"c{i}", shape(i + 1, gpus=2), provider="aws", pricing={A100: 3.0}) for i in range(8)]
    baseline = schedule(request(20, TIERED), clusters, now=NOW)
    shuffled = clusters[:]
    random.Random(7).shuffle(shuffled)
    again = schedule(request(20, TIERED), shuffled, now=NOW)
    assert (again.clusters, again.explanation) == (baseline.clusters, baseline.explanation)


def test_zero_replicas_keep_the_workload_in_place() -> None:
    result = schedule(request(0, TIERED, previous={"cloud": 3}), onprem_and_cloud(), now=NOW)
    assert result.clusters == {"cloud": 0}
    assert result.condition.status


def test_from_binding() -> None:
    binding = ResourceBinding.model_validate(
        {
            "metadata": {"name": "train-job", "namespace": "ml"},
            "spec": {
                "resource": {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "namespace": "ml"},
                "replicas": 3,
                "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "2", "cpu": "500m"}},
                "placement": TIERED,
                "clusters": [{"name": "onprem", "replicas": 3}],
            },
        }
    )
    built = BindingRequest.from_binding(
        binding, gpu_shapes=[GpuShapeAlternative.model_validate({"resources": {"nvidia.com/mig-3g.40gb": 1}})]
    )
    assert built.key == "ml/train-job"
    assert built.requirements.resource_map == {"nvidia.com/gpu": 2, "cpu": 500}
    assert built.previous == {"onprem": 3}
    assert built.gpu_shapes[0].resource_map == {"nvidia.com/mig-3g.40gb": 1}
    # onprem runs the 3 replicas (its 2-GPU nodes show 1 GPU free each): they stay.
    clusters = [
        cluster("onprem", shape(6, gpus=1, allocatable={"nvidia.com/gpu": 2})),
        cluster("cloud", shape(2, gpus=8), provider="aws", pricing={A100: 4.1}),
    ]
    assert schedule(built, clusters, now=NOW).clusters == {"onprem": 3}


def test_remembered_placement_verdicts_do_not_apply_to_clusters_running_the_binding() -> None:
    clusters = [
        cluster("onprem", shape(8, gpus=1), unschedulable=True),
        cluster("cloud", shape(2, gpus=8), provider="aws"),
    ]
    assert schedule(request(8, TIERED), clusters, now=NOW).clusters == {"cloud": 8}
    # Same snapshots, so the cordon verdict above is remembered; a binding running there keeps its replicas.
    assert schedule(request(8, TIERED, previous={"onprem": 3}), clusters, now=NOW).clusters == {
        "onprem": 3,
        "cloud": 5,
    }
    assert schedule(request(8, TIERED), clusters, now=NOW).clusters == {"cloud": 8}
    # Another placement is not answered from the memo of the first.
    excluded = schedule(request(8, {"clusterAffinity": {"exclude": ["cloud"]}, **TIERED}), clusters, now=NOW)
    assert excluded.clusters == {}
    assert "excluded by clusterAffinity.exclude" in explained(excluded, "cloud")


def test_not_ready_cluster_keeps_its_replicas_but_takes_no_more() -> None:
    clusters = [
        cluster("onprem", shape(8, gpus=1), ready=False),
        cluster("cloud", shape(2, gpus=8), provider="aws"),
    ]
    result = schedule(request(6, TIERED, previous={"onprem": 2}), clusters, now=NOW)
    assert result.clusters == {"onprem": 2, "cloud": 4}
    assert "takes no new replicas" in explained(result, "onprem")


MOVED = "the member reported 2 replica(s) unschedulable: moved elsewhere"


@pytest.mark.parametrize(
    ("previous", "expected", "chosen"),
    [
        # Keeps what it still runs, takes none of the replicas that move, and says why.
        ({"onprem": 4}, {"onprem": 4, "cloud": 6}, True),
        # Runs none of the binding any more: rejected with the reason, not as a cluster without nodes.
        ({}, {"cloud": 10}, False),
    ],
)
def test_keep_only_clusters_take_no_new_replicas_and_say_why(
    previous: dict[str, int], expected: dict[str, int], chosen: bool
) -> None:
    clusters = onprem_and_cloud(onprem_free=6)
    result = schedule(request(10, TIERED, previous=previous, keep_only={"onprem": MOVED}), clusters, now=NOW)
    assert result.clusters == expected
    [entry] = [e for e in result.explanation if e.cluster == "onprem"]
    assert entry.chosen is chosen
    assert any(MOVED in reason for reason in entry.reasons), entry.reasons
    assert not any("0/0 nodes" in reason for reason in entry.reasons), entry.reasons
    # Without keep_only the same cluster takes the replicas again.
    free = schedule(request(10, TIERED, previous=previous), clusters, now=NOW)
    assert free.clusters.get("onprem", 0) > previous.get("onprem", 0)
