"""A real operator framework against the hub: kopf lists and watches a custom kind through the
hub's API, patches status, posts Events and holds a finalizer until its delete handler ran."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .harness import wait_for

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
CRD = HERE / "manifests" / "crd" / "trainers.yaml"
OPERATOR = HERE / "operators" / "trainer_operator.py"
TRAINER = """\
apiVersion: ml.example.com/v1
kind: Trainer
metadata:
  name: llama
  namespace: default
spec:
  model: llama-3
  replicas: 2
"""


def test_a_kopf_operator_handles_a_custom_kind_through_the_hub(processes, tmp_path: Path) -> None:
    _, kubectl = processes.start_hub()
    kubectl.run("apply", "-f", str(CRD))
    kubectl.run("wait", "--for=condition=Established", "crd/trainers.ml.example.com", "--timeout=30s")
    # Started as users start an operator: `kopf run`, pointed at the hub by KUBECONFIG.
    operator = processes.start_raw("kopf", [
        "/usr/bin/env", f"KUBECONFIG={kubectl.kubeconfig}",
        sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "default", "--verbose", str(OPERATOR),
    ])
    kubectl.run("apply", "-f", "-", input_text=TRAINER)

    def status() -> dict[str, object]:
        obj = json.loads(kubectl.run("get", "trainer", "llama", "-n", "default", "-o", "json").stdout)
        return obj.get("status") or {}

    wait_for(lambda: status().get("phase") == "Training", timeout=60, what="kopf's create handler to set status.phase")
    assert status()["replicas"] == 2
    events = kubectl.run("get", "events", "-n", "default", "-o", "json").stdout
    assert "training llama-3" in events

    kubectl.run("scale", "trainer/llama", "-n", "default", "--replicas=4")
    wait_for(lambda: status().get("replicas") == 4, timeout=60, what="kopf's update handler to follow spec.replicas")

    finalizers = kubectl.run("get", "trainer", "llama", "-n", "default", "-o", "jsonpath={.metadata.finalizers}").stdout
    assert "kopf.zalando.org/KopfFinalizerMarker" in finalizers
    kubectl.run("delete", "trainer", "llama", "-n", "default", "--timeout=60s")
    assert kubectl.run("get", "trainers", "-n", "default", "-o", "name").stdout.strip() == ""
    assert "trainer released" in kubectl.run("get", "events", "-n", "default", "-o", "json").stdout
    assert operator.alive(), operator.log()[-3000:]
