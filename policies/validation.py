"""Checking policy documents: parse by kind, collect field errors and Karmada-style warnings.

The models in ``policies.models`` reject what is wrong (each error carries its field path).
This module adds what is accepted but worth telling the author, the way Karmada's webhook
does with warnings: a ``labelSelector`` ignored because ``name`` is set, a namespace in a
PropagationPolicy's selector that is ignored, a static weight list ignored because
``dynamicWeight`` is set, a ``weightPreference`` ignored because replicas are not divided by
weight, deprecated fields.

In: a document (dict) or a policy model. Out: :class:`PolicyValidation` with the parsed policy
(or ``None``), :class:`~controlplane.apis.meta.FieldCause` errors and warning strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from controlplane.apis.meta import CauseType, FieldCause, validation_causes
from policies.models import (
    ClusterPropagationPolicy,
    DivisionStrategy,
    PropagationPolicy,
    ResourceSelector,
)
from policies.override_models import POLICY_KINDS, AnyPolicy, ClusterOverridePolicy, OverridePolicy


@dataclass(frozen=True)
class PolicyValidation:
    policy: AnyPolicy | None
    errors: tuple[FieldCause, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_policy(document: Mapping[str, Any]) -> AnyPolicy:
    """Parse a policy document by its ``kind``; raises ``ValidationError`` or ``ValueError``."""
    kind = document.get("kind")
    model = POLICY_KINDS.get(str(kind))
    if model is None:
        raise ValueError(f"kind {kind!r} is not a policy kind (expected one of {', '.join(POLICY_KINDS)})")
    policy = model.model_validate(document)
    assert isinstance(policy, PropagationPolicy | ClusterPropagationPolicy | OverridePolicy | ClusterOverridePolicy)
    return policy


def _selector_warnings(
    selectors: list[ResourceSelector] | None, *, path: str, namespaced: bool, policy_namespace: str | None
) -> list[str]:
    warnings: list[str] = []
    for index, selector in enumerate(selectors or ()):
        where = f"{path}[{index}]"
        if selector.name and selector.label_selector is not None:
            warnings.append(f"{where}.labelSelector is ignored because {where}.name is set")
        if namespaced and selector.namespace and policy_namespace and selector.namespace != policy_namespace:
            warnings.append(
                f"{where}.namespace {selector.namespace!r} is ignored: a namespaced policy only selects "
                f"resources in its own namespace {policy_namespace!r}"
            )
    return warnings


def policy_warnings(policy: AnyPolicy) -> list[str]:
    """Things that are accepted but do not do what the author may expect."""
    namespaced = isinstance(policy, PropagationPolicy | OverridePolicy)
    warnings = _selector_warnings(
        policy.spec.resource_selectors,
        path="spec.resourceSelectors",
        namespaced=namespaced,
        policy_namespace=policy.metadata.namespace,
    )
    if isinstance(policy, PropagationPolicy | ClusterPropagationPolicy):
        spec = policy.spec
        if spec.association is not None:
            warnings.append("spec.association is deprecated; use spec.propagateDeps")
        scheduling = spec.placement.replica_scheduling if spec.placement else None
        if scheduling is not None:
            # Not for Weighted: karmada-webhook writes it on every Divided policy, and a policy
            # switched to Duplicated by a client-side apply keeps it without its author writing it.
            if scheduling.replica_scheduling_type == "Duplicated" and scheduling.replica_division_preference not in (
                None, "Weighted"
            ):
                warnings.append(
                    "spec.placement.replicaScheduling.replicaDivisionPreference is ignored because "
                    "replicaSchedulingType is Duplicated"
                )
            weights = scheduling.weight_preference
            if weights is not None and scheduling.division_strategy not in (
                DivisionStrategy.STATIC_WEIGHT, DivisionStrategy.DYNAMIC_WEIGHT
            ):
                # Karmada accepts and ignores it; say so instead of refusing the policy.
                because = (
                    "replicaSchedulingType is Duplicated"
                    if scheduling.effective_type == "Duplicated"
                    else f"replicaDivisionPreference is {scheduling.division_strategy.value}"
                )
                warnings.append(f"spec.placement.replicaScheduling.weightPreference is ignored because {because}")
            elif weights is not None and weights.dynamic_weight and weights.static_weight_list:
                warnings.append(
                    "spec.placement.replicaScheduling.weightPreference.staticWeightList is ignored because "
                    "dynamicWeight is set"
                )
    else:
        spec_o = policy.spec
        rules = [(f"spec.overrideRules[{i}].overriders", r.overriders) for i, r in enumerate(spec_o.override_rules or ())]
        if spec_o.overriders is not None:
            rules.append(("spec.overriders", spec_o.overriders))
        for where, overriders in rules:
            for j, plaintext in enumerate(overriders.plaintext or ()):
                if not plaintext.path.startswith("/"):
                    warnings.append(
                        f"{where}.plaintext[{j}].path {plaintext.path!r} is not a JSON pointer (it must start "
                        "with '/'): applying this rule will fail"
                    )
        if spec_o.target_cluster is not None or spec_o.overriders is not None:
            if spec_o.override_rules:
                warnings.append(
                    "spec.targetCluster and spec.overriders are ignored because spec.overrideRules is set"
                )
            else:
                warnings.append("spec.targetCluster and spec.overriders are deprecated; use spec.overrideRules")
    return warnings


def validate_policy(document: Mapping[str, Any]) -> PolicyValidation:
    """Parse and check a policy document; never raises for bad input."""
    try:
        policy = parse_policy(document)
    except ValidationError as exc:
        return PolicyValidation(policy=None, errors=tuple(validation_causes(exc)))
    except ValueError as exc:
        cause = FieldCause(field="kind", message=str(exc), reason=CauseType.FIELD_VALUE_NOT_SUPPORTED)
        return PolicyValidation(policy=None, errors=(cause,))
    return PolicyValidation(policy=policy, warnings=tuple(policy_warnings(policy)))
