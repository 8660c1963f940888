"""Which controller reconciles which workload kind of the simulated member.

In: a workload's (apiVersion, kind); out: its :class:`Controller`, the reconcile function
and the (apiVersion, kind) of its children. Each kind's children are pods, except a
Deployment's, which are ReplicaSets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from simulator.controllers.base import Changes
from simulator.controllers.deployment import reconcile_deployment
from simulator.controllers.job import reconcile_job
from simulator.controllers.kubeflow import reconcile_kubeflow_job
from simulator.controllers.raycluster import reconcile_raycluster
from simulator.controllers.rayjob import reconcile_rayjob
from simulator.controllers.replicaset import reconcile_replicaset
from simulator.controllers.statefulset import reconcile_statefulset

Reconcile = Callable[..., Changes]

POD: Final = ("v1", "Pod")
REPLICASET: Final = ("apps/v1", "ReplicaSet")


@dataclass(frozen=True, slots=True)
class Controller:
    """How one workload kind is reconciled: the function and the (apiVersion, kind) of its children."""

    reconcile: Reconcile
    child: tuple[str, str] = POD


#: (apiVersion, kind) -> its controller.
CONTROLLERS: Final[dict[tuple[str, str], Controller]] = {
    ("apps/v1", "Deployment"): Controller(reconcile_deployment, REPLICASET),
    REPLICASET: Controller(reconcile_replicaset),
    ("apps/v1", "StatefulSet"): Controller(reconcile_statefulset),
    ("batch/v1", "Job"): Controller(reconcile_job),
    **{(f"{KUBEFLOW_GROUP}/v1", kind): Controller(reconcile_kubeflow_job) for kind in TRAINING_KINDS},
    ("ray.io/v1", "RayCluster"): Controller(reconcile_raycluster),
    ("ray.io/v1", "RayJob"): Controller(reconcile_rayjob),
}
