"""The statuses the simulated member's operators (KubeRay's RayCluster and RayJob, the training
operator's jobs) write are stored: the member's API checks them against each kind's served
schema as the kind's CRD would, so a status it refuses never shows up here. A PyTorchJob's is
``test_sim_cluster.test_pytorchjob_gang_binds_all_and_succeeds``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from .test_sim_cluster import MIG, WHOLE, Sim, _sim, _template


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    async for value in _sim([MIG, WHOLE]):
        yield value


def _ray_cluster_spec(*, head_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    head = _template({"nvidia.com/gpu": 1}, annotations=head_annotations, container="ray-head")
    worker = _template({"nvidia.com/gpu": 1}, container="ray-worker")
    return {"headGroupSpec": {"rayStartParams": {}, "template": head},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                  "rayStartParams": {}, "template": worker}]}


async def test_a_ready_rayclusters_status_is_stored(sim: Sim) -> None:
    await sim.create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ray", "namespace": "default"},
                      "spec": _ray_cluster_spec()})

    async def ready() -> dict[str, Any] | None:
        status = (await sim.get("ray.io/v1", "RayCluster", "ray")).get("status") or {}
        return status if status.get("state") == "ready" else None

    status = await sim.until(ready)
    assert status == {"desiredWorkerReplicas": 2, "readyWorkerReplicas": 2, "availableWorkerReplicas": 2,
                      "observedGeneration": 1, "state": "ready"}


async def test_a_rayjobs_status_is_stored_from_start_to_end(sim: Sim) -> None:
    spec = {"entrypoint": "python train.py",
            "rayClusterSpec": _ray_cluster_spec(head_annotations={"sim.gpufed.io/duration": "60s"})}
    await sim.create({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "ray", "namespace": "default"},
                      "spec": spec})

    async def deployment_status(wanted: str) -> dict[str, Any] | None:
        status = (await sim.get("ray.io/v1", "RayJob", "ray")).get("status") or {}
        return status if status.get("jobDeploymentStatus") == wanted else None

    running = await sim.until(lambda: deployment_status("Running"))
    assert running["jobStatus"] == "RUNNING" and running["rayClusterName"] == "ray"
    done = await sim.until(lambda: deployment_status("Complete"))
    assert done["jobStatus"] == "SUCCEEDED"
    assert done["startTime"] == running["startTime"] < done["endTime"]
