"""The hub's authorizer over the default policy, in memory: who may do what, which denials keep
the credential authorizer's sentence, and the reasons kube's RBAC authorizer gives."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.kube.roleaggregation import aggregated_rules
from controlplane.apiserver.auth.rbac.authorizing import HubAuthorizer
from controlplane.apiserver.auth.rbac.cache import _reconciled
from controlplane.apiserver.auth.rbac.index import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    ROLE,
    ROLE_BINDING,
)
from controlplane.apiserver.auth.rbac.policy import AUTOUPDATE_ANNOTATION, cluster_roles, default_policy_index
from controlplane.apiserver.identity import Decision, RequestAttributes, Role, UserInfo
from controlplane.apiserver.impersonation import (
    ImpersonationDenied,
    ImpersonationInvalid,
    asks_impersonation,
    extra_of_headers,
    impersonate,
)

ADMIN = UserInfo(name="root", role=Role.ADMIN)
VIEWER = UserInfo(name="victor", role=Role.VIEWER)
ALICE = UserInfo(name="alice", role=Role.USER, user_groups=("team-a", "system:authenticated"))
BOB = UserInfo(name="bob", role=Role.USER, user_groups=("system:authenticated",))
AGENT = UserInfo(name="agent:onprem-a", role=Role.AGENT, cluster="onprem-a")
JOIN = UserInfo(name="bootstrap", role=Role.BOOTSTRAP, token_id="bbbbbb")
CAROL = UserInfo(name="carol", role=Role.USER, user_groups=("system:authenticated",))  # admin everywhere




def binding(name: str, ns: str, role: tuple[str, str], subject: tuple[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "roleRef": {"kind": role[0], "name": role[1]},
            "subjects": [{"kind": subject[0], "name": subject[1]}]}


@pytest.fixture
def authorizer() -> HubAuthorizer:
    index = default_policy_index()
    index.put(ROLE_BINDING, binding("team-a-edit", "team-a", (CLUSTER_ROLE, "edit"), ("Group", "team-a")))
    index.put(ROLE, {"metadata": {"name": "cm-reader", "namespace": "team-b"},
                     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["settings"]}]})
    index.put(ROLE_BINDING, binding("bob-cm", "team-b", (ROLE, "cm-reader"), ("User", "bob")))
    carol = binding("carol-admin", "", (CLUSTER_ROLE, "admin"), ("User", "carol"))
    del carol["metadata"]["namespace"]
    index.put(CLUSTER_ROLE_BINDING, carol)
    return HubAuthorizer(index)


def res(user: UserInfo, verb: str, group: str, resource: str, *, ns: str | None = None, name: str | None = None,
        sub: str = "") -> RequestAttributes:
    return RequestAttributes(user=user, verb=verb, api_group=group, resource=resource, subresource=sub,
                             namespace=ns, name=name)


def path(user: UserInfo, verb: str, p: str) -> RequestAttributes:
    return RequestAttributes(user=user, verb=verb, api_group="", resource="", non_resource_path=p)


P = "policy.gpufed.io"
DECISIONS = [
    (res(ADMIN, "delete", "", "secrets", ns="x", name="s"), True),
    (res(ADMIN, "create", "rbac.authorization.k8s.io", "clusterrolebindings"), True),
    # edit in team-a, through a RoleBinding to a ClusterRole: there only
    (res(ALICE, "create", "apps", "deployments", ns="team-a"), True),
    (res(ALICE, "patch", "apps", "deployments", ns="team-a", name="web", sub="scale"), True),
    (res(ALICE, "create", P, "propagationpolicies", ns="team-a"), True),
    (res(ALICE, "create", "policy.karmada.io", "overridepolicies", ns="team-a"), True),
    (res(ALICE, "create", "kubeflow.org", "pytorchjobs", ns="team-a"), True),
    (res(ALICE, "patch", "kubeflow.org", "jaxjobs", ns="team-a", name="t", sub="scale"), True),
    (res(ALICE, "patch", "kubeflow.org", "tfjobs", ns="team-a", name="t", sub="scale"), False),  # no scale
    (res(VIEWER, "get", "kubeflow.org", "paddlejobs", ns="x", name="t", sub="scale"), True),
    (res(ALICE, "create", "trainer.kubeflow.org", "trainjobs", ns="team-a"), True),
    (res(ALICE, "create", "trainer.kubeflow.org", "trainingruntimes", ns="team-a"), True),
    (res(ALICE, "create", "trainer.kubeflow.org", "clustertrainingruntimes"), False),
    (res(VIEWER, "list", "trainer.kubeflow.org", "clustertrainingruntimes"), True),
    (res(VIEWER, "get", "trainer.kubeflow.org", "trainjobs", ns="x", name="t", sub="status"), True),
    (res(ALICE, "get", "", "secrets", ns="team-a", name="s"), True),
    (res(ALICE, "create", "apps", "deployments", ns="team-b"), False),
    (res(ALICE, "list", "apps", "deployments"), False),
    (res(ALICE, "create", P, "clusterpropagationpolicies"), False),
    (res(ALICE, "create", "rbac.authorization.k8s.io", "rolebindings", ns="team-a"), False),  # admin's, not edit's
    (res(ALICE, "get", "cluster.gpufed.io", "clusters", name="a"), False),  # cluster-scoped: not via a RoleBinding
    (res(ALICE, "create", "authorization.k8s.io", "selfsubjectaccessreviews"), True),  # system:basic-user
    (path(ALICE, "get", "/apis/apps/v1"), True),  # system:discovery
    (path(ALICE, "get", "/metrics"), False),
    # a Role with resourceNames
    (res(BOB, "get", "", "configmaps", ns="team-b", name="settings"), True),
    (res(BOB, "get", "", "configmaps", ns="team-b", name="other"), False),
    (res(BOB, "list", "", "configmaps", ns="team-b"), False),
    # viewer tokens: view everywhere plus gpufed:viewer, never Secrets or tokens
    (res(VIEWER, "list", "work.gpufed.io", "works"), True),
    (res(VIEWER, "get", "cluster.gpufed.io", "clusters", name="a", sub="status"), True),
    (res(VIEWER, "list", "", "namespaces"), True),
    (res(VIEWER, "list", "coordination.k8s.io", "leases", ns="gpufed-cluster-lease"), True),
    (res(VIEWER, "get", "reports.gpufed.io", "wastereports", name="last-1h"), True),
    (path(VIEWER, "get", "/metrics"), True),
    (res(VIEWER, "list", "", "componentstatuses"), True),
    (res(VIEWER, "delete", "", "componentstatuses", name="etcd-0"), False),
    (res(ALICE, "list", "", "componentstatuses"), False),  # not in kube's view, edit or admin
    # Admission webhook configurations: cluster-admin's alone, as in kube (no aggregated role names them).
    (res(ADMIN, "create", "admissionregistration.k8s.io", "validatingwebhookconfigurations"), True),
    (res(ALICE, "create", "admissionregistration.k8s.io", "validatingwebhookconfigurations"), False),
    (res(CAROL, "create", "apps", "deployments", ns="any"), True),
    (res(CAROL, "create", "admissionregistration.k8s.io", "validatingwebhookconfigurations"), False),
    (res(ALICE, "delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", name="m"), False),
    (res(VIEWER, "list", "admissionregistration.k8s.io", "mutatingwebhookconfigurations"), False),
    (res(ADMIN, "create", "admissionregistration.k8s.io", "validatingadmissionpolicybindings"), True),
    (res(ALICE, "create", "admissionregistration.k8s.io", "validatingadmissionpolicies"), False),
    (res(CAROL, "update", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", name="b"), False),
    (res(VIEWER, "list", "admissionregistration.k8s.io", "validatingadmissionpolicies"), False),
    (res(VIEWER, "get", "", "secrets", ns="x", name="s"), False),
    # The cluster proxy reads what the member lets the caller read, Secrets included: not for
    # viewers (kube's view has no */proxy), nor edit or admin in a namespace; cluster-admin's.
    (res(VIEWER, "get", "cluster.gpufed.io", "clusters", name="a", sub="proxy"), False),
    (res(ALICE, "get", "cluster.gpufed.io", "clusters", name="a", sub="proxy"), False),
    (res(CAROL, "get", "cluster.gpufed.io", "clusters", name="a", sub="proxy"), False),
    (res(ADMIN, "get", "cluster.gpufed.io", "clusters", name="a", sub="proxy"), True),
    # A namespace's finalize: kube grants it in no aggregated role (its namespace controller's role only).
    (res(ADMIN, "update", "", "namespaces", name="n", sub="finalize"), True),
    (res(CAROL, "update", "", "namespaces", name="n", sub="finalize"), False),
    (res(ALICE, "update", "", "namespaces", ns="team-a", name="team-a", sub="finalize"), False),
    (res(ALICE, "get", "", "namespaces", ns="team-a", name="team-a"), True),  # edit in team-a reads it
    (res(VIEWER, "update", "", "namespaces", name="n", sub="finalize"), False),
    (res(VIEWER, "list", "auth.gpufed.io", "tokens"), False),
    (res(VIEWER, "create", "apps", "deployments", ns="x"), False),
    # credentials: the agent's own cluster only; a join token joins
    (res(AGENT, "watch", "work.gpufed.io", "works", ns="gpufed-es-onprem-a"), True),
    (res(AGENT, "watch", "work.gpufed.io", "works", ns="gpufed-es-other"), False),
    (res(AGENT, "create", "apps", "deployments", ns="team-a"), False),
    (res(JOIN, "create", "auth.gpufed.io", "clusterjoins"), True),
    (res(JOIN, "list", "work.gpufed.io", "works"), False),
]


@pytest.mark.parametrize(("attributes", "allowed"), DECISIONS)
def test_decisions(authorizer: HubAuthorizer, attributes: RequestAttributes, allowed: bool) -> None:
    assert authorizer.authorize(attributes).allowed is allowed


def test_a_credential_denial_keeps_its_sentence_and_an_rbac_denial_has_none(authorizer: HubAuthorizer) -> None:
    agent = authorizer.authorize(res(AGENT, "list", "work.gpufed.io", "works", ns="gpufed-es-other"))
    assert "agents may only read the Works of their own cluster (gpufed-es-onprem-a)" in agent.reason
    assert authorizer.authorize(res(ALICE, "create", "apps", "deployments", ns="team-b")).reason == ""


def test_bindings_take_effect_and_go_away_with_the_index(authorizer: HubAuthorizer) -> None:
    request = res(BOB, "create", "apps", "deployments", ns="team-c")
    assert not authorizer.authorize(request).allowed
    authorizer.index.put(ROLE_BINDING, binding("bob-edit", "team-c", (CLUSTER_ROLE, "edit"), ("User", "bob")))
    assert authorizer.authorize(request).allowed
    authorizer.index.remove(ROLE_BINDING, "team-c", "bob-edit")
    assert not authorizer.authorize(request).allowed


def test_impersonation_needs_the_impersonate_verb(authorizer: HubAuthorizer) -> None:
    acting = impersonate(ADMIN, user="alice", groups=("team-a",), authorizer=authorizer)
    assert (acting.name, acting.groups) == ("alice", ("team-a", "system:authenticated"))
    assert authorizer.authorize(res(acting, "create", "apps", "deployments", ns="team-a")).allowed
    sa = impersonate(ADMIN, user="system:serviceaccount:ci:deployer", groups=(), authorizer=authorizer)
    assert sa.groups == ("system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated")
    with pytest.raises(ImpersonationDenied) as denied:
        impersonate(ALICE, user="bob", groups=(), authorizer=authorizer)
    assert (denied.value.attributes.verb, denied.value.attributes.resource, denied.value.attributes.name) == (
        "impersonate", "users", "bob")
    # kube's message: Go's %v of the ObjectReferences asked for (groups, extras, then the uid).
    with pytest.raises(ImpersonationInvalid, match=r"^requested \[\{Group  team-a    \} \{UserExtra  view  "
                       r"authentication\.k8s\.io/v1  scopes\} \{UID  42  authentication\.k8s\.io/v1  \}\] "
                       "without impersonating a user$"):
        impersonate(ADMIN, user=None, groups=("team-a",), uid="42", extra={"scopes": ["view"]}, authorizer=authorizer)


def test_impersonating_a_uid_and_extras_needs_impersonate_on_uids_and_userextras(authorizer: HubAuthorizer) -> None:
    acting = impersonate(ADMIN, user="alice", groups=(), uid="42", extra={"scopes": ["view", "edit"]},
                         authorizer=authorizer)
    assert (acting.uid, acting.extra, acting.groups) == ("42", (("scopes", ("view", "edit")),), ("system:authenticated",))
    # Who may impersonate users but not uids or extras (kube's checks: group authentication.k8s.io).
    authorizer.index.put(CLUSTER_ROLE, {"metadata": {"name": "as-users"}, "rules": [
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/scopes"], "verbs": ["impersonate"],
         "resourceNames": ["view"]}]})
    bob_may = binding("bob-as", "", (CLUSTER_ROLE, "as-users"), ("User", "bob"))
    del bob_may["metadata"]["namespace"]
    authorizer.index.put(CLUSTER_ROLE_BINDING, bob_may)
    assert impersonate(BOB, user="alice", groups=(), extra={"scopes": ["view"]}, authorizer=authorizer).extra == (
        ("scopes", ("view",)),)
    with pytest.raises(ImpersonationDenied) as denied:
        impersonate(BOB, user="alice", groups=(), uid="42", authorizer=authorizer)
    attrs = denied.value.attributes
    assert (attrs.api_group, attrs.resource, attrs.name) == ("authentication.k8s.io", "uids", "42")
    with pytest.raises(ImpersonationDenied) as denied:
        impersonate(BOB, user="alice", groups=(), extra={"scopes": ["view", "edit"]}, authorizer=authorizer)
    attrs = denied.value.attributes
    assert (attrs.api_group, attrs.resource, attrs.subresource, attrs.name) == (
        "authentication.k8s.io", "userextras", "scopes", "edit")
    for asked in ({"uid": "42"}, {"extra": {"scopes": ["view"]}}):
        with pytest.raises(ImpersonationInvalid):
            impersonate(ADMIN, user=None, groups=(), authorizer=authorizer, **asked)  # type: ignore[arg-type]


def test_a_service_account_impersonated_with_groups_has_only_those_groups(authorizer: HubAuthorizer) -> None:
    sa = impersonate(ADMIN, user="system:serviceaccount:ci:deployer", groups=("team-a",), authorizer=authorizer)
    assert sa.groups == ("team-a", "system:authenticated")


def test_extra_headers_are_read_as_kube_reads_them() -> None:
    headers = [("Impersonate-User", "alice"), ("Impersonate-Extra-Scopes", "view"),
               ("impersonate-extra-scopes", "edit"), ("Impersonate-Extra-Example.com%2fteam", "a"),
               ("Impersonate-Other", "x")]
    assert extra_of_headers(headers) == {"scopes": ["view", "edit"], "example.com/team": ["a"]}
    assert asks_impersonation(["Impersonate-Uid"]) and asks_impersonation(["impersonate-extra-a"])
    assert not asks_impersonation(["Impersonate-Other", "Authorization"])


def test_aggregation_gathers_labelled_roles_in_name_order_once() -> None:
    edit = {"metadata": {"name": "edit"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]}}
    label = {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}
    rule_a = {"apiGroups": ["a"], "resources": ["x"], "verbs": ["get"]}
    rule_b = {"apiGroups": ["b"], "resources": ["y"], "verbs": ["get"]}
    roles = [
        edit,
        {"metadata": {"name": "zz", "labels": label}, "rules": [rule_a]},
        {"metadata": {"name": "aa", "labels": label}, "rules": [rule_b, rule_a]},
        {"metadata": {"name": "unlabelled"}, "rules": [{"apiGroups": ["c"], "resources": ["z"], "verbs": ["*"]}]},
    ]
    assert aggregated_rules(edit, roles) == [rule_b, rule_a]
    assert aggregated_rules(roles[1], roles) is None
    # A selector with an operator kube does not know matches nothing; the others still gather.
    broken = {"matchExpressions": [{"key": "rbac.authorization.k8s.io/aggregate-to-edit", "operator": "Near"}]}
    edit["aggregationRule"]["clusterRoleSelectors"].insert(0, broken)
    assert aggregated_rules(edit, roles) == [rule_b, rule_a]


def test_a_hub_started_before_the_fix_loses_the_viewers_proxy_rule_and_keeps_an_admins_own() -> None:
    """The stored ``gpufed:viewer`` of an older hub granted ``get clusters/proxy``: reconciling it
    with the defaults removes that rule (the role is still autoupdate) and keeps the others; a
    role an admin took off autoupdate is left as it is."""
    [wanted] = [r for r in cluster_roles() if r["metadata"]["name"] == "gpufed:viewer"]
    old_rule = {"verbs": ["get"], "apiGroups": ["cluster.gpufed.io"], "resources": ["clusters/proxy"]}
    stored = {**wanted, "rules": [*wanted["rules"], old_rule]}
    updated = _reconciled(stored, wanted)
    assert updated is not None and updated["rules"] == wanted["rules"]
    assert _reconciled(wanted, wanted) is None
    kept = {**stored, "metadata": {**stored["metadata"], "annotations": {AUTOUPDATE_ANNOTATION: "false"}}}
    assert _reconciled(kept, wanted) is None


def test_a_default_roles_missing_label_is_put_back_when_its_rules_are_whole() -> None:
    """A default role whose rules are as they should be but that lost a label (an admin's edit)
    gets the label back: ``system:aggregate-to-admin`` without its aggregation label would no
    longer lend its rules to ``admin``."""
    [wanted] = [r for r in cluster_roles() if r["metadata"]["name"] == "system:aggregate-to-admin"]
    label = "rbac.authorization.k8s.io/aggregate-to-admin"
    assert label in wanted["metadata"]["labels"]
    labels = {k: v for k, v in wanted["metadata"]["labels"].items() if k != label}
    stored = {**wanted, "metadata": {**wanted["metadata"], "labels": labels}}
    updated = _reconciled(stored, wanted)
    assert updated is not None and updated["metadata"]["labels"][label] == wanted["metadata"]["labels"][label]
    assert updated["rules"] == wanted["rules"]


def test_an_access_review_names_what_allows_it_as_kubes_rbac_authorizer(authorizer: HubAuthorizer) -> None:
    index = authorizer.index
    index.put(ROLE_BINDING, {"metadata": {"name": "ci-view", "namespace": "team-a"},
                             "roleRef": {"kind": CLUSTER_ROLE, "name": "view"},
                             "subjects": [{"kind": "User", "name": "nobody"}, {"kind": "ServiceAccount", "name": "ci"}]})
    ci = UserInfo(name="system:serviceaccount:team-a:ci", role=Role.USER, user_groups=("system:authenticated",))
    cases = [
        (res(ALICE, "create", "apps", "deployments", ns="team-a"),
         'RBAC: allowed by RoleBinding "team-a-edit/team-a" of ClusterRole "edit" to Group "team-a"'),
        (res(CAROL, "delete", "", "secrets", ns="x"),
         'RBAC: allowed by ClusterRoleBinding "carol-admin" of ClusterRole "admin" to User "carol"'),
        (res(BOB, "get", "", "configmaps", ns="team-b", name="settings"),
         'RBAC: allowed by RoleBinding "bob-cm/team-b" of Role "cm-reader" to User "bob"'),
        (res(ci, "list", "", "pods", ns="team-a"),
         'RBAC: allowed by RoleBinding "ci-view/team-a" of ClusterRole "view" to ServiceAccount "ci/team-a"'),
        (res(ADMIN, "delete", "", "nodes"), ""),  # system:masters: kube's privileged-group authorizer gives none
    ]
    for attributes, reason in cases:
        assert authorizer.review(attributes) == Decision(allowed=True, reason=reason)
        assert authorizer.authorize(attributes) == Decision(allowed=True)  # a request's needs no reason
    assert authorizer.review(res(ALICE, "get", "", "secrets", ns="team-b")).reason == ""


def test_a_binding_to_a_missing_role_is_the_denials_reason_as_kubes(authorizer: HubAuthorizer) -> None:
    authorizer.index.put(ROLE_BINDING, binding("ghost", "team-a", (CLUSTER_ROLE, "gone"), ("User", "alice")))
    asked = res(ALICE, "get", "example.com", "widgets", ns="team-a")
    missing = 'clusterrole.rbac.authorization.k8s.io "gone" not found'
    assert authorizer.review(asked).reason == f"RBAC: {missing}"
    assert authorizer.authorize(asked).reason == (
        'widgets.example.com is forbidden: User "alice" cannot get resource "widgets" in API group "example.com" '
        f'in the namespace "team-a": RBAC: {missing}'
    )
    assert authorizer.authorize(res(ALICE, "get", "example.com", "widgets", ns="team-b")).reason == ""
    authorizer.index.put(ROLE_BINDING, binding("ghost-2", "team-a", (ROLE, "gone-too"), ("Group", "team-a")))
    authorizer.index.put(ROLE_BINDING, binding("ghost-3", "team-a", (CLUSTER_ROLE, "gone"), ("Group", "team-a")))
    reason = authorizer.review(asked).reason  # each error once, several in brackets (kube's aggregate)
    assert reason.startswith("RBAC: [") and reason.count(missing) == 1 and '"gone-too" not found' in reason


def test_an_access_review_of_a_viewer_or_agent_gives_no_403_sentence(authorizer: HubAuthorizer) -> None:
    # kube's RBAC authorizer leaves a plain denial's reason empty (kubectl auth can-i: "no"); the
    # Node authorizer an agent's rules stand for gives its reason alone, never the API server's 403.
    create = res(VIEWER, "create", "", "configmaps", ns="default")
    assert authorizer.review(create) == Decision(allowed=False)
    assert authorizer.review(res(VIEWER, "get", "", "secrets", ns="default")) == Decision(allowed=False)
    assert authorizer.authorize(create).reason.startswith('configmaps is forbidden: User "victor" cannot create')
    other_works = res(AGENT, "list", "work.karmada.io", "works", ns="gpufed-es-elsewhere")
    denied = authorizer.authorize(other_works).reason
    reviewed = authorizer.review(other_works)
    assert not reviewed.allowed and reviewed.reason and "forbidden" not in reviewed.reason
    assert denied.endswith(f": {reviewed.reason}")
