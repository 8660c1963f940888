"""The hub's watch bookmarks over HTTP, on kube's schedule: a watch that asked for them
(``allowWatchBookmarks=true``) gets one every bookmark period whether or not events flow, and
one shortly before its ``timeoutSeconds`` ends it; a watch that did not ask gets none. Served
from the watch cache and, without one, from the store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apis.bookmarks import BOOKMARK_BEFORE_TIMEOUT, BOOKMARK_PERIOD, next_bookmark
from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.watchcache import DEFAULT_WATCH_CACHE

from .kinds import widget

pytestmark = pytest.mark.waiting

WIDGETS = "/apis/test.gpufed.io/v1/namespaces/default/widgets"
GADGETS = "/apis/test.gpufed.io/v1/gadgets"
MERGE = {"Content-Type": "application/merge-patch+json"}
Client = TestClient[Any, Any]


@pytest.mark.parametrize(
    ("now", "deadline", "period", "expected"),
    [
        (0.0, None, 60.0, 60.0),  # no timeout: every period
        (0.0, 1800.0, 60.0, 60.0),  # the deadline is far: the period
        (1770.0, 1800.0, 60.0, 1798.0),  # the deadline comes first: shortly before it
        (1798.0, 1800.0, 60.0, None),  # the one before the deadline went: none is left
        (10.0, 12.0, 60.0, None),  # a watch of 2 s has no time for one
        (10.0, 13.0, 60.0, 11.0),
    ],
)
def test_the_next_bookmark_follows_kubes_schedule(
    now: float, deadline: float | None, period: float, expected: float | None
) -> None:
    assert next_bookmark(now, deadline=deadline, period=period) == expected


@pytest.mark.parametrize(
    ("now", "deadline", "expected"),
    [(0.0, 1.0, 0.5), (0.5, 1.0, None), (0.0, None, 60.0)],
)
def test_the_lead_before_the_timeout_can_be_shorter(now: float, deadline: float | None, expected: float | None) -> None:
    assert next_bookmark(now, deadline=deadline, before_timeout=0.5) == expected


def test_kubes_constants() -> None:
    assert (BOOKMARK_PERIOD, BOOKMARK_BEFORE_TIMEOUT) == (60.0, 2.0)


#: The watches below end after a second (``timeoutSeconds`` is whole seconds) and get their last
#: bookmark this long before (kube's lead of 2 s would outlast them).
LEAD = 0.5


async def _client(objects: ObjectStore, registry: Registry, *, cached: bool, **options: Any) -> AsyncIterator[Client]:
    app = create_app(
        objects, registry, watch_cache=DEFAULT_WATCH_CACHE if cached else None, bookmark_before_timeout=LEAD, **options
    )
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.fixture(params=[True, False], ids=["cached", "store"])
async def hub(request: pytest.FixtureRequest, objects: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    """The API with kube's bookmark period (one minute)."""
    async for client in _client(objects, api_registry, cached=request.param):
        yield client


