"""Pure lifecycle logic: kubelet transitions, durations, and the controllers' reconcile results."""

from __future__ import annotations

import random
from typing import Any

import pytest

from simulator.controllers.base import orphaned
from simulator.controllers.job import reconcile_job
from simulator.controllers.kubeflow import reconcile_kubeflow_job
from simulator.controllers.rayjob import ANNOTATION_RUN_TO_COMPLETION, reconcile_rayjob
from simulator.controllers.statefulset import reconcile_statefulset
from simulator.kubelet import (
    KubeletTimes,
    annotated_utilization,
    next_status,
    parse_duration,
    runs_to_completion,
)

NOW = "2025-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300s", 300), ("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("300", 300), ("250ms", 0.25), ("0", 0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "5x", "-3", "5m3", "m5"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("raw", "value"), [("0.03", 0.03), ("45%", 0.45), ("2", 1.0), ("bad", None)])
def test_annotated_utilization(raw: str, value: float | None) -> None:
    pod = {"metadata": {"annotations": {"sim.gpufed.io/gpu-utilization": raw}}}
    assert annotated_utilization(pod) == value


def _pod(restart: str = "Never", phase: str = "Pending", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "d", "uid": "u-1", "annotations": annotations},
        "spec": {"restartPolicy": restart, "containers": [{"name": "main", "image": "img"}], "nodeName": "n"},
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("pod", "now", "phase", "due"),
    [
        (_pod(), 101.0, None, 102.0),  # still starting
        (_pod(), 102.0, "Running", 402.0),  # started, default 300 s duration
        (_pod(**{"sim.gpufed.io/duration": "10s"}), 200.0, "Succeeded", None),  # bound and done long ago
        (_pod("Always"), 150.0, "Running", None),  # services run forever
        (_pod(phase="Running", **{"sim.gpufed.io/duration": "60s"}), 161.0, None, 162.0),
        (_pod(phase="Running", **{"sim.gpufed.io/duration": "60s"}), 162.0, "Succeeded", None),
        (
            _pod(phase="Running", **{"sim.gpufed.io/duration": "60s", "sim.gpufed.io/exit-code": "3"}),
            170.0,
            "Failed",
            None,
        ),
        (_pod("Always", phase="Running"), 1e9, None, None),
        (_pod(phase="Succeeded"), 1e9, None, None),
    ],
)
def test_kubelet_transitions(pod: dict[str, Any], now: float, phase: str | None, due: float | None) -> None:
    status, next_due = next_status(
        pod,
        KubeletTimes(bound_at=100.0),
        now=now,
        startup_delay=2.0,
        default_duration=300.0,
        host_ip="10.0.0.1",
        pod_ip="10.1.0.1",
    )
    assert (status or {}).get("phase") == phase
    assert next_due == due
    if phase == "Running":
        assert status is not None
        ready = {c["type"]: c["status"] for c in status["conditions"]}
        assert ready["Ready"] == "True" and ready["PodScheduled"] == "True"
        assert status["containerStatuses"][0]["state"]["running"]["startedAt"]
    if phase in ("Succeeded", "Failed"):
        assert status is not None
        terminated = status["containerStatuses"][0]["state"]["terminated"]
        assert terminated["exitCode"] == (0 if phase == "Succeeded" else 3)


@pytest.mark.parametrize(
    ("restart", "annotation", "expected"),
    [("Never", None, True), ("OnFailure", None, True), ("Always", None, False), ("Always", "true", True)],
)
def test_runs_to_completion(restart: str, annotation: str | None, expected: bool) -> None:
    pod = _pod(restart)
    if annotation:
        pod["metadata"]["annotations"][ANNOTATION_RUN_TO_COMPLETION] = annotation
    assert runs_to_completion(pod) is expected


def _owner(
    kind: str, api_version: str, spec: dict[str, Any], status: dict[str, Any] | None = None
) -> dict[str, Any]:
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "w", "namespace": "d", "uid": "uid-w", "generation": 2},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def _child(
    name: str,
    *,
    phase: str = "Running",
    ready: bool = True,
    created: str = NOW,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "d", "creationTimestamp": created, "labels": labels or {}},
        "spec": {},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


TEMPLATE: dict[str, Any] = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


