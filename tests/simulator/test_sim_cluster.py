"""A simulated cluster over a MemoryStore-backed ObjectStore, in virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controlplane.apiserver.objects import ObjectStore
from controlplane.objectclient import errors
from controlplane.storage.memory import MemoryStore
from simulator.admitting import admit_pods
from simulator.clock import ManualClock, parse_rfc3339
from simulator.cluster import SimulatedCluster
from simulator.profile import parse_fleet
from simulator.resources import member_registry

pytestmark = pytest.mark.waiting

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
    objects = ObjectStore(MemoryStore(), member_registry())
    admit_pods(objects, objects.check_creates)  # as the member's server does
    await objects.bootstrap()
    clock = ManualClock()
    async with SimulatedCluster(profile, objects, clock=clock, seed=3) as cluster:
        yield Sim(cluster, objects, clock)


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    async for value in _sim([MIG, WHOLE]):
        yield value


def _template(
    limits: dict[str, Any], *, restart: str | None = None, annotations: dict[str, str] | None = None,
    container: str = "main",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": container, "image": "trainer:1", "resources": {"limits": limits}}]
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
    classes = (await sim.objects.list(sim.rt("scheduling.k8s.io/v1", "PriorityClass"))).items
    assert {c["metadata"]["name"]: c["value"] for c in classes} == {
        "system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000,
    }


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
        and p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
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
            "template": _template({"nvidia.com/gpu": gpus}, annotations={"sim.gpufed.io/duration": duration},
                                  container="pytorch"),  # the container the operator's webhook requires
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


async def _finished_job(sim: Sim, name: str, **spec: Any) -> dict[str, Any]:
    """Create a one-pod Job of 10 s and run it until its Complete condition is True."""
    await sim.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "template": _template({}, restart="Never", annotations={"sim.gpufed.io/duration": "10s"}),
                **spec,
            },
        }
    )

    async def complete() -> dict[str, Any] | None:
        job = await sim.get("batch/v1", "Job", name)
        conditions = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
        return job if conditions.get("Complete") == "True" else None

    finished: dict[str, Any] = await sim.until(complete)
    return finished


async def _exists(sim: Sim, name: str) -> bool:
    try:
        await sim.get("batch/v1", "Job", name)
    except errors.NotFound:
        return False
    return True


async def test_a_finished_job_is_deleted_with_its_pods_once_its_ttl_passes(sim: Sim) -> None:
    """kube's ttl-after-finished controller: deleted ``ttlSecondsAfterFinished`` after the
    Complete condition's lastTransitionTime, not before; its pods go too."""
    job = await _finished_job(sim, "short-lived", ttlSecondsAfterFinished=30)
    [complete] = [c for c in job["status"]["conditions"] if c["type"] == "Complete"]
    finished = parse_rfc3339(complete["lastTransitionTime"])
    assert finished is not None and [p["metadata"]["name"] for p in await sim.pods()]

    async def deleted() -> bool:
        return not await _exists(sim, "short-lived")

    await sim.until(deleted)
    assert sim.clock.now() >= finished + 30

    async def no_pods() -> bool:
        return not await sim.pods()

    await sim.until(no_pods)


async def test_a_finished_job_without_a_ttl_stays(sim: Sim) -> None:
    await _finished_job(sim, "kept")
    sim.clock.advance(3600)
    for _ in range(20):
        await asyncio.sleep(0.001)
    assert await _exists(sim, "kept") and len(await sim.pods()) == 1


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


def _deployment(name: str, replicas: int, template: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "x"}}, "template": template, **spec},
    }


async def _replicasets(sim: Sim) -> list[dict[str, Any]]:
    return (await sim.objects.list(sim.rt("apps/v1", "ReplicaSet"), namespace="default")).items


