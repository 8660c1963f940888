"""TokenRequest tokens are kube's signed JWTs, on a real hub (real etcd, HTTPS): verified here with
``cryptography`` against the JWKS the hub serves, their claims kube's, refused for another audience,
once their account or bound object is gone, and still accepted by a second authenticator over the
same store (a restart or another replica)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import json
import uuid
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from controlplane.apiserver.auth.serviceaccountjwt import (
    JwtRejected,
    ServiceAccountOptions,
    TokenIssuer,
    token_claims,
)
from controlplane.apiserver.auth.serviceaccountkeys import SigningKey
from controlplane.apiserver.auth.serviceaccounts import ServiceAccountTokens, _check_bound_object
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.identity import HUB_AUDIENCE, Role, service_account_groups
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import Hub, hub_registry

from .realhub import SHARED_HUB, Client, Team, eventually

#: One hub for the module: each test has its account ``bot`` in a namespace of its own, and the
#: Nodes it binds tokens to are of its own names.
pytestmark = SHARED_HUB

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SELF_REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
#: ``--service-account-issuer``: where verifiers outside would fetch the keys.
ISSUER = "https://hub.example.com:6443"


@pytest.fixture(scope="module")
def hub_options() -> dict[str, Any]:
    return {"service_accounts": ServiceAccountOptions(issuers=(ISSUER,), api_audiences=(HUB_AUDIENCE,))}


def token_request(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def token_review(token: str, *audiences: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token, **({"audiences": list(audiences)} if audiences else {})}
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def decode(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")
    return json.loads(unb64(header)), json.loads(unb64(payload))


def verify_with_jwks(token: str, jwks: dict[str, Any]) -> rsa.RSAPublicKey:
    """Check the token's signature as any OIDC verifier does: the JWKS key its ``kid`` names."""
    header, _ = decode(token)
    [jwk] = [k for k in jwks["keys"] if k["kid"] == header["kid"]]
    assert (jwk["kty"], jwk["alg"], jwk["use"], header["alg"]) == ("RSA", "RS256", "sig", "RS256")
    public = rsa.RSAPublicNumbers(int.from_bytes(unb64(jwk["e"]), "big"), int.from_bytes(unb64(jwk["n"]), "big"))
    key = public.public_key()
    signing_input, _, signature = token.rpartition(".")
    key.verify(unb64(signature), signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())  # raises if forged
    return key


async def setup(hub: Hub, session: aiohttp.ClientSession, team: Team) -> tuple[Client, dict[str, Any]]:
    admin = Client(session, hub, load_kubeconfig(hub.kubeconfig_path).token)
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": team.namespace}}))[0] == 201
    code, account = await admin("POST", team.accounts, {"metadata": {"name": "bot"}})
    assert code == 201, account
    return admin, account


async def issue(admin: Client, team: Team, **spec: Any) -> str:
    code, answer = await admin("POST", f"{team.accounts}/bot/token", token_request(**spec))
    assert code == 201, answer
    token: str = answer["status"]["token"]
    return token


