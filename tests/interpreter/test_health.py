"""Health by kind has one home: the agent's assessment and the hub's fallback (for an agent that
reports no health) apply the same rule, and agree wherever they know the same of the object.

Each case is a whole member object and the health the agent reports for it. The hub, given the
whole object, judges it the same; given what it knows in the status controller (the member's
status and the Work manifest's spec, not the member's ``metadata.generation``), it judges it the
same too, except for a status about an earlier generation, which only the agent can tell.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.work_v1alpha1 import Health
from controlplane.controllers.status import aggregate
from controlplane.interpreter import interpreter_for, judge_health, registered_kinds
from controlplane.interpreter.health import ALWAYS_HEALTHY_KINDS
from controlplane.interpreter.native import StatusInterpreter, native_health_rules, status_interpreter_for
from controlplane.interpreter.registry import group_of
from member_agent.assessing import assess_health

H, U, K = Health.HEALTHY, Health.UNHEALTHY, Health.UNKNOWN


def member(
    api_version: str,
    kind: str,
    *,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ml", "generation": generation},
        "spec": spec or {},
    }
    if status is not None:
        out["status"] = status
    return out


def conds(**values: str) -> list[dict[str, str]]:
    return [{"type": k, "status": v} for k, v in values.items()]


def deployment(wanted: int, generation: int = 1, /, **status: Any) -> dict[str, Any]:
    return member("apps/v1", "Deployment", spec={"replicas": wanted}, status=status, generation=generation)


def daemonset(generation: int = 1, /, **status: Any) -> dict[str, Any]:
    return member("apps/v1", "DaemonSet", status=status, generation=generation)


#: (member object, the agent's health, the hub's health from the status controller's view when
#: it cannot tell the agent's: the status is about an earlier generation).
CASES: list[tuple[dict[str, Any], Health, Health | None]] = [
    (deployment(3, availableReplicas=3, updatedReplicas=3, observedGeneration=1), H, None),
    (deployment(3, availableReplicas=1, updatedReplicas=3, observedGeneration=1), U, None),
    (deployment(3, availableReplicas=3, updatedReplicas=2, replicas=4, observedGeneration=1), U, None),
    (
        deployment(3, availableReplicas=1, updatedReplicas=3, observedGeneration=1, conditions=conds(Available="False")),
        U,
        None,
    ),
    (deployment(3, 2, availableReplicas=3, updatedReplicas=3, observedGeneration=1), K, H),
    (deployment(0), H, None),
    (deployment(2), U, None),
    (member("apps/v1", "StatefulSet", spec={"replicas": 2}, status={"readyReplicas": 2, "updatedReplicas": 2}), H, None),
    (member("apps/v1", "StatefulSet", spec={"replicas": 2}, status={"readyReplicas": 1, "replicas": 2}), U, None),
    (
        member("apps/v1", "StatefulSet", spec={"replicas": 2}, status={"readyReplicas": 1, "observedGeneration": 1}, generation=2),
        K,
        U,
    ),
    (member("apps/v1", "ReplicaSet", spec={"replicas": 2}, status={"readyReplicas": 2, "availableReplicas": 2}), H, None),
    (member("apps/v1", "ReplicaSet", spec={"replicas": 2}, status={"readyReplicas": 1, "availableReplicas": 1}), U, None),
    (daemonset(desiredNumberScheduled=4, updatedNumberScheduled=4, numberAvailable=4, observedGeneration=1), H, None),
    (daemonset(desiredNumberScheduled=4, updatedNumberScheduled=4, numberAvailable=2, observedGeneration=1), U, None),
    (daemonset(desiredNumberScheduled=4, updatedNumberScheduled=3, numberAvailable=4, observedGeneration=1), U, None),
    (daemonset(2, desiredNumberScheduled=4, updatedNumberScheduled=4, numberAvailable=4, observedGeneration=1), K, H),
    (daemonset(), K, None),
    (member("v1", "Service", spec={"type": "ClusterIP"}, status={"loadBalancer": {}}), H, None),
    (member("v1", "Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": {}}), U, None),
    (
        member("v1", "Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}),
        H,
        None,
    ),
    (member("networking.k8s.io/v1", "Ingress", status={"loadBalancer": {}}), U, None),
    (member("networking.k8s.io/v1", "Ingress", status={"loadBalancer": {"ingress": [{"hostname": "lb"}]}}), H, None),
    (member("policy/v1", "PodDisruptionBudget", status={"currentHealthy": 1, "desiredHealthy": 2}), U, None),
    (member("policy/v1", "PodDisruptionBudget", status={"currentHealthy": 2, "desiredHealthy": 2}), H, None),
    (member("policy/v1", "PodDisruptionBudget"), K, None),
    (member("batch/v1", "CronJob", status={"active": [{"name": "j"}]}), H, None),
    (member("batch/v1", "Job", status={"active": 1}), H, None),
    (member("batch/v1", "Job", status={"conditions": conds(Failed="True")}), U, None),
    (member("batch/v1", "Job", status={"active": 1, "conditions": conds(FailureTarget="True")}), U, None),
    (member("batch/v1", "Job", status={"conditions": conds(Complete="True")}), H, None),
    (member("jobset.x-k8s.io/v1alpha2", "JobSet", status={"replicatedJobsStatus": []}), H, None),
    (member("jobset.x-k8s.io/v1alpha2", "JobSet", status={"conditions": conds(Failed="True")}), U, None),
    (member("jobset.x-k8s.io/v1alpha2", "JobSet", status={"conditions": conds(Completed="True")}), H, None),
    (member("jobset.x-k8s.io/v1alpha2", "JobSet", status={"terminalState": "Failed"}), U, None),
    (member("jobset.x-k8s.io/v1alpha2", "JobSet", status={"conditions": conds(Suspended="True")}), K, None),
    (member("kubeflow.org/v1", "PyTorchJob", status={"conditions": conds(Created="True", Running="True")}), H, None),
    (member("kubeflow.org/v1", "PyTorchJob", status={"conditions": conds(Created="True")}), K, None),
    (member("kubeflow.org/v1", "PyTorchJob", status={}), K, None),
    (member("trainer.kubeflow.org/v1alpha1", "TrainJob", status={}), K, None),
    (member("trainer.kubeflow.org/v1alpha1", "TrainJob", status={"jobsStatus": [{"name": "node", "ready": 1}]}), H, None),
    (member("trainer.kubeflow.org/v1alpha1", "TrainJob", status={"conditions": conds(Complete="True")}), H, None),
    (member("trainer.kubeflow.org/v1alpha1", "TrainJob", status={"conditions": conds(Failed="True")}), U, None),
    (member("kubeflow.org/v2beta1", "MPIJob", status={"conditions": conds(Running="False", Failed="True")}), U, None),
    *(case for kind in ("TFJob", "XGBoostJob", "PaddleJob", "JAXJob") for case in (
        (member("kubeflow.org/v1", kind, status={"conditions": conds(Created="True", Running="True")}), H, None),
        (member("kubeflow.org/v1", kind, status={"conditions": conds(Created="True")}), K, None),
        (member("kubeflow.org/v1", kind, status={"conditions": conds(Running="False", Failed="True")}), U, None),
    )),
    (member("kubeflow.org/v2beta1", "MPIJob", status={"conditions": conds(Succeeded="True")}), H, None),
    (member("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", spec={"replicas": 2}, status={"readyReplicas": 2}), H, None),
    (member("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", spec={"replicas": 2}, status={"readyReplicas": 1}), U, None),
    (
        member(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            spec={"replicas": 2},
            status={"readyReplicas": 2, "conditions": conds(Available="False")},
        ),
        U,
        None,
    ),
    (member("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", spec={"replicas": 2}), K, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}), H, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}), H, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}), U, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "Initializing"}), K, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "Failed"}), U, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "ValidationFailed"}), U, None),
    (member("ray.io/v1", "RayJob", status={"jobDeploymentStatus": "Failed", "jobStatus": "RUNNING"}), U, None),
    (member("ray.io/v1", "RayCluster", status={"state": "ready"}), H, None),
    (member("ray.io/v1", "RayCluster", status={"state": "failed"}), U, None),
    (member("ray.io/v1", "RayCluster", status={}), K, None),
    (member("v1", "Pod", status={"phase": "Running", "conditions": conds(Ready="True")}), H, None),
    (member("v1", "Pod", status={"phase": "Running", "conditions": conds(Ready="False")}), K, None),
    (member("v1", "Pod", status={"phase": "Failed"}), U, None),
    (member("v1", "PersistentVolumeClaim", status={"phase": "Pending"}), H, None),  # it may wait for its first consumer
    (member("v1", "ConfigMap"), H, None),
    (member("example.com/v1", "Widget", status={}), H, None),
    (member("example.com/v1", "Widget", status={"conditions": conds(Ready="False")}), U, None),
    (member("kubeflow.org/v1", "TFJob", status={}), K, None),
]


def case_id(case: tuple[dict[str, Any], Health, Health | None]) -> str:
    obj, health, _ = case
    return f"{obj['kind']}-{health}"


def folding_of(obj: dict[str, Any]) -> StatusInterpreter | None:
    """The interpreter the status controller folds the kind's status (and judges health) with."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    return interpreter_for(api_version, kind) or status_interpreter_for(group_of(api_version), kind)


