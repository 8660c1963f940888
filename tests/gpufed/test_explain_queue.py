"""`gpufed explain` on queued workloads: why one waits (its ClusterQueue, Kueue's reason and
message, the quota it lacks, its place in the queue), and the flavor an admitted one got —
against a real hub, and the block's rules table-driven."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from controlplane.admission import objects as adm
from controlplane.apiserver import errors
from controlplane.hub import Hub
from controlplane.hubconfig import HubConfig
from gpufed.commands.explainqueue import render_queue

from .test_explain_command import gpufed

KUEUE = "kueue.x-k8s.io/v1beta1"
GPU = "nvidia.com/gpu"


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub(HubConfig(state_dir=tmp_path / "hub", port=0)) as running:
        yield running


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "registry.local/train:1", "resources": {"limits": {GPU: "1"}}}]}}},
    }


async def reserved(hub: Hub, name: str, *, workload: str | None = None) -> str:
    """The QuotaReserved status of Job ``name``'s Workload (Kueue's name for it, or ``workload``)
    once the admission cycle has looked at it."""
    assert hub.objects is not None
    rt = hub.objects.registry.require(KUEUE, "Workload")
    source = await hub.objects.get(hub.objects.registry.require("batch/v1", "Job"), namespace="default", name=name)
    wl_name = workload or adm.workload_name_of(source)
    for _ in range(400):
        try:
            wl = await hub.objects.get(rt, namespace="default", name=wl_name)
        except errors.NotFound:  # not created yet
            wl = {}
        for cond in (wl.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "QuotaReserved":
                return str(cond["status"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"{wl_name} was never looked at by the admission cycle")


async def one_gpu_queue(hub: Hub) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """A ClusterQueue ``team-a`` of one GPU and its LocalQueue in ``default``; the hub's create."""
    objects = hub.objects
    assert objects is not None

    async def create(obj: dict[str, Any]) -> dict[str, Any]:
        return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)

    await create({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "onprem"}, "spec": {}})
    await create({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
            {"name": "onprem", "resources": [{"name": "cpu", "nominalQuota": 8}, {"name": GPU, "nominalQuota": 1}]}]}]}})
    await create({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "default"},
                  "spec": {"clusterQueue": "team-a"}})
    return create


async def test_explain_says_why_a_job_waits_and_where_the_admitted_one_went(
    hub: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    create = await one_gpu_queue(hub)
    await create(job("j1"))
    assert await reserved(hub, "j1") == "True"
    for name in ("j2", "j3"):
        await create(job(name))
        assert await reserved(hub, name) == "False"

    assert await gpufed(hub, "explain", "job/j3") == 0
    out = capsys.readouterr().out
    assert "Queue:       LocalQueue default/team-a -> ClusterQueue team-a (BestEffortFIFO)" in out
    assert (f"Admission:   QuotaReserved=False (Pending): couldn't assign flavors to pod set main: insufficient "
            f"unused quota for {GPU} in flavor onprem, 1 more needed") in out
    assert f"Quota:       {GPU} in onprem: 1 in use of 1 nominal" in out
    assert "Position:    2 of 2 waiting in ClusterQueue team-a; 2 of 2 in LocalQueue default/team-a" in out

    assert await gpufed(hub, "explain", "job/j1") == 0
    out = capsys.readouterr().out
    assert "Admission:   admitted by ClusterQueue team-a" in out
    assert f"Flavors:     main x1: {GPU}=onprem" in out
    assert "Position:" not in out


async def test_explain_finds_a_workload_named_before_the_hub_named_them_as_kueue(
    hub: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Workload an older hub made (``job-<name>``) is found by its owner: the admission
    controller keeps it (makes no second one) and `gpufed explain` reads it."""
    objects = hub.objects
    assert objects is not None
    wl_rt = objects.registry.require(KUEUE, "Workload")
    create = await one_gpu_queue(hub)
    source = await create(job("old"))
    assert await reserved(hub, "old") == "True"
    new_name = adm.workload_name_of(source)
    made = await objects.get(wl_rt, namespace="default", name=new_name)
    await create({"apiVersion": KUEUE, "kind": "Workload", "metadata": {
        "name": "job-old", "namespace": "default", "ownerReferences": made["metadata"]["ownerReferences"]}, "spec": made["spec"]})
    await objects.delete(wl_rt, namespace="default", name=new_name)
    for _ in range(400):  # pending while the first held the quota, admitted once it is gone
        if await reserved(hub, "old", workload="job-old") == "True":
            break
        await asyncio.sleep(0.05)
    assert await reserved(hub, "old", workload="job-old") == "True"

    assert await gpufed(hub, "explain", "job/old") == 0
    out = capsys.readouterr().out
    assert "Admission:   admitted by ClusterQueue team-a" in out
    assert "no Workload" not in out
    names = [wl["metadata"]["name"] for wl in (await objects.list(wl_rt, namespace="default")).items]
    assert names == ["job-old"]


async def test_explain_finds_a_pod_groups_workload_for_each_of_its_pods(hub: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    """A Pod of a Kueue pod group is queued by its group's Workload, named for the group."""
    objects = hub.objects
    assert objects is not None
    create = await one_gpu_queue(hub)
    for name in ("g0", "g1"):  # two GPUs asked of a queue of one: the group waits whole
        pod = job(name)["spec"]["template"]
        await create({"apiVersion": "v1", "kind": "Pod", "spec": pod["spec"], "metadata": {
            "name": name, "namespace": "default", "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
            "labels": {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/pod-group-name": "grp"}}})
    wl_rt = objects.registry.require(KUEUE, "Workload")
    for _ in range(400):
        try:
            wl = await objects.get(wl_rt, namespace="default", name="grp")
        except errors.NotFound:
            wl = {}
        if any(c.get("type") == "QuotaReserved" for c in (wl.get("status") or {}).get("conditions") or ()):
            break
        await asyncio.sleep(0.05)

    assert await gpufed(hub, "explain", "pod/g1") == 0
    out = capsys.readouterr().out
    assert "Queue:       LocalQueue default/team-a -> ClusterQueue team-a (BestEffortFIFO)" in out
    assert "Admission:   QuotaReserved=False" in out
    assert "no Workload" not in out


def workload(name: str, *, priority: int = 0, created: str = "2026-01-01T00:00:00Z", queue: str = "lq",
             namespace: str = "default", status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE, "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": 2, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]}}}]},
        "status": status or {},
    }


