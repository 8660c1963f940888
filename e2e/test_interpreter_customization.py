"""A ResourceInterpreterCustomization teaches the whole fleet a custom GPU training kind, end to
end: its Lua ``replicaResource`` (written as Karmada's documentation writes it) gives the hub the
replicas and GPU requirements that divide the TrainingRun across the members by the GPUs they
have free, ``replicaRevision`` renders each member's share; the agents run ``statusReflection``
and ``healthInterpretation`` on the whole member object and ``retention`` before each update
(a field the member owns survives the hub's next change), and ``statusAggregation`` folds the
reflected statuses into the hub object. A customization whose scripts loop forever (at the
agents) and fail at run time (at the hub) is a Ready=False condition and Events on the
customization (and the failure at the agents a condition on the Work), while the hub stays healthy and goes on placing other
workloads. Real hub on real etcd, two simulated members, two agents, the real kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import Kubectl, ProcessGroup, wait_for

FLEET = Path(__file__).parent / "fleets" / "any-kind.yaml"
pytestmark = pytest.mark.e2e



def crd(kind: str) -> str:
    """A namespaced kind of training.example.com with a status subresource and an open schema."""
    plural = f"{kind.lower()}s"
    return f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.training.example.com}}
spec:
  group: training.example.com
  scope: Namespaced
  names: {{plural: {plural}, singular: {kind.lower()}, kind: {kind}}}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {{status: {{}}}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
            status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


# replicaResource, replicaRevision and statusAggregation as Karmada's "Customizing the resource
# interpreter" page writes them; the member-side hooks read spec and metadata, which only the
# whole member object has.
CUSTOMIZATION = """
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {name: trainingrun}
spec:
  target: {apiVersion: training.example.com/v1, kind: TrainingRun}
  customizations:
    replicaResource:
      luaScript: |
        local kube = require("kube")
        function GetReplicas(obj)
          replica = obj.spec.replicas
          requirement = kube.accuratePodRequirements(obj.spec.template)
          return replica, requirement
        end
    replicaRevision:
      luaScript: |
        function ReviseReplica(obj, desiredReplica)
          obj.spec.replicas = desiredReplica
          return obj
        end
    statusAggregation:
      luaScript: |
        function AggregateStatus(desiredObj, statusItems)
          if statusItems == nil then
            return desiredObj
          end
          if desiredObj.status == nil then
            desiredObj.status = {}
          end
          replicas = 0
          for i = 1, #statusItems do
            if statusItems[i].status ~= nil and statusItems[i].status.replicas ~= nil then
              replicas = replicas + statusItems[i].status.replicas
            end
          end
          desiredObj.status.replicas = replicas
          return desiredObj
        end
    retention:
      luaScript: |
        function Retain(desiredObj, observedObj)
          desiredObj.spec.paused = observedObj.spec.paused
          return desiredObj
        end
    statusReflection:
      luaScript: |
        function ReflectStatus(observedObj)
          if observedObj.status == nil then
            return {}
          end
          return {replicas = observedObj.status.readyReplicas, generation = observedObj.metadata.generation}
        end
    healthInterpretation:
      luaScript: |
        function InterpretHealth(observedObj)
          return observedObj.status ~= nil and observedObj.status.readyReplicas == observedObj.spec.replicas
        end
"""

POLICIES = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: training-crds}
spec:
  placement: {clusterAffinity: {clusterNames: [east, west]}}
  resourceSelectors:
    - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: trainingruns.training.example.com}
    - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: sweepruns.training.example.com}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: trainingruns-by-free-gpus, namespace: ml}
spec:
  resourceSelectors:
    - {apiVersion: training.example.com/v1, kind: TrainingRun}
  placement:
    clusterAffinity: {clusterNames: [east, west]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
"""


