"""Kueue's MultiKueue with the hub as the dispatcher: a MultiKueueCluster is ``Active`` while the
hub's Cluster of its name is Ready; an AdmissionCheck of the ``kueue.x-k8s.io/multikueue``
controller is ``Active`` as Kueue's controller says (SomeActiveClusters, NoUsableClusters,
BadConfig); a Workload's state of it goes ``Ready`` once one of its config's clusters is active,
and the workload is then placed on the active ones only; ``Rejected`` when its job names another
``managedBy``, which deactivates it."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission.multikueue import restrict_to_clusters
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.admissiongate import Kinds, default_managed_by
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.multikueue import MultiKueueController

from .fleet import eventually, node_shape, propagation_policy, put_cluster, queued_workload, settled
from .test_admission import GPU, KUEUE, PLACEMENT, condition, create, get, kueue_obj, team_queue
from .test_admission_preemption import job
from .test_admission_trainjob import API as TRAINER
from .test_admission_trainjob import runtime, trainjob

pytestmark = pytest.mark.waiting

POOL = {"gpufed.io/pool": "onprem"}
CLUSTER = "cluster.gpufed.io/v1alpha1"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


async def set_ready(objects: ObjectStore, name: str, status: str) -> None:
    """The Cluster's Ready condition, as the hub's health controller writes it."""
    rt = objects.registry.require(CLUSTER, "Cluster")
    cluster = await objects.get(rt, name=name)
    cluster["status"]["conditions"] = [{"type": "Ready", "status": status, "reason": "AgentReporting" if status == "True" else "AgentSilent",
                                        "message": "ok" if status == "True" else "no report for 5m0s",
                                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    await objects.update_status(rt, cluster)


def multikueue_check(name: str, config: str) -> dict[str, Any]:
    return kueue_obj("AdmissionCheck", name, spec={
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config},
    })


async def dispatching_fleet(objects: ObjectStore, manager: ControllerManager, *clusters: str) -> None:
    """Clusters east and west (west not Ready), a MultiKueueCluster for each of ``clusters``, a
    config naming them, a queue whose check is of the multikueue controller; jobs created in it
    get ``managedBy`` MultiKueue, as the hub's API defaults it."""
    objects.check_creates(default_managed_by(objects))
    for name in ("east", "west"):
        await put_cluster(objects, name, node_shape(2, gpus=8), labels=POOL, pods=[])
    await set_ready(objects, "west", "False")
    await create(objects, kueue_obj("ResourceFlavor", "onprem", spec={"nodeLabels": POOL}))
    for name in clusters:
        await create(objects, kueue_obj("MultiKueueCluster", name, spec={"kubeConfig": {"location": f"{name}-kubeconfig"}}))
    await create(objects, kueue_obj("MultiKueueConfig", "workers", spec={"clusters": list(clusters)}))
    await create(objects, multikueue_check("dispatch", "workers"))
    queue = team_queue("team-a", 8)
    queue["spec"]["admissionChecks"] = ["dispatch"]
    await create(objects, queue)
    await create(objects, kueue_obj("LocalQueue", "team-a", "default", spec={"clusterQueue": "team-a"}))
    await create(objects, propagation_policy("jobs", kind="Job", api_version="batch/v1", placement=PLACEMENT))
    await settled(manager)


