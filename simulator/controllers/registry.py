"""Which controller reconciles which workload kind of the simulated member.

In: a workload's (apiVersion, kind); out: its :class:`Controller`, the reconcile function
and the (apiVersion, kind) of its children. Each kind's children are pods, except a
Deployment's, which are ReplicaSets. A TrainJob's reconcile also reads its runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.trainer import API_VERSION as TRAINER_API_VERSION
from controlplane.apis.trainer import TRAIN_JOB, runtime_ref
from simulator.controllers.base import Changes
from simulator.controllers.deployment import reconcile_deployment
from simulator.controllers.job import reconcile_job
from simulator.controllers.kubeflow import reconcile_kubeflow_job
from simulator.controllers.raycluster import reconcile_raycluster
from simulator.controllers.rayjob import reconcile_rayjob
from simulator.controllers.replicaset import reconcile_replicaset
from simulator.controllers.statefulset import reconcile_statefulset
from simulator.controllers.trainjob import reconcile_trainjob

Reconcile = Callable[..., Changes]

POD: Final = ("v1", "Pod")
REPLICASET: Final = ("apps/v1", "ReplicaSet")


@dataclass(frozen=True, slots=True)
class Read:
    """Another object a reconcile reads, passed to it as the keyword ``keyword``."""

    keyword: str
    api_version: str
    kind: str
    namespace: str | None
    name: str


@dataclass(frozen=True, slots=True)
class Controller:
    """How one workload kind is reconciled: the function, the (apiVersion, kind) of its children
    and, for a kind that reads another object, which one (``reads``; until it exists the owner
    waits and is synced again after a backoff)."""

    reconcile: Reconcile
    child: tuple[str, str] = POD
    reads: Callable[[Mapping[str, Any]], Read] | None = None


def trainjob_runtime(trainjob: Mapping[str, Any]) -> Read:
    """The runtime a TrainJob names, which the trainer resolves to build its Jobs."""
    ref = runtime_ref(dict(trainjob))
    namespace = None if ref.cluster_scoped else (trainjob.get("metadata") or {}).get("namespace")
    return Read("runtime", f"{ref.api_group}/v1alpha1", ref.kind, namespace, ref.name)


#: (apiVersion, kind) -> its controller.
CONTROLLERS: Final[dict[tuple[str, str], Controller]] = {
    ("apps/v1", "Deployment"): Controller(reconcile_deployment, REPLICASET),
    REPLICASET: Controller(reconcile_replicaset),
    ("apps/v1", "StatefulSet"): Controller(reconcile_statefulset),
    ("batch/v1", "Job"): Controller(reconcile_job),
    **{(f"{KUBEFLOW_GROUP}/v1", kind): Controller(reconcile_kubeflow_job) for kind in TRAINING_KINDS},
    ("ray.io/v1", "RayCluster"): Controller(reconcile_raycluster),
    ("ray.io/v1", "RayJob"): Controller(reconcile_rayjob),
    (TRAINER_API_VERSION, TRAIN_JOB): Controller(reconcile_trainjob, reads=trainjob_runtime),
}
