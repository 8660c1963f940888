"""The write ledger (controlplane/storage/ledger.py) over the object layer: every write counted
by resource, subresource, writer and verb, every delivered watch event by watcher, and no
write at all for an update, patch or status update that changes nothing (kube's no-op rule:
the stored object comes back, resourceVersion and managedFields untouched)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patches import PatchType
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from controlplane.storage.ledger import LedgerStore, WriteLedger, acting_as, resource_of

MANAGER = "kubectl-client-side-apply"


def deployment(name: str = "web", *, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.local/web:1"}]},
            },
        },
    }


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


CLOCK = Clock()


@pytest.fixture
async def ledgered() -> AsyncIterator[tuple[ObjectStore, WriteLedger]]:
    ledger = WriteLedger(journal=100)
    async with MemoryStore() as memory:
        objects = ObjectStore(LedgerStore(memory, ledger), hub_registry(), clock=CLOCK)
        await objects.bootstrap()
        ledger.writes.clear()
        ledger.journal.clear() if ledger.journal is not None else None
        yield objects, ledger


def total(ledger: WriteLedger) -> int:
    return sum(ledger.writes.values())


def test_resource_of_names_kube_resources() -> None:
    assert resource_of("/registry/apps/deployments/ns/web") == "deployments.apps"
    assert resource_of("/registry/core/events/ns/web.1") == "events"
    assert resource_of("/registry/work.gpufed.io/works/gpufed-es-a/w") == "works.work.gpufed.io"
    assert resource_of("/other/thing/x") == "/other/thing"


async def test_writes_are_counted_by_resource_subresource_writer_and_verb(
    ledgered: tuple[ObjectStore, WriteLedger],
) -> None:
    objects, ledger = ledgered
    rt = objects.registry.require("apps/v1", "Deployment")
    with acting_as("admin"):
        created = await objects.create(rt, deployment(), field_manager=MANAGER)
    with acting_as("controller:status"):
        await objects.update_status(rt, {**created, "status": {"replicas": 1, "readyReplicas": 1}})
    await objects.delete(rt, namespace="default", name="web")
    assert ledger.writes == {
        ("deployments.apps", "", "admin", "create"): 1,
        ("deployments.apps", "status", "controller:status", "update"): 1,
        ("deployments.apps", "", "hub", "delete"): 1,
    }
    assert ledger.journal is not None
    status_write = ledger.journal[1].as_dict()
    assert status_write["key"] == "/registry/apps/deployments/default/web"
    assert status_write["changed"] == ["status.readyReplicas", "status.replicas"]
    snapshot = ledger.snapshot()
    assert {"resource": "deployments.apps", "subresource": "status", "writer": "controller:status",
            "verb": "update", "count": 1} in snapshot["writes"]
    assert len(snapshot["journal"]) == 3
    # A reader that has seen the writes up to the status update asks for the rest only.
    assert snapshot["journalRevision"] == ledger.journal[2].revision
    later = ledger.snapshot(since=ledger.journal[1].revision)
    assert [entry["verb"] for entry in later["journal"]] == ["delete"]
    assert later["journalRevision"] == snapshot["journalRevision"] and later["writes"] == snapshot["writes"]


async def test_no_op_updates_patches_and_status_updates_write_nothing(
    ledgered: tuple[ObjectStore, WriteLedger],
) -> None:
    objects, ledger = ledgered
    rt = objects.registry.require("apps/v1", "Deployment")
    created = await objects.create(rt, deployment(), field_manager=MANAGER)
    with_status = await objects.update_status(rt, {**created, "status": {"replicas": 1}}, field_manager="agent")
    applied = await objects.patch(
        rt, namespace="default", name="web", patch_type=PatchType.APPLY, patch=deployment(), field_manager="ssa",
    )
    stored = copy.deepcopy(applied)
    written = total(ledger)
    assert written == 3

    # Later timestamps must not turn a no-op into a managedFields-only write.
    CLOCK.now += timedelta(minutes=5)
    same = [
        await objects.update(rt, copy.deepcopy(stored), field_manager=MANAGER),
        await objects.update(rt, copy.deepcopy(stored), field_manager="someone-else"),
        # as `kubectl replace` sends it: no managedFields (kubectl hides them), the same fields
        await objects.update(rt, _without_managed_fields(stored), field_manager=MANAGER),
        await objects.update_status(rt, {**copy.deepcopy(stored), "status": with_status["status"]}, field_manager="agent"),
        await objects.update_status(rt, copy.deepcopy(stored), field_manager="someone-else"),
        await objects.patch(rt, namespace="default", name="web", patch_type=PatchType.MERGE,
                            patch={"spec": {"replicas": 1}}, field_manager=MANAGER),
        await objects.patch(rt, namespace="default", name="web", patch_type=PatchType.STRATEGIC,
                            patch={"metadata": {"labels": {"app": "web"}}}, field_manager=MANAGER),
        await objects.patch(rt, namespace="default", name="web", patch_type=PatchType.JSON,
                            patch=[{"op": "replace", "path": "/spec/replicas", "value": 1}], field_manager=MANAGER),
        await objects.patch(rt, namespace="default", name="web", patch_type=PatchType.MERGE,
                            patch={"status": {"replicas": 1}}, subresource="status", field_manager="agent"),
        await objects.patch(rt, namespace="default", name="web", patch_type=PatchType.APPLY,
                            patch=deployment(), field_manager="ssa"),
    ]
    assert total(ledger) == written, ledger.snapshot()["journal"][written:]
    for answer in same:
        assert answer["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        assert answer["metadata"]["managedFields"] == stored["metadata"]["managedFields"]
    # A real change still writes.
    await objects.patch(rt, namespace="default", name="web", patch_type=PatchType.MERGE,
                        patch={"spec": {"replicas": 2}}, field_manager=MANAGER)
    assert total(ledger) == written + 1


async def test_watch_events_are_counted_per_watcher(ledgered: tuple[ObjectStore, WriteLedger]) -> None:
    objects, ledger = ledgered
    rt = objects.registry.require("apps/v1", "Deployment")
    created = await objects.create(rt, deployment())
    revision = created["metadata"]["resourceVersion"]

    async def watch(watcher: str, events: int) -> None:
        with acting_as(watcher):
            stream = objects.watch(rt, namespace="default", resource_version=revision)
            seen = 0
            async for _event in stream:
                seen += 1
                if seen == events:
                    break
            await stream.aclose()  # type: ignore[attr-defined]

    watchers = asyncio.gather(watch("agent", 2), watch("controller:informers", 2))
    await objects.update_status(rt, {**created, "status": {"replicas": 1}})
    await objects.delete(rt, namespace="default", name="web")
    await watchers
    assert ledger.events == {("deployments.apps", "agent"): 2, ("deployments.apps", "controller:informers"): 2}


#: A PropagationPolicy whose selector the apply leaves without a namespace, which the defaults put back.
BURST: dict[str, Any] = {
    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
    "metadata": {"name": "burst", "namespace": "default"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
             "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}},
}


async def _apply(objects: ObjectStore, body: dict[str, Any], manager: str) -> dict[str, Any]:
    rt = objects.registry.require(body["apiVersion"], body["kind"])
    return await objects.patch(rt, namespace="default", name=body["metadata"]["name"], patch_type=PatchType.APPLY,
                               patch=copy.deepcopy(body), field_manager=manager)


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("managedFields", None)
    return out


async def test_an_apply_that_defaulting_puts_back_writes_nothing_later(
    ledgered: tuple[ObjectStore, WriteLedger],
) -> None:
    """A PropagationPolicy applied with selectors that have no namespace: the merge changes the
    atomic list and the defaults (Karmada's webhook) put the namespace back, so the object is as
    stored but for the applier's managedFields time, which kube does not count as a change
    (IgnoreManagedFieldsTimestampsTransformer)."""
    objects, ledger = ledgered
    rt = objects.registry.require("policy.karmada.io/v1alpha1", "PropagationPolicy")
    policy = copy.deepcopy(BURST)
    first = await objects.patch(rt, namespace="default", name="burst", patch_type=PatchType.APPLY,
                                patch=copy.deepcopy(policy), field_manager="kubectl")
    assert first["spec"]["resourceSelectors"][0]["namespace"] == "default"
    written = total(ledger)
    CLOCK.now += timedelta(seconds=2)
    again = await objects.patch(rt, namespace="default", name="burst", patch_type=PatchType.APPLY,
                                patch=copy.deepcopy(policy), field_manager="kubectl")
    assert total(ledger) == written, ledger.snapshot()["journal"][written:]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]
    # A real change still writes, with the applier's new time.
    policy["spec"]["placement"]["replicaScheduling"]["replicaDivisionPreference"] = "Aggregated"
    changed = await objects.patch(rt, namespace="default", name="burst", patch_type=PatchType.APPLY,
                                  patch=copy.deepcopy(policy), field_manager="kubectl")
    assert total(ledger) == written + 1
    assert changed["metadata"]["managedFields"][0]["time"] != first["metadata"]["managedFields"][0]["time"]


async def test_a_no_op_apply_writes_nothing_when_another_manager_applied_since(
    ledgered: tuple[ObjectStore, WriteLedger],
) -> None:
    """Two appliers: the first applying again re-dates its entry (the defaults put back what its
    apply changed, as in the test above), which the sort by time moves behind the other's; the
    entries are the same but for the time, so nothing is written."""
    objects, ledger = ledgered
    other = {**BURST, "spec": {"priority": 5}}
    await _apply(objects, BURST, "kubectl")
    CLOCK.now += timedelta(seconds=2)
    second = await _apply(objects, other, "other")
    written = total(ledger)
    CLOCK.now += timedelta(seconds=2)
    again = await _apply(objects, BURST, "kubectl")
    assert total(ledger) == written, ledger.snapshot()["journal"][written:]
    assert again["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]
