"""kube-apiserver's service account flags on a real hub (real etcd, HTTPS), given as
``gpufed controlplane`` parses them: a key rotated with ``--service-account-signing-key-file`` and
``--service-account-key-file`` (the old key's tokens keep working while it is listed, both keys in
the JWKS), several ``--service-account-issuer`` (the first signs, all are accepted),
``--api-audiences`` (what the hub accepts; by default the issuers) and ``--service-account-jwks-uri``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from controlplane.apiserver.auth.serviceaccountjwt import token_claims
from controlplane.apiserver.auth.serviceaccountkeys import SIGNING_KEY_KEY, SigningKey
from controlplane.apiserver.identity import HUB_AUDIENCE
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.hub import Hub
from gpufed.commands.controlplane import add_arguments, hub_config

from .realhub import Client, Team
from .test_service_account_jwts import (
    SELF_REVIEW,
    TOKEN_REVIEWS,
    WHOAMI,
    decode,
    token_review,
    unb64,
)

ACCOUNTS = Team("team").accounts

NEW_ISSUER = "https://hub.example.com"
OTHER_ISSUER = "https://old-hub.example.com"


@asynccontextmanager
async def running(state_dir: Path, *flags: str) -> AsyncIterator[tuple[Hub, aiohttp.ClientSession, Client]]:
    """A hub started with ``gpufed controlplane``'s flags (on ``state_dir``: a restart keeps its etcd),
    an HTTPS session trusting it, and its admin."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = hub_config(parser.parse_args(["--state-dir", str(state_dir), "--listen", "127.0.0.1:0", *flags]))
    async with Hub(dataclasses.replace(config, waste_sample_interval=3600)) as hub:
        kubeconfig = load_kubeconfig(hub.kubeconfig_path)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(kubeconfig.ca_pem))
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
            yield hub, session, Client(session, hub, kubeconfig.token)


