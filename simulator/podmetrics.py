"""The resource metrics API of a simulated member: ``metrics.k8s.io/v1beta1`` pods and nodes.

A real cluster serves it from metrics-server (what ``kubectl top`` reads): ``PodMetrics`` with
each container's CPU (nanocores) and memory (KiB) usage over a window, ``NodeMetrics`` with the
node's. A simulated container uses no real CPU, so the usage here is modelled, and said to be:
a running container uses a share of what it requests that grows with its pod's simulated GPU
utilization (the number the node's DCGM page reports for the pod), and a little when it
requests nothing; a node uses the sum of its pods plus a fixed system share. Only running pods
have metrics, as with metrics-server. GPU numbers are not part of this API (metrics-server has
none); ``gpufed top`` takes them from the DCGM data the agent reports to the hub.

Served: GET ``/apis/metrics.k8s.io/v1beta1/nodes[/<name>]``, ``.../pods`` (every namespace)
and ``.../namespaces/<ns>/pods[/<name>]``, with ``labelSelector``; other verbs answer 405.
The group is in the member's discovery (:func:`metrics_resource_types`), so ``kubectl top``
finds it. Usage maths (:func:`container_usage`, :func:`node_usage`) is pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from aiohttp import web

from controlplane.apis.constants import METRICS_GROUP, METRICS_VERSION
from controlplane.apis.kube.selectors import parse_label_selector
from controlplane.apis.pods import container_requests
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import ResourceType
from simulator.clock import Clock, rfc3339

GROUP: Final = METRICS_GROUP
VERSION: Final = METRICS_VERSION
BASE: Final = f"/apis/{GROUP}/{VERSION}"
WINDOW: Final = "30s"
#: What a container that requests nothing is modelled to use: millicores, bytes.
IDLE_CPU_MILLI: Final = 2
IDLE_MEMORY_BYTES: Final = 16 * 1024 * 1024
#: The node's own use (kubelet, runtime, system daemons): millicores, bytes.
SYSTEM_CPU_MILLI: Final = 250
SYSTEM_MEMORY_BYTES: Final = 1024 * 1024 * 1024


def metrics_resource_types() -> list[ResourceType]:
    """``pods`` and ``nodes`` of ``metrics.k8s.io/v1beta1``, for the member's discovery."""
    return [
        ResourceType(GROUP, VERSION, "PodMetrics", "pods", "", namespaced=True),
        ResourceType(GROUP, VERSION, "NodeMetrics", "nodes", "", namespaced=False),
    ]


def container_usage(container: Mapping[str, Any], utilization: float) -> tuple[int, int]:
    """(millicores, bytes) a running container is modelled to use at GPU ``utilization`` (0..1)."""
    try:
        requests = container_requests(container)
    except ValueError:
        requests = {}
    busy = max(0.0, min(1.0, utilization))
    cpu = requests.get("cpu", 0)
    memory = requests.get("memory", 0)
    return (
        max(IDLE_CPU_MILLI, round(cpu * (0.2 + 0.7 * busy))),
        max(IDLE_MEMORY_BYTES, round(memory * (0.4 + 0.4 * busy))),
    )


