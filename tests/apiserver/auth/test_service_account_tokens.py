"""Service account tokens on a real hub (real etcd, HTTPS, the real kubectl): ``kubectl create
token`` answers as kube-apiserver's TokenRequest does, the token authenticates as the service
account with its groups, RBAC bindings to the account apply, and deleting the account ends it."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controlplane.apis.timestamps import parse_time
from controlplane.apiserver.identity import HUB_AUDIENCE
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.hub import Hub

from ..test_real_clients import kubectl, needs_kubectl
from .realhub import SHARED_HUB, Client, Team, eventually

#: One hub for the module: each test works in a namespace of its own (the refused requests' cases
#: share theirs, :data:`REFUSED`, and count the tokens around their own request).
pytestmark = SHARED_HUB

REFUSED = Team("team")
ACCOUNTS = REFUSED.accounts
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def token_request(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


async def test_a_service_account_token_works_until_its_account_is_deleted(
    hub: Hub, session: aiohttp.ClientSession, team: Team
) -> None:
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    code, account = await admin("POST", team.accounts, {"metadata": {"name": "bot"}})
    assert code == 201, account

    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    async with session.post(f"{hub.url}{team.accounts}/bot/token", json=token_request(),
                            headers={"Authorization": f"Bearer {admin.token}"}) as resp:
        assert resp.status == 201, await resp.text()
        assert resp.headers["Cache-Control"] == "no-store"
        answer = await resp.json()
    assert answer["kind"] == "TokenRequest" and answer["metadata"]["name"] == "bot"
    assert answer["spec"]["expirationSeconds"] == 3600 and answer["spec"]["audiences"] == [HUB_AUDIENCE]
    expires = parse_time(answer["status"]["expirationTimestamp"])
    assert before + dt.timedelta(seconds=3599) <= expires <= before + dt.timedelta(seconds=3602)
    bot = Client(session, hub, answer["status"]["token"])

    code, review = await bot("POST", WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert code == 201, review
    jti = json.loads(base64.urlsafe_b64decode(answer["status"]["token"].split(".")[1] + "=="))["jti"]
    assert review["status"]["userInfo"] == {
        "username": team.bot_user, "uid": account["metadata"]["uid"],
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{team.namespace}", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={jti}"]},
    }
    code, status = await bot("GET", team.configmaps)
    assert code == 403, status
    binding = {
        "metadata": {"name": "bot-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": team.namespace}],
    }
    assert (await admin("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{team.namespace}/rolebindings",
                        binding))[0] == 201

    async def reads() -> bool:
        return (await bot("GET", team.configmaps))[0] == 200

    await eventually(reads)
    # Only who may create serviceaccounts/token gets one: the bot's view role does not.
    code, status = await bot("POST", f"{team.accounts}/bot/token", token_request())
    assert code == 403 and "serviceaccounts/token" in status["message"], status

    code, _ = await admin("DELETE", f"{team.accounts}/bot")
    assert code == 200

    async def refused() -> bool:
        return (await bot("GET", team.configmaps))[0] == 401

    await eventually(refused)
    # A new account of the same name is another account: the old token stays refused.
    assert (await admin("POST", team.accounts, {"metadata": {"name": "bot"}}))[0] == 201
    assert (await bot("GET", team.configmaps))[0] == 401


@pytest.mark.parametrize(("path", "body", "code", "expected"), [
    (f"{ACCOUNTS}/nobody/token", token_request(), 404, 'serviceaccounts "nobody" not found'),
    (f"{ACCOUNTS}/bot/token", token_request(expirationSeconds=599), 422,
     "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"),
    (f"{ACCOUNTS}/bot/token", token_request(expirationSeconds=2**32 + 1), 422,
     "may not specify a duration larger than 2^32 seconds"),
    (f"{ACCOUNTS}/bot/token", token_request(audiences=[""]), 422, "must be a list of non-empty strings"),
    (f"{ACCOUNTS}/bot/token", token_request(boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p"}), 404,
     'pods "p" not found'),
    (f"{ACCOUNTS}/bot/token",
     token_request(boundObjectRef={"kind": "Deployment", "apiVersion": "apps/v1", "name": "d"}), 400,
     "cannot bind token to object of type apps/v1, Kind=Deployment"),
    (f"{ACCOUNTS}/bot/token", {**token_request(), "metadata": {"name": "other"}}, 422,
     "metadata.name: Invalid value: \"other\": must match the service account name if specified"),
    (f"{ACCOUNTS}/nobody/token?dryRun=Maybe", token_request(), 422,
     'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Maybe"}: supported values: "All"'),
])
async def test_a_token_request_kube_refuses_is_refused_and_issues_nothing(
    hub: Hub, session: aiohttp.ClientSession, path: str, body: dict[str, Any], code: int, expected: str
) -> None:
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    await admin("POST", "/api/v1/namespaces", {"metadata": {"name": REFUSED.namespace}})
    await admin("POST", ACCOUNTS, {"metadata": {"name": "bot"}})
    assert hub.tokens is not None
    before = len(await hub.tokens.list())
    answered, status = await admin("POST", path, body)
    assert (answered, status["kind"]) == (code, "Status"), status
    assert expected in status["message"], status
    assert len(await hub.tokens.list()) == before


async def test_a_dry_run_token_request_issues_a_token_as_kubes_does(hub: Hub, session: aiohttp.ClientSession) -> None:
    """kube's TokenRequest storage takes no notice of ``dryRun=All``: the token is issued, and works."""
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    await admin("POST", "/api/v1/namespaces", {"metadata": {"name": REFUSED.namespace}})
    await admin("POST", ACCOUNTS, {"metadata": {"name": "bot"}})
    code, issued = await admin("POST", f"{ACCOUNTS}/bot/token?dryRun=All", token_request())
    assert (code, issued["kind"]) == (201, "TokenRequest"), issued
    bot = Client(session, hub, issued["status"]["token"])
    code, review = await bot("POST", WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert (code, review["status"]["userInfo"]["username"]) == (201, f"system:serviceaccount:{REFUSED.namespace}:bot")


@needs_kubectl
async def test_kubectl_create_token_and_use_it(hub: Hub, tmp_path: Path, team: Team) -> None:
    kubeconfig = hub.kubeconfig_path
    for args in (("create", "namespace", team.namespace), ("create", "serviceaccount", "bot", "-n", team.namespace)):
        code, _, err = await kubectl(kubeconfig, *args)
        assert code == 0, err
    code, out, err = await kubectl(kubeconfig, "create", "token", "bot", "-n", team.namespace, "--duration=20m")
    assert code == 0, err
    token = out.strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert (claims["sub"], claims["exp"] - claims["iat"]) == (team.bot_user, 1200)
    code, out, err = await kubectl(kubeconfig, "create", "token", "bot", "-n", team.namespace, "--audience", "vault",
                                   "--bound-object-kind", "Secret", "--bound-object-name", "nothing")
    assert code != 0 and 'secrets "nothing" not found' in err, err
    code, out, err = await kubectl(kubeconfig, "create", "token", "bot", "-n", team.namespace, "--audience", "vault")
    assert code == 0, err
    assert json.loads(base64.urlsafe_b64decode(out.strip().split(".")[1] + "=="))["aud"] == ["vault"]
    code, out, err = await kubectl(kubeconfig, "--token", token, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert (code, out) == (0, team.bot_user), err
    code, _, err = await kubectl(kubeconfig, "create", "token", "bot", "-n", team.namespace, "--duration=5m")
    assert code != 0
    assert "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes" in err


async def test_every_namespace_has_a_default_service_account(hub: Hub, session: aiohttp.ClientSession, team: Team) -> None:
    """As kube-controller-manager's serviceaccount controller: created with the namespace, created
    again when deleted, so that ``kubectl create token default`` works in a new namespace."""
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    first: dict[str, Any] = {}

    async def has_default() -> bool:
        code, body = await admin("GET", f"{team.accounts}/default")
        if code == 200:
            first.update(body)
        return code == 200

    await eventually(has_default)
    for namespace in ("default", "gpufed-system"):
        assert (await admin("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default"))[0] == 200
    code, answer = await admin("POST", f"{team.accounts}/default/token", token_request())
    assert code == 201, answer
    assert (await admin("DELETE", f"{team.accounts}/default"))[0] == 200

    async def recreated() -> bool:
        code, body = await admin("GET", f"{team.accounts}/default")
        return code == 200 and body["metadata"]["uid"] != first["metadata"]["uid"]

    await eventually(recreated)
    # The namespace's deletion is not held up by an account created again behind it.
    assert (await admin("DELETE", f"/api/v1/namespaces/{team.namespace}"))[0] == 200

    async def namespace_gone() -> bool:
        return (await admin("GET", f"/api/v1/namespaces/{team.namespace}"))[0] == 404

    await eventually(namespace_gone)


TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def token_review(token: str, *audiences: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token, **({"audiences": list(audiences)} if audiences else {})}
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


async def test_a_token_review_says_whose_a_token_is(hub: Hub, session: aiohttp.ClientSession, team: Team) -> None:
    """kube's TokenReview: for a service given hub tokens by its callers; who may ask is who has
    ``create tokenreviews`` (kube's ``system:auth-delegator``)."""
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    code, account = await admin("POST", team.accounts, {"metadata": {"name": "bot"}})
    assert code == 201, account
    code, issued = await admin("POST", f"{team.accounts}/bot/token", token_request())
    assert code == 201, issued
    token = issued["status"]["token"]
    jti = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["jti"]

    code, review = await admin("POST", TOKEN_REVIEWS, token_review(token))
    assert code == 201, review
    assert review["status"] == {
        "authenticated": True,
        "user": {"username": team.bot_user, "uid": account["metadata"]["uid"],
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{team.namespace}", "system:authenticated"],
                 "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={jti}"]}},
        "audiences": [HUB_AUDIENCE],
    }
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(token, "vault"))
    assert code == 201, review
    assert review["status"] == {
        "authenticated": False,
        "error": f'token audiences ["{HUB_AUDIENCE}"] is invalid for the target audiences ["vault"]',
    }
    code, review = await admin("POST", TOKEN_REVIEWS, token_review("abcdef.0123456789abcdef0123"))
    assert code == 201, review
    assert review["status"] == {"authenticated": False, "error": "invalid bearer token"}
    code, status = await admin("POST", TOKEN_REVIEWS, token_review(""))
    assert (code, status["message"]) == (400, "token is required for TokenReview in authentication")

    # The service account itself may not review tokens until bound to system:auth-delegator.
    bot = Client(session, hub, token)
    code, status = await bot("POST", TOKEN_REVIEWS, token_review(token))
    assert code == 403, status
    binding = {
        "metadata": {"name": "bot-delegator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": team.namespace}],
    }
    assert (await admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding))[0] == 201

    async def reviews() -> bool:
        return (await bot("POST", TOKEN_REVIEWS, token_review(admin.token)))[0] == 201

    await eventually(reviews)
    assert (await admin("DELETE", f"{team.accounts}/bot"))[0] == 200

    async def no_longer_authenticated() -> bool:
        code, review = await admin("POST", TOKEN_REVIEWS, token_review(token))
        return code == 201 and review["status"]["authenticated"] is False

    await eventually(no_longer_authenticated)


