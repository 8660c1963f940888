"""Health of a member object: the rules every kind shares, and what an observed object tells.

Each kind's own rule lives in its interpreter (``health_of`` of
:class:`~controlplane.interpreter.base.KindInterpreter` and of
:class:`~controlplane.interpreter.native.StatusInterpreter`), as Karmada's ``InterpretHealth``
takes the whole observed object; :func:`~controlplane.interpreter.registry.judge_health` finds
it. The rules here are those of the kinds without one (Karmada's default interpretation) and
the helpers the kinds' rules share.

In: the observed member object, ``apiVersion``, ``kind`` and as much of ``metadata``, ``spec``
and ``status`` as the caller knows: the agent the whole live object, the hub the member's
status with the Work manifest's spec (never the member's ``metadata.generation``). A rule
uses the spec and the generation when they are there and degrades to the status alone when
they are not. Out: Healthy, Unhealthy or Unknown. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.untyped import as_int
from controlplane.apis.work_v1alpha1 import Health

__all__ = [
    "ALWAYS_HEALTHY_KINDS",
    "CONDITION_HEALTH_KINDS",
    "conditions_of",
    "generic_health",
    "health_by_conditions",
    "observed_generation_behind",
    "spec_of",
    "status_of",
]

#: Kinds whose health does not depend on their status (the agent watches them all the same:
#: the watch is what spares a status pass from fetching them).
ALWAYS_HEALTHY_KINDS = frozenset(
    {
        "Namespace",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "CustomResourceDefinition",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "CronJob",
        "IngressClass",
        "LimitRange",
        "ResourceQuota",
        "StorageClass",
        "RuntimeClass",
        "EndpointSlice",
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "HorizontalPodAutoscaler",
    }
)
#: Kinds whose health comes from status conditions that appear some time after the apply
#: (training operators): without conditions yet, their health is not known.
CONDITION_HEALTH_KINDS = frozenset({"PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob"})
#: Condition types that make an object healthy when True (the first found wins, after ``Failed``).
POSITIVE_CONDITIONS = ("Succeeded", "Running", "Ready", "Available", "Complete")


def status_of(observed: Mapping[str, Any]) -> Mapping[str, Any]:
    """The observed ``status``, ``{}`` when there is none."""
    status = observed.get("status")
    return status if isinstance(status, Mapping) else {}


def spec_of(observed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The observed ``spec``, None when the caller does not know it (the status alone is)."""
    spec = observed.get("spec")
    return spec if isinstance(spec, Mapping) else None


def observed_generation_behind(observed: Mapping[str, Any], *, missing: int | None = None) -> bool:
    """Whether the status was written for an earlier spec: ``status.observedGeneration`` below
    ``metadata.generation``. A status without ``observedGeneration`` counts as ``missing``
    (None: never behind); an unknown generation (the hub's view) is never ahead."""
    status = status_of(observed)
    if "observedGeneration" not in status and missing is None:
        return False
    observed_at = as_int(status.get("observedGeneration"), missing or 0)
    return observed_at < as_int((observed.get("metadata") or {}).get("generation"), 0)


def conditions_of(status: Mapping[str, Any] | None) -> dict[str, str]:
    """``status.conditions`` as type → status (``"True"``, ``"False"``, ``"Unknown"``); an entry
    without a ``type`` is not a condition in kube's sense (Volcano's Job lists its phases there,
    ``{status: Running}``) and is left out."""
    return {
        str(cond["type"]): str(cond.get("status"))
        for cond in (status or {}).get("conditions") or []
        if isinstance(cond, Mapping) and cond.get("type")
    }


def health_by_conditions(status: Mapping[str, Any] | None, *, awaited: bool = False) -> Health:
    """Health by the conventional conditions: Unhealthy while ``Failed`` is True, Healthy while
    one of :data:`POSITIVE_CONDITIONS` is, Unhealthy while ``Ready`` or ``Available`` is False.
    Without any condition, Healthy (Karmada's default: healthy once applied) unless the
    conditions are ``awaited`` (a training operator's, which come after the apply): Unknown."""
    conditions = conditions_of(status)
    if conditions.get("Failed") == "True":
        return Health.UNHEALTHY
    for positive in POSITIVE_CONDITIONS:
        if conditions.get(positive) == "True":
            return Health.HEALTHY
    if conditions.get("Ready") == "False" or conditions.get("Available") == "False":
        return Health.UNHEALTHY
    if not conditions and not awaited:
        return Health.HEALTHY
    return Health.UNKNOWN


def generic_health(observed: Mapping[str, Any]) -> Health:
    """Health of a kind without a rule of its own: Healthy for :data:`ALWAYS_HEALTHY_KINDS`,
    else by its conditions (awaited for :data:`CONDITION_HEALTH_KINDS`)."""
    kind = str(observed.get("kind") or "")
    if kind in ALWAYS_HEALTHY_KINDS:
        return Health.HEALTHY
    return health_by_conditions(status_of(observed), awaited=kind in CONDITION_HEALTH_KINDS)
