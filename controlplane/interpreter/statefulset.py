"""StatefulSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

Each member runs its share with ordinals 0..share-1, so pod names repeat across
clusters; that is how Karmada divides StatefulSets too. Status counts are summed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import as_int
from controlplane.interpreter.base import Health, ReplicatedTemplateKind

REPLICA_FIELDS = ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")


class StatefulSetInterpreter(ReplicatedTemplateKind):
    group = "apps"
    kind = "StatefulSet"
    replica_fields = REPLICA_FIELDS

    def health(self, status: Mapping[str, Any] | None) -> Health:
        if not status:
            return Health.UNKNOWN
        replicas = as_int(status.get("replicas"))
        ready = as_int(status.get("readyReplicas"))
        updated = as_int(status.get("updatedReplicas"), replicas)
        return Health.HEALTHY if ready == replicas and updated == replicas else Health.UNHEALTHY
