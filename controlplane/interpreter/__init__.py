"""Per-kind workload knowledge: replicas, requirements, per-cluster shares, status, health.

Use :func:`interpreter_for` to get the :class:`KindInterpreter` of an object's kind, and
:func:`judge_health` for a member object's health by its kind's rule.
"""

from controlplane.interpreter.base import (
    Component,
    FinishedPhase,
    Health,
    KindInterpreter,
    MemberStatuses,
    keep_finished,
    stamp_finish,
)
from controlplane.interpreter.dependencies import Dependency, DependencyKind
from controlplane.interpreter.registry import (
    health_rule_for,
    interpreter_for,
    judge_health,
    register,
    registered_kinds,
)
from controlplane.interpreter.requirements import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ReplicaRequirements,
    requirements,
    set_gpu_request,
)

__all__ = [
    "Component",
    "Dependency",
    "DependencyKind",
    "FinishedPhase",
    "Health",
    "KindInterpreter",
    "MemberStatuses",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ReplicaRequirements",
    "health_rule_for",
    "interpreter_for",
    "judge_health",
    "keep_finished",
    "register",
    "registered_kinds",
    "requirements",
    "set_gpu_request",
    "stamp_finish",
]
