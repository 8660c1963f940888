"""A large write runs its pure steps in a worker thread, so that one large object does not hold
the event loop (other clients' requests, watches, /readyz) while they run: one whose body and
stored object together pass ``INLINE_WRITE_BYTES``. A create's and an update's validation and
managedFields record, a patch's merge, its copy of the patched object, its validation and its
record, apply's typing check; a large JSON body is decoded there too. Small writes, nearly all of them, run them inline. Either way the
object written is the same."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import decoding, offloading
from controlplane.apiserver.objects import ObjectStore, writing
from controlplane.apiserver.offloading import INLINE_WRITE_BYTES

Client = TestClient[Any, Any]
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
#: Env entries enough to pass INLINE_WRITE_BYTES (about 30 bytes each).
LONG = INLINE_WRITE_BYTES // 20


def deployment(name: str, env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "x"}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [container]}},
        },
    }


def env(count: int, value: str = "v") -> list[dict[str, str]]:
    return [{"name": f"e{i}", "value": value} for i in range(count)]


@pytest.fixture
def off_loop(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each patch computed, whether it ran off the event loop's thread."""
    return _watch(monkeypatch, "apply_patch")


@pytest.fixture
def recorded_off_loop(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each managedFields record of an ordinary write, whether it ran off the event loop's thread."""
    return _watch(monkeypatch, "record_update")


@pytest.fixture
def checked_off_loop(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each validation of what a write stores, whether it ran off the event loop's thread."""
    return _watch(monkeypatch, "checked_warned")


@pytest.fixture
def copied_off_loop(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each written body checked and copied, whether it ran off the event loop's thread."""
    return _watch(monkeypatch, "checked_body")


def _watch(monkeypatch: pytest.MonkeyPatch, name: str, module: Any = writing) -> list[bool]:
    """For each call of ``module``'s ``name``, whether it ran off the event loop's thread."""
    loop_thread = threading.get_ident()
    seen: list[bool] = []
    real = getattr(module, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.get_ident() != loop_thread)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return seen


async def _env_of(answer: Any) -> list[dict[str, str]]:
    assert answer.status in (200, 201), await answer.text()
    body = await answer.json()
    found: list[dict[str, str]] = body["spec"]["template"]["spec"]["containers"][0].get("env", [])
    return found


async def test_a_large_strategic_merge_patch_is_computed_off_the_loop(
    hub: Client,
    off_loop: list[bool],
    recorded_off_loop: list[bool],
    checked_off_loop: list[bool],
    copied_off_loop: list[bool],
) -> None:
    assert (await hub.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    for seen in (recorded_off_loop, checked_off_loop, copied_off_loop):
        seen.clear()  # the create's
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "env": env(LONG)}]}}}}
    assert len(json.dumps(patch)) > INLINE_WRITE_BYTES

    answer = await hub.patch(f"{DEPLOYMENTS}/web", data=json.dumps(patch), headers=STRATEGIC)

    assert await _env_of(answer) == env(LONG)
    assert off_loop == [True]
    assert recorded_off_loop == [True]
    assert copied_off_loop == [True]  # the patched object's copy
    assert checked_off_loop == [True]


async def test_a_small_patch_is_computed_inline(
    hub: Client,
    off_loop: list[bool],
    recorded_off_loop: list[bool],
    checked_off_loop: list[bool],
    copied_off_loop: list[bool],
) -> None:
    assert (await hub.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    for seen in (recorded_off_loop, checked_off_loop, copied_off_loop):
        seen.clear()
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "env": env(3)}]}}}}

    answer = await hub.patch(f"{DEPLOYMENTS}/web", data=json.dumps(patch), headers=STRATEGIC)

    assert await _env_of(answer) == env(3)
    assert off_loop == [False]
    assert recorded_off_loop == [False]
    assert copied_off_loop == [False]
    assert checked_off_loop == [False]


