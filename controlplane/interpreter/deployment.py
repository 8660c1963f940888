"""Deployment (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

A cluster's share is the same Deployment with ``spec.replicas`` set to that share. The
hub's status sums the members' replica counts and merges their conditions (Available,
Progressing: True only when every member says so; ReplicaFailure: True when any does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import as_int
from controlplane.interpreter.base import Health, ReplicatedTemplateKind, condition_true

REPLICA_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "unavailableReplicas")


class DeploymentInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "Deployment"
    replica_fields = REPLICA_FIELDS
    any_true_conditions = frozenset({"ReplicaFailure"})

    def health(self, status: Mapping[str, Any] | None) -> Health:
        if not status:
            return Health.UNKNOWN
        if condition_true(status, "Available") is False:
            return Health.UNHEALTHY
        replicas = as_int(status.get("replicas"))
        updated = as_int(status.get("updatedReplicas"))
        available = as_int(status.get("availableReplicas"))
        if updated == replicas and available >= updated:
            return Health.HEALTHY
        return Health.UNHEALTHY
