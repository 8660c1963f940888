"""Cluster affinity, field selectors, taints, cordon and spread constraints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.cluster_v1alpha1 import Cluster
from controlplane.apis.meta import Taint, Toleration
from policies.affinity import (
    ClusterView,
    cluster_is_schedulable,
    cluster_matches_affinity,
    no_execute_eviction,
    prefer_no_schedule_count,
    select_by_spread_constraints,
    select_clusters,
    spread_group,
    tolerates_cluster_taints,
)
from policies.models import ClusterAffinity, SpreadConstraint

AWS = ClusterView(name="aws-1", labels={"env": "prod"}, provider="aws", region="us-east-1", zone="us-east-1a", tier=1)
GCP = ClusterView(name="gcp-1", labels={"env": "dev"}, provider="gcp", region="europe-west4", tier=1)
DC = ClusterView(name="dc-1", labels={"env": "prod"}, provider="onprem")


@pytest.mark.parametrize(
    ("affinity", "cluster", "fits", "reason"),
    [
        (None, AWS, True, ""),
        ({}, AWS, True, ""),
        ({"clusterNames": ["aws-1", "dc-1"]}, AWS, True, ""),
        ({"clusterNames": ["dc-1"]}, AWS, False, "not listed in clusterAffinity.clusterNames"),
        ({"exclude": ["aws-1"]}, AWS, False, "excluded by clusterAffinity.exclude"),
        ({"clusterNames": ["aws-1"], "exclude": ["aws-1"]}, AWS, False, "excluded"),
        ({"labelSelector": {"matchLabels": {"env": "prod"}}}, AWS, True, ""),
        ({"labelSelector": {"matchLabels": {"env": "prod"}}}, GCP, False, "labelSelector"),
        ({"fieldSelector": {"matchExpressions": [{"key": "provider", "operator": "In", "values": ["aws", "gcp"]}]}},
         GCP, True, ""),
        ({"fieldSelector": {"matchExpressions": [{"key": "provider", "operator": "NotIn", "values": ["aws"]}]}},
         AWS, False, "provider 'aws' is excluded"),
        ({"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["us-east-1"]}]}},
         DC, False, "region '(unset)' is not in ['us-east-1']"),
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z"]}]}},
         DC, True, ""),
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-east-1a"]}]},
          "labelSelector": {"matchLabels": {"env": "prod"}}}, AWS, True, ""),
        # Only a static weight's selector gets past karmada-webhook with these, read as a label selector.
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}, AWS, True, ""),
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}, DC, False, "Exists"),
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}}, DC, True, ""),
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}}, AWS, False, ""),
        ({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}},
         AWS, False, "does not satisfy Gt"),
        ({"fieldSelector": {"matchExpressions": [{"key": "city", "operator": "In", "values": ["x"]}]}}, AWS, False, ""),
        # ``cluster`` is no field Karmada's selector reads (its extractClusterFields: provider, region, zone).
        ({"fieldSelector": {"matchExpressions": [{"key": "cluster", "operator": "In", "values": ["aws-1"]}]}},
         AWS, False, ""),
        ({"fieldSelector": {"matchExpressions": [{"key": "cluster", "operator": "DoesNotExist"}]}}, AWS, True, ""),
    ],
)
def test_cluster_matches_affinity(affinity: dict[str, Any] | None, cluster: ClusterView, fits: bool, reason: str) -> None:
    model = None if affinity is None else ClusterAffinity.model_validate(affinity)
    verdict = cluster_matches_affinity(cluster, model)
    assert verdict.fits is fits
    assert reason in verdict.reason
    if fits:
        assert verdict.reason == ""


def test_select_clusters_keeps_order() -> None:
    affinity = ClusterAffinity.model_validate({"labelSelector": {"matchLabels": {"env": "prod"}}})
    assert [c.name for c in select_clusters([DC, GCP, AWS], affinity)] == ["dc-1", "aws-1"]


NOT_READY = Taint(key="cluster.gpufed.io/not-ready", effect="NoExecute", time_added="2024-05-01T10:00:00Z")
SPOT = Taint(key="gpufed.io/spot", value="true", effect="NoSchedule")
SOFT = Taint(key="gpufed.io/expensive", effect="PreferNoSchedule")
TAINTED = ClusterView(name="t", taints=(SPOT, SOFT))


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ([], False),
        ([{"key": "gpufed.io/spot", "operator": "Exists"}], True),
        ([{"key": "gpufed.io/spot", "value": "false"}], False),
        ([{"key": "gpufed.io/spot", "value": "true", "effect": "NoSchedule"}], True),
        ([{"operator": "Exists"}], True),
    ],
)
def test_tolerates_cluster_taints(tolerations: list[dict[str, Any]], fits: bool) -> None:
    verdict = tolerates_cluster_taints(TAINTED, [Toleration.model_validate(t) for t in tolerations])
    assert verdict.fits is fits
    if not fits:
        assert "gpufed.io/spot=true:NoSchedule" in verdict.reason


def test_prefer_no_schedule_count() -> None:
    assert prefer_no_schedule_count(TAINTED, []) == 1
    assert prefer_no_schedule_count(TAINTED, [Toleration(key="gpufed.io/expensive", operator="Exists")]) == 0


def test_cordoned_cluster_is_not_schedulable() -> None:
    assert cluster_is_schedulable(DC).fits
    verdict = cluster_is_schedulable(ClusterView(name="c", unschedulable=True))
    assert not verdict.fits and "cordoned" in verdict.reason


NOW = datetime(2024, 5, 1, 10, 2, 0, tzinfo=UTC)
ADDED = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], NOW),
        ([{"key": "cluster.gpufed.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
         ADDED + timedelta(seconds=300)),
        ([{"key": "cluster.gpufed.io/not-ready", "operator": "Exists", "effect": "NoExecute"}], None),
    ],
)
def test_no_execute_eviction(tolerations: list[dict[str, Any]], expected: datetime | None) -> None:
    cluster = ClusterView(name="c", taints=(NOT_READY, SPOT))
    eviction = no_execute_eviction(cluster, [Toleration.model_validate(t) for t in tolerations], now=NOW)
    assert (eviction.at if eviction else None) == expected


def test_cluster_view_from_cluster() -> None:
    cluster = Cluster.model_validate({
        "metadata": {"name": "dc", "labels": {"a": "b"}},
        "spec": {"provider": "onprem", "region": "eu", "pricing": {"A100": 1.5, "H100": 3.0},
                 "taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
    })
    view = ClusterView.from_cluster(cluster)
    assert (view.name, view.provider, view.region, view.zone, view.tier, view.unschedulable) == (
        "dc", "onprem", "eu", None, 0, True)
    assert view.labels == {"a": "b"} and len(view.taints) == 1
    assert view.price_per_gpu_hour("H100") == 3.0
    assert view.price_per_gpu_hour("V100") == 1.5
    assert ClusterView(name="x").price_per_gpu_hour() == 0.0
    assert {view, view} == {view}
    with pytest.raises(TypeError):
        view.labels["x"] = "y"  # type: ignore[index]


# --- spread constraints ------------------------------------------------------------------------

FLEET = [
    ClusterView(name="a1", region="us", zone="us-1", provider="aws", labels={"rack": "r1"}),
    ClusterView(name="a2", region="us", zone="us-2", provider="aws", labels={"rack": "r2"}),
    ClusterView(name="g1", region="eu", zone="eu-1", provider="gcp", labels={"rack": "r1"}),
    ClusterView(name="g2", region="eu", zone="eu-1", provider="gcp"),
    ClusterView(name="d1", provider="onprem"),
]
AVAILABLE = {"a1": 5, "a2": 4, "g1": 10, "g2": 1, "d1": 2}


def _constraints(*items: dict[str, Any]) -> list[SpreadConstraint]:
    return [SpreadConstraint.model_validate(item) for item in items]


@pytest.mark.parametrize(
    ("constraints", "expected", "fits"),
    [
        ([], ("g1", "a1", "a2", "d1", "g2"), True),
        ([{"spreadByField": "cluster", "maxGroups": 2}], ("g1", "a1"), True),
        ([{"spreadByField": "cluster", "minGroups": 6}], (), False),
        ([{"spreadByField": "region", "maxGroups": 1}, {"spreadByField": "cluster"}], ("g1", "g2"), True),
        ([{"spreadByField": "region", "minGroups": 2, "maxGroups": 2}, {"spreadByField": "cluster", "maxGroups": 2}],
         ("g1", "a1"), True),
        ([{"spreadByField": "region", "minGroups": 3}, {"spreadByField": "cluster"}], (), False),
        ([{"spreadByField": "provider", "maxGroups": 1}, {"spreadByField": "cluster"}], ("g1", "g2"), True),
        ([{"spreadByLabel": "rack", "maxGroups": 1}], ("g1", "a1"), True),
        ([{"spreadByField": "zone", "maxGroups": 2}, {"spreadByField": "cluster", "minGroups": 1}],
         ("g1", "a1", "g2"), True),
    ],
)
def test_select_by_spread_constraints(constraints: list[dict[str, Any]], expected: tuple[str, ...], fits: bool) -> None:
    selection = select_by_spread_constraints(FLEET, _constraints(*constraints), available=AVAILABLE)
    assert selection.fits is fits
    assert selection.clusters == expected
    if not fits:
        assert "spreadConstraints need at least" in selection.reason


def test_spread_groups_keep_each_chosen_group_represented() -> None:
    available = {"a1": 50, "a2": 40, "g1": 10, "g2": 1, "d1": 0}
    constraints = _constraints({"spreadByField": "region", "minGroups": 2, "maxGroups": 2},
                               {"spreadByField": "cluster", "maxGroups": 2})
    selection = select_by_spread_constraints(FLEET, constraints, available=available)
    assert selection.clusters == ("a1", "g1")
    assert dict(selection.groups) == {"us": ("a1",), "eu": ("g1",)}


def test_spread_group_keys() -> None:
    constraint = SpreadConstraint.model_validate({"spreadByLabel": "rack"})
    assert spread_group(FLEET[0], constraint) == "r1"
    assert spread_group(FLEET[3], constraint) is None
    assert spread_group(FLEET[0], SpreadConstraint()) == "a1"
    assert spread_group(FLEET[4], SpreadConstraint(spread_by_field="region")) is None