async def _rollout(sim: Sim, strategy: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """Roll a 4-replica Deployment from image v1 to v2; the ReplicaSets at the end and the
    pods seen at every step on the way."""
    await sim.create(_deployment("web", 4, _template({"cpu": "1"}), strategy=strategy))

    async def settled(image: str) -> bool:
        status = (await sim.get("apps/v1", "Deployment", "web")).get("status") or {}
        pods = [p for p in await sim.pods() if p["spec"]["containers"][0]["image"] == image]
        return status.get("updatedReplicas") == 4 and status.get("availableReplicas") == 4 and (
            len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods)
        )

    await sim.until(lambda: settled("trainer:1"))
    deployment = await sim.get("apps/v1", "Deployment", "web")
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "trainer:2"
    await sim.objects.update(sim.rt("apps/v1", "Deployment"), deployment)
    seen: list[list[dict[str, Any]]] = []

    async def done() -> bool:
        seen.append(await sim.pods())
        return await settled("trainer:2") and len(seen[-1]) == 4

    await sim.until(done)
    return await _replicasets(sim), seen


async def test_deployment_pods_belong_to_a_replicaset(sim: Sim) -> None:
    await sim.create(_deployment("infer", 2, _template({"nvidia.com/gpu": 1})))

    async def running() -> list[dict[str, Any]]:
        pods = await sim.pods()
        return pods if len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods) else []

    pods = await sim.until(running)
    (rs,) = await _replicasets(sim)
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"infer-{pod_hash}"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"infer-{pod_hash}-")
        assert len(pod["metadata"]["name"]) == len(f"infer-{pod_hash}-") + 5
        assert pod["metadata"]["labels"]["pod-template-hash"] == pod_hash
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "ReplicaSet", rs["metadata"]["name"], rs["metadata"]["uid"], True,
        )

    async def rs_ready() -> bool:
        (current,) = await _replicasets(sim)
        status = current.get("status") or {}
        return status.get("readyReplicas") == 2 and status.get("availableReplicas") == 2

    await sim.until(rs_ready)

    # Deleting the Deployment removes its ReplicaSet, then the pods.
    await sim.objects.delete(sim.rt("apps/v1", "Deployment"), namespace="default", name="infer")

    async def gone() -> bool:
        return not await sim.pods() and not await _replicasets(sim)

    await sim.until(gone)
    assert not sim.cluster.state.allocations


async def test_rolling_update_keeps_within_surge_and_availability(sim: Sim) -> None:
    sets, seen = await _rollout(sim, {"type": "RollingUpdate"})
    # 4 replicas, 25%: at most 5 pods at once; at least 3 ready ones throughout.
    assert max(len(pods) for pods in seen) == 5
    ready = [sum(1 for p in pods if ctl_ready(p)) for pods in seen]
    assert min(ready) >= 3
    by_image = {rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs for rs in sets}
    assert by_image["trainer:1"]["spec"]["replicas"] == 0  # kept as history, scaled to 0
    assert by_image["trainer:2"]["spec"]["replicas"] == 4
    assert by_image["trainer:2"]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"

    async def complete() -> dict[str, Any] | None:
        # The Deployment's status follows its ReplicaSets' a step later, as in kube.
        status = (await sim.get("apps/v1", "Deployment", "web"))["status"]
        found = next(c for c in status["conditions"] if c["type"] == "Progressing")
        return found if found["reason"] == "NewReplicaSetAvailable" else None

    progressing = await sim.until(complete)
    assert by_image["trainer:2"]["metadata"]["name"] in progressing["message"]


async def test_recreate_stops_old_pods_before_new_ones_start(sim: Sim) -> None:
    sets, seen = await _rollout(sim, {"type": "Recreate"})
    images = [{p["spec"]["containers"][0]["image"] for p in pods} for pods in seen]
    assert {"trainer:1", "trainer:2"} not in images
    assert sorted(rs["spec"]["replicas"] for rs in sets) == [0, 4]


def ctl_ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or []
    )


async def _events(sim: Sim, pod: str) -> list[dict[str, Any]]:
    listed = await sim.objects.list(
        sim.rt("v1", "Event"), namespace="default", field_selector=f"involvedObject.name={pod}"
    )
    return listed.items


