"""Bearer tokens: issue, authenticate, consume, revoke.

Every request to the hub carries ``Authorization: Bearer <id>.<secret>`` (kubeadm's
shape: a public 6-character id and a random secret). The hub stores, per token, only a
SHA-256 digest of the token next to its role, owner name, groups, cluster scope, expiry
and one-time state (and, for a service account's token, the uid of the account and the name of
the Secret it was issued for), under ``/gpufed-auth/tokens/<id>`` in the hub's :class:`Store` (etcd).
That prefix is outside the API object keyspace, so no API request can read it. The
secrets are long and random, so a fast digest is enough; comparison is constant-time.

In: a Store. Out: :class:`TokenStore` (implements the ``Authenticator`` Protocol),
:class:`IssuedToken` (the secret, returned once, at creation), :class:`TokenInfo`
(everything but the secret) and :func:`bearer_token` (header parsing).

Authentication runs on every request, so records are cached in-process for
``cache_ttl`` (2 s by default): a revocation made through this instance takes effect
at once, one made through another hub process within ``cache_ttl``. While the store is
unavailable a token read before is judged by the record last read, if it was as fresh as the
cache when the store went away (kube-apiserver's token authenticators read informer caches,
which keep their last state through an etcd outage), so
probes and requests that need no stored object, ``/livez`` among them, still pass with
credentials; a revocation cannot be written then anyway. Concurrent requests
that miss the cache share one store read, and a read that overlaps a change made
through this instance answers its own requests but is not cached.
:meth:`TokenStore.authenticate_cached` answers from the cache alone, without I/O, for
the API server's request path. Consuming a
one-time token always reads the store and marks it used with a compare-and-swap, so
of any number of concurrent uses exactly one wins.

Never log a token or a secret: log the token id (the public half) at most.
"""

from __future__ import annotations

import asyncio
import builtins
import datetime as dt
import hashlib
import hmac
import logging
import re
import secrets
import string
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Final, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from controlplane.apiserver.identity import AUTHENTICATED, Role, UserInfo, service_account_of
from controlplane.storage.interface import AlreadyExists, Conflict, KeyValue, NotFound, Store, Unavailable

log = logging.getLogger(__name__)

#: Key prefix of token records in the store (not an API object prefix).
TOKEN_KEY_PREFIX: Final = "/gpufed-auth/tokens/"

TOKEN_ID_LENGTH: Final = 6
TOKEN_SECRET_LENGTH: Final = 32
_ALPHABET: Final = string.ascii_lowercase + string.digits
_TOKEN_RE: Final = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16,64})\Z")
_HASH_PREFIX: Final = "sha256:"
_CACHE_MAX_ENTRIES: Final = 10_000
_LIST_PAGE: Final = 500

_T = TypeVar("_T")


class TokenRejectedReason(StrEnum):
    MALFORMED = "Malformed"
    UNKNOWN = "Unknown"
    EXPIRED = "Expired"
    USED = "AlreadyUsed"
    NOT_BOOTSTRAP = "NotABootstrapToken"
    WRONG_CLUSTER = "WrongCluster"
    BOUND_OBJECT_GONE = "BoundObjectGone"


_REJECTION_MESSAGES: Final[dict[TokenRejectedReason, str]] = {
    TokenRejectedReason.MALFORMED: "the token is not of the form <id>.<secret>",
    TokenRejectedReason.UNKNOWN: "the token is unknown or was revoked",
    TokenRejectedReason.EXPIRED: "the token has expired",
    TokenRejectedReason.USED: "the one-time token has already been used",
    TokenRejectedReason.NOT_BOOTSTRAP: "the token is not a bootstrap token",
    TokenRejectedReason.WRONG_CLUSTER: "the bootstrap token was issued for another cluster",
    TokenRejectedReason.BOUND_OBJECT_GONE: "the object the token was bound to (its service account) is gone",
}


