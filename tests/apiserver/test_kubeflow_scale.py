"""The scale subresource of the Kubeflow jobs whose CRDs declare one (PyTorchJob, PaddleJob,
JAXJob): an autoscaling/v1 Scale over the Worker role's replicas, its active pods and the selector
the operator reports for them; TFJob, XGBoostJob and MPIJob have none."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apis.kubeflow import TRAINING_KINDS

CONTAINERS = {"PyTorchJob": "pytorch", "PaddleJob": "paddle", "JAXJob": "jax", "TFJob": "tensorflow",
              "XGBoostJob": "xgboost", "MPIJob": "mpi"}


def job(kind: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": CONTAINERS[kind], "image": "train:1"}]}}
    # The XGBoost operator's webhook wants a Master.
    roles = {"Master": {"replicas": 1, "template": pod}} if kind == "XGBoostJob" else {}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "train", "namespace": "default"},
            "spec": {TRAINING_KINDS[kind].specs_field: {**roles, "Worker": {"replicas": 2, "template": pod}}},
            "status": {"replicaStatuses": {"Worker": {"active": 1, "selector": "training.kubeflow.org/job-name=train"}}}}


def url(kind: str, suffix: str = "") -> str:
    return f"/apis/kubeflow.org/v1/namespaces/default/{TRAINING_KINDS[kind].plural}{suffix}"


@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob", "JAXJob"])
async def test_the_worker_role_is_read_and_set_through_scale(api: TestClient[Any, Any], kind: str) -> None:
    created = await api.post(url(kind), json=job(kind))
    assert created.status == 201, await created.text()
    status = await api.put(url(kind, "/train/status"), json={**await created.json(), **{"status": job(kind)["status"]}})
    assert status.status == 200, await status.text()

    shown = await api.get(url(kind, "/train/scale"))
    assert shown.status == 200, await shown.text()
    scale = await shown.json()
    assert (scale["kind"], scale["spec"], scale["status"]) == (
        "Scale", {"replicas": 2}, {"replicas": 1, "selector": "training.kubeflow.org/job-name=train"})

    scaled = await api.patch(url(kind, "/train/scale"), json={"spec": {"replicas": 5}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert scaled.status == 200, await scaled.text()
    stored = await (await api.get(url(kind, "/train"))).json()
    assert stored["spec"][TRAINING_KINDS[kind].specs_field]["Worker"]["replicas"] == 5


@pytest.mark.parametrize("kind", ["TFJob", "XGBoostJob", "MPIJob"])
async def test_a_kind_without_scale_in_its_crd_has_no_scale(api: TestClient[Any, Any], kind: str) -> None:
    assert (await api.post(url(kind), json=job(kind))).status == 201
    answer = await api.get(url(kind, "/train/scale"))
    assert answer.status == 404


async def test_discovery_lists_the_scale_subresources(api: TestClient[Any, Any]) -> None:
    listed = {r["name"] for r in (await (await api.get("/apis/kubeflow.org/v1")).json())["resources"]}
    assert {"pytorchjobs/scale", "paddlejobs/scale", "jaxjobs/scale"} <= listed
    assert not {"tfjobs/scale", "xgboostjobs/scale", "mpijobs/scale"} & listed
