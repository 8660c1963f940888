"""Builders for controller tests: the hub's object store over a given store, fake member clusters
(status written as an agent would), workloads and policies, and a poll helper."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.namespaces import NamespaceController
from controlplane.hub import hub_registry
from controlplane.storage.interface import Store

T = TypeVar("T")
A100 = "NVIDIA-A100-SXM4-80GB"
GI = 2**30
REPORT_TIME = "2024-05-01T10:00:00Z"


async def hub_objects(store: Store, *namespaces: str) -> ObjectStore:
    """An object store over ``store`` as the hub builds its own (its kinds, the garbage collector's
    finalizers), bootstrapped, with ``namespaces`` created."""
    objects = ObjectStore(store, hub_registry(), garbage_collection=True)
    await objects.bootstrap()
    for namespace in namespaces:
        with contextlib.suppress(errors.AlreadyExists):
            await objects.create(objects.registry.require("v1", "Namespace"), {"metadata": {"name": namespace}})
    return objects


def node_shape(count: int, *, gpus: int = 0, product: str = A100, extra: dict[str, int] | None = None) -> dict[str, Any]:
    free: dict[str, int] = {"cpu": 64_000, "memory": 512 * GI, "pods": 110}
    if gpus:
        free["nvidia.com/gpu"] = gpus
    free.update(extra or {})
    return {
        "count": count,
        "labels": {"nvidia.com/gpu.product": product},
        "taints": [],
        "free": free,
        "allocatable": dict(free),
        "gpu": {"product": product, "memoryMiB": 81920, "count": 8, "migStrategy": "none", "sharedReplicas": 0},
    }


async def put_cluster(
    objects: ObjectStore,
    name: str,
    *shapes: dict[str, Any],
    provider: str = "onprem",
    pricing: dict[str, float] | None = None,
    labels: dict[str, str] | None = None,
    report_time: str = REPORT_TIME,
    pods: list[dict[str, Any]] | None = None,
    unschedulable: dict[str, int] | None = None,
    node_scoring: str | None = None,
    api_enablements: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Create or replace a Cluster and write its status as its agent would (``node_scoring``: the
    ``status.nodeScoring`` it reports, None: none; ``api_enablements``: the APIs it lists, complete,
    None: none).

    ``pods``: when given, the report lists them as the member's bound GPU pods
    (``status.utilization``, see :func:`bound_pod`), as an agent's report does.
    ``unschedulable``: Deployments of ``default`` with pods the member could not place, and how
    many (``status.unschedulableWorkloads``).
    """
    rt = objects.registry.require("cluster.gpufed.io/v1alpha1", "Cluster")
    spec: dict[str, Any] = {"provider": provider}
    if pricing:
        spec["pricing"] = pricing
    obj: dict[str, Any] = {
        "apiVersion": "cluster.gpufed.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }
    try:
        current = await objects.get(rt, name=name)
    except errors.NotFound:
        current = await objects.create(rt, obj)
    else:
        current = await objects.update(rt, {**obj, "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}})
    status = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReporting", "message": "ok", "lastTransitionTime": report_time}],
        "lastReportTime": report_time,
        "nodeSummary": {"total": sum(s["count"] for s in shapes), "ready": sum(s["count"] for s in shapes)},
        "nodeShapes": list(shapes),
    }
    if pods is not None:
        status["utilization"] = {"sampleTime": None, "nodes": [{"name": f"{name}-node-0", "devices": [], "pods": pods}]}
    if node_scoring:
        status["nodeScoring"] = node_scoring
    if api_enablements is not None:
        status["apiEnablements"] = api_enablements
        status["conditions"].append(
            {"type": "CompleteAPIEnablements", "status": "True", "reason": "Complete",
             "message": "collected complete APIEnablements from the cluster", "lastTransitionTime": report_time}
        )
    if unschedulable:
        status["unschedulableWorkloads"] = [
            {"namespace": "default", "kind": "Deployment", "name": owner, "pods": n} for owner, n in unschedulable.items()
        ]
    return await objects.update_status(rt, {**current, "status": status})


def bound_pod(owner: str, *, index: int = 0, gpus: int = 1, kind: str = "Deployment", namespace: str = "default") -> dict[str, Any]:
    """One entry of a report's per-node pod list: a pod of ``owner`` bound to a node."""
    return {
        "pod": f"{owner}-{index}",
        "namespace": namespace,
        "resources": {"nvidia.com/gpu": gpus},
        "owner": {"kind": kind, "name": owner},
    }


def deployment(name: str, *, replicas: int, gpus: int = 1, image: str = "registry.local/train:1", namespace: str = "default", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": "1"}},
                        }
                    ]
                },
            },
        },
    }