async def test_scheduler_records_events(sim: Sim) -> None:
    await sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "huge", "namespace": "default"},
            "spec": {"containers": [{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 9}}}]},
        }
    )
    await sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "small", "namespace": "default"},
            "spec": {"containers": [{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        }
    )

    async def recorded() -> list[dict[str, Any]]:
        return [e for e in await _events(sim, "huge") + await _events(sim, "small") if e.get("count")]

    await sim.until(lambda: _both(recorded))
    (failed,) = await _events(sim, "huge")
    assert (failed["type"], failed["reason"]) == ("Warning", "FailedScheduling")
    assert failed["message"] == "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."
    assert failed["source"]["component"] == "default-scheduler"
    assert failed["reportingComponent"] == "default-scheduler"
    huge = await sim.objects.get(sim.rt("v1", "Pod"), namespace="default", name="huge")
    assert failed["involvedObject"]["uid"] == huge["metadata"]["uid"]
    (scheduled,) = await _events(sim, "small")
    small = await sim.objects.get(sim.rt("v1", "Pod"), namespace="default", name="small")
    assert (scheduled["type"], scheduled["reason"]) == ("Normal", "Scheduled")
    assert scheduled["message"] == f"Successfully assigned default/small to {small['spec']['nodeName']}"

    # Freed capacity makes the scheduler try the big pod again: the same Event counts up.
    await sim.objects.delete(sim.rt("v1", "Pod"), namespace="default", name="small")

    async def counted() -> bool:
        events = await _events(sim, "huge")
        return len(events) == 1 and events[0]["count"] >= 2

    await sim.until(counted)
    (again,) = await _events(sim, "huge")
    assert again["metadata"]["name"] == failed["metadata"]["name"]
    assert again["firstTimestamp"] == failed["firstTimestamp"] < again["lastTimestamp"]

    # Events expire an hour (simulated) after they were last seen.
    async def expired() -> bool:
        return not await _events(sim, "huge") and not await _events(sim, "small")

    await sim.until(expired, step=300)


async def _both(check: Callable[[], Any]) -> bool:
    return len(await check()) == 2


async def test_pods_a_deployment_owned_directly_are_replaced_by_its_replicaset() -> None:
    """A member state from before ReplicaSets: the Deployment's own pods go, its ReplicaSet's come."""
    profile = parse_fleet({"clusters": [{"name": "c", "nodeGroups": [WHOLE]}]}).clusters[0]
    objects = ObjectStore(MemoryStore(), member_registry())
    await objects.bootstrap()
    deployment = await objects.create(
        objects.registry.require("apps/v1", "Deployment"), _deployment("old", 1, _template({"cpu": "1"}))
    )
    legacy = await objects.create(
        objects.registry.require("v1", "Pod"),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "old-abc-xyz12",
                "namespace": "default",
                "labels": {"app": "x"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1", "kind": "Deployment", "name": "old",
                        "uid": deployment["metadata"]["uid"], "controller": True,
                    }
                ],
            },
            "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
        },
    )
    clock = ManualClock()
    async with SimulatedCluster(profile, objects, clock=clock, seed=3) as cluster:
        sim = Sim(cluster, objects, clock)

        async def replaced() -> list[dict[str, Any]]:
            pods = await sim.pods()
            return pods if len(pods) == 1 and pods[0]["metadata"]["name"] != legacy["metadata"]["name"] else []

        (pod,) = await sim.until(replaced)
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"


async def test_the_kubelet_looks_only_at_pods_that_changed_or_are_due(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass over the pods costs what changed, not the cluster's size: with 24 pods running,
    starting one more looks at that pod's few changes, not at the 24 again for each of them."""
    from simulator import kubelet

    looked: list[str] = []
    real = kubelet.next_status

    def counting(pod: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        looked.append(pod["metadata"]["name"])
        return real(pod, *args, **kwargs)

    monkeypatch.setattr(kubelet, "next_status", counting)

    def deployment(name: str, replicas: int) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {**_template({"nvidia.com/gpu": 1}), "metadata": {"labels": {"app": name}}},
            },
        }

    def ready(name: str, replicas: int) -> Callable[[], Any]:
        async def check() -> bool:
            status = (await sim.get("apps/v1", "Deployment", name)).get("status") or {}
            return status.get("readyReplicas") == replicas

        return check

    await sim.create(deployment("many", 24))
    await sim.until(ready("many", 24))
    looked.clear()
    await sim.create(deployment("one", 1))
    await sim.until(ready("one", 1))
    for _ in range(20):  # let the last watch events through
        await asyncio.sleep(0)
    assert looked and all(name.startswith("one-") for name in looked), looked
    assert len(looked) <= 6, looked


