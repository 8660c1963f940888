"""The gpufed commands read lists in pages, as kubectl does: ``limit`` items per request
(``--chunk-size``, 500 unless told, 0 for the whole list at once) and each page's continue token
for the next, so a list longer than a page is read whole. A continue token the hub has compacted
away starts the list again once from the beginning; a second expiry is the hub's 410 in kube's
words. Against a real hub (embedded etcd), counting its LIST requests on its own ``/metrics``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import main
from gpufed.hubclient import DEFAULT_CHUNK_SIZE, HubClient, HubError
from tests.hubmetrics import samples

EVENTS = "/api/v1/namespaces/default/events"
REQUESTS = "gpufed_apiserver_request_duration_seconds_count"
EXPIRED = (
    "Error from server (Expired): The provided continue parameter is too old to display a consistent list "
    "result. You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the first chunk was "
    "returned and now may show up in the list."
)


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


def event(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "web", "apiVersion": "apps/v1"},
        "reason": "Scheduled", "message": f"event {name}", "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": f"2026-01-01T00:00:0{name[-1]}Z",
    }


async def with_events(hub: Hub, count: int) -> HubClient:
    client = HubClient.from_kubeconfig(hub.kubeconfig_path)
    for index in range(count):
        await client.request("POST", EVENTS, body=event(f"web.{index}"))
    return client


async def event_lists(hub: Hub) -> float:
    """How many LISTs of events the hub has served so far."""
    return sum(value for labels, value in await samples(hub, REQUESTS)
               if labels.get("verb") == "list" and labels.get("resource") == "events")


def names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in items)


@pytest.mark.parametrize(("chunk_size", "requests"), [(2, 3), (0, 1), (DEFAULT_CHUNK_SIZE, 1)])
async def test_gpufed_events_reads_the_hubs_list_whole_in_pages_of_the_chunk_size(
    hub: Hub, capsys: pytest.CaptureFixture[str], chunk_size: int, requests: int
) -> None:
    await with_events(hub, 5)
    before = await event_lists(hub)
    words = ["events", "deployment/web", "--kubeconfig", str(hub.kubeconfig_path)]
    if chunk_size != DEFAULT_CHUNK_SIZE:
        words += ["--chunk-size", str(chunk_size)]
    assert await asyncio.to_thread(main, words) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["TIME", "CLUSTER", "TYPE"]
    assert sorted(row.split()[-1] for row in rows) == [f"web.{index}" for index in range(5)]
    assert await event_lists(hub) - before == requests


async def test_a_list_whose_continue_token_expired_starts_again_once(hub: Hub) -> None:
    client = await with_events(hub, 5)
    client.chunk_size = 2
    store = hub.store
    assert store is not None
    seen: list[dict[str, Any]] = []
    firsts = []
    async for page in client.list_pages(EVENTS):
        firsts.append(page.first)
        if page.first:
            seen = []
        seen += page.body["items"]
        if len(firsts) == 1:
            # A write after the first page, then compaction past the revision its token reads at.
            await client.request("POST", EVENTS, body=event("web.5"))
            await store.compact(await store.current_revision())
    # The second request's token had expired: the list started again and was read whole.
    assert firsts == [True, True, False, False]
    assert names(seen) == [f"web.{index}" for index in range(6)]


async def test_a_list_that_expires_again_after_starting_over_is_the_hubs_410(hub: Hub) -> None:
    client = await with_events(hub, 5)
    client.chunk_size = 2
    store = hub.store
    assert store is not None
    written = 5
    with pytest.raises(HubError) as expired:
        async for page in client.list_pages(EVENTS):
            assert page.first  # every page read is the first of a (re)started list
            await client.request("POST", EVENTS, body=event(f"web.{written}"))
            written += 1
            await store.compact(await store.current_revision())
    assert (expired.value.status, expired.value.reason) == (410, "Expired")
    assert expired.value.line == EXPIRED
    assert written == 7  # the first page, then the first page of the one restart


async def test_read_list_joins_a_tables_rows_and_drops_the_continue_token(hub: Hub) -> None:
    client = await with_events(hub, 5)
    client.chunk_size = 2
    table = await client.read_list(EVENTS, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert table["kind"] == "Table"
    assert len(table["rows"]) == 5
    assert "continue" not in table["metadata"]
    listed = await client.read_list(EVENTS)
    assert names(listed["items"]) == [f"web.{index}" for index in range(5)]
    assert listed["metadata"]["resourceVersion"]
