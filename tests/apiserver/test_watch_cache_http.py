"""The watch cache over HTTP: the same bytes as the store serves, kube's watch-list, and its
option checks before the stream starts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry

from .kinds import widget

WIDGETS = "/apis/test.gpufed.io/v1/namespaces/default/widgets"
Client = TestClient[Any, Any]


@pytest.fixture
async def uncached(objects: ObjectStore, api_registry: Registry) -> AsyncIterator[Client]:
    """The API over the same store as ``api``, without a watch cache."""
    app = create_app(objects, api_registry, bookmark_interval=0.2, watch_cache=None)
    async with TestClient(TestServer(app)) as client:
        yield client


async def _lines(response: Any, count: int) -> list[bytes]:
    lines: list[bytes] = []
    async with asyncio.timeout(10):
        while len(lines) < count:
            lines.append(await response.content.readline())
    return lines


async def test_watches_and_lists_from_the_cache_are_byte_identical(api: Client, uncached: Client) -> None:
    created = await (await api.post(WIDGETS, json=widget("a", labels={"x": "1"}))).json()
    rv = created["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": rv}
    watches = [await api.get(WIDGETS, params=params), await uncached.get(WIDGETS, params=params)]
    initial = {"watch": "1", "resourceVersion": "0"}
    firsts = [await api.get(WIDGETS, params=initial), await uncached.get(WIDGETS, params=initial)]
    patched = await api.patch(
        f"{WIDGETS}/a", data='{"spec":{"size":5}}', headers={"Content-Type": "application/merge-patch+json"}
    )
    assert patched.status == 200
    cached_lines, store_lines = [await _lines(response, 1) for response in watches]
    assert cached_lines == store_lines
    assert json.loads(cached_lines[0])["object"]["spec"]["size"] == 5
    first_cached, first_store = [await _lines(response, 1) for response in firsts]
    assert first_cached == first_store
    for response in (*watches, *firsts):
        response.close()
    listed = [await (await api.get(WIDGETS, params={"resourceVersion": "0"})).read(),
              await (await uncached.get(WIDGETS)).read()]
    assert listed[0] == listed[1]


async def test_watch_list_over_http(api: Client) -> None:
    for name in ("a", "b"):
        assert (await api.post(WIDGETS, json=widget(name))).status == 201
    response = await api.get(WIDGETS, params={
        "watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    })
    assert response.status == 200
    events = [json.loads(line) for line in await _lines(response, 3)]
    response.close()
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None),
    ]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"sendInitialEvents": "true"}, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
        ({"resourceVersionMatch": "NotOlderThan"}, "resourceVersionMatch is forbidden for watch unless sendInitialEvents"),
        # Any value but 0 and false is true, as kube reads a query boolean.
        ({"sendInitialEvents": "maybe"}, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
    ],
)
async def test_watch_list_options_are_checked_before_the_stream(
    api: Client, query: dict[str, str], message: str
) -> None:
    response = await api.get(WIDGETS, params={"watch": "1", **query})
    assert response.status in (400, 422)
    status = await response.json()
    assert status["kind"] == "Status"
    assert message in status["message"]


@pytest.mark.parametrize(
    ("query", "causes"),
    [
        ({"sendInitialEvents": "true", "resourceVersionMatch": "Exact"}, [
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            'Unsupported value: "Exact": supported values: "NotOlderThan"',
        ]),
        ({"resourceVersionMatch": "Bogus", "continue": "x"}, [
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            'Unsupported value: "Bogus": supported values: "NotOlderThan"',
            "Forbidden: resourceVersionMatch is forbidden when continue is provided",
        ]),
    ],
)
async def test_a_watch_gets_every_problem_with_its_options_in_one_answer(
    api: Client, query: dict[str, str], causes: list[str]
) -> None:
    """As kube's ``validateWatchOptions``: all the causes in one 422, kube's message listing them."""
    response = await api.get(WIDGETS, params={"watch": "1", **query})
    status = await response.json()
    assert (response.status, status["reason"]) == (422, "Invalid"), status
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("resourceVersionMatch", cause) for cause in causes
    ]
    listed = ", ".join(f"resourceVersionMatch: {cause}" for cause in causes)
    assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: [{listed}]'


async def test_send_initial_events_is_refused_on_a_list(api: Client) -> None:
    response = await api.get(
        WIDGETS, params={"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "resourceVersion": "0"}
    )
    assert response.status == 422
    status = await response.json()
    assert status["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'
    )
    # As kube's: kubectl prints the causes of an Invalid answer, named by its kind.
    assert status["details"] == {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [{
        "reason": "FieldValueForbidden", "message": "Forbidden: sendInitialEvents is forbidden for list",
        "field": "sendInitialEvents",
    }]}


async def test_list_options_are_checked_as_kube_checks_them(api: Client) -> None:
    """kube's ``ValidateListOptions``: one 422 with a cause for each problem, in its order."""
    refused = await api.get(WIDGETS, params={"resourceVersionMatch": "Bogus", "continue": "x"})
    assert refused.status == 422
    status = await refused.json()
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when continue is provided"),
        ("resourceVersionMatch", 'Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""'),
    ]
    exact_zero = await api.get(WIDGETS, params={"resourceVersionMatch": "Exact", "resourceVersion": "0"})
    assert exact_zero.status == 422
    assert (await exact_zero.json())["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is '
        'forbidden for resourceVersion "0"'
    )
    assert (await api.get(WIDGETS, params={"resourceVersionMatch": "NotOlderThan", "resourceVersion": "0"})).status == 200


