"""Writes of a custom resource's status subresource over HTTP, as kube's apiextensions
``statusStrategy`` answers them: only the status is pruned and validated (against the status
schema, ratcheting what did not change), a spec that a newer schema refuses does not stop the
status being written, spec changes in a status write and status changes in a main write are
ignored, and an invalid status is a 422 Status naming the field."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.storage import MemoryStore
from tests.apiserver.test_crds import CRD

Client = TestClient[Any, Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TRAINERS = "/apis/ml.example.com/v1/namespaces/default/trainers"


def _crd(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """test_crds' Trainer (status subresource on) with this spec and status schema."""
    crd = copy.deepcopy(CRD)
    crd["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {"type": "object", "properties": {"spec": spec, "status": status}},
    }
    return crd


STATUS = {"type": "object", "properties": {
    "phase": {"type": "string", "enum": ["Pending", "Running"]},
    "message": {"type": "string"},
}}
FIRST = _crd({"type": "object", "properties": {"model": {"type": "string"}, "legacy": {"type": "string"}}}, STATUS)
# The next version of the schema: a shorter model, a rule on the spec, no more ``legacy``, and
# a shorter status message.
SECOND = _crd(
    {"type": "object", "properties": {"model": {"type": "string", "maxLength": 3}},
     "x-kubernetes-validations": [{"rule": "self.model.startsWith('m')", "message": "model must start with m"}]},
    {**STATUS, "properties": {**STATUS["properties"], "message": {"type": "string", "maxLength": 5}}},
)


@pytest.fixture
async def api() -> AsyncIterator[Client]:
    async with MemoryStore() as memory:
        registry = DynamicRegistry(core_resources(), [crd_resource_type()])
        async with TestClient(TestServer(create_app(ObjectStore(memory, registry), registry))) as client:
            yield client


async def _serve(api: Client, crd: dict[str, Any], *, refused: dict[str, Any]) -> None:
    """Write ``crd`` and wait until its schema is the one served (``refused`` is refused)."""
    current = await api.get(f"{CRDS}/{crd['metadata']['name']}")
    if current.status == 200:
        crd = {**crd, "metadata": (await current.json())["metadata"]}
        assert (await api.put(f"{CRDS}/{crd['metadata']['name']}", json=crd)).status == 200
    else:
        assert (await api.post(CRDS, json=crd)).status == 201
    async with asyncio.timeout(10):
        while True:
            if (await api.post(f"{TRAINERS}?dryRun=All", json=refused)).status == 422:
                return
            await asyncio.sleep(0.02)


def _trainer(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": name}, "spec": spec}


async def _stored_under_the_first_schema(api: Client) -> dict[str, Any]:
    """A Trainer written under FIRST with a status, then SECOND served (its spec now invalid)."""
    await _serve(api, FIRST, refused=_trainer("probe", {"model": 1}))
    created = await api.post(TRAINERS, json={**_trainer("t", {"model": "llama", "legacy": "x"}), "status": {"phase": "Running"}})
    assert created.status == 201, await created.text()
    assert "status" not in await created.json(), "a create does not write the status"
    obj = await created.json()
    written = await api.put(f"{TRAINERS}/t/status", json={**obj, "status": {"phase": "Pending", "message": "a long message"}})
    assert written.status == 200, await written.text()
    await _serve(api, SECOND, refused=_trainer("probe", {"model": "long"}))
    return await (await api.get(f"{TRAINERS}/t")).json()


async def test_a_status_write_is_not_stopped_by_a_spec_the_new_schema_refuses(api: Client) -> None:
    stored = await _stored_under_the_first_schema(api)
    assert stored["spec"] == {"model": "llama", "legacy": "x"}
    # The main resource cannot be written as it is (the spec is checked)...
    again = await api.put(f"{TRAINERS}/t", json={**stored, "spec": {**stored["spec"], "model": "llama2"}})
    assert again.status == 422
    # ...but its status can, even with unknown fields refused: the spec is neither pruned nor checked.
    body = {**stored, "status": {"phase": "Running", "message": "a long message"}}
    written = await api.put(f"{TRAINERS}/t/status?fieldValidation=Strict", json=body)
    assert written.status == 200, await written.text()
    read = await (await api.get(f"{TRAINERS}/t")).json()
    assert read["spec"] == {"model": "llama", "legacy": "x"}
    # The message too long for the new schema did not change: ratcheted, as kube does.
    assert read["status"] == {"phase": "Running", "message": "a long message"}
    patched = await api.patch(
        f"{TRAINERS}/t/status", json={"status": {"phase": "Pending"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status == 200, await patched.text()
    assert (await patched.json())["status"] == {"phase": "Pending", "message": "a long message"}


async def test_an_invalid_status_is_refused_with_a_status_naming_the_field(api: Client) -> None:
    stored = await _stored_under_the_first_schema(api)
    for status, field, detail in [
        ({"phase": "Done", "message": "a long message"}, "status.phase", 'Unsupported value: "Done"'),
        ({"phase": "Running", "message": "changed and long"}, "status.message", "Too long"),
    ]:
        answer = await api.put(f"{TRAINERS}/t/status", json={**stored, "status": status})
        assert answer.status == 422, await answer.text()
        refused = await answer.json()
        assert refused["kind"] == "Status" and refused["reason"] == "Invalid"
        # SECOND has a rule: after an Unsupported or Too long value kube runs none and says so.
        assert [c["field"] for c in refused["details"]["causes"]] == [field, "<nil>"]
        assert detail in refused["message"]
    unknown = await api.put(f"{TRAINERS}/t/status?fieldValidation=Strict", json={**stored, "status": {"bogus": 1}})
    assert unknown.status == 400
    assert 'unknown field "status.bogus"' in (await unknown.json())["message"]


async def test_spec_changes_in_a_status_write_and_status_changes_in_a_main_write_are_ignored(api: Client) -> None:
    await _serve(api, FIRST, refused=_trainer("probe", {"model": 1}))
    created = await (await api.post(TRAINERS, json=_trainer("t", {"model": "m1"}))).json()
    body = {**copy.deepcopy(created), "spec": {"model": "m2"}, "status": {"phase": "Running"}}
    written = await api.put(f"{TRAINERS}/t/status", json=body)
    assert written.status == 200, await written.text()
    after = await written.json()
    assert after["spec"] == {"model": "m1"} and after["status"] == {"phase": "Running"}
    assert after["metadata"]["generation"] == created["metadata"]["generation"]
    main = await api.put(f"{TRAINERS}/t", json={**after, "spec": {"model": "m3"}, "status": {"phase": "Pending"}})
    assert main.status == 200, await main.text()
    assert (await main.json())["status"] == {"phase": "Running"}
    assert (await main.json())["spec"] == {"model": "m3"}
