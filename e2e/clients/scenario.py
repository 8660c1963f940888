"""The life of one object, driven through one client: what every client module runs per kind.

A :class:`Driver` wraps one client library for one kind; each call checks that the client's own
(typed, where it has them) objects parse what the hub answered and hands back a :class:`Seen`.
:func:`exercise` creates a sample object, reads it, lists it (in its namespace and across
namespaces), patches and replaces its labels, watches the change arrive, and deletes it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from e2e.clients.conftest import ServedKind, unique_name
from e2e.clients.samples import sample

PATCHED = "patched"

#: How long a watch may take to deliver the change the test just made.
WATCH_TIMEOUT = 30.0
#: How long a deleted object may take to disappear (kinds with finalizers go in two steps).
GONE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Seen:
    """What a client showed of one object."""

    name: str
    uid: str
    resource_version: str
    labels: dict[str, str] = field(default_factory=dict)


class Driver(Protocol):
    """One client library bound to one kind (calls in the kind's namespace when namespaced)."""

    async def create(self, manifest: dict[str, Any]) -> Seen: ...
    async def read(self, name: str) -> Seen: ...
    async def list(self) -> list[Seen]: ...
    async def list_all_namespaces(self) -> list[Seen]: ...
    async def patch_labels(self, name: str, labels: dict[str, str]) -> Seen: ...
    async def replace_labels(self, name: str, labels: dict[str, str]) -> Seen: ...
    async def watch_change(self, name: str, resource_version: str) -> tuple[str, Seen]:
        """Watch from ``resource_version``: the first event showing ``name`` with the label
        ``patched`` (type, object)."""
        ...
    async def delete(self, name: str) -> None: ...
    async def exists(self, name: str) -> bool: ...
    def conflicted(self, error: Exception) -> bool:
        """Whether ``error`` is the client's form of kube's 409 Conflict."""
        ...


#: How many times a read-modify-replace is done again after a Conflict.
REPLACE_ATTEMPTS = 5


async def replace_retrying(driver: Driver, name: str, labels: dict[str, str]) -> Seen:
    """``replace_labels`` as client-go's ``RetryOnConflict`` does it: the hub's controllers write
    some kinds (a ResourceBinding's spec and status, a Cluster's status) right after they are
    created, and a replace built from a read taken before such a write is answered 409 Conflict
    (kube's optimistic concurrency); the round trip is then done again from a fresh read."""
    for attempt in range(REPLACE_ATTEMPTS):
        try:
            return await driver.replace_labels(name, labels)
        except Exception as error:
            if attempt == REPLACE_ATTEMPTS - 1 or not driver.conflicted(error):
                raise
    raise AssertionError("unreachable")


async def exercise(driver: Driver, kind: ServedKind, verbs: frozenset[str], *, client: str) -> None:
    """Create, read, list, patch, replace, watch and delete one ``kind`` through ``driver``;
    a kind its discovery serves read-only (``verbs``) is listed and read."""
    if "create" not in verbs:
        assert verbs >= {"get", "list"}, verbs
        for seen in await driver.list():
            assert (await driver.read(seen.name)).name == seen.name
        return
    manifest = sample(kind.api_version, kind.kind, unique_name(f"{client}-{kind.kind.lower()}"), namespace=kind.namespace())
    name = manifest["metadata"]["name"]

    created = await driver.create(manifest)
    assert created.name == name and created.uid, created
    assert created.labels.get("suite") == "clients"

    read = await driver.read(name)
    assert (read.name, read.uid) == (name, created.uid)

    assert name in {seen.name for seen in await driver.list()}
    if kind.namespaced and not kind.newer_events:  # every namespace holds core Events (eventTime null)
        assert name in {seen.name for seen in await driver.list_all_namespaces()}

    patched = await driver.patch_labels(name, {"patched": "yes"})
    assert patched.labels.get("patched") == "yes" and patched.labels.get("suite") == "clients", patched
    event, watched = await asyncio.wait_for(driver.watch_change(name, created.resource_version), WATCH_TIMEOUT)
    assert event == "MODIFIED" and watched.labels.get("patched") == "yes", (event, watched)

    replaced = await replace_retrying(driver, name, {"replaced": "yes"})
    assert replaced.labels.get("replaced") == "yes", replaced
    assert int(replaced.resource_version) > int(patched.resource_version)

    await driver.delete(name)
    async with asyncio.timeout(GONE_TIMEOUT):
        while True:  # polls the condition "gone" (kinds with finalizers go in two steps)
            if not await driver.exists(name):
                break
            await asyncio.sleep(0.2)
