"""Token lifecycle against every store: create, authenticate, expire, revoke, consume
(once, even under concurrency); secrets never stored or logged."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import re
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth import (
    TokenNotFound,
    TokenRejected,
    TokenRejectedReason,
    TokenStore,
    bearer_token,
)
from controlplane.apiserver.auth.tokens import TOKEN_KEY_PREFIX, token_key
from controlplane.apiserver.identity import Role, UserInfo
from controlplane.apiserver.objects import ObjectStore
from controlplane.storage import Store
from controlplane.storage.interface import KeyValue, Unavailable

from ..kinds import make_registry


class FakeClock:
    """Wall clock and monotonic clock that move only when told to."""

    def __init__(self) -> None:
        self.now = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
        self.mono = 1000.0

    def wall(self) -> dt.datetime:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def advance(self, delta: dt.timedelta) -> None:
        self.now += delta
        self.mono += delta.total_seconds()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def token_store(store: Store, clock: FakeClock, *, cache_ttl: float = 2.0) -> TokenStore:
    return TokenStore(
        store, cache_ttl=dt.timedelta(seconds=cache_ttl), clock=clock.wall, monotonic=clock.monotonic
    )


@pytest.mark.parametrize(
    ("role", "cluster"),
    [(Role.ADMIN, None), (Role.VIEWER, None), (Role.AGENT, "onprem-a"), (Role.BOOTSTRAP, None), (Role.BOOTSTRAP, "c1")],
)
async def test_created_token_authenticates_as_its_owner(
    store: Store, clock: FakeClock, role: Role, cluster: str | None
) -> None:
    tokens = token_store(store, clock)

    issued = await tokens.create(role=role, name="someone", cluster=cluster)

    assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16,}", issued.token)
    assert issued.token.startswith(issued.id + ".")
    expected = UserInfo(name="someone", role=role, cluster=cluster, token_id=issued.id)
    assert await tokens.authenticate(issued.token) == expected
    # A second process (no shared cache) sees the same.
    assert await token_store(store, clock).authenticate(issued.token) == expected


async def test_every_token_is_different(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = [await tokens.create(role=Role.VIEWER, name="v") for _ in range(5)]
    assert len({i.token for i in issued}) == 5
    assert len({i.id for i in issued}) == 5


async def test_wrong_or_malformed_tokens_are_rejected(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=Role.ADMIN, name="admin")
    token_id, secret = issued.token.split(".")
    flipped = ("a" if secret[0] != "a" else "b") + secret[1:]

    for candidate in [
        f"{token_id}.{flipped}",
        f"zzzzzz.{secret}",
        token_id,
        secret,
        "",
        issued.token.upper(),
        issued.token + "x" * 40,
        f"{token_id}.{secret[:15]}",
        f" {issued.token}",
    ]:
        assert await tokens.authenticate(candidate) is None, candidate
    assert await tokens.authenticate(issued.token) is not None


async def test_expired_token_is_rejected(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=Role.VIEWER, name="temp", ttl=dt.timedelta(minutes=10))
    assert issued.info.expires_at == clock.now + dt.timedelta(minutes=10)

    clock.advance(dt.timedelta(minutes=9, seconds=59))
    assert await tokens.authenticate(issued.token) is not None
    clock.advance(dt.timedelta(seconds=1))
    assert await tokens.authenticate(issued.token) is None


async def test_revocation_is_immediate_here_and_within_the_cache_ttl_elsewhere(
    store: Store, clock: FakeClock
) -> None:
    here = token_store(store, clock)
    elsewhere = token_store(store, clock, cache_ttl=2.0)
    issued = await here.create(role=Role.ADMIN, name="admin")
    assert await elsewhere.authenticate(issued.token) is not None  # now cached there

    await here.revoke(issued.id)

    assert await here.authenticate(issued.token) is None
    clock.advance(dt.timedelta(seconds=2))
    assert await elsewhere.authenticate(issued.token) is None
    with pytest.raises(TokenNotFound):
        await here.revoke(issued.id)


async def test_one_time_bootstrap_token_is_consumed_once(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True, ttl=dt.timedelta(hours=1))

    user = await tokens.consume_bootstrap(issued.token, cluster="onprem-a")
    assert user.role is Role.BOOTSTRAP
    assert user.token_id == issued.id

    with pytest.raises(TokenRejected) as second:
        await tokens.consume_bootstrap(issued.token, cluster="onprem-a")
    assert second.value.reason is TokenRejectedReason.USED
    assert await tokens.authenticate(issued.token) is None
    assert await token_store(store, clock).authenticate(issued.token) is None
    info = await tokens.get(issued.id)
    assert (info.used_at, info.used_for) == (clock.now, "onprem-a")


async def test_concurrent_consumption_has_exactly_one_winner(store: Store, clock: FakeClock) -> None:
    issued = await token_store(store, clock).create(role=Role.BOOTSTRAP, name="join", one_time=True)
    # Separate TokenStores (as separate hub processes would be) racing on one store.
    racers = [token_store(store, clock) for _ in range(20)]

    results = await asyncio.gather(
        *(racer.consume_bootstrap(issued.token, cluster=f"c{i}") for i, racer in enumerate(racers)),
        return_exceptions=True,
    )

    winners = [r for r in results if isinstance(r, UserInfo)]
    losers = [r for r in results if isinstance(r, TokenRejected)]
    assert len(winners) == 1
    assert len(losers) == 19
    assert {r.reason for r in losers} == {TokenRejectedReason.USED}
    assert (await racers[0].get(issued.id)).used_for in {f"c{i}" for i in range(20)}


async def test_reusable_bootstrap_token_is_checked_not_consumed(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=Role.BOOTSTRAP, name="fleet", ttl=dt.timedelta(hours=1))
    for cluster in ("a", "b"):
        assert (await tokens.consume_bootstrap(issued.token, cluster=cluster)).role is Role.BOOTSTRAP
    clock.advance(dt.timedelta(hours=1))
    with pytest.raises(TokenRejected) as expired:
        await tokens.consume_bootstrap(issued.token, cluster="c")
    assert expired.value.reason is TokenRejectedReason.EXPIRED


@pytest.mark.parametrize(
    ("role", "token_cluster", "join_cluster", "reason"),
    [
        (Role.AGENT, "a", "a", TokenRejectedReason.NOT_BOOTSTRAP),
        (Role.ADMIN, None, "a", TokenRejectedReason.NOT_BOOTSTRAP),
        (Role.BOOTSTRAP, "a", "b", TokenRejectedReason.WRONG_CLUSTER),
    ],
)
async def test_consume_rejects_tokens_that_cannot_join_this_cluster(
    store: Store, clock: FakeClock, role: Role, token_cluster: str | None, join_cluster: str, reason: TokenRejectedReason
) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=role, name="x", cluster=token_cluster)
    with pytest.raises(TokenRejected) as rejected:
        await tokens.consume_bootstrap(issued.token, cluster=join_cluster)
    assert rejected.value.reason is reason


@pytest.mark.parametrize(
    ("token", "reason"),
    [("nonsense", TokenRejectedReason.MALFORMED), ("abcdef.0000000000000000", TokenRejectedReason.UNKNOWN)],
)
async def test_consume_rejects_unknown_tokens(
    store: Store, clock: FakeClock, token: str, reason: TokenRejectedReason
) -> None:
    with pytest.raises(TokenRejected) as rejected:
        await token_store(store, clock).consume_bootstrap(token, cluster="a")
    assert rejected.value.reason is reason


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"role": Role.AGENT, "name": "a"}, "needs the cluster"),
        ({"role": Role.VIEWER, "name": "v", "cluster": "a"}, "cannot be scoped"),
        ({"role": Role.ADMIN, "name": ""}, "needs a name"),
        ({"role": Role.ADMIN, "name": "a", "one_time": True}, "only bootstrap"),
        ({"role": Role.BOOTSTRAP, "name": "b", "ttl": dt.timedelta(0)}, "positive"),
    ],
)
async def test_invalid_token_requests_are_refused(
    store: Store, clock: FakeClock, kwargs: dict[str, object], message: str
) -> None:
    tokens = token_store(store, clock)
    with pytest.raises(ValueError, match=message):
        await tokens.create(**kwargs)  # type: ignore[arg-type]
    assert await tokens.list() == []


async def test_secrets_are_stored_only_as_digests(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = [
        await tokens.create(role=Role.ADMIN, name="admin"),
        await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True),
        await tokens.create(role=Role.AGENT, name="agent:a", cluster="a"),
    ]

    stored = (await store.list(TOKEN_KEY_PREFIX)).items
    assert sorted(kv.key for kv in stored) == sorted(token_key(i.id) for i in issued)
    raw = b"".join(kv.value for kv in stored)
    for token in issued:
        secret = token.token.split(".")[1]
        assert secret.encode() not in raw
        assert token.token.encode() not in raw
        assert token.id.encode() in raw  # the public half is what we look up by
    assert raw.count(b'"secretHash":"sha256:') == 3
    by_key = {kv.key: json.loads(kv.value) for kv in stored}
    for token in issued:
        digest = by_key[token_key(token.id)]["secretHash"]
        assert digest not in (token.token, token.token.split(".")[1])


async def test_listing_shows_no_secret(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=Role.AGENT, name="agent:a", cluster="a")

    listed = await tokens.list()

    assert [info.id for info in listed] == [issued.id]
    assert listed[0] == issued.info
    secret = issued.token.split(".")[1]
    assert secret not in repr(listed) and secret not in repr(issued)


async def test_rejoin_revokes_the_clusters_other_agent_tokens(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    old = await tokens.create(role=Role.AGENT, name="agent:a", cluster="a")
    other_cluster = await tokens.create(role=Role.AGENT, name="agent:b", cluster="b")
    new = await tokens.create(role=Role.AGENT, name="agent:a", cluster="a")

    assert await tokens.revoke_cluster_agents("a", keep=new.id) == [old.id]

    assert await tokens.authenticate(old.token) is None
    assert await tokens.authenticate(new.token) is not None
    assert await tokens.authenticate(other_cluster.token) is not None


async def test_prune_deletes_expired_and_used_tokens(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    expiring = await tokens.create(role=Role.BOOTSTRAP, name="b", ttl=dt.timedelta(minutes=1))
    used = await tokens.create(role=Role.BOOTSTRAP, name="b", one_time=True)
    kept = await tokens.create(role=Role.ADMIN, name="a")
    await tokens.consume_bootstrap(used.token, cluster="x")
    clock.advance(dt.timedelta(minutes=1))

    assert sorted(await tokens.prune()) == sorted([expiring.id, used.id])
    assert [info.id for info in await tokens.list()] == [kept.id]


async def test_authentication_failures_never_log_the_token(
    store: Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens = token_store(store, clock)
    admin = await tokens.create(role=Role.ADMIN, name="admin", ttl=dt.timedelta(minutes=1))
    join = await tokens.create(role=Role.BOOTSTRAP, name="join", one_time=True)
    token_id, secret = admin.token.split(".")
    wrong = f"{token_id}.{'0' * 32}"
    malformed = f"{secret}-not-a-token"

    assert await tokens.authenticate(wrong) is None
    assert await tokens.authenticate(malformed) is None
    await tokens.consume_bootstrap(join.token, cluster="a")
    with pytest.raises(TokenRejected) as rejected:
        await tokens.consume_bootstrap(join.token, cluster="a")
    clock.advance(dt.timedelta(minutes=2))
    assert await tokens.authenticate(admin.token) is None
    await tokens.revoke(admin.id)

    assert caplog.records, "the failures above should be logged (without secrets)"
    assert any(getattr(r, "token_id", None) == token_id for r in caplog.records)
    everything = "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records) + str(rejected.value)
    for needle in (secret, join.token.split(".")[1], "0" * 32):
        assert needle not in everything


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Authorization": "Bearer abc.def"}, "abc.def"),
        ({"authorization": "bearer   abc.def  "}, "abc.def"),
        ({"AUTHORIZATION": "BEARER abc.def"}, "abc.def"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, None),
        ({"Authorization": "Bearer"}, None),
        ({"Authorization": "Bearer "}, None),
        ({}, None),
    ],
)
def test_bearer_token_parsing(headers: dict[str, str], expected: str | None) -> None:
    assert bearer_token(headers) == expected


# --- the authentication cache ------------------------------------------------------------


class CountingStore:
    """The real store, with token reads counted and their answers (read at once) held back
    while ``gate`` is cleared: a held answer goes stale if the token changes meanwhile."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self.token_reads = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def get(self, key: str) -> KeyValue:
        if not key.startswith(TOKEN_KEY_PREFIX):
            return await self.inner.get(key)
        self.token_reads += 1
        answer = await self.inner.get(key)
        await self.gate.wait()
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def counting_tokens(store: Store, clock: FakeClock) -> tuple[TokenStore, CountingStore]:
    counting = CountingStore(store)
    tokens = TokenStore(
        cast(Store, counting), cache_ttl=dt.timedelta(seconds=2), clock=clock.wall, monotonic=clock.monotonic
    )
    return tokens, counting


