"""A large patch is computed in a worker thread, so that merging a long list does not hold the
event loop (other clients' requests, watches, /readyz) while it runs: one whose body and stored
object together pass ``PATCH_INLINE_BYTES``, its managedFields record too. Small patches, nearly
all of them, are computed inline. Either way the patched object is the same."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.objects import writing

Client = TestClient[Any, Any]
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
#: Env entries enough to pass PATCH_INLINE_BYTES (about 30 bytes each).
LONG = writing.PATCH_INLINE_BYTES // 20


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


def _watch(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bool]:
    loop_thread = threading.get_ident()
    seen: list[bool] = []
    real = getattr(writing, name)

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(threading.get_ident() != loop_thread)
        result: dict[str, Any] = real(*args, **kwargs)
        return result

    monkeypatch.setattr(writing, name, recording)
    return seen


async def _env_of(answer: Any) -> list[dict[str, str]]:
    assert answer.status in (200, 201), await answer.text()
    body = await answer.json()
    found: list[dict[str, str]] = body["spec"]["template"]["spec"]["containers"][0].get("env", [])
    return found


async def test_a_large_strategic_merge_patch_is_computed_off_the_loop(
    hub: Client, off_loop: list[bool], recorded_off_loop: list[bool]
) -> None:
    assert (await hub.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    recorded_off_loop.clear()  # the create's
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "env": env(LONG)}]}}}}
    assert len(json.dumps(patch)) > writing.PATCH_INLINE_BYTES

    answer = await hub.patch(f"{DEPLOYMENTS}/web", data=json.dumps(patch), headers=STRATEGIC)

    assert await _env_of(answer) == env(LONG)
    assert off_loop == [True]
    assert recorded_off_loop == [True]


async def test_a_small_patch_is_computed_inline(
    hub: Client, off_loop: list[bool], recorded_off_loop: list[bool]
) -> None:
    assert (await hub.post(DEPLOYMENTS, json=deployment("web"))).status == 201
    recorded_off_loop.clear()
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "env": env(3)}]}}}}

    answer = await hub.patch(f"{DEPLOYMENTS}/web", data=json.dumps(patch), headers=STRATEGIC)

    assert await _env_of(answer) == env(3)
    assert off_loop == [False]
    assert recorded_off_loop == [False]


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
    hub: Client, off_loop: list[bool]
) -> None:
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
