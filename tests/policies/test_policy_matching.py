"""Policy selection and override ordering, following Karmada's rules."""

from __future__ import annotations

from typing import Any

import pytest

from policies.matching import (
    ImplicitPriority,
    PolicyRef,
    collect_override_rules,
    is_cluster_builtin,
    is_reserved_namespace,
    matching_policies,
    select_policy,
    selector_match,
)
from policies.models import (
    AnyPropagationPolicy,
    ClusterPropagationPolicy,
    PropagationPolicy,
    ResourceSelector,
)
from policies.override_models import AnyOverridePolicy, ClusterOverridePolicy, OverridePolicy

WORKLOAD: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "tier": "front"}},
}


def _selector(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", **fields}


BY_NAME = _selector(name="web")
BY_LABEL = _selector(labelSelector={"matchLabels": {"app": "web"}})
BY_KIND = _selector()


def pp(name: str, selector: dict[str, Any], *, priority: int | None = None, namespace: str = "shop",
       preemption: str | None = None, deleting: bool = False) -> PropagationPolicy:
    spec: dict[str, Any] = {"resourceSelectors": [selector]}
    if priority is not None:
        spec["priority"] = priority
    if preemption:
        spec["preemption"] = preemption
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if deleting:
        meta["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    return PropagationPolicy.model_validate({"metadata": meta, "spec": spec})


def cpp(name: str, selector: dict[str, Any], *, priority: int | None = None,
        preemption: str | None = None) -> ClusterPropagationPolicy:
    spec: dict[str, Any] = {"resourceSelectors": [selector]}
    if priority is not None:
        spec["priority"] = priority
    if preemption:
        spec["preemption"] = preemption
    return ClusterPropagationPolicy.model_validate({"metadata": {"name": name}, "spec": spec})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (BY_NAME, ImplicitPriority.MATCH_NAME),
        (_selector(name="web", labelSelector={"matchLabels": {"app": "other"}}), ImplicitPriority.MATCH_NAME),
        (_selector(name="api"), ImplicitPriority.MISMATCH),
        (BY_LABEL, ImplicitPriority.MATCH_LABEL_SELECTOR),
        (_selector(labelSelector={"matchLabels": {"app": "api"}}), ImplicitPriority.MISMATCH),
        (BY_KIND, ImplicitPriority.MATCH_ALL),
        (_selector(namespace="shop"), ImplicitPriority.MATCH_ALL),
        (_selector(namespace="other"), ImplicitPriority.MISMATCH),
        ({"apiVersion": "apps/v1", "kind": "StatefulSet"}, ImplicitPriority.MISMATCH),
        ({"apiVersion": "extensions/v1beta1", "kind": "Deployment"}, ImplicitPriority.MISMATCH),
    ],
)
def test_selector_match(selector: dict[str, Any], expected: ImplicitPriority) -> None:
    assert selector_match(WORKLOAD, ResourceSelector.model_validate(selector)) == expected


@pytest.mark.parametrize(
    ("policies", "winner"),
    [
        pytest.param([pp("b", BY_KIND, priority=1), pp("a", BY_NAME, priority=0)], "b", id="priority-first"),
        pytest.param([pp("b", BY_KIND), pp("c", BY_LABEL), pp("z", BY_NAME)], "z", id="name-beats-label-beats-kind"),
        pytest.param([pp("b", BY_KIND), pp("c", BY_LABEL)], "c", id="label-beats-kind"),
        pytest.param([pp("b", BY_LABEL), pp("a", BY_LABEL)], "a", id="alphabetical-tie-break"),
        pytest.param([cpp("c", BY_NAME, priority=100), pp("p", BY_KIND)], "p", id="namespaced-beats-cluster-scoped"),
        pytest.param([cpp("c2", BY_KIND, priority=1), cpp("c1", BY_NAME)], "c2", id="cluster-scoped-priority"),
        pytest.param([pp("other-ns", BY_NAME, namespace="default"), cpp("c", BY_KIND)], "c", id="pp-only-own-namespace"),
        pytest.param([pp("gone", BY_NAME, deleting=True), pp("kept", BY_KIND)], "kept", id="deleting-policy-skipped"),
        pytest.param([pp("x", _selector(name="api"))], None, id="no-match"),
    ],
)
def test_select_policy(policies: list[AnyPropagationPolicy], winner: str | None) -> None:
    match = select_policy(WORKLOAD, policies)
    assert (match.policy.metadata.name if match else None) == winner


