"""gpufed's own kinds as the hub serves them: Cluster, ResourceBinding, Work, and Karmada's policy
kinds under both ``policy.gpufed.io`` and ``policy.karmada.io`` (one stored set), with Karmada's
printer columns and defaults (:mod:`policies.defaulting`), and Karmada's FederatedResourceQuota
(:mod:`policies.federated_quota`) and ClusterTaintPolicy (:mod:`policies.taint_policy`) under
``policy.karmada.io``.

In: the kinds' models (pydantic, from :mod:`controlplane.apis` and :mod:`policies`). Out:
:func:`gpufed_resources` for the hub's registry; :func:`gpufed_resource_types` with any models
(None: permissive), for tests and tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from pydantic import BaseModel

from controlplane.apis.kube.fieldlabels import field_path
from controlplane.apis.untyped import dig
from controlplane.apiserver import columns as col
from controlplane.apiserver.resources import (
    AGE,
    CellGetter,
    ResourceType,
    TableColumn,
    Warner,
    path,
)


def _printed(dotted: str) -> CellGetter:
    """A CRD printer column of type string: the value as text, None (``<none>``) when unset."""
    parts = dotted.split(".")

    def get(obj: dict[str, Any], _now: datetime) -> Any:
        value = dig(obj, *parts)
        return None if value is None else str(value)

    return get


#: Karmada's printer columns of PropagationPolicy and ClusterPropagationPolicy (their CRDs').
_PROPAGATION_COLUMNS = (
    TableColumn("CONFLICT-RESOLUTION", _printed("spec.conflictResolution")),
    TableColumn("PRIORITY", _printed("spec.priority")),
    TableColumn("AGE", AGE.getter, type="date"),
)


def gpufed_resource_types(
    *,
    cluster_model: type[BaseModel] | None,
    binding_model: type[BaseModel] | None,
    work_model: type[BaseModel] | None,
    policy_models: Mapping[str, type[BaseModel] | None],
    policy_warnings: Warner | None = None,
    federated_quota_model: type[BaseModel] | None = None,
    taint_policy_model: type[BaseModel] | None = None,
    allow_no_execute_taint_policy: bool = False,
) -> list[ResourceType]:
    """gpufed's own kinds with the given models (None = permissive) and the policy kinds'
    warnings hook; ``allow_no_execute_taint_policy`` admits ClusterTaintPolicies with a
    ``NoExecute`` taint; see gpufed_resources()."""
    from controlplane.apis import constants as c
    from policies import federated_quota as frq
    from policies import taint_policy
    from policies.admission import policy_denial, policy_update_denial
    from policies.claims import PERMANENT_ID_LABELS, assign_permanent_id
    from policies.defaulting import POLICY_DEFAULTS

    types: list[ResourceType] = [
        ResourceType(
            c.CLUSTER_GROUP, c.VERSION, "Cluster", "clusters", "cluster", namespaced=False,
            has_status=True, model=cluster_model,
            columns=(
                TableColumn(
                    "Ready", col.cluster_ready,
                    description="The Ready condition; SchedulingDisabled when cordoned (spec.unschedulable).",
                ),
                TableColumn("Provider", path("spec.provider")),
                TableColumn("GPUs", col.cluster_gpus, type="integer", description="Whole GPUs (nvidia.com/gpu capacity)."),
                TableColumn("Free", col.cluster_free_gpus, type="integer", description="Whole GPUs allocatable and not allocated."),
                TableColumn("Models", col.cluster_models),
                AGE,
                TableColumn("Region", path("spec.region"), priority=1),
                TableColumn("Tier", col.cluster_tier, type="integer", priority=1),
                TableColumn("MIG Free", col.cluster_mig, priority=1, description="MIG slices free/total."),
                TableColumn("Spot", col.cluster_spot, priority=1, description="Spot (preemptible) nodes/all nodes."),
            ),
            extra_field_selectors={"spec.provider": field_path("spec.provider")},
        ),
        ResourceType(
            c.WORK_GROUP, c.VERSION, "ResourceBinding", "resourcebindings", "resourcebinding", namespaced=True,
            short_names=("rb",), has_status=True, model=binding_model,
            columns=(
                TableColumn("Scheduled", col.condition_status("Scheduled")),
                TableColumn("Replicas", path("spec.replicas"), type="integer"),
                TableColumn("Clusters", col.binding_clusters),
                AGE,
            ),
        ),
        ResourceType(
            c.WORK_GROUP, c.VERSION, "Work", "works", "work", namespaced=True,
            has_status=True, model=work_model,
            columns=(
                TableColumn("Applied", col.condition_status("Applied")),
                TableColumn("Available", col.condition_status("Available")),
                AGE,
            ),
        ),
    ]
    policy_kinds = (
        ("PropagationPolicy", "propagationpolicies", "propagationpolicy", True, ("pp",)),
        ("ClusterPropagationPolicy", "clusterpropagationpolicies", "clusterpropagationpolicy", False, ("cpp",)),
        ("OverridePolicy", "overridepolicies", "overridepolicy", True, ("op",)),
        ("ClusterOverridePolicy", "clusteroverridepolicies", "clusteroverridepolicy", False, ("cop",)),
    )
    for group in (c.POLICY_GROUP, c.KARMADA_POLICY_GROUP):
        for kind, plural, singular, namespaced, shorts in policy_kinds:
            defaults, defaults_on_read = POLICY_DEFAULTS[kind]
            types.append(
                ResourceType(
                    group, c.VERSION, kind, plural, singular, namespaced=namespaced,
                    # One set of policies served under both groups (stored once, under gpufed's).
                    # Short names resolve to gpufed's group; the Karmada group is reachable by
                    # its full names (propagationpolicies.policy.karmada.io).
                    short_names=shorts if group == c.POLICY_GROUP else (),
                    model=policy_models.get(kind),
                    # gpufed's addition: the hub's ResourceSelectorsServed condition.
                    has_status=True,
                    columns=_PROPAGATION_COLUMNS if kind.endswith("PropagationPolicy") else (AGE,),
                    defaults=defaults,
                    defaults_on_read=defaults_on_read,
                    webhook_denial=policy_denial(kind),
                    webhook_update_denial=policy_update_denial(kind),
                    # Karmada's mutating webhook: a propagation policy's permanent id, on create.
                    prepare_create=partial(assign_permanent_id, kind) if kind in PERMANENT_ID_LABELS else None,
                    warn=policy_warnings,
                    stored_as=c.POLICY_GROUP if group != c.POLICY_GROUP else None,
                )
            )
    # Karmada's own kind, served under its group only (gpufed has no version of it).
    types.append(
        ResourceType(
            c.KARMADA_POLICY_GROUP, c.VERSION, frq.KIND, "federatedresourcequotas", "federatedresourcequota",
            namespaced=True, categories=("karmada-io",), has_status=True, model=federated_quota_model,
            defaults=frq.canonical_quantities, webhook_denial=frq.quota_denial,
        )
    )
    types.append(
        ResourceType(
            c.KARMADA_POLICY_GROUP, c.VERSION, taint_policy.KIND, "clustertaintpolicies", "clustertaintpolicy",
            namespaced=False, model=taint_policy_model,
            webhook_denial=partial(taint_policy.taint_policy_denial, allow_no_execute=allow_no_execute_taint_policy),
        )
    )
    return types


def gpufed_resources(*, allow_no_execute_taint_policy: bool = False) -> list[ResourceType]:
    """gpufed's kinds validated by their pydantic models from controlplane.apis and policies;
    ``allow_no_execute_taint_policy``: karmada-webhook's switch of that name."""
    from controlplane.apis.cluster_v1alpha1 import Cluster  # type: ignore[import-not-found,unused-ignore]
    from controlplane.apis.work_v1alpha1 import (  # type: ignore[import-not-found,unused-ignore]
        ResourceBinding,
        Work,
    )
    from policies.federated_quota import FederatedResourceQuota
    from policies.models import ClusterPropagationPolicy, PropagationPolicy
    from policies.override_models import ClusterOverridePolicy, OverridePolicy
    from policies.taint_policy import ClusterTaintPolicy
    from policies.validation import validate_policy  # type: ignore[import-not-found,unused-ignore]

    def policy_warnings(obj: dict[str, Any]) -> list[str]:
        return list(validate_policy(obj).warnings)

    return gpufed_resource_types(
        cluster_model=Cluster,
        binding_model=ResourceBinding,
        work_model=Work,
        policy_models={
            "PropagationPolicy": PropagationPolicy,
            "ClusterPropagationPolicy": ClusterPropagationPolicy,
            "OverridePolicy": OverridePolicy,
            "ClusterOverridePolicy": ClusterOverridePolicy,
        },
        policy_warnings=policy_warnings,
        federated_quota_model=FederatedResourceQuota,
        taint_policy_model=ClusterTaintPolicy,
        allow_no_execute_taint_policy=allow_no_execute_taint_policy,
    )
