"""Server-side apply of the scale subresource, as kube-apiserver takes it: the applied Scale's
``spec.replicas`` set on the parent and owned there by the applier (an ``Apply`` entry with
``subresource: scale`` owning the parent's replicas field), conflicts with the replicas' other
owners named as kube names them, and ``force`` taking them over."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patches import PatchType

from .kinds import deployment

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
REPLICAS = {"f:spec": {"f:replicas": {}}}


def scale(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name}, "spec": {"replicas": replicas}}


def entries(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """managedFields by (manager, operation, subresource)."""
    return {(m["manager"], m["operation"], m.get("subresource", "")): m for m in obj["metadata"]["managedFields"]}


async def test_an_applied_scale_sets_and_owns_the_replicas(objects_on: ObjectStore) -> None:
    deploy = objects_on.registry.require("apps/v1", "Deployment")
    await objects_on.create(deploy, deployment("web", replicas=2), field_manager="kubectl-create")

    with pytest.raises(errors.Conflict) as caught:
        await objects_on.apply_scale(deploy, namespace="default", name="web", patch=scale("web", 5), field_manager="hpa")
    status = caught.value.to_status()
    assert status["code"] == 409
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "kubectl-create" using apps/v1: .spec.replicas'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl-create" using apps/v1', "field": ".spec.replicas"}
    ]
    assert (await objects_on.get(deploy, namespace="default", name="web"))["spec"]["replicas"] == 2

    answer = await objects_on.apply_scale(
        deploy, namespace="default", name="web", patch=scale("web", 5), field_manager="hpa", force=True
    )
    assert answer["kind"] == "Scale" and answer["spec"]["replicas"] == 5
    stored = await objects_on.get(deploy, namespace="default", name="web")
    assert stored["spec"]["replicas"] == 5
    assert stored["metadata"]["generation"] == 2
    owners = entries(stored)
    # As kube's ScaleHandler writes it: the parent's version and field, no time.
    assert owners[("hpa", "Apply", "scale")] == {
        "manager": "hpa", "operation": "Apply", "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1", "fieldsV1": REPLICAS, "subresource": "scale",
    }
    assert "f:replicas" not in owners[("kubectl-create", "Update", "")]["fieldsV1"]["f:spec"]
    assert stored["metadata"]["managedFields"][0]["manager"] == "hpa"  # appliers first

    # The same replicas applied by another manager: shared, no conflict.
    await objects_on.apply_scale(deploy, namespace="default", name="web", patch=scale("web", 5), field_manager="keda")
    owners = entries(await objects_on.get(deploy, namespace="default", name="web"))
    assert owners[("keda", "Apply", "scale")]["fieldsV1"] == REPLICAS
    assert owners[("hpa", "Apply", "scale")]["fieldsV1"] == REPLICAS

    # A main-resource apply of other replicas conflicts with both, named with their subresource.
    with pytest.raises(errors.Conflict) as caught:
        await objects_on.patch(
            deploy, namespace="default", name="web", patch_type=PatchType.APPLY,
            patch=deployment("web", replicas=1), field_manager="ci",
        )
    assert caught.value.to_status()["message"] == (
        'Apply failed with 2 conflicts: conflicts with "hpa" with subresource "scale":\n- .spec.replicas\n'
        'conflicts with "keda" with subresource "scale":\n- .spec.replicas'
    )


async def test_an_applied_scale_that_changes_nothing_writes_nothing(objects_on: ObjectStore) -> None:
    deploy = objects_on.registry.require("apps/v1", "Deployment")
    await objects_on.create(deploy, deployment("web", replicas=2), field_manager="kubectl-create")
    await objects_on.apply_scale(deploy, namespace="default", name="web", patch=scale("web", 3), field_manager="hpa", force=True)
    before = await objects_on.get(deploy, namespace="default", name="web")
    await objects_on.apply_scale(deploy, namespace="default", name="web", patch=scale("web", 3), field_manager="hpa")
    after = await objects_on.get(deploy, namespace="default", name="web")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (deployment("web", replicas=3), 400, "invalid object type: apps/v1, Kind=Deployment"),
        (scale("web", -1), 422, 'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'),
    ],
)
async def test_an_applied_scale_kube_refuses(objects: ObjectStore, body: dict[str, Any], code: int, message: str) -> None:
    deploy = objects.registry.require("apps/v1", "Deployment")
    await objects.create(deploy, deployment("web", replicas=2), field_manager="kubectl-create")
    with pytest.raises(errors.ApiError) as caught:
        await objects.apply_scale(deploy, namespace="default", name="web", patch=body, field_manager="hpa", force=True)
    assert (caught.value.code, caught.value.to_status()["message"]) == (code, message)


async def test_apply_patch_of_scale_over_http(api: TestClient[Any, Any]) -> None:
    """Refused with 415 before; kube takes the apply-patch+yaml body (YAML) and ``force``."""
    assert (await api.post(DEPLOYMENTS, json=deployment("web", replicas=2))).status == 201
    body = "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: web\nspec:\n  replicas: 4\n"
    refused = await api.patch(f"{DEPLOYMENTS}/web/scale?fieldManager=hpa", data=body, headers=APPLY)
    assert refused.status == 409
    assert (await refused.json())["message"].startswith('Apply failed with 1 conflict: conflict with "')
    applied = await api.patch(f"{DEPLOYMENTS}/web/scale?fieldManager=hpa&force=true", data=body, headers=APPLY)
    assert applied.status == 200
    answer = await applied.json()
    assert (answer["kind"], answer["spec"]["replicas"]) == ("Scale", 4)
    parent = await (await api.get(f"{DEPLOYMENTS}/web")).json()
    assert parent["spec"]["replicas"] == 4
    assert entries(parent)[("hpa", "Apply", "scale")]["fieldsV1"] == REPLICAS
    merged = await api.patch(
        f"{DEPLOYMENTS}/web/scale?force=true", data='{"spec":{"replicas":1}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert merged.status == 422
    assert (await merged.json())["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
    )
