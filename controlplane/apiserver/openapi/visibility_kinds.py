"""Schemas of Kueue's visibility API (``visibility.kueue.x-k8s.io``), which the hub computes on
each read (:mod:`controlplane.apiserver.visibility`) and never stores. The group, versions and
kind's names come from :mod:`controlplane.apis.kueue_names`: the catalog that includes these
schemas is built in every API server (members' too), which need not import the visibility
endpoints and Kueue's admission with them.

``PendingWorkloadsSummary`` and its items, ``PendingWorkload``, under the definition names Kueue's
visibility server publishes (``io.k8s.kueue.visibility.<version>.PendingWorkloadsSummary``), with
Kueue's field descriptions, so generated clients and OpenAPI readers resolve the
``pendingworkloads`` paths' responses. The two served versions have the same fields.

In kube's OpenAPI v2 dialect, keyed by definition name. Pure: constants and a lookup.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kueue_names import VISIBILITY_GROUP as GROUP
from controlplane.apis.kueue_names import VISIBILITY_SUMMARY as SUMMARY
from controlplane.apis.kueue_names import VISIBILITY_VERSIONS as VERSIONS
from controlplane.apiserver.openapi.models import type_meta_properties
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META


def _int(description: str, format_: str = "int32") -> dict[str, Any]:
    return {"description": description, "type": "integer", "format": format_}


def _definitions(version: str) -> dict[str, dict[str, Any]]:
    prefix = f"io.k8s.kueue.visibility.{version}."
    item = {
        "description": "PendingWorkload is a user-facing representation of a pending workload that summarizes the "
                       "relevant information for position in the cluster queue.",
        "type": "object",
        "required": ["priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue"],
        "properties": {
            "metadata": {"$ref": DEFINITIONS_PREFIX + OBJECT_META, "description": "Standard object's metadata."},
            "priority": _int("Priority indicates the workload's priority"),
            "localQueueName": {"description": "LocalQueueName indicates the name of the LocalQueue the workload is "
                                              "submitted to", "type": "string"},
            "positionInClusterQueue": _int("PositionInClusterQueue indicates the workload's position in the "
                                           "ClusterQueue, starting from 0"),
            "positionInLocalQueue": _int("PositionInLocalQueue indicates the workload's position in the LocalQueue, "
                                         "starting from 0"),
        },
    }
    summary = {
        "description": "PendingWorkloadsSummary contains a list of pending workloads in the context of the query "
                       "(within LocalQueue or ClusterQueue).",
        "type": "object",
        "required": ["items"],
        "properties": {
            **type_meta_properties(),
            "items": {"type": "array", "items": {"$ref": DEFINITIONS_PREFIX + prefix + "PendingWorkload",
                                                 "default": {}}},
        },
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": version, "kind": SUMMARY}],
    }
    return {prefix + SUMMARY: summary, prefix + "PendingWorkload": item}


def visibility_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions of a visibility kind (None for any other kind)."""
    if (group, kind) != (GROUP, SUMMARY) or version not in VERSIONS:
        return None
    return f"io.k8s.kueue.visibility.{version}.{SUMMARY}", _definitions(version)

