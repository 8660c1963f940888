"""The pure parts of Karmada's FederatedResourceQuota: the member quotas a quota's static
assignments make, the status summed from what members report, and what bindings take of the
namespace's ``overall`` under FederatedQuotaEnforcement."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.kube import quota
from policies.federated_quota import binding_usage, member_quotas, quota_refusal, quota_status, usage_growth

FRQ: dict[str, Any] = {
    "metadata": {"name": "team", "namespace": "ml"},
    "spec": {"overall": {"cpu": "10", "memory": "8Gi"},
             "staticAssignments": [{"clusterName": "a", "hard": {"cpu": "4"}}, {"clusterName": "b", "hard": {"cpu": "6"}}]},
}


def test_each_listed_cluster_gets_a_quota_named_as_the_federated_one() -> None:
    assert member_quotas(FRQ) == {
        cluster: {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": "ml"},
                  "spec": {"hard": {"cpu": cpu}}}
        for cluster, cpu in (("a", "4"), ("b", "6"))
    }


def test_the_status_sums_what_members_use_by_cluster_name() -> None:
    reported = {"b": {"hard": {"cpu": "6"}, "used": {"cpu": "500m", "memory": "1Gi"}},
                "a": {"hard": {"cpu": "4"}, "used": {"cpu": "1.5"}}}
    assert quota_status(FRQ, reported) == {
        "overall": {"cpu": "10", "memory": "8Gi"},
        "overallUsed": {"cpu": "2", "memory": "1Gi"},
        "aggregatedStatus": [
            {"clusterName": "a", "hard": {"cpu": "4"}, "used": {"cpu": "1500m"}},
            {"clusterName": "b", "hard": {"cpu": "6"}, "used": {"cpu": "500m", "memory": "1Gi"}},
        ],
    }
    assert quota_status(FRQ, {}) == {"overall": {"cpu": "10", "memory": "8Gi"}}


SPEC = {"replicaRequirements": {"resourceRequest": {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "1"}},
        "clusters": [{"name": "a", "replicas": 2}]}


@pytest.mark.parametrize(
    ("clusters", "used", "refusal"),
    [
        ({"a": 2}, {"cpu": "3"}, None),  # the same placement grows nothing
        ({"a": 2, "b": 2}, {"cpu": "4"}, None),  # 4 + 3 more cpu: 7 of 10
        ({"a": 2, "b": 5}, {"cpu": "4"}, "FederatedResourceQuota(ml/team) exceeded for resource cpu: requested sum 11500m, limit 10."),
        ({"a": 8}, {"cpu": "1", "memory": "3Gi"},  # cpu exactly at overall; memory past it
         "FederatedResourceQuota(ml/team) exceeded for resource memory: requested sum 9Gi, limit 8Gi."),
        ({}, {"cpu": "100"}, None),  # shrinking is never refused
    ],
)
def test_a_binding_is_refused_past_overall(clusters: dict[str, int], used: dict[str, str], refusal: str | None) -> None:
    growth = usage_growth(binding_usage(SPEC, clusters), binding_usage(SPEC))
    assert quota_refusal(FRQ, quota.read_list(used), growth) == refusal


def test_a_binding_takes_its_request_times_its_placed_replicas() -> None:
    assert quota.written_list(binding_usage(SPEC)) == {"cpu": "3", "memory": "2Gi", "nvidia.com/gpu": "2"}
    assert binding_usage({"clusters": [{"name": "a", "replicas": 3}]}) == {}


def test_a_binding_takes_the_devices_its_pods_share_once_per_cluster_holding_a_replica() -> None:
    """A shared DRA claim is one copy per cluster the binding runs in: 3 replicas over two clusters
    take 3 GPUs of their own and the claim's 4 twice; a cluster given no replica takes nothing."""
    spec = {"replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "1"}, "sharedResourceRequest": {"nvidia.com/gpu": "4"}},
            "clusters": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}, {"name": "c", "replicas": 0}]}
    assert quota.written_list(binding_usage(spec)) == {"nvidia.com/gpu": "11"}
    only_shared = {"replicaRequirements": {"sharedResourceRequest": {"nvidia.com/gpu": "4"}}}
    assert quota.written_list(binding_usage(only_shared, {"a": 3})) == {"nvidia.com/gpu": "4"}
    assert binding_usage(only_shared, {}) == {}
    frq = {"metadata": {"name": "gpus", "namespace": "ml"}, "spec": {"overall": {"nvidia.com/gpu": "6"}}}
    growth = usage_growth(binding_usage(only_shared, {"a": 1, "b": 1}), binding_usage(only_shared, {"a": 1}))
    assert quota_refusal(frq, quota.read_list({"nvidia.com/gpu": "4"}), growth) == (
        "FederatedResourceQuota(ml/gpus) exceeded for resource nvidia.com/gpu: requested sum 8, limit 6."
    )