def training_run(model: str) -> str:
    # Each worker takes a whole 4-GPU L4 node: east has one, west two.
    return f"""
apiVersion: training.example.com/v1
kind: TrainingRun
metadata: {{name: llama, namespace: ml}}
spec:
  replicas: 3
  paused: false
  model: {model}
  template:
    spec:
      containers:
        - name: trainer
          image: registry.example.com/ml/trainer:2.1
          resources:
            requests: {{cpu: "8", nvidia.com/gpu: "4"}}
            limits: {{nvidia.com/gpu: "4"}}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
    root = tmp_path_factory.mktemp("interpreter-customization")
    with ProcessGroup.running_fleet(root, FLEET, ("east", "west")) as running:
        hub, _ = running
        for kind in ("TrainingRun", "SweepRun"):
            hub.run("apply", "-f", "-", input_text=crd(kind))
            hub.run("wait", "--for=condition=Established", f"crd/{kind.lower()}s.training.example.com", "--timeout=30s")
        hub.run("apply", "-f", "-", input_text=CUSTOMIZATION)
        hub.run("apply", "-f", "-", input_text=POLICIES)
        yield running


def member_copies(members: dict[str, Kubectl]) -> dict[str, dict[str, Any]] | None:
    found = {name: member.json_or_none("get", "trainingrun", "llama", "-n", "ml") for name, member in members.items()}
    return None if any(obj is None for obj in found.values()) else found


def work_entry(hub: Kubectl, cluster: str) -> dict[str, Any] | None:
    for work in hub.json("get", "works", "-n", f"gpufed-es-{cluster}")["items"]:
        for entry in (work.get("status") or {}).get("manifestStatuses") or ():
            if entry["identifier"]["kind"] == "TrainingRun":
                return dict(entry)
    return None


def test_the_scripts_divide_reflect_aggregate_and_retain(fleet: tuple[Kubectl, dict[str, Kubectl]]) -> None:
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=training_run("llama-3-70b"))

    # replicaResource: 3 replicas of 4 GPUs each; dynamic weights by free GPUs give east one
    # (one 4-GPU node) and west two; replicaRevision writes each share.
    def shares() -> dict[str, int] | None:
        copies = member_copies(members)
        return {name: obj["spec"]["replicas"] for name, obj in copies.items()} if copies else None

    assert wait_for(shares, timeout=120, what="the TrainingRun's shares in both members") == {"east": 1, "west": 2}
    binding = hub.json("get", "resourcebinding", "llama-trainingrun", "-n", "ml")
    assert binding["spec"]["replicas"] == 3
    assert binding["spec"]["replicaRequirements"]["resourceRequest"]["nvidia.com/gpu"] == "4"

    # The members' controllers (here: us) report progress; the agents reflect and judge it.
    for name, ready in (("east", 1), ("west", 1)):
        members[name].run(
            "patch", "trainingrun", "llama", "-n", "ml", "--subresource=status", "--type=merge",
            "-p", f'{{"status": {{"readyReplicas": {ready}, "internal": {{"pid": 4242}}}}}}',
        )

    def aggregated() -> dict[str, Any] | None:
        obj = hub.json("get", "trainingrun", "llama", "-n", "ml")
        return obj if (obj.get("status") or {}).get("replicas") == 2 else None

    wait_for(aggregated, timeout=90, what="the hub TrainingRun's status folded from both members")
    west = wait_for(lambda: work_entry(hub, "west"), timeout=30, what="west's Work status")
    # statusReflection ran on the whole object (metadata.generation is not in the status) and
    # only what it returns went to the hub; healthInterpretation compared spec and status.
    assert set(west["status"]) == {"replicas", "generation"} and west["status"]["replicas"] == 1
    assert west["interpretedBy"] == {"statusReflection": "trainingrun", "healthInterpretation": "trainingrun"}
    health = {i["clusterName"]: i.get("health") for i in hub.json(
        "get", "resourcebinding", "llama-trainingrun", "-n", "ml")["status"]["aggregatedStatus"]}
    assert health == {"east": "Healthy", "west": "Unhealthy"}

    # retention: the member pauses its copy; the hub's next change keeps the member's pause.
    members["east"].run("patch", "trainingrun", "llama", "-n", "ml", "--type=merge", "-p", '{"spec":{"paused":true}}')
    hub.run("apply", "-f", "-", input_text=training_run("llama-3.1-70b"))

    def updated_east() -> dict[str, Any] | None:
        obj = members["east"].json("get", "trainingrun", "llama", "-n", "ml")
        return obj if obj["spec"]["model"] == "llama-3.1-70b" else None

    east = wait_for(updated_east, timeout=90, what="the hub's change applied in east")
    assert east["spec"]["paused"] is True
    west_copy = members["west"].json("get", "trainingrun", "llama", "-n", "ml")
    assert west_copy["spec"]["model"] == "llama-3.1-70b" and west_copy["spec"]["paused"] is False


# A kind without replica hooks goes whole to each cluster; its statusReflection (run by the
# agents) never ends and its statusAggregation (run by the hub) fails at run time.
BROKEN = """
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {name: sweeprun-broken}
spec:
  target: {apiVersion: training.example.com/v1, kind: SweepRun}
  customizations:
    statusReflection:
      luaScript: |
        function ReflectStatus(observedObj)
          while true do end
        end
    statusAggregation:
      luaScript: |
        function AggregateStatus(desiredObj, statusItems)
          desiredObj.status.best = desiredObj.spec.sweep.width * 2
          return desiredObj
        end
