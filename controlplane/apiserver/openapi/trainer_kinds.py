"""Schemas of Kubeflow Trainer's kinds (``trainer.kubeflow.org/v1alpha1``), stored without a
model: TrainJob, TrainingRuntime and ClusterTrainingRuntime.

As in :mod:`.sigs_kinds`, these declare every field of the CRDs' ``spec`` and ``status``, in the
trainer's own terms, with the embedded types by reference as the CRDs embed them: a runtime's
template holds a JobSet's spec (:mod:`.sigs_kinds`' ``JobSetSpec``), a trainer's resources per
node kube's ``ResourceRequirements``, its env kube's ``EnvVar``, a runtime patch's pod fields
kube's volumes, affinity, tolerations... Nothing else is kept: an undeclared field is dropped, or
refused under ``fieldValidation=Strict``, as the CRDs prune it.

Everything is in kube's OpenAPI v2 dialect, keyed by definition name. Pure: constants.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis import trainer
from controlplane.apiserver.openapi.extra_kinds import (
    CONDITION,
    array_of,
    checked,
    int32,
    kind_definition,
    map_of,
    ref,
    ruled,
    scalar,
    struct,
)
from controlplane.apiserver.openapi.models import type_meta_properties
from controlplane.apiserver.openapi.sigs_kinds import JOBSET_DEFINITIONS
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META, reachable

_PREFIX = "org.kubeflow.trainer.v1alpha1."
_JOBSET_SPEC = "io.x-k8s.jobset.v1alpha2.JobSetSpec"
_ENV = {"$ref": DEFINITIONS_PREFIX + "io.k8s.api.core.v1.EnvVar"}
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"

_CORE = "io.k8s.api.core.v1."
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
#: The CRDs' bound on a name-like string (``+kubebuilder:validation:MinLength=1``, ``MaxLength=253``).
_NAME = {"minLength": 1, "maxLength": 253}


def _list_of(description: str, core_type: str, most: int) -> dict[str, Any]:
    return checked(array_of(description, {"$ref": DEFINITIONS_PREFIX + _CORE + core_type}), maxItems=most)


def _map_list(key: str) -> dict[str, Any]:
    """A list whose items are keyed by ``key`` (``+listType=map``, ``+listMapKey``): an update's item
    is the stored item with the same key, for the CRD's transition rules below it."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]}


def _env(description: str) -> dict[str, Any]:
    return checked(array_of(description, _ENV), maxItems=128)


def _strings(description: str) -> dict[str, Any]:
    """A command's or its arguments' list, as the CRD bounds it."""
    return checked(array_of(description, {"type": "string", "maxLength": 65536}), maxItems=128)


def _initializer(what: str) -> dict[str, Any]:
    return struct(f"{what.capitalize()}Initializer configures the {what} initializer's Job of the runtime.", {
        "storageUri": checked(scalar(f"storageUri is the URI of the {what} provider."), maxLength=2048,
                              **({"pattern": "^([A-Za-z][A-Za-z0-9+.-]*://.+|/.*)$"} if what == "dataset" else {})),
        "env": _env(f"env is merged with the runtime's {what} initializer environment."),
        "secretRef": ref(_CORE + "LocalObjectReference",
                         f"secretRef names the Secret (in the TrainJob's namespace) with the credentials to download the {what}."),
    })


_CONTAINER_PATCH = struct("ContainerPatch patches one container of the runtime's Pod template, by name.", {
    "name": checked(scalar("name of the container; the runtime must have it."), **_NAME),
    "env": _env("env is merged with the container's environment."),
    "volumeMounts": _list_of("volumeMounts are the volumes mounted into the container.", "VolumeMount", 128),
    "securityContext": ref(_CORE + "SecurityContext", "securityContext patches the container's security context."),
}, required=("name",))

#: The trainer's rule of a field kept as created (a transition rule: it runs on an update whose old
#: object has the field too).
_KEPT: Final = ("self == oldSelf", "field is immutable")

