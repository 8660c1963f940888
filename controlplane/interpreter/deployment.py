"""Deployment (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

A cluster's share is the same Deployment with ``spec.replicas`` set to that share. The
hub's status sums the members' replica counts and merges their conditions (Available,
Progressing: True only when every member says so; ReplicaFailure: True when any does). A member's
copy is healthy when its ``spec.replicas`` are available and updated, at the current generation
(:meth:`~controlplane.interpreter.base.ReplicatedTemplateKind.health_of`).
"""

from __future__ import annotations

from controlplane.interpreter.base import ReplicatedTemplateKind

REPLICA_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "unavailableReplicas")


class DeploymentInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "Deployment"
    replica_fields = REPLICA_FIELDS
    any_true_conditions = frozenset({"ReplicaFailure"})
    serving_field = "availableReplicas"