async def placed_on_east_only(objects: ObjectStore, binding_name: str) -> None:
    """The binding is scheduled, the check's active cluster ``east`` its only choice and its cluster."""

    async def bound() -> dict[str, Any] | None:
        binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", binding_name)
        return binding if binding is not None and (binding.get("spec") or {}).get("clusters") else None

    binding = await eventually(bound, what=f"{binding_name} scheduled")
    assert binding["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["east"]
    assert [c["name"] for c in binding["spec"]["clusters"]] == ["east"]


def active(obj: dict[str, Any] | None) -> tuple[str, str, str]:
    cond = condition(obj or {}, "Active")
    return cond.get("status", ""), cond.get("reason", ""), cond.get("message", "")


async def test_the_check_is_active_with_some_clusters_and_the_job_runs_on_the_active_ones(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await dispatching_fleet(objects, manager, "east", "west", "north")
    assert active(await get(objects, KUEUE, "MultiKueueCluster", "east", None)) == ("True", "Active", "Connected")
    assert active(await get(objects, KUEUE, "MultiKueueCluster", "west", None)) == (
        "False", "ClientConnectionFailed", "no report for 5m0s")
    assert active(await get(objects, KUEUE, "MultiKueueCluster", "north", None)) == (
        "False", "BadConfig", 'no Cluster named "north" is registered with the hub')
    assert active(await get(objects, KUEUE, "AdmissionCheck", "dispatch", None)) == (
        "True", "SomeActiveClusters", "Inactive clusters: [west north]")

    await create(objects, job("a1", "team-a"))

    async def admitted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "a1")
        return wl if condition(wl or {}, "Admitted").get("status") == "True" else None

    wl = await eventually(admitted, what="admitted once its MultiKueue check is ready")
    [state] = wl["status"]["admissionChecks"]
    assert (state["name"], state["state"], state["message"]) == (
        "dispatch", "Ready", "The workload is dispatched by the hub to the active clusters [east]")

    await placed_on_east_only(objects, "a1-job")


async def test_no_active_cluster_leaves_the_check_inactive_until_one_is_ready(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await dispatching_fleet(objects, manager, "west")
    assert active(await get(objects, KUEUE, "AdmissionCheck", "dispatch", None)) == (
        "False", "NoUsableClusters", "Inactive clusters: [west]")
    await create(objects, job("a1", "team-a"))
    await settled(manager)
    wl = await queued_workload(objects, "Job", "a1")
    assert condition(wl or {}, "QuotaReserved").get("status") != "True"

    await set_ready(objects, "west", "True")

    async def placed() -> dict[str, Any] | None:
        binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "a1-job")
        return binding if binding is not None and (binding.get("spec") or {}).get("clusters") else None

    binding = await eventually(placed, what="a1 placed once west is ready")
    assert [c["name"] for c in binding["spec"]["clusters"]] == ["west"]
    assert active(await get(objects, KUEUE, "AdmissionCheck", "dispatch", None)) == (
        "True", "Active", "The admission check is active")


async def test_a_check_whose_config_is_missing_is_inactive_with_kueues_bad_config(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await create(objects, multikueue_check("orphan", "nowhere"))
    await create(objects, kueue_obj("AdmissionCheck", "other", spec={"controllerName": "example.com/budget"}))

    async def inactive() -> tuple[str, str, str] | None:
        state = active(await get(objects, KUEUE, "AdmissionCheck", "orphan", None))
        return state if state[0] else None

    assert await eventually(inactive, what="the check's Active condition") == (
        "False", "BadConfig",
        'Cannot load the AdmissionChecks parameters: multikueueconfigs.kueue.x-k8s.io "nowhere" not found')
    await settled(manager)
    assert active(await get(objects, KUEUE, "AdmissionCheck", "other", None)) == ("", "", "")


def test_a_policys_own_cluster_names_are_intersected_and_none_left_fits_no_cluster() -> None:
    spec: dict[str, Any] = {"placement": {"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["east", "west"]},
        {"affinityName": "backup", "clusterNames": ["south"]},
        {"affinityName": "any"},
    ]}}
    restrict_to_clusters(spec, frozenset({"west", "north"}))
    assert spec["placement"]["clusterAffinities"] == [
        {"affinityName": "primary", "clusterNames": ["west"]},
        {"affinityName": "backup", "clusterNames": ["south"], "exclude": ["north", "south", "west"]},
        {"affinityName": "any", "clusterNames": ["north", "west"]},
    ]
    untouched: dict[str, Any] = {"placement": {}}
    restrict_to_clusters(untouched, None)
    assert untouched == {"placement": {}}


async def test_a_workloads_change_is_looked_at_alone_not_with_every_workload(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A busy queue costs one Workload per event: the Workloads already dispatched (or without a
    MultiKueue check) are not looked at again when another one changes."""
    await dispatching_fleet(objects, manager, "east")
    await create(objects, job("a1", "team-a"))

    async def admitted(name: str) -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", name)
        return wl if condition(wl or {}, "Admitted").get("status") == "True" else None

    await eventually(lambda: admitted("a1"), what="a1 admitted")
    looked_at: list[str] = []
    ready = MultiKueueController._ready

    async def counting(self: MultiKueueController, wl: dict[str, Any], *args: Any) -> bool:
        looked_at.append(wl["metadata"]["name"])
        return await ready(self, wl, *args)

    monkeypatch.setattr(MultiKueueController, "_ready", counting)
    await create(objects, job("a2", "team-a"))
    await eventually(lambda: admitted("a2"), what="a2 admitted")
    assert looked_at and set(looked_at) == {(await queued_workload(objects, "Job", "a2"))["metadata"]["name"]}


async def test_a_workload_held_for_want_of_an_active_cluster_propagates_when_one_becomes_active(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its check went Ready, but by the time the detector looked no cluster of the config was
    active: a MultiKueueCluster becoming active looks at it again (nothing else about the
    workload changes)."""
    await dispatching_fleet(objects, manager, "east", "west")
    blocked = True
    dispatch = Kinds.dispatch_clusters

    def none_active_while_blocked(self: Kinds, wl: Any) -> frozenset[str] | None:
        return frozenset() if blocked else dispatch(self, wl)

    monkeypatch.setattr(Kinds, "dispatch_clusters", none_active_while_blocked)
    await create(objects, job("a1", "team-a"))

    async def admitted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "Job", "a1")
        return wl if condition(wl or {}, "Admitted").get("status") == "True" else None

    await eventually(admitted, what="a1 admitted")
    await settled(manager)
    binding = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "a1-job")
    assert binding is None or not (binding.get("spec") or {}).get("clusters")

    blocked = False
    await set_ready(objects, "west", "True")

    async def placed() -> dict[str, Any] | None:
        found = await get(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "a1-job")
        return found if found is not None and (found.get("spec") or {}).get("clusters") else None

    binding = await eventually(placed, what="a1 placed once west is active")
    assert sorted(binding["spec"]["placement"]["clusterAffinity"]["clusterNames"]) == ["east", "west"]


