"""Long-lived service account tokens in Secrets on a real hub (real etcd, HTTPS, the real kubectl),
as kube's token controller fills them and kube-apiserver's legacy token authenticator accepts them:
the token authenticates as the account while its Secret holds it and the account exists."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import aiohttp

from controlplane.hub import Hub

from ..test_real_clients import kubectl, kubectl_apply, needs_kubectl
from .realhub import SHARED_HUB, Client, Team, eventually

#: One hub for the module: each test has its account ``bot`` and its Secrets in a namespace of its own.
pytestmark = SHARED_HUB

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
LAST_USED = "kubernetes.io/legacy-token-last-used"


def token_secret(name: str, account: str = "bot", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": account, **annotations}},
        "type": "kubernetes.io/service-account-token",
    }


async def filled(admin: Client, team: Team, name: str) -> dict[str, Any]:
    """The Secret once the controller has filled its token."""
    found: dict[str, Any] = {}

    async def has_token() -> bool:
        code, body = await admin("GET", f"{team.secrets}/{name}")
        if code == 200 and (body.get("data") or {}).get("token"):
            found.update(body)
            return True
        return False

    await eventually(has_token)
    return found


async def marked_used(admin: Client, team: Team, name: str) -> dict[str, Any]:
    """The Secret once the hub has labelled it with the day its token was used."""
    found: dict[str, Any] = {}

    async def marked() -> bool:
        code, body = await admin("GET", f"{team.secrets}/{name}")
        found.update(body)
        return code == 200 and LAST_USED in (body["metadata"].get("labels") or {})

    await eventually(marked)
    return found


async def gone(admin: Client, path: str) -> None:
    async def not_found() -> bool:
        return (await admin("GET", path))[0] == 404

    await eventually(not_found)


async def refused(client: Client, team: Team) -> None:
    async def unauthorized() -> bool:
        return (await client("GET", team.configmaps))[0] == 401

    await eventually(unauthorized)


async def test_a_token_secret_is_filled_and_its_token_works_while_the_secret_holds_it(
    hub: Hub, session: aiohttp.ClientSession, admin: Client, team: Team
) -> None:
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    code, account = await admin("POST", team.accounts, {"metadata": {"name": "bot"}})
    assert code == 201, account
    code, created = await admin("POST", team.secrets, token_secret("bot-token"))
    assert code == 201 and "data" not in created, created

    secret = await filled(admin, team, "bot-token")
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    assert set(data) == {"token", "ca.crt", "namespace"}
    assert hub.pki is not None and data["ca.crt"] == hub.pki.ca_pem
    assert data["namespace"] == team.namespace.encode()
    assert secret["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": "bot", "kubernetes.io/service-account.uid": account["metadata"]["uid"],
    }
    tokens = hub.tokens
    assert tokens is not None
    issued = [t for t in await tokens.list() if t.name == team.bot_user]
    assert len(issued) == 1 and issued[0].expires_at is None and issued[0].bound_secret == "bot-token"

    bot = Client(session, hub, data["token"].decode())
    code, review = await bot("POST", WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert code == 201, review
    assert review["status"]["userInfo"] == {
        "username": team.bot_user, "uid": account["metadata"]["uid"],
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{team.namespace}", "system:authenticated"],
    }
    # As kube-apiserver, the hub labels the Secret with the day (UTC) its token was used.
    labelled = await marked_used(admin, team, "bot-token")
    day = dt.date.fromisoformat(labelled["metadata"]["labels"][LAST_USED])
    assert abs(day - dt.datetime.now(dt.UTC).date()) <= dt.timedelta(days=1)
    assert labelled["data"] == secret["data"]
    secret = labelled
    code, status = await bot("GET", team.configmaps)
    assert code == 403, status
    assert status["message"] == (
        f'configmaps is forbidden: User "{team.bot_user}" cannot list resource "configmaps" in API group "" '
        f'in the namespace "{team.namespace}"'
    )

    # A Secret that no longer holds the token ends it; the controller does not fill a token it holds.
    other = base64.b64encode(b"abcdef.0123456789abcdef0123456789abcdef").decode()
    changed = {**secret, "data": {**secret["data"], "token": other}}
    code, changed = await admin("PUT", f"{team.secrets}/bot-token", changed)
    assert code == 200, changed
    await refused(bot, team)

    async def revoked() -> bool:
        return not [t for t in await tokens.list() if t.name == team.bot_user and t.bound_secret == "bot-token"]

    await eventually(revoked)
    code, held = await admin("GET", f"{team.secrets}/bot-token")
    assert (code, held["data"]["token"]) == (200, other)
    # Emptied, it is filled again with a new token, which works; deleting the Secret ends that one.
    code, body = await admin("PUT", f"{team.secrets}/bot-token", {**changed, "data": {}})
    assert code == 200, body
    again = await filled(admin, team, "bot-token")
    renewed = Client(session, hub, base64.b64decode(again["data"]["token"]).decode())
    assert renewed.token != bot.token
    assert (await renewed("GET", team.configmaps))[0] == 403
    assert (await admin("DELETE", f"{team.secrets}/bot-token"))[0] == 200
    await refused(renewed, team)
    await eventually(revoked)
    # The account is untouched by its Secrets' fate.
    assert (await admin("GET", f"{team.accounts}/bot"))[0] == 200


async def test_deleting_the_account_deletes_its_token_secrets(
    hub: Hub, session: aiohttp.ClientSession, admin: Client, team: Team
) -> None:
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    assert (await admin("POST", team.accounts, {"metadata": {"name": "bot"}}))[0] == 201
    assert (await admin("POST", team.accounts, {"metadata": {"name": "other"}}))[0] == 201
    for name, account in (("bot-a", "bot"), ("bot-b", "bot"), ("kept", "other")):
        assert (await admin("POST", team.secrets, token_secret(name, account)))[0] == 201
    bots = [Client(session, hub, base64.b64decode((await filled(admin, team, name))["data"]["token"]).decode())
            for name in ("bot-a", "bot-b")]
    await filled(admin, team, "kept")
    for bot in bots:
        assert (await bot("GET", team.configmaps))[0] == 403

    assert (await admin("DELETE", f"{team.accounts}/bot"))[0] == 200
    for name in ("bot-a", "bot-b"):
        await gone(admin, f"{team.secrets}/{name}")
    for bot in bots:
        await refused(bot, team)
    assert (await admin("GET", f"{team.secrets}/kept"))[0] == 200


async def test_a_token_secret_of_a_missing_or_other_account_is_deleted(admin: Client, team: Team) -> None:
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    assert (await admin("POST", team.accounts, {"metadata": {"name": "bot"}}))[0] == 201
    assert (await admin("POST", team.secrets, token_secret("nobody-token", "nobody")))[0] == 201
    mismatched = token_secret("stale-token", **{"kubernetes.io/service-account.uid": "not-its-uid"})
    assert (await admin("POST", team.secrets, mismatched))[0] == 201
    await gone(admin, f"{team.secrets}/nobody-token")
    await gone(admin, f"{team.secrets}/stale-token")
    # Validation is kube's: the account's name is required.
    code, status = await admin("POST", team.secrets, {**token_secret("x"), "metadata": {"name": "x"}})
    assert code == 422, status
    assert status["details"]["causes"] == [{
        "reason": "FieldValueRequired", "message": "Required value",
        "field": "metadata.annotations[kubernetes.io/service-account.name]",
    }]


@needs_kubectl
async def test_kubectl_uses_a_long_lived_token_from_its_secret(hub: Hub, tmp_path: Path, team: Team) -> None:
    """kube's documented steps: create the account, create its token Secret, read the token, use it."""
    kubeconfig = hub.kubeconfig_path
    await kubectl_apply(kubeconfig, f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {team.namespace}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: bot, namespace: {team.namespace}}}
