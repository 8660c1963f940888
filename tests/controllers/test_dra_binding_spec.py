"""The binding spec of a workload whose pods share DRA claims: an InterpretReplica webhook's answer
and a customization's GetReplicas keep the devices they share (Karmada's requirements have no such
part, the hub adds it), and each role of a multi-role workload carries the claims its own pods name."""

from __future__ import annotations

from typing import Any

from controlplane.controllers.detecting import binding_spec
from controlplane.interpreter.registry import set_customized
from policies.validation import parse_policy
from tests.interpreter.test_customized import interpreter, training
from tests.interpreter.trainingrun_scripts import API, GET_REPLICAS

POLICY = parse_policy({
    "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "p", "namespace": "ml"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]},
})
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "ml"},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}}},
}


def test_an_interpret_replica_answer_keeps_the_devices_the_pods_share() -> None:
    answer = {"replicas": 3, "replicaRequirements": {"resourceRequest": {"cpu": "2"}}}
    spec = binding_spec(DEPLOYMENT, POLICY, None, webhook_replicas=answer, shared={"nvidia.com/gpu": 4})  # type: ignore[arg-type]
    assert spec["replicas"] == 3
    assert spec["replicaRequirements"] == {"resourceRequest": {"cpu": "2"}, "sharedResourceRequest": {"nvidia.com/gpu": "4"}}
    assert answer["replicaRequirements"] == {"resourceRequest": {"cpu": "2"}}  # the answer itself is left as it came
    alone = binding_spec(DEPLOYMENT, POLICY, None, webhook_replicas=answer)  # type: ignore[arg-type]
    assert alone["replicaRequirements"] == {"resourceRequest": {"cpu": "2"}}


def test_each_role_carries_the_devices_its_pods_share() -> None:
    role = {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train", "namespace": "ml"},
           "spec": {"pytorchReplicaSpecs": {"Master": role, "Worker": {**role, "replicas": 2}}}}
    spec = binding_spec(job, POLICY, None, shared={"nvidia.com/gpu": 4}, roles_shared={"Worker": {"nvidia.com/gpu": 4}})  # type: ignore[arg-type]
    roles = {c["name"]: c["replicaRequirements"] for c in spec["components"]}
    assert roles["Worker"]["sharedResourceRequest"] == {"nvidia.com/gpu": "4"}
    assert "sharedResourceRequest" not in roles["Master"]
    assert spec["replicaRequirements"]["sharedResourceRequest"] == {"nvidia.com/gpu": "4"}


def test_a_customizations_get_replicas_keeps_the_devices_the_pods_share() -> None:
    set_customized(API, "TrainingRun", interpreter(replicaResource=GET_REPLICAS))
    try:
        spec = binding_spec(training(gpus=2), POLICY, None, shared={"nvidia.com/gpu": 4})  # type: ignore[arg-type]
    finally:
        set_customized(API, "TrainingRun", None)
    assert spec["replicaRequirements"]["resourceRequest"]["nvidia.com/gpu"] == "2"  # the script's answer
    assert spec["replicaRequirements"]["sharedResourceRequest"] == {"nvidia.com/gpu": "4"}