async def test_a_trainjob_is_dispatched_as_any_job_and_its_member_copy_is_the_trainers_to_run(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """Its Workload built from its runtime; ``managedBy`` MultiKueue at the hub, none in its Work,
    as Kueue's TrainJob adapter creates the worker's copy."""
    await dispatching_fleet(objects, manager, "east", "west")
    await create(objects, propagation_policy("training", kind="TrainJob", api_version=TRAINER, placement=PLACEMENT))
    await create(objects, runtime())
    await settled(manager)
    managed = trainjob("t1", 1)
    managed["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    await create(objects, managed)

    async def admitted() -> dict[str, Any] | None:
        wl = await queued_workload(objects, "TrainJob", "t1")
        return wl if condition(wl or {}, "Admitted").get("status") == "True" else None

    wl = await eventually(admitted, what="the TrainJob admitted once its MultiKueue check is ready")
    assert [ps["name"] for ps in wl["spec"]["podSets"]] == ["dataset-initializer", "node"]
    [state] = wl["status"]["admissionChecks"]
    assert (state["state"], state["message"]) == ("Ready", "The workload is dispatched by the hub to the active clusters [east]")

    await placed_on_east_only(objects, "t1-trainjob")

    async def propagated() -> dict[str, Any] | None:
        works = (await objects.list(objects.registry.require("work.gpufed.io/v1alpha1", "Work"))).items
        manifests = [w["spec"]["workload"]["manifests"][0] for w in works if w["metadata"]["name"] == "default-t1-trainjob"]
        return manifests[0] if manifests else None

    copy = await eventually(propagated, what="t1's Work")
    assert "managedBy" not in copy["spec"] and copy["spec"]["suspend"] is False
    hub = await get(objects, TRAINER, "TrainJob", "t1")
    assert hub is not None and hub["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"


def pytorchjob(name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "registry.local/train:1", "resources": {"limits": {GPU: "1"}}}]}}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {"runPolicy": {"managedBy": MULTIKUEUE},
                 "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": 1, "template": template}}},
    }


async def member_copy(objects: ObjectStore, work_name: str) -> dict[str, Any]:
    async def propagated() -> dict[str, Any] | None:
        works = (await objects.list(objects.registry.require("work.gpufed.io/v1alpha1", "Work"))).items
        manifests = [w["spec"]["workload"]["manifests"][0] for w in works if w["metadata"]["name"] == work_name]
        return manifests[0] if manifests else None

    return await eventually(propagated, what=f"the Work {work_name}")