async def test_a_pod_whose_configmap_is_missing_waits_for_it(sim: Sim) -> None:
    """A Deployment propagated without the ConfigMap its pods read does not run in a real
    member: its containers stay in CreateContainerConfigError, and the kubelet says why."""
    template = _template({"nvidia.com/gpu": 1})
    template["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "app-config"}}]
    await sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "infer", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template},
        }
    )

    async def waiting() -> dict[str, Any] | None:
        for pod in await sim.pods():
            for entry in (pod.get("status") or {}).get("containerStatuses") or []:
                if "waiting" in entry["state"]:
                    return pod
        return None

    pod = await sim.until(waiting)
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"] == {
        "reason": "CreateContainerConfigError", "message": 'configmap "app-config" not found',
    }
    name = pod["metadata"]["name"]

    async def failed_event() -> list[dict[str, Any]]:
        return [e for e in await _events(sim, name) if e["reason"] == "Failed" and e.get("count")]

    (event,) = await sim.until(failed_event)
    assert (event["type"], event["message"]) == ("Warning", 'Error: configmap "app-config" not found')
    assert event["source"] == {"component": "kubelet", "host": pod["spec"]["nodeName"]}
    deployment = await sim.get("apps/v1", "Deployment", "infer")
    assert not (deployment.get("status") or {}).get("readyReplicas")

    await sim.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config", "namespace": "default"},
         "data": {"MODE": "prod"}}
    )

    async def ready() -> bool:
        status = (await sim.get("apps/v1", "Deployment", "infer")).get("status") or {}
        return status.get("readyReplicas") == 1

    await sim.until(ready)
    (running,) = await sim.pods()
    assert running["metadata"]["name"] == name
    assert running["status"]["phase"] == "Running"


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def test_a_pod_without_an_account_gets_its_namespaces_default_one(sim: Sim) -> None:
    """Every namespace has a ``default`` ServiceAccount, a new one too, and a pod that names no
    account runs as it."""
    await sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    pod = await sim.objects.create(
        sim.rt("v1", "Pod"),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
         "spec": {"containers": [{"name": "main", "image": "app:1"}]}},
    )
    assert pod["spec"]["serviceAccountName"] == "default"
    for namespace in ("default", "kube-system", "ml"):
        await sim.objects.get(sim.rt("v1", "ServiceAccount"), namespace=namespace, name="default")


async def test_a_deployment_whose_service_account_is_missing_creates_no_pods(sim: Sim) -> None:
    """A real member's API refuses pods whose ServiceAccount is missing: the ReplicaSet creates
    none, says why in a FailedCreate Event and condition ReplicaFailure, the Deployment copies
    the condition; once the account exists the pods are created and the condition goes."""
    template = _template({"nvidia.com/gpu": 1})
    template["spec"]["serviceAccountName"] = "runner"
    await sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template},
        }
    )

    async def failing() -> dict[str, Any] | None:
        deployment = await sim.get("apps/v1", "Deployment", "web")
        return _conditions(deployment).get("ReplicaFailure")

    failure = await sim.until(failing)
    (rs,) = (await sim.objects.list(sim.rt("apps/v1", "ReplicaSet"), namespace="default")).items
    rs_name = rs["metadata"]["name"]
    refusal = (
        f'pods "{rs_name}-" is forbidden: error looking up service account default/runner: '
        'serviceaccount "runner" not found'
    )
    assert (failure["status"], failure["reason"], failure["message"]) == ("True", "FailedCreate", refusal)
    rs_failure = _conditions(rs)["ReplicaFailure"]
    assert (rs_failure["status"], rs_failure["reason"], rs_failure["message"]) == ("True", "FailedCreate", refusal)
    assert await sim.pods() == []

    async def failed_create() -> list[dict[str, Any]]:
        return [e for e in await _events(sim, rs_name) if e["reason"] == "FailedCreate"]

    (event,) = await sim.until(failed_create)
    assert (event["type"], event["message"]) == ("Warning", f"Error creating: {refusal}")
    assert event["involvedObject"]["kind"] == "ReplicaSet"
    assert event["source"]["component"] == "replicaset-controller"

    await sim.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "default"}}
    )

    async def ready() -> dict[str, Any] | None:
        deployment = await sim.get("apps/v1", "Deployment", "web")
        return deployment if (deployment.get("status") or {}).get("readyReplicas") == 2 else None

    deployment = await sim.until(ready)
    assert "ReplicaFailure" not in _conditions(deployment)
    rs = await sim.get("apps/v1", "ReplicaSet", rs_name)
    assert "ReplicaFailure" not in _conditions(rs)
    pods = await sim.pods()
    assert len(pods) == 2
    assert all(p["spec"]["serviceAccountName"] == "runner" for p in pods)


