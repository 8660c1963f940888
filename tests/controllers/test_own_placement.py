"""The scheduler's own placement write is not decided again (issue 19), and every other write is.

Writing a decision bumps the binding's generation, whose watch event queued the binding once
more: a fresh read and a decision that changed nothing. The scheduler now knows the
resourceVersion it wrote and lets that one event pass; a spec change by anyone else (another
resourceVersion) is still decided.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.objectclient import WRITER
from controlplane.scheduler.controller.ownwrites import OwnPlacements
from controlplane.storage.ledger import acting_as

from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled

WORK_API = "work.gpufed.io/v1alpha1"
KEY = ("default", "web-deployment")


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def placed(objects: ObjectStore) -> dict[str, Any] | None:
    """The binding once its placement is decided and its status says so."""
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    listed = await objects.list(rt, namespace="default")
    found = next((b for b in listed.items if b["metadata"]["name"] == KEY[1]), None)
    if found is None or not found["spec"].get("clusters"):
        return None
    status = found.get("status") or {}
    scheduled = next((c for c in status.get("conditions") or () if c["type"] == "Scheduled"), None)
    if status.get("observedGeneration") != found["metadata"]["generation"] or not scheduled:
        return None
    return found if scheduled["status"] == "True" else None


async def fleet(objects: ObjectStore, manager: ControllerManager) -> None:
    await put_cluster(objects, "onprem", node_shape(2, gpus=8))
    await settled(manager)
    await create(objects, propagation_policy("tiered"))


async def test_a_decision_reads_and_decides_its_binding_once(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fleet(objects, manager)
    reads: list[str] = []
    original_get = objects.get

    async def counting_get(rt: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if rt.kind == "ResourceBinding" and WRITER.get() == "controller:scheduler":
            reads.append(str(kwargs.get("name")))
        return await original_get(rt, *args, **kwargs)

    monkeypatch.setattr(objects, "get", counting_get)
    await create(objects, deployment("web", replicas=1))
    await eventually(lambda: placed(objects), what="the binding placed")
    await settled(manager)
    # Before: a second fresh read (and decision) on the event of the scheduler's own spec write.
    assert reads == [KEY[1]], reads


async def test_a_spec_written_by_someone_else_after_the_decision_is_decided(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fleet(objects, manager)
    scheduler = manager.scheduler
    assert scheduler is not None
    rt = objects.registry.require(WORK_API, "ResourceBinding")
    decide: Callable[[Any], Awaitable[float | None]] = scheduler.loop._reconcile
    interfered: list[str] = []

    async def then_someone_else_writes(key: Any) -> float | None:
        again = await decide(key)
        if key == KEY and not interfered:
            # Right after the decision is written, before its events are handled: another
            # writer empties the placement (a new generation, another resourceVersion).
            current = await objects.get(rt, namespace=KEY[0], name=KEY[1])
            assert current["spec"].get("clusters"), "the first reconcile placed the binding"
            with acting_as("admin"):
                emptied = await objects.update(rt, {**current, "spec": {**current["spec"], "clusters": []}})
            interfered.append(emptied["metadata"]["resourceVersion"])
        return again

    monkeypatch.setattr(scheduler.loop, "_reconcile", then_someone_else_writes)
    await create(objects, deployment("web", replicas=1))
    async def written() -> list[str] | None:
        return interfered or None

    await eventually(written, what="the other writer's write")
    again = await eventually(lambda: placed(objects), what="the binding placed again")
    assert int(again["metadata"]["resourceVersion"]) > int(interfered[0])
    assert again["spec"]["clusters"] == [{"name": "onprem", "replicas": 1}]


def test_the_window_holds_events_and_tells_the_own_write_from_others() -> None:
    own = OwnPlacements()
    stored = {"metadata": {"resourceVersion": "44"}}
    # The write's own event before the write returned (the watch cache was first): held, then dropped.
    own.begin(KEY)
    assert own.is_own(KEY, "44")
    assert own.end(KEY, stored) is False
    assert own.is_own(KEY, "46") is False, "nothing of the write is left to skip"
    # Someone else's write during the window: held, and the binding is decided again after it.
    own.begin(KEY)
    assert own.is_own(KEY, "50")
    assert own.end(KEY, {"metadata": {"resourceVersion": "49"}}) is True
    # The own event after the write returned: skipped once; the next write (another version) is not.
    own.begin(KEY)
    assert own.end(KEY, {"metadata": {"resourceVersion": "60"}}) is False
    assert own.is_own(KEY, "60")
    assert own.is_own(KEY, "60") is False
    # A write that failed before its spec was stored: every held event is decided.
    own.begin(KEY)
    assert own.is_own(KEY, "70")
    assert own.end(KEY, None) is True
    # Another binding is never held by this one's window.
    own.begin(KEY)
    assert own.is_own(("default", "other"), "71") is False
    own.forget(KEY)
    assert own.is_own(KEY, "72") is False
