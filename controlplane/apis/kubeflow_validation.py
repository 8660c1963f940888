"""The training operator's validating webhooks for its ``kubeflow.org/v1`` jobs (PyTorchJob, TFJob,
XGBoostJob, PaddleJob, JAXJob), as the hub answers a create or update of one. Pure functions.

Each webhook (``validator.<kind>.training-operator.kubeflow.org``) checks the job as written, before
any default (the operator defaults a job in memory when it reconciles it, not in a mutating webhook,
so a stored job keeps what its author wrote): the name a DNS-1035 label, replica specs present,
each role one the kind knows, each role's template with containers, each container an image, one
container of the kind's name; PyTorchJob and XGBoostJob: the Master's ``replicas`` exactly 1,
XGBoostJob a Master at all, TFJob at most one Chief or Master role, PyTorchJob's elastic policy a
Worker role and not both ``nProcPerNode`` fields (the elastic one alone: a deprecation warning);
the PyTorchJob, TFJob and PaddleJob webhooks a ``spec.runPolicy.managedBy`` of a controller the
operator knows, and kept by an update (``field is immutable``). The webhook returns the field errors aggregated
(``field.ErrorList.ToAggregate``), not a Status, so controller-runtime answers ``admission.Denied``:
403 Forbidden with the errors' text. The MPI operator's MPIJob has no such webhook.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import dns_1035_errors
from controlplane.apis.kubeflow import TRAINING_KINDS, TrainingKind


@dataclass(frozen=True, slots=True)
class TrainingWebhook:
    #: The webhook's name in the operator's ValidatingWebhookConfiguration.
    name: str
    #: The container each role's pod template must have (``<Kind>DefaultContainerName``).
    container: str
    #: The roles the webhook allows; empty: any (TFJob's).
    roles: tuple[str, ...]
    #: The kind's own rules after the common ones: the replica specs, their path and the spec in, errors out.
    extra: Callable[[dict[str, Any], str, dict[str, Any]], list[FieldError]] | None = None
    #: The kind's own rules checked before the replica specs (PyTorchJob's elastic policy).
    first: Callable[[dict[str, Any], str, dict[str, Any]], list[FieldError]] | None = None
    #: The webhook checks ``spec.runPolicy.managedBy`` (all but XGBoostJob's and JAXJob's).
    run_policy: bool = True


def _master_is_one(specs: dict[str, Any], path: str, _spec: dict[str, Any]) -> list[FieldError]:
    master = specs.get("Master")
    if "Master" in specs and (not isinstance(master, dict) or master.get("replicas") != 1):
        return [field.forbidden(f"{path}[Master].replicas", "must be 1")]
    return []


def _xgboost(specs: dict[str, Any], path: str, spec: dict[str, Any]) -> list[FieldError]:
    errors = _master_is_one(specs, path, spec)
    if "Master" not in specs:
        errors.append(field.required(f"{path}[Master]", "must be present"))
    return errors


def _tf(specs: dict[str, Any], path: str, _spec: dict[str, Any]) -> list[FieldError]:
    if sum(role in ("Chief", "Master") for role in specs) > 1:
        return [field.forbidden(path, "must not have more than 1 Chief or Master role")]
    return []


def _elastic(specs: dict[str, Any], path: str, spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict):
        if "Worker" not in specs:
            errors.append(field.required(f"{path}[Worker]", "must be configured if elastic policy is used"))
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            errors.append(field.forbidden("spec.elasticPolicy.nProcPerNode", "must not be used with spec.nprocPerNode"))
    return errors


WEBHOOKS: Final[dict[str, TrainingWebhook]] = {
    "PyTorchJob": TrainingWebhook("validator.pytorchjob.training-operator.kubeflow.org", "pytorch",
                                  ("Master", "Worker"), _master_is_one, _elastic),
    "TFJob": TrainingWebhook("validator.tfjob.training-operator.kubeflow.org", "tensorflow", (), _tf),
    "XGBoostJob": TrainingWebhook("validator.xgboostjob.training-operator.kubeflow.org", "xgboost",
                                  ("Master", "Worker"), _xgboost, run_policy=False),
    "PaddleJob": TrainingWebhook("validator.paddlejob.training-operator.kubeflow.org", "paddle", ("Master", "Worker")),
    "JAXJob": TrainingWebhook("validator.jaxjob.training-operator.kubeflow.org", "jax", ("Worker",), run_policy=False),
}

#: The controllers a job's ``spec.runPolicy.managedBy`` may name (the operator's ``supportedJobControllers``).
MANAGERS: Final = ("kueue.x-k8s.io/multikueue", "kubeflow.org/training-operator")


def _replica_specs(specs: dict[str, Any], path: str, webhook: TrainingWebhook) -> list[FieldError]:
    errors: list[FieldError] = []
    for role, replica in specs.items():
        role_path = f"{path}[{role}]"
        containers_path = f"{role_path}.template.spec.containers"
        if webhook.roles and role not in webhook.roles:
            errors.append(field.not_supported(role_path, role, webhook.roles))
        template = (replica.get("template") if isinstance(replica, dict) else None) or {}
        containers = (template.get("spec") or {}).get("containers") or [] if isinstance(template, dict) else []
        if not containers:
            errors.append(field.required(containers_path, "must be specified"))
        named = False
        for index, container in enumerate(containers):
            container = container if isinstance(container, dict) else {}
            if not container.get("image"):
                errors.append(field.required(f"{containers_path}[{index}].image", "must be required"))
            named = named or container.get("name") == webhook.container
        if not named:
            errors.append(field.required(containers_path, f"must have at least one container with name {webhook.container}"))
    return errors


def _managed_by(obj: dict[str, Any]) -> Any:
    spec = obj.get("spec")
    policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    return policy.get("managedBy") if isinstance(policy, dict) else None


def training_job_errors(training: TrainingKind, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    """The operator's webhook's field errors for ``obj``, an update of ``old`` when given (none
    for a kind without a webhook)."""
    webhook = WEBHOOKS.get(training.kind)
    if webhook is None:
        return []
    metadata = obj.get("metadata")
    name = (metadata.get("name") if isinstance(metadata, dict) else None) or ""
    if not isinstance(name, str) or not isinstance(obj.get("spec") or {}, dict):
        return []  # kube's decoding or the CRD's schema refuses it before the webhook is called
    errors: list[FieldError] = []
    if name_errors := dns_1035_errors(name):
        errors.append(field.invalid("metadata.name", name, "should match: " + ",".join(name_errors)))
    if old is not None and webhook.run_policy and _managed_by(obj) != _managed_by(old):
        errors.append(field.invalid("spec.runPolicy.managedBy", _managed_by(obj), field.IMMUTABLE))
    given = obj.get("spec")
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    managed_by = _managed_by(obj)
    if webhook.run_policy and managed_by is not None and managed_by not in MANAGERS:
        errors.append(field.not_supported("spec.runPolicy.managedBy", managed_by, MANAGERS))
    path = f"spec.{training.specs_field}"
    specs = spec.get(training.specs_field)
    if not isinstance(specs, dict):
        errors.append(field.required(path, "must be required"))
        specs = {}
    if webhook.first is not None:
        errors += webhook.first(specs, path, spec)
    errors += _replica_specs(specs, path, webhook)
    if webhook.extra is not None:
        errors += webhook.extra(specs, path, spec)
    return errors


def training_job_warnings(obj: dict[str, Any]) -> list[str]:
    """The PyTorchJob webhook's warning about an allowed job: the deprecated elastic ``nProcPerNode``."""
    elastic = (obj.get("spec") or {}).get("elasticPolicy")
    if isinstance(elastic, dict) and elastic.get("nProcPerNode") is not None:
        return ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    return []


def training_job_denial(kind: str) -> Callable[[dict[str, Any]], tuple[str, str] | None] | None:
    """The operator's webhook refusing a ``kind`` job: the object → (the webhook, the errors'
    aggregated text), or None; None for a kind without a webhook."""
    update = training_job_update_denial(kind)
    return None if update is None else lambda obj: update(obj, None)


def training_job_update_denial(
    kind: str,
) -> Callable[[dict[str, Any], dict[str, Any] | None], tuple[str, str] | None] | None:
    """The operator's webhook refusing a ``kind`` job written over a stored one (None: a create):
    (the object, the stored one) → (the webhook, the errors' aggregated text), or None; None for
    a kind without a webhook."""
    webhook = WEBHOOKS.get(kind)
    if webhook is None:
        return None
    training = TRAINING_KINDS[kind]

    def denial(obj: dict[str, Any], old: dict[str, Any] | None) -> tuple[str, str] | None:
        errors = training_job_errors(training, obj, old)
        return (webhook.name, field.error_list_text(errors)) if errors else None

    return denial
