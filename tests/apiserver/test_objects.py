"""The object layer's semantics, run against both stores (memory and real etcd)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.kinds import gpu_workload_resources
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.objects import ObjectEvent, ObjectStore, Preconditions, WatchEventType
from controlplane.apiserver.openapi.documents import OpenApiDocuments
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.resources import Registry
from controlplane.apiserver.validation import FieldValidation
from controlplane.storage import MemoryStore
from tests.controllers.fleet import eventually, namespace_controller, namespace_gone

from .kinds import GADGET, WIDGET, deployment, widget


def _types(objects: ObjectStore) -> tuple[Any, Any, Any]:
    reg = objects.registry
    return reg.require("apps/v1", "Deployment"), reg.require("v1", "Namespace"), reg.require("v1", "ConfigMap")


async def test_create_sets_server_fields_and_get_reads_them(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, {**deployment("web"), "status": {"replicas": 9}})
    meta = created["metadata"]
    assert meta["generation"] == 1
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0
    assert created["status"] == {}  # the status written is dropped: kube starts every Deployment at {}
    assert await objects_on.get(deploy, namespace="default", name="web") == created


async def test_create_twice_is_already_exists(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web"))
    with pytest.raises(errors.AlreadyExists) as caught:
        await objects_on.create(deploy, deployment("web"))
    assert caught.value.to_status()["message"] == 'deployments.apps "web" already exists'
    assert caught.value.code == 409


async def test_create_needs_its_namespace(objects_on: ObjectStore) -> None:
    deploy, namespaces, _ = _types(objects_on)
    with pytest.raises(errors.NotFound) as caught:
        await objects_on.create(deploy, deployment("web", namespace="team-a"))
    assert caught.value.message == 'namespaces "team-a" not found'
    await objects_on.create(namespaces, {"metadata": {"name": "team-a"}})
    created = await objects_on.create(deploy, deployment("web", namespace="team-a"))
    assert created["metadata"]["namespace"] == "team-a"
    listed = await objects_on.list(namespaces)
    assert {"default", "kube-system", "kube-public", "team-a"} <= {ns["metadata"]["name"] for ns in listed.items}


async def test_generate_name(objects_on: ObjectStore) -> None:
    _, _, configmaps = _types(objects_on)
    first = await objects_on.create(configmaps, {"metadata": {"generateName": "cfg-", "namespace": "default"}})
    second = await objects_on.create(configmaps, {"metadata": {"generateName": "cfg-", "namespace": "default"}})
    assert first["metadata"]["name"].startswith("cfg-") and len(first["metadata"]["name"]) == 9
    assert first["metadata"]["name"] != second["metadata"]["name"]


async def test_update_is_compare_and_swap(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("web"))
    changed = {**created, "spec": {**created["spec"], "replicas": 3}}
    updated = await objects_on.update(deploy, changed)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(errors.Conflict) as caught:
        await objects_on.update(deploy, changed)  # stale resourceVersion
    assert caught.value.message == (
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    # Without a resourceVersion the update is unconditional.
    unconditional = {**changed, "metadata": {k: v for k, v in changed["metadata"].items() if k != "resourceVersion"}}
    unconditional["spec"] = {**changed["spec"], "replicas": 4}
    assert (await objects_on.update(deploy, unconditional))["spec"]["replicas"] == 4


async def test_status_subresource_and_generation(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("web"))
    # The main resource ignores .status ...
    with_status = {**created, "status": {"readyReplicas": 1}}
    same = await objects_on.update(deploy, with_status)
    assert same["status"] == {}
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # no-op: nothing written
    # ... the status subresource writes only .status and keeps the generation.
    status = {"replicas": 1, "readyReplicas": 1}  # kube refuses ready replicas beyond status.replicas
    status_only = {**created, "spec": {"replicas": 100}, "status": status}
    after = await objects_on.update_status(deploy, status_only)
    assert after["status"] == status
    assert after["spec"]["replicas"] == 1
    assert after["metadata"]["generation"] == 1
    # Labels change the object but not the generation.
    relabeled = {**after, "metadata": {**after["metadata"], "labels": {"team": "a"}}}
    relabeled_after = await objects_on.update(deploy, relabeled)
    assert relabeled_after["metadata"]["generation"] == 1
    assert relabeled_after["status"] == status


async def test_a_deployments_status_write_takes_its_annotations_as_kubes_does(objects_on: ObjectStore) -> None:
    """kube's deployment status strategy resets only the spec and labels: its controller writes
    deployment.kubernetes.io/revision with UpdateStatus, and the generation stays."""
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("web", labels={"app": "web"}))
    meta = {**created["metadata"], "annotations": {"deployment.kubernetes.io/revision": "1"}, "labels": {"x": "y"}}
    after = await objects_on.update_status(deploy, {**created, "metadata": meta, "status": {"replicas": 1}})
    assert after["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1"}
    assert after["metadata"]["labels"] == {"app": "web"}  # the stored labels
    assert after["metadata"]["generation"] == 1
    cleared = await objects_on.update_status(deploy, {**after, "metadata": {**after["metadata"], "annotations": {}}})
    assert "annotations" not in cleared["metadata"]
    # Another kind's status write keeps the stored metadata.
    statefulsets = objects_on.registry.require("apps/v1", "StatefulSet")
    sts = deployment("db")
    sts["kind"], sts["spec"]["serviceName"] = "StatefulSet", "db"
    stored = await objects_on.create(statefulsets, sts)
    kept = await objects_on.update_status(
        statefulsets, {**stored, "metadata": {**stored["metadata"], "annotations": {"a": "b"}}, "status": {"replicas": 0}}
    )
    assert "annotations" not in kept["metadata"]


async def test_finalizers_hold_deletion_until_removed(objects_on: ObjectStore) -> None:
    _, _, configmaps = _types(objects_on)
    await objects_on.create(
        configmaps, {"metadata": {"name": "c", "namespace": "default", "finalizers": ["gpufed.io/test"]}}
    )
    result = await objects_on.delete(configmaps, namespace="default", name="c")
    assert not result.deleted
    held = await objects_on.get(configmaps, namespace="default", name="c")
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(errors.Invalid, match="no new finalizers"):
        await objects_on.update(
            configmaps, {**held, "metadata": {**held["metadata"], "finalizers": ["gpufed.io/test", "x.io/y"]}}
        )
    released = {**held, "metadata": {**held["metadata"], "finalizers": []}}
    await objects_on.update(configmaps, released)
    with pytest.raises(errors.NotFound):
        await objects_on.get(configmaps, namespace="default", name="c")


async def test_delete_preconditions(objects_on: ObjectStore) -> None:
    _, _, configmaps = _types(objects_on)
    created = await objects_on.create(configmaps, {"metadata": {"name": "c", "namespace": "default"}})
    with pytest.raises(errors.Conflict, match="Precondition failed: UID in precondition: nope"):
        await objects_on.delete(configmaps, namespace="default", name="c", preconditions=Preconditions(uid="nope"))
    result = await objects_on.delete(
        configmaps, namespace="default", name="c", preconditions=Preconditions(uid=created["metadata"]["uid"])
    )
    assert result.deleted
    with pytest.raises(errors.NotFound, match='configmaps "c" not found'):
        await objects_on.delete(configmaps, namespace="default", name="c")


async def test_a_uid_in_an_update_or_a_patch_names_the_object_it_was_made_for(objects_on: ObjectStore) -> None:
    """kube's update takes the body's uid as a precondition (409), and a patch that sets another uid
    is refused by ``ValidateObjectMetaUpdate`` (422): neither lands on an object re-created under
    the name. Without a uid both write as before."""
    _, _, configmaps = _types(objects_on)
    first = await objects_on.create(configmaps, {"metadata": {"name": "c", "namespace": "default"}})
    await objects_on.delete(configmaps, namespace="default", name="c")
    second = await objects_on.create(configmaps, {"metadata": {"name": "c", "namespace": "default"}})
    old_uid, uid = first["metadata"]["uid"], second["metadata"]["uid"]
    stale = {"metadata": {"name": "c", "namespace": "default", "uid": old_uid, "labels": {"a": "b"}}}
    with pytest.raises(errors.Conflict) as conflict:
        await objects_on.update(configmaps, stale)
    assert conflict.value.message == (
        f'Operation cannot be fulfilled on configmaps "c": Precondition failed: '
        f"UID in precondition: {old_uid}, UID in object meta: {uid}"
    )
    with pytest.raises(errors.Invalid) as invalid:
        await objects_on.patch(
            configmaps, namespace="default", name="c", patch_type=PatchType.MERGE,
            patch={"metadata": {"uid": old_uid, "labels": {"a": "b"}}},
        )
    assert invalid.value.message == f'ConfigMap "c" is invalid: metadata.uid: Invalid value: "{old_uid}": field is immutable'
    current = await objects_on.get(configmaps, namespace="default", name="c")
    assert "labels" not in current["metadata"], "nothing written"
    patched = await objects_on.patch(
        configmaps, namespace="default", name="c", patch_type=PatchType.MERGE,
        patch={"metadata": {"uid": uid, "labels": {"a": "b"}}},
    )
    assert patched["metadata"]["labels"] == {"a": "b"}
    updated = await objects_on.update(configmaps, {"metadata": {"name": "c", "namespace": "default", "uid": uid}})
    assert "labels" not in updated["metadata"]
    anonymous = await objects_on.update(configmaps, {"metadata": {"name": "c", "namespace": "default", "labels": {"x": "y"}}})
    assert anonymous["metadata"]["uid"] == uid


async def test_deleting_a_namespace_deletes_its_objects(objects_on: ObjectStore) -> None:
    deploy, namespaces, configmaps = _types(objects_on)
    await objects_on.create(namespaces, {"metadata": {"name": "team-a"}})
    await objects_on.create(deploy, deployment("web", namespace="team-a"))
    await objects_on.create(
        configmaps, {"metadata": {"name": "held", "namespace": "team-a", "finalizers": ["gpufed.io/test"]}}
    )
    result = await objects_on.delete(namespaces, name="team-a")
    # kube's answer: the namespace marked, its content the namespace controller's.
    assert not result.deleted and result.object["status"]["phase"] == "Terminating"
    assert len((await objects_on.list(deploy, namespace="team-a")).items) == 1
    with pytest.raises(errors.Forbidden, match="because it is being terminated") as refused:
        await objects_on.create(configmaps, {"metadata": {"name": "new", "namespace": "team-a"}})
    # kube's NamespaceLifecycle admission names the cause, which controllers read to stop retrying.
    assert refused.value.to_status()["details"]["causes"] == [
        {"reason": "NamespaceTerminating", "message": "namespace team-a is being terminated", "field": "metadata.namespace"}
    ]
    async with namespace_controller(objects_on):  # started late, as a new leader: it finishes the deletion
        await eventually(lambda: deployments_gone(objects_on), what="the deployment deleted")
        # The finalizer on "held" keeps the namespace terminating until it is taken off.
        held = await objects_on.get(configmaps, namespace="team-a", name="held")
        assert held["metadata"]["deletionTimestamp"]
        assert (await objects_on.get(namespaces, name="team-a"))["status"]["phase"] == "Terminating"
        await objects_on.update(configmaps, {**held, "metadata": {**held["metadata"], "finalizers": []}})
        await namespace_gone(objects_on, "team-a")
    with pytest.raises(errors.Forbidden, match="may not be deleted"):
        await objects_on.delete(namespaces, name="default")


async def deployments_gone(objects: ObjectStore) -> bool:
    return not (await objects.list(_types(objects)[0], namespace="team-a")).items


async def test_the_namespaces_every_cluster_has(objects_on: ObjectStore) -> None:
    """kube-apiserver's four namespaces exist; NamespaceLifecycle refuses to delete three of them,
    with kube's 403, and lets ``kube-node-lease`` go (kube creates it again)."""
    _, namespaces, _ = _types(objects_on)
    listed = await objects_on.list(namespaces)
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= {ns["metadata"]["name"] for ns in listed.items}
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(errors.Forbidden) as caught:
            await objects_on.delete(namespaces, name=name)
        status = caught.value.to_status()
        assert (status["code"], status["reason"]) == (403, "Forbidden")
        assert status["message"] == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
        assert (await objects_on.get(namespaces, name=name))["metadata"].get("deletionTimestamp") is None
    assert not (await objects_on.delete(namespaces, name="kube-node-lease")).deleted  # Terminating
    async with namespace_controller(objects_on):
        await namespace_gone(objects_on, "kube-node-lease")


