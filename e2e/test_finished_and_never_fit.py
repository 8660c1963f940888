"""Trusting what gpufed says and does, end to end (real hub on its embedded etcd, two simulated
members, two agents, kubectl):

* finished work stays finished: an MPIJob and a PyTorchJob run to Succeeded on-prem; a worker
  of the finished PyTorchJob then shows up Pending in the member (what the simulator once did),
  and its agent reports it unschedulable; for twice the hub's unschedulable grace period
  afterwards the bindings do not change, no pod of theirs starts in any member, and the hub
  keeps saying Succeeded;
* a request that can never fit (64 GPUs in one pod, largest node 8) is told so once, on the
  workload (condition and Event), the hub logs no traceback for it, and the waste report keeps
  the fleet's free GPUs free-spare, listing the request apart.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import FAST_WASTE, GPUFED, Kubectl, ProcessGroup, next_bucket, wait_for

HERE = Path(__file__).parent
FLEET = HERE / "fleets" / "placement.yaml"
MANIFESTS = HERE / "manifests" / "finished"
GRACE_SECONDS = 5
pytestmark = pytest.mark.e2e

JOBS = {"mpijob": "allreduce", "pytorchjob": "finetune"}


def _start_fleet(processes: ProcessGroup, *hub_flags: str) -> tuple[Kubectl, dict[str, Kubectl]]:
    return processes.start_fleet(FLEET, ("onprem-a100", "cloud-h100"), *hub_flags)


def _condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or () if c.get("type") == ctype), None)


def _succeeded(obj: dict[str, Any]) -> bool:
    cond = _condition(obj, "Succeeded")
    return bool(cond and cond["status"] == "True")


def _placement(hub: Kubectl, kind: str, name: str) -> list[dict[str, Any]]:
    binding = hub.json("get", "resourcebinding", f"{name}-{kind}", "-n", "ml")
    return list(binding["spec"].get("clusters") or [])


def _pods(member: Kubectl, job: str) -> dict[str, tuple[str, bool]]:
    """uid -> (phase, terminating) of the job's pods in a member."""
    items = member.json("get", "pods", "-n", "ml", "-l", f"training.kubeflow.org/job-name={job}")["items"]
    return {
        p["metadata"]["uid"]: (p.get("status", {}).get("phase", "Pending"), bool(p["metadata"].get("deletionTimestamp")))
        for p in items
    }


