"""The leader's APF config ensurer and Dangling condition, as kube keeps them: the bootstrap objects
are created, a mandatory one is put back (its spec cannot even be edited), a suggested one follows
its ``apf.kubernetes.io/autoupdate-spec`` annotation, and every FlowSchema says whether its level exists."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apis.kube.flowcontrol_bootstrap import AUTO_UPDATE_ANNOTATION, FLOW_SCHEMAS, PRIORITY_LEVELS
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import ResourceType
from controlplane.controllers.flowcontrolconfig import FlowControlConfigController

from .fleet import eventually

GV = "flowcontrol.apiserver.k8s.io/v1"


@pytest.fixture
async def controller(objects: ObjectStore) -> AsyncIterator[FlowControlConfigController]:
    running = FlowControlConfigController(objects)
    task = asyncio.create_task(running.run())
    yield running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def kinds(objects: ObjectStore) -> tuple[ResourceType, ResourceType]:
    return objects.registry.require(GV, "FlowSchema"), objects.registry.require(GV, "PriorityLevelConfiguration")


async def get(objects: ObjectStore, rt: ResourceType, name: str) -> dict[str, Any] | None:
    try:
        return await objects.get(rt, name=name)
    except errors.NotFound:
        return None


async def all_created(objects: ObjectStore) -> None:
    schemas, levels = kinds(objects)

    async def created() -> bool:
        return (len((await objects.list(schemas)).items) >= len(FLOW_SCHEMAS)
                and len((await objects.list(levels)).items) >= len(PRIORITY_LEVELS))

    await eventually(created, what="kube's bootstrap objects created")


async def test_mandatory_objects_are_restored_and_suggested_ones_follow_their_annotation(
    objects: ObjectStore, controller: FlowControlConfigController
) -> None:
    schemas, levels = kinds(objects)
    await all_created(objects)
    catch_all = await objects.get(levels, name="catch-all")
    assert catch_all["metadata"]["annotations"] == {AUTO_UPDATE_ANNOTATION: "true"}
    # A mandatory spec cannot be edited (kube's validation) ...
    edited = {**catch_all, "spec": {**catch_all["spec"], "limited": {**catch_all["spec"]["limited"], "nominalConcurrencyShares": 50}}}
    with pytest.raises(errors.Invalid, match="spec of 'catch-all' must equal the fixed value"):
        await objects.update(levels, edited)
    # ... and its annotation, or the object itself, comes back.
    schema = await objects.get(schemas, name="catch-all")
    schema["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = "false"
    await objects.update(schemas, schema)
    exempt_uid = (await objects.get(levels, name="exempt"))["metadata"]["uid"]
    assert (await objects.delete(levels, name="exempt")).deleted

    async def restored() -> bool:
        fs, pl = await get(objects, schemas, "catch-all"), await get(objects, levels, "exempt")
        return (fs is not None and fs["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] == "true"
                and pl is not None and pl["metadata"]["uid"] != exempt_uid)

    await eventually(restored, what="the mandatory catch-all annotation and exempt level restored")

    # A suggested level an admin marks "false" keeps their edit; one still "true" is put back.
    kept = await objects.get(levels, name="global-default")
    kept["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = "false"
    kept["spec"]["limited"]["nominalConcurrencyShares"] = 7
    await objects.update(levels, kept)
    reverted = await objects.get(levels, name="workload-low")
    reverted["spec"]["limited"]["nominalConcurrencyShares"] = 3
    await objects.update(levels, reverted)

    async def put_back() -> bool:
        level = await get(objects, levels, "workload-low")
        return level is not None and level["spec"]["limited"]["nominalConcurrencyShares"] == 100

    await eventually(put_back, what="workload-low put back to kube's spec")
    # One worker, one queue: the global-default edit was reconciled before workload-low's.
    level = await objects.get(levels, name="global-default")
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == 7
    assert level["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] == "false"


def dangling(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    for condition in ((schema or {}).get("status") or {}).get("conditions") or ():
        if condition["type"] == "Dangling":
            return dict(condition)
    return None


async def test_a_flow_schema_says_whether_its_level_exists(
    objects: ObjectStore, controller: FlowControlConfigController
) -> None:
    schemas, levels = kinds(objects)
    await all_created(objects)
    await objects.create(schemas, {"metadata": {"name": "orphan"}, "spec": {
        "priorityLevelConfiguration": {"name": "batch"}, "matchingPrecedence": 600,
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "ml"}}],
                   "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}],
    }})

    async def condition(status: str) -> dict[str, Any] | None:
        found = dangling(await get(objects, schemas, "orphan"))
        return found if found is not None and found["status"] == status else None

    missing = await eventually(lambda: condition("True"), what="orphan Dangling")
    assert (missing["reason"], missing["message"]) == (
        "NotFound", 'This FlowSchema references the PriorityLevelConfiguration object named "batch" but there is no such object')
    assert missing["lastTransitionTime"]
    await objects.create(levels, {"metadata": {"name": "batch"}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}})
    found = await eventually(lambda: condition("False"), what="orphan no longer Dangling")
    assert (found["reason"], found["message"]) == (
        "Found", 'This FlowSchema references the PriorityLevelConfiguration object named "batch" and it exists')
    assert dangling(await objects.get(schemas, name="global-default"))["status"] == "False"  # type: ignore[index]
