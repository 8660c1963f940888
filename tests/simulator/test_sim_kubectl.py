"""A simulated member seen through the real kubectl: ReplicaSets and the scheduler's Events."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from simulator.profile import parse_fleet
from simulator.server import SimServer, SimServerConfig

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

FLEET = {
    "clusters": [
        {
            "name": "k",
            "nodeGroups": [
                {"name": "a100", "count": 2, "cpu": 32, "memoryGiB": 256,
                 "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 4}},
            ],
            "simulation": {"startupDelaySeconds": 1},
        }
    ]
}


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    async def _exec(self, *args: str, stdin: str | None) -> tuple[int | None, str, str]:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(self.kubeconfig), *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else None,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        return proc.returncode, out.decode(), err.decode()

    async def run(self, *args: str, stdin: str | None = None) -> str:
        code, out, err = await self._exec(*args, stdin=stdin)
        assert code == 0, f"kubectl {' '.join(args)}: {err}"
        return out

    async def refused(self, *args: str, stdin: str | None = None) -> str:
        """kubectl's error output for a command that must fail."""
        code, _, err = await self._exec(*args, stdin=stdin)
        assert code != 0, f"kubectl {' '.join(args)} succeeded"
        return err

    async def json(self, *args: str) -> Any:
        return json.loads(await self.run(*args, "-o", "json"))

    async def until(self, check: Any, *, what: str, rounds: int = 200) -> Any:
        for _ in range(rounds):
            result = await check()
            if result:
                return result
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    profile = parse_fleet(FLEET).clusters[0]
    config = SimServerConfig(profile=profile, state_dir=tmp_path, time_scale=20.0, seed=1, snapshot_interval=None)
    async with SimServer(config) as server:
        yield Kubectl(server.kubeconfig_path)


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: m, image: "web:1", resources: {limits: {nvidia.com/gpu: 1}}}]
"""

TOO_BIG = """
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: default}
spec:
  containers: [{name: m, image: "x", resources: {limits: {nvidia.com/gpu: 8}}}]
"""


async def test_kubectl_sees_replicasets_and_scheduler_events(kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "-", stdin=DEPLOYMENT + "---" + TOO_BIG)

    async def ready_rs() -> list[str]:
        lines = (await kubectl.run("get", "rs", "-n", "default")).splitlines()
        return lines if len(lines) == 2 and lines[1].split()[1:4] == ["2", "2", "2"] else []

    header, row = await kubectl.until(ready_rs, what="the ReplicaSet to be ready")
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    rs_name = row.split()[0]
    assert rs_name.startswith("web-")
    wide = (await kubectl.run("get", "replicasets", "-o", "wide")).splitlines()[1]
    assert f"pod-template-hash={rs_name.removeprefix('web-')}" in wide

    pods = (await kubectl.json("get", "pods", "-l", "app=web"))["items"]
    assert len(pods) == 2 and all(p["metadata"]["ownerReferences"][0]["name"] == rs_name for p in pods)
    pod = pods[0]["metadata"]["name"]

    async def described() -> str:
        text = await kubectl.run("describe", "pod", pod)
        return text if "Successfully assigned" in text else ""

    text = await kubectl.until(described, what="the Scheduled event in kubectl describe")
    node = pods[0]["spec"]["nodeName"]
    assert "Normal  Scheduled" in text
    assert "default-scheduler" in text
    assert f"Successfully assigned default/{pod} to {node}" in text

    async def failed() -> str:
        text = await kubectl.run("describe", "pod", "too-big")
        return text if "FailedScheduling" in text else ""

    text = await kubectl.until(failed, what="the FailedScheduling event")
    assert "Warning  FailedScheduling" in text
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in text

    events = (await kubectl.run("get", "events", "-n", "default")).splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]  # as kube prints it
    assert any("FailedScheduling" in line and "pod/too-big" in line for line in events)
    assert any("Scheduled" in line and f"pod/{pod}" in line for line in events)


TRAINER_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: trainers.ml.example.com}
spec:
  group: ml.example.com
  scope: Namespaced
  names: {plural: trainers, singular: trainer, kind: Trainer}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Epochs, type: integer, jsonPath: .spec.epochs}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              epochs: {type: integer, default: 3}
"""

