"""Fleet quotas with Kueue's API, end to end (real hub on its embedded etcd, an on-prem and a
cloud member with their agents, kubectl): Kueue's ClusterQueue/LocalQueue YAML applies
unchanged; team A's Jobs take its 2 on-prem GPUs and borrow team B's idle one; team B's first
Job gets the last free GPU of the cohort, its second waits (Pending Workload with Kueue's reason
in ``kubectl get workloads`` and ``kubectl describe``, no pod anywhere); once team B's ClusterQueue
may reclaim (``reclaimWithinCohort: Any``), team A's borrowing Job is preempted — its pods leave
the member, its Workload is Evicted and Pending — and team B's Job is admitted and Running
on-prem, where its flavor says. Kueue's fair-sharing fields (a v1alpha1 Cohort's and a
ClusterQueue's ``fairSharing.weight``) apply unchanged and show in ``gpufed queues``.

A second flavor, ``cloud`` (the cloud member's cluster label ``tier: cloud``), gives team B one
cloud GPU and team A none, and team A may borrow only one on-prem GPU: team A's fourth Job borrows
team B's cloud GPU and runs in the cloud member, and is preempted there when team B reclaims it.

Then team B's LocalQueue is stopped with ``HoldAndDrain``: its Jobs' pods leave the members and
their Workloads are Evicted (``LocalQueueStopped``); ``stopPolicy: None`` admits them again. Last,
a Job with ``kueue.x-k8s.io/job-min-parallelism`` is partially admitted and runs the pods that fit;
its ClusterQueue has Kueue's admission fair sharing (the hub runs with
``--kueue-admission-fair-sharing``), so its LocalQueue's status keeps the admission's entry penalty.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GPUFED, Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
QUEUES = HERE / "manifests" / "quotas" / "queues.yaml"
pytestmark = pytest.mark.e2e


CLOUD_FLAVOR = (
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: cloud}\nspec:\n  nodeLabels: {tier: cloud, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\n"
)

PARTIAL_QUEUE = (
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-d}\nspec:\n  namespaceSelector: {}\n"
    "  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n"
    "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: cloud\n"
    "      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]\n"
    "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: team-d, namespace: ml}\nspec: {clusterQueue: team-d}\n"
)


def _group(quotas: dict[str, tuple[str, str, int]], onprem_gpu: dict[str, int]) -> dict[str, Any]:
    """A resource group over cpu, memory and GPUs with these flavors' nominal quotas, in order."""
    return {
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
        "flavors": [{"name": flavor, "resources": [
            {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory},
            {"name": "nvidia.com/gpu", "nominalQuota": gpu, **(onprem_gpu if flavor == "onprem" else {})},
        ]} for flavor, (cpu, memory, gpu) in quotas.items()],
    }


