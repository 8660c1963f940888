"""Karmada's defaults of the policy kinds (policies/defaulting.py) on wire dicts: what each fills,
what it leaves, and malformed shapes left as they are for validation to refuse."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.defaulting import (
    POLICY_DEFAULTS,
    cluster_propagation_policy,
    propagation_policy,
    propagation_structural,
)


def pp(spec: Any, namespace: str | None = "ml") -> dict[str, Any]:
    meta = {"name": "p", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": meta, "spec": spec}


def test_the_webhook_fills_namespace_spread_and_weighted_on_writes_only() -> None:
    spec = {
        "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": ""}, {"apiVersion": "v1", "kind": "Secret", "namespace": "ml"}],
        "placement": {
            "spreadConstraints": [{"minGroups": 0}, {"spreadByLabel": "zone", "minGroups": 2}, {"spreadByField": "region", "minGroups": False}],
            "replicaScheduling": {},
        },
    }
    written = pp(copy.deepcopy(spec))
    propagation_policy(written)
    assert [s["namespace"] for s in written["spec"]["resourceSelectors"]] == ["ml", "ml"]
    assert written["spec"]["placement"]["spreadConstraints"] == [
        {"minGroups": 1, "spreadByField": "cluster"},
        {"spreadByLabel": "zone", "minGroups": 2},
        {"spreadByField": "region", "minGroups": False},  # not an integer: validation refuses it
    ]
    assert written["spec"]["placement"]["replicaScheduling"] == {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"
    }
    read = pp(copy.deepcopy(spec))
    propagation_structural(read)
    assert read["spec"]["resourceSelectors"][0]["namespace"] == ""
    assert read["spec"]["placement"]["replicaScheduling"] == {"replicaSchedulingType": "Divided"}

    cluster_wide = pp(copy.deepcopy(spec), namespace=None)
    cluster_wide["kind"] = "ClusterPropagationPolicy"
    cluster_propagation_policy(cluster_wide)
    assert cluster_wide["spec"]["resourceSelectors"][0]["namespace"] == ""


def test_duplicated_and_tiered_keep_their_preference_unset() -> None:
    for scheduling in ({"replicaSchedulingType": "Duplicated"}, {"tieredOverflow": {"order": "TierThenPrice"}}):
        obj = pp({"resourceSelectors": [], "placement": {"replicaScheduling": dict(scheduling)}})
        propagation_policy(obj)
        assert "replicaDivisionPreference" not in obj["spec"]["placement"]["replicaScheduling"]


@pytest.mark.parametrize("spec", [None, "x", [], {"placement": "x"}, {"placement": {"spreadConstraints": ["x", None]}},
                                  {"failover": {"application": []}}, {"resourceSelectors": [1, "a"]},
                                  {"placement": {"replicaScheduling": []}}])
def test_malformed_shapes_are_left_for_validation(spec: Any) -> None:
    for kind, (on_write, on_read) in POLICY_DEFAULTS.items():
        for defaults in (on_write, on_read):
            if defaults is not None:
                obj = pp(copy.deepcopy(spec))
                obj["kind"] = kind
                defaults(obj)  # never raises