@pytest.mark.parametrize(
    ("spec", "pods", "creates", "condition"),
    [
        ({"completions": 3, "parallelism": 2}, [], 2, None),
        ({"completions": 3, "parallelism": 2}, [_child("a", phase="Succeeded"), _child("b")], 1, None),
        ({"completions": 2}, [_child("a", phase="Succeeded"), _child("b", phase="Succeeded")], 0, "Complete"),
        ({"backoffLimit": 1}, [_child("a", phase="Failed"), _child("b", phase="Failed")], 0, "Failed"),
        ({"suspend": True}, [_child("a")], 0, "Suspended"),
    ],
)
def test_job(spec: dict[str, Any], pods: list[dict[str, Any]], creates: int, condition: str | None) -> None:
    job = _owner(
        "Job",
        "batch/v1",
        {"template": {**TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}, **spec},
    )
    changes = reconcile_job(job, pods, now=NOW, rng=random.Random(0))
    assert len(changes.create) == creates
    assert changes.status is not None
    types = {c["type"] for c in changes.status.get("conditions", []) if c["status"] == "True"}
    assert types == ({condition} if condition else set())
    for pod in changes.create:
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "w"


def test_a_lowered_parallelism_deletes_the_surplus_pods_not_ready_then_newest_first() -> None:
    job = _owner("Job", "batch/v1", {"template": TEMPLATE, "parallelism": 2, "completions": 3})
    pods = [_child("old", created="2025-01-01T00:00:00Z"), _child("new", created="2025-01-01T00:01:00Z"),
            _child("mid", created="2025-01-01T00:00:30Z"), _child("pending", phase="Pending", ready=False)]
    changes = reconcile_job(job, pods, now=NOW, rng=random.Random(0))
    assert sorted(changes.delete) == ["new", "pending"] and not changes.create
    assert changes.status is not None and changes.status["active"] == 2


@pytest.mark.parametrize(
    ("kind", "field", "chief", "restart", "operator"),
    [
        ("PyTorchJob", "pytorchReplicaSpecs", "Master", "OnFailure", "pytorchjob-controller"),
        ("TFJob", "tfReplicaSpecs", "Chief", "Never", "tfjob-controller"),
        ("XGBoostJob", "xgbReplicaSpecs", "Master", "Never", "xgboostjob-controller"),
        ("PaddleJob", "paddleReplicaSpecs", "Master", "OnFailure", "paddlejob-controller"),
    ],
)
def test_kubeflow_job_pods_and_status(kind: str, field: str, chief: str, restart: str, operator: str) -> None:
    """Pods per role of the kind's replica specs, with the operator's labels and its default
    restartPolicy; the job runs while its chief does and succeeds when its chief has."""
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "train", "image": "i"}]}}}
    job = _owner(kind, "kubeflow.org/v1", {field: {"Worker": {**replica, "replicas": 2}, chief: replica}})
    changes = reconcile_kubeflow_job(job, [], now=NOW, rng=random.Random(0))
    head = f"w-{chief.lower()}-0"
    assert sorted(p["metadata"]["name"] for p in changes.create) == sorted([head, "w-worker-0", "w-worker-1"])
    for pod in changes.create:
        labels = pod["metadata"]["labels"]
        assert labels["scheduling.x-k8s.io/pod-group"] == "w"
        assert labels["training.kubeflow.org/operator-name"] == operator
        assert ("training.kubeflow.org/job-role" in labels) is (pod["metadata"]["name"] == head)
        assert pod["metadata"]["annotations"]["scheduling.x-k8s.io/min-member"] == "3"
        assert pod["spec"]["restartPolicy"] == restart
    assert changes.status is not None
    assert [(c["type"], c["reason"]) for c in changes.status["conditions"]] == [("Created", f"{kind}Created")]
    running = [_child(head), _child("w-worker-0", phase="Pending"), _child("w-worker-1", phase="Pending")]
    changes = reconcile_kubeflow_job(job, running, now=NOW, rng=random.Random(0))
    assert changes.status is not None
    assert {c["type"]: c["status"] for c in changes.status["conditions"]}["Running"] == "True"
    done = [_child(head, phase="Succeeded"), _child("w-worker-0"), _child("w-worker-1")]
    changes = reconcile_kubeflow_job(job, done, now=NOW, rng=random.Random(0))
    assert changes.status is not None
    conditions = {c["type"]: c["status"] for c in changes.status["conditions"]}
    assert conditions["Succeeded"] == "True" and conditions["Running"] == "False"
    assert changes.status["replicaStatuses"][chief]["succeeded"] == 1
    assert changes.status["replicaStatuses"]["Worker"]["active"] == 2


