"""Cluster, ResourceBinding and Work models: wire round-trips, strict specs, permissive statuses."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from controlplane.apis.cluster_v1alpha1 import Cluster
from controlplane.apis.meta import CauseType, validation_causes
from controlplane.apis.work_v1alpha1 import ResourceBinding, Work, binding_name

CLUSTER_YAML = """
apiVersion: cluster.gpufed.io/v1alpha1
kind: Cluster
metadata:
  name: aws-east
  labels: {gpufed.io/pool: burst}
spec:
  provider: aws
  region: us-east-1
  zone: us-east-1a
  pricing: {NVIDIA-A100-SXM4-80GB: 4.1}
  taints: [{key: gpufed.io/spot, value: "true", effect: PreferNoSchedule}]
  unschedulable: false
status:
  conditions:
    - {type: Ready, status: "True", reason: AgentReporting, message: ok, lastTransitionTime: "2024-05-01T10:00:00Z"}
  kubernetesVersion: v1.30.2
  lastReportTime: "2024-05-01T10:05:00Z"
  nodeSummary: {total: 5, ready: 4}
  gpuSummary:
    - {resource: nvidia.com/mig-3g.40gb, product: NVIDIA-A100-SXM4-80GB, capacity: 32, allocatable: 32, allocated: 4}
  resourceSummary:
    allocatable: {cpu: 384000, nvidia.com/gpu: 8}
    allocated: {cpu: 2000}
  nodeShapes:
    - count: 4
      labels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
      taints: [{key: dedicated, value: ml, effect: NoSchedule}]
      free: {cpu: 90000, memory: 1099511627776, nvidia.com/gpu: 3, nvidia.com/mig-1g.10gb: 16}
      allocatable: {cpu: 96000, memory: 1099511627776, nvidia.com/gpu: 4}
      gpu: {product: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, count: 4, migStrategy: mixed, sharedReplicas: 0}
      agentExtra: kept
"""

BINDING_YAML = """
apiVersion: work.gpufed.io/v1alpha1
kind: ResourceBinding
metadata: {name: train-pytorchjob, namespace: ml}
spec:
  resource: {apiVersion: kubeflow.org/v1, kind: PyTorchJob, namespace: ml, name: train, uid: u1, resourceVersion: "7", generation: 2}
  replicas: 4
  replicaRequirements:
    resourceRequest: {cpu: "4", memory: 32Gi, nvidia.com/gpu: "1"}
    nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
    tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
    priorityClassName: high
  gang: true
  components:
    - {name: Master, replicas: 1, replicaRequirements: {resourceRequest: {nvidia.com/gpu: "1"}}}
    - {name: Worker, replicas: 3, replicaRequirements: {resourceRequest: {nvidia.com/gpu: "1"}}}
  placement:
    clusterAffinity: {clusterNames: [onprem-a, aws-east]}
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: TieredOverflow}
  policy: {kind: PropagationPolicy, namespace: ml, name: gpu-jobs}
  clusters: [{name: onprem-a, replicas: 4}]
  gracefulEvictionTasks:
    - {fromCluster: aws-east, replicas: 2, reason: ApplicationFailure, creationTimestamp: "2024-05-01T10:00:00Z", purgeMode: Graciously, gracePeriodSeconds: 600}
status:
  conditions: [{type: Scheduled, status: "True", reason: Success, lastTransitionTime: "2024-05-01T10:00:00Z"}]
  schedulerObservingAffinityName: primary
  aggregatedStatus: [{clusterName: onprem-a, applied: true, health: Healthy, status: {active: 4}}]
  explanation:
    - {cluster: onprem-a, chosen: true, replicas: 4, reasons: [cheapest tier], score: 90.5, tier: 0, pricePerGpuHour: 0.0}
    - {cluster: aws-east, chosen: false, replicas: 0, reasons: ["not needed: cheaper tiers hold the replicas"], tier: 1}
  observedGeneration: 2
"""

WORK_YAML = """
apiVersion: work.gpufed.io/v1alpha1
kind: Work
metadata: {name: train-pytorchjob, namespace: gpufed-es-onprem-a}
spec:
  workload:
    manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg, namespace: ml}, data: {a: b}}
  conflictResolution: Overwrite
  suspendDispatching: false
status:
  conditions: [{type: Applied, status: "True", reason: AppliedSuccessful, lastTransitionTime: "2024-05-01T10:00:00Z", observedGeneration: 1}]
  manifestStatuses:
    - identifier: {group: "", version: v1, kind: ConfigMap, namespace: ml, name: cfg, ordinal: 0}
      status: {}
      health: Healthy
      unschedulable: {pods: 0, message: ""}