async def test_concurrent_misses_share_one_store_read(store: Store, clock: FakeClock) -> None:
    issued = await token_store(store, clock).create(role=Role.VIEWER, name="v")
    tokens, counting = counting_tokens(store, clock)
    counting.gate.clear()

    waiting = [asyncio.create_task(tokens.authenticate(issued.token)) for _ in range(20)]
    await asyncio.sleep(0.05)
    counting.gate.set()
    users = await asyncio.gather(*waiting)

    assert counting.token_reads == 1
    assert all(user is not None and user.name == "v" for user in users)
    clock.advance(dt.timedelta(seconds=2))
    assert await tokens.authenticate(issued.token) is not None
    assert counting.token_reads == 2, "an expired cache entry is read again"


async def test_cached_answer_of_a_token_revoked_elsewhere_ends_with_the_ttl(store: Store, clock: FakeClock) -> None:
    here = token_store(store, clock)
    issued = await token_store(store, clock).create(role=Role.ADMIN, name="admin")
    assert here.authenticate_cached(issued.token) == (False, None), "nothing cached yet"
    user = await here.authenticate(issued.token)
    assert user is not None

    await token_store(store, clock).revoke(issued.id)  # through another hub process

    assert here.authenticate_cached(issued.token) == (True, user)  # stale, within the ttl
    clock.advance(dt.timedelta(seconds=1, milliseconds=999))
    assert here.authenticate_cached(issued.token) == (True, user)
    clock.advance(dt.timedelta(milliseconds=1))
    assert here.authenticate_cached(issued.token) == (False, None)
    assert await here.authenticate(issued.token) is None
    assert here.authenticate_cached(issued.token) == (True, None)


