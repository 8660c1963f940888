"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): ``spec.replicas`` groups, each one leader
pod and ``size - 1`` worker pods (``spec.leaderWorkerTemplate``; the leader's template defaults
to the workers' one).

The pods of a group serve one model shard set together, so a group never spans clusters. gpufed
places the whole LeaderWorkerSet as a gang (every group in one cluster), with two roles:
``leader`` (one pod per group) and ``worker`` (``size - 1`` per group). Asked for another total
(a policy that turns the gang off), a share keeps whole groups: ``replicas`` becomes the number
of groups the pods hold. The hub's status sums the members' group counts and merges their
conditions (Available, Progressing; UpdateInProgress True when any member says so).
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import (
    Component,
    GangOfRoles,
    Health,
    MemberStatuses,
    TemplateSlot,
    put_conditions,
    reported,
    sum_fields,
)
from controlplane.interpreter.health import conditions_of, spec_of, status_of
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

GROUP_FIELDS = ("replicas", "readyReplicas", "updatedReplicas")


def _template(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    value = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    return value if isinstance(value, dict) else {}


class LeaderWorkerSetInterpreter(GangOfRoles):
    group = "leaderworkerset.x-k8s.io"
    kind = "LeaderWorkerSet"

    def groups(self, obj: Obj) -> int:
        return as_int((obj.get("spec") or {}).get("replicas"), 1)

    def size(self, obj: Obj) -> int:
        return max(1, as_int(_template(obj).get("size"), 1))

    def template_slots(self, obj: Obj) -> list[TemplateSlot]:
        template = _template(obj)
        return [(template, key) for key in ("leaderTemplate", "workerTemplate") if key in template]

    def _leader_template(self, obj: Obj) -> Any:
        template = _template(obj)
        return template.get("leaderTemplate") or template.get("workerTemplate")

    def components(self, obj: Obj) -> list[Component]:
        groups, size = self.groups(obj), self.size(obj)
        out = [Component("leader", groups, requirements(self._leader_template(obj)))]
        if size > 1:
            out.append(Component("worker", groups * (size - 1), requirements(_template(obj).get("workerTemplate"))))
        return out

    def replicas(self, obj: Obj) -> int:
        return self.groups(obj) * self.size(obj)

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        return requirements(_template(obj).get("workerTemplate"))

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        out = copy.deepcopy(obj)
        if replicas != self.replicas(obj):
            out.setdefault("spec", {})["replicas"] = replicas // self.size(obj)
        return out

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        out: Obj = dict(sum_fields(present, GROUP_FIELDS))
        selectors = {str(s["hpaPodSelector"]) for s in present if s.get("hpaPodSelector")}
        if len(selectors) == 1:
            out["hpaPodSelector"] = selectors.pop()
        put_conditions(out, member_statuses, any_true=frozenset({"UpdateInProgress"}), metav1=True)
        return out

    def health_of(self, observed: Obj) -> Health:
        """Unknown without a status; by the ``Available`` condition when it is True or False;
        else Healthy once ``spec.replicas`` groups (default 1; without the spec, the groups the
        status counts) are ready."""
        status = status_of(observed)
        if not status:
            return Health.UNKNOWN
        available = conditions_of(status).get("Available")
        if available in ("True", "False"):
            return Health.HEALTHY if available == "True" else Health.UNHEALTHY
        spec = spec_of(observed)
        groups = as_int(spec.get("replicas"), 1) if spec is not None else as_int(status.get("replicas"))
        return Health.HEALTHY if as_int(status.get("readyReplicas")) >= groups else Health.UNHEALTHY
