"""Pod (v1): one replica, its requests those of its own spec; never a gang.

As Karmada's native interpreter (``podReplica``): a Pod is one replica, so a ``Divided`` policy
places it in one cluster, and a ``Duplicated`` one runs a copy in each. A cluster's share is the
Pod as it is: a Pod cannot run fewer or more of itself. Its hub status is folded from the members'
copies as Karmada's ``aggregatePodStatus`` does (:class:`~controlplane.interpreter.native.PodStatus`);
it is finished once that status is Succeeded or Failed (a Pod with ``restartPolicy: Always`` never
is).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import Obj
from controlplane.interpreter.base import Component, FinishedPhase, Health, MemberStatuses
from controlplane.interpreter.dependencies import Dependency, pod_template_dependencies, sorted_dependencies
from controlplane.interpreter.native import PodStatus, pod_health
from controlplane.interpreter.requirements import ReplicaRequirements, requirements, set_gpu_request

_FINISHED = {"Succeeded": FinishedPhase.SUCCEEDED, "Failed": FinishedPhase.FAILED}


class PodInterpreter:
    group = ""
    kind = "Pod"

    def replicas(self, obj: Obj) -> int:
        return 1

    def components(self, obj: Obj) -> list[Component]:
        return []

    def replica_requirements(self, obj: Obj) -> ReplicaRequirements:
        return requirements(obj)

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        return copy.deepcopy(obj)

    def is_gang(self, obj: Obj) -> bool:
        return False

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        return PodStatus().aggregate_status(obj, member_statuses)

    def health_of(self, observed: Obj) -> Health:
        return pod_health(observed)

    def health(self, status: Mapping[str, Any] | None) -> Health:
        return Health.UNKNOWN if status is None else pod_health({"kind": self.kind, "status": status})

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return _FINISHED.get(str((status or {}).get("phase")))

    def between_runs(self, status: Mapping[str, Any] | None) -> bool:
        return False

    def with_gpu_request(self, obj: Obj, resources: Mapping[str, int | str]) -> Obj:
        return set_gpu_request(obj, resources)

    def dependencies(self, obj: Obj) -> list[Dependency]:
        return sorted_dependencies(pod_template_dependencies(obj))
