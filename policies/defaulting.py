"""Karmada's defaults of the policy kinds, as a Karmada control plane stores them.

Two sources fill a policy's unset fields on Karmada:

* the CRDs' structural defaults (``+kubebuilder:default``), applied on every create and update
  and to objects read back from storage, and only where the parent object exists:
  ``spec.priority`` 0, ``spec.preemption`` Never, ``spec.conflictResolution`` Abort,
  ``spec.schedulerName`` default-scheduler, ``failover.application.purgeMode`` Graciously,
  ``failover.application.decisionConditions.tolerationSeconds`` 300 and
  ``placement.replicaScheduling.replicaSchedulingType`` Divided (the values are the models'
  constants, which the served schemas publish as the CRDs' ``default``);
* karmada-webhook's mutating admission, on creates and updates only: a namespaced policy's
  ``resourceSelectors[].namespace`` is its own namespace, a spread constraint with neither
  ``spreadByField`` nor ``spreadByLabel`` spreads by ``cluster`` and one without ``minGroups``
  has 1, and Divided replicas without a ``replicaDivisionPreference`` are Weighted.

Each stored default is what the hub already made of the unset field (``effective_*`` and
``division_strategy`` in :mod:`policies.models`), so no placement changes. Left unset, because
the hub's reading of the unset field is not the default's: the webhook's cluster tolerations
(the hub's health taints are ``cluster.gpufed.io/*`` and their default follows the hub's flags
when scheduling), ``failover.application.gracePeriodSeconds`` (the hub's default is its
``--graceful-eviction-timeout``), ``propagateDeps`` for a ServiceImport (the hub derives no
Service or EndpointSlices from one), and the Weighted preference next to a ``tieredOverflow``
block (gpufed's extension: the block alone means TieredOverflow).

The same webhook refuses a PropagationPolicy or ClusterPropagationPolicy whose name is longer than
63 characters (Karmada puts the name in a label, whose value cannot be longer): that refusal is
:mod:`policies.admission`'s, with the validating webhooks'.

In: a policy's wire dict, changed in place. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Final

from controlplane.apis.conflictresolution import DEFAULT_CONFLICT_RESOLUTION
from controlplane.apis.kube.objects import child, set_default, set_nil_default
from policies.behavior_models import DEFAULT_FAILOVER_TOLERATION_SECONDS, DEFAULT_PURGE_MODE
from policies.models import (
    DEFAULT_PREEMPTION,
    DEFAULT_PRIORITY,
    DEFAULT_REPLICA_SCHEDULING_TYPE,
    DEFAULT_SCHEDULER_NAME,
)

#: Fills unset fields of one policy object in place.
PolicyDefaulter = Callable[[dict[str, Any]], None]

_SPEC_DEFAULTS: Final[tuple[tuple[str, Any], ...]] = (
    ("conflictResolution", DEFAULT_CONFLICT_RESOLUTION.value),
    ("preemption", DEFAULT_PREEMPTION),
    ("priority", DEFAULT_PRIORITY),
    ("schedulerName", DEFAULT_SCHEDULER_NAME),
)


def _unset(obj: dict[str, Any], key: str) -> bool:
    """Go's zero value of a string field: absent, null or empty."""
    value = obj.get(key)
    return value is None or value == ""


def _zero(obj: dict[str, Any], key: str) -> bool:
    """Go's zero value of a number field: absent, null or 0 (a value of another type is left to
    validation)."""
    value = obj.get(key)
    return value is None or (type(value) is int and value == 0)


def propagation_structural(obj: dict[str, Any]) -> None:
    """The PropagationPolicy and ClusterPropagationPolicy CRDs' structural defaults."""
    spec = child(obj, "spec")
    if spec is None:
        return
    for key, value in _SPEC_DEFAULTS:
        set_nil_default(spec, key, value)
    application = child(child(spec, "failover"), "application")
    if application is not None:
        set_nil_default(application, "purgeMode", DEFAULT_PURGE_MODE)
        conditions = child(application, "decisionConditions")
        if conditions is not None:
            set_nil_default(conditions, "tolerationSeconds", DEFAULT_FAILOVER_TOLERATION_SECONDS)
    scheduling = child(child(spec, "placement"), "replicaScheduling")
    if scheduling is not None:
        set_nil_default(scheduling, "replicaSchedulingType", DEFAULT_REPLICA_SCHEDULING_TYPE)


def _selector_namespaces(obj: dict[str, Any]) -> None:
    """karmada-webhook: a namespaced policy's selectors without a namespace get the policy's."""
    namespace = (child(obj, "metadata") or {}).get("namespace")
    selectors = (child(obj, "spec") or {}).get("resourceSelectors")
    if not namespace or not isinstance(selectors, list):
        return
    for selector in selectors:
        if isinstance(selector, dict):
            set_default(selector, "namespace", namespace)


def _placement_mutations(obj: dict[str, Any]) -> None:
    """karmada-webhook's ``SetDefaultSpreadConstraints`` and ``SetReplicaDivisionPreferenceWeighted``."""
    placement = child(child(obj, "spec"), "placement")
    if placement is None:
        return
    constraints = placement.get("spreadConstraints")
    for constraint in constraints if isinstance(constraints, list) else ():
        if not isinstance(constraint, dict):
            continue
        if _unset(constraint, "spreadByField") and _unset(constraint, "spreadByLabel"):
            constraint["spreadByField"] = "cluster"
        if _zero(constraint, "minGroups"):
            constraint["minGroups"] = 1
    scheduling = child(placement, "replicaScheduling")
    if (
        scheduling is not None
        and scheduling.get("replicaSchedulingType") == "Divided"
        and _unset(scheduling, "replicaDivisionPreference")
        and scheduling.get("tieredOverflow") is None
    ):
        scheduling["replicaDivisionPreference"] = "Weighted"


def propagation_policy(obj: dict[str, Any]) -> None:
    """A PropagationPolicy as Karmada stores it on a create or update."""
    propagation_structural(obj)
    _selector_namespaces(obj)
    _placement_mutations(obj)


def cluster_propagation_policy(obj: dict[str, Any]) -> None:
    """A ClusterPropagationPolicy as Karmada stores it on a create or update."""
    propagation_structural(obj)
    _placement_mutations(obj)


#: (kind) → (defaults on create and update, defaults on read from storage).
POLICY_DEFAULTS: Final[dict[str, tuple[PolicyDefaulter | None, PolicyDefaulter | None]]] = {
    "PropagationPolicy": (propagation_policy, propagation_structural),
    "ClusterPropagationPolicy": (cluster_propagation_policy, propagation_structural),
    "OverridePolicy": (_selector_namespaces, None),
    "ClusterOverridePolicy": (None, None),
}


def placement_as_stored(placement: Mapping[str, Any]) -> dict[str, Any]:
    """A policy's ``placement`` (on the wire) with the defaults a write stores in it now, for
    comparing a placement copied before those defaults with one copied after (the binding of a
    policy stored earlier is not rewritten, and so not scheduled again, for a default)."""
    wrapped: dict[str, Any] = {"spec": {"placement": copy.deepcopy(dict(placement))}}
    propagation_structural(wrapped)
    _placement_mutations(wrapped)
    placement_out: dict[str, Any] = wrapped["spec"]["placement"]
    return placement_out