TRAINER = """
apiVersion: ml.example.com/v1
kind: Trainer
metadata: {name: bert, namespace: default}
spec: {}
"""


async def test_a_member_serves_a_crd_applied_to_it(kubectl: Kubectl) -> None:
    """What an agent does with a propagated CRD: the member serves its kind at once (schema
    defaults, printer columns), as a real cluster does."""
    await kubectl.run("apply", "-f", "-", stdin=TRAINER_CRD)
    await kubectl.run("wait", "--for=condition=Established", "crd/trainers.ml.example.com", "--timeout=30s")
    await kubectl.run("apply", "-f", "-", stdin=TRAINER)
    lines = (await kubectl.run("get", "trainers", "-n", "default")).splitlines()
    assert lines[0].split() == ["NAME", "EPOCHS"]
    assert lines[1].split() == ["bert", "3"]


POD_AS_RUNNER = """
apiVersion: v1
kind: Pod
metadata: {name: job, namespace: default}
spec:
  serviceAccountName: runner
  containers: [{name: m, image: "job:1"}]
"""


async def test_a_pod_whose_service_account_is_missing_is_forbidden(kubectl: Kubectl) -> None:
    """As a real member's ServiceAccount admission: the create is refused, with kube's words,
    until the account exists."""
    refusal = (
        'pods "job" is forbidden: error looking up service account default/runner: '
        'serviceaccount "runner" not found'
    )
    err = await kubectl.refused("create", "-f", "-", stdin=POD_AS_RUNNER)
    assert err.strip() == f'Error from server (Forbidden): error when creating "STDIN": {refusal}'
    err = await kubectl.refused("apply", "--server-side", "-f", "-", stdin=POD_AS_RUNNER)
    assert err.strip() == f"Error from server (Forbidden): {refusal}"
    await kubectl.run("create", "serviceaccount", "runner")
    await kubectl.run("create", "-f", "-", stdin=POD_AS_RUNNER)
    pod = await kubectl.json("get", "pod", "job")
    assert pod["spec"]["serviceAccountName"] == "runner"


EXPORTED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: exported, namespace: team}
spec:
  containers: [{name: m, image: "x"}]
  volumes:
  - name: kube-api-access-abcde
    projected:
      sources:
      - serviceAccountToken: {expirationSeconds: 3607, path: token}
      - configMap:
          name: kube-root-ca.crt
          items: [{key: ca.crt, path: ca.crt}]
"""


async def test_every_namespace_has_the_root_ca_a_pods_api_access_volume_reads(kubectl: Kubectl) -> None:
    """As kube's root CA publisher: ``kube-root-ca.crt`` with the member's CA in every namespace, so a
    pod exported from a real cluster (its ``kube-api-access-*`` volume) starts."""
    await kubectl.run("create", "namespace", "team")
    ca = await kubectl.run("config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")

    async def root_ca() -> Any:
        code, out, _ = await kubectl._exec("get", "configmap", "kube-root-ca.crt", "-n", "team", "-o", "json", stdin=None)
        return json.loads(out) if code == 0 else None

    published = await kubectl.until(root_ca, what="the root CA ConfigMap")
    assert published["data"] == {"ca.crt": base64.b64decode(ca).decode()}
    await kubectl.run("apply", "-f", "-", stdin=EXPORTED_POD)

    async def running() -> bool:
        pod = await kubectl.json("get", "pod", "exported", "-n", "team")
        return pod.get("status", {}).get("phase") == "Running"

    await kubectl.until(running, what="the exported pod to run")
