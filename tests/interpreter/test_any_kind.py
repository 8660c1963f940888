"""Default interpretation (a kind without an interpreter propagates whole, its hub status folded
by a status interpreter where it has one) and the ReplicaSet, LeaderWorkerSet and JobSet
interpreters."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.objects.scale import scale_of
from controlplane.controllers.workloads import is_plain, propagatable_types
from controlplane.hub import hub_registry
from controlplane.interpreter import Health, interpreter_for
from controlplane.interpreter.base import FinishedPhase
from controlplane.interpreter.native import status_interpreter_for


def pod_template(gpus: int = 0, cpu: str = "1") -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
    return {"spec": {"containers": [{"name": "main", "image": "img", "resources": {"requests": requests, "limits": requests}}]}}


def test_every_served_namespaced_kind_but_the_hubs_own_propagates() -> None:
    kinds = {(rt.group, rt.kind) for rt in propagatable_types(hub_registry())}
    for expected in [
        ("apps", "DaemonSet"), ("batch", "CronJob"), ("", "Service"), ("", "Pod"), ("networking.k8s.io", "Ingress"),
        ("networking.k8s.io", "NetworkPolicy"), ("policy", "PodDisruptionBudget"), ("autoscaling", "HorizontalPodAutoscaler"),
        ("", "LimitRange"), ("", "ResourceQuota"), ("apps", "ReplicaSet"), ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("jobset.x-k8s.io", "JobSet"), ("apps", "Deployment"), ("", "ConfigMap"),
        # The cluster-scoped kinds a ClusterPropagationPolicy sends.
        ("storage.k8s.io", "StorageClass"), ("scheduling.k8s.io", "PriorityClass"),
        ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ]:
        assert expected in kinds
    for hub_only in [("", "Event"), ("coordination.k8s.io", "Lease"), ("work.gpufed.io", "Work"),
                     ("policy.karmada.io", "PropagationPolicy"), ("", "Node"), ("", "PersistentVolume")]:
        assert hub_only not in kinds


def test_kinds_without_an_interpreter_are_plain() -> None:
    assert is_plain("apps/v1", "DaemonSet")
    assert is_plain("example.com/v1", "Widget")
    assert not is_plain("apps/v1", "ReplicaSet")


def test_daemonset_status_sums_the_members() -> None:
    folding = status_interpreter_for("apps", "DaemonSet")
    assert folding is not None
    member = {"desiredNumberScheduled": 4, "currentNumberScheduled": 4, "numberReady": 3, "numberAvailable": 3,
              "updatedNumberScheduled": 4, "numberMisscheduled": 0, "observedGeneration": 1}
    other = {**member, "desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 2,
             "numberAvailable": 2, "updatedNumberScheduled": 2}
    ds = {"metadata": {"generation": 3}}
    status = folding.aggregate_status(ds, [("a", member), ("b", other)])
    assert status["desiredNumberScheduled"] == 6
    assert status["numberReady"] == 5
    assert status["observedGeneration"] == 3
    assert "numberUnavailable" not in status
    assert "observedGeneration" not in folding.aggregate_status(ds, [("a", member), ("b", None)])
    assert folding.health(member) is Health.UNHEALTHY
    assert folding.health(other) is Health.HEALTHY


def test_cronjob_status_keeps_every_members_active_jobs_and_the_latest_times() -> None:
    folding = status_interpreter_for("batch", "CronJob")
    assert folding is not None
    a = {"active": [{"kind": "Job", "name": "nightly-100", "namespace": "ml"}], "lastScheduleTime": "2026-01-01T00:01:00Z"}
    b = {"lastScheduleTime": "2026-01-01T00:02:00Z", "lastSuccessfulTime": "2026-01-01T00:02:30Z"}
    status = folding.aggregate_status({}, [("b", b), ("a", a)])
    assert status["active"] == [{"kind": "Job", "name": "a/nightly-100", "namespace": "ml"}]
    assert status["lastScheduleTime"] == "2026-01-01T00:02:00Z"
    assert status["lastSuccessfulTime"] == "2026-01-01T00:02:30Z"
    assert folding.finished(status) is None


@pytest.mark.parametrize(("group", "kind"), [("", "Service"), ("networking.k8s.io", "Ingress")])
def test_load_balancer_points_of_every_member(group: str, kind: str) -> None:
    folding = status_interpreter_for(group, kind)
    assert folding is not None
    a = {"loadBalancer": {"ingress": [{"ip": "203.0.113.4"}]}}
    b = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"ip": "203.0.113.4"}]}}
    status = folding.aggregate_status({}, [("b", b), ("a", a)])
    assert status["loadBalancer"]["ingress"] == [{"ip": "203.0.113.4"}, {"ip": "203.0.113.9"}]
    assert folding.aggregate_status({}, [("a", {})]) == {"loadBalancer": {}}
    assert folding.health({}) is Health.UNHEALTHY


def test_a_kind_without_status_folding_keeps_its_hub_status() -> None:
    assert status_interpreter_for("", "ConfigMap") is None
    assert status_interpreter_for("example.com", "Widget") is None


def test_replicaset_is_divided_like_a_deployment() -> None:
    interp = interpreter_for("apps/v1", "ReplicaSet")
    assert interp is not None
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"replicas": 6, "template": pod_template(gpus=1)}}
    assert interp.replicas(rs) == 6
    assert interp.replica_requirements(rs).to_spec()["resourceRequest"]["nvidia.com/gpu"] == "1"
    assert interp.with_replicas(rs, 2)["spec"]["replicas"] == 2
    assert not interp.is_gang(rs)
    status = interp.aggregate_status(rs, [("a", {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
                                          ("b", {"replicas": 4, "readyReplicas": 1, "availableReplicas": 1})])
    assert (status["replicas"], status["readyReplicas"]) == (6, 3)


def lws(groups: int = 2, size: int = 4, *, leader: bool = True) -> dict[str, Any]:
    template: dict[str, Any] = {"size": size, "workerTemplate": pod_template(gpus=8, cpu="16")}
    if leader:
        template["leaderTemplate"] = pod_template(cpu="2")
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "spec": {"replicas": groups, "leaderWorkerTemplate": template}}


def test_leaderworkerset_is_a_gang_of_leaders_and_workers() -> None:
    interp = interpreter_for("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert interp is not None
    obj = lws()
    assert interp.replicas(obj) == 8  # 2 groups of 4 pods
    assert interp.is_gang(obj)
    leader, worker = interp.components(obj)
    assert (leader.name, leader.replicas) == ("leader", 2)
    assert "nvidia.com/gpu" not in leader.requirements.to_spec().get("resourceRequest", {})
    assert (worker.name, worker.replicas) == ("worker", 6)
    assert worker.requirements.to_spec()["resourceRequest"]["nvidia.com/gpu"] == "8"
    # Without a leader template the leader runs the workers' template.
    no_leader = interp.components(lws(leader=False))[0]
    assert no_leader.requirements.to_spec()["resourceRequest"]["nvidia.com/gpu"] == "8"
    # A share keeps whole groups.
    assert interp.with_replicas(obj, 4)["spec"]["replicas"] == 1
    assert interp.with_replicas(obj, 8)["spec"]["replicas"] == 2
    status = interp.aggregate_status(obj, [("a", {"replicas": 2, "readyReplicas": 1, "hpaPodSelector": "x=y"})])
    assert status["readyReplicas"] == 1 and status["hpaPodSelector"] == "x=y"


def jobset() -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "spec": {"replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": {"template": pod_template(cpu="2")}}},
            {"name": "workers", "replicas": 2,
             "template": {"spec": {"parallelism": 4, "completions": 4, "template": pod_template(gpus=1)}}},
        ]},
    }


def test_jobset_is_a_gang_of_its_replicated_jobs() -> None:
    interp = interpreter_for("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert interp is not None
    obj = jobset()
    driver, workers = interp.components(obj)
    assert (driver.name, driver.replicas) == ("driver", 1)
    assert (workers.name, workers.replicas) == ("workers", 8)
    assert interp.replicas(obj) == 9
    assert interp.is_gang(obj)
    assert interp.replica_requirements(obj).to_spec()["resourceRequest"]["nvidia.com/gpu"] == "1"


def test_jobset_status_sums_per_replicated_job_and_finishes() -> None:
    interp = interpreter_for("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert interp is not None
    a = {"replicatedJobsStatus": [{"name": "workers", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}],
         "restarts": 1}
    b = {"replicatedJobsStatus": [{"name": "workers", "ready": 1, "succeeded": 1, "failed": 0, "active": 1, "suspended": 0}],
         "restarts": 3, "terminalState": "Failed", "conditions": [{"type": "Failed", "status": "True"}]}
    status = interp.aggregate_status(jobset(), [("a", a), ("b", b)])
    assert status["replicatedJobsStatus"] == [{"name": "workers", "ready": 3, "succeeded": 1, "failed": 0, "active": 3, "suspended": 0}]
    assert status["restarts"] == 3
    assert status["terminalState"] == "Failed"
    assert interp.finished(status) is FinishedPhase.FAILED
    assert interp.health(b) is Health.UNHEALTHY
    assert interp.finished({"terminalState": "Completed"}) is FinishedPhase.SUCCEEDED


def test_leaderworkerset_scale_shows_its_serialized_pod_selector() -> None:
    rt = hub_registry().require("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    obj = {**lws(groups=3), "metadata": {"name": "serve", "namespace": "ml"},
           "status": {"replicas": 3, "hpaPodSelector": "leaderworkerset.sigs.k8s.io/name=serve"}}
    scale = scale_of(rt, obj)
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 3, "selector": "leaderworkerset.sigs.k8s.io/name=serve"}
