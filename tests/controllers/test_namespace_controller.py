"""A terminating namespace's status says what is left in it and which finalizers hold it, as
kube's namespace controller writes it; writes to the namespace meanwhile do not remove it early;
content created as its deletion began is deleted on a later pass."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers import namespaces
from controlplane.controllers.namespaces import NamespaceController
from controlplane.hub import hub_registry

from .fleet import eventually

OK = {
    "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": (
        "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization",
    ),
}


@pytest.fixture
async def controller(objects: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[NamespaceController]:
    monkeypatch.setattr(namespaces, "RECHECK_SECONDS", 0.05)
    running = NamespaceController(objects)
    task = asyncio.create_task(running.run())
    await running.namespaces.synced.wait()
    yield running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def namespace_of(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require("v1", "Namespace"), name=name)
    except errors.NotFound:
        return None


async def conditions_of(objects: ObjectStore, name: str) -> dict[str, tuple[str, str, str]]:
    namespace = await namespace_of(objects, name) or {}
    listed = (namespace.get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in listed}


async def test_the_conditions_name_what_is_left_until_the_namespace_goes(
    objects: ObjectStore, controller: NamespaceController
) -> None:
    namespaces, configmaps = objects.registry.require("v1", "Namespace"), objects.registry.require("v1", "ConfigMap")
    await objects.create(namespaces, {"metadata": {"name": "team-a"}})
    for name, finalizers in (("one", ["example.com/hold"]), ("two", ["example.com/hold", "example.com/other"])):
        await objects.create(configmaps, {"metadata": {"name": name, "namespace": "team-a", "finalizers": finalizers}})
    assert not (await objects.delete(namespaces, name="team-a")).deleted

    # Written to meanwhile (its spec.finalizers asked away too), it stays: kube keeps them on update.
    namespace = await namespace_of(objects, "team-a")
    assert namespace is not None
    await objects.update(namespaces, {
        **namespace, "metadata": {**namespace["metadata"], "labels": {"x": "y"}}, "spec": {"finalizers": []},
    })
    namespace = await namespace_of(objects, "team-a")
    assert namespace is not None and namespace["spec"] == {"finalizers": ["kubernetes"]}

    held = {
        **OK,
        "NamespaceContentRemaining": ("True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 2 resource instances"),
        "NamespaceFinalizersRemaining": (
            "True", "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances, "
            "example.com/other in 1 resource instances",
        ),
    }

    async def shows(wanted: dict[str, tuple[str, str, str]]) -> bool:
        return await conditions_of(objects, "team-a") == wanted

    await eventually(lambda: shows(held), what="the conditions of the held namespace")
    written = (await namespace_of(objects, "team-a") or {})["status"]["conditions"]

    # A finalizer taken off an object that keeps another deletes nothing: the next count sees it.
    two = await objects.get(configmaps, namespace="team-a", name="two")
    await objects.update(configmaps, {**two, "metadata": {**two["metadata"], "finalizers": ["example.com/other"]}})
    fewer = {**held, "NamespaceFinalizersRemaining": (
        "True", "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances, "
        "example.com/other in 1 resource instances",
    )}
    await eventually(lambda: shows(fewer), what="the finalizer count after one is taken off")
    rewritten = (await namespace_of(objects, "team-a") or {})["status"]["conditions"]
    # Still True: the transition time stays the one first written.
    assert [c["lastTransitionTime"] for c in rewritten] == [c["lastTransitionTime"] for c in written]

    for name in ("one", "two"):
        held_map = await objects.get(configmaps, namespace="team-a", name=name)
        await objects.update(configmaps, {**held_map, "metadata": {**held_map["metadata"], "finalizers": []}})
    await eventually(lambda: _gone(objects, "team-a"), what="the namespace removed")


async def test_content_created_as_the_deletion_began_is_deleted_on_a_later_pass(
    objects: ObjectStore, controller: NamespaceController
) -> None:
    namespaces, configmaps = objects.registry.require("v1", "Namespace"), objects.registry.require("v1", "ConfigMap")
    await objects.create(namespaces, {"metadata": {"name": "team-b"}})
    # A second writer over the same store (the leader's controllers) holds the namespace as
    # active in its cache, and creates in it after the deletion took the content.
    other = ObjectStore(objects.store, hub_registry(), namespace_cache_seconds=60.0)
    await other.create(configmaps, {"metadata": {"name": "held", "namespace": "team-b", "finalizers": ["example.com/hold"]}})
    assert not (await objects.delete(namespaces, name="team-b")).deleted
    await other.create(configmaps, {"metadata": {"name": "late", "namespace": "team-b"}})
    held = await objects.get(configmaps, namespace="team-b", name="held")
    await objects.update(configmaps, {**held, "metadata": {**held["metadata"], "finalizers": []}})
    await eventually(lambda: _gone(objects, "team-b"), what="the late object deleted and the namespace removed")
    assert (await objects.list(configmaps, namespace="team-b")).items == []


async def _gone(objects: ObjectStore, name: str) -> bool:
    return await namespace_of(objects, name) is None


async def test_content_is_counted_over_pages(objects: ObjectStore, controller: NamespaceController) -> None:
    """Each kind is read a page at a time (a namespace of many objects is never held whole); the
    counts add up over the pages."""
    controller.page_size = 2
    namespaces, configmaps = objects.registry.require("v1", "Namespace"), objects.registry.require("v1", "ConfigMap")
    await objects.create(namespaces, {"metadata": {"name": "team-c"}})
    for n in range(5):
        await objects.create(configmaps, {"metadata": {"name": f"c{n}", "namespace": "team-c", "finalizers": ["example.com/hold"]}})
    assert not (await objects.delete(namespaces, name="team-c")).deleted

    async def counted() -> bool:
        conditions = await conditions_of(objects, "team-c")
        return conditions.get("NamespaceContentRemaining", ("", "", ""))[2] == (
            "Some resources are remaining: configmaps. has 5 resource instances"
        ) and conditions.get("NamespaceFinalizersRemaining", ("", "", ""))[2] == (
            "Some content in the namespace has finalizers remaining: example.com/hold in 5 resource instances"
        )

    await eventually(counted, what="five configmaps counted over three pages")


async def test_the_pods_go_first_and_the_rest_once_no_pod_is_left(
    objects: ObjectStore, controller: NamespaceController
) -> None:
    """kube's OrderedNamespaceDeletion (on and locked since 1.34): a Pod a finalizer holds keeps
    every other object of its namespace undeleted; once it goes, the rest is deleted."""
    namespaces, configmaps = objects.registry.require("v1", "Namespace"), objects.registry.require("v1", "ConfigMap")
    pods = objects.registry.require("v1", "Pod")
    await objects.create(namespaces, {"metadata": {"name": "team-d"}})
    await objects.create(pods, {
        "metadata": {"name": "worker", "namespace": "team-d", "finalizers": ["example.com/hold"]},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]},
    })
    await objects.create(configmaps, {"metadata": {"name": "settings", "namespace": "team-d"}})
    assert not (await objects.delete(namespaces, name="team-d")).deleted

    async def pod_marked() -> bool:
        return bool((await objects.get(pods, namespace="team-d", name="worker"))["metadata"].get("deletionTimestamp"))

    await eventually(pod_marked, what="the pod deleted first")
    await eventually(lambda: conditions_of(objects, "team-d"), what="a pass done")
    assert "deletionTimestamp" not in (await objects.get(configmaps, namespace="team-d", name="settings"))["metadata"]
    worker = await objects.get(pods, namespace="team-d", name="worker")
    await objects.update(pods, {**worker, "metadata": {**worker["metadata"], "finalizers": []}})
    await eventually(lambda: _gone(objects, "team-d"), what="the configmap deleted and the namespace removed")