async def get_raw(session: aiohttp.ClientSession, hub: Hub, path: str, token: str | None) -> tuple[int, str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(f"{hub.url}{path}", headers=headers) as resp:
        return resp.status, resp.content_type, await resp.json(content_type=None)


async def test_a_token_request_answers_a_jwt_with_kubes_claims_verifiable_from_the_jwks(
    hub: Hub, session: aiohttp.ClientSession, team: Team
) -> None:
    admin, account = await setup(hub, session, team)
    token = await issue(admin, team, audiences=[HUB_AUDIENCE, "vault"], expirationSeconds=1800)

    # The issuer's discovery documents, as kube serves them: readable by service accounts.
    code, content_type, configuration = await get_raw(session, hub, "/.well-known/openid-configuration", token)
    assert (code, content_type) == (200, "application/json"), configuration
    assert configuration == {
        "issuer": ISSUER,
        "jwks_uri": f"{ISSUER}/openid/v1/jwks",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    }
    code, content_type, jwks = await get_raw(session, hub, "/openid/v1/jwks", token)
    assert (code, content_type) == (200, "application/jwk-set+json"), jwks
    key = verify_with_jwks(token, jwks)
    header, claims = decode(token)
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert header["kid"] == base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()

    assert uuid.UUID(claims.pop("jti")).version == 4
    issued = claims["iat"]
    assert claims == {
        "iss": ISSUER,
        "sub": team.bot_user,
        "aud": [HUB_AUDIENCE, "vault"],
        "iat": issued,
        "nbf": issued,
        "exp": issued + 1800,
        "kubernetes.io": {"namespace": team.namespace,
                          "serviceaccount": {"name": "bot", "uid": account["metadata"]["uid"]}},
    }
    # RBAC decides who reads them: a user outside system:serviceaccounts is not bound; no credentials is 401.
    assert hub.tokens is not None
    alice = await hub.tokens.create(role=Role.USER, name="alice")
    code, _, status = await get_raw(session, hub, "/openid/v1/jwks", alice.token)
    assert (code, status["message"]) == (403, 'forbidden: User "alice" cannot get path "/openid/v1/jwks"'), status
    code, _, status = await get_raw(session, hub, "/openid/v1/jwks", None)
    assert (code, status["reason"]) == (401, "Unauthorized")
    # A forged token: the hub's kid, another key's signature.
    forged = TokenIssuer(SigningKey.generate(), (ISSUER,)).sign(claims)
    forged = ".".join([token.split(".")[0], forged.split(".")[1], forged.split(".")[2]])
    assert (await Client(session, hub, forged)("POST", WHOAMI, SELF_REVIEW))[0] == 401
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(forged))
    assert review["status"]["error"].startswith("invalid signature"), review
    # The hub's key, another issuer: not the hub's token.
    assert hub.service_account_tokens is not None
    elsewhere = hub.service_account_tokens.issuer.sign({**claims, "iss": HUB_AUDIENCE})
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(elsewhere))
    assert review["status"] == {"authenticated": False, "error": "invalid bearer token"}, review


async def test_a_token_for_another_audience_is_refused_by_the_hub_and_reviewed_for_that_audience(
    hub: Hub, session: aiohttp.ClientSession, team: Team
) -> None:
    admin, account = await setup(hub, session, team)
    token = await issue(admin, team, audiences=["vault"])
    assert decode(token)[1]["aud"] == ["vault"]
    code, status = await Client(session, hub, token)("POST", WHOAMI, SELF_REVIEW)
    assert code == 401, status
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(token, "vault", "other"))
    assert code == 201, review
    assert review["status"] == {
        "authenticated": True,
        "user": {"username": team.bot_user, "uid": account["metadata"]["uid"],
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{team.namespace}", "system:authenticated"],
                 "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={decode(token)[1]['jti']}"]}},
        "audiences": ["vault"],
    }
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(token))
    assert review["status"] == {
        "authenticated": False,
        "error": f'token audiences ["vault"] is invalid for the target audiences ["{HUB_AUDIENCE}"]',
    }


async def test_expiry_is_checked_with_kubes_leeway(hub: Hub, session: aiohttp.ClientSession, team: Team) -> None:
    admin, account = await setup(hub, session, team)
    assert hub.service_account_tokens is not None
    key = hub.service_account_tokens.issuer
    now = dt.datetime.now(dt.UTC)

    def signed(issued_seconds_ago: int, seconds: int) -> str:
        return key.sign(token_claims(
            issuer=ISSUER, namespace=team.namespace, account="bot", account_uid=account["metadata"]["uid"], audiences=[HUB_AUDIENCE],
            seconds=seconds, now=now - dt.timedelta(seconds=issued_seconds_ago),
        ))

    # Expired 5 s ago: within kube's 60 s leeway. Expired 10 min ago: refused.
    for token, status in (
        (signed(605, 600), {"authenticated": True}),
        (signed(1200, 600), {"authenticated": False, "error": "service account token has expired"}),
        (signed(-600, 1200), {"authenticated": False, "error": "service account token is not valid yet"}),
    ):
        code, review = await admin("POST", TOKEN_REVIEWS, token_review(token))
        assert code == 201 and status.items() <= review["status"].items(), review