"""

SWEEPS = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: sweeps-to-east}
spec:
  resourceSelectors:
    - {apiVersion: training.example.com/v1, kind: SweepRun}
    - {apiVersion: v1, kind: ConfigMap, name: still-placed}
  placement:
    clusterAffinity: {clusterNames: [east]}
"""


def test_failing_scripts_are_conditions_and_events_and_the_hub_stays_healthy(
    fleet: tuple[Kubectl, dict[str, Kubectl]],
) -> None:
    hub, members = fleet
    hub.run("apply", "-f", "-", input_text=SWEEPS)
    wait_for(lambda: members["east"].json_or_none("get", "crd", "sweepruns.training.example.com"),
             timeout=90, what="the SweepRun CRD in east")
    # First in force as it should be, then updated with the broken scripts.
    working = BROKEN.replace("while true do end", "return observedObj.status").replace(
        "desiredObj.status.best = desiredObj.spec.sweep.width * 2", "desiredObj.status = {clusters = #statusItems}"
    )
    hub.run("apply", "-f", "-", input_text=working)
    wait_for(lambda: hub.json("get", "ric", "sweeprun-broken").get("status", {}).get("conditions"),
             timeout=60, what="the SweepRun customization loaded")
    hub.run("apply", "-f", "-", input_text=BROKEN)
    hub.run("apply", "-f", "-", input_text=(
        "apiVersion: training.example.com/v1\nkind: SweepRun\nmetadata: {name: lr-sweep, namespace: ml}\n"
        "spec: {sweep: {}}\n"
    ))

    def not_ready() -> dict[str, Any] | None:
        obj = hub.json("get", "resourceinterpretercustomization", "sweeprun-broken")
        conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}
        ready = conditions.get("Ready")
        return ready if ready and ready["status"] == "False" and ready["reason"] == "ScriptFailed" else None

    wait_for(not_ready, timeout=90, what="Ready=False ScriptFailed on the broken customization")

    def events() -> dict[str, str] | None:
        items = hub.json("get", "events", "-A", "--field-selector", "reason=InterpreterScriptFailed")["items"]
        found = {e["message"].split(" script ")[0]: e["message"] for e in items
                 if e["involvedObject"]["name"] == "sweeprun-broken"}
        return found if {"statusAggregation", "statusReflection"} <= set(found) else None

    found = wait_for(events, timeout=120, what="ScriptFailed Events for both broken hooks")
    assert "attempt to perform arithmetic on a nil value" in found["statusAggregation"]
    assert "instruction limit exceeded" in found["statusReflection"]
    assert "in cluster east" in found["statusReflection"]  # it failed at east's agent

    # The agent says so on the Work, and keeps working.
    def agent_condition() -> dict[str, Any] | None:
        for work in hub.json("get", "works", "-n", "gpufed-es-east")["items"]:
            for entry in (work.get("status") or {}).get("manifestStatuses") or ():
                if entry["identifier"]["kind"] == "SweepRun" and entry.get("conditions"):
                    return dict(entry["conditions"][0])
        return None

    condition = wait_for(agent_condition, timeout=60, what="the Interpreted condition on east's Work")
    assert (condition["status"], condition["reason"]) == ("False", "StatusReflectionFailed")

    # The hub answers and still places other workloads.
    assert hub.run("get", "--raw", "/readyz").stdout.strip() == "ok"
    hub.run("create", "configmap", "still-placed", "-n", "ml", "--from-literal=k=v")
    wait_for(lambda: members["east"].json_or_none("get", "configmap", "still-placed", "-n", "ml"),
             timeout=90, what="a ConfigMap placed while the scripts fail")
