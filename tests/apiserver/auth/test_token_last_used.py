"""kube-apiserver's legacy token tracking labels the Secret whose token was used with the day, by a
merge patch that names the Secret's uid: a Secret deleted and created again under the same name
before the label is written is not labelled for the old one's use; a use refused because the Secret
is marked invalid is labelled too. A real in-memory store, the hub's token store and token check."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import pytest

from controlplane.apiserver.auth.serviceaccounts import ServiceAccountTokens
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from tests.controllers.fleet import eventually

NAMESPACE = "team"
LAST_USED = "kubernetes.io/legacy-token-last-used"


@pytest.fixture
async def objects() -> AsyncIterator[tuple[ObjectStore, TokenStore]]:
    async with MemoryStore() as store:
        objs = ObjectStore(store, hub_registry(), garbage_collection=True)
        await objs.bootstrap()
        await objs.create(objs.registry.require("v1", "Namespace"), {"metadata": {"name": NAMESPACE}})
        yield objs, TokenStore(store)


def secret(name: str, *, account: dict[str, Any], token: str) -> dict[str, Any]:
    meta = account["metadata"]
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {
            "kubernetes.io/service-account.name": meta["name"], "kubernetes.io/service-account.uid": meta["uid"],
        }},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


@contextlib.asynccontextmanager
async def running(*coroutines: Coroutine[Any, Any, None]) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_secret_created_again_under_the_name_is_not_labelled_for_the_old_ones_use(
    objects: tuple[ObjectStore, TokenStore], caplog: pytest.LogCaptureFixture
) -> None:
    objs, tokens = objects
    accounts, secrets = objs.registry.require("v1", "ServiceAccount"), objs.registry.require("v1", "Secret")
    check = ServiceAccountTokens(tokens, objs)
    async with running(check.accounts.run(), check.secrets.run()) as (_accounts_task, secrets_task):
        await check.synced()
        account = await objs.create(accounts, {"metadata": {"name": "bot", "namespace": NAMESPACE}})
        token = await check.issue(
            namespace=NAMESPACE, account="bot", account_uid=account["metadata"]["uid"], secret="bot-token"
        )
        first = await objs.create(secrets, secret("bot-token", account=account, token=token))

        async def cached() -> bool:
            held = check.secrets.get(NAMESPACE, "bot-token")
            return check.accounts.get(NAMESPACE, "bot") is not None and (
                held is not None and held["metadata"]["uid"] == first["metadata"]["uid"]
            )

        await eventually(cached, what="the account and its token Secret in the check's cache")
        assert await tokens.authenticate(token) is not None  # queues the Secret for its label
        # The cache still shows the first Secret while the store holds another of that name.
        secrets_task.cancel()
        await asyncio.gather(secrets_task, return_exceptions=True)
        await objs.delete(secrets, namespace=NAMESPACE, name="bot-token")
        second = await objs.create(secrets, secret("bot-token", account=account, token=token))

        caplog.set_level(logging.DEBUG, logger="controlplane.apiserver.auth.serviceaccounts")
        async with running(check.label_used()):

            async def refused() -> bool:
                return "could not label secret team/bot-token as used" in caplog.text

            await eventually(refused, what="the label's patch refused")
        assert "metadata.uid" in caplog.text and "field is immutable" in caplog.text
        current = await objs.get(secrets, namespace=NAMESPACE, name="bot-token")
        assert current["metadata"]["uid"] == second["metadata"]["uid"]
        assert LAST_USED not in (current["metadata"].get("labels") or {})


async def test_the_use_of_a_token_refused_as_invalid_is_recorded_too(objects: tuple[ObjectStore, TokenStore]) -> None:
    """As kube-apiserver's: a Secret marked ``kubernetes.io/legacy-token-invalid-since`` refuses its
    token, and the use is still labelled (the legacy token cleaner then sees it used)."""
    objs, tokens = objects
    accounts, secrets = objs.registry.require("v1", "ServiceAccount"), objs.registry.require("v1", "Secret")
    check = ServiceAccountTokens(tokens, objs)
    async with running(check.run()):
        await check.synced()
        account = await objs.create(accounts, {"metadata": {"name": "bot", "namespace": NAMESPACE}})
        token = await check.issue(
            namespace=NAMESPACE, account="bot", account_uid=account["metadata"]["uid"], secret="bot-token"
        )
        body = secret("bot-token", account=account, token=token)
        body["metadata"]["labels"] = {"kubernetes.io/legacy-token-invalid-since": "2026-01-01"}
        await objs.create(secrets, body)

        async def cached() -> bool:
            return check.accounts.get(NAMESPACE, "bot") is not None and check.secrets.get(NAMESPACE, "bot-token") is not None

        await eventually(cached, what="the account and its token Secret in the check's cache")
        assert await tokens.authenticate(token) is None

        async def labelled() -> dict[str, Any] | None:
            current = await objs.get(secrets, namespace=NAMESPACE, name="bot-token")
            return current if LAST_USED in (current["metadata"].get("labels") or {}) else None

        current = await eventually(labelled, what="the refused use labelled")
        assert current["metadata"]["labels"]["kubernetes.io/legacy-token-invalid-since"] == "2026-01-01"