async def create_bot(admin: Client) -> dict[str, Any]:
    assert (await admin("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}}))[0] == 201
    code, account = await admin("POST", ACCOUNTS, {"metadata": {"name": "bot"}})
    assert code == 201, account
    return dict(account)


async def issue(admin: Client, **spec: Any) -> str:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    code, answer = await admin("POST", f"{ACCOUNTS}/bot/token", body)
    assert code == 201, answer
    return str(answer["status"]["token"])


async def reviewed(admin: Client, token: str) -> dict[str, Any]:
    """A TokenReview's status, for the API audiences (it names none)."""
    code, review = await admin("POST", TOKEN_REVIEWS, token_review(token))
    assert code == 201, review
    return dict(review["status"])


async def whoami(hub: Hub, session: aiohttp.ClientSession, token: str) -> int:
    return (await Client(session, hub, token)("POST", WHOAMI, SELF_REVIEW))[0]


async def get(session: aiohttp.ClientSession, hub: Hub, path: str, token: str) -> Any:
    async with session.get(f"{hub.url}{path}", headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json(content_type=None)


async def test_a_rotated_signing_key_keeps_the_old_keys_tokens_while_it_is_listed(tmp_path: Path) -> None:
    state = tmp_path / "hub"
    # The hub's own stored key signs at first; rotating it starts with a copy of it in a file.
    async with running(state) as (hub, session, admin):
        await create_bot(admin)
        old_token = await issue(admin)
        assert hub.store is not None
        old_pem = tmp_path / "old.pem"
        old_pem.write_bytes((await hub.store.get(SIGNING_KEY_KEY)).value)
    old_kid = decode(old_token)[0]["kid"]
    new_key = ec.generate_private_key(ec.SECP256R1())
    new_pem = tmp_path / "new.pem"
    new_pem.write_bytes(SigningKey(new_key).pem())
    new_kid = SigningKey(new_key).public.kid

    # A new key signs, the old one is listed: the old token still authenticates, both keys are published.
    # The issuer moves too; the old one stays accepted, and the API keeps the old audience.
    rotated = ("--service-account-signing-key-file", str(new_pem), "--service-account-key-file", str(old_pem),
               "--service-account-issuer", NEW_ISSUER, "--service-account-issuer", HUB_AUDIENCE,
               "--api-audiences", f"vault,{HUB_AUDIENCE}")
    async with running(state, *rotated) as (hub, session, admin):
        assert await whoami(hub, session, old_token) == 201
        new_token = await issue(admin)
        header, claims = decode(new_token)
        assert (header["alg"], header["kid"]) == ("ES256", new_kid)
        assert (claims["iss"], claims["aud"]) == (NEW_ISSUER, ["vault", HUB_AUDIENCE])  # the API audiences
        assert await whoami(hub, session, new_token) == 201
        jwks = await get(session, hub, "/openid/v1/jwks", new_token)
        assert sorted(k["kid"] for k in jwks["keys"]) == sorted([old_kid, new_kid])
        [jwk] = [k for k in jwks["keys"] if k["kid"] == new_kid]
        assert (jwk["kty"], jwk["crv"], jwk["alg"], jwk["use"]) == ("EC", "P-256", "ES256", "sig")
        # As any verifier would: the JWKS key checks the new token's signature.
        public = ec.EllipticCurvePublicNumbers(int.from_bytes(unb64(jwk["x"]), "big"),
                                               int.from_bytes(unb64(jwk["y"]), "big"), ec.SECP256R1()).public_key()
        signing_input, _, signature = new_token.rpartition(".")
        raw = unb64(signature)
        public.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
                      signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        configuration = await get(session, hub, "/.well-known/openid-configuration", new_token)
        assert (configuration["issuer"], configuration["jwks_uri"]) == (NEW_ISSUER, f"{NEW_ISSUER}/openid/v1/jwks")
        assert configuration["id_token_signing_alg_values_supported"] == ["ES256", "RS256"]
        # A token for an audience the API does not list is refused, and reviewed against the API's.
        other = await issue(admin, audiences=["elsewhere"])
        assert await whoami(hub, session, other) == 401
        review = await reviewed(admin, other)
        assert review == {"authenticated": False, "error": (
            f'token audiences ["elsewhere"] is invalid for the target audiences ["vault" "{HUB_AUDIENCE}"]')}

    # The old key no longer listed: its token ends; the new key's lives on.
    async with running(state, *rotated[:2], *rotated[4:]) as (hub, session, admin):
        assert await whoami(hub, session, new_token) == 201
        assert await whoami(hub, session, old_token) == 401
        review = await reviewed(admin, old_token)
        assert review == {"authenticated": False, "error": "invalid signature, no keys found"}
        jwks = await get(session, hub, "/openid/v1/jwks", new_token)
        assert [k["kid"] for k in jwks["keys"]] == [new_kid]


async def test_every_issuer_is_accepted_and_the_api_audiences_default_to_them(tmp_path: Path) -> None:
    flags = ("--service-account-issuer", NEW_ISSUER, "--service-account-issuer", OTHER_ISSUER,
             "--service-account-jwks-uri", "https://keys.example.com/jwks")
    async with running(tmp_path / "hub", *flags) as (hub, session, admin):
        account = await create_bot(admin)
        token = await issue(admin)
        assert (decode(token)[1]["iss"], decode(token)[1]["aud"]) == (NEW_ISSUER, [NEW_ISSUER, OTHER_ISSUER])
        assert await whoami(hub, session, token) == 201
        configuration = await get(session, hub, "/.well-known/openid-configuration", token)
        assert (configuration["issuer"], configuration["jwks_uri"]) == (NEW_ISSUER, "https://keys.example.com/jwks")

        assert hub.service_account_tokens is not None
        issuer = hub.service_account_tokens.issuer

        def signed(iss: str, aud: str) -> str:
            return issuer.sign(token_claims(
                issuer=iss, namespace="team", account="bot", account_uid=account["metadata"]["uid"],
                audiences=[aud], seconds=600, now=dt.datetime.now(dt.UTC),
            ))

        # The second issuer's token, for its audience: accepted. Another issuer's: not the hub's.
        assert await whoami(hub, session, signed(OTHER_ISSUER, OTHER_ISSUER)) == 201
        assert await whoami(hub, session, signed("https://elsewhere.example.com", NEW_ISSUER)) == 401
        review = await reviewed(admin, signed("https://elsewhere.example.com", NEW_ISSUER))
        assert review == {"authenticated": False, "error": "invalid bearer token"}
        # kubeadm's audience is no API audience here: refused, as kube-apiserver refuses it.
        assert await whoami(hub, session, signed(NEW_ISSUER, HUB_AUDIENCE)) == 401
        review = await reviewed(admin, signed(NEW_ISSUER, HUB_AUDIENCE))
        assert review["error"] == (
            f'token audiences ["{HUB_AUDIENCE}"] is invalid for the target audiences ["{NEW_ISSUER}" "{OTHER_ISSUER}"]')