async def test_a_list_limit_is_read_as_kubes_parameter_codec_reads_it(api: Client) -> None:
    """Any int64 (a limit that is not positive pages nothing, as in kube); anything else is
    Go's ``strconv.ParseInt`` error, as kube's 400."""
    listed = await api.get(WIDGETS, params={"limit": "-1"})
    assert listed.status == 200, await listed.text()
    assert "continue" not in (await listed.json())["metadata"]
    for value, error in (("abc", "invalid syntax"), ("99999999999999999999", "value out of range")):
        refused = await api.get(WIDGETS, params={"limit": value})
        assert refused.status == 400
        assert (await refused.json())["message"] == f'strconv.ParseInt: parsing "{value}": {error}'


async def test_timeout_seconds_is_read_as_kubes_parameter_codec_reads_it(api: Client) -> None:
    """A list decodes ``timeoutSeconds`` too (Go's ``strconv.ParseInt`` error, kube's 400, though a
    list does not use it); a watch with a negative one is accepted and ends at once, as kube's
    timer does."""
    for params in ({"timeoutSeconds": "abc"}, {"watch": "1", "timeoutSeconds": "abc"}):
        refused = await api.get(WIDGETS, params=params)
        assert refused.status == 400, params
        assert (await refused.json())["message"] == 'strconv.ParseInt: parsing "abc": invalid syntax'
    assert (await api.get(WIDGETS, params={"timeoutSeconds": "-5"})).status == 200
    ended = await api.get(WIDGETS, params={"watch": "1", "timeoutSeconds": "-1"})
    assert ended.status == 200
    assert await asyncio.wait_for(ended.read(), 10) == b""


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "store"])
@pytest.mark.parametrize(("path", "params"), [
    (f"{WIDGETS}/a".replace("/v1/", "/v1/watch/"), {}),  # kube's deprecated path of one object
    (f"{WIDGETS}/a".replace("/v1/", "/v1/watch/"), {"fieldSelector": "metadata.name==a"}),
    (WIDGETS, {"watch": "1", "fieldSelector": "metadata.name=a"}),
])
async def test_a_watch_of_one_named_object_gets_its_events_only(
    api: Client, uncached: Client, cached: bool, path: str, params: dict[str, str]
) -> None:
    client = api if cached else uncached
    start = (await (await client.get(WIDGETS)).json())["metadata"]["resourceVersion"]
    response = await client.get(path, params={**params, "resourceVersion": start})
    assert response.status == 200
    for name in ("b", "a", "c"):
        assert (await client.post(WIDGETS, json=widget(name))).status == 201
    for name in ("b", "a"):
        assert (await client.delete(f"{WIDGETS}/{name}")).status == 200
    events = [json.loads(line) for line in await _lines(response, 2)]
    response.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("DELETED", "a")]


@pytest.mark.parametrize("selector", ["metadata.name=b", "metadata.name!=a", "metadata.namespace=default"])
async def test_the_deprecated_watch_path_of_an_object_takes_no_selector_naming_another(
    api: Client, selector: str
) -> None:
    response = await api.get(f"{WIDGETS}/a".replace("/v1/", "/v1/watch/"), params={"fieldSelector": selector})
    assert response.status == 400
    status = await response.json()
    assert (status["reason"], status["message"]) == (
        "BadRequest", "fieldSelector metadata.name doesn't match requested name"
    )