TIERED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}}


def propagation_policy(name: str, *, kind: str = "Deployment", api_version: str = "apps/v1", namespace: str = "default", placement: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resourceSelectors": [{"apiVersion": api_version, "kind": kind}], "placement": placement if placement is not None else TIERED, **spec},
    }


async def get_object(
    objects: ObjectStore, api_version: str, kind: str, name: str, namespace: str = "default"
) -> dict[str, Any] | None:
    """The stored object (None when absent)."""
    try:
        return await objects.get(objects.registry.require(api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def queued_workload(
    objects: ObjectStore, kind: str, name: str, namespace: str = "default", *, version: str = "v1beta1",
) -> dict[str, Any] | None:
    """The Kueue Workload the hub made for the queued workload ``kind``/``name``, found by its
    controller owner as the hub finds it (its name is Kueue's, with a hash of the owner's UID);
    None while there is none."""
    listed = await objects.list(objects.registry.require(f"kueue.x-k8s.io/{version}", "Workload"), namespace=namespace)
    for wl in listed.items:
        for ref in wl["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and (ref.get("kind"), ref.get("name")) == (kind, name):
                return wl
    return None


async def queued_workload_name(objects: ObjectStore, kind: str, name: str, namespace: str = "default") -> str:
    """The name of :func:`queued_workload` (which must exist)."""
    wl = await queued_workload(objects, kind, name, namespace)
    assert wl is not None, f"no Workload for {kind} {namespace}/{name}"
    return str(wl["metadata"]["name"])


WAIT_SECONDS = 30.0


async def eventually(probe: Callable[[], Awaitable[T | None]], *, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after WAIT_SECONDS."""
    last: T | None = None
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while True:
                last = await probe()
                if last:
                    return last
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what} (last: {last!r})") from None


@contextlib.asynccontextmanager
async def namespace_controller(objects: ObjectStore) -> AsyncIterator[NamespaceController]:
    """kube-controller-manager's namespace controller running over ``objects`` (the leader's): a
    deleted namespace's content is deleted, then the namespace removed."""
    running = NamespaceController(objects)
    task = asyncio.create_task(running.run())
    await running.namespaces.synced.wait()
    try:
        yield running
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def namespace_gone(objects: ObjectStore, name: str) -> None:
    """Wait until namespace ``name`` is removed (its content deleted by the namespace controller)."""
    namespaces = objects.registry.require("v1", "Namespace")

    async def gone() -> bool:
        try:
            await objects.get(namespaces, name=name)
        except errors.NotFound:
            return True
        return False

    await eventually(gone, what=f"namespace {name} removed")


def _versions(objs: Iterable[dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"].get("resourceVersion", "")
            for o in objs}


async def _informers_caught_up(manager: ControllerManager) -> bool:
    """Every running informer holds what the store holds for its kind (an idle queue says nothing
    about a watch event still on its way: on a loaded machine etcd delivers it later)."""
    assert manager.context is not None
    for informer in manager.context.informers:
        if not informer.synced.is_set():  # never started (Namespaces', in most tests): holds nothing
            continue
        stored = (await manager.context.objects.list(informer.rt)).items
        if _versions(stored) != _versions(informer.items()):
            return False
    return True


async def settled(manager: ControllerManager, *, settle: float = 0.05, seconds: float = WAIT_SECONDS) -> None:
    """Wait until every informer has seen what was written and the manager has nothing to do
    (fail after ``seconds``)."""
    async with asyncio.timeout(seconds):
        await manager.wait_idle(settle=settle)
        while not await _informers_caught_up(manager):  # noqa: ASYNC110 (the store is polled: nothing signals)
            await asyncio.sleep(0.01)
        await manager.wait_idle(settle=settle)  # and what the late events asked for is done
