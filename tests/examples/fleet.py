"""The example fleet and helpers shared by the policy example tests.

In: an :class:`ObjectStore` of an in-process hub. Out: three member Clusters whose status
is written as their agents would report it (free capacity as per-node shapes, see
``controlplane/apis/cluster_v1alpha1.py``), the documents of an example file applied in
order as ``kubectl apply -f`` would, and read helpers for bindings and Works.

The fleet, as the example files describe it:

=============  ========  =====  ==========================================================
cluster        provider  tier   free capacity, price
=============  ========  =====  ==========================================================
onprem-a100    onprem    0      2 nodes x 4 whole A100-80GB; 1 MIG (mixed) node with
                                4 x mig-3g.40gb and 7 x mig-1g.10gb; $1.10/GPU-hour
cloud-h100     aws       1      2 nodes x 8 H100-80GB; $9.80/GPU-hour
cloud-l4-spot  gcp       1      6 nodes x 1 L4; $0.28/GPU-hour; taint gpufed.io/spot:NoSchedule
=============  ========  =====  ==========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import yaml

from controlplane.apis.constants import LABEL_BINDING, LABEL_GPU_PRODUCT, LABEL_WORK_NAMESPACE
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import ResourceType
from controlplane.controllers.manager import ControllerManager
from tests.controllers.fleet import settled as controllers_settled

T = TypeVar("T")

EXAMPLES_DIR: Final = Path(__file__).resolve().parents[2] / "policies" / "examples"

A100: Final = "NVIDIA-A100-SXM4-80GB"
H100: Final = "NVIDIA-H100-80GB-HBM3"
L4: Final = "NVIDIA-L4"
ONPREM: Final = "onprem-a100"
CLOUD_H100: Final = "cloud-h100"
CLOUD_L4_SPOT: Final = "cloud-l4-spot"
MIG_3G: Final = "nvidia.com/mig-3g.40gb"
MIG_1G: Final = "nvidia.com/mig-1g.10gb"
SPOT_TAINT: Final = "gpufed.io/spot"
GI: Final = 2**30
REPORT_TIME: Final = "2024-05-01T10:00:00Z"
LATER: Final = "2024-05-01T10:05:00Z"
WAIT_SECONDS: Final = 10.0
WORK_API: Final = "work.gpufed.io/v1alpha1"


def node_shape(
    count: int,
    *,
    product: str,
    gpus: int = 0,
    gpus_per_node: int = 8,
    mig: Mapping[str, int] | None = None,
    cpu_cores: int = 64,
    memory_gi: int = 512,
) -> dict[str, Any]:
    """``count`` identical nodes with the given free GPUs (whole, or MIG slices by resource)."""
    free: dict[str, int] = {"cpu": cpu_cores * 1000, "memory": memory_gi * GI, "pods": 110}
    if gpus:
        free["nvidia.com/gpu"] = gpus
    free.update(mig or {})
    strategy = "mixed" if mig else "none"
    return {
        "count": count,
        "labels": {LABEL_GPU_PRODUCT: product, "nvidia.com/mig.strategy": strategy},
        "taints": [],
        "free": free,
        "allocatable": dict(free),
        "gpu": {
            "product": product,
            "memoryMiB": 81920,
            "count": gpus_per_node,
            "migStrategy": strategy,
            "sharedReplicas": 0,
        },
    }


FLEET: Final[dict[str, dict[str, Any]]] = {
    ONPREM: {
        "spec": {"provider": "onprem", "region": "eu-west", "pricing": {A100: 1.10}},
        "labels": {"gpufed.io/site": "dc1"},
        "shapes": [
            node_shape(2, product=A100, gpus=4),
            node_shape(1, product=A100, mig={MIG_3G: 4, MIG_1G: 7}),
        ],
    },
    CLOUD_H100: {
        "spec": {"provider": "aws", "region": "us-east-1", "pricing": {H100: 9.80}},
        "labels": {"gpufed.io/pool": "burst"},
        "shapes": [node_shape(2, product=H100, gpus=8)],
    },
    CLOUD_L4_SPOT: {
        "spec": {
            "provider": "gcp",
            "region": "us-central1",
            "pricing": {L4: 0.28},
            "taints": [{"key": SPOT_TAINT, "value": "true", "effect": "NoSchedule"}],
        },
        "labels": {"gpufed.io/pool": "burst", "gpufed.io/capacity": "spot"},
        "shapes": [node_shape(6, product=L4, gpus=1, gpus_per_node=1, cpu_cores=8, memory_gi=32)],
    },
}


def rt(objects: ObjectStore, api_version: str, kind: str) -> ResourceType:
    return objects.registry.require(api_version, kind)


async def put_cluster(
    objects: ObjectStore,
    name: str,
    *,
    spec: dict[str, Any],
    labels: dict[str, str],
    shapes: list[dict[str, Any]],
) -> None:
    """Create a Cluster and write its status as its agent would."""
    cluster_rt = rt(objects, "cluster.gpufed.io/v1alpha1", "Cluster")
    created = await objects.create(
        cluster_rt,
        {
            "apiVersion": "cluster.gpufed.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        },
    )
    nodes = sum(int(s["count"]) for s in shapes)
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AgentReporting",
                "message": "ok",
                "lastTransitionTime": REPORT_TIME,
            }
        ],
        "lastReportTime": REPORT_TIME,
        "nodeSummary": {"total": nodes, "ready": nodes},
        "nodeShapes": shapes,
    }
    await objects.update_status(cluster_rt, {**created, "status": status})


async def report_capacity(
    objects: ObjectStore, name: str, shapes: list[dict[str, Any]], *, report_time: str
) -> None:
    """A new capacity report from ``name``'s agent: its free node shapes at ``report_time``."""
    cluster_rt = rt(objects, "cluster.gpufed.io/v1alpha1", "Cluster")
    current = await objects.get(cluster_rt, name=name)
    status = copy.deepcopy(current["status"])
    nodes = sum(int(s["count"]) for s in shapes)
    status.update(lastReportTime=report_time, nodeShapes=shapes, nodeSummary={"total": nodes, "ready": nodes})
    await objects.update_status(cluster_rt, {**current, "status": status})