def test_pp_ignores_selector_namespace_and_matches_own_namespace() -> None:
    policy = pp("p", _selector(namespace="elsewhere"))
    assert select_policy(WORKLOAD, [policy]) is not None


def test_cpp_honours_selector_namespace() -> None:
    assert select_policy(WORKLOAD, [cpp("c", _selector(namespace="elsewhere"))]) is None


@pytest.mark.parametrize("namespace", ["gpufed-system", "gpufed-es-member1", "kube-system", "gpufed-cluster-lease"])
def test_reserved_namespaces_are_never_propagated(namespace: str) -> None:
    workload = {**WORKLOAD, "metadata": {**WORKLOAD["metadata"], "namespace": namespace}}
    assert is_reserved_namespace(namespace)
    assert select_policy(workload, [cpp("c", BY_KIND)]) is None
    assert not is_reserved_namespace("shop")


@pytest.mark.parametrize(
    ("kind", "name", "labels", "builtin"),
    [
        ("ClusterRole", "cluster-admin", {"kubernetes.io/bootstrapping": "rbac-defaults"}, True),
        ("ClusterRoleBinding", "system:discovery", {"kubernetes.io/bootstrapping": "rbac-defaults"}, True),
        ("ClusterRole", "training-operator", {}, False),
        ("PriorityClass", "system-node-critical", {}, True),
        ("PriorityClass", "high", {}, False),
        ("StorageClass", "system-fast", {}, False),
    ],
)
def test_what_every_cluster_creates_itself_is_never_propagated(
    kind: str, name: str, labels: dict[str, str], builtin: bool
) -> None:
    obj = {"apiVersion": "any/v1", "kind": kind, "metadata": {"name": name, "labels": labels}}
    assert is_cluster_builtin(obj) is builtin
    found = select_policy(obj, [cpp("c", {"apiVersion": "any/v1", "kind": kind})])
    assert (found is None) is builtin


def test_cluster_scoped_workload_only_matches_cpp() -> None:
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    selector = {"apiVersion": "v1", "kind": "Namespace"}
    policies: list[AnyPropagationPolicy] = [pp("p", selector), cpp("c", selector)]
    match = select_policy(namespace_obj, policies)
    assert match is not None and match.ref == PolicyRef(kind="ClusterPropagationPolicy", name="c")


@pytest.mark.parametrize(
    ("policies", "claimed", "winner", "preempted"),
    [
        pytest.param([pp("low", BY_KIND), pp("high", BY_KIND, priority=5)],
                     PolicyRef("PropagationPolicy", "low", "shop"), "low", None, id="claim-sticks"),
        pytest.param([pp("low", BY_KIND), pp("high", BY_KIND, priority=5, preemption="Always")],
                     PolicyRef("PropagationPolicy", "low", "shop"), "high", "low", id="pp-preempts-lower-pp"),
        pytest.param([pp("low", BY_KIND, priority=5), pp("high", BY_NAME, priority=5, preemption="Always")],
                     PolicyRef("PropagationPolicy", "low", "shop"), "low", None, id="equal-priority-no-preemption"),
        pytest.param([cpp("c", BY_KIND, priority=9), pp("p", BY_KIND, preemption="Always")],
                     PolicyRef("ClusterPropagationPolicy", "c"), "p", "c", id="pp-preempts-cpp-regardless"),
        pytest.param([cpp("c", BY_KIND, priority=9), pp("p", BY_KIND)],
                     PolicyRef("ClusterPropagationPolicy", "c"), "c", None, id="pp-without-always-waits"),
        pytest.param([cpp("c1", BY_KIND), cpp("c2", BY_KIND, priority=3, preemption="Always")],
                     PolicyRef("ClusterPropagationPolicy", "c1"), "c2", "c1", id="cpp-preempts-lower-cpp"),
        pytest.param([pp("only", BY_KIND)], PolicyRef("PropagationPolicy", "deleted", "shop"), "only", None,
                     id="claimant-gone"),
    ],
)
def test_claims_and_preemption(
    policies: list[AnyPropagationPolicy], claimed: PolicyRef, winner: str, preempted: str | None
) -> None:
    match = select_policy(WORKLOAD, policies, claimed_by=claimed)
    assert match is not None
    assert match.policy.metadata.name == winner
    assert (match.preempted.name if match.preempted else None) == preempted


