"""Kubeflow Trainer's ``trainer.kubeflow.org/v1alpha1`` kinds: TrainJob, TrainingRuntime
(namespaced) and ClusterTrainingRuntime (cluster-scoped). Pure functions.

A TrainJob names a runtime (``spec.runtimeRef``: its ``name``, ``apiGroup`` defaulting to
``trainer.kubeflow.org``, ``kind`` to ``ClusterTrainingRuntime``); the runtime's
``spec.template`` is a JobSet template. :func:`runtime_ref` reads the reference with the CRD's
defaults (written by the CRD's structural defaulting, from the served schema; the CRD's CEL rules
are in the served schema too, :mod:`controlplane.apiserver.openapi.trainer_kinds`), and the webhook's
rules are :func:`unsupported_runtime` (a reference to another kind: ``unsupported runtime:
<Kind>.<group>``) and :func:`missing_runtime` (the runtime not stored: ``spec.RuntimeRef: Invalid
value: {...}: ClusterTrainingRuntime.trainer.kubeflow.org "x" not found: specified
clusterTrainingRuntime must be created before the TrainJob is created``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.gojson import go_quote

GROUP: Final = "trainer.kubeflow.org"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
TRAIN_JOB: Final = "TrainJob"
TRAINING_RUNTIME: Final = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME: Final = "ClusterTrainingRuntime"
#: The runtime kinds a TrainJob may name, and their resources.
RUNTIME_PLURALS: Final = {TRAINING_RUNTIME: "trainingruntimes", CLUSTER_TRAINING_RUNTIME: "clustertrainingruntimes"}
#: The trainer's validating webhook for TrainJobs, as its ValidatingWebhookConfiguration names it.
WEBHOOK: Final = "validator.trainjob.trainer.kubeflow.org"
#: ``spec.managedBy`` when unset: the trainer's own controller runs the TrainJob.
DEFAULT_MANAGED_BY: Final = "trainer.kubeflow.org/trainjob-controller"


def is_train_job(obj: Mapping[str, Any]) -> bool:
    """Whether a wire object is a TrainJob (of any version of the group)."""
    return obj.get("kind") == TRAIN_JOB and str(obj.get("apiVersion") or "").startswith(f"{GROUP}/")


@dataclass(frozen=True, slots=True)
class RuntimeRef:
    name: str
    api_group: str = GROUP
    kind: str = CLUSTER_TRAINING_RUNTIME

    @property
    def cluster_scoped(self) -> bool:
        return self.kind == CLUSTER_TRAINING_RUNTIME


def runtime_ref(trainjob: dict[str, Any]) -> RuntimeRef:
    """``spec.runtimeRef`` with the CRD's defaults for what it leaves out."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef")
    ref = ref if isinstance(ref, dict) else {}
    return RuntimeRef(
        name=str(ref.get("name") or ""),
        api_group=str(ref["apiGroup"]) if isinstance(ref.get("apiGroup"), str) else GROUP,
        kind=str(ref["kind"]) if isinstance(ref.get("kind"), str) else CLUSTER_TRAINING_RUNTIME,
    )


RuntimeLookup = Callable[[str, str | None, str], Mapping[str, Any] | None]
"""(runtime kind, namespace or None for a ClusterTrainingRuntime, name) -> the runtime held, or None."""


def named_runtime(trainjob: Mapping[str, Any], lookup: RuntimeLookup) -> Mapping[str, Any] | None:
    """The runtime ``trainjob`` names (a TrainingRuntime in its namespace, a ClusterTrainingRuntime
    by name), as ``lookup`` finds it; None for a reference to another kind or group, or when
    ``lookup`` has no such runtime."""
    ref = runtime_ref(dict(trainjob))
    if ref.api_group != GROUP or ref.kind not in RUNTIME_PLURALS or not ref.name:
        return None
    namespace = (trainjob.get("metadata") or {}).get("namespace")
    return lookup(ref.kind, None if ref.cluster_scoped else str(namespace or ""), ref.name)


def unsupported_runtime(ref: RuntimeRef) -> str | None:
    """The webhook's refusal of a reference to a runtime the trainer does not have (its registry
    is keyed by the reference's GroupKind, ``<Kind>.<group>``), or None."""
    if ref.api_group == GROUP and ref.kind in RUNTIME_PLURALS:
        return None
    return f"unsupported runtime: {ref.kind}.{ref.api_group}" if ref.api_group else f"unsupported runtime: {ref.kind}"


def missing_runtime(ref: RuntimeRef) -> FieldError:
    """The webhook's field error for a runtime that is not stored, as the trainer words it: at
    ``spec.RuntimeRef`` for a ClusterTrainingRuntime (its Go field's name), ``spec.runtimeRef`` for
    a TrainingRuntime; the reference as JSON (with its defaults, in the Go struct's order); then
    its cached client's NotFound (``<Kind>.<group> "<name>" not found``) and the trainer's words."""
    shown = GoValue(json.dumps({"name": ref.name, "apiGroup": ref.api_group, "kind": ref.kind}, separators=(",", ":")))
    path, word = ("spec.RuntimeRef", "clusterTrainingRuntime") if ref.cluster_scoped else ("spec.runtimeRef", "trainingRuntime")
    return field.invalid(path, shown, f"{ref.kind}.{GROUP} {go_quote(ref.name)} not found: specified {word} must be "
                                      "created before the TrainJob is created")


#: ``spec.managedBy`` of a TrainJob Kueue's MultiKueue dispatches to a worker cluster (the CRD's
#: rule takes it and :data:`DEFAULT_MANAGED_BY`).
MULTIKUEUE_MANAGED_BY: Final = "kueue.x-k8s.io/multikueue"