def _stray_worker(member: Kubectl, job: str, *, uid: str) -> dict[str, Any]:
    """A worker pod of ``job`` as its operator would create it: owned by the job, in its pod group."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-1",  # beside the finished worker-0, which stays (cleanPodPolicy None)
            "namespace": "ml",
            "labels": {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker",
                       "scheduling.x-k8s.io/pod-group": job},
            "annotations": {"scheduling.x-k8s.io/min-member": "2"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job, "uid": uid,
                                 "controller": True}],
        },
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "pytorch", "image": "registry.example.com/ml/train:0.3",
                            # more than an on-prem node has: it stays Pending whatever the gang's state
                            "resources": {"limits": {"nvidia.com/gpu": 4}}}],
        },
    }


def test_finished_gangs_stay_finished(processes: ProcessGroup) -> None:
    hub, members = _start_fleet(processes, "--unschedulable-grace-seconds", str(GRACE_SECONDS))
    hub.run("apply", "-f", str(MANIFESTS / "jobs.yaml"))

    def both_succeeded() -> bool:
        return all(_succeeded(hub.json("get", kind, name, "-n", "ml")) for kind, name in JOBS.items())

    wait_for(both_succeeded, timeout=180, what="the MPIJob and the PyTorchJob Succeeded on the hub")
    placements = {kind: _placement(hub, kind, name) for kind, name in JOBS.items()}
    assert placements == {kind: [{"name": "onprem-a100", "replicas": 3 if kind == "mpijob" else 2}] for kind in JOBS}
    onprem = members["onprem-a100"]
    seen = {name: _pods(onprem, name) for name in JOBS.values()}

    # What the member did in the report behind this: a worker of the finished gang back, Pending
    # ("pod group has 1 of 2 pods"), which the agent reports as a pod the member cannot place.
    stray = _stray_worker(onprem, "finetune", uid=onprem.json("get", "pytorchjob", "finetune", "-n", "ml")["metadata"]["uid"])
    onprem.run("apply", "-f", "-", input_text=json.dumps(stray))
    stray_uid = onprem.json("get", "pod", stray["metadata"]["name"], "-n", "ml")["metadata"]["uid"]
    seen["finetune"][stray_uid] = ("Pending", False)

    def reported_unschedulable() -> bool:
        work = hub.json("get", "work", "ml-finetune-pytorchjob", "-n", "gpufed-es-onprem-a100")
        return any((m.get("unschedulable") or {}).get("pods") for m in work.get("status", {}).get("manifestStatuses") or ())

    wait_for(reported_unschedulable, timeout=60, what="the agent to report the stray worker unschedulable")

    # Twice the grace period (and a bit): nothing moves, nothing starts, the status stays.
    deadline = time.monotonic() + 2 * GRACE_SECONDS + 4
    checks = 0
    while time.monotonic() < deadline:
        for kind, name in JOBS.items():
            assert _placement(hub, kind, name) == placements[kind], f"{kind}/{name} moved"
            job = hub.json("get", kind, name, "-n", "ml")
            assert _succeeded(job), f"{kind}/{name} on the hub is no longer Succeeded: {job.get('status')}"
            assert not _pods(members["cloud-h100"], name), f"{kind}/{name} has pods in the cloud"
            now = _pods(members["onprem-a100"], name)
            started = {uid: state for uid, state in now.items() if uid not in seen[name]}
            assert not started, f"{kind}/{name} started pods again on-prem: {started}"
            running = {uid for uid, (phase, terminating) in now.items() if phase == "Running" and not terminating}
            assert not running - {uid for uid, (phase, _) in seen[name].items() if phase == "Running"}, now
        checks += 1
        time.sleep(1)
    print(f"checked {checks} times over {2 * GRACE_SECONDS + 4}s: bindings, pods and status unchanged")
    events = hub.json("get", "events", "-n", "ml")["items"]
    moved = [e for e in events if e["reason"] in ("ReplicasMoved", "ReplicasEvicted")]
    assert not moved, moved


def _gpufed_waste(hub: Kubectl, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GPUFED, "waste", "--kubeconfig", str(hub.kubeconfig), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )


#: How much time after the verdict the waste report covers (two of the hub's 5-second buckets).
REPORTED_SECONDS = 10


@pytest.mark.slow
def test_a_request_that_can_never_fit_is_told_so_and_wastes_nothing(processes: ProcessGroup) -> None:
    hub, _ = _start_fleet(processes, *FAST_WASTE)
    hub.run("apply", "-f", str(MANIFESTS / "huge.yaml"))

    def never_fits() -> dict[str, Any] | None:
        cond = _condition(hub.json("get", "deployment", "huge", "-n", "ml"), "Schedulable")
        return cond if cond and cond.get("reason") == "NeverFits" else None

    cond = wait_for(never_fits, timeout=60, what="the Deployment's NeverFits condition")
    told = datetime.now(UTC)
    assert cond["status"] == "False"
    assert cond["message"] == (
        "can never fit: needs 64 nvidia.com/gpu in one pod; the largest node in the fleet has 8"
    ), cond
    binding = hub.json("get", "resourcebinding", "huge-deployment", "-n", "ml")
    scheduled = _condition(binding, "Scheduled")
    assert scheduled is not None and scheduled["reason"] == "NeverFits", scheduled
    # One scheduling pass: the condition is there from the first decision, with its Event.
    events = [e for e in hub.json("get", "events", "-n", "ml")["items"]
              if e["involvedObject"]["name"] == "huge" and cond["message"] in e["message"]]
    assert len(events) == 1 and events[0]["type"] == "Warning", events

    # The first buckets after the verdict (they hold no sample from before it): the fleet's free
    # GPUs are free-spare, the request apart.
    start = next_bucket(told)
    end = start + timedelta(seconds=REPORTED_SECONDS)
    wait_for(lambda: datetime.now(UTC) > end + timedelta(seconds=3), timeout=150, interval=1,
             what="the reported seconds to pass")
    result = _gpufed_waste(hub, "--from", start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "--to", end.strftime("%Y-%m-%dT%H:%M:%SZ"), "-o", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    hours = report["totals"]["gpu_hours"]
    print(f"gpu-hours per state over {start:%H:%M:%S}-{end:%H:%M:%S}: {hours}")
    assert hours["free-fragmented"] == 0 and hours["free-needed"] == 0, hours
    assert hours["free-spare"] > 0, hours
    assert report["totals"]["waste_pct"] == 0, report["totals"]
    assert [(n["namespace"], n["workload"], n["replicas"], n["message"]) for n in report["never_fit"]] == [
        ("ml", "Deployment/huge", 2, cond["message"])
    ]
    table = _gpufed_waste(hub, "--since", "10m")
    assert table.returncode == 0, table.stderr
    assert "REQUESTS THAT CAN NEVER FIT" in table.stdout and cond["message"] in table.stdout, table.stdout

    hub_log = (processes.root / "hub.log").read_text(errors="replace")
    assert "Traceback" not in hub_log, hub_log[-4000:]
