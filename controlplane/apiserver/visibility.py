"""Kueue's visibility API: the pending workloads of a ClusterQueue or a LocalQueue, computed on
every read from the Workloads and queues the hub's watch cache holds (no read of etcd's lists).

Kueue serves it from an aggregated API server (``visibility.kueue.x-k8s.io``, ``v1beta2`` and
``v1beta1`` since Kueue 0.15, the versions of ``kueue.x-k8s.io`` the hub serves); the hub answers
the same paths itself::

    GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<cq>/pendingworkloads
    GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/<ns>/localqueues/<lq>/pendingworkloads

Each answers a ``PendingWorkloadsSummary`` whose ``items`` are ``PendingWorkload``s in the order
the admission cycle takes them (:mod:`controlplane.admission.pending`, the order ``gpufed
explain`` reports), from ``offset`` (default 0) and at most ``limit`` (default 1000; 0 is the
default too, as Kueue's defaulting makes it; a negative value is 0, as Kueue bounds it; a value
that is not an integer is Kueue's 400 with Go's parse error). A ClusterQueue or LocalQueue that
does not exist is Kueue's 404 (``clusterqueue.visibility.kueue.x-k8s.io "<name>" not found``); a
LocalQueue whose ClusterQueue does not exist has no pending workloads.

Discovery lists what Kueue's server lists: ``clusterqueues`` and ``localqueues`` without verbs
(they exist only to carry the subresource) and their ``pendingworkloads`` with the verb ``get``.
RBAC decides each request as ``get`` on ``clusterqueues/pendingworkloads`` (cluster-wide) or
``localqueues/pendingworkloads`` (in the namespace).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aiohttp import web

from controlplane.admission import pending, usagehistory
from controlplane.admission.core.admissionfairsharing import AdmissionFairSharing
from controlplane.admission.requeuing import RequeuingTimestamp
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kueue_names import VISIBILITY_GROUP, VISIBILITY_SUMMARY, VISIBILITY_VERSIONS
from controlplane.apiserver import errors
from controlplane.apiserver.computed import ComputedEndpoint, ComputedResource
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.metadataonly import refuse_metadata_of_summary
from controlplane.apiserver.resources import ResourceType
from controlplane.objectclient import ObjectClient

GROUP: Final = VISIBILITY_GROUP
#: Served versions, the preferred first (Kueue's ``PrioritizedVersions``).
VERSIONS: Final = VISIBILITY_VERSIONS
SUMMARY: Final = VISIBILITY_SUMMARY
SUBRESOURCE: Final = "pendingworkloads"
#: The kinds of the two parents (Kueue's visibility ClusterQueue and LocalQueue).
PARENT_KINDS: Final = {"clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}
_INT64: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MAX: Final = 2**63 - 1

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _parse_int64(query: Mapping[str, str], key: str) -> int:
    """A query parameter as Kueue's parameter codec reads it (Go's ``strconv.ParseInt``); absent: 0."""
    if key not in query:
        return 0
    text = query[key].strip()
    if not _INT64.fullmatch(text):
        raise errors.BadRequest(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise errors.BadRequest(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def _summary(version: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": SUMMARY, "apiVersion": f"{GROUP}/{version}", "metadata": {"creationTimestamp": None}, "items": items}


async def _not_served(_request: web.Request) -> web.StreamResponse:
    raise errors.NotFound("the server could not find the requested resource")


class PendingWorkloads:
    """The visibility API over the hub's ``objects`` (lists from its watch cache)."""

    def __init__(
        self, objects: ObjectClient, *, timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION,
        admission_fair_sharing: AdmissionFairSharing | None = None,
    ) -> None:
        self._objects = objects
        self._timestamp = timestamp
        """Kueue's ``requeuingStrategy.timestamp``, as the hub's admission cycle orders by it."""
        self._fair = admission_fair_sharing
        """Kueue's admission fair sharing (None: off), as the cycle orders a usage-based ClusterQueue."""

    def _type(self, kind: str) -> ResourceType:
        return self._objects.registry.require(kueue.API_VERSION, kind)

    async def _ordered(self, cluster_queue: str) -> list[Mapping[str, Any]]:
        """The Workloads waiting in ``cluster_queue``, in the admission cycle's order."""
        local_queues = (await self._objects.list(self._type("LocalQueue"))).items
        workloads = (await self._objects.list(self._type("Workload"))).items
        fair_usage = None
        if self._fair is not None:
            cq = await self._get("ClusterQueue", name=cluster_queue)
            fair_usage = usagehistory.local_queue_usage(self._fair, {cluster_queue: cq or {}}, local_queues, {})
        return pending.in_order(pending.in_cluster_queue(workloads, local_queues, cluster_queue), timestamp=self._timestamp,
                                cluster_queue=cluster_queue, fair_usage=fair_usage)

    async def _get(self, kind: str, *, namespace: str | None = None, name: str) -> dict[str, Any] | None:
        try:
            return await self._objects.get(self._type(kind), namespace=namespace, name=name)
        except errors.NotFound:
            return None

    async def _cluster_queue(self, version: str, name: str, limit: int, offset: int) -> dict[str, Any]:
        if await self._get("ClusterQueue", name=name) is None:
            raise errors.not_found(plural="clusterqueue", group=GROUP, name=name)
        return _summary(version, pending.cluster_queue_page(await self._ordered(name), limit=limit, offset=offset))

    async def _local_queue(self, version: str, namespace: str, name: str, limit: int, offset: int) -> dict[str, Any]:
        local_queue = await self._get("LocalQueue", namespace=namespace, name=name)
        if local_queue is None:
            raise errors.not_found(plural="localqueue", group=GROUP, name=name)
        cq_name = str((local_queue.get("spec") or {}).get("clusterQueue") or "")
        if not cq_name or await self._get("ClusterQueue", name=cq_name) is None:
            return _summary(version, [])
        ordered = await self._ordered(cq_name)
        return _summary(version, pending.local_queue_page(ordered, namespace, name, limit=limit, offset=offset))

    def _handler(self, version: str, *, namespaced: bool) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            name = request.match_info["name"]
            limit, offset = options(request.query)
            if namespaced:
                answer = await self._local_queue(version, request.match_info["namespace"], name, limit, offset)
            else:
                answer = await self._cluster_queue(version, name, limit, offset)
            # Kueue's server answers from kube's library: no metadata alone of a summary.
            refuse_metadata_of_summary(request.headers.get("Accept"), f"*{version}.{SUMMARY}")
            return json_response(answer)

        return handle

    def endpoints(self) -> list[ComputedEndpoint]:
        """Per served version: the two parents (listed only, as Kueue's) and their ``pendingworkloads``."""
        return [
            ComputedEndpoint(resource, self._handler(resource.version, namespaced=resource.namespaced)
                             if resource.subresource else _not_served)
            for resource in RESOURCES
        ]


def _resources() -> tuple[ComputedResource, ...]:
    out: list[ComputedResource] = []
    for version in VERSIONS:
        for plural, namespaced in (("clusterqueues", False), ("localqueues", True)):
            out += [
                ComputedResource(GROUP, version, plural, SUMMARY, namespaced=namespaced, verbs=(),
                                 singular_name=plural.removesuffix("s")),
                ComputedResource(GROUP, version, plural, SUMMARY, namespaced=namespaced, subresource=SUBRESOURCE,
                                 verbs=("get",), parent_kind=PARENT_KINDS[plural], query=("limit", "offset")),
            ]
    return tuple(out)


#: What discovery lists, per served version: the two parents (no verbs, as Kueue's server lists
#: them) and their ``pendingworkloads`` (``get``).
RESOURCES: Final = _resources()


def options(query: Mapping[str, str]) -> tuple[int, int]:
    """``limit`` (0 or absent: Kueue's default) and ``offset`` of a request."""
    return (_parse_int64(query, "limit") or pending.DEFAULT_LIMIT), _parse_int64(query, "offset")
