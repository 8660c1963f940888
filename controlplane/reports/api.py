"""The waste report over the hub's API: the read-only ``reports.gpufed.io/v1alpha1`` resource.

In: GET requests under ``/apis/reports.gpufed.io/v1alpha1/wastereports`` (already
authenticated and authorized by the API server's middlewares: RBAC decides, per namespace for
the namespaced paths) and a :class:`ReportSource` for the rollups. Out: ``WasteReport`` objects (see
:mod:`controlplane.reports.resource` for the shape and the names), ``WasteReportList``s, and
``meta.k8s.io/v1`` Tables when the client asks for one, so::

    kubectl get wastereports                       # last-1h, last-24h, last-7d, last-30d
    kubectl get wastereport last-24h -o yaml       # the whole report
    kubectl get --raw '/apis/reports.gpufed.io/v1alpha1/wastereports/last-24h?by=cluster'
    kubectl get --raw '/apis/reports.gpufed.io/v1alpha1/wastereports/custom?from=2024-05-01T00:00:00Z&to=2024-05-02T00:00:00Z'

all work, and so does ``/apis/reports.gpufed.io/v1alpha1/namespaces/<ns>/wastereports[/<name>]``:
that namespace's share of each report (:mod:`controlplane.reports.scoping`), which RBAC lets a
team read with ``view``/``edit``/``admin`` in its namespace. The Table has one row per window with the GPU-hours of each state, the waste share
and the cost of waste. Every other verb answers 405 (the resource is computed, not stored);
bad parameters answer 400 with the parameter as the Status cause's field, unknown names 404.

The hub's registry lists the resource (:func:`waste_report_type`) so discovery (``/apis``)
shows the group; this module serves the group-version's resource list itself, with only the
verbs it supports.

Where the numbers come from (:class:`ReportSource`): the hub replica that runs the
:class:`~controlplane.reports.sampling.WasteSampler` answers from its live accumulator; any
other replica loads the rollups the sampler saved in the store (cached for a few seconds).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from controlplane.apis.kueue_v1beta1 import API_VERSION as KUEUE_API_VERSION
from controlplane.apiserver import errors
from controlplane.apiserver.handlers import json_response
from controlplane.apiserver.metadataonly import computed_metadata
from controlplane.apiserver.queryparams import watch_asked
from controlplane.apiserver.resources import ResourceType, TableColumn
from controlplane.apiserver.tables import IncludeObject, table, table_content_type, wants_table
from controlplane.objectclient import ObjectClient
from controlplane.reports.accounting import Accumulator
from controlplane.reports.classify import STATES, WasteState
from controlplane.reports.persistence import DEFAULT_PREFIX, RollupStore
from controlplane.reports.queues import cluster_queues_of
from controlplane.reports.resource import (
    COLLECTION_PATH,
    GROUP,
    KIND,
    PLURAL,
    SINGULAR,
    VERSION,
    QueryError,
    QueryParams,
    ReportQuery,
    default_queries,
    namespaced_collection_path,
    parse_query,
    report_list,
    report_object,
)
from controlplane.reports.rollups import DEFAULT_BUCKET_SECONDS, check_bucket_seconds
from controlplane.reports.sampling import WasteSampler
from controlplane.reports.summary import Dimension
from controlplane.reports.totals import QueueOf
from controlplane.storage.interface import StorageError, Store

logger = logging.getLogger(__name__)

DEFAULT_CACHE_SECONDS = 10.0
DEFAULT_LOAD_TIMEOUT = 20.0
READ_VERBS = ("get", "list")
GROUP_VERSION_PATH = f"/apis/{GROUP}/{VERSION}"

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


# ---------------------------------------------------------------------------------------------
# The resource type: discovery and Table columns
# ---------------------------------------------------------------------------------------------


def _hours(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _state_hours(state: WasteState) -> Callable[[dict[str, Any], datetime], Any]:
    def get(obj: dict[str, Any], _now: datetime) -> Any:
        return _hours(float(_status(obj)["totals"]["gpu_hours"][state.value]))

    return get


def _window_cell(key: str) -> Callable[[dict[str, Any], datetime], Any]:
    def get(obj: dict[str, Any], _now: datetime) -> Any:
        return _status(obj)["window"][key]

    return get


def _waste_pct(obj: dict[str, Any], _now: datetime) -> Any:
    return f"{float(_status(obj)['totals']['waste_pct']):.1f}%"


def _waste_cost(obj: dict[str, Any], _now: datetime) -> Any:
    return f"${float(_status(obj)['totals']['waste_cost_usd']):,.2f}"


def _observed(obj: dict[str, Any], _now: datetime) -> Any:
    return f"{float(_status(obj)['window']['observed_hours']):.2f}h"


def waste_report_type() -> ResourceType:
    """``wastereports.reports.gpufed.io``: for the hub's registry (discovery) and the Table."""
    state_columns = tuple(
        TableColumn(
            state.value.title(),
            _state_hours(state),
            description=f"GPU-hours in the {state.value} state over the window.",
        )
        for state in STATES
    )
    return ResourceType(
        GROUP,
        VERSION,
        KIND,
        PLURAL,
        SINGULAR,
        namespaced=False,
        columns=(
            TableColumn("From", _window_cell("from"), format="date-time", description="Start of the window."),
            TableColumn("To", _window_cell("to"), format="date-time", priority=1, description="End of the window."),
            TableColumn("Observed", _observed, description="Hours of the window covered by samples."),
            *state_columns,
            TableColumn("Waste", _waste_pct, description="Idle-allocated + free-needed + free-fragmented share."),
            TableColumn("Waste-Cost", _waste_cost, description="Dollars spent on wasted GPU time."),
        ),
    )