async def test_a_token_bound_to_a_pod_secret_or_node_ends_with_it(hub: Hub, session: aiohttp.ClientSession, team: Team) -> None:
    admin, _ = await setup(hub, session, team)
    pods = f"/api/v1/namespaces/{team.namespace}/pods"
    containers = [{"name": "main", "image": "nginx:1"}]
    code, pod = await admin("POST", pods, {"metadata": {"name": "worker"},
                                           "spec": {"serviceAccountName": "bot", "containers": containers}})
    assert code == 201, pod
    code, secret = await admin("POST", team.secrets, {"metadata": {"name": "s"}})
    assert code == 201, secret
    code, node = await admin("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
    assert code == 201, node

    # kube's refusals: a pod of another account, a uid that is not the object's.
    code, other = await admin("POST", pods, {"metadata": {"name": "other"}, "spec": {"containers": containers}})
    assert code == 201, other
    code, status = await admin("POST", f"{team.accounts}/bot/token",
                               token_request(boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "other"}))
    assert (code, status["message"]) == (
        400, 'cannot bind token for serviceaccount "bot" to pod running with different serviceaccount name.'), status
    code, status = await admin("POST", f"{team.accounts}/bot/token", token_request(
        boundObjectRef={"kind": "Secret", "apiVersion": "v1", "name": "s", "uid": "1234"}))
    assert (code, status["reason"]) == (409, "Conflict"), status
    assert "the UID in the bound object reference (1234) does not match the UID in record" in status["message"]

    tokens = {}
    for kind, obj in (("Pod", pod), ("Secret", secret), ("Node", node)):
        name, uid = obj["metadata"]["name"], obj["metadata"]["uid"]
        code, answer = await admin("POST", f"{team.accounts}/bot/token",
                                   token_request(boundObjectRef={"kind": kind, "apiVersion": "v1", "name": name}))
        assert code == 201, answer
        assert answer["spec"]["boundObjectRef"] == {"kind": kind, "apiVersion": "v1", "name": name, "uid": uid}
        tokens[kind] = answer["status"]["token"]
        assert decode(tokens[kind])[1]["kubernetes.io"][kind.lower()] == {"name": name, "uid": uid}
        assert (await Client(session, hub, tokens[kind])("POST", WHOAMI, SELF_REVIEW))[0] == 201

    for kind, path in (("Pod", f"{pods}/worker"), ("Secret", f"{team.secrets}/s"),
                       ("Node", "/api/v1/nodes/n1")):
        bound = Client(session, hub, tokens[kind])
        assert (await admin("DELETE", f"{path}?gracePeriodSeconds=0"))[0] == 200

        async def refused(bound: Client = bound) -> bool:
            return (await bound("POST", WHOAMI, SELF_REVIEW))[0] == 401

        await eventually(refused)
        code, review = await admin("POST", TOKEN_REVIEWS, token_review(tokens[kind]))
        assert review["status"] == {"authenticated": False, "error": "service account token has been invalidated"}