def work_of(obj: dict[str, Any], *, with_manifest: bool = True) -> dict[str, Any]:
    """A Work that carries ``obj`` (without its status and generation) and the status of an agent
    that reports no health."""
    manifest = {k: v for k, v in obj.items() if k != "status"}
    manifest["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "generation"}
    return {
        "metadata": {"name": "w", "namespace": "gpufed-es-east", "generation": 1},
        "spec": {"workload": {"manifests": [manifest] if with_manifest else []}},
        "status": {
            "conditions": [{"type": "Applied", "status": "True", "observedGeneration": 1}],
            "manifestStatuses": [
                {"identifier": {"kind": obj["kind"], "name": "x"}, "status": obj.get("status") or {}}
            ],
        },
    }


def hub_health(obj: dict[str, Any], *, with_manifest: bool = True) -> str | None:
    """The health the status controller puts in the binding's aggregatedStatus for ``obj``."""
    resource = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "namespace": "ml", "name": "x"}
    works = {"east": work_of(obj, with_manifest=with_manifest)}
    items, _, pending = aggregate(resource, [{"name": "east"}], works, folding_of(obj))
    assert pending == []
    return items[0].get("health")


@pytest.mark.parametrize(("obj", "health", "stale_hub"), CASES, ids=[case_id(c) for c in CASES])
def test_the_agent_and_the_hub_agree(obj: dict[str, Any], health: Health, stale_hub: Health | None) -> None:
    assert assess_health(obj) is health
    assert judge_health(obj) is health
    folding = folding_of(obj)
    if folding is None:
        assert hub_health(obj) is None  # the hub never judges the kind: the agent's word stands
        return
    assert folding.health_of(obj) is health
    assert hub_health(obj) == str(stale_hub or health)


