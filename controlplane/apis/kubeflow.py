"""The Kubeflow training jobs gpufed knows (``kubeflow.org``), one row each: where the job keeps
its replica specs, its roles in Kueue's order, which role's success ends it, the pods' operator
label and the operator's defaults. Pure constants.

The rows follow the training operator's ``kubeflow.org/v1`` types (``<kind>Spec.<field>``,
the ``<Kind>ReplicaType*`` constants, ``<Kind>DefaultRestartPolicy``), the MPI operator's for
MPIJob (``v1`` and ``v2beta1`` alike), and Kueue's Kubeflow integrations (``OrderedReplicaTypes``: the Workload's pod sets come
in this order, one per role the job has, named after the role in lower case).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

GROUP: Final = "kubeflow.org"


@dataclass(frozen=True, slots=True)
class TrainingKind:
    kind: str
    #: The ``spec`` field mapping each role to its ReplicaSpec (``replicas``, ``template``, ``restartPolicy``).
    specs_field: str
    #: The roles, in the order of Kueue's pod sets (``OrderedReplicaTypes``).
    roles: tuple[str, ...]
    #: The roles whose success ends the job, the first the job has counting (TFJob's Chief, else
    #: its Master); none of them: the job succeeds when all its workers have.
    chiefs: tuple[str, ...]
    #: The ``training.kubeflow.org/operator-name`` label the operator puts on the job's pods.
    operator: str
    #: The ReplicaSpec ``restartPolicy`` when a role sets none (``<Kind>DefaultRestartPolicy``).
    default_restart_policy: str
    #: What the operator's CRD says the kind is (the hub's OpenAPI description).
    description: str = ""
    #: Whether a job without a chief role succeeds when its worker 0 has (TFJob's default
    #: ``spec.successPolicy``; ``AllWorkers`` waits for all of them, as the other kinds do).
    worker0_ends: bool = False
    #: The role that grows or shrinks when the job is given another total of pods; the others are fixed.
    worker: str = "Worker"
    #: Whether the operator's CRD serves ``/scale`` over the worker role (its ``specReplicasPath``
    #: ``.spec.<specs_field>.Worker.replicas``, ``statusReplicasPath``
    #: ``.status.replicaStatuses.Worker.active``, ``labelSelectorPath``
    #: ``.status.replicaStatuses.Worker.selector``): PyTorchJob, PaddleJob and JAXJob.
    scalable: bool = False

    @property
    def plural(self) -> str:
        """The resource name (``pytorchjobs``)."""
        return self.kind.lower() + "s"


TRAINING_KINDS: Final[dict[str, TrainingKind]] = {
    row.kind: row
    for row in (
        TrainingKind("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker"), ("Master",),
                     "pytorchjob-controller", "OnFailure",
                     "PyTorchJob represents a distributed PyTorch training job (Kubeflow).", scalable=True),
        TrainingKind("TFJob", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator"), ("Chief", "Master"),
                     "tfjob-controller", "Never",
                     "TFJob represents a distributed TensorFlow training job (Kubeflow).", worker0_ends=True),
        TrainingKind("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker"), ("Master",),
                     "xgboostjob-controller", "Never",
                     "XGBoostJob represents a distributed XGBoost training job (Kubeflow)."),
        TrainingKind("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker"), ("Master",),
                     "paddlejob-controller", "OnFailure",
                     "PaddleJob represents a distributed PaddlePaddle training job (Kubeflow).", scalable=True),
        TrainingKind("JAXJob", "jaxReplicaSpecs", ("Worker",), (), "jaxjob-controller", "Never",
                     "JAXJob represents a distributed JAX training job (Kubeflow).", scalable=True),
        # The MPI operator (v2beta1) restarts its launcher on failure unless told otherwise.
        TrainingKind("MPIJob", "mpiReplicaSpecs", ("Launcher", "Worker"), ("Launcher",),
                     "mpijob-controller", "OnFailure",
                     "MPIJob represents an MPI (Horovod, DeepSpeed, ...) training job (Kubeflow)."),
    )
}


def ordered_roles(training: TrainingKind, present: list[str]) -> list[str]:
    """The roles a job has (``present``, its replica specs' keys) in Kueue's order; a role the
    kind does not name comes after them, in the job's order."""
    known = [role for role in training.roles if role in present]
    return known + [role for role in present if role not in training.roles]


def chief_of(training: TrainingKind, present: list[str] | dict[str, object]) -> str | None:
    """The role whose success ends this job: the kind's first chief role the job has, else None."""
    return next((role for role in training.chiefs if role in present), None)
