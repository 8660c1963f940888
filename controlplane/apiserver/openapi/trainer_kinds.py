"""Schemas of Kubeflow Trainer's kinds (``trainer.kubeflow.org/v1alpha1``), stored without a
model: TrainJob, TrainingRuntime and ClusterTrainingRuntime.

As in :mod:`.sigs_kinds`, these describe the fields users set and gpufed reads, in the trainer's
own terms, with the embedded types by reference as the CRDs embed them: a runtime's template
holds a JobSet's spec (:mod:`.sigs_kinds`' ``JobSetSpec``), a trainer's resources per node kube's
``ResourceRequirements``, its env kube's ``EnvVar``. Unlisted fields are kept
(``x-kubernetes-preserve-unknown-fields``), as the trainer's newer fields must be.

Everything is in kube's OpenAPI v2 dialect, keyed by definition name. Pure: constants.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis import trainer
from controlplane.apiserver.openapi.extra_kinds import (
    CONDITION,
    array_of,
    int32,
    kind_definition,
    object_of,
    ref,
    scalar,
)
from controlplane.apiserver.openapi.models import type_meta_properties
from controlplane.apiserver.openapi.sigs_kinds import JOBSET_DEFINITIONS
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META, reachable

_PREFIX = "org.kubeflow.trainer.v1alpha1."
_JOBSET_SPEC = "io.x-k8s.jobset.v1alpha2.JobSetSpec"
_ENV = {"$ref": DEFINITIONS_PREFIX + "io.k8s.api.core.v1.EnvVar"}

_DEFINITIONS: dict[str, Any] = {
    _PREFIX + "TrainJobSpec": object_of("TrainJobSpec represents specification of the desired TrainJob.", {
        "runtimeRef": object_of("runtimeRef is the reference to the training runtime (immutable).", {
            "name": scalar("name of the runtime being referenced. A TrainingRuntime must be in the TrainJob's namespace."),
            "apiGroup": scalar("apiGroup of the runtime being referenced. Defaults to `trainer.kubeflow.org`."),
            "kind": scalar("kind of the runtime being referenced. Defaults to ClusterTrainingRuntime."),
        }),
        "initializer": object_of("initializer defines the configuration of the dataset and model initialization.", {
            "dataset": object_of("dataset defines the configuration for the dataset initialization.", {}),
            "model": object_of("model defines the configuration for the pre-trained model initialization.", {}),
        }),
        "trainer": ref(_PREFIX + "Trainer", "trainer defines the configuration of the trainer (immutable)."),
        "runtimePatches": array_of("runtimePatches defines custom patches applied to the TrainJob's runtime, keyed by manager.",
                                   object_of("RuntimePatch is one manager's patch of the runtime template.", {
                                       "manager": scalar("manager indicates who owns this patch entry."),
                                   })),
        "suspend": scalar("suspend defines whether to suspend the running TrainJob. Defaults to false.", "boolean"),
        "activeDeadlineSeconds": scalar("activeDeadlineSeconds is how long the TrainJob may be active before it is "
                                        "terminated (Failed, DeadlineExceeded).", "integer", format="int64"),
        "managedBy": scalar("managedBy is the controller that manages the TrainJob: "
                            "`trainer.kubeflow.org/trainjob-controller` (the default) or `kueue.x-k8s.io/multikueue`."),
    }),
    _PREFIX + "Trainer": object_of("Trainer overrides the runtime template's trainer node (`trainer.kubeflow.org/"
                                   "trainjob-ancestor-step: trainer`).", {
        "image": scalar("image is the container image for the training container."),
        "command": array_of("command for the entrypoint of the training container.", {"type": "string"}),
        "args": array_of("args for the entrypoint of the training container.", {"type": "string"}),
        "env": array_of("env is the list of environment variables to set in the training container.", _ENV),
        "numNodes": int32("numNodes is the number of training nodes."),
        "resourcesPerNode": ref("io.k8s.api.core.v1.ResourceRequirements",
                                "resourcesPerNode defines the compute resources for each training node."),
        "numProcPerNode": int32("numProcPerNode is the number of processes/workers/slots on every training node."),
    }),
    _PREFIX + "TrainJobStatus": object_of("TrainJobStatus represents the current status of TrainJob.", {
        "conditions": array_of("conditions for the TrainJob: Suspended, Complete, Failed.",
                               {"$ref": DEFINITIONS_PREFIX + CONDITION}),
        "jobsStatus": array_of("jobsStatus tracks the child Jobs in TrainJob.", object_of("JobStatus counts one child Job's.", {
            "name": scalar("name of the child Job."),
            **{count: int32(f"{count} is the number of child Jobs {what}.") for count, what in (
                ("ready", "whose ready and completed pods reach the expected count"),
                ("succeeded", "that completed successfully"),
                ("failed", "that failed"),
                ("active", "with at least 1 pod running or pending"),
                ("suspended", "that are suspended"),
            )},
        })),
    }),
    _PREFIX + "TrainingRuntimeSpec": object_of("TrainingRuntimeSpec represents a specification of the desired training runtime.", {
        "mlPolicy": object_of("mlPolicy provides the ML-specific parameters for the model training.", {
            "numNodes": int32("numNodes is the number of training nodes. Defaults to 1."),
            "torch": object_of("torch defines the configuration for the PyTorch runtime.", {}),
            "mpi": object_of("mpi defines the configuration for the MPI runtime.", {}),
        }),
        "podGroupPolicy": object_of("podGroupPolicy configures the PodGroup for gang-scheduling.", {}),
        "template": object_of("template for the JobSet which will be used by TrainJob.", {
            "metadata": ref(OBJECT_META, "metadata for custom JobSet's labels and annotations."),
            "spec": ref(_JOBSET_SPEC, "spec of the desired JobSet which will be created from TrainJob."),
        }),
    }),
}


def _runtime_definition(kind: str, description: str) -> dict[str, Any]:
    return {"description": description, "type": "object", "properties": {
        **type_meta_properties(),
        "spec": ref(_PREFIX + "TrainingRuntimeSpec", f"spec of the {kind}."),
    }}


def trainer_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions (the kind's and its parts') of a trainer kind."""
    if (group, version) != (trainer.GROUP, trainer.VERSION):
        return None
    if kind == trainer.TRAIN_JOB:
        schema = kind_definition(kind, _PREFIX, "TrainJob represents configuration of a training job (Kubeflow Trainer).")
    elif kind == trainer.TRAINING_RUNTIME:
        schema = _runtime_definition(kind, "TrainingRuntime represents a training runtime a TrainJob of its namespace "
                                           "can reference in `runtimeRef` (Kubeflow Trainer).")
    elif kind == trainer.CLUSTER_TRAINING_RUNTIME:
        schema = _runtime_definition(kind, "ClusterTrainingRuntime represents a training runtime a TrainJob of any "
                                           "namespace can reference in `runtimeRef` (Kubeflow Trainer).")
    else:
        return None
    return _PREFIX + kind, {_PREFIX + kind: schema, **reachable([schema], {**_DEFINITIONS, **JOBSET_DEFINITIONS})}
