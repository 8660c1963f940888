"""Kubeflow Trainer's validating webhook for TrainJobs (``validator.trainjob.trainer.kubeflow.org``),
as an admission of the hub's API: it reads the store, so it is not a pure webhook rule.

In: every create and update of a TrainJob (:data:`~controlplane.apiserver.admission.AdmitWrite`),
not its status. Out: a 403 ``admission webhook "validator.trainjob.trainer.kubeflow.org" denied
the request: ...`` when its ``spec.runtimeRef`` names a kind the trainer has no runtime for
(``unsupported runtime: <Kind>.<group>``) or a TrainingRuntime (in the TrainJob's namespace) or
ClusterTrainingRuntime that is not stored, as the trainer's webhook refuses them.
"""

from __future__ import annotations

from controlplane.apis import trainer
from controlplane.apis.kube.field import error_list_text
from controlplane.apiserver import errors
from controlplane.apiserver.admission import AdmitWrite, WriteAttributes
from controlplane.apiserver.objects import ObjectStore


def _deny(message: str) -> errors.WebhookDenied:
    return errors.WebhookDenied(trainer.WEBHOOK, message, code=403, reason=errors.StatusReason.FORBIDDEN)


def trainjob_runtime_admission(objects: ObjectStore) -> AdmitWrite:
    """The webhook's check that a TrainJob's runtime exists, reading runtimes from ``objects``."""

    async def admit(attrs: WriteAttributes) -> None:
        if (attrs.resource.group, attrs.resource.kind) != (trainer.GROUP, trainer.TRAIN_JOB):
            return
        if attrs.subresource is not None or attrs.scale:
            return
        ref = trainer.runtime_ref(attrs.new)
        unsupported = trainer.unsupported_runtime(ref)
        if unsupported is not None:
            raise _deny(unsupported)
        runtime_type = objects.registry.get(trainer.GROUP, trainer.VERSION, trainer.RUNTIME_PLURALS[ref.kind])
        namespace = None if ref.cluster_scoped else attrs.new["metadata"].get("namespace")
        try:
            if runtime_type is None or not ref.name:
                raise errors.NotFound(ref.name)
            await objects.get(runtime_type, namespace=namespace, name=ref.name)
        except errors.NotFound:
            raise _deny(error_list_text([trainer.missing_runtime(ref)])) from None

    return admit
