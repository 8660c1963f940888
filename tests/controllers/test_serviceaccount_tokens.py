"""The token controller on a real in-memory store, with the hub's real token issuer: a
``kubernetes.io/service-account-token`` Secret is filled as kube's ``tokens_controller.go`` fills it,
a Secret whose account is missing is deleted, a deleted account takes its token Secrets along, and
a deleted Secret leaves its account's ``secrets`` list."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.auth.serviceaccounts import ServiceAccountTokens
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.serviceaccounttokens import ServiceAccountTokensController
from controlplane.storage import MemoryStore
from controlplane.storage.interface import Progress, WatchEvent
from controlplane.storage.wrapping import WrappedStore

from .fleet import eventually, hub_objects

CA = b"-----BEGIN CERTIFICATE-----\nhub CA\n-----END CERTIFICATE-----\n"
NAMESPACE = "team"


@dataclass
class Hub:
    objects: ObjectStore
    tokens: TokenStore
    controller: ServiceAccountTokensController

    def rt(self, kind: str) -> Any:
        return self.objects.registry.require("v1", kind)

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.objects.create(self.rt(kind), {"apiVersion": "v1", "kind": kind, **obj}, namespace=NAMESPACE)

    async def get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self.rt(kind), namespace=NAMESPACE, name=name)
        except errors.NotFound:
            return None


class WatchCountingStore(WrappedStore):
    """The hub's memory store, counting the watches opened under each prefix."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.watches: Counter[str] = Counter()

    def watch(
        self, prefix: str, *, from_revision: int, progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        self.watches[prefix] += 1
        return super().watch(prefix, from_revision=from_revision, progress=progress)

    def watch_seeing(
        self, prefix: str, from_revision: int, seen: Callable[[WatchEvent], None], progress: Progress | None = None
    ) -> AsyncIterator[WatchEvent]:
        self.watches[prefix] += 1
        return super().watch_seeing(prefix, from_revision, seen, progress)


def shared_controller(objects: ObjectStore, issuer: ServiceAccountTokens) -> ServiceAccountTokensController:
    """The controller as the hub builds it: reading the token check's caches."""
    return ServiceAccountTokensController(objects, issuer, ca_pem=CA, accounts=issuer.accounts, secrets=issuer.secrets)


@pytest.fixture
async def store() -> AsyncIterator[WatchCountingStore]:
    async with MemoryStore() as memory:
        yield WatchCountingStore(memory)


@pytest.fixture
async def hub(store: WatchCountingStore) -> AsyncIterator[Hub]:
    objects = await hub_objects(store, NAMESPACE)
    tokens = TokenStore(store)
    issuer = ServiceAccountTokens(tokens, objects)
    controller = shared_controller(objects, issuer)
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(issuer.run())]
        await issuer.synced()  # as on the hub: the API's token check is running before any leader term
        tasks.append(group.create_task(controller.run()))
        yield Hub(objects, tokens, controller)
        for task in tasks:
            task.cancel()


def token_secret(
    name: str, account: str = "bot", *, data: dict[str, bytes] | None = None, account_uid: str | None = None
) -> dict[str, Any]:
    annotations = {"kubernetes.io/service-account.name": account}
    if account_uid is not None:
        annotations["kubernetes.io/service-account.uid"] = account_uid
    secret: dict[str, Any] = {
        "metadata": {"name": name, "annotations": annotations},
        "type": "kubernetes.io/service-account-token",
    }
    if data is not None:
        secret["data"] = {key: base64.b64encode(value).decode() for key, value in data.items()}
    return secret


async def filled(hub: Hub, name: str) -> dict[str, bytes]:
    async def data() -> dict[str, bytes] | None:
        secret = await hub.get("Secret", name)
        values = (secret or {}).get("data") or {}
        if not values.get("token") or not values.get("ca.crt"):
            return None
        return {key: base64.b64decode(value) for key, value in values.items()}

    return await eventually(data, what=f"secret {name} filled")


async def deleted(hub: Hub, kind: str, name: str) -> None:
    async def gone() -> bool:
        return await hub.get(kind, name) is None

    await eventually(gone, what=f"{kind} {name} deleted")