async def put_example_fleet(objects: ObjectStore) -> None:
    for name, cluster in FLEET.items():
        await put_cluster(
            objects,
            name,
            spec=copy.deepcopy(cluster["spec"]),
            labels=dict(cluster["labels"]),
            shapes=copy.deepcopy(cluster["shapes"]),
        )


# --- example files -----------------------------------------------------------------------


def example_files() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.yaml")) + sorted(EXAMPLES_DIR.glob("*.yml"))


def load_example(name: str) -> list[dict[str, Any]]:
    """The documents of ``policies/examples/<name>``, in file order (empty documents dropped)."""
    text = (EXAMPLES_DIR / name).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def documents_of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = documents_of(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


async def apply_documents(
    objects: ObjectStore, docs: list[dict[str, Any]], *, namespace: str = "default"
) -> None:
    """Create every document in order, as ``kubectl apply -f`` does on a fresh hub.

    Namespaced objects without a namespace land in ``namespace`` (kubectl's context
    namespace); a Namespace that already exists is left as it is.
    """
    for doc in docs:
        resource = rt(objects, str(doc["apiVersion"]), str(doc["kind"]))
        obj = copy.deepcopy(doc)
        if resource.namespaced:
            obj["metadata"].setdefault("namespace", namespace)
        if resource.kind == "Namespace":
            with contextlib.suppress(errors.AlreadyExists):
                await objects.create(resource, obj)
            continue
        await objects.create(resource, obj)


async def apply_example(objects: ObjectStore, name: str) -> list[dict[str, Any]]:
    docs = load_example(name)
    await apply_documents(objects, docs)
    return docs


# --- reading the outcome ----------------------------------------------------------------


def binding_name(workload: Mapping[str, Any]) -> str:
    return f"{workload['metadata']['name']}-{str(workload['kind']).lower()}"


def namespace_of(workload: Mapping[str, Any]) -> str:
    return str(workload["metadata"].get("namespace") or "default")


async def get_or_none(
    objects: ObjectStore, api_version: str, kind: str, namespace: str | None, name: str
) -> dict[str, Any] | None:
    try:
        return await objects.get(rt(objects, api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def binding_of(objects: ObjectStore, workload: Mapping[str, Any]) -> dict[str, Any] | None:
    return await get_or_none(
        objects, WORK_API, "ResourceBinding", namespace_of(workload), binding_name(workload)
    )


async def works_of(objects: ObjectStore, workload: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The workload's Works by cluster name."""
    selector = f"{LABEL_BINDING}={binding_name(workload)},{LABEL_WORK_NAMESPACE}={namespace_of(workload)}"
    listed = await objects.list(rt(objects, WORK_API, "Work"), label_selector=selector)
    return {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}


def manifest_of(work: Mapping[str, Any]) -> dict[str, Any]:
    manifests = work["spec"]["workload"]["manifests"]
    assert len(manifests) == 1, manifests
    manifest: dict[str, Any] = manifests[0]
    return manifest


def placed(binding: Mapping[str, Any] | None) -> dict[str, int]:
    """``spec.clusters`` of a binding as {cluster: replicas}."""
    clusters = ((binding or {}).get("spec") or {}).get("clusters") or []
    return {str(t["name"]): int(t["replicas"]) for t in clusters}


def condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == ctype:
            return dict(cond)
    return None


def explanation(binding: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(e["cluster"]): e for e in (binding.get("status") or {}).get("explanation") or ()}


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, what: str, seconds: float = WAIT_SECONDS
) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``seconds``."""
    last: T | None = None
    try:
        async with asyncio.timeout(seconds):
            while True:
                last = await probe()
                if last:
                    return last
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what} (last: {last!r})") from None


async def settled(manager: ControllerManager, *, settle: float = 0.05) -> None:
    """Wait until the manager has seen what was written and has nothing to do (fail after WAIT_SECONDS)."""
    await controllers_settled(manager, settle=settle, seconds=WAIT_SECONDS)


async def scheduled_binding(objects: ObjectStore, workload: Mapping[str, Any]) -> dict[str, Any]:
    """The workload's binding once the scheduler has decided (Scheduled condition present, for its generation)."""

    async def decided() -> dict[str, Any] | None:
        binding = await binding_of(objects, workload)
        status = (binding or {}).get("status") or {}
        if (
            binding
            and condition(binding, "Scheduled")
            and status.get("observedGeneration") == binding["metadata"].get("generation")
        ):
            return binding
        return None

    return await eventually(decided, what=f"a scheduling decision for {binding_name(workload)}")


async def works_matching(
    objects: ObjectStore,
    workload: Mapping[str, Any],
    expected: Mapping[str, int],
    replicas: Callable[[dict[str, Any]], int],
) -> dict[str, dict[str, Any]]:
    """The workload's Works once they are exactly ``expected`` ({cluster: replicas read by ``replicas``})."""

    async def probe() -> dict[str, dict[str, Any]] | None:
        works = await works_of(objects, workload)
        got = {name: replicas(manifest_of(w)) for name, w in works.items()}
        return works if got == dict(expected) else None

    return await eventually(probe, what=f"Works {dict(expected)} for {binding_name(workload)}")
