"""Boolean query parameters over HTTP, read as kube-apiserver's parameter codec reads them into
its option structs: false when absent, ``0`` or ``false`` in any case; any other value is true,
the empty one included (``?watch`` is a watch, and so is ``?watch=yes``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.queryparams import query_bool, query_optional_bool
from controlplane.apiserver.resources import Registry

from .kinds import widget

pytestmark = pytest.mark.waiting

WIDGETS = "/apis/test.gpufed.io/v1/namespaces/default/widgets"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}
Client = TestClient[Any, Any]

#: Query strings of a parameter that kube reads as false (``None``: the parameter is absent) and
#: as true. The long s (U+017F) folds to "s" as Go's ``strings.EqualFold`` folds it.
FALSE = [None, "false", "0", "FALSE", "fal%C5%BFe"]
TRUE = ["yes", "1", "", "True", "00", "no"]


@pytest.fixture
async def beating(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    """The API with a bookmark every fifth of a second, the last one half a second before a
    watch's timeout (so that a watch of two seconds gets some after its change, even when the
    loaded machine takes a second to make the change)."""
    app = create_app(objects, api_registry, bookmark_interval=0.2, bookmark_before_timeout=0.5)
    async with TestClient(TestServer(app)) as client:
        yield client


def _query(name: str, value: str | None) -> str:
    return "" if value is None else f"&{name}={value}"


async def _line(response: Any) -> dict[str, Any]:
    async with asyncio.timeout(10):
        return json.loads(await response.content.readline())


async def _until_end(response: Any) -> list[dict[str, Any]]:
    async with asyncio.timeout(10):
        return [json.loads(line) async for line in response.content if line.strip()]


def test_the_reading_is_kubes_conversion() -> None:
    for value in ("false", "0", "False", "FALSE", "fAlSe", "fal\u017fe"):
        assert query_bool({"x": value}, "x") is False
        assert query_optional_bool({"x": value}, "x") is False
    for value in ("", "1", "true", "yes", "no", "00", "f", "falsey", " false"):
        assert query_bool({"x": value}, "x") is True
        assert query_optional_bool({"x": value}, "x") is True
    assert query_bool({}, "x") is False
    assert query_optional_bool({}, "x") is None


@pytest.mark.parametrize("value", FALSE)
async def test_a_false_watch_lists(api: Client, value: str | None) -> None:
    assert (await api.post(WIDGETS, json=widget("a"))).status == 201
    response = await api.get(f"{WIDGETS}?timeoutSeconds=5{_query('watch', value)}")
    assert response.status == 200
    listed = await response.json()
    assert listed["kind"] == "WidgetList"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a"]


@pytest.mark.parametrize("query", ["watch", *(f"watch={value}" for value in TRUE)])
async def test_any_other_watch_watches(api: Client, query: str) -> None:
    assert (await api.post(WIDGETS, json=widget("a"))).status == 201
    response = await api.get(f"{WIDGETS}?{query}&timeoutSeconds=5")
    assert response.status == 200
    event = await _line(response)
    response.close()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "a")


@pytest.mark.parametrize(("value", "asked"), [*((v, False) for v in FALSE), *((v, True) for v in TRUE)])
async def test_bookmarks_come_to_a_watch_that_asked(beating: Client, value: str | None, asked: bool) -> None:
    """A watch of two seconds that asked for bookmarks gets one after the change it saw; one that
    did not ask gets none."""
    created = await (await beating.post(WIDGETS, json=widget("a"))).json()
    rv = created["metadata"]["resourceVersion"]
    response = await beating.get(f"{WIDGETS}?watch=1&resourceVersion={rv}&timeoutSeconds=2{_query('allowWatchBookmarks', value)}")
    assert response.status == 200
    assert (await beating.patch(f"{WIDGETS}/a", data='{"spec":{"size":2}}', headers=MERGE)).status == 200
    types = [event["type"] for event in await _until_end(response)]
    assert types[0] == "MODIFIED"
    assert ("BOOKMARK" in types) is asked


@pytest.mark.parametrize(("value", "initial"), [*((v, False) for v in FALSE[1:]), *((v, True) for v in TRUE)])
async def test_send_initial_events(api: Client, value: str, initial: bool) -> None:
    """A watch list from a resourceVersion: with ``sendInitialEvents`` true its first event is
    the object that was there; false, the watch starts from the revision and the first event is
    the object created after it."""
    created = await (await api.post(WIDGETS, json=widget("a"))).json()
    rv = created["metadata"]["resourceVersion"]
    response = await api.get(
        f"{WIDGETS}?watch=1&allowWatchBookmarks=1&resourceVersionMatch=NotOlderThan&resourceVersion={rv}"
        f"&timeoutSeconds=5&sendInitialEvents={value}"
    )
    assert response.status == 200
    assert (await api.post(WIDGETS, json=widget("b"))).status == 201
    event = await _line(response)
    response.close()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "a" if initial else "b")


@pytest.mark.parametrize(("value", "forced"), [*((v, False) for v in FALSE), *((v, True) for v in TRUE)])
async def test_force_takes_the_conflicting_fields_over(api: Client, value: str | None, forced: bool) -> None:
    assert (await api.post(f"{WIDGETS}?fieldManager=creator", json=widget("a", size=1))).status == 201
    body = json.dumps(widget("a", size=2))
    applied = await api.patch(f"{WIDGETS}/a?fieldManager=applier{_query('force', value)}", data=body, headers=APPLY)
    assert applied.status == (200 if forced else 409)
    assert (await (await api.get(f"{WIDGETS}/a")).json())["spec"]["size"] == (2 if forced else 1)


@pytest.mark.parametrize("value", ["false", "0", "", "true"])
async def test_force_at_all_is_refused_on_other_patches(api: Client, value: str) -> None:
    """kube's ``ValidatePatchOptions``: a non-apply patch may not carry ``force``, false or not."""
    assert (await api.post(WIDGETS, json=widget("a"))).status == 201
    refused = await api.patch(f"{WIDGETS}/a?force={value}", data='{"spec":{"size":3}}', headers=MERGE)
    assert refused.status == 422
    status = await refused.json()
    assert status["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
    )
    assert status["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": "Forbidden: may not be specified for non-apply patch", "field": "force"}
    ]
    assert (await api.patch(f"{WIDGETS}/a", data='{"spec":{"size":3}}', headers=MERGE)).status == 200
