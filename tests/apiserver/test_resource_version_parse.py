"""``?resourceVersion`` that kube's versioner cannot read (Go's ``strconv.ParseUint`` in base 10)
is a 400 in kube's words on a get, a list (from the watch cache or the store) and a watch, where
kube's watch cache answers the same words as a 500. Python's ``int`` reads more than Go does (a
sign, underscores, spaces, non-ASCII digits): none of that is a resource version."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore, reading

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
SYNTAX = "invalid syntax"


@pytest.mark.parametrize(("value", "why"), [
    ("abc", SYNTAX),
    ("-1", SYNTAX),
    ("+1", SYNTAX),
    ("1_0", SYNTAX),
    (" 1", SYNTAX),
    ("\uff11", SYNTAX),  # a fullwidth 1: a digit to Python, not to Go
    ("18446744073709551616", "value out of range"),  # 2^64
])
@pytest.mark.parametrize("request_of", [
    pytest.param({"path": f"{CONFIGMAPS}/cm"}, id="get"),
    pytest.param({"path": CONFIGMAPS}, id="list"),
    pytest.param({"path": CONFIGMAPS, "limit": "1"}, id="list page"),
    pytest.param({"path": CONFIGMAPS, "watch": "1"}, id="watch"),
])
async def test_an_unreadable_resource_version_is_kubes_400(
    api: TestClient[Any, Any], value: str, why: str, request_of: dict[str, str]
) -> None:
    created = await api.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert created.status == 201
    params = {k: v for k, v in request_of.items() if k != "path"} | {"resourceVersion": value}
    response = await api.get(request_of["path"], params=params)
    status = await response.json()
    assert (response.status, status["kind"], status["reason"]) == (400, "Status", "BadRequest"), status
    assert status["message"] == f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing "{value}": {why}'


# A uint64 past etcd's int64 revisions: kube's versioner reads it, and its watch cache takes it as
# a revision not reached yet (a read waits for it, then is the 504 clients retry), not as a 400.
BEYOND_INT64 = ("9223372036854775807", "9223372036854775808", "18446744073709551615")


@pytest.mark.parametrize("value", BEYOND_INT64)
async def test_a_resource_version_etcd_cannot_reach_is_too_large_on_every_read(
    objects_on: ObjectStore, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Over either store (etcd refuses a revision past int64 if asked): a get and a list not
    older than it wait, then answer kube's ``Too large resource version``; an exact list at once."""
    monkeypatch.setattr(reading, "FRESH_WAIT_SECONDS", 0.05)
    configmaps = objects_on.registry.require("v1", "ConfigMap")
    await objects_on.create(configmaps, {"metadata": {"name": "cm", "namespace": "default"}})
    current = await objects_on.store.current_revision()
    message = f"Timeout: Too large resource version: {value}, current: {current}"
    reads = [
        objects_on.get(configmaps, namespace="default", name="cm", resource_version=value),
        objects_on.list(configmaps, namespace="default", resource_version=value),
        objects_on.list(configmaps, namespace="default", resource_version=value, resource_version_match="Exact"),
        objects_on.list(configmaps, namespace="default", resource_version=value, limit=1),
    ]
    for read in reads:
        with pytest.raises(errors.Timeout) as raised:
            await read
        assert str(raised.value) == message
        assert raised.value.retry_after_seconds == 1


async def test_a_watch_from_a_resource_version_etcd_cannot_reach_waits_for_it(objects_on: ObjectStore) -> None:
    """As kube's cache does with a revision it has not reached: the watch starts and sends
    nothing older, here not the create that a watch from the current revision sees (over the
    memory store and etcd, which is never asked about a revision past its int64)."""
    configmaps = objects_on.registry.require("v1", "ConfigMap")
    current = str(await objects_on.store.current_revision())
    beyond = aiter(objects_on.watch(configmaps, namespace="default", resource_version=BEYOND_INT64[1]))
    now = aiter(objects_on.watch(configmaps, namespace="default", resource_version=current))
    waiting = asyncio.ensure_future(anext(beyond))
    seen = asyncio.ensure_future(anext(now))
    await objects_on.create(configmaps, {"metadata": {"name": "cm", "namespace": "default"}})
    assert (await seen).object["metadata"]["name"] == "cm"
    assert not waiting.done()
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    for events in (beyond, now):
        await events.aclose()  # type: ignore[attr-defined]


async def test_a_watch_over_http_from_beyond_int64_is_served(api: TestClient[Any, Any]) -> None:
    """The watch is kube's 200 stream (no longer a 400), ended by its timeout with no event."""
    params = {"watch": "1", "resourceVersion": BEYOND_INT64[2], "timeoutSeconds": "1"}
    watching = asyncio.ensure_future(api.get(CONFIGMAPS, params=params))
    created = await api.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert created.status == 201
    response = await watching
    assert response.status == 200
    assert await response.text() == ""


async def test_an_update_reads_its_resource_version_as_kubes_store_does(api: TestClient[Any, Any]) -> None:
    """A ``metadata.resourceVersion`` kube's versioner cannot read is its error in Go's words (kube
    answers them as a reasonless 500; here the client's 400), on a PUT and a patch alike; one it
    reads (``01`` for ``1``, a uint64 past etcd's revisions) is compared as a number."""
    created = await (await api.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})).json()
    current = created["metadata"]["resourceVersion"]
    merge = {"Content-Type": "application/merge-patch+json"}
    for value, why in (("abc", SYNTAX), ("-1", SYNTAX), ("18446744073709551616", "value out of range")):
        put = {**created, "metadata": {**created["metadata"], "resourceVersion": value}}
        for response in (
            await api.put(f"{CONFIGMAPS}/cm", json=put),
            await api.patch(f"{CONFIGMAPS}/cm", json={"metadata": {"resourceVersion": value}}, headers=merge),
        ):
            status = await response.json()
            assert (response.status, status["reason"]) == (400, "BadRequest"), status
            assert status["message"] == f'strconv.ParseUint: parsing "{value}": {why}'
    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": BEYOND_INT64[1]}}
    assert (await api.put(f"{CONFIGMAPS}/cm", json=stale)).status == 409
    padded = {**created, "metadata": {**created["metadata"], "resourceVersion": f"00{current}"}, "data": {"a": "b"}}
    updated = await api.put(f"{CONFIGMAPS}/cm", json=padded)
    assert updated.status == 200, await updated.text()
