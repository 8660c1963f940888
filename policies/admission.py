"""karmada-webhook's admission of the four policy kinds, in its words.

Karmada checks a policy in two webhooks. The mutating one refuses a PropagationPolicy or
ClusterPropagationPolicy named longer than 63 characters (the name goes in a label; a 400 without a
reason, its ``admission.Errored``); the
validating one (``pkg/webhook/{propagation,clusterpropagation,override,clusteroverride}policy``,
rules in ``pkg/util/validation/validation.go``) refuses, beyond what the CRDs' schemas refuse:

* in a propagation policy: ``clusterAffinity`` beside ``clusterAffinities``; a field selector of
  either (or of an override rule's ``targetCluster``) on a key other than provider, region and
  zone, or with an operator other than In and NotIn; a term's
  ``affinityName`` that is not a qualified name or is another term's; a spread constraint by both
  a field and a label, or with ``maxGroups`` below ``minGroups``; two spread constraints by the
  same ``spreadByField``, or constraints by field without one by ``cluster``; a resource selector
  without a ``name`` when ``preemption`` is ``Always``; a negative ``minGroups`` or ``maxGroups``;
  ``failover.application``'s negative ``decisionConditions.tolerationSeconds``, a
  ``gracePeriodSeconds`` below 1 or with a ``purgeMode`` that does not wait; ``suspension.dispatching`` beside
  ``dispatchingOnClusters.clusterNames``; on an update, a changed ``schedulerName``, then a changed
  or removed permanent-id label (:mod:`policies.claims`; a policy stored before the hub gave ids
  has none to keep);
* in an override policy: ``overrideRules`` next to the deprecated ``targetCluster`` or a
  non-empty ``overriders``; a rule's ``labelsOverrider`` value that is no valid set of labels, an
  ``annotationsOverrider`` value that is no valid set of annotations, an ``imageOverrider``'s
  ``predicate.path``, a ``fieldOverrider``'s ``fieldPath`` or an operation's ``subPath`` that is no
  JSON pointer, a ``fieldOverrider`` with both ``json`` and ``yaml``, and an operation whose
  ``value`` is missing for ``add`` or ``replace`` or given for ``remove`` (the deprecated
  ``overriders`` are not checked: a bad pointer there fails when applied, as in Karmada).

The hub's models (:mod:`policies.models`, :mod:`policies.override_models`) refuse the rest
(422). A refusal here is the webhook's: ``(webhook, message)``, the message being
``field.ErrorList.ToAggregate()``'s text, which the API server answers as kube answers a webhook's
denial (403 ``admission webhook "<webhook>" denied the request: <message>``). Kube validates an
object's schema before its validating webhooks, so an object the models refuse is left to them.

In: a policy's wire dict after the write's defaults (Karmada's mutating webhook runs first: a spread
constraint's ``minGroups`` is 1 when it reaches the validating one). Out: None or the denial. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue, go_strings
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.kube.validate_pod import annotations_errors, labels_errors
from controlplane.gojson import go_json_value, go_quote
from policies.behavior_models import UNGRACIOUS_PURGE_MODES
from policies.claims import PERMANENT_ID_LABELS
from policies.models import (
    CLUSTER_FIELDS,
    DEFAULT_SCHEDULER_NAME,
    ClusterAffinity,
    FieldSelector,
    Placement,
    PropagationSpec,
    SpreadConstraint,
)
from policies.override_models import FieldOverrider, JSONPatchOperation, Overriders, OverrideSpec
from policies.validation import parse_policy

#: Karmada's ``LabelValueMaxLength``: a propagation policy's name is a label's value.
NAME_MAX_LENGTH: Final = 63
#: karmada-webhook's webhook of each kind, by the names its configuration gives them.
WEBHOOKS: Final = {
    "PropagationPolicy": "propagationpolicy.karmada.io",
    "ClusterPropagationPolicy": "clusterpropagationpolicy.karmada.io",
    "OverridePolicy": "overridepolicy.karmada.io",
    "ClusterOverridePolicy": "clusteroverridepolicy.karmada.io",
}
#: A policy's refusal: (webhook's name, why), the validating webhook's ``admission.Denied`` (403), or
#: (webhook's name, why, code), the mutating webhook's ``admission.Errored`` (that code, no reason).
Denial = tuple[str, str] | tuple[str, str, int]
#: A policy's denial, or None when it is admitted.
PolicyDenial = Callable[[dict[str, Any]], Denial | None]
#: The same on an update: (new, stored) → the denial or None.
PolicyUpdateDenial = Callable[[dict[str, Any], dict[str, Any]], Denial | None]

_PREEMPTION_NEEDS_NAMES: Final = (
    "name cannot be empty if preemption is Always, the empty name may cause unexpected resources preemption"
)


def _name_too_long(kind: str, obj: Mapping[str, Any]) -> Denial | None:
    """The mutating webhook's refusal of a long name (Go's ``len``: bytes), or None: it answers
    ``admission.Errored(http.StatusBadRequest, ...)`` (``pkg/webhook/propagationpolicy/mutating.go``),
    which kube-apiserver gives as a 400 with no reason."""
    if not kind.endswith("PropagationPolicy"):
        return None
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and len(name.encode()) > NAME_MAX_LENGTH:
        return WEBHOOKS[kind], f"{kind}'s name should be no more than {NAME_MAX_LENGTH} characters", 400
    return None


def _go_spread_constraint(constraint: SpreadConstraint) -> str:
    """``%#v`` of one ``v1alpha1.SpreadConstraint``."""
    return (
        f"v1alpha1.SpreadConstraint{{SpreadByField:{go_quote(constraint.spread_by_field or '')}, "
        f"SpreadByLabel:{go_quote(constraint.spread_by_label or '')}, MaxGroups:{constraint.max_groups or 0}, "
        f"MinGroups:{constraint.min_groups or 0}}}"
    )


