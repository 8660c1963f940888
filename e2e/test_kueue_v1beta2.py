"""Kueue's v1beta2 YAML, end to end (real hub on its embedded etcd, the on-prem member with its
agent, kubectl): a ResourceFlavor, two ClusterQueues of one cohort (``cohortName``) and their
LocalQueues written at v1beta2, as Kueue 0.15+'s docs write them, apply unchanged; a Job queued in them is
admitted and Running in the member; ``kubectl get`` shows the objects at v1beta2 (the preferred
version) and at v1beta1, and ``gpufed queues`` reads the quota and its usage. Deleted, the
ClusterQueue stays Terminating (Kueue's finalizer) until the Job goes, and the flavor while a
ClusterQueue names it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GPUFED, Kubectl, ProcessGroup, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
pytestmark = pytest.mark.e2e

#: The two teams' queues of e2e/test_quotas.py (written for a single Kueue cluster at v1beta1), as
#: Kueue 0.15+ writes them: at v1beta2, with ``cohortName`` where v1beta1 says ``cohort``.
QUEUES_V1BETA2 = (
    (HERE / "manifests" / "quotas" / "queues.yaml").read_text()
    .replace("apiVersion: kueue.x-k8s.io/v1beta1", "apiVersion: kueue.x-k8s.io/v1beta2")
    .replace("  cohort: research", "  cohortName: research")
)

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
    "spec": {"template": {
        "metadata": {"annotations": {"sim.gpufed.io/duration": "7200s"}},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "train", "image": "registry.example.com/ml/train:0.3",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
        }]},
    }},
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    with ProcessGroup.running_fleet(tmp_path_factory.mktemp("kueue-v1beta2"), FLEET, ("onprem-a100",)) as fleet:
        yield fleet


def _admitted(hub: Kubectl) -> dict[str, Any] | None:
    wl = hub.json_or_none("get", "workload", hub.workload_name("job", "train", "-n", "ml"), "-n", "ml")
    conds = {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or ()}
    return wl if conds.get("Admitted", {}).get("status") == "True" else None


def _running(member: Kubectl) -> int:
    items = member.json("get", "pods", "-n", "ml", "-l", "job-name=train")["items"]
    return sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")


def _job_admitted_and_running(hub: Kubectl, members: dict[str, Kubectl]) -> None:
    hub.run("apply", "-f", "-", input_text=json.dumps(JOB))
    wait_for(lambda: _admitted(hub) is not None, timeout=60, what="the Job's Workload admitted by team-a")
    wait_for(lambda: _running(members["onprem-a100"]) == 1, timeout=120, what="the Job Running on-prem")


def test_kueue_v1beta2_queues_admit_a_job(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    out = hub.run("apply", "-f", "-", input_text=QUEUES_V1BETA2).stdout
    assert "kueue.x-k8s.io/v1beta1" not in QUEUES_V1BETA2 and "cohortName: research" in QUEUES_V1BETA2
    assert out.splitlines()[:5] == [
        "resourceflavor.kueue.x-k8s.io/onprem created", "clusterqueue.kueue.x-k8s.io/team-a created",
        "clusterqueue.kueue.x-k8s.io/team-b created", "localqueue.kueue.x-k8s.io/team-a created",
        "localqueue.kueue.x-k8s.io/team-b created",
    ]
    _job_admitted_and_running(hub, members)

    workload = _admitted(hub)
    assert workload is not None and workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert workload["status"]["admission"]["clusterQueue"] == "team-a"
    assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "onprem"
    assert hub.json("get", "job", "train", "-n", "ml")["spec"]["suspend"] is False

    served = hub.json("get", "clusterqueue", "team-a")
    assert (served["apiVersion"], served["spec"]["cohortName"]) == ("kueue.x-k8s.io/v1beta2", "research")
    assert served["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    stored = hub.json("get", "clusterqueues.v1beta1.kueue.x-k8s.io", "team-a")
    assert (stored["apiVersion"], stored["spec"]["cohort"]) == ("kueue.x-k8s.io/v1beta1", "research")
    assert stored["status"]["admittedWorkloads"] == 1
    rows = hub.run("get", "clusterqueues").stdout.splitlines()
    assert [row.split()[:4] for row in rows[1:]] == [["team-a", "research", "0", "1"], ["team-b", "research", "0", "0"]]

    queues = subprocess.run(
        [GPUFED, "queues", "--kubeconfig", str(hub.kubeconfig), "-o", "json"], capture_output=True, text=True, check=True, timeout=60
    )
    gpu = {r["clusterQueue"]: r for r in json.loads(queues.stdout) if r["resource"] == "nvidia.com/gpu"}
    assert (gpu["team-a"]["flavor"], gpu["team-a"]["usage"], gpu["team-b"]["usage"]) == ("onprem", "1", "0")


def test_a_cluster_queue_in_use_is_terminating_until_its_workload_goes(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    """Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer, as ``kubectl delete`` meets it, with
    team-a's Job ``train`` admitted: as the test above leaves the fleet, or, where that test ran in
    another worker (pytest-xdist gives each worker a fleet of its own), made so here."""
    hub, members = fleet
    if hub.json_or_none("get", "clusterqueue", "team-a") is None:
        hub.run("apply", "-f", "-", input_text=QUEUES_V1BETA2)
        _job_admitted_and_running(hub, members)
    finalizer = "kueue.x-k8s.io/resource-in-use"
    for kind, name in (("clusterqueue", "team-a"), ("resourceflavor", "onprem")):
        assert hub.json("get", kind, name)["metadata"]["finalizers"] == [finalizer], kind
    hub.run("delete", "clusterqueue", "team-a", "--wait=false")
    hub.run("delete", "resourceflavor", "onprem", "--wait=false")

    def terminating() -> dict[str, Any] | None:
        cq = hub.json("get", "clusterqueue", "team-a")
        active = {c["type"]: c for c in cq.get("status", {}).get("conditions") or ()}.get("Active", {})
        return active if active.get("reason") == "Terminating" else None

    active = wait_for(terminating, timeout=30, what="team-a Terminating")
    assert (active["status"], active["message"]) == ("False", "Can't admit new workloads; clusterQueue is terminating")
    assert _admitted(hub) is not None  # what it admitted keeps running
    assert hub.json("get", "resourceflavor", "onprem")["metadata"]["deletionTimestamp"]  # team-b names it

    hub.run("delete", "job", "train", "-n", "ml")
    wait_for(lambda: hub.json_or_none("get", "clusterqueue", "team-a") is None, timeout=60,
             what="team-a gone once its workload is")
    assert hub.json("get", "resourceflavor", "onprem")["metadata"]["finalizers"] == [finalizer]


def _pod(name: str, labels: dict[str, str]) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/ml/train:0.3"}]},
    })


def test_kubectl_meets_kueues_pod_webhook(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    """What Kueue's pod webhook does, as kubectl meets it at the hub: a queued Pod is created gated
    with Kueue's managed marks, and a ``managed`` label other than "true" is refused."""
    hub, _ = fleet
    hub.run("create", "namespace", "ml", check=False)
    refused = hub.run("apply", "-f", "-", input_text=_pod("odd", {"kueue.x-k8s.io/managed": "false"}), check=False)
    assert refused.returncode != 0
    assert "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'" in refused.stderr
    assert hub.json_or_none("get", "pod", "odd", "-n", "ml") is None, "nothing is written"

    hub.run("apply", "-f", "-", input_text=_pod("held", {"kueue.x-k8s.io/queue-name": "no-such-queue"}))
    pod = hub.json("get", "pod", "held", "-n", "ml")
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert "kueue.x-k8s.io/managed" in pod["metadata"]["finalizers"]
    assert {"name": "kueue.x-k8s.io/admission"} in pod["spec"]["schedulingGates"]
    hub.run("delete", "pod", "held", "-n", "ml", "--wait=false")
    wait_for(lambda: hub.json_or_none("get", "pod", "held", "-n", "ml") is None, timeout=60,
             what="the held Pod deleted (Kueue's finalizer does not hold a held Pod's delete)")