def test_every_kind_with_a_health_rule_has_cases() -> None:
    covered = {(group_of(obj["apiVersion"]), obj["kind"]) for obj, _, _ in CASES}
    with_rules = set(registered_kinds()) | {key for key, _ in native_health_rules()}
    assert with_rules <= covered
    for key in with_rules - {(group, kind) for group, kind in with_rules if kind in ALWAYS_HEALTHY_KINDS}:
        assert {h for obj, h, _ in CASES if (group_of(obj["apiVersion"]), obj["kind"]) == key} != {H}, key


@pytest.mark.parametrize(
    ("obj", "health"),
    [
        (deployment(3, replicas=3, availableReplicas=3, updatedReplicas=3), H),
        (deployment(3, replicas=3, availableReplicas=2, updatedReplicas=3), U),
        (deployment(3), K),
        (member("v1", "Service", spec={"type": "ClusterIP"}, status={"loadBalancer": {}}), U),
        (member("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", status={"replicas": 2, "readyReplicas": 1}), U),
    ],
)
def test_without_the_manifest_the_hub_judges_the_status_alone(obj: dict[str, Any], health: Health) -> None:
    """The Work carries no manifest of the workload: the replicas asked for are those the status
    counts, and a Service whose type is not known is judged as a load balancer."""
    assert hub_health(obj, with_manifest=False) == str(health)


def test_a_kind_of_another_group_is_not_judged_by_the_built_in_kind_of_its_name() -> None:
    """Rules go by group and kind (Karmada's hooks go by GVK): a same-named kind of another group
    gets the generic rule, by its conditions; only an object without apiVersion goes by name."""
    obj = deployment(3, availableReplicas=1, updatedReplicas=3)
    assert judge_health(obj) is U
    assert judge_health({**obj, "apiVersion": "example.com/v1"}) is H  # no conditions: Karmada's default
    del obj["apiVersion"]
    assert judge_health(obj) is U
    knative = member("serving.knative.dev/v1", "Service", spec={"template": {}})
    assert judge_health(member("v1", "Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": {}})) is U
    assert judge_health({**knative, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}) is U
    assert judge_health({**knative, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}) is H
    # Volcano's Job lists phases as typeless "conditions": not conditions in kube's sense.
    volcano = member("batch.volcano.sh/v1alpha1", "Job", status={"conditions": [{"status": "Running"}]})
    assert judge_health(volcano) is H
    failed = member("batch.volcano.sh/v1alpha1", "Job", status={"conditions": [{"type": "Failed", "status": "True"}]})
    assert judge_health(failed) is U
    assert judge_health(None) is K