async def test_a_token_secret_is_filled_with_a_token_of_its_account(hub: Hub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    account = await hub.create("ServiceAccount", {"metadata": {"name": "bot"}})
    await hub.create("Secret", token_secret("bot-token"))
    data = await filled(hub, "bot-token")
    assert data == {"token": data["token"], "ca.crt": CA, "namespace": NAMESPACE.encode()}
    secret = await hub.get("Secret", "bot-token")
    assert secret is not None
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == account["metadata"]["uid"]
    user = await hub.tokens.authenticate(data["token"].decode())
    assert user is not None
    assert (user.name, user.groups) == (
        "system:serviceaccount:team:bot",
        ("system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"),
    )
    records = [t for t in await hub.tokens.list() if t.bound_secret == "bot-token"]
    assert len(records) == 1 and records[0].expires_at is None and records[0].bound_uid == account["metadata"]["uid"]
    secret_half = data["token"].decode().partition(".")[2]
    assert "filled token secret team/bot-token" in caplog.text
    assert secret_half not in caplog.text, "the token is never logged"


async def test_only_what_is_missing_is_filled(hub: Hub) -> None:
    """kube's ``secretUpdateNeeded``: a token already there is kept, an outdated CA bundle replaced."""
    await hub.create("ServiceAccount", {"metadata": {"name": "bot"}})
    await hub.create("Secret", token_secret("bot-token", data={"token": b"chosen", "ca.crt": b"old CA"}))

    async def namespaced() -> dict[str, bytes] | None:
        current = await filled(hub, "bot-token")
        return current if current.get("namespace") and current["ca.crt"] == CA else None

    data = await eventually(namespaced, what="CA and namespace filled")
    assert data == {"token": b"chosen", "ca.crt": CA, "namespace": NAMESPACE.encode()}
    assert [t for t in await hub.tokens.list() if t.bound_secret == "bot-token"] == [], "no token issued"


async def test_a_token_secret_of_a_missing_account_is_deleted(hub: Hub) -> None:
    account = await hub.create("ServiceAccount", {"metadata": {"name": "bot"}})
    await hub.create("Secret", token_secret("nobody-token", "nobody"))
    await hub.create("Secret", token_secret("stale-token", account_uid="not-its-uid"))
    await hub.create("Secret", token_secret("bot-token", account_uid=account["metadata"]["uid"]))
    await deleted(hub, "Secret", "nobody-token")
    await deleted(hub, "Secret", "stale-token")
    await filled(hub, "bot-token")
    # No token was left behind for the Secrets deleted.
    assert {t.bound_secret for t in await hub.tokens.list()} == {"bot-token"}


async def test_a_deleted_account_takes_its_token_secrets_along(hub: Hub) -> None:
    await hub.create("ServiceAccount", {"metadata": {"name": "bot"}})
    await hub.create("ServiceAccount", {"metadata": {"name": "other"}})
    for name, account in (("bot-a", "bot"), ("bot-b", "bot"), ("other-token", "other")):
        await hub.create("Secret", token_secret(name, account))
    tokens = [(await filled(hub, name))["token"].decode() for name in ("bot-a", "bot-b", "other-token")]
    await hub.objects.delete(hub.rt("ServiceAccount"), namespace=NAMESPACE, name="bot")
    await deleted(hub, "Secret", "bot-a")
    await deleted(hub, "Secret", "bot-b")
    assert await hub.get("Secret", "other-token") is not None

    async def revoked() -> bool:
        return {t.bound_secret for t in await hub.tokens.list()} == {"other-token"}

    await eventually(revoked, what="the deleted Secrets' tokens revoked")
    assert [await hub.tokens.authenticate(token) is not None for token in tokens] == [False, False, True]


async def test_a_deleted_secret_leaves_its_accounts_secrets_list(hub: Hub) -> None:
    await hub.create("ServiceAccount", {"metadata": {"name": "bot"}, "secrets": [{"name": "bot-token"}, {"name": "pull"}]})
    await hub.create("Secret", token_secret("bot-token"))
    await filled(hub, "bot-token")
    await hub.objects.delete(hub.rt("Secret"), namespace=NAMESPACE, name="bot-token")

    async def dropped() -> bool:
        account = await hub.get("ServiceAccount", "bot")
        return account is not None and account.get("secrets") == [{"name": "pull"}]

    await eventually(dropped, what="the reference removed")


async def test_the_controller_reads_the_token_checks_caches(hub: Hub, store: WatchCountingStore) -> None:
    """One cache of the ServiceAccounts and one of the token Secrets in the process: the controller
    opens no watch of its own."""
    await hub.create("ServiceAccount", {"metadata": {"name": "bot"}})
    await hub.create("Secret", token_secret("bot-token"))
    await filled(hub, "bot-token")
    for plural in ("secrets", "serviceaccounts"):
        watched = {prefix: count for prefix, count in store.watches.items() if f"/{plural}/" in prefix}
        assert list(watched.values()) == [1], watched


async def test_a_later_term_fills_what_came_while_no_controller_ran(store: WatchCountingStore) -> None:
    """A controller started over caches that are full already (a new leader term) is handed what they
    hold, as client-go hands a handler added to a running informer its objects."""
    objects = await hub_objects(store, NAMESPACE)
    tokens = TokenStore(store)
    issuer = ServiceAccountTokens(tokens, objects)
    first = shared_controller(objects, issuer)
    hub = Hub(objects, tokens, first)
    async with asyncio.TaskGroup() as group:
        serving = group.create_task(issuer.run())
        await issuer.synced()
        term = group.create_task(first.run())
        await hub.create("ServiceAccount", {"metadata": {"name": "bot"}})
        await hub.create("Secret", token_secret("first-token"))
        await filled(hub, "first-token")
        term.cancel()
        await asyncio.wait({term})

        await hub.create("Secret", token_secret("between-terms"))

        async def cached() -> dict[str, Any] | None:
            return issuer.secrets.get(NAMESPACE, "between-terms")

        await eventually(cached, what="the Secret in the token check's cache")
        term = group.create_task(shared_controller(objects, issuer).run())
        await filled(hub, "between-terms")
        for task in (term, serving):
            task.cancel()
