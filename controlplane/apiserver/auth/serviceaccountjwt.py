"""Service account tokens as kube-apiserver signs them: JWTs, and the issuer's discovery documents.

A TokenRequest's token (:mod:`.serviceaccounts`) is a JWT signed with the hub's signing key
(:mod:`.serviceaccountkeys`: ``RS256`` for an RSA key, kube's default, which every OIDC verifier
accepts: Vault's kubernetes auth, cloud workload identity, Istio; ``ES256`` and the like for an ECDSA
``--service-account-signing-key-file``), whose ``kid`` header is kube's: the base64url SHA-256 of
the DER public key. Its claims are kube's (``pkg/serviceaccount/claims.go``): ``iss`` (the first
``--service-account-issuer``, :data:`DEFAULT_ISSUER` unless told otherwise), ``sub``
``system:serviceaccount:<ns>:<name>``, ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and
``kubernetes.io`` (``namespace``, ``serviceaccount`` {name, uid}, and the bound ``pod``, ``secret``
or ``node`` {name, uid}). As kube's authenticator, :class:`TokenIssuer` accepts a token of any of the
issuers signed by any verification key (the one its ``kid`` names).

:func:`openid_routes` serves kube's ``/.well-known/openid-configuration`` (the first issuer's; its
``jwks_uri`` ``--service-account-jwks-uri``, else the issuer's ``/openid/v1/jwks``) and
``/openid/v1/jwks`` (every verification key); RBAC decides who reads them (kube's
``system:service-account-issuer-discovery``, bound to ``system:serviceaccounts``).

In: the keys, the flags (:class:`ServiceAccountOptions`), claims. Out: :class:`TokenIssuer` (sign,
verify), :func:`token_claims`, :func:`claims_extra`, :func:`credential_id`, :func:`check_times`,
:class:`JwtRejected`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from controlplane.apiserver.auth.serviceaccountkeys import PublicKey, SigningKey, b64
from controlplane.apiserver.identity import (
    EXTRA_CREDENTIAL_ID,
    EXTRA_NODE_NAME,
    EXTRA_NODE_UID,
    EXTRA_POD_NAME,
    EXTRA_POD_UID,
    HUB_AUDIENCE,
    service_account_user,
)

#: The default issuer of the hub's service account tokens (``iss``, ``--service-account-issuer``):
#: kubeadm's, which is also the hub's API audience by default (``--api-audiences``: the issuers).
DEFAULT_ISSUER: Final = HUB_AUDIENCE
DISCOVERY_PATH: Final = "/.well-known/openid-configuration"
JWKS_PATH: Final = "/openid/v1/jwks"
#: kube's ``jwt.DefaultLeeway``: clock skew tolerated on ``exp``/``nbf``/``iat``, and on deletions.
LEEWAY: Final = dt.timedelta(seconds=60)
_CACHE_CONTROL: Final = "public, max-age=3600"
#: The objects a token may be bound to (``boundObjectRef.kind``), as kube's claims name them.
BOUND_CLAIMS: Final = {"Pod": "pod", "Secret": "secret", "Node": "node"}


#: kube's audit annotation of a TokenRequest: the issued token's credential id (:func:`credential_id`).
ISSUED_CREDENTIAL_ID: Final = "authentication.kubernetes.io/issued-credential-id"


def credential_id(jti: str) -> str:
    """kube's credential id of a token with this ``jti`` (``CredentialIDForJTI``)."""
    return f"JTI={jti}"


class JwtRejected(Exception):
    """A JWT the hub does not accept; the message (kube's) never holds the token."""


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _segment(document: dict[str, Any]) -> str:
    return b64(json.dumps(document, sort_keys=True, separators=(",", ":")).encode())


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has a JWS compact form's shape (three dot-separated parts), as kube's
    authenticator tells a JWT from other bearer tokens."""
    return token.count(".") == 2


@dataclass(frozen=True)
class ServiceAccountOptions:
    """kube-apiserver's service account flags, as the hub takes them."""

    #: ``--service-account-issuer``: the first signs and is the discovery documents'; all are accepted.
    issuers: tuple[str, ...] = (DEFAULT_ISSUER,)
    #: ``--api-audiences``: the audiences the hub's API accepts; empty: the issuers (kube's default).
    api_audiences: tuple[str, ...] = ()
    #: ``--service-account-jwks-uri``; empty: the first issuer's ``/openid/v1/jwks``.
    jwks_uri: str = ""
    #: ``--service-account-signing-key-file``'s key; None: the one kept in the store.
    signing_key: SigningKey | None = None
    #: ``--service-account-key-file``'s keys: they verify tokens too.
    verification_keys: tuple[PublicKey, ...] = ()

    @property
    def audiences(self) -> tuple[str, ...]:
        return self.api_audiences or self.issuers


