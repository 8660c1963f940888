"""RBAC on a real hub (real etcd, real HTTPS, the real kubectl): a team given ``edit`` in its
namespace works there and nowhere else, with kube's 403; access reviews answer the same;
aggregation grows ``edit``; escalation is refused with kube's message.

The tests marked :data:`SHARED_HUB` share the module's hub: each has namespaces, groups and users
of its own names. The aggregation test has a hub of its own: it changes ``edit`` and ``admin``,
which the others' users hold."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from multidict import CIMultiDict

from controlplane.apiserver.identity import Role
from controlplane.apiserver.kubeconfig import load_kubeconfig, write_kubeconfig
from controlplane.hub import Hub

from ..realhub import SHARED_HUB, Client, eventually

RBAC = "/apis/rbac.authorization.k8s.io/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"


async def user_token(hub: Hub, name: str, *groups: str) -> str:
    assert hub.tokens is not None
    return (await hub.tokens.create(role=Role.USER, name=name, groups=groups)).token


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
    }


def policy(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1", "kind": kind, "metadata": meta,
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]},
    }


def binding(name: str, namespace: str, role_kind: str, role: str, subjects: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def access(verb: str, group: str, resource: str, namespace: str | None = None) -> dict[str, Any]:
    attributes = {"verb": verb, "group": group, "resource": resource, **({"namespace": namespace} if namespace else {})}
    return {"resourceAttributes": attributes}


async def give_team_edit(admin: Client, team: str, *, role: str = "edit", elsewhere: str = "team-b") -> None:
    """Group ``team`` gets ``role`` in namespace ``team``; namespace ``elsewhere`` is not theirs."""
    for namespace in (team, elsewhere):
        await admin("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    status, body = await admin("POST", f"{RBAC}/namespaces/{team}/rolebindings", binding(
        f"{team}-{role}", team, "ClusterRole", role, [{"kind": "Group", "name": team}]))
    assert status == 201, body


async def can(client: Client, spec: dict[str, Any]) -> bool:
    status, review = await client("POST", f"{AUTHZ}/selfsubjectaccessreviews",
                                  {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec})
    assert status == 201, review
    return bool(review["status"]["allowed"])


@SHARED_HUB
async def test_a_team_editor_writes_in_its_namespace_and_nowhere_else(
    hub: Hub, session: aiohttp.ClientSession, admin: Client
) -> None:
    await give_team_edit(admin, "team-a")
    alice = Client(session, hub, await user_token(hub, "alice", "team-a"))

    async def edit_is_aggregated() -> bool:
        return await can(alice, access("create", "apps", "deployments", "team-a"))

    await eventually(edit_is_aggregated)
    status, body = await alice("POST", "/apis/apps/v1/namespaces/team-a/deployments", deployment("web", "team-a"))
    assert status == 201, body
    status, body = await alice("POST", "/apis/policy.gpufed.io/v1alpha1/namespaces/team-a/propagationpolicies",
                               policy("PropagationPolicy", "web", "team-a"))
    assert status == 201, body
    assert (await alice("GET", "/apis/apps/v1/namespaces/team-a/deployments"))[0] == 200

    status, body = await alice("POST", "/apis/apps/v1/namespaces/team-b/deployments", deployment("web", "team-b"))
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'deployments.apps is forbidden: User "alice" cannot create resource "deployments" in API group "apps" '
        'in the namespace "team-b"'
    )
    status, body = await alice("POST", "/apis/policy.gpufed.io/v1alpha1/clusterpropagationpolicies",
                               policy("ClusterPropagationPolicy", "everything"))
    assert status == 403
    assert body["message"] == (
        'clusterpropagationpolicies.policy.gpufed.io is forbidden: User "alice" cannot create resource '
        '"clusterpropagationpolicies" in API group "policy.gpufed.io" at the cluster scope'
    )
    status, body = await alice("GET", "/apis/apps/v1/deployments")
    assert status == 403 and "at the cluster scope" in body["message"]
    # Nothing the team tried outside its namespace was stored.
    status, listed = await admin("GET", "/apis/apps/v1/namespaces/team-b/deployments")
    assert (status, listed["items"]) == (200, [])

    # The same answers from the reviews: SelfSubjectAccessReview for alice herself,
    # SubjectAccessReview for an admin asking about her, which alice may not ask.
    assert not await can(alice, access("create", "apps", "deployments", "team-b"))
    assert not await can(alice, access("create", "policy.gpufed.io", "clusterpropagationpolicies"))
    for namespace, allowed in (("team-a", True), ("team-b", False)):
        status, review = await admin("POST", f"{AUTHZ}/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "alice", "groups": ["team-a"], **access("create", "apps", "deployments", namespace)}})
        assert (status, review["status"]["allowed"]) == (201, allowed)
    status, body = await alice("POST", f"{AUTHZ}/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "bob", **access("get", "", "secrets", "team-b")}})
    assert status == 403


async def test_a_cluster_role_labelled_aggregate_to_edit_adds_to_edit_and_admin(admin: Client) -> None:
    widget_rule = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}
    status, body = await admin("POST", f"{RBAC}/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widget-reader", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [widget_rule]})
    assert status == 201, body

    def has_rule(role: str, present: bool) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            status, body = await admin("GET", f"{RBAC}/clusterroles/{role}")
            assert status == 200
            return (widget_rule in body["rules"]) is present

        return check

    await eventually(has_rule("edit", True))
    await eventually(has_rule("admin", True))  # admin aggregates edit
    assert (await has_rule("view", False)())
    assert (await admin("DELETE", f"{RBAC}/clusterroles/widget-reader"))[0] == 200
    await eventually(has_rule("edit", False))


@SHARED_HUB
async def test_escalation_is_refused_with_kubes_message(
    hub: Hub, session: aiohttp.ClientSession, admin: Client
) -> None:
    await give_team_edit(admin, "ops-a", role="admin", elsewhere="ops-b")
    dana = Client(session, hub, await user_token(hub, "dana", "ops-a"))

    async def admin_is_aggregated() -> bool:  # admin's own rules, and edit's through it
        return await can(dana, access("create", "rbac.authorization.k8s.io", "roles", "ops-a")) and await can(
            dana, access("create", "apps", "deployments", "ops-a")
        )

    await eventually(admin_is_aggregated)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "deployer", "namespace": "ops-a"},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "create"]}]}
    status, body = await dana("POST", f"{RBAC}/namespaces/ops-a/roles", role)
    assert status == 201, body  # rights she holds herself
    quota = {**role, "metadata": {"name": "quota-writer", "namespace": "ops-a"},
             "rules": [{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["create"]}]}
    status, body = await dana("POST", f"{RBAC}/namespaces/ops-a/roles", quota)
    assert status == 403
    assert body["message"] == (
        'roles.rbac.authorization.k8s.io "quota-writer" is forbidden: user "dana" (groups=["ops-a" '
        '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["resourcequotas"], Verbs:["create"]}'
    )
    status, body = await dana("POST", f"{RBAC}/namespaces/ops-a/rolebindings", binding(
        "root", "ops-a", "ClusterRole", "cluster-admin", [{"kind": "User", "name": "dana"}]))
    assert status == 403
    assert body["message"].startswith(
        'rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "dana" (groups=["ops-a" '
        '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
    )
    assert '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}' in body["message"]
    # Binding a role she holds is fine, and the binding's roleRef cannot change afterwards.
    status, body = await dana("POST", f"{RBAC}/namespaces/ops-a/rolebindings", binding(
        "evan-deployer", "ops-a", "Role", "deployer", [{"kind": "User", "name": "evan"}]))
    assert status == 201, body
    assert body["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"  # defaulted, as kube does
    changed = {**body, "roleRef": {**body["roleRef"], "kind": "ClusterRole", "name": "view"}}
    status, body = await admin("PUT", f"{RBAC}/namespaces/ops-a/rolebindings/evan-deployer", changed)
    assert (status, body["reason"]) == (422, "Invalid")
    assert "roleRef: Invalid value" in body["message"] and "cannot change roleRef" in body["message"]


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=60, check=False)


@SHARED_HUB
async def test_kubectl_auth_can_i_list_whoami_and_as(hub: Hub, tmp_path: Path) -> None:
    # Giving a team a namespace, as the README says: kubectl create namespace + rolebinding.
    for args in (("create", "namespace", "ml-a"),
                 ("create", "rolebinding", "ml-a-edit", "--clusterrole=edit", "--group=ml-a", "-n", "ml-a")):
        created = await asyncio.to_thread(kubectl, hub.kubeconfig_path, *args)
        assert created.returncode == 0, created.stderr
    token = await user_token(hub, "fay", "ml-a")
    config = tmp_path / "fay.kubeconfig"
    write_kubeconfig(config, server=hub.url, ca_pem=load_kubeconfig(hub.kubeconfig_path).ca_pem, token=token, user="fay")

    async def run(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(kubectl, path, *args)

    async def fay_may_create() -> bool:
        return (await run(config, "auth", "can-i", "create", "deployments", "-n", "ml-a")).stdout.strip() == "yes"

    await eventually(fay_may_create)
    denied = await run(config, "auth", "can-i", "create", "deployments", "-n", "ml-b")
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    cpp = await run(config, "auth", "can-i", "create", "clusterpropagationpolicies.policy.gpufed.io")
    assert cpp.stdout.strip() == "no"

    listed = await run(config, "auth", "can-i", "--list", "-n", "ml-a")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert "create" in rows["deployments.apps"] and "delete" in rows["deployments.apps"]
    assert "create" in rows["propagationpolicies.policy.gpufed.io"]
    assert "selfsubjectaccessreviews.authorization.k8s.io" in rows

    whoami = await run(config, "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    assert '"username": "fay"' in whoami.stdout and '"ml-a"' in whoami.stdout

    # An admin asks on fay's behalf through impersonation (kubectl --as / --as-group).
    as_fay = await run(hub.kubeconfig_path, "auth", "can-i", "create", "deployments", "-n", "ml-a",
                         "--as", "fay", "--as-group", "ml-a")
    assert as_fay.stdout.strip() == "yes", as_fay.stderr
    without_group = await run(hub.kubeconfig_path, "auth", "can-i", "create", "deployments", "-n", "ml-a",
                              "--as", "fay")
    assert without_group.stdout.strip() == "no"
    # ... with a uid (kubectl --as-uid): kube's user.Info carries it.
    as_uid = await run(hub.kubeconfig_path, "auth", "whoami", "-o", "json", "--as", "fay", "--as-uid", "u-42")
    assert as_uid.returncode == 0, as_uid.stderr
    assert json.loads(as_uid.stdout)["status"]["userInfo"] == {
        "username": "fay", "uid": "u-42", "groups": ["system:authenticated"]}
    # fay may not impersonate anyone.
    impersonating = await run(config, "get", "deployments", "-n", "ml-a", "--as", "gus")
    assert impersonating.returncode != 0
    assert 'users "gus" is forbidden: User "fay" cannot impersonate resource "users" in API group ""' in impersonating.stderr


@SHARED_HUB
async def test_impersonated_extras_reach_the_request_with_kubes_checks(hub: Hub, session: aiohttp.ClientSession) -> None:
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    whoami = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}

    async def as_(token: str, headers: list[tuple[str, str]]) -> tuple[int, dict[str, Any]]:
        all_headers = [("Authorization", f"Bearer {token}"), *headers]
        async with session.post(f"{hub.url}{whoami}", json=review, headers=CIMultiDict(all_headers)) as resp:
            return resp.status, await resp.json()

    extras = [("Impersonate-User", "alice"), ("Impersonate-Extra-Scopes", "view"), ("Impersonate-Extra-Scopes", "edit"),
              ("Impersonate-Extra-Example.com%2Fteam", "a")]
    code, answer = await as_(admin.token, extras)
    assert code == 201, answer
    assert answer["status"]["userInfo"] == {"username": "alice", "groups": ["system:authenticated"],
                                            "extra": {"example.com/team": ["a"], "scopes": ["view", "edit"]}}
    # Extras or a uid without a user: kube's 400.
    code, answer = await as_(admin.token, [("Impersonate-Extra-Scopes", "view")])
    assert (code, answer["reason"]) == (400, "BadRequest"), answer
    assert "without impersonating a user" in answer["message"]
    # One who may impersonate users but no extras: kube's 403 names the extra.
    status, body = await admin("POST", f"{RBAC}/clusterroles", {
        "metadata": {"name": "hal-as-users"}, "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]})
    assert status == 201, body
    status, body = await admin("POST", f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "hal-as-users"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "hal-as-users"},
        "subjects": [{"kind": "User", "name": "hal"}]})
    assert status == 201, body
    hal = await user_token(hub, "hal")

    async def hal_may_impersonate() -> bool:
        return (await as_(hal, [("Impersonate-User", "alice")]))[0] == 201

    await eventually(hal_may_impersonate)
    code, answer = await as_(hal, extras[:2])
    denied = (
        'userextras.authentication.k8s.io "view" is forbidden: User "hal" cannot impersonate resource '
        '"userextras/scopes" in API group "authentication.k8s.io" at the cluster scope'
    )
    assert (code, answer["message"]) == (403, denied), answer
    # Bound to a role that does not exist: kube's 403 ends with the authorizer's reason.
    status, body = await admin("POST", f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "hal-ghost"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ghost"},
        "subjects": [{"kind": "User", "name": "hal"}]})
    assert status == 201, body
    ghost = f'{denied}: RBAC: clusterrole.rbac.authorization.k8s.io "ghost" not found'

    async def reason_given() -> bool:
        return (await as_(hal, extras[:2]))[1].get("message") == ghost

    await eventually(reason_given)
    assert answer["details"] == {"name": "view", "group": "authentication.k8s.io", "kind": "userextras"}


@SHARED_HUB
async def test_reviews_refuse_invalid_specs_with_kubes_causes(admin: Client) -> None:
    both = {"resourceAttributes": {"verb": "get", "resource": "pods"}, "nonResourceAttributes": {"path": "/x", "verb": "get"}}
    status, body = await admin("POST", f"{AUTHZ}/selfsubjectaccessreviews", {"kind": "SelfSubjectAccessReview", "spec": both})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.nonResourceAttributes"
    status, body = await admin("POST", f"{AUTHZ}/subjectaccessreviews",
                               {"kind": "SubjectAccessReview", "spec": access("get", "", "pods", "a")})
    assert status == 422 and "at least one of user or group must be specified" in body["message"]
    status, body = await admin("POST", f"{AUTHZ}/namespaces/a/localsubjectaccessreviews", {
        "kind": "LocalSubjectAccessReview", "spec": {"user": "alice", **access("get", "", "pods", "b")}})
    assert status == 422 and "must match metadata.namespace" in body["message"]
    status, body = await admin("POST", f"{AUTHZ}/namespaces/a/localsubjectaccessreviews", {
        "kind": "LocalSubjectAccessReview", "spec": {"user": "root", "groups": ["system:masters"],
                                                     **access("delete", "", "secrets", "a")}})
    assert (status, body["status"]["allowed"], body["metadata"]["namespace"]) == (201, True, "a")
    # What allows a subject is named as kube's RBAC authorizer names it.
    status, body = await admin("POST", f"{AUTHZ}/subjectaccessreviews", {"kind": "SubjectAccessReview", "spec": {
        "user": "zed", "groups": ["system:authenticated"], **access("create", "authorization.k8s.io",
                                                                      "selfsubjectaccessreviews", "")}})
    assert (status, body["status"]) == (201, {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding '
                                              '"system:basic-user" of ClusterRole "system:basic-user" to Group '
                                              '"system:authenticated"'})
    # A rules review is of one namespace, as kube's (kubectl sends its context's).
    status, body = await admin("POST", f"{AUTHZ}/selfsubjectrulesreviews", {"kind": "SelfSubjectRulesReview", "spec": {}})
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", "no namespace on request")
    status, body = await admin("POST", f"{AUTHZ}/selfsubjectrulesreviews",
                               {"kind": "SelfSubjectRulesReview", "spec": {"namespace": "a"}})
    assert (status, body["spec"]) == (201, {})  # kube's answer is the status alone


@SHARED_HUB
async def test_a_viewer_token_reads_and_its_denial_is_kubes_message(hub: Hub, session: aiohttp.ClientSession) -> None:
    assert hub.tokens is not None
    viewer = Client(session, hub, (await hub.tokens.create(role=Role.VIEWER, name="dashboards")).token)
    assert (await viewer("GET", "/apis/work.gpufed.io/v1alpha1/works"))[0] == 200
    assert (await viewer("GET", "/api/v1/namespaces/default/secrets"))[0] == 403
    status, body = await viewer("POST", "/api/v1/namespaces/default/configmaps",
                                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert status == 403
    assert body["message"].startswith(
        'configmaps is forbidden: User "dashboards" cannot create resource "configmaps" in API group "" '
        'in the namespace "default": a viewer token may only read'
    )


@SHARED_HUB
async def test_a_list_or_watch_of_one_named_object_is_authorized_by_its_resource_names(
    hub: Hub, session: aiohttp.ClientSession, admin: Client
) -> None:
    """kube reads ``fieldSelector=metadata.name=x`` on a list or watch as naming ``x``, so a Role
    limited to ``resourceNames: [settings]`` lets an informer of that one ConfigMap list and watch
    it, and nothing else."""
    await admin("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}})
    for name in ("settings", "other"):
        status, body = await admin("POST", "/api/v1/namespaces/team-c/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
        assert status == 201, body
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "settings-reader", "namespace": "team-c"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
                       "resourceNames": ["settings"]}]}
    assert (await admin("POST", f"{RBAC}/namespaces/team-c/roles", role))[0] == 201
    assert (await admin("POST", f"{RBAC}/namespaces/team-c/rolebindings", binding(
        "bob-settings", "team-c", "Role", "settings-reader", [{"kind": "User", "name": "bob"}])))[0] == 201
    bob = Client(session, hub, await user_token(hub, "bob"))
    configmaps = "/api/v1/namespaces/team-c/configmaps"

    async def bound() -> bool:
        return (await bob("GET", f"{configmaps}/settings"))[0] == 200

    await eventually(bound)
    status, listed = await bob("GET", f"{configmaps}?fieldSelector=metadata.name%3Dsettings")
    assert status == 200, listed
    assert [item["metadata"]["name"] for item in listed["items"]] == ["settings"]
    status, _ = await bob("GET", f"{configmaps}?fieldSelector=metadata.name%3D%3Dsettings,metadata.namespace%3Dteam-c")
    assert status == 200
    async with session.get(f"{hub.url}{configmaps}?watch=1&fieldSelector=metadata.name%3Dsettings&timeoutSeconds=1",
                           headers={"Authorization": f"Bearer {bob.token}"}) as watch:
        assert watch.status == 200
        first = json.loads(await watch.content.readline())
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "settings")

    status, denied = await bob("GET", f"{configmaps}?fieldSelector=metadata.name%3Dother")
    assert status == 403
    assert denied["message"].startswith('configmaps "other" is forbidden: User "bob" cannot list resource "configmaps"')
    for selector in ("", "?fieldSelector=metadata.name!%3Dother", "?fieldSelector=metadata.name%3D..%2Fsettings"):
        status, denied = await bob("GET", f"{configmaps}{selector}")
        assert status == 403, selector
        assert denied["message"].startswith('configmaps is forbidden: User "bob" cannot list resource "configmaps"')


@SHARED_HUB
async def test_a_team_editor_reads_its_federated_quotas_and_cannot_change_them(
    hub: Hub, session: aiohttp.ClientSession, admin: Client
) -> None:
    """As kube's ResourceQuotas: a namespace's readers see its FederatedResourceQuotas (and their
    status), its editors cannot write them, the cluster admin does."""
    await give_team_edit(admin, "quota-a", elsewhere="quota-b")
    ivy = Client(session, hub, await user_token(hub, "ivy", "quota-a"))
    frq = "/apis/policy.karmada.io/v1alpha1/namespaces/quota-a/federatedresourcequotas"

    async def edit_is_aggregated() -> bool:
        return await can(ivy, access("list", "policy.karmada.io", "federatedresourcequotas", "quota-a"))

    await eventually(edit_is_aggregated)
    quota = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
             "metadata": {"name": "team", "namespace": "quota-a"}, "spec": {"overall": {"cpu": "8"}}}
    status, body = await ivy("POST", frq, quota)
    assert status == 403
    assert body["message"] == (
        'federatedresourcequotas.policy.karmada.io is forbidden: User "ivy" cannot create resource '
        '"federatedresourcequotas" in API group "policy.karmada.io" in the namespace "quota-a"'
    )
    assert (await admin("POST", frq, quota))[0] == 201
    assert (await ivy("GET", f"{frq}/team"))[0] == 200
    assert (await ivy("GET", f"{frq}/team/status"))[0] == 200


@SHARED_HUB
async def test_a_namespace_is_finalized_only_with_namespaces_finalize_granted_in_it(
    hub: Hub, session: aiohttp.ClientSession, admin: Client
) -> None:
    """kube authorizes a namespace's own requests in that namespace: ``admin`` there reads it but
    may not finalize it (no aggregated role grants ``namespaces/finalize``); a Role there that
    grants ``update`` on it does."""
    await give_team_edit(admin, "team-f", role="admin")
    fiona = Client(session, hub, await user_token(hub, "fiona", "team-f"))

    async def reads_its_namespace() -> bool:
        return (await fiona("GET", "/api/v1/namespaces/team-f"))[0] == 200

    await eventually(reads_its_namespace)
    status, ns = await admin("GET", "/api/v1/namespaces/team-f")
    assert status == 200
    body = {**ns, "spec": {"finalizers": ["example.com/hold", "kubernetes"]}}
    status, denial = await fiona("PUT", "/api/v1/namespaces/team-f/finalize", body)
    assert (status, denial["message"]) == (403, (
        'namespaces "team-f" is forbidden: User "fiona" cannot update resource "namespaces/finalize" '
        'in API group "" in the namespace "team-f"'
    ))
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "finalizer", "namespace": "team-f"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces/finalize"], "verbs": ["update"]}]}
    assert (await admin("POST", f"{RBAC}/namespaces/team-f/roles", role))[0] == 201
    status, bound = await admin("POST", f"{RBAC}/namespaces/team-f/rolebindings", binding(
        "finalizer", "team-f", "Role", "finalizer", [{"kind": "User", "name": "fiona"}]))
    assert status == 201, bound

    async def finalizes() -> bool:
        return (await fiona("PUT", "/api/v1/namespaces/team-f/finalize", body))[0] == 200

    await eventually(finalizes)
    status, stored = await admin("GET", "/api/v1/namespaces/team-f")
    assert stored["spec"]["finalizers"] == ["example.com/hold", "kubernetes"]
