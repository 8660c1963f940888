"""Schemas of the resource metrics API (``metrics.k8s.io/v1beta1``), which the hub merges from its
members on each read (:mod:`controlplane.apiserver.proxy.resourcemetrics`) and never stores.

``PodMetrics``, ``NodeMetrics``, their lists and ``ContainerMetrics``, under the definition names
metrics-server publishes (``io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics``), with its
field descriptions, so OpenAPI readers resolve the ``pods`` and ``nodes`` paths' responses.

In kube's OpenAPI v2 dialect, keyed by definition name. Pure: constants and a lookup.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis.constants import METRICS_GROUP, METRICS_VERSION
from controlplane.apiserver.openapi.models import type_meta_properties
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, LIST_META, QUANTITY

GROUP: Final = METRICS_GROUP
VERSION: Final = METRICS_VERSION
PREFIX: Final = "io.k8s.metrics.pkg.apis.metrics.v1beta1."
_USAGE: Final = {
    "description": "The memory and CPU usage.", "type": "object",
    "additionalProperties": {"$ref": DEFINITIONS_PREFIX + QUANTITY},
}
_SAMPLE: Final = {
    "timestamp": {"description": "The following fields define time interval from which metrics were collected "
                                 "from the interval [Timestamp-Window, Timestamp].",
                  "type": "string", "format": "date-time"},
    "window": {"type": "string"},
}


def _gvk(kind: str) -> list[dict[str, str]]:
    return [{"group": GROUP, "version": VERSION, "kind": kind}]


def _list(kind: str) -> dict[str, Any]:
    meta = type_meta_properties()
    meta["metadata"] = {"$ref": DEFINITIONS_PREFIX + LIST_META, "description": "Standard list metadata."}
    return {
        "description": f"{kind}List is a list of {kind}.", "type": "object", "required": ["items"],
        "properties": {**meta, "items": {"description": f"List of {kind.lower()} metrics.", "type": "array",
                                         "items": {"$ref": DEFINITIONS_PREFIX + PREFIX + kind, "default": {}}}},
        "x-kubernetes-group-version-kind": _gvk(f"{kind}List"),
    }


DEFINITIONS: Final[dict[str, dict[str, Any]]] = {
    PREFIX + "ContainerMetrics": {
        "description": "ContainerMetrics sets resource usage metrics of a container.", "type": "object",
        "required": ["name", "usage"],
        "properties": {"name": {"description": "Container name corresponding to the one from pod.spec.containers.",
                                "type": "string"}, "usage": _USAGE},
    },
    PREFIX + "PodMetrics": {
        "description": "PodMetrics sets resource usage metrics of a pod.", "type": "object",
        "required": ["timestamp", "window", "containers"],
        "properties": {
            **type_meta_properties(), **_SAMPLE,
            "containers": {"description": "Metrics for all containers are collected within the same time window.",
                           "type": "array",
                           "items": {"$ref": DEFINITIONS_PREFIX + PREFIX + "ContainerMetrics", "default": {}}},
        },
        "x-kubernetes-group-version-kind": _gvk("PodMetrics"),
    },
    PREFIX + "NodeMetrics": {
        "description": "NodeMetrics sets resource usage metrics of a node.", "type": "object",
        "required": ["timestamp", "window", "usage"],
        "properties": {**type_meta_properties(), **_SAMPLE, "usage": _USAGE},
        "x-kubernetes-group-version-kind": _gvk("NodeMetrics"),
    },
    PREFIX + "PodMetricsList": _list("PodMetrics"),
    PREFIX + "NodeMetricsList": _list("NodeMetrics"),
}


def metrics_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions of a resource metrics kind (None for any other kind)."""
    if (group, version) != (GROUP, VERSION) or PREFIX + kind not in DEFINITIONS:
        return None
    return PREFIX + kind, dict(DEFINITIONS)