def test_a_tfjob_without_a_chief_ends_with_its_master() -> None:
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}}
    job = _owner("TFJob", "kubeflow.org/v1", {"tfReplicaSpecs": {"PS": replica, "Master": replica, "Worker": replica}})
    pods = [_child("w-ps-0"), _child("w-master-0", phase="Succeeded"), _child("w-worker-0")]
    changes = reconcile_kubeflow_job(job, pods, now=NOW, rng=random.Random(0))
    assert changes.status is not None
    assert {c["type"]: c["status"] for c in changes.status["conditions"]}["Succeeded"] == "True"


@pytest.mark.parametrize(
    ("success_policy", "succeeded"),
    [(None, True), ("", True), ("AllWorkers", False)],
)
def test_a_tfjob_without_chief_or_master_ends_with_its_worker_0(success_policy: str | None, succeeded: bool) -> None:
    """The TF operator's default success policy: worker 0 done is the job done; ``AllWorkers``
    waits for every worker."""
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}}
    spec: dict[str, Any] = {"tfReplicaSpecs": {"PS": replica, "Worker": {**replica, "replicas": 2}}}
    if success_policy is not None:
        spec["successPolicy"] = success_policy
    job = _owner("TFJob", "kubeflow.org/v1", spec)
    created = reconcile_kubeflow_job(job, [], now=NOW, rng=random.Random(0)).create
    roles = {p["metadata"]["name"]: p["metadata"]["labels"].get("training.kubeflow.org/job-role") for p in created}
    assert roles == {"w-ps-0": None, "w-worker-0": "worker" if success_policy != "AllWorkers" else None, "w-worker-1": None}
    pods = [_child("w-ps-0"), _child("w-worker-0", phase="Succeeded"), _child("w-worker-1")]
    changes = reconcile_kubeflow_job(job, pods, now=NOW, rng=random.Random(0))
    assert changes.status is not None
    assert ({c["type"]: c["status"] for c in changes.status["conditions"]}.get("Succeeded") == "True") is succeeded
    # Once worker 0 has succeeded, a missing pod is not created again (the status may not say so yet).
    again = reconcile_kubeflow_job(job, [_child("w-ps-0"), _child("w-worker-0", phase="Succeeded")], now=NOW, rng=random.Random(0))
    assert (again.create == []) is succeeded


def test_a_jaxjob_runs_when_all_its_workers_do_and_succeeds_when_all_have() -> None:
    job = _owner("JAXJob", "kubeflow.org/v1", {"jaxReplicaSpecs": {"Worker": {
        "replicas": 2, "template": {"spec": {"containers": [{"name": "jax", "image": "i"}]}}}}})
    created = reconcile_kubeflow_job(job, [], now=NOW, rng=random.Random(0)).create
    assert [(p["metadata"]["name"], p["spec"]["restartPolicy"]) for p in created] == [("w-worker-0", "Never"), ("w-worker-1", "Never")]

    def conditions(pods: list[dict[str, Any]]) -> dict[str, str]:
        status = reconcile_kubeflow_job(job, pods, now=NOW, rng=random.Random(0)).status
        assert status is not None
        return {c["type"]: c["status"] for c in status["conditions"]}

    assert "Running" not in conditions([_child("w-worker-0"), _child("w-worker-1", phase="Pending")])
    assert conditions([_child("w-worker-0"), _child("w-worker-1")])["Running"] == "True"
    assert "Succeeded" not in conditions([_child("w-worker-0", phase="Succeeded"), _child("w-worker-1")])
    assert conditions([_child("w-worker-0", phase="Succeeded"), _child("w-worker-1", phase="Succeeded")])["Succeeded"] == "True"


def test_mpijob_cleans_up_workers_after_launcher() -> None:
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}}
    job = _owner(
        "MPIJob",
        "kubeflow.org/v1",
        {"mpiReplicaSpecs": {"Launcher": replica, "Worker": {**replica, "replicas": 2}}},
    )
    assert sorted(
        p["metadata"]["name"]
        for p in reconcile_kubeflow_job(job, [], now=NOW, rng=random.Random(0)).create
    ) == [
        "w-launcher",
        "w-worker-0",
        "w-worker-1",
    ]
    pods = [_child("w-launcher", phase="Succeeded"), _child("w-worker-0"), _child("w-worker-1")]
    changes = reconcile_kubeflow_job(job, pods, now=NOW, rng=random.Random(0))
    assert sorted(changes.delete) == ["w-worker-0", "w-worker-1"]


