"""The gpufed commands read lists in pages, as kubectl does: ``limit`` items per request
(``--chunk-size``, 500 unless told, 0 for the whole list at once) and each page's continue token
for the next, so a list longer than a page is read whole. A continue token the hub has compacted
away starts the list again once from the beginning; a second expiry is the hub's 410 in kube's
words. Against a real hub (embedded etcd), counting its LIST requests on its own ``/metrics``: one
for the module, each test's Events in a namespace of its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.cli import main
from gpufed.hubclient import DEFAULT_CHUNK_SIZE, HubClient, HubError
from tests.hubmetrics import samples

REQUESTS = "gpufed_apiserver_request_duration_seconds_count"
EXPIRED = (
    "Error from server (Expired): The provided continue parameter is too old to display a consistent list "
    "result. You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the first chunk was "
    "returned and now may show up in the list."
)


#: The tests run on their module's event loop, where its hub runs.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path_factory.mktemp("hub"), port=0)) as running:
        yield running


def events(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/events"


def event(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Deployment", "namespace": namespace, "name": "web", "apiVersion": "apps/v1"},
        "reason": "Scheduled", "message": f"event {name}", "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": f"2026-01-01T00:00:0{name[-1]}Z",
    }


async def with_events(hub: Hub, namespace: str, count: int) -> HubClient:
    """Namespace ``namespace`` (the test's own) with ``count`` Events of Deployment ``web``."""
    client = HubClient.from_kubeconfig(hub.kubeconfig_path)
    await client.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": namespace}})
    for index in range(count):
        await client.request("POST", events(namespace), body=event(f"web.{index}", namespace))
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
    namespace = f"chunk-size-{chunk_size}"
    await with_events(hub, namespace, 5)
    before = await event_lists(hub)
    words = ["events", "deployment/web", "-n", namespace, "--kubeconfig", str(hub.kubeconfig_path)]
    if chunk_size != DEFAULT_CHUNK_SIZE:
        words += ["--chunk-size", str(chunk_size)]
    assert await asyncio.to_thread(main, words) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["TIME", "CLUSTER", "TYPE"]
    assert sorted(row.split()[-1] for row in rows) == [f"web.{index}" for index in range(5)]
    assert await event_lists(hub) - before == requests


async def test_a_list_whose_continue_token_expired_starts_again_once(hub: Hub) -> None:
    namespace = "expired-once"
    client = await with_events(hub, namespace, 5)
    client.chunk_size = 2
    store = hub.store
    assert store is not None
    seen: list[dict[str, Any]] = []
    firsts = []
    async for page in client.list_pages(events(namespace)):
        firsts.append(page.first)
        if page.first:
            seen = []
        seen += page.body["items"]
        if len(firsts) == 1:
            # A write after the first page, then compaction past the revision its token reads at.
            await client.request("POST", events(namespace), body=event("web.5", namespace))
            await store.compact(await store.current_revision())
    # The second request's token had expired: the list started again and was read whole.
    assert firsts == [True, True, False, False]
    assert names(seen) == [f"web.{index}" for index in range(6)]


async def test_a_list_that_expires_again_after_starting_over_is_the_hubs_410(hub: Hub) -> None:
    namespace = "expired-twice"
    client = await with_events(hub, namespace, 5)
    client.chunk_size = 2
    store = hub.store
    assert store is not None
    written = 5
    with pytest.raises(HubError) as expired:
        async for page in client.list_pages(events(namespace)):
            assert page.first  # every page read is the first of a (re)started list
            await client.request("POST", events(namespace), body=event(f"web.{written}", namespace))
            written += 1
            await store.compact(await store.current_revision())
    assert (expired.value.status, expired.value.reason) == (410, "Expired")
    assert expired.value.line == EXPIRED
    assert written == 7  # the first page, then the first page of the one restart


async def test_read_list_joins_a_tables_rows_and_drops_the_continue_token(hub: Hub) -> None:
    namespace = "table"
    client = await with_events(hub, namespace, 5)
    client.chunk_size = 2
    table = await client.read_list(events(namespace), accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert table["kind"] == "Table"
    assert len(table["rows"]) == 5
    assert "continue" not in table["metadata"]
    listed = await client.read_list(events(namespace))
    assert names(listed["items"]) == [f"web.{index}" for index in range(5)]
    assert listed["metadata"]["resourceVersion"]