async def test_cached_answer_checks_the_secret_and_the_expiry(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    issued = await tokens.create(role=Role.VIEWER, name="temp", ttl=dt.timedelta(seconds=1))
    token_id, secret = issued.token.split(".")
    flipped = ("a" if secret[0] != "a" else "b") + secret[1:]

    assert tokens.authenticate_cached(f"{token_id}.{flipped}") == (True, None)
    assert tokens.authenticate_cached("not a token") == (True, None)
    answered, user = tokens.authenticate_cached(issued.token)
    assert answered and user is not None
    clock.now += dt.timedelta(seconds=1)  # the wall clock only: the cache entry is still fresh
    assert tokens.authenticate_cached(issued.token) == (True, None)


async def test_a_read_overlapping_a_revocation_here_is_not_cached(store: Store, clock: FakeClock) -> None:
    tokens, counting = counting_tokens(store, clock)
    issued = await tokens.create(role=Role.ADMIN, name="admin")
    clock.advance(dt.timedelta(seconds=2))  # the record created above is no longer fresh
    counting.gate.clear()
    reading = asyncio.create_task(tokens.authenticate(issued.token))
    await asyncio.sleep(0.05)
    await tokens.revoke(issued.id)
    counting.gate.set()
    assert await reading is not None  # read before the revocation: an answer of its time

    assert tokens.authenticate_cached(issued.token) == (True, None)
    assert await tokens.authenticate(issued.token) is None


async def test_api_server_rejects_a_token_revoked_elsewhere_within_the_ttl(store: Store, clock: FakeClock) -> None:
    registry = make_registry()
    objects = ObjectStore(store, registry)
    tokens = token_store(store, clock)
    issued = await token_store(store, clock).create(role=Role.ADMIN, name="admin")
    headers = {"Authorization": f"Bearer {issued.token}"}
    app = create_app(objects, registry, authenticator=tokens)
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/api/v1/namespaces", headers=headers)).status == 200

        await token_store(store, clock).revoke(issued.id)
        clock.advance(dt.timedelta(seconds=2))

        assert (await client.get("/api/v1/namespaces", headers=headers)).status == 401


async def test_a_bound_token_is_valid_only_while_its_object_exists(store: Store, clock: FakeClock) -> None:
    """A service account's token (TokenRequest) names the uid of its account: the bound-object
    check decides on every authentication, cached or not, and none passes without a check."""
    tokens = token_store(store, clock)
    with pytest.raises(ValueError, match="only a user token"):
        await tokens.create(role=Role.ADMIN, name="x", bound_uid="u-1")
    issued = await tokens.create(role=Role.USER, name="system:serviceaccount:team:bot", bound_uid="u-1")
    assert await tokens.authenticate(issued.token) is None, "no check: a bound token is not valid"
    alive = {"u-1"}
    tokens.bind(lambda stored: stored.bound_uid in alive)
    user = await tokens.authenticate(issued.token)
    assert user is not None and user.name == "system:serviceaccount:team:bot"
    alive.clear()
    assert tokens.authenticate_cached(issued.token) == (True, None), "cached, and refused at once"
    assert await tokens.authenticate(issued.token) is None
    other = await tokens.create(role=Role.USER, name="system:serviceaccount:team:other", bound_uid="u-2")
    assert await tokens.revoke_bound("u-1") == [issued.id]
    assert [t.id for t in await tokens.list()] == [other.id]


async def test_tokens_of_objects_deleted_while_no_hub_watched_are_revoked(store: Store, clock: FakeClock) -> None:
    tokens = token_store(store, clock)
    kept = await tokens.create(role=Role.USER, name="system:serviceaccount:team:a", bound_uid="u-1")
    orphan = await tokens.create(role=Role.USER, name="system:serviceaccount:team:b", bound_uid="u-2")
    plain = await tokens.create(role=Role.USER, name="alice")
    assert await tokens.revoke_orphans() == [], "without a check nothing is judged"
    tokens.bind(lambda stored: stored.bound_uid == "u-1")
    assert await tokens.revoke_orphans() == [orphan.id]
    assert sorted(t.id for t in await tokens.list()) == sorted([kept.id, plain.id])


async def test_a_secret_token_is_revoked_only_by_its_own_secret(store: Store, clock: FakeClock) -> None:
    """A token issued for a service account token Secret names that Secret; a deleted (or changed)
    Secret revokes the token it held, and only when the token is the one issued for it."""
    tokens = token_store(store, clock)
    with pytest.raises(ValueError, match="bound to its service account too"):
        await tokens.create(role=Role.USER, name="system:serviceaccount:team:bot", bound_secret="bot-token")
    issued = await tokens.create(
        role=Role.USER, name="system:serviceaccount:team:bot", bound_uid="u-1", bound_secret="bot-token"
    )
    plain = await tokens.create(role=Role.USER, name="system:serviceaccount:team:bot", bound_uid="u-1")
    assert issued.info.expires_at is None and issued.info.bound_secret == "bot-token"
    assert not await tokens.revoke_held(issued.token, namespace="team", secret="other-token")
    assert not await tokens.revoke_held(issued.token, namespace="elsewhere", secret="bot-token")
    assert not await tokens.revoke_held(f"{issued.id}.{'x' * 32}", namespace="team", secret="bot-token")
    assert not await tokens.revoke_held(plain.token, namespace="team", secret="bot-token")
    assert not await tokens.revoke_held("not a token", namespace="team", secret="bot-token")
    assert await tokens.revoke_held(issued.token, namespace="team", secret="bot-token")
    assert [t.id for t in await tokens.list()] == [plain.id]
    assert not await tokens.revoke_held(issued.token, namespace="team", secret="bot-token"), "gone already"


async def test_a_fresh_secret_token_is_not_an_orphan_yet(store: Store, clock: FakeClock) -> None:
    """The token controller issues a token and then writes it into its Secret: a hub starting in
    between must not revoke it, so a Secret's token is judged only once it is some minutes old."""
    tokens = token_store(store, clock)
    issued = await tokens.create(
        role=Role.USER, name="system:serviceaccount:team:bot", bound_uid="u-1", bound_secret="bot-token"
    )
    tokens.bind(lambda stored: False)
    assert await tokens.revoke_orphans() == []
    clock.advance(dt.timedelta(minutes=10))
    assert await tokens.revoke_orphans() == [issued.id]


class FailingStore:
    """The real store, whose token reads fail as an unreachable etcd's do while ``down``."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self.down = False

    async def get(self, key: str) -> KeyValue:
        if self.down and key.startswith(TOKEN_KEY_PREFIX):
            raise Unavailable("etcd is unreachable (for 3s)")
        return await self.inner.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_while_the_store_is_away_a_token_is_judged_by_its_record_last_read(
    store: Store, clock: FakeClock
) -> None:
    issued = await token_store(store, clock).create(role=Role.ADMIN, name="admin")
    brief = await token_store(store, clock).create(role=Role.VIEWER, name="v", ttl=dt.timedelta(seconds=30))
    unseen = await token_store(store, clock).create(role=Role.VIEWER, name="unseen")
    failing = FailingStore(store)
    here = token_store(cast(Store, failing), clock)
    user = await here.authenticate(issued.token)
    assert user is not None and await here.authenticate(brief.token) is not None
    clock.advance(dt.timedelta(seconds=10))  # past the cache ttl: a read is due
    failing.down = True

    assert await here.authenticate(issued.token) == user
    assert await here.authenticate(issued.token.replace(".", ".x", 1)) is None  # the secret is still checked
    clock.advance(dt.timedelta(seconds=30))
    assert await here.authenticate(brief.token) is None  # and the expiry
    with pytest.raises(Unavailable):  # a token never read cannot be judged: the hub answers 503
        await here.authenticate(unseen.token)

    await token_store(store, clock).revoke(issued.id)
    failing.down = False
    assert await here.authenticate(issued.token) is None  # back: read again


async def test_while_the_store_is_away_a_record_older_than_its_last_answers_is_not_trusted(
    store: Store, clock: FakeClock
) -> None:
    """A record read an hour before the store last answered may miss a revocation made through
    another replica meanwhile: while the store is away it is not trusted (the 503 stands)."""
    old = await token_store(store, clock).create(role=Role.ADMIN, name="old")
    fresh = await token_store(store, clock).create(role=Role.VIEWER, name="fresh")
    failing = FailingStore(store)
    here = token_store(cast(Store, failing), clock)
    assert await here.authenticate(old.token) is not None
    await token_store(store, clock).revoke(old.id)  # through another replica
    clock.advance(dt.timedelta(hours=1))
    assert await here.authenticate(fresh.token) is not None  # the store answers here later
    clock.advance(dt.timedelta(seconds=10))
    failing.down = True
    with pytest.raises(Unavailable):
        await here.authenticate(old.token)
    assert await here.authenticate(fresh.token) is not None  # as fresh as the last answer