class TokenError(Exception):
    """Base of the errors :class:`TokenStore` raises (storage errors pass through)."""


class TokenRejected(TokenError):
    """A token cannot be used for the requested operation. The message never holds the secret."""

    def __init__(self, reason: TokenRejectedReason, *, token_id: str | None = None) -> None:
        super().__init__(_REJECTION_MESSAGES[reason])
        self.reason = reason
        self.token_id = token_id


class TokenNotFound(TokenError):
    """No token with this id exists."""


class StoredToken(BaseModel):
    """A token as stored: the digest of the secret, never the secret."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True, extra="ignore")

    id: str
    secret_hash: str
    role: Role
    name: str
    cluster: str | None = None
    created_at: dt.datetime
    expires_at: dt.datetime | None = None
    one_time: bool = False
    used_at: dt.datetime | None = None
    #: For a consumed bootstrap token: the cluster that joined with it.
    used_for: str | None = None
    #: For a user token: the groups RBAC bindings may name (beside ``system:authenticated``).
    groups: tuple[str, ...] = ()
    #: A service account's token (TokenRequest): the uid of the service account it is valid for
    #: while that object exists (:meth:`TokenStore.bind`).
    bound_uid: str | None = None
    #: A service account token Secret's token: the name of that Secret (in the account's
    #: namespace), which must still hold the token (:meth:`TokenStore.bind`).
    bound_secret: str | None = None

    def holds(self, token: str) -> bool:
        """Whether ``token`` is this record's token (constant-time)."""
        return hmac.compare_digest(self.secret_hash.encode(), _HASH_PREFIX.encode() + _sha256(token).encode())

    def to_bytes(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode("utf-8")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What may be shown about a token: everything except the secret and its digest."""

    id: str
    role: Role
    name: str
    cluster: str | None
    created_at: dt.datetime
    expires_at: dt.datetime | None
    one_time: bool
    used_at: dt.datetime | None
    used_for: str | None
    groups: tuple[str, ...] = ()
    bound_uid: str | None = None
    bound_secret: str | None = None

    @classmethod
    def of(cls, stored: StoredToken) -> TokenInfo:
        return cls(**{item.name: getattr(stored, item.name) for item in fields(cls)})


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A freshly created token. ``token`` is shown once and cannot be recovered."""

    token: str = field(repr=False)
    info: TokenInfo

    @property
    def id(self) -> str:
        return self.info.id


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None.

    Works with aiohttp's case-insensitive headers and with plain dicts.
    """
    value = headers.get("Authorization")
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if value is None:
        return None
    scheme, _, credentials = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    credentials = credentials.strip()
    return credentials or None


def token_key(token_id: str) -> str:
    return TOKEN_KEY_PREFIX + token_id


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(token_id: str, secret: str) -> str:
    return _HASH_PREFIX + _sha256(f"{token_id}.{secret}")


def _parse(token: str) -> tuple[str, str] | None:
    match = _TOKEN_RE.match(token)
    if match is None:
        return None
    return match.group(1), match.group(2)


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


class TokenStore:
    """Bearer tokens kept (hashed) in a :class:`Store`; the hub's ``Authenticator``."""

    def __init__(
        self,
        store: Store,
        *,
        cache_ttl: dt.timedelta = dt.timedelta(seconds=2),
        store_timeout: dt.timedelta = dt.timedelta(seconds=10),
        clock: Callable[[], dt.datetime] = _utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._cache_ttl = cache_ttl.total_seconds()
        self._timeout = store_timeout.total_seconds()
        self._clock = clock
        self._monotonic = monotonic
        #: token id -> (monotonic time read, record or None when absent)
        self._cache: dict[str, tuple[float, StoredToken | None]] = {}
        self._answered = 0.0  # when the store last answered a read
        #: token id -> the store read in flight (one per id, shared by concurrent misses)
        self._reads: dict[str, asyncio.Future[StoredToken | None]] = {}
        #: Counts changes made through this instance; a read that overlaps one is not cached.
        self._changes = 0
        #: Whether a bound token's object still exists (:meth:`bind`); None: no bound token is valid.
        self._bound_exists: Callable[[StoredToken], bool] | None = None
        #: Told of every authentication with a bound token (:meth:`bind`).
        self._bound_used: Callable[[StoredToken], None] | None = None

    async def create(
        self,
        *,
        role: Role,
        name: str,
        cluster: str | None = None,
        ttl: dt.timedelta | None = None,
        one_time: bool = False,
        groups: tuple[str, ...] = (),
        bound_uid: str | None = None,
        bound_secret: str | None = None,
    ) -> IssuedToken:
        """Issue a token. ``cluster`` is required for agents, optional for bootstrap
        tokens (which may then join only that cluster), and refused for other roles;
        ``groups`` only for user tokens (RBAC bindings name the user or its groups);
        ``bound_uid`` only for user tokens too: the token is valid while the object of that
        uid exists, as the bound-object check (:meth:`bind`) tells; ``bound_secret`` (with
        ``bound_uid``) also while that Secret holds the token."""
        if not name:
            raise ValueError("a token needs a name (who or what it is for)")
        if groups and role is not Role.USER:
            raise ValueError(f"a {role} token cannot have groups; only a user token can")
        if any(not group for group in groups):
            raise ValueError("a group name cannot be empty")
        if role is Role.AGENT and not cluster:
            raise ValueError("an agent token needs the cluster it belongs to")
        if cluster is not None and role not in (Role.AGENT, Role.BOOTSTRAP):
            raise ValueError(f"a {role} token cannot be scoped to a cluster")
        if bound_uid is not None and role is not Role.USER:
            raise ValueError(f"a {role} token cannot be bound to an object; only a user token can")
        if bound_secret is not None and bound_uid is None:
            raise ValueError("a token bound to a Secret must be bound to its service account too")
        if one_time and role is not Role.BOOTSTRAP:
            raise ValueError("only bootstrap tokens can be one-time")
        if ttl is not None and ttl <= dt.timedelta(0):
            raise ValueError("a token's ttl must be positive")
        now = self._clock()
        while True:
            token_id, secret = _random(TOKEN_ID_LENGTH), _random(TOKEN_SECRET_LENGTH)
            stored = StoredToken(
                id=token_id,
                secret_hash=_digest(token_id, secret),
                role=role,
                name=name,
                cluster=cluster,
                created_at=now,
                expires_at=now + ttl if ttl is not None else None,
                one_time=one_time,
                groups=tuple(dict.fromkeys(groups)),
                bound_uid=bound_uid,
                bound_secret=bound_secret,
            )
            try:
                await self._call(self._store.create(token_key(token_id), stored.to_bytes()))
            except AlreadyExists:
                continue  # 36**6 ids: a collision is rare; draw another.
            break
        self._changed(token_id, stored)
        log.info(
            "token created",
            extra={"token_id": token_id, "role": str(role), "token_name": name, "cluster": cluster},
        )
        return IssuedToken(token=f"{token_id}.{secret}", info=TokenInfo.of(stored))

    def bind(
        self, bound_exists: Callable[[StoredToken], bool], *, used: Callable[[StoredToken], None] | None = None
    ) -> None:
        """Check bound tokens with ``bound_exists`` (the token's record: does the object it was
        bound to still exist, with that uid?) on every authentication, from memory: a token of
        a deleted service account stops working as soon as the hub sees the deletion. ``used``, if
        given, is told of each authentication that passed it (it must not block)."""
        self._bound_exists = bound_exists
        self._bound_used = used

    async def revoke_bound(self, uid: str) -> builtins.list[str]:
        """Revoke every token bound to the object of ``uid``; the ids revoked."""
        return await self._revoke_where(lambda stored: stored.bound_uid == uid)

    async def revoke_held(self, token: str, *, namespace: str, secret: str) -> bool:
        """Revoke ``token`` if it is the token issued for Secret ``namespace/secret`` (that Secret
        was deleted, or now holds another token); whether it was revoked."""
        parsed = _parse(token)
        if parsed is None:
            return False
        try:
            stored = self._decode(await self._call(self._store.get(token_key(parsed[0]))))
        except NotFound:
            return False
        if stored is None or stored.bound_secret != secret or not stored.holds(token):
            return False
        account = service_account_of(stored.name)
        if account is None or account[0] != namespace:
            return False
        try:
            await self.revoke(stored.id)
        except TokenNotFound:
            return False
        return True

    async def revoke_orphans(self, *, secret_grace: dt.timedelta = dt.timedelta(minutes=10)) -> builtins.list[str]:
        """Revoke every bound token whose object is gone by the bound-object check (:meth:`bind`):
        those whose object was deleted while no hub watched; the ids revoked. A token issued for a
        Secret less than ``secret_grace`` ago is kept: the Secret may not hold it yet."""
        check = self._bound_exists
        if check is None:
            return []
        settled = self._clock() - secret_grace
        return await self._revoke_where(
            lambda stored: stored.bound_uid is not None
            and (stored.bound_secret is None or stored.created_at <= settled)
            and not check(stored)
        )

    async def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to, or None when it is malformed, unknown, revoked,
        expired or a used one-time token. While the store is unavailable a token is judged by
        the record last read; one never read is the store's error (the hub answers 503)."""
        parsed = _parse(token)
        if parsed is None:
            log.debug("bearer token rejected", extra={"reason": str(TokenRejectedReason.MALFORMED)})
            return None
        token_id, secret = parsed
        return self._verdict(await self._record(token_id), token_id=token_id, secret=secret)

    def authenticate_cached(self, token: str) -> tuple[bool, UserInfo | None]:
        """:meth:`authenticate` without I/O: ``(True, user or None)`` when the answer needs
        no store read (a malformed token, or a record cached less than ``cache_ttl`` ago),
        ``(False, None)`` when only :meth:`authenticate` can tell."""
        parsed = _parse(token)
        if parsed is None:
            log.debug("bearer token rejected", extra={"reason": str(TokenRejectedReason.MALFORMED)})
            return True, None
        token_id, secret = parsed
        cached = self._cache.get(token_id)
        if cached is None or self._monotonic() - cached[0] >= self._cache_ttl:
            return False, None
        return True, self._verdict(cached[1], token_id=token_id, secret=secret)

    def _verdict(self, stored: StoredToken | None, *, token_id: str, secret: str) -> UserInfo | None:
        problem = self._problem(stored, token_id=token_id, secret=secret)
        if problem is not None:
            log.debug("bearer token rejected", extra={"token_id": token_id, "reason": str(problem)})
            return None
        assert stored is not None
        if stored.bound_uid is not None and self._bound_used is not None:
            self._bound_used(stored)
        return _user(stored)

    async def consume_bootstrap(self, token: str, *, cluster: str | None = None) -> UserInfo:
        """Use a bootstrap token to join ``cluster``; raise :class:`TokenRejected`.

        A one-time token is marked used with a compare-and-swap, so it succeeds once;
        a reusable bootstrap token is only checked. A bootstrap token scoped to a
        cluster may only join that cluster.
        """
        parsed = _parse(token)
        if parsed is None:
            raise TokenRejected(TokenRejectedReason.MALFORMED)
        token_id, secret = parsed
        while True:
            try:
                kv = await self._call(self._store.get(token_key(token_id)))
            except NotFound:
                self._remember(token_id, None)
                raise TokenRejected(TokenRejectedReason.UNKNOWN, token_id=token_id) from None
            stored = self._decode(kv)
            problem = self._problem(stored, token_id=token_id, secret=secret)
            if problem is None and stored is not None:
                if stored.role is not Role.BOOTSTRAP:
                    problem = TokenRejectedReason.NOT_BOOTSTRAP
                elif stored.cluster is not None and stored.cluster != cluster:
                    problem = TokenRejectedReason.WRONG_CLUSTER
            if problem is not None:
                log.info("bootstrap token rejected", extra={"token_id": token_id, "reason": str(problem)})
                raise TokenRejected(problem, token_id=token_id)
            assert stored is not None
            if not stored.one_time:
                return _user(stored)
            used = stored.model_copy(update={"used_at": self._clock(), "used_for": cluster})
            try:
                await self._call(
                    self._store.update(kv.key, used.to_bytes(), expected_revision=kv.mod_revision)
                )
            except Conflict:
                continue  # someone else changed it first; re-read and decide again
            except NotFound:
                self._remember(token_id, None)
                raise TokenRejected(TokenRejectedReason.UNKNOWN, token_id=token_id) from None
            self._changed(token_id, used)
            log.info("bootstrap token consumed", extra={"token_id": token_id, "cluster": cluster})
            return _user(stored)

    async def revoke(self, token_id: str) -> None:
        """Delete a token; raise :class:`TokenNotFound`."""
        try:
            await self._call(self._store.delete(token_key(token_id)))
        except NotFound:
            self._remember(token_id, None)
            raise TokenNotFound(f"no token with id {token_id!r}") from None
        self._changed(token_id, None)
        log.info("token revoked", extra={"token_id": token_id})

    async def get(self, token_id: str) -> TokenInfo:
        """One token's public details (fresh from the store); raise :class:`TokenNotFound`."""
        try:
            kv = await self._call(self._store.get(token_key(token_id)))
        except NotFound:
            raise TokenNotFound(f"no token with id {token_id!r}") from None
        stored = self._decode(kv)
        if stored is None:
            raise TokenNotFound(f"no token with id {token_id!r}")
        return TokenInfo.of(stored)

    async def list(self) -> builtins.list[TokenInfo]:
        """Every token's public details, by id. Never the secrets."""
        return [TokenInfo.of(stored) for stored in await self._list_stored()]

    async def cluster_agents(self, cluster: str) -> builtins.list[TokenInfo]:
        """The unexpired agent tokens of ``cluster`` (fresh from the store)."""
        now = self._clock()
        return [
            TokenInfo.of(stored)
            for stored in await self._list_stored()
            if stored.role is Role.AGENT
            and stored.cluster == cluster
            and (stored.expires_at is None or stored.expires_at > now)
        ]

    async def revoke_cluster_agents(self, cluster: str, *, keep: str | None = None) -> builtins.list[str]:
        """Revoke every agent token of ``cluster`` except the one with id ``keep``."""
        return await self._revoke_where(
            lambda stored: stored.role is Role.AGENT and stored.cluster == cluster and stored.id != keep
        )

    async def prune(self) -> builtins.list[str]:
        """Delete expired tokens and used one-time tokens; return their ids."""
        now = self._clock()
        return await self._revoke_where(
            lambda stored: (stored.expires_at is not None and stored.expires_at <= now) or stored.used_at is not None
        )

    async def _revoke_where(self, chosen: Callable[[StoredToken], bool]) -> builtins.list[str]:
        """Revoke the stored tokens ``chosen`` picks; the ids of those revoked (one gone already is skipped)."""
        revoked = []
        for stored in await self._list_stored():
            if chosen(stored):
                try:
                    await self.revoke(stored.id)
                except TokenNotFound:
                    continue
                revoked.append(stored.id)
        return revoked

    def _problem(self, stored: StoredToken | None, *, token_id: str, secret: str) -> TokenRejectedReason | None:
        if stored is None or stored.id != token_id:
            return TokenRejectedReason.UNKNOWN
        if not hmac.compare_digest(stored.secret_hash.encode(), _digest(token_id, secret).encode()):
            return TokenRejectedReason.UNKNOWN
        if stored.expires_at is not None and stored.expires_at <= self._clock():
            return TokenRejectedReason.EXPIRED
        if stored.one_time and stored.used_at is not None:
            return TokenRejectedReason.USED
        if stored.bound_uid is not None and (self._bound_exists is None or not self._bound_exists(stored)):
            return TokenRejectedReason.BOUND_OBJECT_GONE
        return None

    async def _record(self, token_id: str) -> StoredToken | None:
        cached = self._cache.get(token_id)
        if cached is not None and self._monotonic() - cached[0] < self._cache_ttl:
            return cached[1]
        pending = self._reads.get(token_id)
        if pending is None:
            pending = asyncio.ensure_future(self._read_record(token_id))
            self._reads[token_id] = pending
            pending.add_done_callback(lambda done: self._forget_read(token_id, done))
        # Shielded: one waiter's cancellation must not cancel the read the others share.
        return await asyncio.shield(pending)

    async def _read_record(self, token_id: str) -> StoredToken | None:
        changes = self._changes
        try:
            kv = await self._call(self._store.get(token_key(token_id)))
        except NotFound:
            stored = None
        except Unavailable:
            # The store is away: a record as fresh as the cache when it went (an older one may
            # miss a revocation made through another replica), as kube's informer caches answer.
            known = self._cache.get(token_id)
            if known is None or known[0] < self._answered - self._cache_ttl:
                raise
            return known[1]
        else:
            stored = self._decode(kv)
        self._answered = self._monotonic()
        if changes == self._changes:
            self._remember(token_id, stored)
        return stored

    def _forget_read(self, token_id: str, done: asyncio.Future[StoredToken | None]) -> None:
        if self._reads.get(token_id) is done:
            del self._reads[token_id]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter gets it; none left means no warning

    async def _list_stored(self) -> builtins.list[StoredToken]:
        found: builtins.list[StoredToken] = []
        start_after: str | None = None
        while True:
            page = await self._call(
                self._store.list(TOKEN_KEY_PREFIX, limit=_LIST_PAGE, start_after=start_after)
            )
            found.extend(stored for kv in page.items if (stored := self._decode(kv)) is not None)
            if not page.more or not page.items:
                return found
            start_after = page.items[-1].key

    def _changed(self, token_id: str, stored: StoredToken | None) -> None:
        """Record a change made through this instance (reads in flight will not cache)."""
        self._changes += 1
        self._remember(token_id, stored)

    def _remember(self, token_id: str, stored: StoredToken | None) -> None:
        if len(self._cache) >= _CACHE_MAX_ENTRIES:
            now = self._monotonic()
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < self._cache_ttl}
            if len(self._cache) >= _CACHE_MAX_ENTRIES:
                self._cache.clear()
        self._cache[token_id] = (self._monotonic(), stored)

    @staticmethod
    def _decode(kv: KeyValue) -> StoredToken | None:
        try:
            return StoredToken.model_validate_json(kv.value)
        except ValidationError:
            log.warning("unreadable token record ignored", extra={"key": kv.key})
            return None

    async def _call(self, awaitable: Awaitable[_T]) -> _T:
        try:
            async with asyncio.timeout(self._timeout):
                return await awaitable
        except TimeoutError as exc:
            raise Unavailable(f"token store did not answer within {self._timeout:g}s") from exc


def _user(stored: StoredToken) -> UserInfo:
    return UserInfo(
        name=stored.name, role=stored.role, cluster=stored.cluster, token_id=stored.id,
        user_groups=tuple(dict.fromkeys([*stored.groups, AUTHENTICATED])) if stored.role is Role.USER else (),
        # A service account's token is that account, uid included (kube's legacy token validator).
        uid=(stored.bound_uid or "") if stored.role is Role.USER else "",
    )
