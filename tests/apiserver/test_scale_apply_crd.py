"""Server-side apply of a custom resource's ``/scale``: the applied Scale's ``spec.replicas`` is
set at the CRD's ``specReplicasPath`` and owned there by the applier, as kube's scale handler
maps it (the parent's replicas field by version)."""

from __future__ import annotations

from typing import Any

from .test_crd_apply import Client, api_registry, crd, install  # noqa: F401 (fixtures)

TRAINERS = "/apis/ml.example.com/v1/namespaces/default/trainers"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"workers": {"type": "integer"}, "image": {"type": "string"}}},
    "status": {"type": "object", "properties": {"workers": {"type": "integer"}}},
}}


async def created_by_creator(api: Client) -> None:
    """Trainer ``t`` (2 workers, image ``i``), created by the manager ``creator``; its CRD's
    scale subresource at ``.spec.workers``."""
    definition = crd("ml.example.com", "Trainer", "trainers", SCHEMA)
    definition["spec"]["versions"][0]["subresources"]["scale"] = {
        "specReplicasPath": ".spec.workers", "statusReplicasPath": ".status.workers",
    }
    await install(api, definition, TRAINERS)
    trainer = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "t"},
               "spec": {"workers": 2, "image": "i"}}
    assert (await api.post(f"{TRAINERS}?fieldManager=creator", json=trainer)).status == 201


async def test_an_applied_scale_sets_and_owns_the_crds_replicas_path(api: Client) -> None:
    await created_by_creator(api)
    body = "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: t\nspec:\n  replicas: 6\n"
    refused = await api.patch(f"{TRAINERS}/t/scale?fieldManager=autoscaler", data=body, headers=APPLY)
    assert refused.status == 409
    assert (await refused.json())["message"] == (
        'Apply failed with 1 conflict: conflict with "creator" using ml.example.com/v1: .spec.replicas'
    )
    applied = await api.patch(f"{TRAINERS}/t/scale?fieldManager=autoscaler&force=true", data=body, headers=APPLY)
    assert applied.status == 200, await applied.text()
    stored = await (await api.get(f"{TRAINERS}/t")).json()
    assert stored["spec"] == {"workers": 6, "image": "i"}
    owners = {(m["manager"], m["operation"], m.get("subresource", "")): m for m in stored["metadata"]["managedFields"]}
    assert owners[("autoscaler", "Apply", "scale")]["fieldsV1"] == {"f:spec": {"f:workers": {}}}
    assert owners[("autoscaler", "Apply", "scale")]["apiVersion"] == "ml.example.com/v1"
    assert owners[("creator", "Update", "")]["fieldsV1"]["f:spec"] == {".": {}, "f:image": {}}


async def test_a_scale_update_is_recorded_without_a_time(api: Client) -> None:
    """kube's ScaleHandler.ToParent gives the replicas' new owner an entry at the parent's version
    without a time (it takes times from the parent's entries only), for a PUT and a patch alike."""
    await created_by_creator(api)
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "t"}, "spec": {"replicas": 4}}
    assert (await api.put(f"{TRAINERS}/t/scale?fieldManager=scaler", json=scale)).status == 200
    merge = {"Content-Type": "application/merge-patch+json"}
    patched = await api.patch(f"{TRAINERS}/t/scale?fieldManager=patcher", json={"spec": {"replicas": 5}}, headers=merge)
    assert patched.status == 200, await patched.text()
    stored = await (await api.get(f"{TRAINERS}/t")).json()
    owners = {(m["manager"], m["operation"], m.get("subresource", "")): m for m in stored["metadata"]["managedFields"]}
    assert owners.pop(("patcher", "Update", "scale")) == {
        "manager": "patcher", "operation": "Update", "apiVersion": "ml.example.com/v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:workers": {}}}, "subresource": "scale",
    }
    assert list(owners) == [("creator", "Update", "")] and "time" in owners[("creator", "Update", "")]


async def test_a_custom_resources_scale_takes_its_uid_as_a_precondition(api: Client) -> None:
    definition = crd("ml.example.com", "Trainer", "trainers", SCHEMA)
    definition["spec"]["versions"][0]["subresources"]["scale"] = {
        "specReplicasPath": ".spec.workers", "statusReplicasPath": ".status.workers",
    }
    await install(api, definition, TRAINERS)
    trainer = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "t"}, "spec": {"workers": 2}}
    created = await (await api.post(TRAINERS, json=trainer)).json()
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "t", "uid": "other"},
             "spec": {"replicas": 4}}
    refused = await api.put(f"{TRAINERS}/t/scale", json=scale)
    assert refused.status == 409
    status = await refused.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on scale.ml.example.com "t": Precondition failed: '
        f"UID in precondition: other, UID in object meta: {created['metadata']['uid']}"
    )
    scale["metadata"]["uid"] = created["metadata"]["uid"]
    accepted = await api.put(f"{TRAINERS}/t/scale", json=scale)
    assert accepted.status == 200, await accepted.text()
    assert (await (await api.get(f"{TRAINERS}/t")).json())["spec"]["workers"] == 4


async def test_a_custom_resources_scale_as_a_table_has_the_crds_columns(api: Client) -> None:
    """kube serves a CRD's scale through the CRD's table convertor: its printer columns (by
    default NAME and AGE) read from the Scale, not the built-in kinds' Scale printer."""
    definition = crd("ml.example.com", "Trainer", "trainers", SCHEMA)
    definition["spec"]["versions"][0]["subresources"]["scale"] = {
        "specReplicasPath": ".spec.workers", "statusReplicasPath": ".status.workers",
    }
    await install(api, definition, TRAINERS)
    trainer = {"apiVersion": "ml.example.com/v1", "kind": "Trainer", "metadata": {"name": "t"}, "spec": {"workers": 2}}
    assert (await api.post(TRAINERS, json=trainer)).status == 201
    table = await (await api.get(f"{TRAINERS}/t/scale", headers=TABLE)).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["rows"][0]["cells"][0] == "t"
