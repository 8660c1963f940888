"""Kueue's Deployment sample (``serving-workloads/sample-deployment.yaml``): the label
``kueue.x-k8s.io/queue-name`` only on the pod template. Kueue's pod integration queues every Pod
the Deployment makes; the hub queues the Deployment by that label as by its own: a Workload in the
LocalQueue it names, held (no binding) until admitted, then placed. A member that runs Kueue gets
the template's label (its Kueue queues the Pods again), any other a template without it."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.admission import objects as adm
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.works import queue_for_member

from . import fleet
from .test_admission import PLACEMENT, condition, create, get, kueue_obj, placed, team_queue

LABEL = "kueue.x-k8s.io/queue-name"


def template_queued(name: str, queue: str, *, replicas: int) -> dict[str, Any]:
    obj = fleet.deployment(name, replicas=replicas)
    obj["spec"]["template"]["metadata"]["labels"][LABEL] = queue
    return obj


def test_the_queue_is_read_from_a_deployments_pod_template() -> None:
    sample = template_queued("web", "user-queue", replicas=3)
    assert adm.queue_name(sample) == "user-queue" and adm.template_queued(sample)
    own = copy.deepcopy(sample)
    own["metadata"]["labels"][LABEL] = "team-lq"  # its own label wins
    assert adm.queue_name(own) == "team-lq" and not adm.template_queued(own)
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": copy.deepcopy(sample["spec"])}
    assert adm.queue_name(job) is None  # a Job's template label is not Kueue's way to queue a Job
    assert adm.queue_name(fleet.deployment("plain", replicas=1)) is None


def test_a_member_without_kueue_gets_the_template_without_the_label() -> None:
    kept = template_queued("web", "user-queue", replicas=3)
    queue_for_member(kept, member_runs_kueue=True)
    assert kept == template_queued("web", "user-queue", replicas=3)
    stripped = template_queued("web", "user-queue", replicas=3)
    queue_for_member(stripped, member_runs_kueue=False)
    assert stripped["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    assert stripped["metadata"]["labels"] == {"app": "web"}


async def test_a_deployment_queued_by_its_pod_template_is_held_then_admitted(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await fleet.put_cluster(objects, "onprem", fleet.node_shape(2, gpus=8), labels={"gpufed.io/pool": "onprem"}, pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": {"gpufed.io/pool": "onprem"}}))
    await create(objects, team_queue("team-a", 6))
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, fleet.propagation_policy("all", placement=PLACEMENT))
    await fleet.settled(manager)
    await create(objects, template_queued("web", "team-a", replicas=4))

    async def admitted() -> dict[str, Any] | None:
        wl = await fleet.queued_workload(objects, "Deployment", "web")
        return wl if condition(wl, "Admitted").get("status") == "True" else None

    wl = await fleet.eventually(admitted, what="web admitted")
    assert wl["spec"]["queueName"] == "team-a"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 4)]
    assert await fleet.eventually(lambda: placed(objects, "web"), what="web placed") == {"onprem": 4}

    # A second one beyond the quota waits with Kueue's reason, unbound.
    await create(objects, template_queued("more", "team-a", replicas=4))

    async def waiting() -> dict[str, Any] | None:
        cond = condition(await fleet.queued_workload(objects, "Deployment", "more"), "QuotaReserved")
        return cond if cond.get("status") == "False" else None

    assert (await fleet.eventually(waiting, what="more waiting"))["reason"] == "Pending"
    await fleet.settled(manager)
    assert await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "more-deployment") is None
    propagated = condition(await get(objects, "apps/v1", "Deployment", "more"), "Propagated")
    assert (propagated["status"], propagated["reason"]) == ("False", "WaitingForQuota")

    # The member (no Kueue) runs web's Pods from a template without the queue label.
    works = (await objects.list(objects.registry.require("work.gpufed.io/v1alpha1", "Work"))).items
    manifest = next(w for w in works if w["metadata"]["name"] == "default-web-deployment")["spec"]["workload"]["manifests"][0]
    assert manifest["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
