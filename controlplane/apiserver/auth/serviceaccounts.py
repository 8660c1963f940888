"""Service account tokens: the ``token`` subresource of a ServiceAccount (``kubectl create token``).

As kube-apiserver's TokenRequest (``POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token``,
``authentication.k8s.io/v1`` ``TokenRequest``): the caller needs ``create`` on
``serviceaccounts/token`` (kube's ``edit`` and ``admin`` roles have it); the answer is ``201`` with
the request, its ``spec`` defaulted (``expirationSeconds`` 3600; ``audiences`` the API audiences), and
``status.token`` and ``status.expirationTimestamp``. ``metadata.name``/``namespace`` in the body
must match the URL; ``expirationSeconds`` is at least 600 and at most 2^32; a missing service
account is ``404``.

The token is kube's signed JWT (:mod:`.serviceaccountjwt`: ``RS256``, kube's claims, the issuer's
keys at ``/openid/v1/jwks``), for the request's ``audiences`` (default: the API audiences,
``--api-audiences``, by default the issuers). ``boundObjectRef`` binds it to a Pod (running as that
account), Secret or Node that exists (with the given uid, if any), named in its claims, as kube's. For one of the API audiences it authenticates as
``system:serviceaccount:<ns>:<name>`` in the groups ``system:serviceaccounts`` and
``system:serviceaccounts:<ns>`` (RBAC bindings to the service account or those groups apply). As
kube's authenticator, every request checks the signature, the issuer, the audience, ``exp``/``nbf``
(60 s leeway), that the account still exists with the uid the token names (from memory:
:class:`ServiceAccountTokens` watches the ServiceAccounts), and that the bound object does (from the
watch cache's memory, as kube's getter reads its listers; from the store when memory has no such
object, so a deleted one ends the token as soon as the hub's watch sees the deletion). A TokenReview
checks its ``spec.audiences`` instead of the API's and answers the token's audiences among them. Opaque ``<id>.<secret>`` tokens (:mod:`.tokens`) issued before keep
working until they expire, bound to the account's uid the same way; their records are revoked when
the account is deleted.

Long-lived tokens live in Secrets of type ``kubernetes.io/service-account-token``, as kube's legacy
tokens: the token controller (:mod:`controlplane.controllers.serviceaccounttokens`) asks
:meth:`ServiceAccountTokens.issue` for one, without expiry, bound to the account's uid and to the
Secret. As kube-apiserver's legacy token authenticator, the hub accepts it while that Secret exists,
is not being deleted nor marked ``kubernetes.io/legacy-token-invalid-since``, and still holds that
very token (the Secrets of that type are watched here, on every replica), and while the account
exists with that uid. A deleted Secret's token, or the token a Secret no longer holds, is revoked.
As kube-apiserver does, a Secret whose token is used (even refused as marked invalid) is labelled
``kubernetes.io/legacy-token-last-used`` with the day (UTC), once a day: the authentication only
queues the Secret (bounded, never waiting), one task writes the label, with the Secret's uid in the
patch as kube's (a Secret deleted and created again under the name is not labelled for the old
one's use). The leader's legacy token cleaner
(:mod:`controlplane.controllers.legacytokencleaning`) reads these labels.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any, Final

from aiohttp import web

from controlplane.apis.kube.serviceaccounttokens import (
    LAST_USED_LABEL,
    TokenSecret,
    is_token_secret,
    last_used_due,
    token_secret,
)
from controlplane.apis.timestamps import format_time, parse_time_or_none
from controlplane.apiserver import audit, errors
from controlplane.apiserver.auth.bootstrap import read_object_body
from controlplane.apiserver.auth.serviceaccountjwt import (
    BOUND_CLAIMS,
    ISSUED_CREDENTIAL_ID,
    LEEWAY,
    JwtRejected,
    ServiceAccountOptions,
    TokenIssuer,
    check_audiences,
    check_times,
    claims_extra,
    credential_id,
    looks_like_jwt,
    openid_routes,
    token_claims,
)
from controlplane.apiserver.auth.serviceaccountkeys import SigningKey
from controlplane.apiserver.auth.tokens import StoredToken, TokenStore
from controlplane.apiserver.computed import ComputedEndpoint, ComputedResource
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.identity import (
    AUTHENTICATED,
    Role,
    UserInfo,
    service_account_groups,
    service_account_of,
    service_account_user,
    user_extra,
)
from controlplane.apiserver.objects import ObjectStore, WatchEventType
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.watchcache import WatchCache
from controlplane.controllers.informing import Informer
from controlplane.storage.interface import StorageError, Store

log = logging.getLogger(__name__)

GROUP: Final = "authentication.k8s.io"
KIND: Final = "TokenRequest"
DEFAULT_EXPIRATION_SECONDS: Final = 3600
MIN_EXPIRATION_SECONDS: Final = 10 * 60
MAX_EXPIRATION_SECONDS: Final = 2**32
#: The ``token`` subresource, as kube's discovery lists it (an ``authentication.k8s.io/v1`` kind in ``v1``).
TOKEN_REQUESTS: Final = ComputedResource(
    "", "v1", "serviceaccounts", KIND, namespaced=True, subresource="token", kind_group=GROUP, kind_version="v1"
)
_NO_STORE: Final = {"Cache-Control": "no-store"}
#: Secrets waiting for their last-used label, at most (more uses wait for the next authentication).
_LAST_USED_BACKLOG: Final = 1024


def _invalid(name: str, path: str, value: Any, detail: str) -> errors.ApiError:
    shown = f'"{value}"' if isinstance(value, str) else ("null" if value is None else str(value))
    cause = errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, f"Invalid value: {shown}: {detail}", path)
    return errors.invalid(kind=KIND, group=GROUP, name=name, causes=[cause])


def _expiration(spec: dict[str, Any]) -> int:
    value = spec.get("expirationSeconds", DEFAULT_EXPIRATION_SECONDS)
    if value is None:
        return DEFAULT_EXPIRATION_SECONDS
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid("", "spec.expirationSeconds", value, "must be an integer")
    if value < MIN_EXPIRATION_SECONDS:
        raise _invalid("", "spec.expirationSeconds", value, "may not specify a duration less than 10 minutes")
    if value > MAX_EXPIRATION_SECONDS:
        raise _invalid("", "spec.expirationSeconds", value, "may not specify a duration larger than 2^32 seconds")
    return value


def _audiences(spec: dict[str, Any], api_audiences: list[str]) -> list[str]:
    value = spec.get("audiences")
    if not value:
        return list(api_audiences)
    if not isinstance(value, list) or not all(isinstance(a, str) and a for a in value):
        raise _invalid("", "spec.audiences", value, "must be a list of non-empty strings")
    return list(value)


def _bound_ref(spec: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(kind, name, uid)`` of ``spec.boundObjectRef``, or None; kube's message for another kind."""
    ref = spec.get("boundObjectRef")
    if not ref:
        return None
    if not isinstance(ref, dict):
        raise _invalid("", "spec.boundObjectRef", ref, "must be an object reference")
    kind, api_version = str(ref.get("kind") or ""), str(ref.get("apiVersion") or "")
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    if group or kind not in BOUND_CLAIMS:
        version = api_version.rpartition("/")[2]
        raise errors.BadRequest(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
    if not ref.get("name"):
        raise _invalid("", "spec.boundObjectRef.name", "", "Required value")
    return kind, str(ref["name"]), str(ref.get("uid") or "")


def _account_of(claims: dict[str, Any]) -> tuple[str, str, Any]:
    """(namespace, name, uid) of the service account a verified JWT names; JwtRejected with
    kube's message when its private claim is malformed."""
    private = claims.get("kubernetes.io")
    private = private if isinstance(private, dict) else {}
    namespace, ref = private.get("namespace"), private.get("serviceaccount")
    if not isinstance(namespace, str) or not isinstance(ref, dict) or not namespace or not ref.get("name"):
        raise JwtRejected("service account token claims could not be validated due to unexpected private claim")
    return namespace, str(ref["name"]), ref.get("uid")


def _bound_claim(claims: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The kind and claim of the object a verified JWT is bound to (kube checks one, the first set)."""
    private = claims.get("kubernetes.io")
    for kind, claim in BOUND_CLAIMS.items():
        ref = private.get(claim) if isinstance(private, dict) else None
        if isinstance(ref, dict):
            return kind, ref
    return None


def _deleted_before(obj: dict[str, Any], cutoff: dt.datetime) -> bool:
    """kube's check of a token's object: deleted (marked) longer than the leeway ago."""
    deleting = parse_time_or_none((obj.get("metadata") or {}).get("deletionTimestamp"))
    return deleting is not None and deleting < cutoff


def _check_bound_object(obj: dict[str, Any], kind: str, ref: dict[str, Any]) -> None:
    """kube's check of a token's existing bound object: the uid the token names, not deleted (in kube's order)."""
    uid = obj["metadata"].get("uid")
    if uid != ref.get("uid"):
        claim = BOUND_CLAIMS[kind]
        raise JwtRejected(f"{claim} UID ({uid}) does not match service account {claim} ref claim ({ref.get('uid')})")
    if _deleted_before(obj, dt.datetime.now(dt.UTC) - LEEWAY):
        raise JwtRejected("service account token has been invalidated")


class ServiceAccountTokens:
    """Issues service account tokens, and keeps them valid only while their account (and, for a
    Secret's token, that Secret) exists.

    Run :meth:`run` (every hub replica) and await :meth:`synced` before serving: the tokens'
    check reads the ServiceAccounts and token Secrets these informers hold.
    """

    def __init__(
        self, tokens: TokenStore, objects: ObjectStore, issuer: TokenIssuer | None = None, *,
        api_audiences: tuple[str, ...] = (), cache: WatchCache | None = None,
    ) -> None:
        self._tokens = tokens
        self._objects = objects
        #: Where the bound Pods, Secrets and Nodes are read from memory (None: from the store).
        self._cache = cache
        #: Signs and verifies the TokenRequests' JWTs (the hub's signs with the key its store keeps, or its flag's).
        self.issuer = issuer or TokenIssuer(SigningKey.generate())
        #: kube's API audiences (``--api-audiences``, by default the issuers): what a token must be for
        #: to authenticate to the hub, a TokenRequest's and a TokenReview's default audiences.
        self.api_audiences = list(api_audiences or self.issuer.issuers)
        self._rt = objects.registry.require("v1", "ServiceAccount")
        #: The ServiceAccounts (the leader's token controller reads this cache too, as kube's share informers).
        self.accounts = Informer(objects, self._rt)
        self.accounts.add_handler(self._on_event)
        #: The Secrets of type ``kubernetes.io/service-account-token`` (no other Secret is kept).
        self._secrets_rt = objects.registry.require("v1", "Secret")
        self.secrets = Informer(objects, self._secrets_rt, keep=is_token_secret)
        self.secrets.add_handler(self._on_secret)
        #: Secrets (namespace, name, uid) whose token was used and whose last-used label is due: queued once each.
        self._used: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue(maxsize=_LAST_USED_BACKLOG)
        self._used_queued: set[tuple[str, str, str]] = set()
        tokens.bind(self._bound_objects_exist, used=self._secret_used)

    @classmethod
    async def load(
        cls, tokens: TokenStore, objects: ObjectStore, store: Store, *,
        options: ServiceAccountOptions | None = None, cache: WatchCache | None = None,
    ) -> ServiceAccountTokens:
        """As kube-apiserver's flags say (``options``); without a signing key among them, with the
        one kept in ``store`` (made by the first hub), shared by every replica."""
        options = options or ServiceAccountOptions()
        key = options.signing_key or await SigningKey.load_or_create(store)
        return cls(tokens, objects, TokenIssuer.of(key, options), api_audiences=options.audiences, cache=cache)

    def openid_routes(self) -> list[web.RouteDef]:
        """The issuer's discovery documents (``/.well-known/openid-configuration``, ``/openid/v1/jwks``)."""
        return openid_routes(self.issuer)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.accounts.run())
            group.create_task(self.secrets.run())
            group.create_task(self.label_used())
            await self.synced()
            # Accounts deleted while no hub watched: their tokens already fail the check; drop them.
            try:
                revoked = await self._tokens.revoke_orphans()
            except StorageError as exc:  # the check still refuses them; the next start drops them
                log.warning("could not revoke the tokens of deleted service accounts: %s", exc)
                revoked = []
            if revoked:
                log.info("revoked %d token(s) of service accounts deleted while the hub was down", len(revoked))

    async def synced(self) -> None:
        await self.accounts.synced.wait()
        await self.secrets.synced.wait()

    async def issue(self, *, namespace: str, account: str, account_uid: str, secret: str) -> str:
        """A token for Secret ``namespace/secret`` of service account ``account`` (uid ``account_uid``):
        no expiry; valid while the account exists and the Secret holds it. Never logged."""
        issued = await self._tokens.create(
            role=Role.USER, name=service_account_user(namespace, account), groups=service_account_groups(namespace),
            bound_uid=account_uid, bound_secret=secret,
        )
        log.info("issued a token for secret %s/%s of service account %s", namespace, secret, account,
                 extra={"token_id": issued.id})
        return issued.token

    async def withdraw(self, token: str, *, namespace: str, secret: str) -> None:
        """Revoke a token :meth:`issue` gave for a Secret that was not written with it."""
        await self._tokens.revoke_held(token, namespace=namespace, secret=secret)

    async def authenticate(self, token: str) -> UserInfo | None:
        """The hub's authenticator: a JWT this hub signed for one of the API audiences, else an opaque token."""
        reviewed = await self.review(token, self.api_audiences)
        return reviewed[0] if isinstance(reviewed, tuple) else None

    def authenticate_cached(self, token: str) -> tuple[bool, UserInfo | None]:
        """:meth:`authenticate` from memory when it can tell (a JWT is checked against the
        ServiceAccounts the informer holds, and its bound object against the watch cache's), for
        the request path."""
        if not looks_like_jwt(token):
            return self._tokens.authenticate_cached(token)
        try:
            claims = self._verified(token, self.api_audiences)[0]
        except JwtRejected as exc:
            log.debug("service account token rejected: %s", exc)
            return True, None
        if claims is None:
            return True, None
        try:
            bound = _bound_claim(claims)
            if bound is not None:
                held = self._bound_in_memory(claims, *bound)
                if held is None:  # not in memory: the store answers
                    return False, None
                _check_bound_object(held, *bound)
            account = self.accounts.get(*_account_of(claims)[:2])
            if account is None:  # not in memory (created a moment ago): the store answers
                return False, None
            return True, self._jwt_user(claims, account)
        except JwtRejected as exc:
            log.debug("service account token rejected: %s", exc)
            return True, None

    async def review(self, token: str, audiences: list[str]) -> tuple[UserInfo, list[str]] | str:
        """A TokenReview's answer: the user and the token's audiences among ``audiences`` (kube's
        intersection), or why the token is refused (kube's message for a JWT)."""
        if not looks_like_jwt(token):  # audience-agnostic, as kube's: good for the API audiences asked for
            implicit = [a for a in self.api_audiences if a in audiences]
            user = await self._tokens.authenticate(token) if implicit else None
            return "invalid bearer token" if user is None else (user, implicit)
        try:
            claims, common = self._verified(token, audiences)
            if claims is None:
                return "invalid bearer token"
            bound = _bound_claim(claims)
            if bound is not None:
                await self._check_bound(claims, *bound)
            return self._jwt_user(claims, await self._account(*_account_of(claims)[:2])), common
        except JwtRejected as exc:
            log.debug("service account token rejected: %s", exc)
            return str(exc)

    def _verified(self, token: str, audiences: list[str]) -> tuple[dict[str, Any] | None, list[str]]:
        """The claims of a JWT signed by the hub for one of ``audiences``, and those audiences, not
        expired; None for a token of another issuer. JwtRejected otherwise."""
        claims = self.issuer.verify(token)
        if claims is None:
            return None, []
        common = check_audiences(claims, audiences)
        check_times(claims, now=dt.datetime.now(dt.UTC))
        return claims, common

    async def _account(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ServiceAccount from the informer's memory, else from the store (kube's getter reads a
        lister, then GETs: an account created a moment ago is found)."""
        account = self.accounts.get(namespace, name)
        if account is not None:
            return account
        try:
            return await self._objects.get(self._rt, namespace=namespace, name=name)
        except errors.NotFound:
            return None

    def _jwt_user(self, claims: dict[str, Any], account: dict[str, Any] | None) -> UserInfo:
        """The service account of a verified JWT, if ``account`` (the one it names, as read) still
        exists with the uid it names (kube's validator)."""
        namespace, name, uid_claim = _account_of(claims)
        if account is None:
            raise JwtRejected(f'serviceaccount "{name}" not found')  # kube's lister's message
        uid = (account.get("metadata") or {}).get("uid")
        if uid != uid_claim:
            raise JwtRejected(f"service account UID ({uid}) does not match claim ({uid_claim})")
        if _deleted_before(account, dt.datetime.now(dt.UTC) - LEEWAY):
            raise JwtRejected(f"service account {namespace}/{name} has been deleted")
        groups = (*service_account_groups(namespace), AUTHENTICATED)
        return UserInfo(name=service_account_user(namespace, name), role=Role.USER, user_groups=groups,
                        uid=str(uid), extra=user_extra(claims_extra(claims)))

    async def _check_bound(self, claims: dict[str, Any], kind: str, ref: dict[str, Any]) -> None:
        """kube's check of a token's bound object: it still exists with the uid the token names
        (from memory, else from the store, as kube's getter reads a lister, then GETs)."""
        rt = self._objects.registry.require("v1", kind)
        namespace = (claims.get("kubernetes.io") or {}).get("namespace") if rt.namespaced else None
        reads = self._objects if self._cache is None else self._cache
        try:
            obj = await reads.get(rt, namespace=namespace, name=str(ref.get("name") or ""))
        except errors.NotFound:
            raise JwtRejected("service account token has been invalidated") from None
        _check_bound_object(obj, kind, ref)

    def _bound_in_memory(self, claims: dict[str, Any], kind: str, ref: dict[str, Any]) -> dict[str, Any] | None:
        """The token's bound object as the watch cache holds it; None when it holds none."""
        if self._cache is None:
            return None
        rt = self._objects.registry.require("v1", kind)
        namespace = (claims.get("kubernetes.io") or {}).get("namespace") if rt.namespaced else None
        return self._cache.cached(rt, namespace=namespace, name=str(ref.get("name") or ""))

    def _bound_objects_exist(self, stored: StoredToken) -> bool:
        """Whether the service account ``stored`` is bound to still exists with its uid, and the
        Secret it was issued for (if any) still holds it, as kube's legacy token authenticator checks."""
        named = service_account_of(stored.name)
        if named is None:
            return False
        account = self.accounts.get(*named)
        if account is None or (account.get("metadata") or {}).get("uid") != stored.bound_uid:
            return False
        if account["metadata"].get("deletionTimestamp"):
            return False
        if stored.bound_secret is None:
            return True
        held = token_secret(self.secrets.get(named[0], stored.bound_secret))
        if held is None or held.account != named[1] or held.deleting or not held.token or not stored.holds(held.token):
            return False
        if held.invalidated:
            self._queue_used(held)  # as kube's: the use of a token refused as invalid is recorded too
            return False
        return True

    def _secret_used(self, stored: StoredToken) -> None:
        """Queue the Secret of a token just used for its last-used label, when that is due."""
        named = service_account_of(stored.name)
        if stored.bound_secret is None or named is None:
            return
        held = token_secret(self.secrets.get(named[0], stored.bound_secret))
        if held is not None:
            self._queue_used(held)

    def _queue_used(self, held: TokenSecret) -> None:
        if last_used_due(held, now=dt.datetime.now(dt.UTC)) is None:
            return
        key = (held.namespace, held.name, held.uid)  # the Secret that vouched for the token, not its name
        if key in self._used_queued or self._used.full():
            return
        self._used_queued.add(key)
        self._used.put_nowait(key)

    async def label_used(self) -> None:
        """Label each queued Secret with the day its token was used (kube's legacy token tracking;
        :meth:`run` runs it): a merge patch naming the Secret's uid, as kube-apiserver's, which the
        API refuses for another Secret created under that name since (``metadata.uid``: field is
        immutable)."""
        while True:
            namespace, name, uid = key = await self._used.get()
            try:
                held = token_secret(self.secrets.get(namespace, name))
                day = None if held is None or held.uid != uid else last_used_due(held, now=dt.datetime.now(dt.UTC))
                if day is not None:
                    await self._objects.patch(
                        self._secrets_rt, namespace=namespace, name=name, patch_type=PatchType.MERGE,
                        patch={"metadata": {"uid": uid, "labels": {LAST_USED_LABEL: day}}},
                    )
            except (errors.ApiError, StorageError) as exc:  # the next use tries again
                log.debug("could not label secret %s/%s as used: %s", namespace, name, exc)
            finally:
                self._used_queued.discard(key)

    async def _on_secret(self, event: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Revoke the token a deleted Secret held, or the one a Secret no longer holds."""
        gone = token_secret(obj if event is WatchEventType.DELETED else old)
        if gone is None or not gone.token:
            return
        if event is not WatchEventType.DELETED:
            current = token_secret(obj)
            if current is not None and current.token == gone.token:
                return
        try:
            revoked = await self._tokens.revoke_held(gone.token, namespace=gone.namespace, secret=gone.name)
        except StorageError as exc:  # the check refuses it already; the next start drops it
            log.warning("could not revoke the token of secret %s/%s: %s", gone.namespace, gone.name, exc)
            return
        if revoked:
            log.info("revoked the token of secret %s/%s", gone.namespace, gone.name)

    async def _on_event(self, event: WatchEventType, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        if event is not WatchEventType.DELETED:
            return
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        try:
            revoked = await self._tokens.revoke_bound(str(uid))
        except StorageError as exc:  # the check refuses them already; the next start drops them
            log.warning("could not revoke the tokens of deleted service account %s/%s: %s",
                        meta.get("namespace"), meta.get("name"), exc)
            return
        if revoked:
            log.info("revoked %d token(s) of deleted service account %s/%s",
                     len(revoked), meta.get("namespace"), meta.get("name"))

    def endpoints(self) -> list[ComputedEndpoint]:
        """The ``token`` subresource and its handler, for ``create_app(computed=...)``."""
        return [ComputedEndpoint(TOKEN_REQUESTS, self._create)]

    async def _bound_object(
        self, namespace: str, account: str, kind: str, name: str, uid: str
    ) -> tuple[tuple[str, str, str], tuple[str, str] | None]:
        """``(kind, name, uid)`` of the object a TokenRequest binds its token to, as kube's checks it,
        and for a Pod the ``(name, uid)`` of its node (:meth:`_node_of`)."""
        rt = self._objects.registry.require("v1", kind)
        obj = await self._objects.get(rt, namespace=namespace if rt.namespaced else None, name=name)  # 404 when absent
        if kind == "Pod" and (obj.get("spec") or {}).get("serviceAccountName") != account:
            raise errors.BadRequest(f'cannot bind token for serviceaccount "{account}" to pod running with '
                                    "different serviceaccount name.")
        actual = str(obj["metadata"]["uid"])
        if uid and uid != actual:
            raise errors.Conflict(
                f'Operation cannot be fulfilled on {kind} "{name}": the UID in the bound object reference ({uid}) '
                "does not match the UID in record. The object might have been deleted and then recreated",
                target=errors.Target(name=name, kind=kind),
            )
        return (kind, name, actual), (await self._node_of(obj) if kind == "Pod" else None)

    async def _node_of(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        """``(name, uid)`` of the node ``pod`` runs on, for the token's ``node`` claim (kube's
        ``ServiceAccountTokenPodNodeInfo``): the uid empty when that Node is not found."""
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not isinstance(node_name, str) or not node_name:
            return None
        try:
            node = await self._objects.get(self._objects.registry.require("v1", "Node"), namespace=None, name=node_name)
        except errors.NotFound:
            return node_name, ""  # kube issues the token anyway, with the node's name only
        return node_name, str(node["metadata"]["uid"])

    async def _create(self, request: web.Request) -> web.StreamResponse:
        """A TokenRequest, its CreateOptions checked by the route. A ``dryRun=All`` issues the token
        all the same, as kube's TokenRequest storage does (it stores nothing in either case)."""
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        body = await read_object_body(request)
        meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        if meta.get("name") and meta["name"] != name:
            raise _invalid(name, "metadata.name", meta["name"], "must match the service account name if specified")
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise _invalid(name, "metadata.namespace", meta["namespace"],
                           "must match the service account namespace if specified")
        account = await self._objects.get(self._rt, namespace=namespace, name=name)  # 404 when absent
        spec: dict[str, Any] = body["spec"] if isinstance(body.get("spec"), dict) else {}
        audiences, seconds = _audiences(spec, self.api_audiences), _expiration(spec)
        ref = _bound_ref(spec)
        bound, node = (None, None) if ref is None else await self._bound_object(namespace, name, *ref)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        claims = token_claims(issuer=self.issuer.issuer, namespace=namespace, account=name, account_uid=str(account["metadata"]["uid"]),
                              audiences=audiences, seconds=seconds, now=now, bound=bound, node=node)
        token = self.issuer.sign(claims)
        log.info("issued a token for service account %s/%s", namespace, name, extra={"jti": claims["jti"]})
        audit.annotate(ISSUED_CREDENTIAL_ID, credential_id(claims["jti"]))  # as kube's TokenRequest
        bound_ref = None if ref is None else {**spec["boundObjectRef"], "uid": bound[2] if bound else ""}
        document = {
            "kind": KIND,
            "apiVersion": f"{GROUP}/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": format_time(now)},
            "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": bound_ref},
            "status": {"token": token,
                       "expirationTimestamp": format_time(now + dt.timedelta(seconds=seconds))},
        }
        response = json_response(document, status=201)
        response.headers.update(_NO_STORE)
        return response