async def test_a_token_authenticates_with_kubes_uid_and_extras_and_a_pod_bound_one_names_its_node(
    hub: Hub, session: aiohttp.ClientSession, team: Team
) -> None:
    admin, account = await setup(hub, session, team)
    code, node = await admin("POST", "/api/v1/nodes", {"metadata": {"name": "gpu-1"}})
    assert code == 201, node
    pods = f"/api/v1/namespaces/{team.namespace}/pods"
    containers = [{"name": "main", "image": "nginx:1"}]
    placed = {}
    for pod_name, node_name in (("on-node", "gpu-1"), ("on-missing-node", "gone"), ("unscheduled", None)):
        spec = {"serviceAccountName": "bot", "containers": containers, **({"nodeName": node_name} if node_name else {})}
        code, placed[pod_name] = await admin("POST", pods, {"metadata": {"name": pod_name}, "spec": spec})
        assert code == 201, placed[pod_name]
    account_uid, node_uid = account["metadata"]["uid"], node["metadata"]["uid"]

    # An unbound token: the account's uid, and the token's id as its credential id.
    token = await issue(admin, team)
    jti = decode(token)[1]["jti"]
    code, review = await Client(session, hub, token)("POST", WHOAMI, SELF_REVIEW)
    assert code == 201, review
    assert review["status"]["userInfo"] == {
        "username": team.bot_user, "uid": account_uid,
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{team.namespace}", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={jti}"]},
    }
    code, answer = await admin("POST", TOKEN_REVIEWS, token_review(token))
    assert answer["status"]["user"] == review["status"]["userInfo"], answer

    # Pod-bound: the pod's name and uid, and its node's (name only when that Node is not there).
    expected_node = {"on-node": {"name": "gpu-1", "uid": node_uid}, "on-missing-node": {"name": "gone"}, "unscheduled": None}
    for pod_name, node_claim in expected_node.items():
        bound = await issue(admin, team, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": pod_name})
        claims = decode(bound)[1]
        assert claims["kubernetes.io"].get("node") == node_claim, claims
        code, answer = await admin("POST", TOKEN_REVIEWS, token_review(bound))
        assert code == 201, answer
        extra = {"authentication.kubernetes.io/credential-id": [f"JTI={claims['jti']}"],
                 "authentication.kubernetes.io/pod-name": [pod_name],
                 "authentication.kubernetes.io/pod-uid": [placed[pod_name]["metadata"]["uid"]]}
        if node_claim is not None:
            extra["authentication.kubernetes.io/node-name"] = [node_claim["name"]]
        if node_claim is not None and "uid" in node_claim:
            extra["authentication.kubernetes.io/node-uid"] = [node_claim["uid"]]
        assert answer["status"]["user"]["extra"] == extra, answer
        # The pod bound it, not the node: a token of a pod on a missing node still authenticates.
        assert (await Client(session, hub, bound)("POST", WHOAMI, SELF_REVIEW))[0] == 201


async def test_another_authenticator_over_the_same_store_verifies_and_old_opaque_tokens_still_work(
    hub: Hub, session: aiohttp.ClientSession, team: Team
) -> None:
    """The signing key is the store's: a restarted hub or another replica signs and verifies with it."""
    admin, account = await setup(hub, session, team)
    token = await issue(admin, team)
    assert hub.store is not None
    other = await ServiceAccountTokens.load(
        TokenStore(hub.store), ObjectStore(hub.store, hub_registry()), hub.store, options=ServiceAccountOptions(issuers=(ISSUER,), api_audiences=(HUB_AUDIENCE,))
    )
    assert hub.service_account_tokens is not None
    assert other.issuer.signing_key.public.kid == hub.service_account_tokens.issuer.signing_key.public.kid
    task = asyncio.create_task(other.run())
    try:
        await other.synced()
        user = await other.authenticate(token)
        assert user is not None and user.name == team.bot_user
        assert other.authenticate_cached(token) == (True, user)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    # A token issued as an opaque one before the hub signed JWTs keeps working until it expires.
    assert hub.tokens is not None
    opaque = await hub.tokens.create(
        role=Role.USER, name=team.bot_user, groups=service_account_groups(team.namespace),
        ttl=dt.timedelta(hours=1), bound_uid=account["metadata"]["uid"],
    )
    code, review = await Client(session, hub, opaque.token)("POST", WHOAMI, SELF_REVIEW)
    assert (code, review["status"]["userInfo"]["username"]) == (201, team.bot_user), review
    # Deleting the account ends both.
    assert (await admin("DELETE", f"{team.accounts}/bot"))[0] == 200
    for gone in (token, opaque.token):
        bot = Client(session, hub, gone)

        async def refused(bot: Client = bot) -> bool:
            return (await bot("POST", WHOAMI, SELF_REVIEW))[0] == 401

        await eventually(refused)
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(token))
    assert review["status"] == {"authenticated": False, "error": 'serviceaccount "bot" not found'}


