"""StatefulSet (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

Each member runs its share with ordinals 0..share-1, so pod names repeat across
clusters; that is how Karmada divides StatefulSets too. Status counts are summed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.interpreter.base import (
    Health,
    MemberStatuses,
    PodTemplateKind,
    TemplateSlot,
    as_int,
    merge_conditions,
    sum_fields,
)
from controlplane.interpreter.requirements import Obj

REPLICA_FIELDS = ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")


class StatefulSetInterpreter(PodTemplateKind):
    group = "apps"
    kind = "StatefulSet"

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        spec = obj.get("spec")
        return [(spec, "template")] if isinstance(spec, dict) and "template" in spec else []

    def replicas(self, obj: Obj) -> int:
        return as_int((obj.get("spec") or {}).get("replicas"), 1)

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        out.setdefault("spec", {})["replicas"] = replicas
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = [s for _, s in member_statuses if s is not None]
        if not present:
            return {}
        out: Obj = dict(sum_fields(present, REPLICA_FIELDS))
        generation = (obj.get("metadata") or {}).get("generation")
        if generation is not None and len(present) == len(member_statuses):
            out["observedGeneration"] = generation
        conditions = merge_conditions(member_statuses)
        if conditions:
            out["conditions"] = conditions
        return out

    def health(self, status: Mapping[str, Any] | None) -> Health:
        if not status:
            return Health.UNKNOWN
        replicas = as_int(status.get("replicas"))
        ready = as_int(status.get("readyReplicas"))
        updated = as_int(status.get("updatedReplicas"), replicas)
        return Health.HEALTHY if ready == replicas and updated == replicas else Health.UNHEALTHY
