"""ReplicaSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

A cluster's share is the same ReplicaSet with ``spec.replicas`` set to that share; the hub's
status sums the members' replica counts and merges their conditions (ReplicaFailure: True
when any member says so). A member's copy is healthy when its ``spec.replicas`` are ready, at the
current generation.
"""

from __future__ import annotations

from controlplane.interpreter.base import ReplicatedTemplateKind

REPLICA_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


class ReplicaSetInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "ReplicaSet"
    replica_fields = REPLICA_FIELDS
    kept_at_zero = frozenset({"replicas"})
    any_true_conditions = frozenset({"ReplicaFailure"})

