"""The hub's garbage collector: dependents (ownerReferences) follow their owners' deletion as
kube's do — Background, Foreground (blocking dependents first), Orphan — for built-in and
custom kinds, with dangling and invalid references handled as kube handles them, and from
whatever a previous leader left when a manager starts."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.garbagecollecting import AbsentOwners, OwnerCoordinates
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from controlplane.storage.interface import KeyValue
from controlplane.storage.wrapping import WrappedStore

from .conftest import FAST
from .fleet import eventually

pytestmark = pytest.mark.waiting

NS = "default"


def _cm(objects: ObjectStore) -> Any:
    return objects.registry.require("v1", "ConfigMap")


def owner_ref(owner: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"]}
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


async def configmap(objects: ObjectStore, name: str, *, owners: list[dict[str, Any]] = (),  # type: ignore[assignment]
                    finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if owners:
        meta["ownerReferences"] = owners
    if finalizers:
        meta["finalizers"] = finalizers
    created = await objects.create(_cm(objects), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    return {"apiVersion": "v1", "kind": "ConfigMap", **created}


async def get(objects: ObjectStore, name: str, rt: Any = None, namespace: str | None = NS) -> dict[str, Any] | None:
    try:
        return await objects.get(rt or _cm(objects), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def gone(objects: ObjectStore, name: str, rt: Any = None) -> bool:
    return await get(objects, name, rt) is None


async def test_background_deletes_the_dependents(objects: ObjectStore, manager: ControllerManager) -> None:
    owner = await configmap(objects, "owner")
    await configmap(objects, "child", owners=[owner_ref(owner)])
    await configmap(objects, "blocking-child", owners=[owner_ref(owner, block=True)])
    assert (await objects.delete(_cm(objects), namespace=NS, name="owner")).deleted
    await eventually(lambda: gone(objects, "child"), what="the dependent to go")
    await eventually(lambda: gone(objects, "blocking-child"), what="the blocking dependent to go")


async def test_a_dangling_reference_by_uid(objects: ObjectStore, manager: ControllerManager) -> None:
    """An owner of that name with another uid is not the owner: the only-dangling dependent goes;
    one that keeps a live owner only loses the dangling reference."""
    owner = await configmap(objects, "owner")
    stale = {**owner_ref(owner), "uid": "0b7a5e6c-0000-4000-8000-000000000000"}
    await configmap(objects, "orphaned", owners=[stale])
    await configmap(objects, "kept", owners=[stale, owner_ref(owner)])
    await eventually(lambda: gone(objects, "orphaned"), what="the dependent of a uid that is not there")

    async def trimmed() -> bool:
        kept = await get(objects, "kept")
        return kept is not None and kept["metadata"].get("ownerReferences") == [owner_ref(owner)]

    await eventually(trimmed, what="the dangling reference removed")


async def test_foreground_waits_for_blocking_dependents(objects: ObjectStore, manager: ControllerManager) -> None:
    owner = await configmap(objects, "owner")
    # The dependent holds a finalizer of its own, so it stays (being deleted) until that goes.
    await configmap(objects, "child", owners=[owner_ref(owner, block=True)], finalizers=["example.com/hold"])
    await configmap(objects, "loose-child", owners=[owner_ref(owner)])
    result = await objects.delete(_cm(objects), namespace=NS, name="owner", propagation_policy="Foreground")
    assert not result.deleted

    async def child_deleting() -> dict[str, Any] | None:
        child = await get(objects, "child")
        return child if child and child["metadata"].get("deletionTimestamp") else None

    await eventually(child_deleting, what="the blocking dependent deleted")
    await eventually(lambda: gone(objects, "loose-child"), what="the other dependent deleted")
    await manager.wait_idle()
    held = await get(objects, "owner")
    assert held is not None, "the owner went before its blocking dependent"
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["foregroundDeletion"]

    child = await child_deleting()
    assert child is not None
    await objects.update(_cm(objects), {**child, "metadata": {**child["metadata"], "finalizers": []}})
    await eventually(lambda: gone(objects, "owner"), what="the owner to go once its dependent is gone")


async def test_orphan_keeps_the_dependents_without_the_owner(objects: ObjectStore, manager: ControllerManager) -> None:
    owner = await configmap(objects, "owner")
    other = await configmap(objects, "other")
    await configmap(objects, "child", owners=[owner_ref(owner, block=True), owner_ref(other)])
    await objects.delete(_cm(objects), namespace=NS, name="owner", propagation_policy="Orphan")
    await eventually(lambda: gone(objects, "owner"), what="the owner to go")
    child = await get(objects, "child")
    assert child is not None
    assert child["metadata"]["ownerReferences"] == [owner_ref(other)]
    await manager.wait_idle()
    assert await get(objects, "child") is not None


async def test_a_cluster_scoped_owner_of_a_namespaced_dependent(objects: ObjectStore, manager: ControllerManager) -> None:
    roles = objects.registry.require("rbac.authorization.k8s.io/v1", "ClusterRole")
    role = await objects.create(roles, {"metadata": {"name": "owner-role"}, "rules": []})
    await configmap(objects, "child", owners=[owner_ref({"apiVersion": "rbac.authorization.k8s.io/v1",
                                                        "kind": "ClusterRole", **role})])
    await manager.wait_idle()
    assert await get(objects, "child") is not None
    await objects.delete(roles, name="owner-role")
    await eventually(lambda: gone(objects, "child"), what="the dependent of the deleted ClusterRole to go")


async def test_a_cluster_scoped_dependent_of_a_namespaced_owner(objects: ObjectStore, manager: ControllerManager) -> None:
    owner = await configmap(objects, "owner")
    roles = objects.registry.require("rbac.authorization.k8s.io/v1", "ClusterRole")
    ref = owner_ref(owner)
    await objects.create(roles, {"metadata": {"name": "reader", "ownerReferences": [ref]}, "rules": []})
    events = objects.registry.require("v1", "Event")

    async def warned() -> list[dict[str, Any]]:
        listed = await objects.list(events, namespace=NS)
        return [e for e in listed.items if e.get("reason") == "OwnerRefInvalidNamespace"]

    found = await eventually(warned, what="the OwnerRefInvalidNamespace Event")
    assert found[0]["type"] == "Warning"
    assert found[0]["involvedObject"]["name"] == "reader"
    assert found[0]["message"] == (
        f'ownerRef [v1/ConfigMap, namespace: , name: owner, uid: {ref["uid"]}] does not exist in namespace ""'
    )
    await objects.delete(_cm(objects), namespace=NS, name="owner")
    await manager.wait_idle()
    assert await get(objects, "reader", roles, None) is not None


async def test_a_namespaced_dependent_of_an_owner_in_another_namespace(
    objects: ObjectStore, manager: ControllerManager
) -> None:
    """Owners live in their dependent's namespace: a reference whose uid is a ConfigMap of
    another namespace is dangling (the dependent is deleted) and, as kube's graph sees the uid
    elsewhere, the dependent gets the Warning ``OwnerRefInvalidNamespace``."""
    namespaces = objects.registry.require("v1", "Namespace")
    await objects.create(namespaces, {"metadata": {"name": "elsewhere"}})
    owner = await objects.create(_cm(objects), {"metadata": {"name": "owner", "namespace": "elsewhere"}})
    ref = owner_ref({"apiVersion": "v1", "kind": "ConfigMap", **owner})
    await configmap(objects, "stray", owners=[ref])
    events = objects.registry.require("v1", "Event")

    async def warned() -> list[dict[str, Any]]:
        listed = await objects.list(events, namespace=NS)
        return [e for e in listed.items if e.get("reason") == "OwnerRefInvalidNamespace"
                and e["involvedObject"]["name"] == "stray"]

    found = await eventually(warned, what="the OwnerRefInvalidNamespace Event")
    assert found[0]["type"] == "Warning"
    assert found[0]["message"] == (
        f'ownerRef [v1/ConfigMap, namespace: {NS}, name: owner, uid: {ref["uid"]}] does not exist in namespace "{NS}"'
    )
    await eventually(lambda: gone(objects, "stray"), what="the dependent of no owner in its namespace to go")
    assert await get(objects, "owner", namespace="elsewhere") is not None


async def test_dependents_left_by_a_previous_leader(objects: ObjectStore) -> None:
    """Restart-safe: what happened while no collector ran is found from the store."""
    owner = await configmap(objects, "owner")
    foreground = await configmap(objects, "foreground-owner")
    await configmap(objects, "child", owners=[owner_ref(owner)])
    await configmap(objects, "held", owners=[owner_ref(foreground, block=True)])
    await objects.delete(_cm(objects), namespace=NS, name="owner")
    await objects.delete(_cm(objects), namespace=NS, name="foreground-owner", propagation_policy="Foreground")
    assert await get(objects, "child") is not None and await get(objects, "foreground-owner") is not None
    async with ControllerManager(objects, settings=FAST):
        await eventually(lambda: gone(objects, "child"), what="the dependent of a deleted owner to go")
        await eventually(lambda: gone(objects, "held"), what="the foreground owner's dependent to go")
        await eventually(lambda: gone(objects, "foreground-owner"), what="the foreground owner to go")


GROUP = "ml.example.com"


def _crd() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"notebooks.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "notebooks", "kind": "Notebook"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}]},
    }


@pytest.mark.parametrize("owner_is_custom", [True, False])
async def test_custom_resources_own_and_are_owned(
    objects: ObjectStore, crds: CrdController, owner_is_custom: bool
) -> None:
    """A CRD established while the collector runs is watched: its objects own and are owned."""
    async with ControllerManager(objects, settings=FAST):
        await objects.create(objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), _crd())
        await eventually(lambda: _served(objects), what="Notebook served")
        notebooks = objects.registry.require(f"{GROUP}/v1", "Notebook")
        if owner_is_custom:
            notebook = await objects.create(notebooks, {"apiVersion": f"{GROUP}/v1", "kind": "Notebook",
                                                        "metadata": {"name": "nb", "namespace": NS}})
            await configmap(objects, "child", owners=[owner_ref(notebook)])
            await objects.delete(notebooks, namespace=NS, name="nb", propagation_policy="Foreground")
            await eventually(lambda: gone(objects, "child"), what="the ConfigMap of the deleted Notebook to go")
            await eventually(lambda: gone(objects, "nb", notebooks), what="the Notebook to go")
        else:
            owner = await configmap(objects, "owner")
            await objects.create(notebooks, {"apiVersion": f"{GROUP}/v1", "kind": "Notebook",
                                             "metadata": {"name": "nb", "namespace": NS,
                                                          "ownerReferences": [owner_ref(owner)]}})
            await objects.delete(_cm(objects), namespace=NS, name="owner")
            await eventually(lambda: gone(objects, "nb", notebooks), what="the Notebook of the deleted ConfigMap to go")


async def _served(objects: ObjectStore) -> bool:
    return objects.registry.for_kind(f"{GROUP}/v1", "Notebook") is not None


async def test_two_objects_that_block_each_other_in_the_foreground(objects: ObjectStore, manager: ControllerManager) -> None:
    """A cycle of blocking references: as kube, the dependent that finds its own dependent waiting
    in the foreground stops blocking, and both go."""
    first = await configmap(objects, "first")
    second = await configmap(objects, "second", owners=[owner_ref(first, block=True)])
    await objects.update(_cm(objects), {**first, "metadata": {**first["metadata"],
                                                              "ownerReferences": [owner_ref(second, block=True)]}})
    await manager.wait_idle()  # the collector has seen both references
    await objects.delete(_cm(objects), namespace=NS, name="first", propagation_policy="Foreground")
    await eventually(lambda: gone(objects, "second"), what="the second object to go")
    await eventually(lambda: gone(objects, "first"), what="the first object to go")


class CountingStore(WrappedStore):
    """The hub's memory store, counting the reads of each key (what etcd would answer)."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.gets: Counter[str] = Counter()

    async def get(self, key: str) -> KeyValue:
        self.gets[key] += 1
        return await super().get(key)


