"""Fleet quotas with Kueue's API, end to end (real hub on its embedded etcd, an on-prem and a
cloud member with their agents, kubectl): Kueue's ClusterQueue/LocalQueue YAML applies
unchanged; team A's Jobs take its 2 on-prem GPUs and borrow team B's idle one; team B's first
Job gets the last free GPU of the cohort, its second waits (Pending Workload with Kueue's reason
in ``kubectl get workloads`` and ``kubectl describe``, no pod anywhere); once team B's ClusterQueue
may reclaim (``reclaimWithinCohort: Any``), team A's borrowing Job is preempted — its pods leave
the member, its Workload is Evicted and Pending — and team B's Job is admitted and Running
on-prem, where its flavor says. Kueue's fair-sharing fields (a v1alpha1 Cohort's and a
ClusterQueue's ``fairSharing.weight``) apply unchanged and show in ``gpufed queues``.
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


def _job(name: str, queue: str) -> dict[str, Any]:
    return {
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


def _submit(hub: Kubectl, name: str, queue: str) -> None:
    hub.run("apply", "-f", "-", input_text=json.dumps(_job(name, queue)))


def _admitted_in(hub: Kubectl, job: str) -> str | None:
    wl = hub.json_or_none("get", "workload", f"job-{job}", "-n", "ml")
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
    hub, members = processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"))
    out = hub.run("apply", "-f", str(QUEUES)).stdout
    assert "clusterqueue.kueue.x-k8s.io/team-a created" in out and "localqueue.kueue.x-k8s.io/team-b created" in out

    for name in ("a1", "a2", "a3"):  # 3 GPUs: team A's 2, and 1 borrowed from idle team B
        _submit(hub, name, "team-a")
        wait_for(_admitted_by(hub, name, "team-a"), timeout=60, what=f"{name} admitted by team-a")
    onprem, cloud = members["onprem-a100"], members["cloud-h100"]
    wait_for(lambda: all(_running_pods(onprem, n) == 1 for n in ("a1", "a2", "a3")), timeout=120,
             what="team A's Jobs Running on-prem")

    _submit(hub, "b1", "team-b")
    wait_for(lambda: _admitted_in(hub, "b1") == "team-b", timeout=60, what="b1 admitted by team-b")
    _submit(hub, "b2", "team-b")

    def b2_pending() -> bool:
        wl = hub.json_or_none("get", "workload", "job-b2", "-n", "ml")
        conds = {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or ()}
        return bool(conds.get("QuotaReserved", {}).get("reason") == "Pending")

    wait_for(b2_pending, timeout=60, what="b2's Workload Pending")
    table = hub.run("get", "workloads", "-n", "ml").stdout.splitlines()
    assert table[0].split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["job-a3"][1:4] == ["team-a", "team-a", "True"]
    assert rows["job-b2"][1] == "team-b" and rows["job-b2"][2] != "team-b"
    described = hub.run("describe", "workload", "job-b2", "-n", "ml").stdout
    assert "insufficient unused quota for nvidia.com/gpu in flavor onprem, 1 more needed" in described
    cqs = hub.run("get", "clusterqueues").stdout.splitlines()
    assert cqs[0].split()[:6] == ["NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    assert {line.split()[0]: line.split()[1:4] for line in cqs[1:]} == {
        "team-a": ["research", "0", "3"], "team-b": ["research", "1", "1"],
    }
    queues = subprocess.run(
        [GPUFED, "queues", "--kubeconfig", str(hub.kubeconfig), "-o", "json"], capture_output=True, text=True, check=True, timeout=60
    )
    gpus = {r["clusterQueue"]: r for r in json.loads(queues.stdout) if r["resource"] == "nvidia.com/gpu"}
    assert (gpus["team-a"]["usage"], gpus["team-a"]["borrowed"]) == ("3", "1")
    assert (gpus["team-b"]["usage"], gpus["team-b"]["borrowed"]) == ("1", "0")
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
    wl = hub.json("get", "workload", "job-a3", "-n", "ml")
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert (conds["Evicted"]["status"], conds["Evicted"]["reason"]) == ("True", "Preempted")
    assert "Workload: ml/job-b2" in conds["Evicted"]["message"]
    assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == ("False", "Pending")
    assert "admission" not in wl["status"]
    assert hub.json("get", "job", "a3", "-n", "ml")["spec"]["suspend"] is True
    assert all(_running_pods(onprem, n) == 1 for n in ("a1", "a2"))
    described = hub.run("describe", "workload", "job-a3", "-n", "ml").stdout
    assert "Preempted to accommodate a workload" in described

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