async def test_a_job_queued_to_a_multikueue_queue_is_managed_by_multikueue_at_the_hub_and_by_its_member_there(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """Kueue's Job webhook defaults ``managedBy`` for a queue with a MultiKueue check (a Job naming
    the Job controller included); the adapter creates the worker's copy without it."""
    await dispatching_fleet(objects, manager, "east")
    named = job("a2", "team-a")
    named["spec"]["managedBy"] = "kubernetes.io/job-controller"
    await create(objects, job("a1", "team-a"))
    await create(objects, named)
    for name in ("a1", "a2"):
        hub = await get(objects, "batch/v1", "Job", name)
        assert hub is not None and hub["spec"]["managedBy"] == MULTIKUEUE
        copy = await member_copy(objects, f"default-{name}-job")
        assert "managedBy" not in copy["spec"], copy["spec"]


async def test_managed_by_is_defaulted_only_for_a_multikueue_queue_and_never_over_another_controller(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await dispatching_fleet(objects, manager, "east")
    await create(objects, team_queue("team-b", 8))
    await create(objects, kueue_obj("LocalQueue", "team-b", "default", spec={"clusterQueue": "team-b"}))
    other = job("a2", "team-a")
    other["spec"]["managedBy"] = "example.com/own-controller"
    unqueued = job("a4", "team-a")
    del unqueued["metadata"]["labels"]
    for obj in (job("a1", "team-b"), other, job("a3", "no-such-queue"), unqueued):
        await create(objects, obj)
    managed = {name: ((await get(objects, "batch/v1", "Job", name)) or {})["spec"].get("managedBy") for name in ("a1", "a2", "a3", "a4")}
    assert managed == {"a1": None, "a2": "example.com/own-controller", "a3": None, "a4": None}


async def test_a_kubeflow_job_managed_by_multikueue_goes_to_its_member_without_it(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """As Kueue's Kubeflow adapter clears ``runPolicy.managedBy`` on the worker's copy."""
    await dispatching_fleet(objects, manager, "east")
    await create(objects, propagation_policy("training", kind="PyTorchJob", api_version="kubeflow.org/v1", placement=PLACEMENT))
    await settled(manager)
    await create(objects, pytorchjob("p1"))
    copy = await member_copy(objects, "default-p1-pytorchjob")
    assert "managedBy" not in copy["spec"]["runPolicy"], copy["spec"]["runPolicy"]
    hub = await get(objects, "kubeflow.org/v1", "PyTorchJob", "p1")
    assert hub is not None and hub["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE


@pytest.mark.parametrize(("kind", "managed_by", "why"), [
    ("Job", "example.com/own-controller", 'spec.managedBy to be "kueue.x-k8s.io/multikueue" not "example.com/own-controller"'),
    ("Job", None, 'spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'),
    ("PyTorchJob", "kubeflow.org/training-operator",
     'spec.managedBy to be "kueue.x-k8s.io/multikueue" not "kubeflow.org/training-operator"'),
])
async def test_a_job_another_controller_manages_is_rejected_by_the_multikueue_check_not_dispatched(
    objects: ObjectStore, manager: ControllerManager, kind: str, managed_by: str | None, why: str,
) -> None:
    """As Kueue's multikueue workload controller: its adapter's ``IsJobManagedByKueue`` says no, so
    the check is ``Rejected`` with the adapter's reason, and the Workload is deactivated as for any
    Rejected check; nothing goes to a member. A job keeps its own ``managedBy`` (or none) when it
    names another controller, or when its LocalQueue did not exist yet as it was created."""
    await dispatching_fleet(objects, manager, "east")
    if kind == "PyTorchJob":
        await create(objects, propagation_policy("training", kind="PyTorchJob", api_version="kubeflow.org/v1", placement=PLACEMENT))
        obj = pytorchjob("p1")
        obj["spec"]["runPolicy"]["managedBy"] = managed_by
    else:
        obj = job("a1", "team-a")
        if managed_by is not None:
            obj["spec"]["managedBy"] = managed_by
    late = managed_by != "example.com/own-controller"  # else MultiKueue's managedBy would be defaulted
    if late:
        obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "late"
    created = await create(objects, obj)
    assert created["spec"].get("managedBy", created["spec"].get("runPolicy", {}).get("managedBy")) == managed_by
    if late:
        await create(objects, kueue_obj("LocalQueue", "late", "default", spec={"clusterQueue": "team-a"}))
    name = obj["metadata"]["name"]

    async def rejected() -> dict[str, Any] | None:
        wl = await queued_workload(objects, kind, name)
        return wl if wl is not None and wl["spec"].get("active") is False else None

    wl = await eventually(rejected, what=f"{name}'s Workload deactivated by its rejected check")
    evicted = condition(wl, "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "DeactivatedDueToAdmissionCheck")
    # The eviction resets the check (as Kueue's does); the rejection's message is in the Event.
    [state] = wl["status"]["admissionChecks"]
    assert (state["state"], state["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Rejected")
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    assert [(e["type"], e["message"]) for e in events
            if e["involvedObject"]["name"] == wl["metadata"]["name"] and e["reason"] == "AdmissionCheckRejected"] == [
        ("Warning", f"Deactivating workload because AdmissionCheck for dispatch was Rejected: "
                    f"The owner is not managed by Kueue: Expecting {why}")]
    await settled(manager)
    works = (await objects.list(objects.registry.require("work.gpufed.io/v1alpha1", "Work"))).items
    assert not [w for w in works if name in w["metadata"]["name"]]
    hub = await get(objects, obj["apiVersion"], kind, name)
    assert hub is not None and (hub["spec"].get("suspend") or hub["spec"].get("runPolicy", {}).get("suspend")) is True