"""


@pytest.mark.parametrize(
    ("model", "text"),
    [(Cluster, CLUSTER_YAML), (ResourceBinding, BINDING_YAML), (Work, WORK_YAML)],
    ids=["cluster", "binding", "work"],
)
def test_wire_round_trip(model: type[Any], text: str) -> None:
    wire = yaml.safe_load(text)
    obj = model.model_validate(wire)
    assert obj.model_dump(by_alias=True, exclude_none=True) == wire
    assert obj.to_wire() == wire


def test_cluster_effective_tier_defaults() -> None:
    wire = yaml.safe_load(CLUSTER_YAML)
    assert Cluster.model_validate(wire).spec.effective_tier == 1
    wire["spec"]["provider"] = "onprem"
    assert Cluster.model_validate(wire).spec.effective_tier == 0
    wire["spec"]["tier"] = 3
    assert Cluster.model_validate(wire).spec.effective_tier == 3


def test_cluster_status_accessors() -> None:
    cluster = Cluster.model_validate(yaml.safe_load(CLUSTER_YAML))
    assert cluster.status is not None and cluster.status.node_shapes is not None
    shape = cluster.status.node_shapes[0]
    assert shape.free["nvidia.com/gpu"] == 3
    assert shape.gpu is not None and shape.gpu.memory_mib == 81920


@pytest.mark.parametrize(
    ("model", "text", "mutate", "field", "reason"),
    [
        (Cluster, CLUSTER_YAML, lambda w: w["spec"].update(colour="red"), "spec.colour", CauseType.FIELD_VALUE_UNKNOWN),
        (Cluster, CLUSTER_YAML, lambda w: w.update(extra=1), "extra", CauseType.FIELD_VALUE_UNKNOWN),
        (Cluster, CLUSTER_YAML, lambda w: w["spec"]["taints"][0].update(effect="Never"), "spec.taints[0].effect",
         CauseType.FIELD_VALUE_NOT_SUPPORTED),
        (Cluster, CLUSTER_YAML, lambda w: w["spec"].update(pricing={"A100": -1}), "spec.pricing",
         CauseType.FIELD_VALUE_INVALID),
        (Cluster, CLUSTER_YAML, lambda w: w["spec"].pop("provider"), "spec.provider", CauseType.FIELD_VALUE_REQUIRED),
        (ResourceBinding, BINDING_YAML, lambda w: w["spec"]["placement"].update(bogus=True), "spec.placement.bogus",
         CauseType.FIELD_VALUE_UNKNOWN),
        (ResourceBinding, BINDING_YAML, lambda w: w["spec"]["replicaRequirements"]["resourceRequest"].update(cpu="lots"),
         "spec.replicaRequirements.resourceRequest", CauseType.FIELD_VALUE_INVALID),
        (ResourceBinding, BINDING_YAML, lambda w: w["spec"]["clusters"].append({"name": "onprem-a", "replicas": 1}),
         "spec.clusters", CauseType.FIELD_VALUE_INVALID),
        (ResourceBinding, BINDING_YAML, lambda w: w["spec"].update(replicas=-1), "spec.replicas",
         CauseType.FIELD_VALUE_INVALID),
        (Work, WORK_YAML, lambda w: w["spec"].update(conflictResolution="Merge"), "spec.conflictResolution",
         CauseType.FIELD_VALUE_NOT_SUPPORTED),
        (Work, WORK_YAML, lambda w: w["spec"]["workload"]["manifests"].append({"kind": "X"}), "spec.workload.manifests",
         CauseType.FIELD_VALUE_INVALID),
    ],
)
def test_spec_errors_point_at_the_field(
    model: type[Any], text: str, mutate: Any, field: str, reason: CauseType
) -> None:
    wire = yaml.safe_load(text)
    mutate(wire)
    with pytest.raises(ValidationError) as info:
        model.model_validate(wire)
    causes = validation_causes(info.value)
    assert [(c.field, c.reason) for c in causes] == [(field, reason)]
    assert field in causes[0].message


@pytest.mark.parametrize(
    ("model", "text", "path"),
    [
        (Cluster, CLUSTER_YAML, ("status",)),
        (Cluster, CLUSTER_YAML, ("status", "nodeShapes", 0)),
        (ResourceBinding, BINDING_YAML, ("status",)),
        (ResourceBinding, BINDING_YAML, ("status", "explanation", 0)),
        (Work, WORK_YAML, ("status", "manifestStatuses", 0)),
        (Work, WORK_YAML, ("metadata",)),
    ],
)
def test_status_and_metadata_keep_unknown_fields(model: type[Any], text: str, path: tuple[Any, ...]) -> None:
    wire = yaml.safe_load(text)
    node = wire
    for part in path:
        node = node[part]
    node["newerAgentField"] = {"x": 1}
    expected = copy.deepcopy(wire)
    assert model.model_validate(wire).model_dump(by_alias=True, exclude_none=True) == expected


def test_resource_request_numbers_become_quantity_strings() -> None:
    wire = yaml.safe_load(BINDING_YAML)
    wire["spec"]["replicaRequirements"]["resourceRequest"] = {"nvidia.com/gpu": 2, "cpu": 0.5}
    binding = ResourceBinding.model_validate(wire)
    assert binding.spec.replica_requirements is not None
    assert binding.spec.replica_requirements.resource_request == {"nvidia.com/gpu": "2", "cpu": "0.5"}
    assert binding.spec.assignments() == {"onprem-a": 4}


def test_binding_name() -> None:
    assert binding_name("train", "PyTorchJob") == "train-pytorchjob"


def test_objects_build_in_python_with_defaults() -> None:
    work = Work.model_validate({"metadata": {"name": "w", "namespace": "gpufed-es-a"}})
    assert work.to_wire() == {
        "apiVersion": "work.gpufed.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "w", "namespace": "gpufed-es-a"},
        "spec": {"workload": {"manifests": []}},
    }


def test_a_binding_naming_a_cluster_twice_is_refused() -> None:
    target = {"name": "onprem", "replicas": 1}
    with pytest.raises(ValidationError, match="cluster 'onprem' is listed twice"):
        ResourceBinding.model_validate({
            "apiVersion": "work.gpufed.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": {"name": "x", "namespace": "default"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x", "namespace": "default"},
                     "clusters": [target, target]},
        })
