"""flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration, as kube serves them:
cluster-scoped, with ``status`` subresources, kube's defaulting and validation
(:mod:`controlplane.apis.kube.flowcontrol`) and its ``kubectl get`` columns (printers.go). The API
server's dispatcher follows them (:mod:`controlplane.apiserver.flowcontrol`); the leader keeps kube's
bootstrap objects and each FlowSchema's ``Dangling`` condition
(:mod:`controlplane.controllers.flowcontrolconfig`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controlplane.apis.kube import flowcontrol
from controlplane.apis.untyped import dig
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn


def _distinguisher(obj: dict[str, Any], _now: datetime) -> str:
    return str(dig(obj, "spec", "distinguisherMethod", "type") or "<none>")


def _missing_level(obj: dict[str, Any], _now: datetime) -> str:
    for condition in dig(obj, "status", "conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Dangling":
            return str(condition.get("status") or "")
    return "?"


def _limited(*keys: str) -> Any:
    def get(obj: dict[str, Any], _now: datetime) -> Any:
        limited = dig(obj, "spec", "limited")
        if not isinstance(limited, dict):
            return "<none>"
        value = dig(limited, *keys)
        return value if isinstance(value, int) else "<none>"

    return get


FLOW_SCHEMA = ResourceType(
    flowcontrol.GROUP, "v1", "FlowSchema", "flowschemas", "flowschema", namespaced=False,
    has_status=True, strategic_merge=True,
    defaults=flowcontrol.default_flow_schema,
    validate=flowcontrol.validate_flow_schema,
    validate_status=flowcontrol.validate_flow_schema_status,
    columns=(
        TableColumn("PriorityLevel", lambda obj, _now: str(dig(obj, "spec", "priorityLevelConfiguration", "name") or ""),
                    description="`name` is the name of the priority level configuration being referenced Required."),
        TableColumn("MatchingPrecedence", lambda obj, _now: dig(obj, "spec", "matchingPrecedence"),
                    description="`matchingPrecedence` is used to choose among the FlowSchemas that match a given request."),
        TableColumn("DistinguisherMethod", _distinguisher,
                    description="`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema."),
        AGE,
        TableColumn("MissingPL", _missing_level,
                    description="references a broken or non-existent PriorityLevelConfiguration"),
    ),
)

PRIORITY_LEVEL_CONFIGURATION = ResourceType(
    flowcontrol.GROUP, "v1", "PriorityLevelConfiguration", "prioritylevelconfigurations",
    "prioritylevelconfiguration", namespaced=False, has_status=True, strategic_merge=True,
    defaults=flowcontrol.default_priority_level,
    validate=flowcontrol.validate_priority_level,
    validate_status=flowcontrol.validate_priority_level_status,
    columns=(
        TableColumn("Type", lambda obj, _now: str(dig(obj, "spec", "type") or ""),
                    description="`type` indicates whether this priority level is subject to limitation on request execution."),
        TableColumn("NominalConcurrencyShares", _limited("nominalConcurrencyShares"),
                    description="`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level."),
        TableColumn("Queues", _limited("limitResponse", "queuing", "queues"),
                    description="`queues` is the number of queues for this priority level."),
        TableColumn("HandSize", _limited("limitResponse", "queuing", "handSize"),
                    description="`handSize` is a small positive number that configures the shuffle sharding of requests into queues."),
        TableColumn("QueueLengthLimit", _limited("limitResponse", "queuing", "queueLengthLimit"),
                    description="`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time."),
        AGE,
    ),
)
