"""A policy stored before the hub stored Karmada's defaults (``policies.defaulting``) is read back
with them; its bindings and Works must not change for that alone: a binding whose placement
moved would be scheduled again, and every Work of the fleet rewritten."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.controllers.detecting import binding_spec
from controlplane.controllers.works import build_work
from policies.defaulting import propagation_structural
from policies.validation import parse_policy

WORKLOAD: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "uid": "u-web", "generation": 1},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
}


def _policy(placement: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}], "placement": placement},
    }


def test_a_binding_keeps_its_placement_when_only_the_stored_defaults_differ() -> None:
    before = _policy({"clusterAffinity": {"clusterNames": ["a", "b"]}, "replicaScheduling": {}})
    after = copy.deepcopy(before)
    propagation_structural(after)  # what a read of the policy stored before gives now
    assert after["spec"]["placement"]["replicaScheduling"] == {"replicaSchedulingType": "Divided"}

    existing = {"spec": binding_spec(WORKLOAD, parse_policy(before), None)}  # type: ignore[arg-type]
    again = binding_spec(WORKLOAD, parse_policy(after), existing)  # type: ignore[arg-type]
    assert again["placement"] == existing["spec"]["placement"]
    assert again == existing["spec"]


def test_a_real_placement_change_still_reaches_the_binding() -> None:
    before = _policy({"clusterAffinity": {"clusterNames": ["a", "b"]}, "replicaScheduling": {}})
    existing = {"spec": binding_spec(WORKLOAD, parse_policy(before), None)}  # type: ignore[arg-type]
    changed = _policy({"clusterAffinity": {"clusterNames": ["a"]}, "replicaScheduling": {}})
    propagation_structural(changed)
    spec = binding_spec(WORKLOAD, parse_policy(changed), existing)  # type: ignore[arg-type]
    assert spec["placement"]["clusterAffinity"] == {"clusterNames": ["a"]}
    assert spec["placement"]["replicaScheduling"] == {"replicaSchedulingType": "Divided"}


def _work(conflict_resolution: str | None) -> dict[str, Any]:
    return build_work(
        cluster="a", name="default-web-deployment", binding_namespace="default", binding="web-deployment",
        manifest=WORKLOAD, conflict_resolution=conflict_resolution, suspend_dispatching=False,
    )


def test_a_work_is_the_same_with_the_default_conflict_resolution_or_none() -> None:
    assert _work("Abort") == _work(None)
    assert "conflictResolution" not in _work("Abort")["spec"]
    assert _work("Overwrite")["spec"]["conflictResolution"] == "Overwrite"