@pytest.fixture
async def counted() -> AsyncIterator[tuple[ObjectStore, CountingStore]]:
    async with MemoryStore() as memory:
        store = CountingStore(memory)
        objs = ObjectStore(store, hub_registry(), garbage_collection=True)
        await objs.bootstrap()
        yield objs, store


async def test_the_dependents_of_one_deleted_owner_cost_one_lookup(counted: tuple[ObjectStore, CountingStore]) -> None:
    """kube's absentOwnerCache: the first dependent checked finds the owner gone; the others are
    answered from the cache (one read per worker at most, as the first checks may run together)."""
    objects, store = counted
    key = _cm(objects).key(namespace=NS, name="owner")
    async with ControllerManager(objects, settings=FAST) as manager:
        # What deleting a ConfigMap reads of its own key, without the collector's looks.
        await configmap(objects, "spare")
        spare = _cm(objects).key(namespace=NS, name="spare")
        before = store.gets[spare]
        await objects.delete(_cm(objects), namespace=NS, name="spare")
        delete_reads = store.gets[spare] - before

        owner = await configmap(objects, "owner")
        for index in range(20):
            await configmap(objects, f"child-{index}", owners=[owner_ref(owner)])
        await manager.wait_idle()  # each child was checked once, its owner alive
        before = store.gets[key]
        await objects.delete(_cm(objects), namespace=NS, name="owner")
        for index in range(20):
            await eventually(functools.partial(gone, objects, f"child-{index}"), what=f"child-{index} to go")
        await manager.wait_idle()
        assert store.gets[key] - before - delete_reads <= FAST.workers