def node_usage(pods: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(millicores, bytes) of a node whose running pods use ``pods``."""
    cpu, memory = SYSTEM_CPU_MILLI, SYSTEM_MEMORY_BYTES
    for pod_cpu, pod_memory in pods:
        cpu += pod_cpu
        memory += pod_memory
    return cpu, memory


def _usage(cpu_milli: int, memory_bytes: int) -> dict[str, str]:
    """As metrics-server writes them: nanocores and KiB."""
    return {"cpu": f"{cpu_milli * 1_000_000}n", "memory": f"{memory_bytes // 1024}Ki"}


class ResourceMetrics:
    """The ``metrics.k8s.io`` routes over a member's store and its pods' GPU utilization."""

    def __init__(self, objects: ObjectStore, clock: Clock, utilization: Callable[[str], float]) -> None:
        self.objects = objects
        self.clock = clock
        self.utilization = utilization
        self._pods = objects.registry.require("v1", "Pod")
        self._nodes = objects.registry.require("v1", "Node")

    def routes(self) -> list[web.RouteDef]:
        return [
            web.route("*", f"{BASE}/nodes", self.nodes),
            web.route("*", f"{BASE}/nodes/{{name}}", self.nodes),
            web.route("*", f"{BASE}/pods", self.pods),
            web.route("*", f"{BASE}/namespaces/{{namespace}}/pods", self.pods),
            web.route("*", f"{BASE}/namespaces/{{namespace}}/pods/{{name}}", self.pods),
        ]

    async def _running(self, namespace: str | None) -> list[dict[str, Any]]:
        listed = await self.objects.list(self._pods, namespace=namespace)
        return [p for p in listed.items if (p.get("status") or {}).get("phase") == "Running"]

    def _pod_metrics(self, pod: Mapping[str, Any], now: str) -> tuple[dict[str, Any], tuple[int, int]]:
        meta = pod.get("metadata") or {}
        busy = self.utilization(f"{meta.get('namespace')}/{meta.get('name')}")
        containers, cpu, memory = [], 0, 0
        for container in (pod.get("spec") or {}).get("containers") or []:
            used = container_usage(container, busy)
            cpu, memory = cpu + used[0], memory + used[1]
            containers.append({"name": container.get("name"), "usage": _usage(*used)})
        body = {
            "kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "creationTimestamp": now,
                         "labels": dict(meta.get("labels") or {})},
            "timestamp": now, "window": WINDOW, "containers": containers,
        }
        return body, (cpu, memory)

    async def pods(self, request: web.Request) -> web.StreamResponse:
        _only_get(request)
        namespace, name = request.match_info.get("namespace"), request.match_info.get("name")
        selector = parse_label_selector(request.query.get("labelSelector"))
        now = rfc3339(self.clock.now())
        items = [
            self._pod_metrics(pod, now)[0] for pod in await self._running(namespace)
            if selector.matches((pod.get("metadata") or {}).get("labels") or {})
        ]
        return _answer(items, name, "pods", "PodMetrics")

    async def nodes(self, request: web.Request) -> web.StreamResponse:
        _only_get(request)
        name = request.match_info.get("name")
        selector = parse_label_selector(request.query.get("labelSelector"))
        now = rfc3339(self.clock.now())
        per_node: dict[str, list[tuple[int, int]]] = {}
        for pod in await self._running(None):
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                per_node.setdefault(str(node), []).append(self._pod_metrics(pod, now)[1])
        items: list[dict[str, Any]] = []
        for node in (await self.objects.list(self._nodes)).items:
            meta = node.get("metadata") or {}
            if not selector.matches(meta.get("labels") or {}):
                continue
            items.append({
                "kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {"name": meta.get("name"), "creationTimestamp": now,
                             "labels": dict(meta.get("labels") or {})},
                "timestamp": now, "window": WINDOW,
                "usage": _usage(*node_usage(per_node.get(str(meta.get("name")), []))),
            })
        return _answer(items, name, "nodes", "NodeMetrics")


def _answer(items: list[dict[str, Any]], name: str | None, plural: str, kind: str) -> web.StreamResponse:
    """The list, or the one item ``name`` (kube's 404 when there is none)."""
    if name is None:
        return web.json_response({"kind": f"{kind}List", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {},
                                  "items": items})
    for item in items:
        if item["metadata"]["name"] == name:
            return web.json_response(item)
    raise errors.NotFound(f'{plural}.{GROUP} "{name}" not found',
                          target=errors.Target(name=name, kind=plural, group=GROUP))


def _only_get(request: web.Request) -> None:
    if request.method not in ("GET", "HEAD"):
        raise errors.MethodNotAllowed(f"{request.method} is not supported by the metrics API (read-only)")
