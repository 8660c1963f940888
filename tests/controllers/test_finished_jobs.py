"""The hub's ttl-after-finished controller: a Job its members finished is deleted from the hub
``ttlSecondsAfterFinished`` after the hub saw it finish, with its binding and Works; never
before, whatever time the member's clock gave the finish; and after a hub restart too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.apis.timestamps import format_time
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .conftest import FAST
from .fleet import eventually, get_object, node_shape, propagation_policy, put_cluster, settled

WORK_API = "work.gpufed.io/v1alpha1"
T0 = datetime(2024, 5, 1, 10, 0, 5, tzinfo=UTC)
TTL = 300
#: The member's clock, a day ahead of the hub's: its finish time must not decide the deletion.
MEMBER_FINISHED = "2024-05-02T10:00:00Z"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def job(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}, **spec},
    }


def rt(objects: ObjectStore, api_version: str, kind: str) -> Any:
    return objects.registry.require(api_version, kind)


get = get_object


async def report_complete(objects: ObjectStore, name: str) -> None:
    """The member's agent reports its copy of the Job Complete."""
    work = await eventually(lambda: get(objects, WORK_API, "Work", f"default-{name}-job", "gpufed-es-onprem"),
                            what="the Job's Work")
    manifest = work["spec"]["workload"]["manifests"][0]
    assert "ttlSecondsAfterFinished" not in manifest["spec"]
    complete = {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": MEMBER_FINISHED}
    entry = {
        "identifier": {"group": "batch", "version": "v1", "kind": "Job", "namespace": "default", "name": name, "ordinal": 0},
        "status": {"succeeded": 1, "completionTime": MEMBER_FINISHED, "conditions": [complete]},
        "health": "Healthy",
    }
    applied = {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
               "lastTransitionTime": format_time(T0), "observedGeneration": work["metadata"]["generation"]}
    status = {"conditions": [applied], "manifestStatuses": [entry]}
    await objects.update_status(rt(objects, WORK_API, "Work"), {**work, "status": status})


async def touch(objects: ObjectStore, name: str) -> None:
    found = await get(objects, "batch/v1", "Job", name)
    assert found is not None
    found["metadata"].setdefault("labels", {})["touched"] = "yes"
    await objects.update(rt(objects, "batch/v1", "Job"), found)


async def finished_on_hub(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    found = await get(objects, "batch/v1", "Job", name)
    conditions = ((found or {}).get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c["type"] == "Complete" and c["status"] == "True"), None)


async def test_a_finished_job_leaves_the_hub_once_its_ttl_passed(objects: ObjectStore) -> None:
    clock = Clock()
    await put_cluster(objects, "onprem", node_shape(1, gpus=8))
    await objects.create(rt(objects, "policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("jobs", kind="Job", api_version="batch/v1"))
    await objects.create(rt(objects, "batch/v1", "Job"), job("train", ttlSecondsAfterFinished=TTL))
    await objects.create(rt(objects, "batch/v1", "Job"), job("keep"))
    async with ControllerManager(objects, settings=FAST, clock=clock) as manager:
        await report_complete(objects, "train")
        await report_complete(objects, "keep")
        complete = await eventually(lambda: finished_on_hub(objects, "train"), what="the hub Job Complete")
        # The hub's time of the finish, not the member's a day ahead.
        assert complete["lastTransitionTime"] == format_time(T0)
        clock.now = T0 + timedelta(seconds=TTL - 10)
        await touch(objects, "train")  # looked at again 10 s before it is due: kept
        await settled(manager)
        assert await get(objects, "batch/v1", "Job", "train") is not None

    # Due while no hub ran: the next one deletes it, from what is stored.
    clock.now = T0 + timedelta(seconds=TTL)
    async with ControllerManager(objects, settings=FAST, clock=clock) as manager:

        async def gone() -> bool:
            return await get(objects, "batch/v1", "Job", "train") is None

        await eventually(gone, what="the finished Job deleted from the hub")
        await settled(manager)
        assert await get(objects, WORK_API, "Work", "default-train-job", "gpufed-es-onprem") is None
        assert await get(objects, WORK_API, "ResourceBinding", "train-job") is None
        # A finished Job without a TTL stays, with its Work.
        assert await finished_on_hub(objects, "keep") is not None
        assert await get(objects, WORK_API, "Work", "default-keep-job", "gpufed-es-onprem") is not None