def api_resource_list() -> dict[str, Any]:
    """The group-version's discovery document: one read-only resource."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{VERSION}",
        "resources": [
            {
                "name": PLURAL,
                "singularName": SINGULAR,
                "namespaced": False,
                "kind": KIND,
                "verbs": list(READ_VERBS),
                "categories": ["gpufed"],
            }
        ],
    }


# ---------------------------------------------------------------------------------------------
# Where the rollups come from
# ---------------------------------------------------------------------------------------------


class ReportSource:
    """The accumulator to answer from: the local sampler's while it runs, else the store's
    rollups, loaded at most every ``cache_seconds``. ``bucket_seconds``: the length of the fine
    rollup buckets, the hub's ``--waste-bucket-length`` (the sampler's when one is given)."""

    def __init__(
        self,
        store: Store,
        *,
        sampler: WasteSampler | None = None,
        prefix: str = DEFAULT_PREFIX,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        load_timeout: float = DEFAULT_LOAD_TIMEOUT,
        bucket_seconds: int | None = None,
    ) -> None:
        if bucket_seconds is None:
            bucket_seconds = sampler.bucket_seconds if sampler is not None else DEFAULT_BUCKET_SECONDS
        #: Seconds in one fine rollup bucket: the shortest report step, the alignment of named windows.
        self.bucket_seconds = check_bucket_seconds(bucket_seconds)
        self._store = store
        self._sampler = sampler
        self._prefix = prefix
        self._cache_seconds = cache_seconds
        self._load_timeout = load_timeout
        self._cached: tuple[float, Accumulator] | None = None
        self._lock = asyncio.Lock()

    async def accumulator(self) -> Accumulator:
        if self._sampler is not None and self._sampler.accumulator is not None:
            return self._sampler.accumulator
        async with self._lock:
            if self._cached is not None and time.monotonic() - self._cached[0] < self._cache_seconds:
                return self._cached[1]
            try:
                async with asyncio.timeout(self._load_timeout):
                    loaded = await RollupStore(self._store, prefix=self._prefix).load(
                        Accumulator(bucket_seconds=self.bucket_seconds), read_only=True
                    )
            except (StorageError, TimeoutError) as exc:
                # The store's message names its endpoint: the log gets it, the client does not.
                logger.warning("the waste rollups cannot be read from the store: %s", exc)
                raise errors.ServiceUnavailable(
                    "the waste rollups cannot be read from the store right now; retry in a few seconds",
                    retry_after_seconds=2,
                ) from exc
            self._cached = (time.monotonic(), loaded)
            return loaded


# ---------------------------------------------------------------------------------------------
# Routes
# ---------------------------------------------------------------------------------------------


def _params(request: web.Request) -> QueryParams:
    query = request.query
    return QueryParams(
        since=query.get("since"),
        start=query.get("from"),
        end=query.get("to"),
        by=tuple(query.getall("by", [])),
        top=query.get("top"),
        step=query.get("step"),
    )


def _api_error(exc: QueryError, *, name: str = "") -> errors.ApiError:
    if exc.not_found:
        return errors.NotFound(exc.message, target=errors.Target(name=name, group=GROUP, kind=PLURAL))
    causes = [errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, exc.message, exc.field)] if exc.field else []
    return errors.BadRequest(exc.message, target=errors.Target(name=name, group=GROUP, kind=PLURAL), causes=causes)


def _method_not_allowed(request: web.Request) -> errors.ApiError:
    return errors.MethodNotAllowed(
        f"{PLURAL}.{GROUP} is read-only: {request.method} is not allowed (use GET; reports are computed"
        " from the waste accounting, not stored)"
    )


class _ReportHandlers:
    def __init__(self, source: ReportSource, *, clock: Clock, objects: ObjectClient | None) -> None:
        self._source = source
        self._clock = clock
        self._type = waste_report_type()
        self._kueue = objects

    async def _queues(self, queries: list[ReportQuery], namespace: str | None) -> QueueOf | None:
        """Which ClusterQueue admitted each workload, read only when a query groups by it."""
        if self._kueue is None or not any(Dimension.CLUSTER_QUEUE in q.by for q in queries):
            return None
        registry = self._kueue.registry
        workload_rt = registry.for_kind(KUEUE_API_VERSION, "Workload")
        local_queue_rt = registry.for_kind(KUEUE_API_VERSION, "LocalQueue")
        if workload_rt is None or local_queue_rt is None:
            return None
        workloads = await self._kueue.list(workload_rt, namespace=namespace)
        local_queues = await self._kueue.list(local_queue_rt, namespace=namespace)
        return cluster_queues_of(workloads.items, local_queues.items)

    async def _objects(self, request: web.Request, queries: list[ReportQuery], accumulator: Accumulator) -> list[dict[str, Any]]:
        now = self._clock()
        namespace = request.match_info.get("namespace")
        queues = await self._queues(queries, namespace)
        return [report_object(query, accumulator, now=now, namespace=namespace, queues=queues) for query in queries]

    def _respond(self, request: web.Request, objects: list[dict[str, Any]], *, single: bool) -> web.StreamResponse:
        if (as_table := wants_table(request.headers.get("Accept"))) is not None:
            include = IncludeObject.parse(request.query.get("includeObject"))
            rendered = table(self._type, objects, include=include, now=self._clock(), version=as_table.version)
            return json_response(rendered, content_type=table_content_type(as_table.version))
        if (partial := computed_metadata(self._type, request.headers.get("Accept"), objects, single=single)) is not None:
            return json_response(partial)
        return json_response(objects[0] if single else report_list(objects))

    async def discovery(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise _method_not_allowed(request)
        return json_response(api_resource_list())

    async def collection(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise _method_not_allowed(request)
        if watch_asked(request.query):
            raise errors.MethodNotAllowed(f"{PLURAL}.{GROUP} cannot be watched: reports are computed on request")
        params = _params(request)
        try:
            if params.since is not None or params.start is not None or params.end is not None:
                queries = [parse_query(None, params, bucket_seconds=self._source.bucket_seconds)]
            else:
                queries = default_queries(params, bucket_seconds=self._source.bucket_seconds)
            accumulator = await self._source.accumulator()
            objects = await self._objects(request, queries, accumulator)
        except QueryError as exc:
            raise _api_error(exc) from exc
        return self._respond(request, objects, single=False)

    async def item(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise _method_not_allowed(request)
        name = request.match_info["name"]
        try:
            query = parse_query(name, _params(request), bucket_seconds=self._source.bucket_seconds)
            accumulator = await self._source.accumulator()
            objects = await self._objects(request, [query], accumulator)
        except QueryError as exc:
            raise _api_error(exc, name=name) from exc
        return self._respond(request, objects, single=True)


def waste_report_routes(
    source: ReportSource, *, clock: Clock = _utc_now, objects: ObjectClient | None = None
) -> list[web.RouteDef]:
    """The routes of the reports API; register them before the generic ``/apis`` routes.
    ``objects``: where Kueue's Workloads and LocalQueues are read for ``by=clusterqueue``
    (without it every workload is in the ``-`` group)."""
    handlers = _ReportHandlers(source, clock=clock, objects=objects)
    return [
        web.route("*", GROUP_VERSION_PATH, handlers.discovery),
        web.route("*", COLLECTION_PATH, handlers.collection),
        web.route("*", COLLECTION_PATH + "/{name}", handlers.item),
        # One namespace's share, for teams bound to view/edit/admin there (reports.scoping).
        web.route("*", namespaced_collection_path("{namespace}"), handlers.collection),
        web.route("*", namespaced_collection_path("{namespace}") + "/{name}", handlers.item),
    ]


__all__ = [
    "GROUP_VERSION_PATH",
    "ReportSource",
    "api_resource_list",
    "waste_report_routes",
    "waste_report_type",
]