def test_matching_policies_order() -> None:
    policies: list[AnyPropagationPolicy] = [cpp("c", BY_NAME), pp("k", BY_KIND), pp("n", BY_NAME), pp("h", BY_KIND, priority=2)]
    assert [m.policy.metadata.name for m in matching_policies(WORKLOAD, policies)] == ["h", "n", "k", "c"]


# --- overrides ---------------------------------------------------------------------------------


def op(name: str, selectors: list[dict[str, Any]] | None, *, namespace: str = "shop", rules: int = 1) -> OverridePolicy:
    spec: dict[str, Any] = {"overrideRules": [{"overriders": {"plaintext": []}} for _ in range(rules)]}
    if selectors is not None:
        spec["resourceSelectors"] = selectors
    return OverridePolicy.model_validate({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def cop(name: str, selectors: list[dict[str, Any]] | None) -> ClusterOverridePolicy:
    spec: dict[str, Any] = {"overrideRules": [{"overriders": {}}]}
    if selectors is not None:
        spec["resourceSelectors"] = selectors
    return ClusterOverridePolicy.model_validate({"metadata": {"name": name}, "spec": spec})


def test_override_order_cluster_first_then_least_precise_first() -> None:
    policies: list[AnyOverridePolicy] = [
        op("z-name", [BY_NAME]),
        op("a-label", [BY_LABEL]),
        op("m-all", None, rules=2),
        op("b-kind", [BY_KIND]),
        op("elsewhere", [BY_NAME], namespace="default"),
        op("nomatch", [_selector(name="api")]),
        cop("c-name", [BY_NAME]),
        cop("b-kind", [BY_KIND]),
    ]
    sources = [rule.source for rule in collect_override_rules(WORKLOAD, policies)]
    assert sources == [
        "ClusterOverridePolicy/b-kind#0",
        "ClusterOverridePolicy/c-name#0",
        "OverridePolicy/shop/b-kind#0",
        "OverridePolicy/shop/m-all#0",
        "OverridePolicy/shop/m-all#1",
        "OverridePolicy/shop/a-label#0",
        "OverridePolicy/shop/z-name#0",
    ]


def test_override_policies_skip_cluster_scoped_workloads() -> None:
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    policies: list[AnyOverridePolicy] = [op("all", None), cop("all", None)]
    assert [r.source for r in collect_override_rules(namespace_obj, policies)] == ["ClusterOverridePolicy/all#0"]


@pytest.mark.parametrize(
    ("selector", "served", "expected"),
    [
        (_selector(apiVersion="apps/v2"), set(), ImplicitPriority.MISMATCH),  # another version: only if it serves these objects
        (_selector(apiVersion="apps/v2", name="web"), {"apps/v2"}, ImplicitPriority.MATCH_NAME),
        (_selector(apiVersion="apps/v2", kind="StatefulSet"), {"apps/v2"}, ImplicitPriority.MISMATCH),  # the kind still counts
        (_selector(apiVersion="apps/v3"), {"apps/v2"}, ImplicitPriority.MISMATCH),
        (BY_KIND, set(), ImplicitPriority.MATCH_ALL),  # the workload's own version needs no answer
    ],
)
def test_a_selector_may_name_another_version_serving_the_workload(
    selector: dict[str, Any], served: set[str], expected: ImplicitPriority
) -> None:
    assert selector_match(WORKLOAD, ResourceSelector.model_validate(selector), served_as=served.__contains__) == expected
    policy = pp("p", selector, namespace="shop")
    assert (select_policy(WORKLOAD, [policy], served_as=served.__contains__) is not None) is (expected != ImplicitPriority.MISMATCH)


def test_an_override_selector_may_name_another_version_serving_the_workload() -> None:
    policy = op("o", [_selector(apiVersion="apps/v2")])
    assert collect_override_rules(WORKLOAD, [policy]) == []
    assert [r.policy_name for r in collect_override_rules(WORKLOAD, [policy], served_as={"apps/v2"}.__contains__)] == ["o"]
