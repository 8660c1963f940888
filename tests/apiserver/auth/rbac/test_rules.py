"""RBAC rule matching and coverage, one row per case, as kube's rbac authorizer and
escalation check decide them."""

from __future__ import annotations

import pytest

from controlplane.apiserver.auth.rbac.rules import (
    PolicyRule,
    compact,
    compact_string,
    rule_allows,
    uncovered,
)
from controlplane.apiserver.identity import RequestAttributes, Role, UserInfo

ALICE = UserInfo(name="alice", role=Role.USER, user_groups=("team-a", "system:authenticated"))


def rule(**fields: object) -> PolicyRule:
    return PolicyRule.of(fields)


def req(verb: str, group: str, resource: str, *, sub: str = "", ns: str | None = "ns", name: str | None = None) -> RequestAttributes:
    return RequestAttributes(user=ALICE, verb=verb, api_group=group, resource=resource, subresource=sub, namespace=ns, name=name)


def path(verb: str, p: str) -> RequestAttributes:
    return RequestAttributes(user=ALICE, verb=verb, api_group="", resource="", non_resource_path=p)


DEPLOY = rule(verbs=["get", "create"], apiGroups=["apps"], resources=["deployments"])

MATCHES = [
    (DEPLOY, req("create", "apps", "deployments"), True),
    (DEPLOY, req("delete", "apps", "deployments"), False),
    (DEPLOY, req("create", "", "deployments"), False),
    (DEPLOY, req("create", "apps", "statefulsets"), False),
    # a subresource needs its own entry
    (DEPLOY, req("get", "apps", "deployments", sub="scale"), False),
    (rule(verbs=["get"], apiGroups=["apps"], resources=["deployments/scale"]), req("get", "apps", "deployments", sub="scale"), True),
    (rule(verbs=["get"], apiGroups=["apps"], resources=["*/scale"]), req("get", "apps", "statefulsets", sub="scale"), True),
    (rule(verbs=["get"], apiGroups=["apps"], resources=["*/scale"]), req("get", "apps", "statefulsets"), False),
    (rule(verbs=["*"], apiGroups=["*"], resources=["*"]), req("deletecollection", "x.io", "things", sub="status"), True),
    # resourceNames restrict to named objects: never a list or an unnamed create
    (rule(verbs=["get", "list"], apiGroups=[""], resources=["configmaps"], resourceNames=["cfg"]), req("get", "", "configmaps", name="cfg"), True),
    (rule(verbs=["get", "list"], apiGroups=[""], resources=["configmaps"], resourceNames=["cfg"]), req("get", "", "configmaps", name="other"), False),
    (rule(verbs=["get", "list"], apiGroups=[""], resources=["configmaps"], resourceNames=["cfg"]), req("list", "", "configmaps"), False),
    # non-resource URLs: exact, "*", or a prefix ending in "*"
    (rule(verbs=["get"], nonResourceURLs=["/healthz"]), path("get", "/healthz"), True),
    (rule(verbs=["get"], nonResourceURLs=["/healthz"]), path("get", "/healthz/etcd"), False),
    (rule(verbs=["get"], nonResourceURLs=["/apis/*"]), path("get", "/apis/apps/v1"), True),
    (rule(verbs=["get"], nonResourceURLs=["*"]), path("get", "/metrics"), True),
    (rule(verbs=["get"], nonResourceURLs=["/metrics"]), path("post", "/metrics"), False),
    # a resource rule never allows a path, nor a path rule a resource
    (DEPLOY, path("get", "/apis"), False),
    (rule(verbs=["*"], nonResourceURLs=["*"]), req("get", "apps", "deployments"), False),
]


@pytest.mark.parametrize(("policy_rule", "attributes", "allowed"), MATCHES)
def test_rule_matching(policy_rule: PolicyRule, attributes: RequestAttributes, allowed: bool) -> None:
    assert rule_allows(policy_rule, attributes) is allowed


COVERS = [
    ([rule(verbs=["*"], apiGroups=["*"], resources=["*"])], DEPLOY, []),
    ([DEPLOY], rule(verbs=["get"], apiGroups=["apps"], resources=["deployments"]), []),
    ([DEPLOY], rule(verbs=["get", "delete"], apiGroups=["apps"], resources=["deployments"]),
     [rule(verbs=["delete"], apiGroups=["apps"], resources=["deployments"])]),
    ([rule(verbs=["get"], apiGroups=["apps"], resources=["*/scale"])],
     rule(verbs=["get"], apiGroups=["apps"], resources=["deployments/scale"]), []),
    # holding one named object does not cover all of them
    ([rule(verbs=["get"], apiGroups=[""], resources=["configmaps"], resourceNames=["a"])],
     rule(verbs=["get"], apiGroups=[""], resources=["configmaps"]),
     [rule(verbs=["get"], apiGroups=[""], resources=["configmaps"])]),
    ([rule(verbs=["get"], apiGroups=[""], resources=["configmaps"])],
     rule(verbs=["get"], apiGroups=[""], resources=["configmaps"], resourceNames=["a", "b"]), []),
    ([rule(verbs=["get"], nonResourceURLs=["/apis/*"])], rule(verbs=["get"], nonResourceURLs=["/apis/apps"]), []),
    ([rule(verbs=["get"], nonResourceURLs=["/apis"])], rule(verbs=["get"], nonResourceURLs=["/metrics"]),
     [rule(verbs=["get"], nonResourceURLs=["/metrics"])]),
]


@pytest.mark.parametrize(("owner", "wanted", "missing"), COVERS)
def test_coverage_lists_each_missing_right(owner: list[PolicyRule], wanted: PolicyRule, missing: list[PolicyRule]) -> None:
    assert uncovered(owner, [wanted]) == missing


def test_missing_rights_print_as_kube_compacts_them() -> None:
    wanted = rule(verbs=["get", "delete"], apiGroups=["apps"], resources=["deployments", "statefulsets"])
    printed = sorted(compact_string(r) for r in compact(uncovered([], [wanted])))
    assert printed == [
        '{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "delete"]}',
        '{APIGroups:["apps"], Resources:["statefulsets"], Verbs:["get" "delete"]}',
    ]
    assert compact_string(rule(verbs=["get"], nonResourceURLs=["/metrics"])) == '{NonResourceURLs:["/metrics"], Verbs:["get"]}'