@dataclass(frozen=True)
class TokenIssuer:
    """Signs tokens as the first issuer with one key; verifies those of every issuer signed by any key."""

    signing_key: SigningKey
    issuers: tuple[str, ...] = (DEFAULT_ISSUER,)
    #: The keys that verify besides the signing key's.
    verification_keys: tuple[PublicKey, ...] = ()
    jwks_uri: str = ""
    #: Every key that verifies by its kid, the signing key's first, each once.
    keys_by_kid: dict[str, PublicKey] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = {k.kid: k for k in (self.signing_key.public, *self.verification_keys)}
        object.__setattr__(self, "keys_by_kid", keys)

    @classmethod
    def of(cls, signing_key: SigningKey, options: ServiceAccountOptions) -> TokenIssuer:
        return cls(signing_key, options.issuers, options.verification_keys, options.jwks_uri)

    @property
    def keys(self) -> list[PublicKey]:
        return list(self.keys_by_kid.values())

    @property
    def issuer(self) -> str:
        """The issuer tokens are signed as (``iss``), and the discovery documents'."""
        return self.issuers[0]

    def sign(self, claims: dict[str, Any]) -> str:
        kid, public = next(iter(self.keys_by_kid.items()))  # the signing key's
        signing_input = f"{_segment({'alg': public.algorithm, 'kid': kid})}.{_segment(claims)}"
        return f"{signing_input}.{b64(self.signing_key.sign(signing_input.encode('ascii')))}"

    def verify(self, token: str) -> dict[str, Any] | None:
        """The claims of a JWT one of the keys signed as one of the issuers; None for a token that
        is not the hub's (another issuer, not a JWT). Raises :class:`JwtRejected` for one whose
        signature does not verify (kube's: the key its ``kid`` names, every key without one)."""
        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header = json.loads(_unb64(header_b64))
            claims = json.loads(_unb64(payload_b64))
            signature = _unb64(signature_b64)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        if not isinstance(header, dict) or not isinstance(claims, dict) or claims.get("iss") not in self.issuers:
            return None
        kid = header.get("kid")
        if not isinstance(kid, str | None):
            raise JwtRejected("invalid signature, no keys found")
        keys = ([self.keys_by_kid[kid]] if kid in self.keys_by_kid else []) if kid else self.keys
        if not keys:
            raise JwtRejected("invalid signature, no keys found")
        signed = f"{header_b64}.{payload_b64}".encode("ascii")
        if not any(k.verifies(str(header.get("alg")), signed, signature) for k in keys):
            raise JwtRejected("invalid signature: the token was not signed by this issuer's key")
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
        extra[EXTRA_CREDENTIAL_ID] = [credential_id(claims["jti"])]
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


def jwks_uri(value: str) -> str:
    """A ``--service-account-jwks-uri``, checked as kube-apiserver checks it: an ``https`` URL."""
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme != "https" or not parsed.netloc:
        raise ValueError(f"service-account-jwks-uri requires https scheme, parsed as: {value}")
    return value


def openid_routes(issuer: TokenIssuer) -> list[web.RouteDef]:
    """kube-apiserver's service account issuer discovery: the OpenID provider configuration of the
    first issuer and the JSON Web Key Set of every verification key, behind authentication and RBAC
    as kube serves them."""
    configuration = {
        "issuer": issuer.issuer,
        "jwks_uri": issuer.jwks_uri or f"{issuer.issuer.rstrip('/')}{JWKS_PATH}",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": sorted({k.algorithm for k in issuer.keys}),
    }
    keys = json.dumps({"keys": [k.jwk() for k in issuer.keys]}).encode()

    async def discovery(_: web.Request) -> web.StreamResponse:
        return web.Response(body=json.dumps(configuration).encode(), content_type="application/json",
                            headers={"Cache-Control": _CACHE_CONTROL})

    async def jwks(_: web.Request) -> web.StreamResponse:
        return web.Response(body=keys, content_type="application/jwk-set+json",
                            headers={"Cache-Control": _CACHE_CONTROL})

    return [web.get(DISCOVERY_PATH, discovery), web.get(JWKS_PATH, jwks)]
