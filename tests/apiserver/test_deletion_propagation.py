"""A delete's ``propagationPolicy`` (or legacy ``orphanDependents``) puts on the garbage
collector's finalizer as kube-apiserver's registry store does, over both stores; over HTTP the
options come from the body or the query, and bad ones get kube's 422."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import Store

NS = "default"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"


@pytest.fixture
async def objects(store: Store) -> ObjectStore:
    objects = ObjectStore(store, hub_registry(), garbage_collection=True)
    await objects.bootstrap()
    return objects


async def _configmap(objects: ObjectStore, name: str, *, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if finalizers:
        meta["finalizers"] = finalizers
    return await objects.create(objects.registry.require("v1", "ConfigMap"), {"metadata": meta})


async def _stored(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require("v1", "ConfigMap"), namespace=NS, name=name)
    except errors.NotFound:
        return None


@pytest.mark.parametrize(
    ("options", "finalizers"),
    [
        ({"propagation_policy": "Foreground"}, ["foregroundDeletion"]),
        ({"propagation_policy": "Orphan"}, ["orphan"]),
        ({"orphan_dependents": True}, ["orphan"]),
    ],
)
async def test_foreground_and_orphan_keep_the_object_marked(
    objects: ObjectStore, options: dict[str, Any], finalizers: list[str]
) -> None:
    configmaps = objects.registry.require("v1", "ConfigMap")
    await _configmap(objects, "owner")
    result = await objects.delete(configmaps, namespace=NS, name="owner", **options)
    assert not result.deleted
    assert result.object["metadata"]["finalizers"] == finalizers
    stored = await _stored(objects, "owner")
    assert stored is not None
    assert stored["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["finalizers"] == finalizers


@pytest.mark.parametrize("options", [{}, {"propagation_policy": "Background"}, {"orphan_dependents": False}])
async def test_background_deletes_now(objects: ObjectStore, options: dict[str, Any]) -> None:
    configmaps = objects.registry.require("v1", "ConfigMap")
    await _configmap(objects, "owner")
    assert (await objects.delete(configmaps, namespace=NS, name="owner", **options)).deleted
    assert await _stored(objects, "owner") is None


async def test_a_second_delete_swaps_the_finalizer_and_background_finishes_it(objects: ObjectStore) -> None:
    configmaps = objects.registry.require("v1", "ConfigMap")
    await _configmap(objects, "owner", finalizers=["example.com/hold"])
    first = await objects.delete(configmaps, namespace=NS, name="owner", propagation_policy="Foreground")
    marked_at = first.object["metadata"]["deletionTimestamp"]
    # No policy: the finalizer already there decides; nothing changes.
    again = await objects.delete(configmaps, namespace=NS, name="owner")
    assert again.object["metadata"]["finalizers"] == ["example.com/hold", "foregroundDeletion"]
    swapped = await objects.delete(configmaps, namespace=NS, name="owner", propagation_policy="Orphan")
    assert swapped.object["metadata"]["finalizers"] == ["example.com/hold", "orphan"]
    assert swapped.object["metadata"]["deletionTimestamp"] == marked_at
    # Background takes the garbage collector's finalizer off; the other one still holds it.
    held = await objects.delete(configmaps, namespace=NS, name="owner", propagation_policy="Background")
    assert not held.deleted
    stored = await _stored(objects, "owner")
    assert stored is not None and stored["metadata"]["finalizers"] == ["example.com/hold"]


async def test_background_on_a_foreground_deletion_with_nothing_else_deletes_it(objects: ObjectStore) -> None:
    configmaps = objects.registry.require("v1", "ConfigMap")
    await _configmap(objects, "owner")
    await objects.delete(configmaps, namespace=NS, name="owner", propagation_policy="Foreground")
    result = await objects.delete(configmaps, namespace=NS, name="owner", propagation_policy="Background")
    assert result.deleted
    assert await _stored(objects, "owner") is None


async def test_dry_run_shows_the_mark_and_writes_nothing(objects: ObjectStore) -> None:
    configmaps = objects.registry.require("v1", "ConfigMap")
    created = await _configmap(objects, "owner")
    result = await objects.delete(configmaps, namespace=NS, name="owner", propagation_policy="Foreground", dry_run=True)
    assert result.object["metadata"]["finalizers"] == ["foregroundDeletion"]
    stored = await _stored(objects, "owner")
    assert stored is not None
    assert "finalizers" not in stored["metadata"] and "deletionTimestamp" not in stored["metadata"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_batch_v1_job_orphans_by_default_and_an_event_never_gets_a_finalizer(objects: ObjectStore) -> None:
    jobs = objects.registry.require("batch/v1", "Job")
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    await objects.create(jobs, {"metadata": {"name": "train", "namespace": NS}, "spec": {"template": template}})
    result = await objects.delete(jobs, namespace=NS, name="train")
    assert result.object["metadata"]["finalizers"] == ["orphan"]
    events = objects.registry.require("v1", "Event")
    event = {"metadata": {"name": "e", "namespace": NS}, "involvedObject": {"kind": "Job", "name": "train"},
             "reason": "Test", "message": "m", "type": "Normal"}
    await objects.create(events, event)
    assert (await objects.delete(events, namespace=NS, name="e", propagation_policy="Foreground")).deleted


@pytest.fixture
def api(collected_hub: TestClient[Any, Any]) -> TestClient[Any, Any]:
    return collected_hub


async def test_http_options_from_body_and_query(api: TestClient[Any, Any]) -> None:
    for name in ("a", "b"):
        assert (await api.post(CM_PATH, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})).status == 201
    answer = await api.delete(f"{CM_PATH}/a", json={"kind": "DeleteOptions", "apiVersion": "v1",
                                                    "propagationPolicy": "Foreground"})
    assert answer.status == 200
    body = await answer.json()
    assert body["kind"] == "ConfigMap" and body["metadata"]["finalizers"] == ["foregroundDeletion"]
    answer = await api.delete(f"{CM_PATH}/b?orphanDependents=true")
    assert (await answer.json())["metadata"]["finalizers"] == ["orphan"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"orphanDependents": True, "propagationPolicy": "Foreground"},
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Foreground": '
            "orphanDependents and deletionPropagation cannot be both set",
        ),
        (
            {"propagationPolicy": "Sideways"},
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": '
            'supported values: "Foreground", "Background", "Orphan", "nil"',
        ),
    ],
)
async def test_bad_options_get_kubes_422(api: TestClient[Any, Any], options: dict[str, Any], message: str) -> None:
    await api.post(CM_PATH, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    answer = await api.delete(f"{CM_PATH}/a", json={"kind": "DeleteOptions", "apiVersion": "v1", **options})
    assert answer.status == 422
    status = await answer.json()
    assert status["reason"] == "Invalid"
    assert status["message"] == message
    assert status["details"]["kind"] == "DeleteOptions" and status["details"]["group"] == "meta.k8s.io"
    assert (await api.get(f"{CM_PATH}/a")).status == 200


async def test_without_a_garbage_collector_every_policy_deletes_now(store: Store) -> None:
    """A simulated member's store runs no garbage collector: a finalizer no one removes would
    keep the object for ever, so Foreground and Orphan delete as Background does (kube-apiserver
    with ``--enable-garbage-collector=false``)."""
    objects = ObjectStore(store, hub_registry())
    await objects.bootstrap()
    configmaps = objects.registry.require("v1", "ConfigMap")
    for policy in ("Foreground", "Orphan"):
        await _configmap(objects, policy.lower())
        assert (await objects.delete(configmaps, namespace=NS, name=policy.lower(), propagation_policy=policy)).deleted


async def test_orphan_dependents_false_on_a_held_object_is_accepted(api: TestClient[Any, Any]) -> None:
    """kube answers 202 when a delete with ``orphanDependents: false`` leaves the object (other
    finalizers), 200 otherwise."""
    meta = {"name": "held", "finalizers": ["example.com/hold"]}
    await api.post(CM_PATH, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    answer = await api.delete(f"{CM_PATH}/held?orphanDependents=false")
    assert answer.status == 202
    assert (await answer.json())["metadata"]["deletionTimestamp"]
    assert (await api.delete(f"{CM_PATH}/held")).status == 200


@pytest.mark.parametrize(
    ("query", "status", "finalizers"),
    [
        ("", 200, ["example.com/hold"]),
        *((f"?orphanDependents={value}", 202, ["example.com/hold"]) for value in ("false", "0", "FALSE")),
        *((f"?orphanDependents={value}", 200, ["example.com/hold", "orphan"]) for value in ("yes", "1", "", "True")),
    ],
)
async def test_orphan_dependents_in_the_query_is_read_as_kube_reads_a_query_boolean(
    api: TestClient[Any, Any], query: str, status: int, finalizers: list[str]
) -> None:
    """Absent, the delete has no orphanDependents; ``0`` or ``false`` in any case is false (kube's
    202 for the object left); any other value, the empty one included, orphans."""
    meta = {"name": "held", "finalizers": ["example.com/hold"]}
    await api.post(CM_PATH, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    answer = await api.delete(f"{CM_PATH}/held{query}")
    assert answer.status == status
    assert (await answer.json())["metadata"]["finalizers"] == finalizers


async def _configmaps(api: TestClient[Any, Any], *names: str) -> None:
    for name in names:
        assert (await api.post(CM_PATH, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})).status == 201


async def _exists(api: TestClient[Any, Any], name: str) -> bool:
    return (await api.get(f"{CM_PATH}/{name}")).status == 200


async def test_a_body_is_the_whole_of_the_options_and_the_query_is_not_read(api: TestClient[Any, Any]) -> None:
    """kube decodes DeleteOptions from the body when there is one, from the query only when
    there is none: a body's ``dryRun`` is a dry run, a query's next to a body is not read."""
    await _configmaps(api, "a", "b", "c")
    options = {"kind": "DeleteOptions", "apiVersion": "v1"}
    dry = await api.delete(f"{CM_PATH}/a", json={**options, "dryRun": ["All"]})
    assert dry.status == 200 and await _exists(api, "a")
    assert (await api.delete(f"{CM_PATH}/a?dryRun=All&propagationPolicy=Sideways", json=options)).status == 200
    assert not await _exists(api, "a")
    answer = await api.delete(f"{CM_PATH}/b?orphanDependents=true", json={**options, "propagationPolicy": "Foreground"})
    assert (await answer.json())["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert (await api.delete(f"{CM_PATH}/c?dryRun=All")).status == 200 and await _exists(api, "c")


@pytest.mark.parametrize("sent", ["query", "body"])
async def test_every_bad_delete_option_is_a_cause_of_one_422(api: TestClient[Any, Any], sent: str) -> None:
    await _configmaps(api, "a")
    if sent == "query":
        answer = await api.delete(f"{CM_PATH}/a?orphanDependents=true&propagationPolicy=Sideways&dryRun=Maybe")
    else:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": True, "propagationPolicy": "Sideways",
                "dryRun": ["Maybe"]}
        answer = await api.delete(f"{CM_PATH}/a", json=body)
    assert answer.status == 422
    status = await answer.json()
    assert status["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Invalid value: "Sideways": orphanDependents '
        'and deletionPropagation cannot be both set, propagationPolicy: Unsupported value: "Sideways": supported '
        'values: "Foreground", "Background", "Orphan", "nil", dryRun: Unsupported value: []string{"Maybe"}: '
        'supported values: "All"]'
    )
    assert [(c["reason"], c["field"]) for c in status["details"]["causes"]] == [
        ("FieldValueInvalid", "propagationPolicy"), ("FieldValueNotSupported", "propagationPolicy"),
        ("FieldValueNotSupported", "dryRun"),
    ]
    assert await _exists(api, "a")


async def test_a_grace_period_in_the_query_is_an_int64(api: TestClient[Any, Any]) -> None:
    await _configmaps(api, "a")
    answer = await api.delete(f"{CM_PATH}/a?gracePeriodSeconds=soon")
    assert answer.status == 400
    assert (await answer.json())["message"] == 'strconv.ParseInt: parsing "soon": invalid syntax'
    assert await _exists(api, "a")
    assert (await api.delete(f"{CM_PATH}/a?gracePeriodSeconds=-1")).status == 200


async def test_a_collection_delete_reads_and_checks_its_options_as_a_delete(api: TestClient[Any, Any]) -> None:
    await _configmaps(api, "a", "b")
    refused = await api.delete(f"{CM_PATH}?dryRun=Maybe")
    assert refused.status == 422
    assert (await refused.json())["details"]["kind"] == "DeleteOptions"
    dry = await api.delete(CM_PATH, json={"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]})
    assert dry.status == 200 and len((await dry.json())["items"]) == 2
    assert await _exists(api, "a") and await _exists(api, "b")
    assert (await api.delete(f"{CM_PATH}?dryRun=All")).status == 200
    assert await _exists(api, "a") and await _exists(api, "b")
    assert (await api.delete(CM_PATH)).status == 200
    assert not await _exists(api, "a") and not await _exists(api, "b")


async def test_a_delete_body_kube_does_not_decode_is_kubes_415(api: TestClient[Any, Any]) -> None:
    """kube negotiates a delete body's decoder from its Content-Type: one it has no decoder for is
    its 415, the object and the collection left as they are; an empty body is not negotiated."""
    await _configmaps(api, "a")
    options = '{"kind": "DeleteOptions", "apiVersion": "v1"}'
    for path in (f"{CM_PATH}/a", CM_PATH):
        answer = await api.delete(path, data=options, headers={"Content-Type": "text/plain"})
        assert answer.status == 415
        assert await answer.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "UnsupportedMediaType",
            "message": "the body of the request was in an unknown format - accepted media types include: "
                       "application/json, application/yaml, application/vnd.kubernetes.protobuf",
            "code": 415,
        }
        assert await _exists(api, "a")
    yaml_body = "kind: DeleteOptions\napiVersion: v1\ndryRun: [All]\n"
    dry = await api.delete(f"{CM_PATH}/a", data=yaml_body, headers={"Content-Type": "application/yaml"})
    assert dry.status == 200 and await _exists(api, "a")
    assert (await api.delete(f"{CM_PATH}/a", data=b"", headers={"Content-Type": "text/plain"})).status == 200
    assert not await _exists(api, "a")