def _go_spread_constraints(constraints: Iterable[SpreadConstraint]) -> GoValue:
    """``%#v`` of ``[]v1alpha1.SpreadConstraint``, as Karmada prints the list it refuses."""
    return GoValue("[]v1alpha1.SpreadConstraint{" + ", ".join(map(_go_spread_constraint, constraints)) + "}")


def _go_json(value: Any) -> GoValue:
    """``%#v`` of an ``apiextensionsv1.JSON``: its raw bytes, the value as kube-apiserver sends it."""
    if value is None:
        return GoValue("v1.JSON{Raw:[]uint8(nil)}")
    raw = go_json_value(value).encode()
    return GoValue("v1.JSON{Raw:[]uint8{" + ", ".join(f"0x{b:x}" for b in raw) + "}}")


def _go_field_selector(selector: FieldSelector) -> GoValue:
    """``%#v`` of a ``v1alpha1.FieldSelector``, its requirements kube's ``NodeSelectorRequirement``."""
    requirements = ", ".join(
        f"v1.NodeSelectorRequirement{{Key:{go_quote(r.key)}, Operator:{go_quote(r.operator)}, "
        f"Values:{go_strings(r.values).text}}}"
        for r in selector.match_expressions or ()
    )
    expressions = (
        "[]v1.NodeSelectorRequirement(nil)"
        if selector.match_expressions is None
        else f"[]v1.NodeSelectorRequirement{{{requirements}}}"
    )
    return GoValue(f"v1alpha1.FieldSelector{{MatchExpressions:{expressions}}}")


def field_selector_errors(affinity: ClusterAffinity | None, path: str) -> list[FieldError]:
    """``ValidateClusterAffinity``: the first requirement of its field selector whose key is not
    provider, region or zone, or whose operator is not In or NotIn."""
    selector = affinity.field_selector if affinity is not None else None
    for requirement in selector.match_expressions or () if selector is not None else ():
        if requirement.key not in CLUSTER_FIELDS:
            message = f"unsupported key {go_quote(requirement.key)}, must be provider, region, or zone"
        elif requirement.operator not in ("In", "NotIn"):
            message = f"unsupported operator {go_quote(requirement.operator)}, must be In or NotIn"
        else:
            continue
        assert selector is not None
        return [field.invalid(f"{path}.fieldSelector", _go_field_selector(selector), message)]
    return []


