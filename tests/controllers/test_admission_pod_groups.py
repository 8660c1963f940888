"""Kueue's pod groups at the hub: Pods with the label ``kueue.x-k8s.io/pod-group-name`` and the
annotation ``kueue.x-k8s.io/pod-group-total-count`` share one Workload named for the group, made
only once the total count of Pods is there, with one pod set per role (the role hash of Kueue's
webhook); admitted, every Pod of the group is ungated in one go; the group finishes once all its
Pods have succeeded, and only then do its Pods lose Kueue's finalizer. Kueue's webhook refuses a
group label without its count (and the other rules of ``validatePodGroupMetadata``)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.kueuepods import check_managed_label
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.admissiongate import hold_queued_workload
from controlplane.controllers.manager import ControllerManager

from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled
from .test_admission import GPU, KUEUE, PLACEMENT, condition, create, get, kueue_obj
from .test_admission_checks import fleet_with_check
from .test_admission_job_events import events_on
from .test_admission_stopping import stop
from .test_pod_replica import placed

pytestmark = pytest.mark.waiting

POD = ("v1", "Pod")
KUEUE_GATE = {"name": "kueue.x-k8s.io/admission"}
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
FINALIZER = "kueue.x-k8s.io/managed"


def group_pod(name: str, *, group: str = "grp", total: str | None = "3", gpus: int = 1, queue: str = "team-lq") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue, GROUP: group}}
    if total is not None:
        meta["annotations"] = {TOTAL: total}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: str(gpus)}}}]}}


async def team(objects: ObjectStore, manager: ControllerManager, *, gpus: int = 4, local_queue: bool = True) -> None:
    """One cluster of A100s, a ClusterQueue of ``gpus`` GPUs and (``local_queue``) its LocalQueue."""
    objects.check_creates(hold_queued_workload)  # as the hub's API creates Pods
    objects.admit_writes(check_managed_label)  # and admits their writes
    await put_cluster(objects, "onprem", node_shape(2, gpus=8), pods=[])
    await create(objects, kueue_obj("ResourceFlavor", "a100", spec={}))
    await create(objects, kueue_obj("ClusterQueue", "team", spec={
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}],
    }))
    if local_queue:
        await create(objects, kueue_obj("LocalQueue", "team-lq", "default", spec={"clusterQueue": "team"}))
    await create(objects, propagation_policy("pods", kind="Pod", api_version="v1", placement=PLACEMENT))
    await settled(manager)


async def group_workload(objects: ObjectStore, name: str = "grp") -> dict[str, Any] | None:
    return await get(objects, KUEUE, "Workload", name)


async def pod(objects: ObjectStore, name: str) -> dict[str, Any]:
    found = await get(objects, *POD, name)
    assert found is not None
    return found


async def test_a_group_of_three_pods_gets_one_workload_once_all_three_are_there(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team(objects, manager, local_queue=False)
    for name in ("g0", "g1"):
        await create(objects, group_pod(name))
    await settled(manager)
    assert await group_workload(objects) is None
    assert "'grp' group has fewer runnable pods than expected" in await events_on(objects, "Pod", "g0", "ErrWorkloadCompose")

    await create(objects, group_pod("g2"))
    wl = await eventually(lambda: group_workload(objects), what="the group's Workload")
    [pod_set] = wl["spec"]["podSets"]
    hashes = {(await pod(objects, n))["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] for n in ("g0", "g1", "g2")}
    assert hashes == {pod_set["name"]} and len(pod_set["name"]) == 8  # one role: Kueue's 8-digit hash
    assert pod_set["count"] == 3
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {GPU: "1"}
    assert wl["spec"]["queueName"] == "team-lq"
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    assert sorted((r["kind"], r["name"], r.get("controller")) for r in wl["metadata"]["ownerReferences"]) == [
        ("Pod", "g0", None), ("Pod", "g1", None), ("Pod", "g2", None)]
    assert await events_on(objects, "Pod", "g0", "CreatedWorkload") == ["Created Workload: default/grp"]
    assert not [w for w in (await objects.list(objects.registry.require(KUEUE, "Workload"), namespace="default")).items
                if w["metadata"]["name"] != "grp"]  # no Workload of its own for any Pod of the group

    await settled(manager)  # waiting for its LocalQueue: every Pod of the group keeps its gate
    for name in ("g0", "g1", "g2"):
        assert (await pod(objects, name))["spec"]["schedulingGates"] == [KUEUE_GATE]
        assert await placed(objects, name) is None

    await create(objects, kueue_obj("LocalQueue", "team-lq", "default", spec={"clusterQueue": "team"}))
    admitted = await eventually(
        lambda: _admitted(objects), what="the group admitted")
    assert [a["count"] for a in admitted["status"]["admission"]["podSetAssignments"]] == [3]
    for name in ("g0", "g1", "g2"):
        started = await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated")
        assert "schedulingGates" not in started["spec"]
        await eventually(lambda n=name: placed(objects, n), what=f"{name} placed")
        assert await events_on(objects, "Pod", name, "Started") == ["Admitted by clusterQueue team"]


async def _admitted(objects: ObjectStore) -> dict[str, Any] | None:
    wl = await group_workload(objects)
    return wl if condition(wl, "Admitted").get("status") == "True" else None


async def _ungated(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    found = await get(objects, *POD, name)
    return found if found is not None and not found["spec"].get("schedulingGates") else None


async def test_a_group_that_does_not_fit_keeps_every_pod_gated(objects: ObjectStore, manager: ControllerManager) -> None:
    """Admitted whole or not at all: 3 GPUs asked, 2 in the queue."""
    await team(objects, manager, gpus=2)
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name))

    async def waiting() -> dict[str, Any] | None:
        wl = await group_workload(objects)
        return wl if condition(wl, "QuotaReserved").get("status") == "False" else None

    await eventually(waiting, what="the group waiting for quota")
    await settled(manager)
    for name in ("g0", "g1", "g2"):
        assert (await pod(objects, name))["spec"]["schedulingGates"] == [KUEUE_GATE]


async def test_pods_of_two_shapes_are_two_roles(objects: ObjectStore, manager: ControllerManager) -> None:
    await team(objects, manager, gpus=8)
    await create(objects, group_pod("small-a", gpus=1))
    await create(objects, group_pod("big", gpus=2))
    await create(objects, group_pod("small-b", gpus=1))
    wl = await eventually(lambda: group_workload(objects), what="the group's Workload")
    small = (await pod(objects, "small-a"))["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
    big = (await pod(objects, "big"))["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
    assert small != big
    assert [(p["name"], p["count"], p["template"]["spec"]["containers"][0]["resources"]["requests"][GPU])
            for p in wl["spec"]["podSets"]] == sorted([(small, 2, "1"), (big, 1, "2")])
    await eventually(lambda: _admitted(objects), what="the group admitted")
    for name in ("small-a", "big", "small-b"):
        await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated")


async def test_the_group_finishes_when_all_its_pods_succeed_and_only_then_loses_its_finalizers(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    await team(objects, manager)
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name))
    await eventually(lambda: _admitted(objects), what="the group admitted")
    for name in ("g0", "g1", "g2"):
        await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated")

    async def succeed(name: str) -> None:
        current = await pod(objects, name)
        await objects.update_status(objects.registry.require(*POD), {**current, "status": {**current.get("status", {}), "phase": "Succeeded"}})

    await succeed("g0")
    await settled(manager)
    assert FINALIZER in (await pod(objects, "g0"))["metadata"]["finalizers"]  # the group still needs it
    assert condition(await group_workload(objects), "Finished") == {}
    await succeed("g1")
    await succeed("g2")

    async def finished() -> dict[str, Any] | None:
        wl = await group_workload(objects)
        return wl if condition(wl, "Finished").get("status") == "True" else None

    wl = await eventually(finished, what="the group's Workload finished")
    done = condition(wl, "Finished")
    assert (done["reason"], done["message"]) == ("Succeeded", "Pods succeeded: 3/3.")

    async def finalized() -> bool | None:
        current = [await pod(objects, n) for n in ("g0", "g1", "g2")]
        return all(FINALIZER not in (p["metadata"].get("finalizers") or []) for p in current) or None

    await eventually(finalized, what="every Pod of the group finalized")
    assert await events_on(objects, "Pod", "g0", "FinishedWorkload") == ["Workload 'default/grp' is declared finished"]


async def test_members_that_disagree_on_the_total_count_get_no_workload(objects: ObjectStore, manager: ControllerManager) -> None:
    await team(objects, manager)
    await create(objects, group_pod("g0", total="2"))
    await create(objects, group_pod("g1", total="3"))
    await create(objects, group_pod("g2", total="3"))

    async def told() -> list[str] | None:
        return [m for m in await events_on(objects, "Pod", "g0", "ErrWorkloadCompose") if "different" in m] or None

    assert (await eventually(told, what="ErrWorkloadCompose"))[0] == (
        "pods 'g0' and 'g1' has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3")
    await settled(manager)
    assert await group_workload(objects) is None


@pytest.mark.parametrize(("labels", "annotations", "message"), [
    ({GROUP: "grp"}, {}, "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the "
     "'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label should be set"),
    ({}, {TOTAL: "3"}, "metadata.labels[kueue.x-k8s.io/pod-group-name]: Required value: both the "
     "'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label should be set"),
    ({GROUP: "grp"}, {TOTAL: "three"}, 'metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: "three": '
     'strconv.Atoi: parsing "three": invalid syntax'),
    ({GROUP: "grp"}, {TOTAL: "0"}, "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: \"0\": "
     "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be greater than zero"),
    ({GROUP: "Grp_1"}, {TOTAL: "1"}, 'metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "Grp_1": a lowercase RFC 1123 subdomain'),
])
async def test_kueues_webhook_refuses_a_broken_group(
    objects: ObjectStore, manager: ControllerManager, labels: dict[str, str], annotations: dict[str, str], message: str,
) -> None:
    await team(objects, manager)
    broken = group_pod("p")
    broken["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-lq", **labels}
    broken["metadata"]["annotations"] = annotations
    with pytest.raises(errors.WebhookDenied) as refused:
        await create(objects, broken)
    assert refused.value.code == 403
    assert str(refused.value).startswith(f'admission webhook "vpod.kb.io" denied the request: {message}')


async def test_a_pods_group_name_is_immutable(objects: ObjectStore, manager: ControllerManager) -> None:
    await team(objects, manager)
    created = await create(objects, group_pod("g0", total="1"))
    created["metadata"]["labels"][GROUP] = "other"
    with pytest.raises(errors.WebhookDenied) as refused:
        await objects.update(objects.registry.require(*POD), created)
    assert str(refused.value) == ('admission webhook "vpod.kb.io" denied the request: '
                                  'metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "other": field is immutable')


async def test_an_evicted_group_has_every_started_pod_stopped_and_goes_with_its_last_pod(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """Drained (``HoldAndDrain``), each started Pod of the group gets ``TerminationTarget`` and an
    Event ``Stopped`` and is deleted (a finalizer of its own keeps it ``Terminating`` here); the
    group's Workload goes with the last of its Pods."""
    await team(objects, manager)
    for name in ("g0", "g1", "g2"):
        created = group_pod(name)
        created["metadata"]["finalizers"] = ["example.com/keep"]
        await create(objects, created)
    await eventually(lambda: _admitted(objects), what="the group admitted")
    for name in ("g0", "g1", "g2"):
        await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated")
    await stop(objects, "ClusterQueue", "team", "HoldAndDrain")

    for name in ("g0", "g1", "g2"):
        async def stopped(n: str = name) -> dict[str, Any] | None:
            found = await get(objects, *POD, n)
            return found if found is not None and found["metadata"].get("finalizers") == ["example.com/keep"] else None

        found = await eventually(stopped, what=f"{name} stopped")
        assert found["metadata"].get("deletionTimestamp")
        target = condition(found, "TerminationTarget")
        assert (target["reason"], target["message"]) == ("WorkloadEvictedDueToClusterQueueStopped", "The ClusterQueue is stopped")
        assert await events_on(objects, "Pod", name, "Stopped") == ["The ClusterQueue is stopped"]
        del found["metadata"]["finalizers"]
        await objects.update(objects.registry.require(*POD), found)

    async def gone() -> bool | None:
        return await group_workload(objects) is None or None

    await eventually(gone, what="the group's Workload deleted with its last Pod")


