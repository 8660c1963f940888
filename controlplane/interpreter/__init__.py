"""Per-kind workload knowledge: replicas, requirements, per-cluster shares, status, health.

Use :func:`interpreter_for` to get the :class:`KindInterpreter` of an object's kind.
"""

from controlplane.interpreter.base import (
    Component,
    FinishedPhase,
    Health,
    KindInterpreter,
    MemberStatuses,
    keep_finished,
)
from controlplane.interpreter.dependencies import Dependency, DependencyKind
from controlplane.interpreter.registry import interpreter_for, register, registered_kinds
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
    "interpreter_for",
    "keep_finished",
    "register",
    "registered_kinds",
    "requirements",
    "set_gpu_request",
]