_DEFINITIONS: dict[str, Any] = {
    _PREFIX + "TrainJobSpec": struct("TrainJobSpec represents specification of the desired TrainJob.", {
        "runtimeRef": ruled(struct("runtimeRef is the reference to the training runtime (immutable).", {
            "name": checked(scalar("name of the runtime being referenced. A TrainingRuntime must be in the TrainJob's "
                                   "namespace."), **_NAME),
            "apiGroup": checked(scalar("apiGroup of the runtime being referenced. Defaults to `trainer.kubeflow.org`."),
                                default=trainer.GROUP, maxLength=253),
            "kind": checked(scalar("kind of the runtime being referenced. Defaults to ClusterTrainingRuntime."),
                            default=trainer.CLUSTER_TRAINING_RUNTIME, maxLength=253),
        }, required=("name",)), _KEPT),
        "initializer": ruled(struct("initializer defines the configuration of the dataset and model initialization.", {
            "dataset": _initializer("dataset"),
            "model": _initializer("model"),
        }), _KEPT),
        "trainer": ruled(ref(_PREFIX + "Trainer", "trainer defines the configuration of the trainer (immutable)."), _KEPT),
        "runtimePatches": checked(array_of(
            "runtimePatches defines custom patches applied to the TrainJob's runtime, keyed by manager.",
            {"$ref": DEFINITIONS_PREFIX + _PREFIX + "RuntimePatch"}), maxItems=16, **_map_list("manager")),
        "suspend": scalar("suspend defines whether to suspend the running TrainJob. Defaults to false.", "boolean", default=False),
        "activeDeadlineSeconds": ruled(scalar("activeDeadlineSeconds is how long the TrainJob may be active before it is "
                                              "terminated (Failed, DeadlineExceeded).", "integer", format="int64", minimum=1),
                                       _KEPT),
        "managedBy": ruled(scalar("managedBy is the controller that manages the TrainJob: "
                                  "`trainer.kubeflow.org/trainjob-controller` (the default) or `kueue.x-k8s.io/multikueue`.",
                                  default=trainer.DEFAULT_MANAGED_BY, maxLength=253), (
            f"self in ['{trainer.DEFAULT_MANAGED_BY}', '{trainer.MULTIKUEUE_MANAGED_BY}']",
            f"ManagedBy must be {trainer.DEFAULT_MANAGED_BY} or {trainer.MULTIKUEUE_MANAGED_BY} if set",
        ), _KEPT),
    }, required=("runtimeRef",)),
    _PREFIX + "Trainer": struct("Trainer overrides the runtime template's trainer node (`trainer.kubeflow.org/"
                                "trainjob-ancestor-step: trainer`).", {
        "image": scalar("image is the container image for the training container.", maxLength=500),
        "command": _strings("command for the entrypoint of the training container."),
        "args": _strings("args for the entrypoint of the training container."),
        "env": _env("env is the list of environment variables to set in the training container."),
        "numNodes": int32("numNodes is the number of training nodes."),
        "resourcesPerNode": ref(_CORE + "ResourceRequirements",
                                "resourcesPerNode defines the compute resources for each training node."),
        "numProcPerNode": int32("numProcPerNode is the number of processes/workers/slots on every training node."),
    }),
    _PREFIX + "RuntimePatch": struct("RuntimePatch is one manager's patch of the runtime's template.", {
        "manager": ruled(checked(scalar("manager indicates who owns this patch entry (Kueue's: `kueue.x-k8s.io/manager`)."),
                                 **_NAME), _KEPT),
        "time": ref(_TIME, "time is when the patch was last written (set by the trainer's webhook)."),
        "trainingRuntimeSpec": struct("trainingRuntimeSpec patches a TrainingRuntime or ClusterTrainingRuntime's spec.", {
            "template": struct("template patches the JobSet template.", {
                "metadata": ref(OBJECT_META, "metadata patches the JobSet's labels and annotations."),
                "spec": struct("spec patches the JobSet's spec.", {
                    "replicatedJobs": checked(array_of("replicatedJobs patches replicated jobs, by name.", struct(
                        "ReplicatedJobPatch patches one replicated job.", {
                            "name": checked(scalar("name of the replicated job to patch."), pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                            **_NAME),
                            "template": struct("template patches the replicated job's Job template.", {
                                "metadata": ref(OBJECT_META, "metadata patches the Job template's labels and annotations."),
                                "spec": struct("spec patches the Job's spec.", {
                                    "template": struct("template patches the Job's Pod template.", {
                                        "metadata": ref(OBJECT_META, "metadata patches the Pod template's labels and annotations."),
                                        "spec": ref(_PREFIX + "PodSpecPatch", "spec patches the Pod spec."),
                                    }),
                                }),
                            }),
                        }, required=("name",))), maxItems=100, **_map_list("name")),
                }),
            }),
        }),
    }, required=("manager",)),
    _PREFIX + "PodSpecPatch": struct("PodSpecPatch holds the Pod spec fields a manager may patch.", {
        "serviceAccountName": ruled(scalar("serviceAccountName patches the Pods' service account.", maxLength=253), _KEPT),
        "volumes": ruled(_list_of("volumes patches the Pods' volumes.", "Volume", 128), _KEPT),
        "initContainers": ruled(checked(array_of("initContainers patches init containers, by name.", _CONTAINER_PATCH),
                                        maxItems=64), _KEPT),
        "containers": ruled(checked(array_of("containers patches containers, by name.", _CONTAINER_PATCH), maxItems=64), _KEPT),
        "imagePullSecrets": ruled(_list_of("imagePullSecrets patches the Pods' image pull secrets.", "LocalObjectReference", 64),
                                  _KEPT),
        "securityContext": ruled(ref(_CORE + "PodSecurityContext", "securityContext patches the Pods' security context."), _KEPT),
        "nodeSelector": map_of("nodeSelector patches the Pods' node selector.", {"type": "string"}),
        "affinity": ref(_CORE + "Affinity", "affinity patches the Pods' scheduling affinity."),
        "tolerations": _list_of("tolerations patches the Pods' tolerations.", "Toleration", 128),
        "schedulingGates": _list_of("schedulingGates patches the Pods' scheduling gates.", "PodSchedulingGate", 16),
    }),
    _PREFIX + "TrainJobStatus": checked(struct("TrainJobStatus represents the current status of TrainJob.", {
        "conditions": checked(array_of("conditions for the TrainJob: Suspended, Complete, Failed.",
                                       {"$ref": DEFINITIONS_PREFIX + CONDITION}), maxItems=8),
        "jobsStatus": checked(array_of("jobsStatus tracks the child Jobs in TrainJob.", struct("JobStatus counts one child Job's.", {
            "name": checked(scalar("name of the child Job."), **_NAME),
            **{count: checked(int32(f"{count} is the number of child Jobs {what}."), minimum=0) for count, what in (
                ("ready", "whose ready and completed pods reach the expected count"),
                ("succeeded", "that completed successfully"),
                ("failed", "that failed"),
                ("active", "with at least 1 pod running or pending"),
                ("suspended", "that are suspended"),
            )},
        }, required=("active", "failed", "name", "ready", "succeeded", "suspended"))), maxItems=100),
        "trainerStatus": ruled(struct("trainerStatus is the trainer step's latest reported progress (alpha).", {
            "progressPercentage": checked(int32("progressPercentage estimates how complete the TrainJob is, 0 to 100."),
                                          minimum=0, maximum=100),
            "estimatedRemainingSeconds": checked(int32("estimatedRemainingSeconds estimates the training time left."), minimum=0),
            "metrics": checked(array_of("metrics are the model's current metrics.", struct("One metric.", {
                "name": checked(scalar("name of the metric (loss, eval_accuracy, ...)."), minLength=1, maxLength=64),
                "value": checked(scalar("value of the metric, as a string."), minLength=1, maxLength=64),
            }, required=("name", "value"))), maxItems=256),
            "lastUpdatedTime": ref(_TIME, "lastUpdatedTime is when the status was observed."),
        }), ("has(self.lastUpdatedTime)", "lastUpdatedTime is required when trainerStatus is present")),
    }), minProperties=1),
    _PREFIX + "TrainingRuntimeSpec": checked(struct("TrainingRuntimeSpec represents a specification of the desired training runtime.", {
        "mlPolicy": ruled(struct("mlPolicy provides the ML-specific parameters for the model training.", {
            "numNodes": int32("numNodes is the number of training nodes. Defaults to 1."),
            "torch": struct("torch defines the configuration for the PyTorch runtime.", {
                "numProcPerNode": ruled(checked(ref(_INT_OR_STRING, "numProcPerNode is torchrun's --nproc-per-node: auto, cpu, "
                                                                    "gpu or a number. Defaults to auto."), default="auto"), (
                    "self > 0 || self in ['auto', 'cpu', 'gpu']",
                    "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
                )),
            }),
            "mpi": struct("mpi defines the configuration for the MPI runtime.", {
                "numProcPerNode": checked(int32("numProcPerNode is the number of slots of each node in the hostfile. "
                                                "Defaults to 1."), default=1),
                "mpiImplementation": scalar("mpiImplementation is the MPI implementation the hostfile is written for: OpenMPI.",
                                            enum=["OpenMPI", ""], default="OpenMPI"),
                "sshAuthMountPath": scalar("sshAuthMountPath is the directory the SSH keys are mounted at. Defaults to /root/.ssh.",
                                           default="/root/.ssh"),
                "runLauncherAsNode": scalar("runLauncherAsNode runs a training process on the launcher Job too.", "boolean",
                                            default=False),
            }),
            "jax": struct("jax defines the configuration for the JAX runtime (no fields).", {}),
        }), ("[has(self.torch), has(self.mpi), has(self.jax)].filter(x, x).size() <= 1",
             "Only one of the policy can be configured")),
        "podGroupPolicy": struct("podGroupPolicy configures the PodGroup for gang-scheduling, by one plugin.", {
            "coscheduling": struct("coscheduling configures the scheduler-plugins' coscheduling plugin.", {
                "scheduleTimeoutSeconds": checked(int32("scheduleTimeoutSeconds bounds how long the PodGroup may wait to be "
                                                        "scheduled. Defaults to 60."), default=60),
            }),
            "volcano": struct("volcano configures the Volcano gang-scheduler.", {
                "networkTopology": struct("networkTopology places the pods by Volcano's HyperNode network topology.", {
                    "mode": scalar("mode of the network topology constraint: hard or soft."),
                    "highestTierAllowed": scalar("highestTierAllowed is the highest tier a job may span.", "integer"),
                }),
            }),
        }),
        "template": checked(struct("template for the JobSet which will be used by TrainJob.", {
            "metadata": ref(OBJECT_META, "metadata for custom JobSet's labels and annotations."),
            "spec": ref(_JOBSET_SPEC, "spec of the desired JobSet which will be created from TrainJob."),
        }), minProperties=1),
    }), minProperties=1),
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
        schema = ruled(kind_definition(kind, _PREFIX, "TrainJob represents configuration of a training job (Kubeflow Trainer)."),
                       ("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
                        "metadata.name must match RFC 1035 DNS label format"),
                       ("size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters"))
    elif kind == trainer.TRAINING_RUNTIME:
        schema = _runtime_definition(kind, "TrainingRuntime represents a training runtime a TrainJob of its namespace "
                                           "can reference in `runtimeRef` (Kubeflow Trainer).")
    elif kind == trainer.CLUSTER_TRAINING_RUNTIME:
        schema = _runtime_definition(kind, "ClusterTrainingRuntime represents a training runtime a TrainJob of any "
                                           "namespace can reference in `runtimeRef` (Kubeflow Trainer).")
    else:
        return None
    return _PREFIX + kind, {_PREFIX + kind: schema, **reachable([schema], {**_DEFINITIONS, **JOBSET_DEFINITIONS})}