async def test_a_small_patch_of_a_large_object_is_computed_off_the_loop(
    hub: Client, off_loop: list[bool]
) -> None:
    assert (await hub.post(DEPLOYMENTS, json=deployment("web", env(LONG)))).status == 201
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "e0", "value": "w"}]}]}}}
    }

    answer = await hub.patch(f"{DEPLOYMENTS}/web", data=json.dumps(patch), headers=STRATEGIC)

    assert await _env_of(answer) == [{"name": "e0", "value": "w"}, *env(LONG)[1:]]
    assert off_loop == [True]


async def test_a_large_apply_is_computed_off_the_loop_when_it_creates_and_when_it_updates(
    hub: Client, off_loop: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    typed_off_loop = _watch(monkeypatch, "check_apply_request")
    decoded_off_loop = _watch(monkeypatch, "decoded_applied")
    created = await hub.patch(
        f"{DEPLOYMENTS}/web?fieldManager=m1", data=json.dumps(deployment("web", env(LONG))), headers=APPLY
    )
    assert await _env_of(created) == env(LONG)

    updated = await hub.patch(
        f"{DEPLOYMENTS}/web?fieldManager=m2&force=true",
        data=json.dumps(deployment("web", env(LONG, "w"))),
        headers=APPLY,
    )

    assert await _env_of(updated) == env(LONG, "w")
    assert off_loop == [True, True]
    assert typed_off_loop == [True, True]  # apply's typing check
    assert decoded_off_loop == [True, True]


async def test_a_large_create_and_put_are_validated_and_recorded_off_the_loop(
    hub: Client, checked_off_loop: list[bool], recorded_off_loop: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_off_loop = _watch(monkeypatch, "decode_body_sync", decoding)
    created = await hub.post(f"{DEPLOYMENTS}?fieldManager=m", json=deployment("web", env(LONG)))
    assert await _env_of(created) == env(LONG)
    assert (checked_off_loop, recorded_off_loop) == ([True], [True])
    body = await created.json()
    body["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "w"

    updated = await hub.put(f"{DEPLOYMENTS}/web?fieldManager=m", json=body)

    assert await _env_of(updated) == [{"name": "e0", "value": "w"}, *env(LONG)[1:]]
    assert (checked_off_loop, recorded_off_loop) == ([True, True], [True, True])
    assert decoded_off_loop == [True, True]  # their JSON bodies


async def test_a_small_create_and_put_are_validated_and_recorded_inline(
    hub: Client, checked_off_loop: list[bool], recorded_off_loop: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_off_loop = _watch(monkeypatch, "decode_body_sync", decoding)
    created = await hub.post(f"{DEPLOYMENTS}?fieldManager=m", json=deployment("web", env(3)))
    body = await created.json()
    body["spec"]["replicas"] = 2

    assert (await hub.put(f"{DEPLOYMENTS}/web?fieldManager=m", json=body)).status == 200
    assert (checked_off_loop, recorded_off_loop) == ([False, False], [False, False])
    assert decoded_off_loop == [False, False]


async def test_an_in_process_update_of_a_large_object_is_validated_off_the_loop(
    objects: ObjectStore, checked_off_loop: list[bool], copied_off_loop: list[bool]
) -> None:
    """A controller's write (no request body) of an object stored past the size: its copy of the
    object is made inline, its validation off the loop."""
    rt = objects.registry.get("", "v1", "configmaps")
    assert rt is not None
    data = {f"k{i}": "v" * 20 for i in range(INLINE_WRITE_BYTES // 20)}
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"},
        "data": data,
    }
    created = await objects.create(rt, config)
    assert checked_off_loop == [False]  # nothing tells a create made in process that it is large

    created["data"]["k0"] = "w"
    updated = await objects.update(rt, created)

    assert updated["data"] == {**data, "k0": "w"}
    assert checked_off_loop == [False, True]
    assert copied_off_loop == [False]  # the update's copy of the object it was given


def test_large_writes_run_in_their_own_threads_not_in_asyncios_default_executor() -> None:
    """aiohttp's resolver runs in asyncio's default executor: large writes queued there would
    hold a webhook's DNS lookup behind them."""

    async def ran_in() -> str:
        return await offloading.pure(True, lambda: threading.current_thread().name)

    assert asyncio.run(ran_in()).startswith("large-write")
