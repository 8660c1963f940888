"""Kubeflow Trainer's kinds (``trainer.kubeflow.org/v1alpha1``): TrainJob with its ``status``
subresource, the namespaced TrainingRuntime and the cluster-scoped ClusterTrainingRuntime, with
the names, subresources and printer columns their CustomResourceDefinitions declare, each checked
by the schema the hub serves for it (:mod:`controlplane.apiserver.openapi.trainer_kinds`) as the
CRD's schema checks it. A TrainJob gets the CRD's defaults and CEL rules (in its served schema); the trainer's webhook rules that read the store are
:mod:`controlplane.apiserver.trainjobs`."""

from __future__ import annotations

from controlplane.apis import trainer
from controlplane.apiserver import columns as col
from controlplane.apiserver.openapi.structural import schema_of
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn

_CATEGORIES = ("trainer-kubeflow-org",)

TRAIN_JOB = ResourceType(
    trainer.GROUP, trainer.VERSION, trainer.TRAIN_JOB, "trainjobs", "trainjob", namespaced=True,
    categories=_CATEGORIES, has_status=True,
    columns=(TableColumn("State", col.job_state), AGE),
    crd_schema=schema_of(trainer.GROUP, trainer.VERSION, trainer.TRAIN_JOB),
)

TRAINING_RUNTIME = ResourceType(
    trainer.GROUP, trainer.VERSION, trainer.TRAINING_RUNTIME, "trainingruntimes", "trainingruntime",
    namespaced=True, categories=_CATEGORIES, columns=(AGE,),
    crd_schema=schema_of(trainer.GROUP, trainer.VERSION, trainer.TRAINING_RUNTIME),
)

CLUSTER_TRAINING_RUNTIME = ResourceType(
    trainer.GROUP, trainer.VERSION, trainer.CLUSTER_TRAINING_RUNTIME, "clustertrainingruntimes",
    "clustertrainingruntime", namespaced=False, categories=_CATEGORIES, columns=(AGE,),
    crd_schema=schema_of(trainer.GROUP, trainer.VERSION, trainer.CLUSTER_TRAINING_RUNTIME),
)