ADMITTED = {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {GPU: "a100"}, "count": 2}]},
            "conditions": [{"type": "Admitted", "status": "True"}]}


def test_a_team_that_cannot_read_the_cluster_queue_still_sees_its_local_position() -> None:
    me = workload("me", status={"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                                 "message": "insufficient unused quota"}]})
    lines = render_queue(me, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=None,
                         cluster_queue_place=None, local_queue_place=(1, 1))
    text = "\n".join(lines)
    assert "ClusterQueue cq (not readable with these credentials" in text
    assert "Position:    1 of 1 in LocalQueue default/lq" in text
    assert "Quota:" not in text


def test_an_evicted_workload_says_so_and_an_admitted_one_shows_its_borrowing() -> None:
    cq = {"spec": {"cohort": "research", "queueingStrategy": "StrictFIFO", "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [{"name": GPU, "nominalQuota": 8, "borrowingLimit": 4}]}]}]},
        "status": {"flavorsReservation": [{"name": "a100", "resources": [{"name": GPU, "total": "10", "borrowed": "2"}]}]}}
    evicted = workload("me", status={"conditions": [
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"},
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "Preempted to accommodate a workload"}]})
    text = "\n".join(render_queue(evicted, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=cq,
                                  cluster_queue_place=(1, 1), local_queue_place=(1, 1)))
    assert "ClusterQueue cq (cohort research, StrictFIFO)" in text
    assert "Evicted:     Preempted: Preempted to accommodate a workload" in text
    admitted = workload("me", status=ADMITTED)
    text = "\n".join(render_queue(admitted, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=cq, cluster_queue_place=None, local_queue_place=None))
    assert f"Flavors:     main x2: {GPU}=a100" in text
    assert f"Quota:       {GPU} in a100: 10 in use of 8 nominal, may borrow 4; borrows 2 from its cohort" in text
    assert "partially" not in text
    partly = workload("me", status=ADMITTED)
    partly["spec"]["podSets"][0].update(count=4, minCount=2)
    text = "\n".join(render_queue(partly, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=cq, cluster_queue_place=None, local_queue_place=None))
    assert f"Flavors:     main x2: {GPU}=a100 (partially admitted: 2 of 4 pods, minCount 2)" in text


def test_a_workload_backing_off_or_deactivated_says_until_when() -> None:
    timed_out = {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout",
                 "message": "Exceeded the PodsReady timeout default/me"}
    backing_off = workload("me", status={"requeueState": {"count": 2, "requeueAt": "2026-01-01T12:02:00Z"}, "conditions": [
        timed_out, {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout", "message": "x"}]})
    text = "\n".join(render_queue(backing_off, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=None,
                                  cluster_queue_place=None, local_queue_place=(1, 1)))
    assert "Evicted:     PodsReadyTimeout: Exceeded the PodsReady timeout default/me" in text
    assert "Requeue:     backing off until 2026-01-01T12:02:00Z after 2 PodsReady timeout(s)" in text
    deactivated = workload("me", status={"conditions": [timed_out]})
    deactivated["spec"]["active"] = False
    text = "\n".join(render_queue(deactivated, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=None,
                                  cluster_queue_place=None, local_queue_place=(1, 1)))
    assert "Requeue:     deactivated (spec.active: false)" in text
    # Back in the queue once the backoff is over: nothing more to say.
    done = workload("me", status={"requeueState": {"count": 2}, "conditions": [
        {"type": "Requeued", "status": "True", "reason": "BackoffFinished", "message": "x"}]})
    assert not any(line.startswith("Requeue:") for line in render_queue(
        done, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=None, cluster_queue_place=None,
        local_queue_place=(1, 1)))


def test_a_workload_of_a_stopped_queue_says_which_queue_holds_it() -> None:
    held = workload("me", status={"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Inadmissible", "message": "LocalQueue lq is inactive"}]})
    lq = {"spec": {"clusterQueue": "cq", "stopPolicy": "Hold"}}
    text = "\n".join(render_queue(held, local_queue=lq, cluster_queue=None, cluster_queue_place=None, local_queue_place=(1, 1)))
    assert ("Stopped:     LocalQueue default/lq has stopPolicy Hold: it admits nothing new, its admitted workloads "
            "keep running; stopPolicy None resumes it") in text
    assert "Admission:   QuotaReserved=False (Inadmissible): LocalQueue lq is inactive" in text
    assert "Position:    out of line while LocalQueue default/lq is stopped" in text
    drained = workload("me", status={"conditions": [
        {"type": "Evicted", "status": "True", "reason": "ClusterQueueStopped", "message": "The ClusterQueue is stopped"}]})
    cq = {"spec": {"stopPolicy": "HoldAndDrain", "resourceGroups": []}}
    text = "\n".join(render_queue(drained, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=cq,
                                  cluster_queue_place=(1, 1), local_queue_place=(1, 1)))
    assert "Stopped:     ClusterQueue cq has stopPolicy HoldAndDrain: it admits nothing new, its admitted workloads are evicted" in text
    assert "Evicted:     ClusterQueueStopped: The ClusterQueue is stopped" in text
    assert "Position:    1 of 1 waiting in ClusterQueue cq" in text
    running = render_queue(drained, local_queue={"spec": {"clusterQueue": "cq", "stopPolicy": "None"}},
                           cluster_queue=None, cluster_queue_place=None, local_queue_place=(None, 0))
    assert not any(line.startswith("Stopped:") for line in running)


def test_a_workload_the_hub_does_not_list_as_pending_is_not_given_a_place() -> None:
    """The places are the visibility API's: a Workload it does not list (backing off, say) is not
    among those waiting, which explain says with how many do."""
    me = workload("me")
    lines = render_queue(me, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue={"spec": {}},
                         cluster_queue_place=(None, 3), local_queue_place=(None, 1))
    assert _position(lines) == "not among the 3 waiting in ClusterQueue cq; not among the 1 in LocalQueue default/lq"


def _position(lines: list[str]) -> str:
    found = [line for line in lines if line.startswith("Position:")]
    assert len(found) == 1, lines
    return found[0].removeprefix("Position:").strip().removesuffix(" (higher priority first, then older)")


def test_a_workload_with_quota_names_the_admission_checks_it_waits_for() -> None:
    me = workload("me", status={
        "admission": ADMITTED["admission"],
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue cq"}],
        "admissionChecks": [
            {"name": "budget", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"name": "prov", "state": "Pending", "message": "waiting for nodes", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    })
    text = "\n".join(render_queue(me, local_queue={"spec": {"clusterQueue": "cq"}}, cluster_queue=None,
                                  cluster_queue_place=None, local_queue_place=None))
    assert "Checks:      waiting for admission checks: prov (Pending: waiting for nodes)" in text
    assert f"Flavors:     main x2: {GPU}=a100" in text
    assert "Position:" not in text