async def test_a_pod_whose_claim_is_missing_is_unschedulable(sim: Sim) -> None:
    """kube-scheduler's VolumeBinding refuses a pod whose PersistentVolumeClaim does not exist,
    on every node; the pod is scheduled once the claim appears."""
    await sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "default"},
            "spec": {
                "containers": [{"name": "main", "image": "trainer:1", "volumeMounts": [
                    {"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            },
        }
    )
    message = (
        '0/6 nodes are available: persistentvolumeclaim "data" not found. '
        "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )

    async def unschedulable() -> dict[str, Any] | None:
        return _conditions(await sim.get("v1", "Pod", "trainer")).get("PodScheduled")

    condition = await sim.until(unschedulable)
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", message)

    async def failed_scheduling() -> list[dict[str, Any]]:
        return [e for e in await _events(sim, "trainer") if e["reason"] == "FailedScheduling"]

    (event,) = await sim.until(failed_scheduling)
    assert event["message"] == message

    await sim.create(
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    )

    async def scheduled() -> bool:
        return bool((await sim.get("v1", "Pod", "trainer"))["spec"].get("nodeName"))

    await sim.until(scheduled)


async def test_a_claim_naming_a_missing_storage_class_stays_pending_until_the_class_exists(sim: Sim) -> None:
    """The member's PV controller cannot provision through a class it lacks: the claim stays
    Pending with a ProvisioningFailed Warning, its pod is unschedulable; the class arrives, the
    claim binds and the pod is scheduled."""
    await sim.create(
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                  "resources": {"requests": {"storage": "10Gi"}}}}
    )
    await sim.create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default"},
         "spec": {"containers": [{"name": "main", "image": "trainer:1"}],
                  "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}
    )

    async def provisioning_failed() -> list[dict[str, Any]]:
        return [e for e in await _events(sim, "data") if e["reason"] == "ProvisioningFailed"]

    (event,) = await sim.until(provisioning_failed)
    assert (event["type"], event["message"]) == ("Warning", 'storageclass.storage.k8s.io "fast" not found')
    assert event["involvedObject"]["kind"] == "PersistentVolumeClaim"
    assert event["source"]["component"] == "persistentvolume-controller"
    assert (await sim.get("v1", "PersistentVolumeClaim", "data"))["status"] == {"phase": "Pending"}

    async def unschedulable() -> dict[str, Any] | None:
        return _conditions(await sim.get("v1", "Pod", "trainer")).get("PodScheduled")

    condition = await sim.until(unschedulable)
    assert condition["message"] == (
        "0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )

    await sim.objects.create(
        sim.rt("storage.k8s.io/v1", "StorageClass"),
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
         "provisioner": "pd.csi.storage.gke.io"},
    )

    async def bound() -> dict[str, Any] | None:
        claim = await sim.get("v1", "PersistentVolumeClaim", "data")
        return claim if claim["status"].get("phase") == "Bound" else None

    claim = await sim.until(bound)
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}

    async def scheduled() -> str | None:
        return (await sim.get("v1", "Pod", "trainer"))["spec"].get("nodeName")

    await sim.until(scheduled)