---
apiVersion: v1
kind: Secret
metadata:
  name: bot-token
  namespace: {team.namespace}
  annotations: {{kubernetes.io/service-account.name: bot}}
type: kubernetes.io/service-account-token
""")
    token = ""

    async def read_token() -> bool:
        nonlocal token
        code, out, _ = await kubectl(kubeconfig, "get", "secret", "bot-token", "-n", team.namespace,
                                     "-o", "jsonpath={.data.token}")
        token = base64.b64decode(out).decode() if code == 0 else ""
        return bool(token)

    await eventually(read_token)
    code, out, err = await kubectl(kubeconfig, "--token", token, "auth", "whoami",
                                   "-o", "jsonpath={.status.userInfo.username}")
    assert (code, out) == (0, team.bot_user), err
    code, _, err = await kubectl(kubeconfig, "--token", token, "get", "configmaps", "-n", team.namespace)
    assert code != 0 and f'User "{team.bot_user}" cannot list resource "configmaps"' in err, err

    code, _, err = await kubectl(kubeconfig, "delete", "serviceaccount", "bot", "-n", team.namespace)
    assert code == 0, err

    async def unauthorized() -> bool:
        code, _, err = await kubectl(kubeconfig, "--token", token, "auth", "whoami")
        return code != 0 and "Unauthorized" in err

    await eventually(unauthorized)


async def test_a_token_is_refused_while_its_secret_is_being_deleted_or_marked_invalid(
    hub: Hub, session: aiohttp.ClientSession, admin: Client, team: Team
) -> None:
    """As kube's legacy authenticator: a Secret with a deletionTimestamp, or labelled
    ``kubernetes.io/legacy-token-invalid-since``, no longer vouches for the token it holds."""
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    assert (await admin("POST", team.accounts, {"metadata": {"name": "bot"}}))[0] == 201
    held = token_secret("bot-token")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    assert (await admin("POST", team.secrets, held))[0] == 201
    secret = await filled(admin, team, "bot-token")
    bot = Client(session, hub, base64.b64decode(secret["data"]["token"]).decode())
    assert (await bot("GET", team.configmaps))[0] == 403
    secret = await marked_used(admin, team, "bot-token")
    used = secret["metadata"]["labels"]

    invalid = {**used, "kubernetes.io/legacy-token-invalid-since": "2026-01-01"}
    code, labelled = await admin("PUT", f"{team.secrets}/bot-token", {**secret, "metadata": {**secret["metadata"], "labels": invalid}})
    assert code == 200, labelled
    await refused(bot, team)
    code, unlabelled = await admin("PUT", f"{team.secrets}/bot-token", {**labelled, "metadata": {**labelled["metadata"], "labels": used}})
    assert code == 200, unlabelled

    async def accepted() -> bool:
        return (await bot("GET", team.configmaps))[0] == 403

    await eventually(accepted)
    code, deleting = await admin("DELETE", f"{team.secrets}/bot-token")
    assert code == 200 and deleting["metadata"]["deletionTimestamp"], deleting
    await refused(bot, team)
    code, body = await admin("PUT", f"{team.secrets}/bot-token", {**deleting, "metadata": {**deleting["metadata"], "finalizers": []}})
    assert code == 200, body
    await gone(admin, f"{team.secrets}/bot-token")


async def test_the_token_controller_reads_the_token_checks_caches(hub: Hub, admin: Client, team: Team) -> None:
    """One cache of the ServiceAccounts and one of the token Secrets in the hub process: the leader's
    token controller reads those the API's token check keeps (as kube's controllers share informers)."""

    async def leading() -> bool:
        return hub.token_controller is not None

    await eventually(leading)
    check, controller = hub.service_account_tokens, hub.token_controller
    assert check is not None and controller is not None
    assert controller.secrets is check.secrets and controller.accounts is check.accounts
    # And it fills what it reads there.
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    assert (await admin("POST", team.accounts, {"metadata": {"name": "bot"}}))[0] == 201
    assert (await admin("POST", team.secrets, token_secret("bot-token")))[0] == 201
    await filled(admin, team, "bot-token")
