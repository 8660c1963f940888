"""The role rules, one row per (role, request): who may do what, and what a denial says."""

from __future__ import annotations

import pytest

from controlplane.apiserver.auth import RoleAuthorizer
from controlplane.apiserver.identity import RequestAttributes, Role, UserInfo

ADMIN = UserInfo(name="alice", role=Role.ADMIN, token_id="aaaaaa")
VIEWER = UserInfo(name="victor", role=Role.VIEWER, token_id="vvvvvv")
AGENT = UserInfo(name="agent:onprem-a", role=Role.AGENT, cluster="onprem-a", token_id="gggggg")
UNSCOPED_AGENT = UserInfo(name="agent:?", role=Role.AGENT, cluster=None)
BOOTSTRAP = UserInfo(name="bootstrap", role=Role.BOOTSTRAP, token_id="bbbbbb")

W, C, L = "work.gpufed.io", "cluster.gpufed.io", "coordination.k8s.io"
OWN_ES, OTHER_ES = "gpufed-es-onprem-a", "gpufed-es-cloud-h100"
LEASES = "gpufed-cluster-lease"


def res(
    verb: str,
    group: str,
    resource: str,
    *,
    sub: str = "",
    ns: str | None = None,
    name: str | None = None,
) -> dict[str, object]:
    return {"verb": verb, "api_group": group, "resource": resource, "subresource": sub, "namespace": ns, "name": name}


def path(verb: str, p: str) -> dict[str, object]:
    return {"verb": verb, "api_group": "", "resource": "", "non_resource_path": p}


def decide(user: UserInfo, request: dict[str, object]) -> tuple[bool, str]:
    decision = RoleAuthorizer().authorize(RequestAttributes(user=user, **request))  # type: ignore[arg-type]
    return decision.allowed, decision.reason


ALLOWED = [
    # admin: everything
    (ADMIN, res("delete", "", "secrets", ns="default", name="s")),
    (ADMIN, res("create", "auth.gpufed.io", "tokens")),
    (ADMIN, res("deletecollection", W, "works", ns=OTHER_ES)),
    (ADMIN, path("post", "/anything")),
    # viewer: reads everywhere except Secrets and credentials
    (VIEWER, res("get", "apps", "deployments", ns="ml", name="train")),
    (VIEWER, res("list", W, "works")),
    (VIEWER, res("watch", C, "clusters")),
    (VIEWER, res("get", C, "clusters", sub="status", name="onprem-a")),
    (VIEWER, res("list", "", "configmaps", ns="ml")),
    (VIEWER, path("get", "/metrics")),
    (VIEWER, path("get", "/ui/waste")),
    (VIEWER, path("get", "/apis")),
    # agent: its own Works (read), their status (write), its Cluster, its Lease, discovery
    (AGENT, res("list", W, "works", ns=OWN_ES)),
    (AGENT, res("watch", W, "works", ns=OWN_ES)),
    (AGENT, res("get", W, "works", ns=OWN_ES, name="w1")),
    (AGENT, res("update", W, "works", sub="status", ns=OWN_ES, name="w1")),
    (AGENT, res("patch", W, "works", sub="status", ns=OWN_ES, name="w1")),
    (AGENT, res("create", C, "clusters", name="onprem-a")),
    (AGENT, res("get", C, "clusters", name="onprem-a")),
    (AGENT, res("update", C, "clusters", name="onprem-a")),
    (AGENT, res("patch", C, "clusters", name="onprem-a")),
    (AGENT, res("update", C, "clusters", sub="status", name="onprem-a")),
    (AGENT, res("patch", C, "clusters", sub="status", name="onprem-a")),
    (AGENT, res("create", L, "leases", ns=LEASES, name="onprem-a")),
    (AGENT, res("update", L, "leases", ns=LEASES, name="onprem-a")),
    (AGENT, res("get", L, "leases", ns=LEASES, name="onprem-a")),
    (AGENT, res("list", "config.karmada.io", "resourceinterpretercustomizations")),
    (AGENT, res("watch", "config.karmada.io", "resourceinterpretercustomizations")),
    (AGENT, res("get", "config.karmada.io", "resourceinterpretercustomizations", name="volcano-job")),
    (AGENT, path("get", "/apis")),
    (AGENT, path("get", "/apis/work.gpufed.io/v1alpha1")),
    (AGENT, path("get", "/api/v1")),
    (AGENT, path("get", "/openapi/v3")),
    (AGENT, path("get", "/version")),
    (AGENT, path("get", "/readyz")),
    # bootstrap: the token exchange and discovery
    (BOOTSTRAP, res("create", "auth.gpufed.io", "clusterjoins")),
    (BOOTSTRAP, path("post", "/apis/auth.gpufed.io/v1alpha1/clusterjoins")),
    (BOOTSTRAP, path("get", "/apis")),
    (BOOTSTRAP, path("get", "/version")),
    (BOOTSTRAP, path("get", "/.well-known/gpufed/ca.crt")),
    (BOOTSTRAP, path("get", "/healthz")),
    (BOOTSTRAP, path("get", "/livez")),
    (BOOTSTRAP, path("get", "/openapi/v2")),
    (BOOTSTRAP, path("get", "/version/")),
    (BOOTSTRAP, path("get", "/ui/dashboard.js")),
    (AGENT, path("get", "/.well-known/gpufed/ca.crt")),
]


