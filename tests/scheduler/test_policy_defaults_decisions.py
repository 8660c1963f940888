"""The defaults the hub stores in a policy (Karmada's, :mod:`policies.defaulting`) change no decision.

Every PropagationPolicy and ClusterPropagationPolicy of ``policies/examples``, the e2e fixtures
and README.md is parsed as written and as the hub stores it, and both must give the same
matching, warnings, failover settings and scheduling results over a small fleet.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.controllers.failover import purge_mode_of
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.defaulting import POLICY_DEFAULTS
from policies.models import ClusterPropagationPolicy, PropagationPolicy
from policies.validation import parse_policy, policy_warnings

from .builders import A100, H100, cluster, shape

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
KINDS = ("PropagationPolicy", "ClusterPropagationPolicy")


def _readme_documents() -> Iterator[Any]:
    for block in re.findall(r"```ya?ml\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S):
        try:
            yield from yaml.safe_load_all(block)
        except yaml.YAMLError:
            continue


def _documents() -> Iterator[tuple[str, dict[str, Any]]]:
    files = sorted((ROOT / "policies" / "examples").glob("*.yaml")) + sorted((ROOT / "e2e").rglob("*.yaml"))
    for path in files:
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                yield f"{path.relative_to(ROOT)}#{index}", doc
    for index, doc in enumerate(_readme_documents()):
        if isinstance(doc, dict) and doc.get("kind") in KINDS:
            yield f"README.md#{index}", doc


def _policy(spec: dict[str, Any], kind: str = "PropagationPolicy") -> dict[str, Any]:
    selectors = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": {"name": "p"},
            "spec": {"resourceSelectors": selectors, **spec}}


#: Fields the files above leave unset in ways worth checking: each default's own case.
EDGES = [
    ("edge/divided-without-preference", _policy({"placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}})),
    ("edge/empty-replica-scheduling", _policy({"placement": {"replicaScheduling": {}}}, "ClusterPropagationPolicy")),
    ("edge/dynamic-weight", _policy({"placement": {"replicaScheduling": {"weightPreference": {"dynamicWeight": "AvailableReplicas"}}}})),
    ("edge/tiered-block-only", _policy({"placement": {"replicaScheduling": {"tieredOverflow": {}}}})),
    ("edge/bare-spread", _policy({"placement": {"spreadConstraints": [{"maxGroups": 2}],
                                                "replicaScheduling": {"replicaSchedulingType": "Divided"}}})),
    ("edge/spread-min-zero", _policy({"placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 0, "maxGroups": 3}]}})),
    ("edge/spread-by-label", _policy({"placement": {"spreadConstraints": [{"spreadByLabel": "tier"}]}})),
    ("edge/spread-region-and-cluster", _policy({"placement": {"spreadConstraints": [
        {"spreadByField": "region", "maxGroups": 2}, {"spreadByField": "cluster"}]}})),
    ("edge/application-failover", _policy({"propagateDeps": True, "failover": {"application": {"decisionConditions": {}}}})),
    ("edge/application-failover-conditions-unset", _policy({"propagateDeps": True, "failover": {"application": {
        "decisionConditions": {"tolerationSeconds": 60}, "gracePeriodSeconds": 120}}})),
    ("edge/cluster-failover", _policy({"failover": {"cluster": {"purgeMode": "Directly"}}})),
    ("edge/priority-and-preemption", _policy({"priority": 5, "preemption": "Always", "conflictResolution": "Overwrite"},
                                             "ClusterPropagationPolicy")),
    ("edge/selector-in-namespace", _policy({"resourceSelectors": [
        {"apiVersion": "v1", "kind": "ConfigMap"}, {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}]})),
]


def _parses(doc: dict[str, Any]) -> bool:
    try:
        parse_policy(doc)
    except ValueError:
        return False
    return True


POLICIES = [(name, doc) for name, doc in [*_documents(), *EDGES] if _parses(doc)]


def test_the_examples_are_many() -> None:
    # The corpus below is not silently empty: every example file holds a policy.
    assert len(POLICIES) >= 15 + len(EDGES)
    assert {name.split("#")[0] for name, _ in POLICIES} >= {"policies/examples/karmada-policy-as-is.yaml"}


def _stored(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as the hub stores it (in namespace ``default`` when it names none)."""
    stored = copy.deepcopy(doc)
    if stored["kind"] == "PropagationPolicy":
        stored.setdefault("metadata", {}).setdefault("namespace", "default")
    defaults, _ = POLICY_DEFAULTS[stored["kind"]]
    assert defaults is not None
    defaults(stored)
    return stored


