"""A simulated cluster over a MemoryStore-backed ObjectStore, in virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry, core_resources, workload_resources
from controlplane.storage.memory import MemoryStore
from simulator.clock import ManualClock
from simulator.cluster import SimulatedCluster
from simulator.profile import parse_fleet

WHOLE = {
    "name": "a100-whole",
    "count": 4,
    "cpu": 96,
    "memoryGiB": 1024,
    "gpu": {"product": "NVIDIA-A100-SXM4-80GB", "count": 8},
}
MIG = {
    "name": "a100-mig",
    "count": 2,
    "cpu": 96,
    "memoryGiB": 1024,
    "gpu": {
        "product": "NVIDIA-A100-SXM4-80GB",
        "count": 8,
        "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
    },
}


class Sim:
    def __init__(self, cluster: SimulatedCluster, objects: ObjectStore, clock: ManualClock) -> None:
        self.cluster = cluster
        self.objects = objects
        self.clock = clock

    def rt(self, api_version: str, kind: str) -> Any:
        return self.objects.registry.require(api_version, kind)

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.objects.create(self.rt(obj["apiVersion"], obj["kind"]), obj)

    async def get(self, api_version: str, kind: str, name: str) -> dict[str, Any]:
        return await self.objects.get(self.rt(api_version, kind), namespace="default", name=name)

    async def pods(self) -> list[dict[str, Any]]:
        return (await self.objects.list(self.rt("v1", "Pod"), namespace="default")).items

    async def until(self, check: Callable[[], Any], *, step: float = 1.0, rounds: int = 2000) -> Any:
        """Advance virtual time step by step until ``check()`` (awaited) is truthy."""
        for _ in range(rounds):
            for _ in range(5):
                await asyncio.sleep(0)
            result = await check()
            if result:
                return result
            self.clock.advance(step)
            await asyncio.sleep(0.001)
        raise AssertionError("condition not reached")


async def _sim(groups: list[dict[str, Any]], **defaults: Any) -> AsyncIterator[Sim]:
    profile = parse_fleet(
        {
            "clusters": [
                {"name": "c", "nodeGroups": groups, "simulation": {"startupDelaySeconds": 2, **defaults}}
            ]
        }
    ).clusters[0]
    objects = ObjectStore(MemoryStore(), Registry(core_resources(), workload_resources()))
    await objects.bootstrap()
    clock = ManualClock()
    async with SimulatedCluster(profile, objects, clock=clock, seed=3) as cluster:
        yield Sim(cluster, objects, clock)


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    async for value in _sim([MIG, WHOLE]):
        yield value


def _template(
    limits: dict[str, Any], *, restart: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "trainer:1", "resources": {"limits": limits}}]
    }
    if restart:
        spec["restartPolicy"] = restart
    meta: dict[str, Any] = {"labels": {"app": "x"}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


async def test_nodes_and_namespaces_exist(sim: Sim) -> None:
    nodes = (await sim.objects.list(sim.rt("v1", "Node"))).items
    assert len(nodes) == 6
    assert all(n["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.30.") for n in nodes)
    names = {n["metadata"]["name"] for n in (await sim.objects.list(sim.rt("v1", "Namespace"))).items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


async def test_deployment_of_mig_pods_becomes_ready(sim: Sim) -> None:
    await sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "infer", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "x"}},
                "template": _template({"nvidia.com/mig-1g.10gb": 1}),
            },
        }
    )

    async def ready() -> bool:
        status = (await sim.get("apps/v1", "Deployment", "infer")).get("status") or {}
        return status.get("readyReplicas") == 3

    await sim.until(ready)
    pods = await sim.pods()
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert all("a100-mig" in p["spec"]["nodeName"] for p in pods)
    assert all(
        p["metadata"]["name"].startswith("infer-")
        and p["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
        for p in pods
    )
    status = (await sim.get("apps/v1", "Deployment", "infer"))["status"]
    assert status["availableReplicas"] == 3 and status["updatedReplicas"] == 3
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Available": "True",
        "Progressing": "True",
    }

    # The DCGM page labels the three MIG instances with their pods.
    families = {f.name: f for f in text_string_to_metric_families(sim.cluster.metrics_text())}
    labelled = [s.labels for s in families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples if "pod" in s.labels]
    assert sorted(label["pod"] for label in labelled) == sorted(p["metadata"]["name"] for p in pods)
    assert all(label["GPU_I_PROFILE"] == "1g.10gb" for label in labelled)

    # Scale down to 1: two pods go; deleting the Deployment removes the last one.
    deployment = await sim.get("apps/v1", "Deployment", "infer")
    deployment["spec"]["replicas"] = 1
    await sim.objects.update(sim.rt("apps/v1", "Deployment"), deployment)

    async def scaled() -> bool:
        return len(await sim.pods()) == 1

    await sim.until(scaled)
    await sim.objects.delete(sim.rt("apps/v1", "Deployment"), namespace="default", name="infer")

    async def gone() -> bool:
        return not await sim.pods()

    await sim.until(gone)


def _pytorchjob(name: str, workers: int, gpus: int, duration: str = "60s") -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": _template({"nvidia.com/gpu": gpus}, annotations={"sim.gpufed.io/duration": duration}),
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


async def test_pytorchjob_gang_binds_all_and_succeeds(sim: Sim) -> None:
    await sim.create(_pytorchjob("train", 3, 8))

    async def running() -> dict[str, Any] | None:
        job = await sim.get("kubeflow.org/v1", "PyTorchJob", "train")
        conditions = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
        return job if conditions.get("Running") == "True" else None

    await sim.until(running)
    pods = await sim.pods()
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "train-master-0",
        "train-worker-0",
        "train-worker-1",
        "train-worker-2",
    ]
    assert len({p["spec"]["nodeName"] for p in pods}) == 4
    assert all(p["metadata"]["labels"]["training.kubeflow.org/job-name"] == "train" for p in pods)

    async def succeeded() -> dict[str, Any] | None:
        job = await sim.get("kubeflow.org/v1", "PyTorchJob", "train")
        conditions = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
        return job if conditions.get("Succeeded") == "True" else None

    job = await sim.until(succeeded)
    statuses = job["status"]["replicaStatuses"]
    assert statuses["Master"].get("succeeded") == 1
    assert job["status"]["completionTime"]


async def test_gang_that_does_not_fit_binds_nothing() -> None:
    async for sim in _sim([{**WHOLE, "count": 3}]):
        await sim.create(_pytorchjob("big", 3, 8))

        async def all_unschedulable(sim: Sim = sim) -> bool:
            pods = await sim.pods()
            marked = [
                c
                for p in pods
                for c in (p.get("status") or {}).get("conditions") or []
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ]
            return len(pods) == 4 and len(marked) == 4

        await sim.until(all_unschedulable)
        assert not [p for p in await sim.pods() if p["spec"].get("nodeName")]
        assert not sim.cluster.state.allocations


async def test_impossible_pod_gets_kube_message(sim: Sim) -> None:
    await sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "huge", "namespace": "default"},
            "spec": {
                "containers": [
                    {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/mig-3g.40gb": 9}}}
                ]
            },
        }
    )

    async def message() -> str | None:
        pod = await sim.objects.get(sim.rt("v1", "Pod"), namespace="default", name="huge")
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                assert cond["reason"] == "Unschedulable"
                return str(cond["message"])
        return None

    assert await sim.until(message) == "0/6 nodes are available: 6 Insufficient nvidia.com/mig-3g.40gb."


async def test_job_runs_completions_and_completes(sim: Sim) -> None:
    await sim.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "batch", "namespace": "default"},
            "spec": {
                "completions": 3,
                "parallelism": 2,
                "template": _template(
                    {"nvidia.com/gpu": 1}, restart="Never", annotations={"sim.gpufed.io/duration": "30s"}
                ),
            },
        }
    )

    async def complete() -> dict[str, Any] | None:
        job = await sim.get("batch/v1", "Job", "batch")
        conditions = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
        return job if conditions.get("Complete") == "True" else None

    job = await sim.until(complete)
    assert job["status"]["succeeded"] == 3
    assert "active" not in job["status"]
    assert job["status"]["startTime"] <= job["status"]["completionTime"]
    pods = await sim.pods()
    assert len(pods) == 3 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert not sim.cluster.state.allocations  # finished pods hold no GPUs


async def test_statefulset_creates_ordinals_in_order(sim: Sim) -> None:
    await sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "x"}},
                "template": _template({"cpu": "1"}),
            },
        }
    )

    async def ready() -> bool:
        status = (await sim.get("apps/v1", "StatefulSet", "db")).get("status") or {}
        return status.get("readyReplicas") == 3

    await sim.until(ready)
    pods = sorted(await sim.pods(), key=lambda p: p["metadata"]["name"])
    assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1", "db-2"]
    starts = [p["status"]["startTime"] for p in pods]
    assert starts == sorted(starts) and starts[0] < starts[2]