async def test_list_selectors_and_pagination(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    for index in range(7):
        await objects_on.create(deploy, deployment(f"d{index}", labels={"parity": "even" if index % 2 == 0 else "odd"}))
    even = await objects_on.list(deploy, namespace="default", label_selector="parity=even")
    assert [d["metadata"]["name"] for d in even.items] == ["d0", "d2", "d4", "d6"]
    named = await objects_on.list(deploy, field_selector="metadata.name=d3")
    assert [d["metadata"]["name"] for d in named.items] == ["d3"]

    pages, token, remaining = [], None, []
    while True:
        page = await objects_on.list(deploy, namespace="default", limit=3, continue_token=token)
        pages.append([d["metadata"]["name"] for d in page.items])
        remaining.append(page.remaining_item_count)
        token = page.continue_token
        if not token:
            break
    assert pages == [["d0", "d1", "d2"], ["d3", "d4", "d5"], ["d6"]]
    assert remaining == [4, 1, None]  # kube's remainingItemCount; none on the last page

    filtered_pages, token = [], None
    while True:
        page = await objects_on.list(deploy, label_selector="parity=odd", limit=2, continue_token=token)
        filtered_pages.append([d["metadata"]["name"] for d in page.items])
        assert page.remaining_item_count is None  # kube's store cannot count what a selector keeps
        token = page.continue_token
        if not token:
            break
    assert [name for page in filtered_pages for name in page] == ["d1", "d3", "d5"]
    assert all(len(page) <= 2 for page in filtered_pages)


async def test_continue_token_expires_after_compaction(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    for index in range(3):
        await objects_on.create(deploy, deployment(f"d{index}"))
    page = await objects_on.list(deploy, limit=1)
    await objects_on.create(deploy, deployment("later"))
    await objects_on.store.compact(await objects_on.store.current_revision())
    with pytest.raises(errors.Gone) as caught:
        await objects_on.list(deploy, limit=1, continue_token=page.continue_token)
    assert caught.value.code == 410
    with pytest.raises(errors.BadRequest, match="continue key is not valid"):
        await objects_on.list(deploy, limit=1, continue_token="not-a-token")


async def _collect(events: AsyncIterator[ObjectEvent], count: int, *, seconds: float = 10.0) -> list[ObjectEvent]:
    out: list[ObjectEvent] = []
    async with asyncio.timeout(seconds):
        async for event in events:
            out.append(event)
            if len(out) == count:
                break
    return out


async def test_watch_from_now_lists_then_follows(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    first = await objects_on.create(deploy, deployment("a"))
    events = objects_on.watch(deploy, namespace="default")
    try:
        initial = await _collect(events, 1)
        await objects_on.update(deploy, {**first, "spec": {**first["spec"], "replicas": 2}})
        await objects_on.delete(deploy, namespace="default", name="a")
        await objects_on.create(deploy, deployment("b"))
        following = await _collect(events, 3)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    assert [(e.type, e.object["metadata"]["name"]) for e in initial + following] == [
        (WatchEventType.ADDED, "a"), (WatchEventType.MODIFIED, "a"), (WatchEventType.DELETED, "a"),
        (WatchEventType.ADDED, "b"),
    ]
    assert following[0].object["spec"]["replicas"] == 2
    assert following[0].object["metadata"]["resourceVersion"] == str(following[0].revision)


async def test_watch_from_revision_with_selector_sends_leaving_objects_as_deleted(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("a", labels={"tier": "gpu"}))
    await objects_on.create(deploy, deployment("other", labels={"tier": "cpu"}))
    start = created["metadata"]["resourceVersion"]
    events = objects_on.watch(deploy, label_selector="tier=gpu", resource_version=start)
    try:
        current = await objects_on.get(deploy, namespace="default", name="a")
        moved = {**current, "metadata": {**current["metadata"], "labels": {"tier": "cpu"}}}
        moved = await objects_on.update(deploy, moved)
        back = {**moved, "metadata": {**moved["metadata"], "labels": {"tier": "gpu"}}}
        await objects_on.update(deploy, back)
        got = await _collect(events, 2)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    # The leaving object as the watch last saw it, at the change's resourceVersion (kube's).
    assert [(e.type, e.object["metadata"]["labels"]["tier"], e.object["metadata"]["resourceVersion"]) for e in got[:1]] == [
        (WatchEventType.DELETED, "gpu", moved["metadata"]["resourceVersion"]),
    ]
    assert (got[1].type, got[1].object["metadata"]["labels"]["tier"]) == (WatchEventType.ADDED, "gpu")


async def test_watch_bookmarks_and_gone(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("a"))
    events = objects_on.watch(deploy, resource_version=created["metadata"]["resourceVersion"], bookmark_interval=0.05)
    later = await objects_on.create(deploy, deployment("b"))
    try:
        added, bookmark = await _collect(events, 2)
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    assert added.type is WatchEventType.ADDED
    assert bookmark.type is WatchEventType.BOOKMARK
    assert bookmark.object["metadata"]["resourceVersion"] == later["metadata"]["resourceVersion"]
    assert bookmark.object["kind"] == "Deployment"

    for index in range(3):
        await objects_on.create(deploy, deployment(f"x{index}"))
    await objects_on.store.compact(await objects_on.store.current_revision())
    stale = objects_on.watch(deploy, resource_version=created["metadata"]["resourceVersion"])
    with pytest.raises(errors.Gone) as caught:
        await _collect(stale, 1)
    assert caught.value.code == 410


async def test_typed_kind_validation_modes(objects_on: ObjectStore) -> None:
    obj = widget("w", size=2, foo=1)
    with pytest.raises(errors.BadRequest, match=r'strict decoding error: unknown field "spec\.foo"'):
        await objects_on.create(WIDGET, obj)
    warnings: list[str] = []
    created = await objects_on.create(WIDGET, obj, field_validation=FieldValidation.WARN, warnings=warnings)
    assert "foo" not in created["spec"]
    assert warnings == ['unknown field "spec.foo"']
    ignored = await objects_on.create(WIDGET, widget("w2", size=2, foo=1), field_validation=FieldValidation.IGNORE)
    assert "foo" not in ignored["spec"]


async def test_invalid_typed_object_is_not_written(objects_on: ObjectStore) -> None:
    bad = widget("w", size=-1, color="green", parts=[{"count": 0}])
    with pytest.raises(errors.Invalid) as caught:
        await objects_on.create(WIDGET, bad)
    status = caught.value.to_status()
    assert status["code"] == 422
    assert status["message"].startswith('Widget.test.gpufed.io "w" is invalid: [')
    causes = {(c["field"], c["reason"]) for c in status["details"]["causes"]}
    assert causes == {
        ("spec.size", "FieldValueInvalid"),
        ("spec.color", "FieldValueNotSupported"),
        ("spec.parts[0].name", "FieldValueRequired"),
        ("spec.parts[0].count", "FieldValueInvalid"),
    }
    with pytest.raises(errors.NotFound):
        await objects_on.get(WIDGET, namespace="default", name="w")
    with pytest.raises(errors.Invalid, match=r"metadata\.name: Invalid value"):
        await objects_on.create(GADGET, {"metadata": {"name": "Not_Valid"}})


async def test_dry_run_writes_nothing(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    before = await objects_on.store.current_revision()
    shown = await objects_on.create(deploy, deployment("web"), dry_run=True)
    assert shown["metadata"]["uid"]
    assert await objects_on.store.current_revision() == before
    with pytest.raises(errors.NotFound):
        await objects_on.get(deploy, namespace="default", name="web")


async def test_a_dry_run_create_of_a_name_in_use_is_kubes_409(objects_on: ObjectStore) -> None:
    """kube's dry-run storage looks the key up as its create would (``kubectl create
    --dry-run=server`` of an existing object is ``AlreadyExists``), after validation."""
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web"))
    with pytest.raises(errors.AlreadyExists, match=r'^deployments\.apps "web" already exists$'):
        await objects_on.create(deploy, deployment("web"), dry_run=True)
    invalid = deployment("web")
    invalid["spec"]["replicas"] = -1
    with pytest.raises(errors.Invalid):
        await objects_on.create(deploy, invalid, dry_run=True)


async def test_merge_and_json_patch(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web", labels={"a": "1"}))
    merged = await objects_on.patch(
        deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
        patch={"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"replicas": 5}},
    )
    assert merged["metadata"]["labels"] == {"b": "2"}
    assert merged["spec"]["replicas"] == 5
    assert merged["metadata"]["generation"] == 2
    patched = await objects_on.patch(
        deploy, namespace="default", name="web", patch_type=PatchType.JSON,
        patch=[{"op": "test", "path": "/spec/replicas", "value": 5}, {"op": "replace", "path": "/spec/replicas", "value": 6}],
    )
    assert patched["spec"]["replicas"] == 6
    with pytest.raises(errors.Invalid, match=r"^the server rejected our request due to an error in our request$"):
        await objects_on.patch(
            deploy, namespace="default", name="web", patch_type=PatchType.JSON,
            patch=[{"op": "test", "path": "/spec/replicas", "value": 1}],
        )
    with pytest.raises(errors.Conflict):
        await objects_on.patch(
            deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
            patch={"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 1}},
        )


async def test_concurrent_patches_all_land(objects_on: ObjectStore) -> None:
    _, _, configmaps = _types(objects_on)
    await objects_on.create(configmaps, {"metadata": {"name": "c", "namespace": "default"}, "data": {}})
    await asyncio.gather(*(
        objects_on.patch(
            configmaps, namespace="default", name="c", patch_type=PatchType.MERGE, patch={"data": {f"k{i}": "v"}}
        )
        for i in range(10)
    ))
    final = await objects_on.get(configmaps, namespace="default", name="c")
    assert set(final["data"]) == {f"k{i}" for i in range(10)}


async def test_scale_subresource(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web", replicas=2))
    scale = await objects_on.get_scale(deploy, namespace="default", name="web")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"]["selector"] == "app=web"
    scaled = await objects_on.patch_scale(
        deploy, namespace="default", name="web", patch_type=PatchType.MERGE, patch={"spec": {"replicas": 7}}
    )
    assert scaled["spec"]["replicas"] == 7
    assert (await objects_on.get(deploy, namespace="default", name="web"))["spec"]["replicas"] == 7


class _WriterMeanwhile:
    """Admission webhook calls during which another client writes the object once (as a controller
    writing a Deployment's status while a scale write waits for its webhooks)."""

    def __init__(self, objects: ObjectStore, rt: Any) -> None:
        self.objects, self.rt, self.writes = objects, rt, 0

    async def mutate(self, request: Any) -> None:
        if not self.writes:
            self.writes += 1
            await self.objects.patch(self.rt, namespace="default", name="web", patch_type=PatchType.MERGE,
                                     patch={"metadata": {"labels": {"touched": "yes"}}})

    async def validate(self, request: Any) -> None:
        return None


async def test_a_scale_patch_is_retried_after_a_concurrent_write(objects_on: ObjectStore) -> None:
    """As kube's patch handler: a scale patch is applied again to the latest object when another
    write wins meanwhile, unless the patch names the resourceVersion it was made against."""
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("web", replicas=2))
    scaled = await objects_on.patch_scale(deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
                                          patch={"spec": {"replicas": 7}}, webhooks=_WriterMeanwhile(objects_on, deploy))
    assert scaled["spec"]["replicas"] == 7
    stored = await objects_on.get(deploy, namespace="default", name="web")
    assert stored["spec"]["replicas"] == 7 and stored["metadata"]["labels"]["touched"] == "yes"
    with pytest.raises(errors.Conflict):
        await objects_on.patch_scale(
            deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
            patch={"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "spec": {"replicas": 3}},
        )


class _UnversioningWriterMeanwhile(_WriterMeanwhile):
    """A mutating webhook that drops the update's resourceVersion, during whose first call another
    client writes the object."""

    calls = 0

    async def mutate(self, request: Any) -> dict[str, Any]:
        self.calls += 1
        await super().mutate(request)
        obj = json.loads(json.dumps(request.obj))
        obj["metadata"].pop("resourceVersion", None)
        return obj


async def test_an_update_a_mutating_webhook_makes_unconditional_is_tried_again_after_a_concurrent_write(
    objects_on: ObjectStore,
) -> None:
    """kube's store decides whether an update is unconditional from the object its mutating
    admission returns, on every try (``Store.Update``: ``newResourceVersion == 0`` after
    ``objInfo.UpdatedObject``): one whose webhook drops the resourceVersion is tried again on the
    latest object when another write wins its compare-and-swap, as one that names none."""
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("web", replicas=2))
    webhooks = _UnversioningWriterMeanwhile(objects_on, deploy)
    updated = await objects_on.update(deploy, {**created, "spec": {**created["spec"], "replicas": 5}}, webhooks=webhooks)
    assert (updated["spec"]["replicas"], webhooks.writes, webhooks.calls) == (5, 1, 2)  # sent again on the retry
    stored = await objects_on.get(deploy, namespace="default", name="web")
    assert stored["spec"]["replicas"] == 5 and "touched" not in stored["metadata"].get("labels", {})


async def test_a_scale_is_decoded_and_validated_as_kube_does(objects_on: ObjectStore) -> None:
    """A Scale's replicas are an int32: another type is the decoder's 400 (through a patch, the
    patch handler's 422), a negative number kube's Invalid, and none at all 0."""
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web", replicas=2))
    with pytest.raises(errors.BadRequest) as decoding:
        await objects_on.update_scale(deploy, {"metadata": {"name": "web"}, "spec": {"replicas": "3"}}, namespace="default", name="web")
    assert decoding.value.message == (
        'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field '
        "ScaleSpec.spec.replicas of type int32"
    )
    with pytest.raises(errors.Invalid) as patched:
        await objects_on.patch_scale(
            deploy, namespace="default", name="web", patch_type=PatchType.MERGE, patch={"spec": {"replicas": 1.5}}
        )
    assert patched.value.causes[0].field == "patch"
    assert patched.value.causes[0].message.endswith("json: cannot unmarshal number 1.5 into Go struct field "
                                                    "ScaleSpec.spec.replicas of type int32")
    with pytest.raises(errors.Invalid) as negative:
        await objects_on.update_scale(deploy, {"metadata": {"name": "web"}, "spec": {"replicas": -1}}, namespace="default", name="web")
    assert negative.value.message == (
        'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'
    )
    emptied = await objects_on.update_scale(deploy, {"metadata": {"name": "web"}, "spec": {}}, namespace="default", name="web")
    assert emptied["spec"]["replicas"] == 0


@pytest.mark.parametrize(("metadata", "message"), [
    ({}, "the name of the object (web based on URL) was undeterminable: name must be provided"),
    ({"name": "other"}, "the name of the object (other) does not match the name on the URL (web)"),
    ({"name": "web", "namespace": "kube-system"},
     "the namespace of the provided object does not match the namespace sent on the request"),
])
async def test_a_scale_names_the_object_of_its_url(
    objects_on: ObjectStore, metadata: dict[str, str], message: str
) -> None:
    """kube's update handler checks a Scale's metadata against its URL before the scale is
    written: its namespace when it has one, and its name, which it must have."""
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web", replicas=2))
    with pytest.raises(errors.BadRequest) as refused:
        await objects_on.update_scale(
            deploy, {"metadata": metadata, "spec": {"replicas": 5}}, namespace="default", name="web"
        )
    assert refused.value.message == message
    assert (await objects_on.get(deploy, namespace="default", name="web"))["spec"]["replicas"] == 2


async def test_a_scales_uid_and_resource_version_are_preconditions(objects_on: ObjectStore) -> None:
    """kube's scale subresource: a Scale naming another uid is a 409 Conflict naming both uids
    (before anything is written, a no-op included); a stale resourceVersion the usual 409."""
    deploy, _, _ = _types(objects_on)
    created = await objects_on.create(deploy, deployment("web", replicas=2))
    uid, revision = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    for replicas in (2, 5):
        with pytest.raises(errors.Conflict) as other_uid:
            await objects_on.update_scale(
                deploy, {"metadata": {"name": "web", "uid": "not-its-uid"}, "spec": {"replicas": replicas}},
                namespace="default", name="web",
            )
        assert other_uid.value.message == (
            'Operation cannot be fulfilled on deployments/scale.apps "web": Precondition failed: '
            f"UID in precondition: not-its-uid, UID in object meta: {uid}"
        )
        assert other_uid.value.to_status()["details"] == {"name": "web", "group": "apps", "kind": "deployments/scale"}
    with pytest.raises(errors.Conflict):
        await objects_on.patch_scale(
            deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
            patch={"metadata": {"uid": "not-its-uid"}, "spec": {"replicas": 5}},
        )
    unchanged = await objects_on.get(deploy, namespace="default", name="web")
    assert unchanged["spec"]["replicas"] == 2
    assert unchanged["metadata"]["resourceVersion"] == revision
    scaled = await objects_on.update_scale(
        deploy, {"metadata": {"name": "web", "uid": uid, "resourceVersion": revision}, "spec": {"replicas": 5}},
        namespace="default", name="web",
    )
    assert scaled["spec"]["replicas"] == 5
    with pytest.raises(errors.Conflict) as stale:
        await objects_on.update_scale(
            deploy, {"metadata": {"name": "web", "uid": uid, "resourceVersion": revision}, "spec": {"replicas": 6}},
            namespace="default", name="web",
        )
    assert "the object has been modified" in stale.value.message


async def test_strategic_merge_patch_keeps_other_containers(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    obj = deployment("web")
    obj["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    await objects_on.create(deploy, obj)
    patched = await objects_on.patch(
        deploy, namespace="default", name="web", patch_type=PatchType.STRATEGIC,
        patch={"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}}},
    )
    containers = patched["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "nginx:1"), ("side", "busybox:2")]


async def test_server_side_apply_creates_and_reports_conflicts(objects_on: ObjectStore) -> None:
    deploy, _, _ = _types(objects_on)
    created = await objects_on.patch(
        deploy, namespace="default", name="web", patch_type=PatchType.APPLY, patch=deployment("web", replicas=2),
        field_manager="alice",
    )
    assert created["metadata"]["uid"]
    assert [m["manager"] for m in created["metadata"]["managedFields"]] == ["alice"]
    with pytest.raises(errors.Conflict) as caught:
        await objects_on.patch(
            deploy, namespace="default", name="web", patch_type=PatchType.APPLY,
            patch=deployment("web", replicas=5), field_manager="bob",
        )
    status = caught.value.to_status()
    # An applier is named without the version: kube adds "using" only for an Update.
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas'
    assert status["details"]["causes"][0]["message"] == 'conflict with "alice"'
    assert status["details"]["causes"][0]["field"] == ".spec.replicas"
    forced = await objects_on.patch(
        deploy, namespace="default", name="web", patch_type=PatchType.APPLY,
        patch=deployment("web", replicas=5), field_manager="bob", force=True,
    )
    assert forced["spec"]["replicas"] == 5


def _entries(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """managedFields by (manager, operation, subresource) -> fieldsV1."""
    return {
        (m["manager"], m["operation"], m.get("subresource", "")): m["fieldsV1"]
        for m in obj["metadata"]["managedFields"]
    }


async def test_subresource_writes_are_recorded_under_their_subresource(objects_on: ObjectStore) -> None:
    """kube records a write through /status or /scale in the writer's own managedFields entry,
    with ``subresource`` set: a status writer owns what it wrote under .status, a scaler
    .spec.replicas, and a later apply that changes them names them so."""
    deploy, _, _ = _types(objects_on)
    await objects_on.create(deploy, deployment("web", replicas=2), field_manager="kubectl-create")
    stored = await objects_on.get(deploy, namespace="default", name="web")
    await objects_on.update_status(
        deploy, {**stored, "status": {"replicas": 2, "readyReplicas": 1}}, field_manager="controller"
    )
    await objects_on.patch_scale(
        deploy, namespace="default", name="web", patch_type=PatchType.MERGE,
        patch={"spec": {"replicas": 4}}, field_manager="kubectl",
    )
    entries = _entries(await objects_on.get(deploy, namespace="default", name="web"))
    assert entries[("controller", "Update", "status")] == {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}}
    assert entries[("kubectl", "Update", "scale")] == {"f:spec": {"f:replicas": {}}}
    # The scaler took .spec.replicas from its creator, as a write of another manager does.
    assert "f:replicas" not in entries[("kubectl-create", "Update", "")]["f:spec"]

    with pytest.raises(errors.Conflict) as caught:
        await objects_on.patch(
            deploy, namespace="default", name="web", patch_type=PatchType.APPLY,
            patch=deployment("web", replicas=1), field_manager="ci",
        )
    status = caught.value.to_status()
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas'
    )
    assert status["details"]["causes"] == [{
        "reason": "FieldManagerConflict",
        "message": 'conflict with "kubectl" with subresource "scale" using apps/v1',
        "field": ".spec.replicas",
    }]


def _gpufed_registry() -> Registry:
    return Registry(core_resources(), gpufed_resources())


async def test_a_kind_kube_serves_from_a_crd_names_its_scale_as_custom_resources_do() -> None:
    """LeaderWorkerSet is declared in the hub's code (``rt.custom`` is None: no CRD object here), but
    kube serves it from a CustomResourceDefinition, so its scale conflict names
    ``scale.leaderworkerset.x-k8s.io`` as apiextensions names every custom resource's, not
    ``leaderworkersets/scale`` as a built-in kind's. What tells them apart is kube's own mark of a
    built-in kind: it takes a strategic merge patch."""
    registry = Registry(core_resources(), gpu_workload_resources())
    lws = registry.require("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert lws.custom is None and not lws.strategic_merge
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        created = await objects.create(lws, {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"workerTemplate": {}}},
        })
        with pytest.raises(errors.Conflict) as caught:
            await objects.update_scale(
                lws, {"metadata": {"name": "w", "uid": "other"}, "spec": {"replicas": 3}}, namespace="default", name="w",
            )
    assert caught.value.message == (
        'Operation cannot be fulfilled on scale.leaderworkerset.x-k8s.io "w": Precondition failed: '
        f"UID in precondition: other, UID in object meta: {created['metadata']['uid']}"
    )


async def test_gpufed_kinds_validate_with_their_models() -> None:
    registry = _gpufed_registry()
    clusters = registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        obj = {"metadata": {"name": "onprem-a"}, "spec": {"provider": "onprem"}}
        created = await objects.create(clusters, obj)
        assert created["spec"] == {"provider": "onprem"}
        with pytest.raises(errors.BadRequest, match=r'unknown field "spec\.flavour"'):
            await objects.create(clusters, {"metadata": {"name": "b"}, "spec": {"provider": "aws", "flavour": 1}})
        with pytest.raises(errors.Invalid) as caught:
            await objects.create(clusters, {"metadata": {"name": "c"}, "spec": {}})
        assert any(c.field == "spec.provider" for c in caught.value.causes)
    # Both policy groups are served, with the same kinds.
    for group in ("policy.gpufed.io", "policy.karmada.io"):
        assert registry.require(f"{group}/v1alpha1", "PropagationPolicy").model is not None


def test_gpufed_openapi_documents_use_the_openapi_dialect() -> None:
    documents = OpenApiDocuments(_gpufed_registry())
    for key in documents.index()["paths"]:
        document = documents.document(key)
        assert document is not None
        text = document.body.decode()
        for json_schema_only in ('"$defs"', '"const"', '"discriminator":{', '"prefixItems"', '"type":"null"'):
            assert json_schema_only not in text, (key, json_schema_only)
        parsed = json.loads(text)
        refs = set(re.findall(r'"#/components/schemas/([^"]+)"', text))
        assert refs <= set(parsed["components"]["schemas"]), key
