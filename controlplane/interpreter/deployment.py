"""Deployment (apps/v1): ``spec.replicas`` pods from ``spec.template``; never a gang.

A cluster's share is the same Deployment with ``spec.replicas`` set to that share. The
hub's status sums the members' replica counts and merges their conditions (Available,
Progressing: True only when every member says so; ReplicaFailure: True when any does).
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
    condition_true,
    merge_conditions,
    sum_fields,
)
from controlplane.interpreter.requirements import Obj

REPLICA_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "unavailableReplicas")


class DeploymentInterpreter(PodTemplateKind):
    group = "apps"
    kind = "Deployment"

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
        conditions = merge_conditions(member_statuses, any_true=frozenset({"ReplicaFailure"}))
        if conditions:
            out["conditions"] = conditions
        return out

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
