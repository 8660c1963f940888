"""Karmada's ClusterTaintPolicy rules, pure: which conditions match, and a cluster's taints after
the policies (added once by key and effect, removed, in policy order)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.taint_policy import (
    ClusterTaintPolicy,
    apply_taint_policies,
    conditions_match,
    taint_policy_denial,
)

NOW = "2026-01-01T00:00:00Z"


def policy(name: str, taints: list[dict[str, Any]], add: list[dict[str, Any]] | None = None,
           remove: list[dict[str, Any]] | None = None) -> ClusterTaintPolicy:
    return ClusterTaintPolicy.model_validate({
        "metadata": {"name": name},
        "spec": {"taints": taints, "addOnConditions": add, "removeOnConditions": remove},
    })


NOT_READY = [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}]
READY = [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}]


def ready(status: str) -> list[dict[str, Any]]:
    return [{"type": "Ready", "status": status}]


def test_conditions_match_as_karmadas() -> None:
    p = policy("p", [{"key": "k", "effect": "NoSchedule"}], NOT_READY, READY)
    assert conditions_match(ready("False"), p.spec.add_on_conditions)
    assert not conditions_match(ready("True"), p.spec.add_on_conditions)
    assert conditions_match(ready("True"), p.spec.remove_on_conditions)
    # A condition the cluster lacks matches neither operator; no entries never match.
    assert not conditions_match([], p.spec.add_on_conditions)
    assert not conditions_match([], p.spec.remove_on_conditions)
    assert not conditions_match(ready("False"), [])


def test_taints_added_once_and_removed() -> None:
    p = policy("p", [{"key": "k", "effect": "NoSchedule", "value": "v"}], NOT_READY, READY)
    other = {"key": "team", "effect": "NoSchedule"}
    added = apply_taint_policies([other], ready("Unknown"), [p], now=NOW)
    assert added == [other, {"key": "k", "effect": "NoSchedule", "value": "v", "timeAdded": NOW}]
    # Already there (by key and effect): left as it is, value and time too.
    kept = {"key": "k", "effect": "NoSchedule", "value": "old", "timeAdded": "2025-01-01T00:00:00Z"}
    assert apply_taint_policies([kept], ready("False"), [p], now=NOW) == [kept]
    assert apply_taint_policies([other, kept], ready("True"), [p], now=NOW) == [other]


def test_later_policies_see_earlier_ones_changes() -> None:
    adds = policy("adds", [{"key": "k", "effect": "NoSchedule"}], NOT_READY)
    removes = policy("removes", [{"key": "k", "effect": "NoSchedule"}], remove=[
        {"conditionType": "Ready", "operator": "In", "statusValues": ["False"]}])
    assert apply_taint_policies([], ready("False"), [adds, removes], now=NOW) == []
    assert apply_taint_policies([], ready("False"), [removes, adds], now=NOW) == [
        {"key": "k", "effect": "NoSchedule", "timeAdded": NOW}]


def test_an_effect_a_cluster_cannot_hold_is_not_added() -> None:
    p = policy("p", [{"key": "k", "effect": "PreferNoExecute"}], NOT_READY)
    assert apply_taint_policies([], ready("False"), [p], now=NOW) == []


@pytest.mark.parametrize("spec", ["taints", [], 3, None])
def test_webhook_leaves_a_spec_that_is_no_object_to_the_schema(spec: Any) -> None:
    assert taint_policy_denial({"spec": spec}) is None


def test_webhook_admits_distinct_taints() -> None:
    obj = {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "PreferNoExecute"}]}}
    assert taint_policy_denial(obj) is None