async def test_an_owner_created_again_is_looked_up_afresh(counted: tuple[ObjectStore, CountingStore]) -> None:
    """The cache knows the deleted owner's uid, not its name: the new owner of that name keeps its
    dependents, and a reference to the old uid is still dangling without another read."""
    objects, store = counted
    key = _cm(objects).key(namespace=NS, name="owner")
    async with ControllerManager(objects, settings=FAST) as manager:
        first = await configmap(objects, "owner")
        await configmap(objects, "child", owners=[owner_ref(first)])
        await manager.wait_idle()
        await objects.delete(_cm(objects), namespace=NS, name="owner")
        await eventually(lambda: gone(objects, "child"), what="the first owner's dependent to go")

        second = await configmap(objects, "owner")
        assert second["metadata"]["uid"] != first["metadata"]["uid"]
        await configmap(objects, "new-child", owners=[owner_ref(second)])
        await manager.wait_idle()
        assert await get(objects, "new-child") is not None
        assert await get(objects, "owner") is not None

        before = store.gets[key]
        await configmap(objects, "stale-child", owners=[owner_ref(first)])
        await eventually(lambda: gone(objects, "stale-child"), what="the dependent of the first owner's uid to go")
        await manager.wait_idle()
        assert store.gets[key] == before
        assert await get(objects, "new-child") is not None


def test_the_absent_owner_cache_is_bounded_and_keeps_what_it_answers() -> None:
    owners = [OwnerCoordinates("v1", "ConfigMap", NS, f"owner-{i}", f"uid-{i}") for i in range(3)]
    absent = AbsentOwners(size=2)
    absent.add(owners[0])
    absent.add(owners[1])
    assert absent.has(owners[0])  # now the most recently used
    absent.add(owners[2])
    assert len(absent) == 2
    assert (absent.has(owners[0]), absent.has(owners[1]), absent.has(owners[2])) == (True, False, True)
    assert not absent.has(OwnerCoordinates("v1", "ConfigMap", NS, "owner-0", "another-uid"))
