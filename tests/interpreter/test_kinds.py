"""Per-kind interpreters: replicas, components, shares, gangs, status aggregation, health, GPU shapes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.interpreter import Health, interpreter_for, keep_finished, registered_kinds
from controlplane.interpreter.base import KindInterpreter


def pod(gpu: dict[str, str] | None = None, *, cpu: str = "1", limits_only: bool = False) -> dict[str, Any]:
    resources: dict[str, Any]
    if limits_only:
        resources = {"limits": {"cpu": cpu, **(gpu or {})}}
    else:
        resources = {"requests": {"cpu": cpu, **(gpu or {})}, "limits": dict(gpu or {})}
    return {"spec": {"containers": [{"name": "main", "image": "img", "resources": resources}]}}


def deployment(replicas: int | None = 3) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": pod({"nvidia.com/gpu": "1"})}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "generation": 4},
        "spec": spec,
    }


def statefulset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s"},
        "spec": {"replicas": 2, "template": pod()},
    }


def job(parallelism: int | None = 4, completions: int | None = 8, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": pod({"nvidia.com/gpu": "2"}, limits_only=True)}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", **meta}, "spec": spec}


def pytorchjob(workers: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod()},
                "Worker": {"replicas": workers, "template": pod({"nvidia.com/gpu": "4"})},
            }
        },
    }


def mpijob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "m"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod()},
                "Worker": {"replicas": 2, "template": pod({"nvidia.com/mig-3g.40gb": "1"})},
            }
        },
    }


def ray_cluster_spec() -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": pod(cpu="2")},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": 2,
                "minReplicas": 1,
                "maxReplicas": 4,
                "template": pod({"nvidia.com/gpu": "1"}),
            },
            {"groupName": "multi", "replicas": 1, "numOfHosts": 2, "template": pod({"nvidia.com/gpu": "8"})},
        ],
    }


def rayjob() -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "r"},
        "spec": {"rayClusterSpec": ray_cluster_spec()},
    }


def raycluster() -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": ray_cluster_spec(),
    }


def interp(obj: dict[str, Any]) -> KindInterpreter:
    found = interpreter_for(obj["apiVersion"], obj["kind"])
    assert found is not None
    return found


def test_registry_knows_every_kind_and_ignores_versions() -> None:
    assert set(registered_kinds()) == {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("batch", "Job"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "XGBoostJob"),
        ("kubeflow.org", "PaddleJob"),
        ("kubeflow.org", "JAXJob"),
        ("kubeflow.org", "MPIJob"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("ray.io", "RayJob"),
        ("ray.io", "RayCluster"),
        ("", "Pod"),
    }
    assert interpreter_for("kubeflow.org/v1", "MPIJob") is interpreter_for("kubeflow.org/v2beta1", "MPIJob")
    assert interpreter_for("v1", "ConfigMap") is None


@pytest.mark.parametrize(
    ("obj", "replicas", "components"),
    [
        (deployment(3), 3, []),
        (deployment(None), 1, []),
        (statefulset(), 2, []),
        (job(4, 8), 4, []),
        (job(4, 2), 2, []),  # completions below parallelism caps the pods that run
        (job(None, None), 1, []),
        (pytorchjob(3), 4, [("Master", 1), ("Worker", 3)]),
        (mpijob(), 3, [("Launcher", 1), ("Worker", 2)]),
        (rayjob(), 5, [("head", 1), ("gpu", 2), ("multi", 2)]),
        (raycluster(), 5, [("head", 1), ("gpu", 2), ("multi", 2)]),
    ],
)
def test_replicas_and_components(
    obj: dict[str, Any], replicas: int, components: list[tuple[str, int]]
) -> None:
    kind = interp(obj)
    assert kind.replicas(obj) == replicas
    assert [(c.name, c.replicas) for c in kind.components(obj)] == components


@pytest.mark.parametrize(
    ("obj", "gpu"),
    [
        (deployment(), {"nvidia.com/gpu": 1}),
        (job(), {"nvidia.com/gpu": 2}),  # limits only: limits fill the requests
        (pytorchjob(), {"nvidia.com/gpu": 4}),  # the worker role
        (mpijob(), {"nvidia.com/mig-3g.40gb": 1}),
        (rayjob(), {"nvidia.com/gpu": 1}),  # the largest worker group
    ],
)
def test_replica_requirements_are_the_main_role(obj: dict[str, Any], gpu: dict[str, int]) -> None:
    assert interp(obj).replica_requirements(obj).gpu_resources == gpu


#: Each Kubeflow kind's replica-spec field and its roles in Kueue's pod set order
#: (``OrderedReplicaTypes`` of kueue's kubeflow integrations), written out apart from the code.
KUBEFLOW_ROLES = [
    ("PyTorchJob", "pytorchReplicaSpecs", ["Master", "Worker"]),
    ("TFJob", "tfReplicaSpecs", ["Chief", "Master", "PS", "Worker", "Evaluator"]),
    ("XGBoostJob", "xgbReplicaSpecs", ["Master", "Worker"]),
    ("PaddleJob", "paddleReplicaSpecs", ["Master", "Worker"]),
    ("JAXJob", "jaxReplicaSpecs", ["Worker"]),
    ("MPIJob", "mpiReplicaSpecs", ["Launcher", "Worker"]),
]


def training_job(kind: str, field: str, roles: list[str]) -> dict[str, Any]:
    """A job with every role of its kind, written in reverse order; 3 Workers with 4 GPUs each,
    one pod (the default: no ``replicas``) of every other role."""
    specs: dict[str, Any] = {}
    for role in reversed(roles):
        specs[role] = {"replicas": 3, "template": pod({"nvidia.com/gpu": "4"})} if role == "Worker" else {"template": pod()}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "t"}, "spec": {field: specs}}


@pytest.mark.parametrize(("kind", "field", "roles"), KUBEFLOW_ROLES)
def test_kubeflow_kinds_read_their_replica_specs_in_kueues_role_order(kind: str, field: str, roles: list[str]) -> None:
    obj = training_job(kind, field, roles)
    interpreter = interp(obj)
    assert [(c.name, c.replicas) for c in interpreter.components(obj)] == [(r, 3 if r == "Worker" else 1) for r in roles]
    assert [name for name, _ in interpreter.pod_set_slots(obj)] == roles
    assert interpreter.replicas(obj) == len(roles) + 2
    assert interpreter.is_gang(obj)
    assert interpreter.replica_requirements(obj).gpu_resources == {"nvidia.com/gpu": 4}
    # Given two pods more, the Worker role takes them; every other role keeps its pods.
    out = interpreter.with_replicas(obj, len(roles) + 4)
    assert {r: s.get("replicas") for r, s in out["spec"][field].items()} == {r: 5 if r == "Worker" else None for r in roles}
    # The replica specs under another kind's field are not this kind's.
    other = "mpiReplicaSpecs" if field != "mpiReplicaSpecs" else "pytorchReplicaSpecs"
    misplaced = {**obj, "spec": {other: obj["spec"][field]}}
    assert interpreter.components(misplaced) == []


def test_a_role_the_kind_does_not_name_comes_after_its_roles() -> None:
    obj = training_job("TFJob", "tfReplicaSpecs", ["Extra", "Worker", "PS"])
    assert [c.name for c in interp(obj).components(obj)] == ["PS", "Worker", "Extra"]


def test_pytorchjob_components_carry_per_role_requirements() -> None:
    obj = pytorchjob()
    master, worker = interp(obj).components(obj)
    assert master.requirements.resource_map == {"cpu": 1000}
    assert worker.requirements.resource_map == {"cpu": 1000, "nvidia.com/gpu": 4}


@pytest.mark.parametrize(
    ("obj", "share", "path", "expected"),
    [
        (deployment(10), 4, ("spec", "replicas"), 4),
        (statefulset(), 1, ("spec", "replicas"), 1),
        (job(4, 8), 3, ("spec", "parallelism"), 3),
        (job(4, 8), 3, ("spec", "completions"), 6),  # ceil(8 * 3 / 4)
        (job(4, 9), 1, ("spec", "completions"), 3),  # ceil(9 / 4): never fewer completions in total
        (job(4, 8), 4, ("spec", "completions"), 8),
        (pytorchjob(3), 6, ("spec", "pytorchReplicaSpecs", "Worker", "replicas"), 5),
        (pytorchjob(3), 4, ("spec", "pytorchReplicaSpecs", "Worker", "replicas"), 3),
        (mpijob(), 5, ("spec", "mpiReplicaSpecs", "Worker", "replicas"), 4),
    ],
)
def test_with_replicas(obj: dict[str, Any], share: int, path: tuple[str, ...], expected: int) -> None:
    original = copy.deepcopy(obj)
    out = interp(obj).with_replicas(obj, share)
    value: Any = out
    for step in path:
        value = value[step]
    assert value == expected
    assert obj == original  # inputs are never mutated


def test_job_without_completions_keeps_them_unset() -> None:
    out = interp(job(4, None)).with_replicas(job(4, None), 2)
    assert out["spec"]["parallelism"] == 2
    assert "completions" not in out["spec"]


def test_raycluster_with_replicas_keeps_head_and_scales_groups() -> None:
    obj = raycluster()
    kind = interp(obj)
    out = kind.with_replicas(obj, 9)  # head + 8 worker pods
    assert kind.replicas(out) == 9
    assert out["spec"]["headGroupSpec"] == obj["spec"]["headGroupSpec"]


@pytest.mark.parametrize(
    ("obj", "gang"),
    [
        (deployment(), False),
        (statefulset(), False),
        (job(), False),
        (job(annotations={"gpufed.io/gang": "true"}), True),
        (job(annotations={"gpufed.io/gang": "false"}), False),
        (job(labels={"scheduling.x-k8s.io/pod-group": "g", "scheduling.x-k8s.io/min-member": "4"}), True),
        (job(labels={"pod-group.scheduling.sigs.k8s.io": "g"}), False),  # a group without min-member
        (pytorchjob(), True),
        (mpijob(), True),
        (rayjob(), True),
        (raycluster(), True),
    ],
)
def test_is_gang(obj: dict[str, Any], gang: bool) -> None:
    assert interp(obj).is_gang(obj) is gang


def test_job_gang_from_pod_template_labels() -> None:
    obj = job()
    obj["spec"]["template"]["metadata"] = {
        "labels": {
            "pod-group.scheduling.sigs.k8s.io": "g",
            "pod-group.scheduling.sigs.k8s.io/min-available": "4",
        }
    }
    assert interp(obj).is_gang(obj) is True


def cond(ctype: str, status: str, **extra: str) -> dict[str, str]:
    return {"type": ctype, "status": status, **extra}


def test_deployment_aggregate_status_sums_and_merges_conditions() -> None:
    obj = deployment(5)
    members = [
        (
            "a",
            {
                "replicas": 3,
                "readyReplicas": 3,
                "availableReplicas": 3,
                "updatedReplicas": 3,
                "conditions": [cond("Available", "True")],
            },
        ),
        (
            "b",
            {
                "replicas": 2,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "updatedReplicas": 2,
                "conditions": [cond("Available", "False", message="minimum replicas unavailable")],
            },
        ),
    ]
    status = interp(obj).aggregate_status(obj, members)
    assert (
        status["replicas"],
        status["readyReplicas"],
        status["availableReplicas"],
        status["updatedReplicas"],
    ) == (5, 4, 4, 5)
    assert status["observedGeneration"] == 4
    [available] = status["conditions"]
    assert available["status"] == "False"
    assert "b: minimum replicas unavailable" in available["message"]


def sts_status(current: str, update: str, *, replicas: int = 2, updated: int = 2) -> dict[str, Any]:
    return {
        "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
        "currentReplicas": replicas - updated if current != update else replicas, "updatedReplicas": updated,
        "currentRevision": current, "updateRevision": update,
    }


@pytest.mark.parametrize(
    ("members", "revisions"),
    [
        pytest.param([("a", sts_status("s-1", "s-1")), ("b", sts_status("s-1", "s-1"))],
                     {"currentRevision": "s-1", "updateRevision": "s-1"}, id="all done at one revision"),
        pytest.param([("a", sts_status("s-1", "s-2", updated=0)), ("b", sts_status("s-1", "s-2", updated=1))],
                     {"currentRevision": "s-1", "updateRevision": "s-2"}, id="all rolling to one revision"),
        pytest.param([("a", sts_status("s-2", "s-2")), ("b", sts_status("s-1", "s-2", updated=1))],
                     {"updateRevision": "s-2"}, id="one done, one rolling: no common current revision"),
        pytest.param([("a", sts_status("s-a1", "s-a1")), ("b", sts_status("s-b1", "s-b1"))],
                     {}, id="overrides make each member's revision its own; all done"),
        pytest.param([("a", sts_status("s-a1", "s-a1")), ("b", sts_status("s-b1", "s-b2", updated=1))],
                     {"currentRevision": "s-b1", "updateRevision": "s-b2"}, id="own revisions, b rolling: b's pair"),
        pytest.param([("a", sts_status("s-1", "s-1")), ("b", None)], {}, id="a member not reported yet"),
    ],
)
def test_statefulset_revisions_are_the_ones_every_member_reports(
    members: list[tuple[str, dict[str, Any] | None]], revisions: dict[str, str]
) -> None:
    """Karmada's aggregation sums the counts and leaves the revisions out, so a tool comparing
    ``currentRevision`` with ``updateRevision`` reads two empty strings as a finished rollout."""
    sts = statefulset()
    status = interp(sts).aggregate_status(sts, members)
    assert {k: v for k, v in status.items() if k.endswith("Revision")} == revisions
    rolling = any(s is not None and s["currentRevision"] != s["updateRevision"] for _, s in members)
    assert (status.get("currentRevision") != status.get("updateRevision")) == rolling
    reported = [s for _, s in members if s is not None]
    assert status["updatedReplicas"] == sum(s["updatedReplicas"] for s in reported)
    assert status["currentReplicas"] == sum(s["currentReplicas"] for s in reported)
    assert status["availableReplicas"] == sum(s["availableReplicas"] for s in reported)


def test_replica_counts_at_zero_are_left_out_as_kubes_types_leave_them() -> None:
    """A Deployment's counts are all ``omitempty`` in kube (``unavailableReplicas: 0`` was shown); a
    StatefulSet writes ``replicas`` and ``availableReplicas`` even at 0, a ReplicaSet ``replicas``."""
    starting = {"replicas": 2, "updatedReplicas": 2, "unavailableReplicas": 2, "readyReplicas": 0}
    obj = deployment(2)
    assert {k: v for k, v in interp(obj).aggregate_status(obj, [("a", starting)]).items() if k != "observedGeneration"} == {
        "replicas": 2, "updatedReplicas": 2, "unavailableReplicas": 2,
    }
    ready = {"replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 0}
    assert "unavailableReplicas" not in interp(obj).aggregate_status(obj, [("a", ready)])
    sts = statefulset()
    assert {k: v for k, v in interp(sts).aggregate_status(sts, [("a", {"replicas": 0})]).items() if k != "observedGeneration"} == {
        "replicas": 0, "availableReplicas": 0,
    }
    rs = {**deployment(0), "kind": "ReplicaSet"}
    assert interp(rs).aggregate_status(rs, [("a", {"replicas": 0, "readyReplicas": 0})]) == {
        "replicas": 0, "observedGeneration": 4,
    }


@pytest.mark.parametrize(
    ("members", "complete", "failed", "succeeded"),
    [
        (
            [
                ("a", {"succeeded": 4, "conditions": [cond("Complete", "True")]}),
                ("b", {"succeeded": 4, "conditions": [cond("Complete", "True")]}),
            ],
            "True",
            None,
            8,
        ),
        (
            [
                ("a", {"succeeded": 4, "conditions": [cond("Complete", "True")]}),
                ("b", {"active": 2, "succeeded": 1}),
            ],
            "Unknown",
            None,
            5,
        ),
        (
            [("a", {"active": 1}), ("b", {"failed": 3, "conditions": [cond("Failed", "True")]})],
            None,
            "True",
            0,
        ),
    ],
)
def test_job_aggregate_status(
    members: list[tuple[str, dict[str, Any]]], complete: str | None, failed: str | None, succeeded: int
) -> None:
    obj = job()
    status = interp(obj).aggregate_status(obj, members)
    by_type = {c["type"]: c["status"] for c in status.get("conditions", [])}
    assert by_type.get("Complete") == complete
    assert by_type.get("Failed") == failed
    assert status.get("succeeded", 0) == succeeded


def test_pytorchjob_aggregate_status_sums_replica_statuses() -> None:
    obj = pytorchjob()
    members = [
        (
            "a",
            {
                "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2, "failed": 1}},
                "conditions": [cond("Running", "True")],
                "startTime": "2024-05-01T10:00:00Z",
            },
        ),
        (
            "b",
            {
                "replicaStatuses": {"Worker": {"active": 1}},
                "conditions": [cond("Running", "True")],
                "startTime": "2024-05-01T09:00:00Z",
            },
        ),
    ]
    status = interp(obj).aggregate_status(obj, members)
    assert status["replicaStatuses"] == {
        "Master": {"active": 1, "succeeded": 0, "failed": 0},
        "Worker": {"active": 3, "succeeded": 0, "failed": 1},
    }
    assert status["conditions"] == [{"type": "Running", "status": "True", "reason": "Aggregated"}]
    assert status["startTime"] == "2024-05-01T09:00:00Z"


def test_a_merged_condition_is_a_whole_metav1_condition() -> None:
    """A type one member has not reported is Unknown, and says so: reason NotReported, the
    cluster named, the transition time of the member that reported it (metav1.Condition asks for
    a reason and a transition time: CRD schemas and kube's PodDisruptionBudget validation)."""
    obj = job()
    complete = cond("Complete", "True", reason="Completed", message="done", lastTransitionTime="2026-01-01T00:00:00Z")
    status = interp(obj).aggregate_status(obj, [("a", {"succeeded": 1, "conditions": [complete]}), ("b", {"active": 1})])
    assert status["conditions"] == [{
        "type": "Complete", "status": "Unknown", "reason": "NotReported", "message": "b: not reported",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]


def test_aggregate_status_of_no_members_is_empty() -> None:
    for obj in (deployment(), job(), pytorchjob(), rayjob(), raycluster(), statefulset()):
        assert interp(obj).aggregate_status(obj, []) == {}


@pytest.mark.parametrize(
    ("obj", "status", "health"),
    [
        (deployment(), None, Health.UNKNOWN),
        (deployment(), {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}, Health.HEALTHY),
        (deployment(), {"replicas": 3, "updatedReplicas": 2, "availableReplicas": 2}, Health.UNHEALTHY),
        (statefulset(), {"replicas": 2, "readyReplicas": 1}, Health.UNHEALTHY),
        (statefulset(), {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}, Health.HEALTHY),
        (job(), {"active": 1}, Health.HEALTHY),
        (job(), {"conditions": [cond("Failed", "True")]}, Health.UNHEALTHY),
        (pytorchjob(), {"conditions": [cond("Running", "True")]}, Health.HEALTHY),
        (pytorchjob(), {"conditions": [cond("Failed", "True")]}, Health.UNHEALTHY),
        (rayjob(), {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, Health.HEALTHY),
        (rayjob(), {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, Health.UNHEALTHY),
        (raycluster(), {"state": "ready"}, Health.HEALTHY),
        (raycluster(), {"state": "failed"}, Health.UNHEALTHY),
    ],
)
def test_health(obj: dict[str, Any], status: dict[str, Any] | None, health: Health) -> None:
    assert interp(obj).health(status) is health


@pytest.mark.parametrize("obj", [deployment(), job(), pytorchjob(), mpijob(), rayjob(), raycluster()])
def test_with_gpu_request_rewrites_every_gpu_container(obj: dict[str, Any]) -> None:
    kind = interp(obj)
    out = kind.with_gpu_request(obj, {"nvidia.com/mig-2g.20gb": 1})
    for component in kind.components(out) or []:
        gpu = component.requirements.gpu_resources
        assert gpu in ({}, {"nvidia.com/mig-2g.20gb": 1}), component.name
    assert kind.replica_requirements(out).gpu_resources == {"nvidia.com/mig-2g.20gb": 1}
    # CPU requests survive, the original object is untouched.
    assert (
        kind.replica_requirements(out).resource_map["cpu"]
        == kind.replica_requirements(obj).resource_map["cpu"]
    )
    assert kind.replica_requirements(obj).gpu_resources != {"nvidia.com/mig-2g.20gb": 1}


def test_with_gpu_request_leaves_gpu_free_roles_alone() -> None:
    obj = pytorchjob()
    out = interp(obj).with_gpu_request(obj, {"nvidia.com/gpu": 2})
    master = out["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]
    assert (
        master
        == obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]
    )
    worker = out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
    assert worker["limits"] == {"nvidia.com/gpu": "2"}
    assert worker["requests"] == {"cpu": "1", "nvidia.com/gpu": "2"}


def _conditions(**values: str) -> dict[str, Any]:
    return {"conditions": [{"type": t, "status": v} for t, v in values.items()]}


@pytest.mark.parametrize(
    ("obj", "status", "phase"),
    [
        (job(), _conditions(Complete="True"), "Succeeded"),
        (job(), _conditions(Failed="True"), "Failed"),
        (job(), _conditions(Complete="False"), None),
        (job(), {"active": 2}, None),
        (pytorchjob(), _conditions(Created="True", Running="False", Succeeded="True"), "Succeeded"),
        (pytorchjob(), _conditions(Created="True", Running="True"), None),
        (mpijob(), _conditions(Succeeded="True"), "Succeeded"),
        (mpijob(), _conditions(Failed="True"), "Failed"),
        (mpijob(), _conditions(Restarting="True"), None),
        (rayjob(), {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "Succeeded"),
        (rayjob(), {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, "Failed"),
        (rayjob(), {"jobDeploymentStatus": "Failed"}, "Failed"),
        (rayjob(), {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, None),
        (deployment(), _conditions(Available="True"), None),
        (raycluster(), {"state": "ready"}, None),
        (job(), None, None),
    ],
)
def test_finished(obj: dict[str, Any], status: dict[str, Any] | None, phase: str | None) -> None:
    interp = interpreter_for(obj["apiVersion"], obj["kind"])
    assert interp is not None
    found = interp.finished(status)
    assert (str(found) if found is not None else None) == phase


def test_a_finished_status_never_flips_back() -> None:
    """Succeeded -> Running is what a member reporting a recreated pod (or a Work gone after a
    move) would write; the hub keeps the terminal phase."""
    interp = interpreter_for("kubeflow.org/v1", "MPIJob")
    assert interp is not None
    done = _conditions(Created="True", Succeeded="True")
    running = _conditions(Created="True", Running="True")
    assert keep_finished(interp, done, running) is done
    assert keep_finished(interp, done, {}) is done
    assert keep_finished(interp, running, done) is done
    assert keep_finished(interp, running, {"x": 1}) == {"x": 1}
