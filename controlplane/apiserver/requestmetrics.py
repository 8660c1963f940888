"""kube-apiserver's request metrics, under its names, labels, help texts and buckets (no ``gpufed_``
prefix, so kube's dashboards and alerts read them as they are):

* ``apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}``
  -- every resource request, by HTTP code;
* ``apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,component}``
  -- their latency (a watch's when it ends, as kube's).

The labels are kube's (``k8s.io/apiserver`` ``endpoints/metrics``): ``verb`` the HTTP method upper
case, ``LIST`` for a ``GET`` of a collection, ``WATCH``, ``APPLY`` for a server-side apply and
``CONNECT`` for ``log``, ``exec``, ``attach``, ``portforward`` and ``proxy``; ``scope`` ``resource``
(one object, or a create), ``namespace`` or ``cluster``; ``dry_run`` ``All`` (``invalid`` for any
other value) or empty; ``component`` ``apiserver``. Non-resource requests (``/healthz``,
``/metrics``, discovery) are not counted, as kube counts only its resource routes; a resource
request priority and fairness refuses (429) is, as kube's ``RecordDroppedRequest`` counts it, and,
unlike kube, one refused before its handler for authentication or authorization (401, 403). A path naming a resource the hub
does not serve is counted without its group, version, resource and subresource (:func:`labelled`):
the labels come from the path, so requests for made-up resources would otherwise add a series each,
without bound.

In: each request's :class:`~controlplane.apiserver.routing.RequestInfo`, answer code and duration,
from the hub's request middleware (:meth:`controlplane.metrics.HubMetrics.middleware`). Out: the two
metrics in the registry given.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram

from controlplane.apiserver.app import REGISTRY
from controlplane.apiserver.routing import RequestInfo
from controlplane.metricstability import Stability, kube_help

COMPONENT: Final = "apiserver"
#: kube's buckets of ``apiserver_request_duration_seconds``.
DURATION_BUCKETS: Final = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
)
_LABELS: Final = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")
_VALID_VERBS: Final = frozenset({
    "APPLY", "CONNECT", "CREATE", "DELETE", "DELETECOLLECTION", "GET", "LIST", "PATCH", "POST", "PROXY", "PUT",
    "UPDATE", "WATCH", "WATCHLIST",
})
_CONNECT_SUBRESOURCES: Final = frozenset({"log", "exec", "portforward", "attach", "proxy"})
_APPLY_PATCH: Final = "application/apply-patch+yaml"
#: Label sets whose series are kept at hand (``labels()`` converts, checks and locks on every call);
#: past it, a new label set is looked up each time.
_SERIES_MEMO: Final = 2048

_Key = tuple[str, str, str, str, str, str, str, int]


def labelled(request: web.Request, info: RequestInfo) -> RequestInfo:
    """``info`` as the request metrics label it: a resource the app's registry does not serve loses
    its group, version, resource and subresource (a made-up path must not make a series)."""
    registry = request.app.get(REGISTRY)
    if not info.is_resource or registry is None or registry.get(info.group, info.version, info.resource) is not None:
        return info
    return replace(info, group="", version="", resource="", subresource="")


def scope_of(info: RequestInfo) -> str:
    """kube's ``CleanScope``: ``resource`` for one object or a create, else the collection's scope."""
    if info.name or info.verb == "create":
        return "resource"
    return "namespace" if info.namespace else "cluster"


def verb_of(request: web.Request, info: RequestInfo, scope: str) -> str:
    """kube's reported verb (``CanonicalVerb``, then ``cleanVerb``)."""
    if info.verb == "watch":
        return "WATCH"
    verb = request.method.upper()
    if verb in ("GET", "HEAD"):
        verb = "GET" if scope == "resource" else "LIST"
    elif verb == "PATCH" and request.headers.get("Content-Type") == _APPLY_PATCH:
        verb = "APPLY"
    if info.subresource in _CONNECT_SUBRESOURCES:
        verb = "CONNECT"
    return verb if verb in _VALID_VERBS else "other"


def dry_run_of(request: web.Request) -> str:
    """kube's ``cleanDryRun``: empty without ``dryRun``, ``All``, or ``invalid``."""
    if "dryRun" not in request.query_string:
        return ""
    values = request.query.getall("dryRun", [])
    if not values:
        return ""
    return "All" if all(value == "All" for value in values) else "invalid"


class RequestMetrics:
    """``apiserver_request_total`` and ``apiserver_request_duration_seconds`` in ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.total = Counter(
            "apiserver_request_total",
            kube_help(
                Stability.STABLE,
                "Counter of apiserver requests broken out for each verb, dry run value, group, version, "
                "resource, scope, component, and HTTP response code.",
            ),
            [*_LABELS, "code"], registry=registry,
        )
        self.duration = Histogram(
            "apiserver_request_duration_seconds",
            kube_help(
                Stability.STABLE,
                "Response latency distribution in seconds for each verb, dry run value, group, version, "
                "resource, subresource, scope and component.",
            ),
            _LABELS, buckets=DURATION_BUCKETS, registry=registry,
        )
        self._series: dict[_Key, tuple[Counter, Histogram]] = {}

    def observe(self, request: web.Request, info: RequestInfo, *, code: int, seconds: float) -> None:
        """One resource request answered ``code`` after ``seconds``."""
        scope = scope_of(info)
        key = (verb_of(request, info, scope), dry_run_of(request), info.group, info.version, info.resource,
               info.subresource, scope, code)
        series = self._series.get(key)
        if series is None:
            labels = (*key[:7], COMPONENT)
            series = (self.total.labels(*labels, str(code)), self.duration.labels(*labels))
            if len(self._series) < _SERIES_MEMO:
                self._series[key] = series
        total, duration = series
        total.inc()
        duration.observe(seconds)


__all__ = ["COMPONENT", "DURATION_BUCKETS", "RequestMetrics", "dry_run_of", "labelled", "scope_of", "verb_of"]