@pytest.fixture(params=[True, False], ids=["cached", "store"])
async def beating(request: pytest.FixtureRequest, objects: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    """The API with a bookmark period of a fifth of a second."""
    async for client in _client(objects, api_registry, cached=request.param, bookmark_interval=0.2):
        yield client


async def _all_events(response: Any) -> list[dict[str, Any]]:
    """Every event of a watch until the server ends it."""
    async with asyncio.timeout(20):
        return [json.loads(line) async for line in response.content if line.strip()]


async def test_a_watch_gets_a_bookmark_shortly_before_its_timeout(hub: Client) -> None:
    created = await (await hub.post(WIDGETS, json=widget("a"))).json()
    start = created["metadata"]["resourceVersion"]
    # Far less than the one-minute period: only the bookmark before the timeout can come.
    response = await hub.get(WIDGETS, params={
        "watch": "1", "resourceVersion": start, "allowWatchBookmarks": "true", "timeoutSeconds": "1",
    })
    assert response.status == 200
    patched = await hub.patch(f"{WIDGETS}/a", data='{"spec":{"size":2}}', headers=MERGE)
    current = (await patched.json())["metadata"]["resourceVersion"]
    events = await _all_events(response)
    assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
    # The client resumes from the bookmark: the revision of the last change it was sent.
    assert events[1]["object"] == {
        "kind": "Widget", "apiVersion": "test.gpufed.io/v1", "metadata": {"resourceVersion": current},
    }


async def test_a_quiet_watch_gets_a_bookmark_before_its_timeout_once_the_store_moved_on(hub: Client) -> None:
    """Nothing of the watched kind changes, another kind does: the bookmark before the timeout
    carries how far the store has moved (etcd's progress notifications, as kube's watch cache
    follows them), so the client resumes from there rather than from the revision it started at."""
    created = await (await hub.post(WIDGETS, json=widget("a"))).json()
    response = await hub.get(WIDGETS, params={
        "watch": "1", "resourceVersion": created["metadata"]["resourceVersion"], "allowWatchBookmarks": "true",
        "timeoutSeconds": "1",
    })
    assert response.status == 200
    gadget = await (await hub.post(GADGETS, json={"metadata": {"name": "g"}})).json()
    events = await _all_events(response)
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert events[0]["object"]["metadata"] == {"resourceVersion": gadget["metadata"]["resourceVersion"]}


@pytest.mark.parametrize("asked", [None, "false"])
async def test_a_watch_that_did_not_ask_gets_no_bookmark(beating: Client, asked: str | None) -> None:
    created = await (await beating.post(WIDGETS, json=widget("a"))).json()
    params = {"watch": "1", "resourceVersion": created["metadata"]["resourceVersion"], "timeoutSeconds": "1"}
    if asked is not None:
        params["allowWatchBookmarks"] = asked
    response = await beating.get(WIDGETS, params=params)
    assert response.status == 200
    # A second of a 0.2 s beat, and the moment before the timeout: none of them is sent.
    assert await _all_events(response) == []


async def test_bookmarks_come_on_the_beat_while_events_flow(beating: Client) -> None:
    """Bookmarks are not only for quiet watches: one comes every period however busy the watch
    is, and each carries a revision no earlier than the events before it and earlier than those
    after it (resuming from it loses nothing)."""
    created = await (await beating.post(WIDGETS, json=widget("a"))).json()
    response = await beating.get(WIDGETS, params={
        "watch": "1", "resourceVersion": created["metadata"]["resourceVersion"], "allowWatchBookmarks": "true",
    })
    assert response.status == 200
    stop = asyncio.Event()

    async def write() -> int:
        """Change the object without a pause (each change waits for the previous one) until told."""
        size = 0
        while not stop.is_set() and size < 5000:
            size += 1
            answer = await beating.patch(f"{WIDGETS}/a", data=json.dumps({"spec": {"size": size}}), headers=MERGE)
            assert answer.status == 200
        return size

    writer = asyncio.create_task(write())
    events: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(20):
            while sum(e["type"] == "BOOKMARK" for e in events) < 3:
                events.append(json.loads(await response.content.readline()))
    finally:
        stop.set()
        written = await writer
        response.close()
    revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    kinds = [e["type"] for e in events]
    assert set(kinds) == {"MODIFIED", "BOOKMARK"}
    bookmarks = [i for i, kind in enumerate(kinds) if kind == "BOOKMARK"]
    # The writer never paused (a watch that had bookmarks only after a quiet period got none):
    # changes came between the bookmarks.
    assert "MODIFIED" in kinds[bookmarks[0] + 1:bookmarks[-1]]
    for at in bookmarks:
        assert all(r <= revisions[at] for r in revisions[:at])
        assert all(r > revisions[at] for r, kind in zip(revisions[at:], kinds[at:], strict=True) if kind == "MODIFIED")
    assert written < 5000  # the bookmarks came while the writes still flowed


@pytest.mark.parametrize("resource_version", ["created", "0", None])
async def test_no_bookmark_while_the_watch_is_at_its_start_revision(beating: Client, resource_version: str | None) -> None:
    """As kube's cacher (``cacheWatcher.process`` sends nothing at or before the revision the watch
    started from): a bookmark would tell the client nothing new, so none comes, on the beat or
    before the timeout, until something changed."""
    created = await (await beating.post(WIDGETS, json=widget("a"))).json()
    params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    if resource_version is not None:
        params["resourceVersion"] = created["metadata"]["resourceVersion"] if resource_version == "created" else "0"
    response = await beating.get(WIDGETS, params=params)
    assert response.status == 200
    # A second of a 0.2 s beat, and the moment before the timeout: not one bookmark.
    listed = [] if resource_version == "created" else [("ADDED", "a")]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in await _all_events(response)] == listed


async def test_a_watch_list_gets_its_initial_events_end_bookmark_and_then_none_at_its_start(
    objects: ObjectStore, api_registry: Registry
) -> None:
    """``sendInitialEvents=true``: the objects, the bookmark annotated ``k8s.io/initial-events-end``
    at the list's revision, and no regular bookmark until the watch moves past it."""
    async for client in _client(objects, api_registry, cached=True, bookmark_interval=0.2):
        created = await (await client.post(WIDGETS, json=widget("a"))).json()
        response = await client.get(WIDGETS, params={
            "watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true", "timeoutSeconds": "1",
        })
        assert response.status == 200
        events = await _all_events(response)
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[1]["object"]["metadata"] == {
            "resourceVersion": created["metadata"]["resourceVersion"],
            "annotations": {"k8s.io/initial-events-end": "true"},
        }