def _job(name: str, queue: str, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "template": {
                "metadata": {"annotations": {"sim.gpufed.io/duration": "7200s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "train", "image": "registry.example.com/ml/train:0.3",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
                    }],
                },
            }
        },
    }
    if node_selector:
        job["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    return job


def _submit(hub: Kubectl, name: str, queue: str, node_selector: dict[str, str] | None = None) -> None:
    hub.run("apply", "-f", "-", input_text=json.dumps(_job(name, queue, node_selector)))


def _admitted_in(hub: Kubectl, job: str) -> str | None:
    wl = hub.json_or_none("get", "workload", hub.workload_name("job", job, "-n", "ml"), "-n", "ml")
    conds = {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or ()}
    if conds.get("Admitted", {}).get("status") != "True":
        return None
    return str(wl["status"]["admission"]["clusterQueue"])


def _admitted_by(hub: Kubectl, job: str, queue: str) -> Callable[[], bool]:
    return lambda: _admitted_in(hub, job) == queue


def _pods(member: Kubectl, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = member.json("get", "pods", "-n", "ml", "-l", f"job-name={job}")["items"]
    return items


def _running_pods(member: Kubectl, job: str) -> int:
    items = member.json("get", "pods", "-n", "ml", "-l", f"job-name={job}")["items"]
    return sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")


def test_two_teams_share_a_cohort(processes: ProcessGroup) -> None:
    hub, members = processes.start_fleet(
        FLEET, ("onprem-a100", "cloud-h100"), "--kueue-admission-fair-sharing", "--kueue-usage-half-life-time", "1h")
    out = hub.run("apply", "-f", str(QUEUES)).stdout
    assert "clusterqueue.kueue.x-k8s.io/team-a created" in out and "localqueue.kueue.x-k8s.io/team-b created" in out
    # The cloud flavor selects the cloud member by its cluster label; team B owns its one GPU.
    out = hub.run("apply", "-f", "-", input_text=CLOUD_FLAVOR).stdout
    assert "resourceflavor.kueue.x-k8s.io/cloud created" in out
    # The on-prem flavor names its GPU product too, so that a Job asking for H100s gets the cloud flavor.
    hub.run("patch", "resourceflavor", "onprem", "--type", "merge", "-p",
            '{"spec":{"nodeLabels":{"nvidia.com/gpu.product":"NVIDIA-A100-SXM4-80GB"}}}')
    for team, onprem_gpu, cloud_quota in (("team-a", {"borrowingLimit": 1}, ("0", "0", 0)), ("team-b", {}, ("16", "64Gi", 1))):
        patch = {"spec": {"resourceGroups": [_group({"onprem": ("16", "64Gi", 2), "cloud": cloud_quota}, onprem_gpu)]}}
        hub.run("patch", "clusterqueue", team, "--type", "merge", "-p", json.dumps(patch))

    for name in ("a1", "a2", "a3", "a4"):  # team A's 2 on-prem GPUs, 1 borrowed on-prem and 1 in the cloud from idle team B
        _submit(hub, name, "team-a")
        wait_for(_admitted_by(hub, name, "team-a"), timeout=60, what=f"{name} admitted by team-a")
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    wait_for(lambda: all(_running_pods(onprem, n) == 1 for n in ("a1", "a2", "a3")), timeout=120,
             what="team A's Jobs Running on-prem")
    wait_for(lambda: _running_pods(cloud, "a4") == 1, timeout=120, what="a4 (borrowed cloud GPU) Running in the cloud member")
    assert not _pods(onprem, "a4") and all(not _pods(cloud, n) for n in ("a1", "a2", "a3"))
    assert hub.json("get", "workload", hub.workload_name("job", "a4", "-n", "ml"), "-n", "ml")["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "cloud", "memory": "cloud", "nvidia.com/gpu": "cloud",
    }

    _submit(hub, "b1", "team-b")
    wait_for(lambda: _admitted_in(hub, "b1") == "team-b", timeout=60, what="b1 admitted by team-b")
    _submit(hub, "b2", "team-b")

    def b2_pending() -> bool:
        wl = hub.json_or_none("get", "workload", hub.workload_name("job", "b2", "-n", "ml"), "-n", "ml")
        conds = {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or ()}
        return bool(conds.get("QuotaReserved", {}).get("reason") == "Pending")

    wait_for(b2_pending, timeout=60, what="b2's Workload Pending")
    table = hub.run("get", "workloads", "-n", "ml").stdout.splitlines()
    assert table[0].split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    a3, b2 = hub.workload_name("job", "a3", "-n", "ml"), hub.workload_name("job", "b2", "-n", "ml")
    assert rows[a3][1:4] == ["team-a", "team-a", "True"]
    assert rows[b2][1] == "team-b" and rows[b2][2] != "team-b"
    described = hub.run("describe", "workload", hub.workload_name("job", "b2", "-n", "ml"), "-n", "ml").stdout
    assert "insufficient unused quota for nvidia.com/gpu in flavor onprem, 1 more needed" in described
    cqs = hub.run("get", "clusterqueues").stdout.splitlines()
    assert cqs[0].split()[:6] == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    assert {line.split()[0]: line.split()[1:4] for line in cqs[1:]} == {
        "team-a": ["research", "0", "4"], "team-b": ["research", "1", "1"],
    }
    queues = subprocess.run(
        [GPUFED, "queues", "--kubeconfig", str(hub.kubeconfig), "-o", "json"], capture_output=True, text=True, check=True, timeout=60
    )
    rows_by_flavor = {(r["clusterQueue"], r["flavor"]): r for r in json.loads(queues.stdout) if r["resource"] == "nvidia.com/gpu"}
    gpus = {cq: rows_by_flavor[(cq, "onprem")] for cq in ("team-a", "team-b")}
    assert (gpus["team-a"]["usage"], gpus["team-a"]["borrowed"]) == ("3", "1")
    assert (gpus["team-b"]["usage"], gpus["team-b"]["borrowed"]) == ("1", "0")
    cloud_a, cloud_b = rows_by_flavor[("team-a", "cloud")], rows_by_flavor[("team-b", "cloud")]
    assert (cloud_a["usage"], cloud_a["borrowed"], cloud_b["usage"], cloud_b["lent"]) == ("1", "1", "0", "1")
    job = hub.json("get", "job", "b2", "-n", "ml")
    assert job["spec"]["suspend"] is True
    assert hub.json_or_none("get", "resourcebinding", "b2-job", "-n", "ml") is None
    assert _running_pods(onprem, "b2") == 0 and _running_pods(cloud, "b2") == 0

    # Team B may now reclaim its lent quota: team A's borrowing Job (the most recently admitted)
    # is preempted in the member it runs in, and goes back to the queue; b2 is admitted and runs
    # where its flavor says.
    hub.run("patch", "clusterqueue", "team-b", "--type", "merge", "-p", '{"spec":{"preemption":{"reclaimWithinCohort":"Any"}}}')
    wait_for(lambda: _admitted_in(hub, "b2") == "team-b", timeout=90, what="b2 admitted once a3 is preempted")
    wait_for(lambda: not _pods(onprem, "a3") and not _pods(cloud, "a3"), timeout=120, what="a3's pods gone from the members")
    wait_for(lambda: _running_pods(onprem, "b2") == 1, timeout=120, what="b2 Running on-prem")
    assert hub.json("get", "job", "b2", "-n", "ml")["spec"]["suspend"] is False
    assert _running_pods(cloud, "b2") == 0
    wl = hub.json("get", "workload", hub.workload_name("job", "a3", "-n", "ml"), "-n", "ml")
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert (conds["Evicted"]["status"], conds["Evicted"]["reason"]) == ("True", "Preempted")
    assert f"Workload: ml/{hub.workload_name('job', 'b2', '-n', 'ml')}" in conds["Evicted"]["message"]
    assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == ("False", "Pending")
    assert "admission" not in wl["status"]
    assert hub.json("get", "job", "a3", "-n", "ml")["spec"]["suspend"] is True
    assert all(_running_pods(onprem, n) == 1 for n in ("a1", "a2"))
    described = hub.run("describe", "workload", hub.workload_name("job", "a3", "-n", "ml"), "-n", "ml").stdout
    assert "Preempted to accommodate a workload" in described

    # Visible to people: Kueue's metrics on the hub's /metrics, and why a3 waits now.
    def metrics_say_so() -> bool:
        lines = hub.run("get", "--raw", "/metrics").stdout.splitlines()
        return ('kueue_evicted_workloads_total{cluster_queue="team-a",reason="Preempted"} 1' in lines
                and 'kueue_pending_workloads{cluster_queue="team-a",status="active"} 1' in lines)

    wait_for(metrics_say_so, timeout=30, what="Kueue's metrics to show a3's eviction")
    explained = subprocess.run(
        [GPUFED, "explain", "job/a3", "-n", "ml", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    assert "Evicted:     Preempted: Preempted to accommodate a workload" in explained, explained
    assert "Position:    1 of 1 waiting in ClusterQueue team-a" in explained, explained
    assert _running_pods(cloud, "a4") == 1  # a4 borrows the cloud GPU team B does not use yet

    # Team B reclaims its cloud GPU too: a4, borrowed in the cloud member, is preempted there, and
    # b3 is admitted in the cloud flavor and Running in the cloud member; b1 and b2 keep running.
    _submit(hub, "b3", "team-b", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})  # the onprem flavor does not fit it
    wait_for(lambda: _admitted_in(hub, "b3") == "team-b", timeout=90, what="b3 admitted once a4 is preempted")
    wait_for(lambda: not _pods(cloud, "a4") and not _pods(onprem, "a4"), timeout=120, what="a4's pods gone from the cloud member")
    wait_for(lambda: _running_pods(cloud, "b3") == 1, timeout=120, what="b3 Running in the cloud member")
    assert _running_pods(onprem, "b3") == 0
    assert all(_running_pods(onprem, n) == 1 for n in ("b1", "b2"))
    assert hub.json("get", "job", "b3", "-n", "ml")["spec"]["suspend"] is False
    wl = hub.json("get", "workload", hub.workload_name("job", "a4", "-n", "ml"), "-n", "ml")
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert (conds["Evicted"]["status"], conds["Evicted"]["reason"]) == ("True", "Preempted")
    assert f"Workload: ml/{hub.workload_name('job', 'b3', '-n', 'ml')}" in conds["Evicted"]["message"]
    assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == ("False", "Pending")
    assert "admission" not in wl["status"]
    assert hub.json("get", "job", "a4", "-n", "ml")["spec"]["suspend"] is True
    assert all(_running_pods(onprem, n) == 1 for n in ("a1", "a2"))

    # Kueue's fair-sharing fields apply as they are: a Cohort with a weight, a ClusterQueue with
    # fairSharing.weight; `gpufed queues` shows the weight and what the queue lends.
    fair = (
        "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: other}\nspec:\n  fairSharing: {weight: \"2\"}\n"
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-c}\nspec:\n"
        "  namespaceSelector: {}\n  cohort: other\n  fairSharing: {weight: \"3\"}\n  resourceGroups:\n"
        "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: onprem\n"
        "      resources: [{name: nvidia.com/gpu, nominalQuota: 2, lendingLimit: 1}]\n"
    )
    out = hub.run("apply", "-f", "-", input_text=fair).stdout
    assert "cohort.kueue.x-k8s.io/other created" in out and "clusterqueue.kueue.x-k8s.io/team-c created" in out
    queues = subprocess.run(
        [GPUFED, "queues", "--kubeconfig", str(hub.kubeconfig), "-o", "json"], capture_output=True, text=True, check=True, timeout=60
    )
    team_c = next(r for r in json.loads(queues.stdout) if r["clusterQueue"] == "team-c")
    assert (team_c["weight"], team_c["lent"], team_c["weightedShare"]) == ("3", "1", None)  # fair sharing is off

    # kueuectl's `stop localqueue team-b` (stopPolicy HoldAndDrain) evicts what team B's
    # LocalQueue admitted: its pods leave the members; `stopPolicy: None` admits them again.
    hub.run("patch", "localqueue", "team-b", "-n", "ml", "--type", "merge", "-p", '{"spec":{"stopPolicy":"HoldAndDrain"}}')
    wait_for(lambda: all(not _pods(m, n) for m in (onprem, cloud) for n in ("b1", "b2", "b3")), timeout=120,
             what="team B's pods gone from the members")
    conds = {c["type"]: c for c in hub.json("get", "workload", hub.workload_name("job", "b1", "-n", "ml"), "-n", "ml")["status"]["conditions"]}
    assert (conds["Evicted"]["reason"], conds["Evicted"]["message"]) == ("LocalQueueStopped", "The LocalQueue is stopped")
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("False", "LocalQueueStopped")
    assert hub.json("get", "job", "b1", "-n", "ml")["spec"]["suspend"] is True

    def team_b_queue_says(status: str, reason: str) -> bool:
        lq = hub.json("get", "localqueue", "team-b", "-n", "ml")
        active = {c["type"]: c for c in (lq.get("status") or {}).get("conditions") or ()}.get("Active") or {}
        return (active.get("status"), active.get("reason")) == (status, reason)

    wait_for(lambda: team_b_queue_says("False", "Stopped"), timeout=30, what="team B's LocalQueue Active=False (Stopped)")
    hub.run("patch", "localqueue", "team-b", "-n", "ml", "--type", "merge", "-p", '{"spec":{"stopPolicy":"None"}}')
    wait_for(_admitted_by(hub, "b1", "team-b"), timeout=90, what="b1 admitted again once team B's LocalQueue runs")
    wait_for(lambda: _running_pods(onprem, "b1") == 1, timeout=120, what="b1 Running on-prem again")
    conds = {c["type"]: c for c in hub.json("get", "workload", hub.workload_name("job", "b1", "-n", "ml"), "-n", "ml")["status"]["conditions"]}
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("True", "LocalQueueRestarted")
    assert team_b_queue_says("True", "Active")

    # Kueue's partial admission: a Job of 3 one-GPU pods with `job-min-parallelism: "1"` in a queue
    # of 2 cloud GPUs is admitted with 2 and runs 2 pods in the cloud member.
    hub.run("apply", "-f", "-", input_text=PARTIAL_QUEUE)
    wide = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "wide", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "team-d"},
                     "annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}},
        "spec": {"parallelism": 3, "completions": 3, "template": {
            "metadata": {"annotations": {"sim.gpufed.io/duration": "7200s"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "registry.example.com/ml/train:0.3", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    }
    hub.run("apply", "-f", "-", input_text=json.dumps(wide))
    wait_for(_admitted_by(hub, "wide", "team-d"), timeout=60, what="wide admitted by team-d")
    assert hub.json("get", "workload", hub.workload_name("job", "wide", "-n", "ml"), "-n", "ml")["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    wait_for(lambda: hub.json("get", "job", "wide", "-n", "ml")["spec"]["parallelism"] == 2, timeout=30,
             what="wide unsuspended with parallelism 2")
    wait_for(lambda: _running_pods(cloud, "wide") == 2, timeout=120, what="wide's 2 admitted pods Running in the cloud member")
    explained = subprocess.run(
        [GPUFED, "explain", "job/wide", "-n", "ml", "--kubeconfig", str(hub.kubeconfig)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    assert "(partially admitted: 2 of 3 pods, minCount 1)" in explained, explained
    # Team D's queue has admission fair sharing: its LocalQueue's usage history holds the entry
    # penalty of the 2 GPUs, 2 * (1 - 0.5 ** (5m / 1h)) = 0.112 (and what they ran since it was created).
    consumed = hub.run("get", "localqueue", "team-d", "-n", "ml", "-o",
                       "jsonpath={.status.fairSharing.admissionFairSharingStatus.consumedResources.nvidia\\.com/gpu}").stdout
    assert consumed.endswith("m") and 112 <= int(consumed[:-1]) < 200, consumed
