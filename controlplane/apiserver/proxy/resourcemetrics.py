"""The hub's resource metrics API: ``metrics.k8s.io/v1beta1`` pods and nodes, merged from the members.

What ``kubectl top`` reads. A member serves the API from its metrics-server; the hub serves the
same kinds (``PodMetrics``, ``NodeMetrics`` and their lists, as metrics-server serializes them:
``timestamp``, ``window``, ``containers[].usage`` or ``usage``) by asking every Ready member
whose agent holds its tunnel open, as Karmada's metrics adapter asks its members, and merging
the answers. Each object carries the annotation :data:`CLUSTER_ANNOTATION` (Karmada's
``resource.karmada.io/cached-from-cluster``) naming the member it came from.

- ``GET .../pods`` (every namespace), ``.../namespaces/<ns>/pods[/<name>]``, ``.../nodes[/<name>]``,
  with ``labelSelector`` (passed to the members) and ``fieldSelector`` (``metadata.name``,
  ``metadata.namespace``, applied here, as metrics-server takes them). The API server has already
  checked ``get``/``list`` on ``pods.metrics.k8s.io`` or ``nodes.metrics.k8s.io``; members are
  asked as the caller (impersonated there, as every proxied request is).
- ``get`` of one pod asks the members its workload is placed on (a ResourceBinding in its
  namespace whose workload's name prefixes the pod's); of a node, or of a pod no binding
  explains, every member. The first member (by name) that has it answers; none: kube's 404.
- Members are asked in parallel, at most :attr:`ResourceMetrics.max_concurrent` at once, each
  within :attr:`ResourceMetrics.timeout_seconds` and :data:`~.podlist.MAX_LIST_BYTES`. A member
  that does not answer is left out of the answer, with one WARNING per outage (and one INFO when
  it answers again); the answer is never a 500 for it.

:meth:`ResourceMetrics.pod_metrics` gives the FederatedHPA controller (its
:class:`~controlplane.controllers.federatedhpa.podmetrics.PodMetricsSource`) the pods a selector
selects in each member, read from the member's pod list, with their ``PodMetrics`` (or, from a
member that does not answer, neither). The merge (:func:`merge_items`) is pure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode

from aiohttp import web

from controlplane.apis.constants import (
    CACHED_FROM_CLUSTER_ANNOTATION,
    CLUSTER_GROUP,
    METRICS_GROUP,
    METRICS_VERSION,
    VERSION,
    WORK_GROUP,
)
from controlplane.apis.kube.fieldlabels import BASE_FIELD_SELECTORS
from controlplane.apis.kube.selectors import parse_field_selector, parse_label_selector
from controlplane.apiserver import errors
from controlplane.apiserver.app import USER
from controlplane.apiserver.computed import ComputedEndpoint, ComputedResource
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.identity import Role, UserInfo
from controlplane.apiserver.kinds.cells import format_label_selector
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.proxy.podlist import FetchError, fetch_json
from controlplane.apiserver.proxy.routes import ProxyEndpoints
from controlplane.apiserver.proxy.tunnels import TunnelRegistry
from controlplane.apiserver.queryparams import watch_asked
from controlplane.controllers.federatedhpa.podmetrics import MemberPods, pod_metric_of

logger = logging.getLogger(__name__)

GROUP: Final = METRICS_GROUP
BASE: Final = f"/apis/{GROUP}/{METRICS_VERSION}"
CLUSTER_ANNOTATION: Final = CACHED_FROM_CLUSTER_ANNOTATION
PODS: Final = ComputedResource(GROUP, METRICS_VERSION, "pods", "PodMetrics", namespaced=True, verbs=("get", "list"))
NODES: Final = ComputedResource(GROUP, METRICS_VERSION, "nodes", "NodeMetrics", namespaced=False, verbs=("get", "list"))
#: Who the hub's controllers are at the members when they read metrics.
CONTROLLERS: Final = UserInfo(name="system:gpufed:resource-metrics", role=Role.VIEWER)
MAX_CONCURRENT: Final = 8
TIMEOUT_SECONDS: Final = 10.0


def annotated(item: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    """A member's metrics object with the member named in its annotations."""
    meta = dict(item.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), CLUSTER_ANNOTATION: cluster}
    return {**item, "metadata": meta}


