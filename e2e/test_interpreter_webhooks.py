"""The hub process calls Karmada's resource interpreter webhooks while it propagates: a
ResourceInterpreterWebhookConfiguration applied with kubectl (a real HTTPS webhook, its CA in the
caBundle) gives a custom kind without replicas of its own (Karmada's sample Workload) the
replicas and requirements its binding carries; when the webhook fails, the binding keeps them
and the workload gets Karmada's ApplyPolicyFailed Event naming the webhook and the error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import ProcessGroup, wait_for

pytestmark = pytest.mark.e2e

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workloads.workload.example.io}
spec:
  group: workload.example.io
  scope: Namespaced
  names: {plural: workloads, singular: workload, kind: Workload}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
POLICY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: workloads, namespace: default}
spec:
  resourceSelectors: [{apiVersion: workload.example.io/v1alpha1, kind: Workload}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}
"""


def _workload(replicas: int) -> dict[str, Any]:
    container = {"name": "nginx", "image": "nginx:1", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "workload.example.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {"replicas": replicas, "paused": False, "template": {"spec": {"containers": [container]}}},
    }


def _configuration(client: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": "examples"},
        "webhooks": [{
            "name": "workloads.example.com", "clientConfig": client, "interpreterContextVersions": ["v1alpha1"],
            "rules": [{"operations": ["InterpretReplica"], "apiGroups": ["workload.example.io"],
                       "apiVersions": ["v1alpha1"], "kinds": ["Workload"]}],
        }],
    }


def test_the_hub_takes_a_workloads_replicas_from_its_interpreter_webhook(processes: ProcessGroup, tmp_path: Path) -> None:
    from tests.webhookserver import webhook_server_thread

    _, kubectl = processes.start_hub()
    with webhook_server_thread(tmp_path / "webhook") as server:
        kubectl.run("apply", "-f", "-", input_text=CRD)
        kubectl.run("apply", "-f", "-", input_text=json.dumps(_configuration(server.client("/interpreter-workload"))))
        wait_for(lambda: kubectl.run("get", "workloads", check=False).returncode == 0, timeout=30, what="Workload served")
        kubectl.run("apply", "-f", "-", input_text=POLICY)
        kubectl.run("apply", "-f", "-", input_text=json.dumps(_workload(4)))

        def bound() -> dict[str, Any] | None:
            binding = kubectl.json_or_none("get", "resourcebindings.work.gpufed.io", "nginx-workload", "-n", "default")
            return binding if binding and binding["spec"].get("replicas") == 4 else None

        binding = wait_for(bound, timeout=30, what="the binding with the webhook's 4 replicas")
        assert binding["spec"]["replicaRequirements"]["resourceRequest"] == {"cpu": "500m", "nvidia.com/gpu": "1"}
        assert server.received["/interpreter-workload"][-1]["request"]["operation"] == "InterpretReplica"

        kubectl.run("apply", "-f", "-", input_text=json.dumps(_configuration(server.client("/interpreter-failing"))))

        def reported() -> dict[str, Any] | None:
            kubectl.run("apply", "-f", "-", input_text=json.dumps(_workload(6)))  # reconciled on a change
            events = kubectl.json("get", "events", "-n", "default")["items"]
            return next((e for e in events if e.get("reason") == "ApplyPolicyFailed"), None)

        event = wait_for(reported, timeout=30, what="the ApplyPolicyFailed event")
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Workload"
        assert event["message"] == (
            "Apply policy(default/workloads) failed: Internal error occurred: failed calling webhook "
            '"examples/workloads.example.com": webhook call failed, get status code: 500, msg: workload unreadable'
        )
        assert kubectl.json("get", "resourcebindings.work.gpufed.io", "nginx-workload", "-n", "default")["spec"]["replicas"] == 4
