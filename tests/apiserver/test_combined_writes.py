"""One write of an object's main resource and its status (``update_with_status``): what an update
and a status update in turn would store, with one revision and one watch event, on both stores.
The hub's controllers use it where one change is both (the detector's finalizer with the
workload's ``Propagated`` condition, the scheduler's placement with its decision)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.validation import FieldValidation
from controlplane.hub import hub_registry
from controlplane.storage import Store

FINALIZER = "gpufed.io/propagation"
PROPAGATED = {"conditions": [{"type": "Propagated", "status": "True", "reason": "Claimed", "message": "claimed",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }


@pytest.fixture
async def objects(store: Store) -> AsyncIterator[ObjectStore]:
    objects = ObjectStore(store, hub_registry())
    await objects.bootstrap()
    yield objects


def deployments(objects: ObjectStore) -> ResourceType:
    return objects.registry.require("apps/v1", "Deployment")


def revision(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def claimed(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "finalizers": [FINALIZER]}, "status": PROPAGATED}


def without_revisions(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": meta}


async def test_metadata_and_status_are_one_write_that_stores_what_two_would(objects: ObjectStore) -> None:
    rt = deployments(objects)
    one = await objects.create(rt, deployment("one"))
    two = await objects.create(rt, deployment("two"))
    sent = claimed(one)
    kept = copy.deepcopy(sent)

    combined = await objects.update_with_status(rt, sent)
    assert sent == kept, "the caller's object is not changed"
    stepwise = await objects.update_status(rt, {**claimed(await objects.update(rt, claimed(two)))})

    stored = await objects.get(rt, namespace="default", name="one")
    assert stored == combined
    assert stored["metadata"]["finalizers"] == [FINALIZER] and stored["status"] == PROPAGATED
    assert stored["metadata"]["generation"] == one["metadata"]["generation"], "metadata and status: no new generation"
    # One write: the revision moved once (the two writes in turn moved their object's twice).
    assert revision(stored) == revision(two) + 1
    assert revision(stepwise) == revision(stored) + 2
    other = without_revisions(stepwise)
    other["metadata"] = {**other["metadata"], "name": "one", "uid": stored["metadata"]["uid"],
                         "creationTimestamp": stored["metadata"]["creationTimestamp"]}
    assert without_revisions(stored) == other, "the same object as the two writes in turn"


async def test_a_spec_change_and_the_status_computed_from_it(objects: ObjectStore) -> None:
    rt = deployments(objects)
    created = await objects.create(rt, deployment("web"))
    seen: list[dict[str, Any]] = []

    def status_of(main: dict[str, Any]) -> dict[str, Any]:
        seen.append(copy.deepcopy(main))
        return {**(main.get("status") or {}), "observedGeneration": main["metadata"]["generation"]}

    changed = copy.deepcopy(created)
    changed["spec"]["replicas"] = 3
    written = await objects.update_with_status(rt, changed, status_of=status_of)
    assert seen and seen[0]["spec"]["replicas"] == 3 and seen[0]["metadata"]["generation"] == 2
    assert written["metadata"]["generation"] == 2 and written["status"]["observedGeneration"] == 2
    assert revision(written) == revision(created) + 1
    assert await objects.get(rt, namespace="default", name="web") == written

    # None from status_of: the status stays as stored; only the main resource is written.
    again = copy.deepcopy(written)
    again["metadata"]["labels"] = {"tier": "gpu"}
    relabelled = await objects.update_with_status(rt, again, status_of=lambda main: None)
    assert relabelled["metadata"]["labels"] == {"tier": "gpu"} and relabelled["status"] == written["status"]


async def test_an_unchanged_object_is_not_written(objects: ObjectStore) -> None:
    rt = deployments(objects)
    created = await objects.update_with_status(rt, claimed(await objects.create(rt, deployment("web"))))
    same = await objects.update_with_status(rt, copy.deepcopy(created))
    assert revision(same) == revision(created)
    assert revision(await objects.get(rt, namespace="default", name="web")) == revision(created)


async def test_a_stale_revision_or_a_bad_status_writes_nothing(objects: ObjectStore) -> None:
    rt = deployments(objects)
    created = await objects.create(rt, deployment("web"))
    current = await objects.update(rt, {**created, "metadata": {**created["metadata"], "labels": {"a": "b"}}})
    with pytest.raises(errors.Conflict):
        await objects.update_with_status(rt, claimed(created))  # made from the revision before the label's
    stored = await objects.get(rt, namespace="default", name="web")
    assert revision(stored) == revision(current) and "finalizers" not in stored["metadata"]

    works = objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    namespaces = objects.registry.require("v1", "Namespace")
    await objects.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpufed-es-a"}})
    work = await objects.create(works, {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work", "metadata": {"name": "w", "namespace": "gpufed-es-a"},
        "spec": {"workload": {"manifests": [deployment("web")]}},
    })
    bad = {**work, "metadata": {**work["metadata"], "labels": {"a": "b"}}, "status": {"conditions": "applied"}}
    with pytest.raises(errors.Invalid) as raised:
        await objects.update_with_status(works, bad, field_validation=FieldValidation.STRICT)
    assert [cause.field for cause in raised.value.causes] == ["status.conditions"], raised.value.causes
    stored = await objects.get(works, namespace="gpufed-es-a", name="w")
    assert stored == work, "nothing was written: not the labels either"


async def test_a_kind_without_a_status_subresource_is_written_whole(objects: ObjectStore) -> None:
    rt = objects.registry.require("v1", "ConfigMap")
    created = await objects.create(
        rt, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": {}}
    )
    written = await objects.update_with_status(rt, {**created, "data": {"k": "v"}})
    assert written["data"] == {"k": "v"} and revision(written) > revision(created)