async def test_an_account_the_informer_has_not_seen_yet_is_read_from_the_store(hub: Hub, session: aiohttp.ClientSession, team: Team) -> None:
    """kube's getter reads the lister, then GETs: a token of an account created a moment ago (not
    yet in the informer's memory) is accepted, and one of an account that does not exist is not."""
    admin, _ = await setup(hub, session, team)
    token = await issue(admin, team)
    assert hub.store is not None and hub.service_account_tokens is not None
    # An authenticator whose informer has not run: it holds no ServiceAccount at all.
    lagging = ServiceAccountTokens(
        TokenStore(hub.store), ObjectStore(hub.store, hub_registry()), hub.service_account_tokens.issuer,
        api_audiences=(HUB_AUDIENCE,),
    )
    assert lagging.authenticate_cached(token) == (False, None)  # memory cannot tell: the store answers
    user = await lagging.authenticate(token)
    assert user is not None and user.name == team.bot_user
    code, _ = await admin("DELETE", f"{team.accounts}/bot")
    assert code == 200
    assert await lagging.review(token, [HUB_AUDIENCE]) == 'serviceaccount "bot" not found'


async def test_a_token_whose_bound_object_was_recreated_is_refused_with_kubes_message(
    hub: Hub, session: aiohttp.ClientSession, team: Team
) -> None:
    """A Pod, Secret or Node deleted and created again under its name is another object: its old
    tokens are refused with kube's message naming both uids."""
    admin, _ = await setup(hub, session, team)
    pod_spec = {"serviceAccountName": "bot", "containers": [{"name": "main", "image": "nginx:1"}]}
    objects = {"Pod": (f"/api/v1/namespaces/{team.namespace}/pods", {"metadata": {"name": "worker"}, "spec": pod_spec}),
               "Secret": (team.secrets, {"metadata": {"name": "worker"}}),
               "Node": ("/api/v1/nodes", {"metadata": {"name": "worker"}})}
    for kind, (path, body) in objects.items():
        code, old = await admin("POST", path, body)
        assert code == 201, old
        token = await issue(admin, team, boundObjectRef={"kind": kind, "apiVersion": "v1", "name": "worker"})
        code, answer = await admin("POST", TOKEN_REVIEWS, token_review(token))
        assert answer["status"]["authenticated"] is True, answer
        if kind == "Node":  # a node-bound token names its node in its extras
            assert answer["status"]["user"]["extra"]["authentication.kubernetes.io/node-uid"] == [old["metadata"]["uid"]]
        assert (await admin("DELETE", f"{path}/worker?gracePeriodSeconds=0"))[0] == 200
        code, new = await admin("POST", path, body)
        assert code == 201, new
        claim = kind.lower()
        message = (f"{claim} UID ({new['metadata']['uid']}) does not match service account {claim} ref claim "
                   f"({old['metadata']['uid']})")
        bound = Client(session, hub, token)

        async def refused(bound: Client = bound) -> bool:
            return (await bound("POST", WHOAMI, SELF_REVIEW))[0] == 401

        await eventually(refused)
        code, answer = await admin("POST", TOKEN_REVIEWS, token_review(token))
        assert (code, answer["status"]) == (201, {"authenticated": False, "error": message}), answer


async def test_a_recreated_object_being_deleted_is_refused_for_its_uid_first_as_kube(hub: Hub) -> None:
    """kube's validator checks the uid before the deletion: an account or bound object created again
    under its name, and being deleted for longer than the leeway, is refused for its uid."""
    tokens = hub.service_account_tokens
    assert tokens is not None
    long_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    deleting = {"metadata": {"name": "bot", "namespace": "team", "uid": "new", "deletionTimestamp": long_ago}}
    claims = token_claims(issuer=ISSUER, namespace="team", account="bot", account_uid="old", audiences=[HUB_AUDIENCE],
                          seconds=3600, now=dt.datetime.now(dt.UTC), bound=("Pod", "worker", "old"))
    with pytest.raises(JwtRejected, match=r"^service account UID \(new\) does not match claim \(old\)$"):
        tokens._jwt_user(claims, deleting)
    with pytest.raises(JwtRejected, match=r"^pod UID \(new\) does not match service account pod ref claim \(old\)$"):
        _check_bound_object(deleting, "Pod", claims["kubernetes.io"]["pod"])
    same = {"metadata": {**deleting["metadata"], "uid": "old"}}
    with pytest.raises(JwtRejected, match=r"^service account token has been invalidated$"):
        _check_bound_object(same, "Pod", claims["kubernetes.io"]["pod"])
