"""A queue name added to a suspended job, as Kueue's webhook allows: the job is queued from then
on, as Kueue's job reconciler queues it (its Workload made, admitted, the job started with the
flavor's node labels); a running job is refused the label (tests/apiserver/test_kueue_queue_name_updates.py)."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.kueuepods import check_job_queue_name
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, eventually, propagation_policy, queued_workload, settled
from .test_admission import GPU, PLACEMENT, condition, create, get, kueue_obj, solo_fleet

LABEL = "kueue.x-k8s.io/queue-name"


async def test_a_suspended_job_given_a_queue_name_is_admitted_and_started(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    objects.admit_writes(check_job_queue_name)  # as the hub's API admits writes
    await solo_fleet(objects, gpus=2)
    await create(objects, kueue_obj("LocalQueue", "solo-lq", "default", spec={"clusterQueue": "solo"}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    job: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: "2"}}}]}}},
    }
    await create(objects, job)
    await settled(manager)
    assert await queued_workload(objects, "Job", "train") is None
    stored = await get(objects, "batch/v1", "Job", "train")
    assert stored is not None
    stored["metadata"]["labels"] = {LABEL: "solo-lq"}
    await objects.update(objects.registry.require("batch/v1", "Job"), stored)

    async def started() -> dict[str, Any] | None:
        obj = await get(objects, "batch/v1", "Job", "train")
        return obj if obj and obj["spec"].get("suspend") is False else None

    obj = await eventually(started, what="the Job admitted and started")
    assert obj["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": A100}
    assert condition(await queued_workload(objects, "Job", "train"), "Admitted")["status"] == "True"