@pytest.mark.parametrize(("user", "request_"), ALLOWED)
def test_allowed(user: UserInfo, request_: dict[str, object]) -> None:
    allowed, reason = decide(user, request_)
    assert allowed, reason


DENIED = [
    # viewer
    (VIEWER, res("create", "apps", "deployments", ns="ml"), 'deployments.apps is forbidden: User "victor" cannot create resource "deployments" in API group "apps" in the namespace "ml": viewers have read-only access'),
    (VIEWER, res("delete", W, "works", ns=OWN_ES, name="w"), "read-only"),
    (VIEWER, res("patch", C, "clusters", sub="status", name="x"), 'cannot patch resource "clusters/status"'),
    (VIEWER, res("get", "", "secrets", ns="ml", name="s"), 'secrets "s" is forbidden: User "victor" cannot get resource "secrets" in API group "" in the namespace "ml": viewers may not read Secrets'),
    (VIEWER, res("list", "", "secrets"), 'cannot list resource "secrets" in API group "" at the cluster scope'),
    (VIEWER, res("watch", "", "secrets", ns="ml"), "may not read Secrets"),
    (VIEWER, res("list", "auth.gpufed.io", "tokens"), "credentials"),
    (VIEWER, path("post", "/apis/auth.gpufed.io/v1alpha1/clusterjoins"), 'forbidden: User "victor" cannot post path "/apis/auth.gpufed.io/v1alpha1/clusterjoins"'),
    # agent: other clusters' Works
    (AGENT, res("list", W, "works", ns=OTHER_ES), 'works.work.gpufed.io is forbidden: User "agent:onprem-a" cannot list resource "works" in API group "work.gpufed.io" in the namespace "gpufed-es-cloud-h100": agents may only read the Works of their own cluster (gpufed-es-onprem-a)'),
    (AGENT, res("get", W, "works", ns=OTHER_ES, name="w1"), "own cluster (gpufed-es-onprem-a)"),
    (AGENT, res("watch", W, "works"), 'cannot watch resource "works" in API group "work.gpufed.io" at the cluster scope'),
    (AGENT, res("update", W, "works", sub="status", ns=OTHER_ES, name="w1"), "update the status of the Works of their own cluster"),
    # agent: writing Works themselves
    (AGENT, res("create", W, "works", ns=OWN_ES), "may only read the Works in gpufed-es-onprem-a and update their status"),
    (AGENT, res("update", W, "works", ns=OWN_ES, name="w1"), "update their status"),
    (AGENT, res("delete", W, "works", ns=OWN_ES, name="w1"), "update their status"),
    # agent: other Clusters, and verbs beyond get/create/update
    (AGENT, res("update", C, "clusters", sub="status", name="cloud-h100"), 'clusters.cluster.gpufed.io "cloud-h100" is forbidden: User "agent:onprem-a" cannot update resource "clusters/status" in API group "cluster.gpufed.io" at the cluster scope: agents may only write their own Cluster (onprem-a)'),
    (AGENT, res("create", C, "clusters", name="cloud-h100"), "own Cluster (onprem-a)"),
    (AGENT, res("get", C, "clusters", name="cloud-h100"), "own Cluster (onprem-a)"),
    (AGENT, res("create", C, "clusters"), "does not name a Cluster"),
    (AGENT, res("list", C, "clusters"), "get, create and update their own Cluster"),
    (AGENT, res("delete", C, "clusters", name="onprem-a"), "get, create and update their own Cluster"),
    (AGENT, res("create", C, "clusters", sub="status", name="onprem-a"), "get, create and update their own Cluster"),
    # agent: other Leases
    (AGENT, res("update", L, "leases", ns=LEASES, name="cloud-h100"), "their own Lease (gpufed-cluster-lease/onprem-a)"),
    (AGENT, res("update", L, "leases", ns="default", name="onprem-a"), "own Lease"),
    (AGENT, res("delete", L, "leases", ns=LEASES, name="onprem-a"), "own Lease"),
    (AGENT, res("list", L, "leases", ns=LEASES), "own Lease"),
    # agent: anything else
    (AGENT, res("get", "", "secrets", ns=OWN_ES, name="s"), "only access their own Cluster, Lease and Works"),
    (AGENT, res("list", W, "resourcebindings", ns="ml"), "only access their own Cluster, Lease and Works"),
    (AGENT, res("create", "auth.gpufed.io", "clusterjoins"), "only access"),
    (AGENT, res("update", "config.karmada.io", "resourceinterpretercustomizations", name="x"), "may only read ResourceInterpreterCustomizations"),
    (AGENT, res("delete", "config.karmada.io", "resourceinterpretercustomizations", name="x"), "may only read"),
    (AGENT, res("update", "config.karmada.io", "resourceinterpretercustomizations", sub="status", name="x"), "may only read"),
    (AGENT, path("get", "/metrics"), 'forbidden: User "agent:onprem-a" cannot get path "/metrics": agents may only read what every user may'),
    (AGENT, path("post", "/apis"), "may only read what every user may"),
    (AGENT, path("get", "/healthz/etcd"), "(not their single checks)"),
    (AGENT, path("head", "/version"), 'cannot head path "/version"'),
    (UNSCOPED_AGENT, res("list", W, "works", ns=OWN_ES), "not scoped to a cluster"),
    # bootstrap: nothing but the exchange
    (BOOTSTRAP, res("list", W, "works", ns=OWN_ES), 'works.work.gpufed.io is forbidden: User "bootstrap" cannot list resource "works"'),
    (BOOTSTRAP, res("create", C, "clusters", name="x"), "may only join a cluster"),
    (BOOTSTRAP, res("create", "auth.gpufed.io", "tokens"), "may only join a cluster"),
    (BOOTSTRAP, res("get", "auth.gpufed.io", "clusterjoins", name="x"), "may only join a cluster"),
    (BOOTSTRAP, path("get", "/metrics"), "may only join a cluster"),
    (BOOTSTRAP, path("post", "/apis/auth.gpufed.io/v1alpha1/tokens"), "may only join a cluster"),
    # bootstrap: what kube's bootstrap tokens get from RBAC's defaults (system:discovery and public
    # info): /healthz, not its single checks, which are system:monitoring's
    (BOOTSTRAP, path("get", "/healthz/etcd"), 'forbidden: User "bootstrap" cannot get path "/healthz/etcd": a bootstrap token may only join'),
    (BOOTSTRAP, path("get", "/readyz/informer-sync"), "not their single checks"),
    (BOOTSTRAP, path("get", "/livez/ping"), "may only join a cluster"),
    (BOOTSTRAP, path("head", "/healthz"), "may only join a cluster"),
    (BOOTSTRAP, path("get", "/debug/writes"), "may only join a cluster"),
    (BOOTSTRAP, path("get", "/versions"), "may only join a cluster"),
    # viewer: what RBAC gives its groups (view, gpufed:viewer, discovery), no debug dumps
    (VIEWER, path("get", "/debug/writes"), 'forbidden: User "victor" cannot get path "/debug/writes"'),
    (VIEWER, path("get", "/debug/api_priority_and_fairness/dump_requests"), "viewers may only read"),
]


@pytest.mark.parametrize(("user", "request_", "reason"), DENIED)
def test_denied_with_a_reason_naming_the_missing_right(user: UserInfo, request_: dict[str, object], reason: str) -> None:
    allowed, actual = decide(user, request_)
    assert not allowed
    assert reason in actual


@pytest.mark.parametrize("user", [ADMIN, VIEWER, AGENT, BOOTSTRAP])
def test_every_denial_names_its_subject_and_every_allow_is_silent(user: UserInfo) -> None:
    for request_ in [res("delete", "", "secrets", ns="x", name="y"), path("get", "/version")]:
        allowed, reason = decide(user, request_)
        assert (reason == "") is allowed
        if not allowed:
            assert f'User "{user.name}" cannot' in reason, reason