def _terminating(pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": NOW}}


SUCCEEDED_STATUS = {"conditions": [{"type": "Succeeded", "status": "True"}]}


@pytest.mark.parametrize(
    ("kind", "specs_key", "chief", "status", "pods"),
    [
        # The status write of the success has not reached the cache yet: the pods say it.
        pytest.param("MPIJob", "mpiReplicaSpecs", "launcher", None,
                     [_child("w-launcher", phase="Succeeded"), _terminating(_child("w-worker-1"))],
                     id="mpijob-stale-status-workers-deleted"),
        pytest.param("PyTorchJob", "pytorchReplicaSpecs", "master-0", None,
                     [_child("w-master-0", phase="Succeeded")], id="pytorchjob-stale-status-master-done"),
        pytest.param("TFJob", "tfReplicaSpecs", "master-0", None,
                     [_child("w-master-0", phase="Succeeded")], id="tfjob-stale-status-master-done"),
        pytest.param("MPIJob", "mpiReplicaSpecs", "launcher", SUCCEEDED_STATUS, [],
                     id="mpijob-finished-every-pod-gone"),
        pytest.param("PyTorchJob", "pytorchReplicaSpecs", "master-0", SUCCEEDED_STATUS, [],
                     id="pytorchjob-finished-every-pod-gone"),
        pytest.param("PyTorchJob", "pytorchReplicaSpecs", "master-0", None,
                     [_child("w-master-0"), _child("w-worker-0", phase="Failed")], id="a-pod-failed"),
    ],
)
def test_a_finished_gang_gets_no_new_pod(
    kind: str, specs_key: str, chief: str, status: dict[str, Any] | None, pods: list[dict[str, Any]]
) -> None:
    """As the training-operator and the MPI operator: once the job finished, no pod is created
    again, so no worker is left Pending ("pod group has 1 of 3 pods") for the hub to move."""
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}}
    role = "Launcher" if kind == "MPIJob" else "Master"
    job = _owner(kind, "kubeflow.org/v1", {specs_key: {role: replica, "Worker": {**replica, "replicas": 2}}}, status)
    changes = reconcile_kubeflow_job(job, pods, now=NOW, rng=random.Random(0))
    assert changes.create == []


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        (None, ["w-worker-0", "w-worker-1"]),  # the simulated MPIJob's default: Running
        ("Running", ["w-worker-0", "w-worker-1"]),
        ("All", ["w-launcher", "w-worker-0", "w-worker-1"]),
        ("None", []),
    ],
)
def test_finished_mpijob_cleans_pods_as_its_clean_pod_policy_says(policy: str | None, deleted: list[str]) -> None:
    replica = {"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}}
    spec: dict[str, Any] = {"mpiReplicaSpecs": {"Launcher": replica, "Worker": {**replica, "replicas": 2}}}
    if policy is not None:
        spec["runPolicy"] = {"cleanPodPolicy": policy}
    job = _owner("MPIJob", "kubeflow.org/v1", spec, SUCCEEDED_STATUS)
    pods = [_child("w-launcher", phase="Succeeded"), _child("w-worker-0"), _child("w-worker-1", phase="Pending")]
    changes = reconcile_kubeflow_job(job, pods, now=NOW, rng=random.Random(0))
    assert sorted(changes.delete) == deleted
    assert changes.create == []


@pytest.mark.parametrize(
    ("policy", "creates"), [("OrderedReady", ["w-0"]), ("Parallel", ["w-0", "w-1", "w-2"])]
)
def test_statefulset_policies(policy: str, creates: list[str]) -> None:
    sts = _owner(
        "StatefulSet", "apps/v1", {"replicas": 3, "podManagementPolicy": policy, "template": TEMPLATE}
    )
    changes = reconcile_statefulset(sts, [], now=NOW, rng=random.Random(0))
    assert [p["metadata"]["name"] for p in changes.create] == creates
    shrink = _owner("StatefulSet", "apps/v1", {"replicas": 1, "template": TEMPLATE})
    changes = reconcile_statefulset(
        shrink, [_child(f"w-{i}") for i in range(3)], now=NOW, rng=random.Random(0)
    )
    assert changes.delete == ["w-2"]


def test_orphans() -> None:
    owned = {"metadata": {"name": "a", "ownerReferences": [{"uid": "gone", "controller": True}]}}
    kept = {"metadata": {"name": "b", "ownerReferences": [{"uid": "live", "controller": True}]}}
    bare = {"metadata": {"name": "c"}}
    assert orphaned([owned, kept, bare], {"live"}) == [owned]


def test_rayjob_head_runs_to_completion_and_workers_go() -> None:
    spec = {
        "rayClusterSpec": {
            "headGroupSpec": {"template": TEMPLATE},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": TEMPLATE}],
        }
    }
    job = _owner("RayJob", "ray.io/v1", spec)
    changes = reconcile_rayjob(job, [], now=NOW, rng=random.Random(0))
    heads = [p for p in changes.create if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    assert len(heads) == 1 and len(changes.create) == 3
    assert heads[0]["metadata"]["annotations"][ANNOTATION_RUN_TO_COMPLETION] == "true"
    assert changes.status is not None and changes.status["jobDeploymentStatus"] == "Initializing"
    pods = [
        _child("w-head-x", phase="Succeeded", labels={"ray.io/node-type": "head"}),
        _child("w-gpu-worker-a", labels={"ray.io/node-type": "worker", "ray.io/group": "gpu"}),
    ]
    changes = reconcile_rayjob(job, pods, now=NOW, rng=random.Random(0))
    assert changes.delete == ["w-gpu-worker-a"]
    assert changes.status is not None and changes.status["jobStatus"] == "SUCCEEDED"


def _roll(sts: dict[str, Any], pods: dict[str, dict[str, Any]]) -> list[str]:
    """Run the StatefulSet controller until it has nothing left to do, each created pod running
    and Ready at once; the names it deleted, in order."""
    deleted: list[str] = []
    for _ in range(50):
        changes = reconcile_statefulset(sts, list(pods.values()), now=NOW, rng=random.Random(0))
        if changes.status is not None:
            sts["status"] = changes.status
        if not changes.create and not changes.delete:
            return deleted
        for pod in changes.create:
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            pods[pod["metadata"]["name"]] = pod
        for name in changes.delete:
            deleted.append(name)
            del pods[name]
    raise AssertionError("the StatefulSet controller never settled")


def _images(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: pod["spec"]["containers"][0]["image"] for name, pod in sorted(pods.items())}


def test_statefulset_rolls_out_the_pods_at_or_above_its_partition() -> None:
    """As kube's StatefulSet controller: highest ordinal first, one at a time, only ordinals at or
    above the partition; the ones below keep the current revision, even when made again."""
    spec: dict[str, Any] = {
        "replicas": 4,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
        "template": TEMPLATE,
    }
    sts = _owner("StatefulSet", "apps/v1", spec)
    pods: dict[str, dict[str, Any]] = {}
    _roll(sts, pods)
    old = sts["status"]["updateRevision"]
    assert sts["status"]["currentRevision"] == old and sts["status"]["updatedReplicas"] == 4

    spec["template"] = {**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "i:2"}]}}
    assert _roll(sts, pods) == ["w-3", "w-2"]
    assert _images(pods) == {"w-0": "i", "w-1": "i", "w-2": "i:2", "w-3": "i:2"}
    status = sts["status"]
    assert status["updatedReplicas"] == 2 and status["currentReplicas"] == 2 and status["readyReplicas"] == 4
    assert status["currentRevision"] == old != status["updateRevision"]

    del pods["w-1"]  # a pod below the partition comes back at the current revision
    _roll(sts, pods)
    assert _images(pods)["w-1"] == "i"
    assert pods["w-1"]["metadata"]["labels"]["controller-revision-hash"] == old

    spec["updateStrategy"]["rollingUpdate"]["partition"] = 0
    assert _roll(sts, pods) == ["w-1", "w-0"]
    assert set(_images(pods).values()) == {"i:2"}
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]
    assert sts["status"]["currentReplicas"] == sts["status"]["updatedReplicas"] == 4


def test_statefulset_on_delete_leaves_its_pods_to_the_user() -> None:
    spec: dict[str, Any] = {"replicas": 2, "updateStrategy": {"type": "OnDelete"}, "template": TEMPLATE}
    sts = _owner("StatefulSet", "apps/v1", spec)
    pods: dict[str, dict[str, Any]] = {}
    _roll(sts, pods)
    spec["template"] = {**TEMPLATE, "spec": {"containers": [{"name": "c", "image": "i:2"}]}}
    assert _roll(sts, pods) == []
    assert sts["status"].get("updatedReplicas", 0) == 0
    del pods["w-1"]
    _roll(sts, pods)
    assert _images(pods) == {"w-0": "i", "w-1": "i:2"}
