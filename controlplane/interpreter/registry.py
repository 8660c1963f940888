"""Find the interpreter for a workload by (API group, kind).

The key ignores the version: ``kubeflow.org/v1`` and ``kubeflow.org/v2beta1`` MPIJobs
share one interpreter, as their replica specs have the same shape. Kinds without an
interpreter (ConfigMap, Service, DaemonSet, any kind the hub serves…) have no replicas:
callers treat ``None`` as "propagate the whole object to every chosen cluster" (Karmada's
default interpretation); :func:`~controlplane.interpreter.native.status_interpreter_for` says
how the hub status of some of them is folded from the members'.
"""

from __future__ import annotations

from controlplane.interpreter.base import KindInterpreter
from controlplane.interpreter.deployment import DeploymentInterpreter
from controlplane.interpreter.job import JobInterpreter
from controlplane.interpreter.jobset import JobSetInterpreter
from controlplane.interpreter.leaderworkerset import LeaderWorkerSetInterpreter
from controlplane.interpreter.mpijob import MPIJobInterpreter
from controlplane.interpreter.pytorchjob import PyTorchJobInterpreter
from controlplane.interpreter.raycluster import RayClusterInterpreter
from controlplane.interpreter.rayjob import RayJobInterpreter
from controlplane.interpreter.replicaset import ReplicaSetInterpreter
from controlplane.interpreter.statefulset import StatefulSetInterpreter

_REGISTRY: dict[tuple[str, str], KindInterpreter] = {}


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; the core group ``v1`` -> ``""``."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def register(interpreter: KindInterpreter) -> None:
    """Add (or replace) the interpreter for ``(interpreter.group, interpreter.kind)``."""
    _REGISTRY[(interpreter.group, interpreter.kind)] = interpreter


def interpreter_for(api_version: str, kind: str) -> KindInterpreter | None:
    """The interpreter for objects of ``apiVersion``/``kind``, or None when the kind has none."""
    return _REGISTRY.get((group_of(api_version), kind))


def registered_kinds() -> list[tuple[str, str]]:
    return sorted(_REGISTRY)


for _interpreter in (
    DeploymentInterpreter(),
    StatefulSetInterpreter(),
    JobInterpreter(),
    PyTorchJobInterpreter(),
    MPIJobInterpreter(),
    RayJobInterpreter(),
    RayClusterInterpreter(),
    ReplicaSetInterpreter(),
    LeaderWorkerSetInterpreter(),
    JobSetInterpreter(),
):
    register(_interpreter)