def _affinities_errors(placement: Placement, wire: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateClusterAffinities``: each term's name a qualified name, unique among the terms."""
    errors: list[FieldError] = []
    path = "spec.placement.clusterAffinities"
    names: set[str] = set()
    for index, term in enumerate(placement.cluster_affinities or ()):
        name = term.affinity_name
        errors += [field.invalid(f"{path}[{index}]", name, msg) for msg in qualified_name_errors(name)]
        if name in names:
            errors.append(
                field.invalid(
                    path,
                    wire.get("clusterAffinities"),
                    "each affinity term in a policy must have a unique name",
                )
            )
        names.add(name)
        errors += field_selector_errors(term, f"{path}[{index}]")
    return errors


def _spread_errors(constraints: list[SpreadConstraint]) -> list[FieldError]:
    """``ValidateSpreadConstraint``, on the constraints as Karmada's mutating webhook left them."""
    errors: list[FieldError] = []
    path = "spec.placement.spreadConstraints"
    by_field: dict[str, bool] = {}  # each spreadByField seen → whether it was reported twice
    for index, constraint in enumerate(constraints):
        shown = GoValue(_go_spread_constraint(constraint))
        if constraint.spread_by_field and constraint.spread_by_label:
            errors.append(
                field.invalid(
                    f"{path}[{index}]", shown, "spreadByLabel should not co-exist with spreadByField"
                )
            )
        max_groups, min_groups = constraint.max_groups or 0, constraint.min_groups or 0
        if min_groups < 0:
            errors.append(field.invalid(f"{path}[{index}]", shown, "minGroups lower than 0 is not allowed"))
        if max_groups < 0:
            errors.append(field.invalid(f"{path}[{index}]", shown, "maxGroups lower than 0 is not allowed"))
        if 0 < max_groups < min_groups:
            errors.append(
                field.invalid(f"{path}[{index}]", shown, "maxGroups lower than minGroups is not allowed")
            )
        by = constraint.spread_by_field
        if by:
            if by_field.get(by) is False:
                message = f"multiple {by} spread constraints are not allowed"
                errors.append(field.invalid(path, _go_spread_constraints(constraints), message))
                by_field[by] = True
            by_field.setdefault(by, False)
    if by_field and "cluster" not in by_field:
        errors.append(
            field.invalid(
                path,
                _go_spread_constraints(constraints),
                "the cluster spread constraint must be enabled in one of the constraints in case of SpreadByField "
                "is enabled",
            )
        )
    return errors


def _application_failover_errors(spec: PropagationSpec) -> list[FieldError]:
    """``ValidateApplicationFailover``; a gracious purge without ``gracePeriodSeconds``, which it
    also refuses, never reaches it on Karmada (its mutating webhook sets 600) nor on the hub
    (which reads the unset field as its default)."""
    application = spec.failover.application if spec.failover is not None else None
    if application is None:
        return []
    errors: list[FieldError] = []
    path = "spec.failover.application"
    toleration = application.decision_conditions.toleration_seconds
    if toleration is not None and toleration < 0:
        errors.append(
            field.invalid(f"{path}.decisionConditions.tolerationSeconds", toleration, field.IS_NEGATIVE)
        )
    grace = application.grace_period_seconds
    if grace is not None and application.purge_mode in UNGRACIOUS_PURGE_MODES:
        errors.append(
            field.invalid(
                f"{path}.gracePeriodSeconds", grace, "only takes effect when purgeMode is graciously"
            )
        )
    if grace is not None and grace <= 0:
        errors.append(field.invalid(f"{path}.gracePeriodSeconds", grace, "must be greater than 0"))
    return errors


def propagation_errors(spec: PropagationSpec, wire: Mapping[str, Any]) -> list[FieldError]:
    """What ``ValidatePropagationSpec`` refuses that the models take, in its order; ``wire`` is the
    spec as written (a refused structure is shown as it was given)."""
    errors: list[FieldError] = []
    placement = spec.placement
    placement_wire = field.mapping(wire.get("placement"))
    if placement is not None:
        if placement.cluster_affinity is not None and placement.cluster_affinities is not None:
            errors.append(
                field.invalid(
                    "spec.placement", placement_wire, "clusterAffinities cannot co-exist with clusterAffinity"
                )
            )
        errors += field_selector_errors(placement.cluster_affinity, "spec.placement.clusterAffinity")
        errors += _affinities_errors(placement, placement_wire)
        errors += _spread_errors(placement.spread_constraints or [])
    errors += _application_failover_errors(spec)
    if spec.preemption == "Always":
        errors += [
            field.invalid(f"spec.resourceSelectors[{index}].name", "", _PREEMPTION_NEEDS_NAMES)
            for index, selector in enumerate(spec.resource_selectors)
            if not selector.name
        ]
    suspension = spec.suspension
    on_clusters = suspension.dispatching_on_clusters if suspension is not None else None
    if (
        suspension is not None
        and suspension.dispatching
        and on_clusters is not None
        and on_clusters.cluster_names
    ):
        # Karmada names the field twice (``fldPath.Child("suspension")`` of ``spec.suspension``).
        message = "suspension dispatching cannot co-exist with dispatchingOnClusters.clusterNames"
        errors.append(field.invalid("spec.suspension.suspension", wire.get("suspension"), message))
    return errors


def _has_overriders(overriders: Overriders | None) -> bool:
    """Karmada's ``!emptyOverrides``: any overrider but a field overrider."""
    if overriders is None:
        return False
    return any(
        (
            overriders.plaintext,
            overriders.image_overrider,
            overriders.command_overrider,
            overriders.args_overrider,
            overriders.labels_overrider,
            overriders.annotations_overrider,
        )
    )


#: go-openapi/jsonpointer's refusal of a pointer that does not start with a slash (its quote unclosed).
_NOT_A_POINTER: Final = 'JSON pointer must be empty or start with a "/'


def _pointer_errors(pointer: str, path: str) -> list[FieldError]:
    """``jsonpointer.New``'s error of ``pointer``, as Karmada reports it."""
    return [field.invalid(path, pointer, _NOT_A_POINTER)] if pointer and not pointer.startswith("/") else []


def _operation_errors(operations: Iterable[JSONPatchOperation], path: str) -> list[FieldError]:
    """``validateJSONPatchSubPaths`` or ``validateYAMLPatchSubPaths``: each operation's ``subPath``
    a pointer, its ``value`` given for add and replace and not for remove."""
    errors: list[FieldError] = []
    for index, operation in enumerate(operations):
        errors += _pointer_errors(operation.sub_path, f"{path}[{index}].subPath")
        where = f"{path}[{index}].value"
        if operation.operator in ("add", "replace") and operation.value is None:
            errors.append(
                field.invalid(where, _go_json(None), "value is required for add or replace operation")
            )
        elif operation.operator == "remove" and operation.value is not None:
            errors.append(
                field.invalid(where, _go_json(operation.value), "value is not allowed for remove operation")
            )
    return errors


def _field_overrider_errors(overrider: FieldOverrider, wire: Any, path: str) -> list[FieldError]:
    """One field overrider of a rule, as ``ValidateOverrideRules`` checks it."""
    errors: list[FieldError] = []
    if overrider.json_ops and overrider.yaml_ops:
        errors.append(
            field.invalid(path, wire, "FieldOverrider has both YAML and JSON set. Only one is allowed")
        )
    errors += _pointer_errors(overrider.field_path, f"{path}.fieldPath")
    errors += _operation_errors(overrider.json_ops or (), f"{path}.json")
    errors += _operation_errors(overrider.yaml_ops or (), f"{path}.yaml")
    return errors


def override_errors(spec: OverrideSpec, wire: Mapping[str, Any]) -> list[FieldError]:
    """What ``ValidateOverrideSpec`` refuses that the models take; ``wire`` is the spec as written
    (a refused value is shown as it was given)."""
    errors = field_selector_errors(spec.target_cluster, "spec.targetCluster")
    if spec.target_cluster is not None and spec.override_rules is not None:
        errors.append(
            field.invalid(
                "spec.targetCluster",
                wire.get("targetCluster"),
                "overrideRules and targetCluster can't co-exist",
            )
        )
    if _has_overriders(spec.overriders) and spec.override_rules is not None:
        errors.append(
            field.invalid(
                "spec.overriders", wire.get("overriders"), "overrideRules and overriders can't co-exist"
            )
        )
    wire_rules = field.items(wire.get("overrideRules"))
    for index, rule in enumerate(spec.override_rules or ()):
        path = f"spec.overrideRules[{index}].overriders"
        overriders = rule.overriders
        for j, overrider in enumerate(overriders.annotations_overrider or ()):
            errors += annotations_errors(overrider.value or {}, f"{path}.annotationsOverrider[{j}].value")
        for j, overrider in enumerate(overriders.labels_overrider or ()):
            errors += labels_errors(overrider.value or {}, f"{path}.labelsOverrider[{j}].value")
        for j, image in enumerate(overriders.image_overrider or ()):
            if image.predicate is not None:
                errors += _pointer_errors(image.predicate.path, f"{path}.imageOverrider[{j}].predicate.path")
        wire_fields = field.items(
            field.mapping(field.mapping(wire_rules[index]).get("overriders")).get("fieldOverrider")
        )
        for j, field_overrider in enumerate(overriders.field_overrider or ()):
            errors += _field_overrider_errors(field_overrider, wire_fields[j], f"{path}.fieldOverrider[{j}]")
        errors += field_selector_errors(rule.target_cluster, f"spec.overrideRules[{index}].targetCluster")
    return errors


def _spec_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The validating webhook's errors of a policy the models take (none for one they refuse,
    whose 422 comes first, as kube's schema validation does)."""
    try:
        policy = parse_policy(obj)
    except (ValidationError, ValueError):
        return []
    wire = field.mapping(obj.get("spec"))
    if isinstance(policy.spec, PropagationSpec):
        return propagation_errors(policy.spec, wire)
    return override_errors(policy.spec, wire)


def policy_denial(kind: str) -> PolicyDenial:
    """karmada-webhook's refusal of a ``kind`` policy on a create (and an update, where
    :func:`policy_update_denial` adds the update's rules)."""
    webhook = WEBHOOKS[kind]

    def denial(obj: dict[str, Any]) -> Denial | None:
        too_long = _name_too_long(kind, obj)
        if too_long is not None:
            return too_long
        errors = _spec_errors(obj)
        return (webhook, field.error_list_text(errors)) if errors else None

    return denial


def _label(obj: Mapping[str, Any], key: str) -> Any:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels.get(key) if isinstance(labels, Mapping) else None


def _scheduler_name(obj: Mapping[str, Any]) -> Any:
    spec = obj.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return name or DEFAULT_SCHEDULER_NAME


def policy_update_denial(kind: str) -> PolicyUpdateDenial | None:
    """karmada-webhook's refusal of an update of a ``kind`` policy: a propagation policy's
    ``schedulerName`` may not change, then the create's rules; None for the override kinds,
    whose webhook checks an update as a create."""
    if not kind.endswith("PropagationPolicy"):
        return None
    on_create = policy_denial(kind)
    webhook, label = WEBHOOKS[kind], PERMANENT_ID_LABELS[kind]

    def denial(new: dict[str, Any], old: dict[str, Any]) -> Denial | None:
        too_long = _name_too_long(kind, new)
        if too_long is not None:  # the mutating webhook's, which runs first
            return too_long
        if _scheduler_name(new) != _scheduler_name(old):
            return webhook, "the schedulerName should not be updated"
        if (kept := _label(old, label)) is not None and _label(new, label) != kept:
            return webhook, f"label {label} is immutable, it can only be set by the system during creation"
        return on_create(new)

    return denial