def _fleet(doc: dict[str, Any]) -> list[ClusterSnapshot]:
    """Clusters of every provider and tier, with every cluster name the policy mentions."""
    names = set(re.findall(r"'(?:clusterNames|exclude)': \[([^\]]*)\]", str(doc)))
    mentioned = {n.strip(" '") for group in names for n in group.split(",") if n.strip(" '")}
    base = [
        cluster("onprem-a100", shape(4, gpus=2), region="eu-west", labels={"tier": "onprem"}),
        cluster("onprem-small", shape(1, gpus=1), region="eu-west"),
        cluster("cloud-h100", shape(3, gpus=8, product=H100), provider="aws", region="us-east",
                pricing={H100: 6.0}, labels={"gpufed.io/pool": "burst"}),
        cluster("cloud-l4-spot", shape(2, gpus=4), provider="gcp", region="us-central", pricing={A100: 2.5}),
    ]
    extra = [
        cluster(name, shape(2, gpus=4), provider="aws" if i % 2 else "gcp", region=f"r{i % 3}", pricing={A100: 3.0 + i})
        for i, name in enumerate(sorted(mentioned - {c.name for c in base}))
    ]
    return base + extra


def _decisions(doc: dict[str, Any]) -> dict[str, Any]:
    """What the hub makes of the policy: matching, warnings, failover and placements."""
    policy = parse_policy(doc)
    assert isinstance(policy, PropagationPolicy | ClusterPropagationPolicy)
    assert not isinstance(policy, PropagationPolicy) or policy.metadata.namespace
    spec = policy.spec
    failover = spec.failover
    application = failover.application if failover else None
    placement = spec.effective_placement
    out: dict[str, Any] = {
        "priority": spec.effective_priority,
        "preempts": spec.preemption == "Always",
        "conflictResolution": spec.conflict_resolution or "Abort",
        "selectors": [
            (s.api_version, s.kind, s.name, s.label_selector) for s in spec.resource_selectors
        ],
        "warnings": policy_warnings(policy),
        "division": placement.division_strategy,
        "spread": [
            (c.effective_field, c.spread_by_label or None, c.effective_min_groups, c.max_groups or None)
            for c in placement.spread_constraints or ()
        ],
        "application": application is not None and (
            application.effective_toleration_seconds,
            purge_mode_of(application.purge_mode),
            application.grace_period_seconds,
        ),
    }
    fleet = _fleet(doc)
    for replicas in (1, 5, 13):
        request = BindingRequest(
            key="default/web",
            replicas=replicas,
            requirements=ReplicaRequirements.build({"nvidia.com/gpu": 1, "cpu": 1000}),
            placement=placement,
            previous={},
        )
        result = schedule(request, fleet, now=NOW)
        out[f"placed/{replicas}"] = (
            dict(result.clusters),
            result.condition.status,
            result.condition.reason,
            sorted((e.cluster, tuple(e.reasons)) for e in result.explanation),
        )
    return out


@pytest.mark.parametrize(("name", "doc"), POLICIES, ids=[name for name, _ in POLICIES])
def test_stored_defaults_change_no_decision(name: str, doc: dict[str, Any]) -> None:
    written = copy.deepcopy(doc)
    if written["kind"] == "PropagationPolicy":
        written.setdefault("metadata", {}).setdefault("namespace", "default")
    stored = _stored(doc)
    assert _decisions(stored) == _decisions(written)
    # Defaulting twice is defaulting once (an apply of the read-back writes nothing new).
    assert _stored(stored) == stored
