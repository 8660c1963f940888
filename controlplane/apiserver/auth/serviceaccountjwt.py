"""Service account tokens as kube-apiserver signs them: JWTs, and the issuer's discovery documents.

A TokenRequest's token (:mod:`.serviceaccounts`) is a JWT signed ``RS256`` (kube-apiserver's
default, which every OIDC verifier accepts: Vault's kubernetes auth, cloud workload identity,
Istio) with the hub's signing key, whose ``kid`` header is kube's: the base64url SHA-256 of the
DER public key. Its claims are kube's (``pkg/serviceaccount/claims.go``): ``iss`` (the issuer URL,
:data:`DEFAULT_ISSUER` unless ``--service-account-issuer`` says otherwise),
``sub`` ``system:serviceaccount:<ns>:<name>``, ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and
``kubernetes.io`` (``namespace``, ``serviceaccount`` {name, uid}, and the bound ``pod``, ``secret``
or ``node`` {name, uid}).

The signing key is an RSA key created once, by the first hub to start, and kept in the hub's store
(etcd) under :data:`SIGNING_KEY_KEY`, outside the API keyspace as the token records are: every
replica and every restart signs and verifies with the same key, without a file to copy between
replicas. Never logged.

:func:`openid_routes` serves kube's ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``;
RBAC decides who reads them (kube's ``system:service-account-issuer-discovery``, bound to
``system:serviceaccounts``).

In: a Store (for the key), claims. Out: :class:`SigningKey` (sign, verify), :func:`token_claims`,
:func:`check_times`, :class:`JwtRejected`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
import hashlib
import json
import logging
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from controlplane.apiserver.identity import (
    EXTRA_CREDENTIAL_ID,
    EXTRA_NODE_NAME,
    EXTRA_NODE_UID,
    EXTRA_POD_NAME,
    EXTRA_POD_UID,
    HUB_AUDIENCE,
    service_account_user,
)
from controlplane.storage.interface import AlreadyExists, NotFound, Store, Unavailable

log = logging.getLogger(__name__)

#: The default issuer of the hub's service account tokens (``iss``, ``--service-account-issuer``):
#: kubeadm's, which is also the hub's API audience.
DEFAULT_ISSUER: Final = HUB_AUDIENCE
ALGORITHM: Final = "RS256"
#: Where the signing key lives in the store (not an API object key, as the token records).
SIGNING_KEY_KEY: Final = "/gpufed-auth/service-account-signing-key"
DISCOVERY_PATH: Final = "/.well-known/openid-configuration"
JWKS_PATH: Final = "/openid/v1/jwks"
#: kube's ``jwt.DefaultLeeway``: clock skew tolerated on ``exp``/``nbf``/``iat``, and on deletions.
LEEWAY: Final = dt.timedelta(seconds=60)
_RSA_BITS: Final = 2048
_STORE_TIMEOUT_SECONDS: Final = 10.0
_CACHE_CONTROL: Final = "public, max-age=3600"
#: The objects a token may be bound to (``boundObjectRef.kind``), as kube's claims name them.
BOUND_CLAIMS: Final = {"Pod": "pod", "Secret": "secret", "Node": "node"}


class JwtRejected(Exception):
    """A JWT the hub does not accept; the message (kube's) never holds the token."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _segment(document: dict[str, Any]) -> str:
    return _b64(json.dumps(document, sort_keys=True, separators=(",", ":")).encode())


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has a JWS compact form's shape (three dot-separated parts), as kube's
    authenticator tells a JWT from other bearer tokens."""
    return token.count(".") == 2


@dataclass(frozen=True)
class SigningKey:
    """The hub's service account signing key."""

    private: rsa.RSAPrivateKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=_RSA_BITS))

    @classmethod
    async def load_or_create(cls, store: Store) -> SigningKey:
        """The key in ``store``, created there by the first hub that finds none."""
        try:
            async with asyncio.timeout(_STORE_TIMEOUT_SECONDS):
                return await cls._load_or_create(store)
        except TimeoutError:
            raise Unavailable(
                f"the store did not answer within {_STORE_TIMEOUT_SECONDS:g}s for the service account signing key"
            ) from None

    @classmethod
    async def _load_or_create(cls, store: Store) -> SigningKey:
        try:
            return cls._of(await store.get(SIGNING_KEY_KEY))
        except NotFound:
            pass
        key = cls.generate()
        pem = key.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            await store.create(SIGNING_KEY_KEY, pem)
        except AlreadyExists:  # another replica made it first: use that one
            return cls._of(await store.get(SIGNING_KEY_KEY))
        log.info("created the service account signing key (kid %s)", key.kid)
        return key

    @classmethod
    def _of(cls, kv: Any) -> SigningKey:
        try:
            private = serialization.load_pem_private_key(kv.value, password=None)
        except ValueError:
            private = None
        if not isinstance(private, rsa.RSAPrivateKey):
            raise ValueError(
                f"the store's {SIGNING_KEY_KEY} does not hold a PEM RSA private key: delete it to have a new one "
                "made (service account tokens signed with the old one stop working)"
            )
        return cls(private)

    @property
    def kid(self) -> str:
        """kube's key id: the base64url SHA-256 of the DER (PKIX) public key."""
        der = self.private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return _b64(hashlib.sha256(der).digest())

    def jwk(self) -> dict[str, str]:
        """The public key as a JWK, as kube's ``/openid/v1/jwks`` lists it."""
        numbers = self.private.public_key().public_numbers()
        return {
            "use": "sig", "kty": "RSA", "kid": self.kid, "alg": ALGORITHM,
            "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
            "e": _b64(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")),
        }

    def sign(self, claims: dict[str, Any]) -> str:
        signing_input = f"{_segment({'alg': ALGORITHM, 'kid': self.kid})}.{_segment(claims)}"
        signature = self.private.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def verify(self, token: str, *, issuer: str) -> dict[str, Any] | None:
        """The claims of a JWT this key signed as ``issuer``; None for a token that is not the hub's
        (another issuer, not a JWT). Raises :class:`JwtRejected` for one whose signature does not
        verify."""
        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header = json.loads(_unb64(header_b64))
            claims = json.loads(_unb64(payload_b64))
            signature = _unb64(signature_b64)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        if not isinstance(header, dict) or not isinstance(claims, dict) or claims.get("iss") != issuer:
            return None
        if header.get("alg") != ALGORITHM or header.get("kid") not in (None, self.kid):
            raise JwtRejected("invalid signature: the token was not signed by this issuer's key")
        try:
            self.private.public_key().verify(
                signature, f"{header_b64}.{payload_b64}".encode("ascii"), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            raise JwtRejected("invalid signature: the token was not signed by this issuer's key") from None
        return claims


def token_claims(
    *, issuer: str, namespace: str, account: str, account_uid: str, audiences: list[str], seconds: int, now: dt.datetime,
    bound: tuple[str, str, str] | None = None, node: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """kube's claims for a TokenRequest's token; ``bound`` is ``(kind, name, uid)`` of its
    ``boundObjectRef`` (a Pod, Secret or Node); ``node`` the ``(name, uid)`` of a bound Pod's node
    (the uid empty when that Node is not found)."""
    issued = int(now.timestamp())
    private: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": account, "uid": account_uid}}
    if bound is not None:
        kind, name, uid = bound
        private[BOUND_CLAIMS[kind]] = {"name": name, "uid": uid}
    if node is not None:
        private["node"] = {"name": node[0], **({"uid": node[1]} if node[1] else {})}
    return {
        "iss": issuer,
        "sub": service_account_user(namespace, account),
        "aud": list(audiences),
        "exp": issued + seconds,
        "iat": issued,
        "nbf": issued,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": private,
    }


def claims_extra(claims: dict[str, Any]) -> dict[str, list[str]]:
    """kube's user extras of a verified JWT (``ServiceAccountInfo.UserInfo``): the bound Pod's name
    and uid, the Node's (a pod-bound token's node, or the bound Node), and the token's id."""
    private = claims.get("kubernetes.io")
    private = private if isinstance(private, dict) else {}
    extra: dict[str, list[str]] = {}
    pod, node = private.get("pod"), private.get("node")
    if isinstance(pod, dict) and pod.get("name") and pod.get("uid"):
        extra[EXTRA_POD_NAME], extra[EXTRA_POD_UID] = [str(pod["name"])], [str(pod["uid"])]
    if isinstance(node, dict) and node.get("name"):
        extra[EXTRA_NODE_NAME] = [str(node["name"])]
        if node.get("uid"):
            extra[EXTRA_NODE_UID] = [str(node["uid"])]
    if isinstance(claims.get("jti"), str) and claims["jti"]:
        extra[EXTRA_CREDENTIAL_ID] = [f"JTI={claims['jti']}"]
    return extra


def audiences_of(claims: dict[str, Any]) -> list[str]:
    aud = claims.get("aud")
    if isinstance(aud, str):
        return [aud]
    return [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []


def check_audiences(claims: dict[str, Any], wanted: list[str]) -> list[str]:
    """The token's audiences among ``wanted`` (kube's intersection); JwtRejected when none."""
    audiences = audiences_of(claims)
    common = [a for a in audiences if a in wanted]
    if not common:
        raise JwtRejected(f"token audiences {_go_list(audiences)} is invalid for the target audiences {_go_list(wanted)}")
    return common


def check_times(claims: dict[str, Any], *, now: dt.datetime) -> None:
    """kube's time checks (go-jose's, with :data:`LEEWAY`)."""
    seconds = now.timestamp()
    leeway = LEEWAY.total_seconds()
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise JwtRejected("service account token claims could not be validated due to unexpected validation error")
    if claims.get("nbf") is not None and seconds + leeway < claims["nbf"]:
        raise JwtRejected("service account token is not valid yet")
    if claims.get("exp") is not None and seconds - leeway > claims["exp"]:
        raise JwtRejected("service account token has expired")
    if claims.get("iat") is not None and seconds + leeway < claims["iat"]:
        raise JwtRejected("service account token is issued in the future")


def _go_list(values: list[str]) -> str:
    """A list of strings as Go's ``%q`` prints it (``["a" "b"]``), as kube's messages show them."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def issuer_url(value: str) -> str:
    """A ``--service-account-issuer``, checked as kube-apiserver checks it for issuer discovery: an
    ``https`` URL without query or fragment (its ``/openid/v1/jwks`` is where verifiers fetch the keys)."""
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme != "https" or not parsed.netloc:
        raise ValueError(f"issuer URL must use https scheme, got: {value}")
    if parsed.query or parsed.fragment:
        raise ValueError(f"issuer URL must not contain a query or fragment, got: {value}")
    return value


def openid_routes(key: SigningKey, *, issuer: str) -> list[web.RouteDef]:
    """kube-apiserver's service account issuer discovery: the OpenID provider configuration and
    the JSON Web Key Set, behind authentication and RBAC as kube serves them."""
    configuration = {
        "issuer": issuer,
        "jwks_uri": f"{issuer.rstrip('/')}{JWKS_PATH}",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": [ALGORITHM],
    }
    keys = json.dumps({"keys": [key.jwk()]}).encode()

    async def discovery(_: web.Request) -> web.StreamResponse:
        return web.Response(body=json.dumps(configuration).encode(), content_type="application/json",
                            headers={"Cache-Control": _CACHE_CONTROL})

    async def jwks(_: web.Request) -> web.StreamResponse:
        return web.Response(body=keys, content_type="application/jwk-set+json",
                            headers={"Cache-Control": _CACHE_CONTROL})

    return [web.get(DISCOVERY_PATH, discovery), web.get(JWKS_PATH, jwks)]