def merge_items(answers: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The items of each member's list answer, annotated with the member, ordered by namespace,
    name and member (a name two members use appears once per member)."""
    merged = [annotated(item, cluster) for cluster, answer in answers for item in answer.get("items") or []]

    def key(item: dict[str, Any]) -> tuple[str, str, str]:
        meta = item["metadata"]
        return str(meta.get("namespace") or ""), str(meta.get("name") or ""), meta["annotations"][CLUSTER_ANNOTATION]

    return sorted(merged, key=key)


def placed_clusters(bindings: Iterable[Mapping[str, Any]], pod: str) -> list[str]:
    """The clusters of the bindings whose workload's name prefixes ``pod`` (``infer`` runs
    ``infer-7c9f-x2k``); empty when none does."""
    clusters: set[str] = set()
    for binding in bindings:
        spec = binding.get("spec") or {}
        workload = str((spec.get("resource") or {}).get("name") or "")
        if workload and (pod == workload or pod.startswith(workload + "-")):
            clusters.update(str(c["name"]) for c in spec.get("clusters") or [] if c.get("name"))
    return sorted(clusters)


def _ready(cluster: Mapping[str, Any]) -> bool:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class ResourceMetrics:
    """The hub's ``metrics.k8s.io`` over the members reached through ``proxy``'s tunnels."""

    def __init__(
        self, objects: ObjectStore, proxy: ProxyEndpoints, *,
        max_concurrent: int = MAX_CONCURRENT, timeout_seconds: float = TIMEOUT_SECONDS,
    ) -> None:
        self.objects = objects
        self.proxy = proxy
        self.max_concurrent = max_concurrent
        self.timeout_seconds = timeout_seconds
        self._limit = asyncio.Semaphore(max_concurrent)
        #: Members whose outage has been logged (bounded by the clusters that exist).
        self._out: set[str] = set()

    @property
    def tunnels(self) -> TunnelRegistry:
        return self.proxy.tunnels

    def endpoints(self) -> list[ComputedEndpoint]:
        return [ComputedEndpoint(PODS, self.pods), ComputedEndpoint(NODES, self.nodes)]

    async def members(self) -> list[str]:
        """The Ready members whose agent holds its tunnel open, by name."""
        listed = await self.objects.list(self.objects.registry.require(f"{CLUSTER_GROUP}/{VERSION}", "Cluster"))
        names = {str(c["metadata"]["name"]): c for c in listed.items}
        self._out &= set(names)
        return sorted(n for n, c in names.items() if _ready(c) and self.tunnels.get(n) is not None)

    async def _ask(self, cluster: str, path: str, user: UserInfo) -> Any:
        """The member's answer; None when it has no such object (404) or did not answer (logged)."""
        try:
            async with self._limit:
                answer = await fetch_json(self.tunnels, cluster, path, user, timeout_seconds=self.timeout_seconds)
        except FetchError as exc:
            if exc.status and exc.status < 500:
                if exc.status not in (403, 404):
                    logger.info("cluster %s refused %s: %s", cluster, path, exc)
                return None
            if cluster not in self._out:
                self._out.add(cluster)
                logger.warning("cluster %s's resource metrics left out until it answers: %s", cluster, exc)
            return None
        if cluster in self._out:
            self._out.discard(cluster)
            logger.info("cluster %s's resource metrics answer again", cluster)
        return answer

    async def gather(self, path: str, clusters: Sequence[str], user: UserInfo) -> list[tuple[str, Any]]:
        """``path`` asked of each of ``clusters`` in parallel: (cluster, answer) of those that answered."""
        answers = await asyncio.gather(*(self._ask(cluster, path, user) for cluster in clusters))
        return [(c, a) for c, a in zip(clusters, answers, strict=True) if isinstance(a, dict)]

    async def pod_metrics(self, namespace: str, selector: Mapping[str, Any] | str) -> list[MemberPods]:
        """The pods ``selector`` selects in ``namespace`` of each member, with the ``PodMetrics``
        its metrics API gives (None when that does not answer; neither when its pod list does not)."""
        text = selector if isinstance(selector, str) else format_label_selector(selector)
        if not text or text == "<none>":
            return []
        matches = parse_label_selector(text).matches
        query = "?" + urlencode({"labelSelector": text})
        clusters = await self.members()

        async def member(cluster: str) -> MemberPods:
            pods, metrics = await asyncio.gather(
                self._ask(cluster, f"/api/v1/namespaces/{namespace}/pods{query}", CONTROLLERS),
                self._ask(cluster, f"{BASE}/namespaces/{namespace}/pods{query}", CONTROLLERS),
            )
            if not isinstance(pods, dict):
                return MemberPods(cluster, (), None, answered=False)
            selected = [p for p in pods.get("items") or () if matches((p.get("metadata") or {}).get("labels") or {})]
            usage = None if not isinstance(metrics, dict) else {
                str((item.get("metadata") or {}).get("name")): pod_metric_of(item)
                for item in metrics.get("items") or ()
            }
            return MemberPods(cluster, selected, usage)

        return list(await asyncio.gather(*(member(cluster) for cluster in clusters)))

    async def pods(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info.get("namespace"), request.match_info.get("name")
        user: UserInfo = request[USER]
        where = f"/namespaces/{namespace}" if namespace else ""
        if name is not None:
            clusters = await self.members()
            assert namespace is not None
            bindings = await self.objects.list(
                self.objects.registry.require(f"{WORK_GROUP}/{VERSION}", "ResourceBinding"), namespace=namespace
            )
            placed = [c for c in placed_clusters(bindings.items, name) if c in clusters]
            return await self._one(f"{BASE}{where}/pods/{name}", placed or clusters, user, PODS, name)
        return await self._list(request, f"{BASE}{where}/pods", PODS)

    async def nodes(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info.get("name")
        if name is not None:
            return await self._one(f"{BASE}/nodes/{name}", await self.members(), request[USER], NODES, name)
        return await self._list(request, f"{BASE}/nodes", NODES)

    async def _one(
        self, path: str, clusters: Sequence[str], user: UserInfo, resource: ComputedResource, name: str,
    ) -> web.StreamResponse:
        for cluster, answer in await self.gather(path, clusters, user):
            return json_response(annotated(answer, cluster))
        raise errors.not_found(plural=resource.plural, group=GROUP, name=name)

    async def _list(self, request: web.Request, path: str, resource: ComputedResource) -> web.StreamResponse:
        if watch_asked(request.query):
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        fields = parse_field_selector(request.query.get("fieldSelector"), BASE_FIELD_SELECTORS)
        selector = request.query.get("labelSelector")
        query = "?" + urlencode({"labelSelector": selector}) if selector else ""
        answers = await self.gather(path + query, await self.members(), request[USER])
        items = [item for item in merge_items(answers) if fields.matches(item)]
        return json_response({
            "kind": f"{resource.kind}List", "apiVersion": f"{GROUP}/{METRICS_VERSION}", "metadata": {}, "items": items,
        })