async def test_a_pod_beyond_the_total_count_is_deleted(objects: ObjectStore, manager: ControllerManager) -> None:
    await team(objects, manager, local_queue=False)
    for name in ("a0", "a1", "a2"):
        await create(objects, group_pod(name, total="2"))

    async def deleted() -> bool | None:
        found = await get(objects, *POD, "a2")
        return (found is None or bool(found["metadata"].get("deletionTimestamp"))) or None

    await eventually(deleted, what="the third Pod of a group of two deleted")
    assert await events_on(objects, "Pod", "a2", "ExcessPodDeleted") == ["Excess pod deleted"]
    wl = await eventually(lambda: group_workload(objects), what="the group's Workload")
    assert [p["count"] for p in wl["spec"]["podSets"]] == [2]
    assert sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == ["a0", "a1"]


async def test_a_groups_pending_checks_are_told_on_each_pod_and_all_start_once_ready(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    objects.check_creates(hold_queued_workload)
    await fleet_with_check(objects, manager)
    await create(objects, propagation_policy("pods", kind="Pod", api_version="v1", placement=PLACEMENT))
    for name in ("g0", "g1"):
        await create(objects, group_pod(name, total="2", queue="team-a"))

    async def reserved() -> dict[str, Any] | None:
        wl = await group_workload(objects)
        return wl if condition(wl, "QuotaReserved").get("status") == "True" and wl["status"].get("admissionChecks") else None

    async def check(state: str, message: str) -> None:
        wl = await eventually(reserved, what="the group's quota reserved, its check pending")
        wl["status"]["admissionChecks"][0].update(state=state, message=message, lastTransitionTime="2026-01-01T00:00:01Z")
        await objects.update_status(objects.registry.require(KUEUE, "Workload"), wl)

    await check("Pending", "waiting for budget approval")
    for name in ("g0", "g1"):
        async def told(n: str = name) -> list[str] | None:
            return await events_on(objects, "Pod", n, "UpdatedAdmissionCheck") or None
        assert await eventually(told, what=f"{name} told") == ["budget: waiting for budget approval"]
        assert (await pod(objects, name))["spec"]["schedulingGates"] == [KUEUE_GATE]
    await check("Ready", "")
    for name in ("g0", "g1"):
        await eventually(lambda n=name: _ungated(objects, n), what=f"{name} ungated once the check is Ready")


async def test_a_workload_none_of_whose_roles_is_left_is_deleted_and_made_anew(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """A group of one: its Workload counts Pod ``a``'s role; ``b`` (another shape) is not its, and
    once ``a`` is gone the Workload matches nothing of the group: ``DeletedWorkload``, then a
    Workload for ``b``'s role."""
    await team(objects, manager, local_queue=False)
    await create(objects, group_pod("a", total="1"))
    first = await eventually(lambda: group_workload(objects), what="a's group Workload")
    await create(objects, group_pod("b", total="1", gpus=2))
    await settled(manager)
    assert (await group_workload(objects) or {})["metadata"]["uid"] == first["metadata"]["uid"]
    await objects.delete(objects.registry.require(*POD), namespace="default", name="a")
    role_b = (await pod(objects, "b"))["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]

    async def remade() -> dict[str, Any] | None:
        wl = await group_workload(objects)
        return wl if wl is not None and wl["metadata"]["uid"] != first["metadata"]["uid"] else None

    wl = await eventually(remade, what="the group's Workload made anew")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [(role_b, 1)]
    assert await events_on(objects, "Pod", "b", "DeletedWorkload") == ["Deleted not matching Workload: default/grp"]
    assert await events_on(objects, "Pod", "b", "CreatedWorkload") == ["Created Workload: default/grp"]
