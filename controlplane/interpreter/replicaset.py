"""ReplicaSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

A cluster's share is the same ReplicaSet with ``spec.replicas`` set to that share; the hub's
status sums the members' replica counts and merges their conditions (ReplicaFailure: True
when any member says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import as_int
from controlplane.interpreter.base import Health, ReplicatedTemplateKind

REPLICA_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


class ReplicaSetInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "ReplicaSet"
    replica_fields = REPLICA_FIELDS
    any_true_conditions = frozenset({"ReplicaFailure"})

    def health(self, status: Mapping[str, Any] | None) -> Health:
        if not status:
            return Health.UNKNOWN
        replicas = as_int(status.get("replicas"))
        return Health.HEALTHY if as_int(status.get("availableReplicas")) >= replicas else Health.UNHEALTHY