@needs_kubectl
async def test_kubectl_auth_whoami_shows_a_bound_tokens_extras(hub: Hub, session: aiohttp.ClientSession, team: Team) -> None:
    """``kubectl auth whoami`` of a token bound to a pod on a node, and of one bound to the node:
    kube's extras (the token's id, the pod's and the node's name and uid)."""
    kubeconfig = hub.kubeconfig_path
    for args in (("create", "namespace", team.namespace), ("create", "serviceaccount", "bot", "-n", team.namespace)):
        code, _, err = await kubectl(kubeconfig, *args)
        assert code == 0, err
    admin = Client(session, hub, load_kubeconfig(kubeconfig).token)
    code, node = await admin("POST", "/api/v1/nodes", {"metadata": {"name": "gpu-1"}})
    assert code == 201, node
    spec = {"serviceAccountName": "bot", "nodeName": "gpu-1", "containers": [{"name": "main", "image": "nginx:1"}]}
    code, pod = await admin("POST", f"/api/v1/namespaces/{team.namespace}/pods", {"metadata": {"name": "worker"}, "spec": spec})
    assert code == 201, pod
    node_uid, pod_uid = node["metadata"]["uid"], pod["metadata"]["uid"]

    expected: dict[str, dict[str, str]] = {
        "Pod": {"pod-name": "worker", "pod-uid": pod_uid, "node-name": "gpu-1", "node-uid": node_uid},
        "Node": {"node-name": "gpu-1", "node-uid": node_uid},
    }
    for kind, bound_name in (("Pod", "worker"), ("Node", "gpu-1")):
        code, out, err = await kubectl(kubeconfig, "create", "token", "bot", "-n", team.namespace,
                                       "--bound-object-kind", kind, "--bound-object-name", bound_name)
        assert code == 0, err
        token = out.strip()
        jti = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["jti"]
        code, out, err = await kubectl(kubeconfig, "--token", token, "auth", "whoami")
        assert code == 0, err
        rows = {" ".join(line.split()[:2]): line.split()[2:] for line in out.splitlines() if line.startswith("Extra:")}
        want = {f"Extra: authentication.kubernetes.io/{key}": [f"[{value}]"] for key, value in expected[kind].items()}
        want["Extra: authentication.kubernetes.io/credential-id"] = [f"[JTI={jti}]"]
        assert rows == want, out
