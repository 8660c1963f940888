"""kube-controller-manager's legacy service account token cleaner on the hub, with a clean-up period
of an hour and a clock the test moves: an auto-generated token Secret unused for a period is labelled
``kubernetes.io/legacy-token-invalid-since`` (its token refused from then on) and deleted a period
later; one made by hand, one a Pod names, one used lately is kept; nothing happens before the hub
has tracked use for a period. A real in-memory store and the hub's token check's caches."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from controlplane.apis.kube.serviceaccounttokens import Cleanup, cleanup_step
from controlplane.apiserver import errors
from controlplane.apiserver.auth.serviceaccounts import ServiceAccountTokens
from controlplane.apiserver.auth.tokens import TokenStore
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.legacytokencleaning import LegacyTokenCleaner
from controlplane.storage import MemoryStore

from .fleet import eventually, hub_objects

NS = "team"
INVALID = "kubernetes.io/legacy-token-invalid-since"
LAST_USED = "kubernetes.io/legacy-token-last-used"
TRACKING = "kube-apiserver-legacy-service-account-token-tracking"
PERIOD = dt.timedelta(hours=1)


@dataclass
class Fleet:
    objects: ObjectStore
    check: ServiceAccountTokens
    cleaner: LegacyTokenCleaner
    now: list[dt.datetime]

    def rt(self, kind: str) -> Any:
        return self.objects.registry.require("v1", kind)

    async def get(self, kind: str, name: str, namespace: str = NS) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self.rt(kind), namespace=namespace, name=name)
        except errors.NotFound:
            return None

    async def labels(self, name: str) -> dict[str, str] | None:
        """The Secret's labels once the check's cache holds the Secret as stored (None: deleted)."""
        stored = await self.get("Secret", name)

        async def cached() -> bool:
            held = self.check.secrets.get(NS, name)
            if stored is None:
                return held is None
            return held is not None and held["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]

        await eventually(cached, what=f"secret {name} cached as stored")
        return None if stored is None else dict(stored["metadata"].get("labels") or {})

    async def evaluate_at(self, moment: dt.datetime) -> None:
        for name in ("auto", "manual", "mounted", "used"):
            await self.labels(name)  # the cleaner decides from the cache, as kube's from its listers
        self.now[0] = moment
        await self.cleaner.evaluate()


def token_secret(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "labels": labels,
                     "annotations": {"kubernetes.io/service-account.name": "bot"}},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": base64.b64encode(b"not-a-hub-token").decode()},
    }


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    async with MemoryStore() as store:
        objects = await hub_objects(store, NS, "kube-system")
        check = ServiceAccountTokens(TokenStore(store), objects)
        now = [dt.datetime.now(dt.UTC)]
        cleaner = LegacyTokenCleaner(
            objects, accounts=check.accounts, secrets=check.secrets, period=PERIOD, clock=lambda: now[0]
        )
        task = asyncio.create_task(check.run())
        await check.synced()
        yield Fleet(objects, check, cleaner, now)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_unused_auto_generated_token_is_marked_invalid_then_deleted(fleet: Fleet) -> None:
    start = fleet.now[0]
    # Listed in the account's secrets: auto-generated, as kube tells them apart. "manual" is not.
    await fleet.objects.create(fleet.rt("ServiceAccount"), {"metadata": {"name": "bot", "namespace": NS}, "secrets": [
        {"name": "auto"}, {"name": "mounted"}, {"name": "used"},
    ]})
    for name in ("auto", "manual", "mounted", "used"):
        await fleet.objects.create(fleet.rt("Secret"), token_secret(name))
    await fleet.objects.create(fleet.rt("Pod"), {"metadata": {"name": "p", "namespace": NS}, "spec": {
        "containers": [{"name": "c", "image": "x"}], "volumes": [{"name": "v", "secret": {"secretName": "mounted"}}],
    }})

    # The first pass records the day tracking began; a period after it has not passed yet.
    await fleet.evaluate_at(start)
    tracking = await fleet.get("ConfigMap", TRACKING, namespace="kube-system")
    assert tracking is not None and tracking["data"] == {"since": start.date().isoformat()}
    await fleet.evaluate_at(start + dt.timedelta(minutes=30))
    assert await fleet.labels("auto") == {}

    later = start + dt.timedelta(days=2)
    used = await fleet.get("Secret", "used")
    assert used is not None
    used["metadata"]["labels"] = {LAST_USED: later.date().isoformat()}
    await fleet.objects.update(fleet.rt("Secret"), used)
    await fleet.evaluate_at(later)
    assert await fleet.labels("auto") == {INVALID: later.date().isoformat()}
    assert await fleet.labels("manual") == {}, "made by hand: never cleaned"
    assert await fleet.labels("mounted") == {}, "a Pod names it"
    assert await fleet.labels("used") == {LAST_USED: later.date().isoformat()}

    # Marked less than a period ago: kept; a period later: deleted.
    await fleet.evaluate_at(later + dt.timedelta(minutes=30))
    assert await fleet.labels("auto") == {INVALID: later.date().isoformat()}
    await fleet.evaluate_at(later + dt.timedelta(days=2))
    assert await fleet.labels("auto") is None
    for name in ("manual", "mounted", "used"):
        assert await fleet.get("Secret", name) is not None


NOW = dt.datetime(2026, 12, 5, 12, tzinfo=dt.UTC)
OLD = "2026-11-01T00:00:00Z"
ACCOUNT = {"metadata": {"name": "bot", "uid": "u"}, "secrets": [{"name": "s"}]}


def secret_of(*, created: str = OLD, deleting: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "s", "namespace": NS, "creationTimestamp": created, "labels": labels or {},
                            "annotations": {"kubernetes.io/service-account.name": "bot"}}
    if deleting:
        meta["deletionTimestamp"] = OLD
    return {"metadata": meta, "type": "kubernetes.io/service-account-token"}


@pytest.mark.parametrize(("secret", "account", "mounted", "step"), [
    (secret_of(), ACCOUNT, (), Cleanup.MARK_INVALID),
    (secret_of(created="2026-12-05T11:30:00Z"), ACCOUNT, (), Cleanup.KEEP),  # younger than the period
    (secret_of(deleting=True), ACCOUNT, (), Cleanup.KEEP),
    (secret_of(labels={LAST_USED: "2026-12-05"}), ACCOUNT, (), Cleanup.KEEP),
    (secret_of(labels={LAST_USED: "2026-12-04"}), ACCOUNT, (), Cleanup.MARK_INVALID),
    (secret_of(labels={LAST_USED: "5 Dec"}), ACCOUNT, (), Cleanup.KEEP),  # unreadable: kube keeps it
    (secret_of(), None, (), Cleanup.KEEP),  # no account (or another uid)
    (secret_of(), {**ACCOUNT, "secrets": []}, (), Cleanup.KEEP),  # not auto-generated
    (secret_of(), ACCOUNT, ("s",), Cleanup.KEEP),  # a Pod names it
    (secret_of(labels={INVALID: "2026-12-05"}), ACCOUNT, (), Cleanup.KEEP),  # marked less than a period ago
    (secret_of(labels={INVALID: "2026-12-04"}), ACCOUNT, (), Cleanup.DELETE),
    (secret_of(labels={INVALID: "yesterday"}), ACCOUNT, (), Cleanup.MARK_INVALID),  # unreadable: marked again
    ({**secret_of(), "type": "Opaque"}, ACCOUNT, (), Cleanup.KEEP),
])
def test_the_cleaners_rules_are_kubes(
    secret: dict[str, Any], account: dict[str, Any] | None, mounted: tuple[str, ...], step: Cleanup
) -> None:
    assert cleanup_step(secret, account, mounted=mounted, now=NOW, period=PERIOD) is step

