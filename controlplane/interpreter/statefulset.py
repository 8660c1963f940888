"""StatefulSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

Each member runs its share with ordinals 0..share-1, so pod names repeat across
clusters; that is how Karmada divides StatefulSets too. Status counts are summed. A member's copy
is healthy when its ``spec.replicas`` are ready and updated, at the current generation.
"""

from __future__ import annotations

from controlplane.interpreter.base import ReplicatedTemplateKind

REPLICA_FIELDS = ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")


class StatefulSetInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "StatefulSet"
    replica_fields = REPLICA_FIELDS
    kept_at_zero = frozenset({"replicas", "availableReplicas"})

