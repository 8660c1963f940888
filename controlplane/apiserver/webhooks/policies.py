"""ValidatingAdmissionPolicies and their bindings: compiled once from their stored objects, matched
and evaluated for one write as kube's ``policy/validating`` plugin does (``validator.go``).

In: stored (defaulted, validated) policies and bindings; per write, the request's CEL variables
(``object``, ``oldObject``, ``request``, ``namespaceObject``, ``params``). Out: :class:`Decision`
values — admit, or deny with kube's message and reason. A policy's ``matchConstraints`` and a
binding's ``matchResources`` select writes as a webhook's rules and selectors do
(:mod:`.matching`), with ``resourceNames`` and ``excludeResourceRules``. ``matchConditions`` must
all be true (any false: the policy does not apply; an error: its ``failurePolicy``).
``variables`` are evaluated once per evaluation, in order; one that fails is an error only for the
expressions reading it. Cost is bounded statically when a policy is written
(:func:`~controlplane.apis.apiextensions.cel.compile_error`); it is not metered at run time.
Pure: no I/O (``authorizer`` checks call the function the caller gives).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from controlplane.apis.apiextensions import cel
from controlplane.apis.kube import field
from controlplane.apiserver.admission import WebhookRequest
from controlplane.apiserver.resources import Registry, ResourceType
from controlplane.apiserver.webhooks import matching
from controlplane.apiserver.webhooks.expressions import (
    Expression,
    conditions_match,
    evaluation_error,
    expression,
)

#: kube drops a messageExpression's result longer than this (and one with a line break).
MAX_MESSAGE_BYTES = 5 * 1024
#: kube cuts an audit annotation's value to this many bytes.
MAX_AUDIT_ANNOTATION_BYTES = 10 * 1024


@dataclass(frozen=True, slots=True)
class Match:
    """A policy's ``matchConstraints`` or a binding's ``matchResources``."""

    rules: tuple[dict[str, Any], ...]
    excluded: tuple[dict[str, Any], ...]
    namespace_selector: dict[str, Any]
    object_selector: dict[str, Any]
    match_policy: str = "Equivalent"


def _match(raw: Any) -> Match | None:
    if not isinstance(raw, dict):
        return None
    return Match(
        rules=tuple(field.mapping(rule) for rule in field.items(raw.get("resourceRules"))),
        excluded=tuple(field.mapping(rule) for rule in field.items(raw.get("excludeResourceRules"))),
        namespace_selector=field.mapping(raw.get("namespaceSelector")),
        object_selector=field.mapping(raw.get("objectSelector")),
        match_policy=str(raw.get("matchPolicy") or "Equivalent"),
    )


@dataclass(frozen=True, slots=True)
class Validation:
    expression: Expression
    message: str
    message_expression: Expression | None
    reason: str


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    failure_policy: str
    #: ``paramKind`` as (apiVersion, kind).
    param_kind: tuple[str, str] | None
    match: Match
    match_conditions: tuple[Expression, ...]
    variables: tuple[tuple[str, Expression], ...]
    validations: tuple[Validation, ...]
    #: Whether an expression reads ``namespaceObject`` (only then is the namespace read).
    reads_namespace: bool
    #: ``auditAnnotations``: each key with its compiled ``valueExpression``.
    audit_annotations: tuple[tuple[str, Expression], ...] = ()

    @property
    def fails_open(self) -> bool:
        return self.failure_policy == "Ignore"


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    policy: str
    actions: tuple[str, ...]
    param_ref: dict[str, Any] | None
    match: Match | None


def policy_of(obj: dict[str, Any]) -> Policy:
    """The policy compiled from its stored object (expressions compiled here, once per change)."""
    spec = field.mapping(obj.get("spec"))
    kind = field.mapping(spec.get("paramKind"))
    validations = []
    for raw in field.items(spec.get("validations")):
        raw = field.mapping(raw)
        message_expression = raw.get("messageExpression")
        validations.append(Validation(
            expression=expression(str(raw.get("expression") or "")),
            message=str(raw.get("message") or ""),
            message_expression=expression(message_expression) if isinstance(message_expression, str) and message_expression.strip() else None,
            reason=str(raw.get("reason") or "Invalid"),
        ))
    conditions = tuple(expression(str(field.mapping(c).get("expression") or "")) for c in field.items(spec.get("matchConditions")))
    variables = tuple(
        (str(field.mapping(v).get("name") or ""), expression(str(field.mapping(v).get("expression") or "")))
        for v in field.items(spec.get("variables"))
    )
    annotations = tuple(
        (str(field.mapping(a).get("key") or ""), expression(str(field.mapping(a).get("valueExpression") or "")))
        for a in field.items(spec.get("auditAnnotations"))
    )
    sources = [e.source for e in conditions] + [e.source for _, e in (*variables, *annotations)]
    sources += [s for v in validations for s in (v.expression.source, v.message_expression.source if v.message_expression else "")]
    return Policy(
        name=str(field.mapping(obj.get("metadata")).get("name") or ""),
        failure_policy=str(spec.get("failurePolicy") or "Fail"),
        param_kind=(str(kind.get("apiVersion") or ""), str(kind.get("kind") or "")) if kind else None,
        match=_match(spec.get("matchConstraints")) or Match((), (), {}, {}),
        match_conditions=conditions,
        variables=variables,
        validations=tuple(validations),
        reads_namespace=any(re.search(r"\bnamespaceObject\b", s) for s in sources),
        audit_annotations=annotations,
    )


def binding_of(obj: dict[str, Any]) -> Binding:
    spec = field.mapping(obj.get("spec"))
    return Binding(
        name=str(field.mapping(obj.get("metadata")).get("name") or ""),
        policy=str(spec.get("policyName") or ""),
        actions=tuple(str(a) for a in field.items(spec.get("validationActions"))),
        param_ref=field.mapping(spec.get("paramRef")) or None,
        match=_match(spec.get("matchResources")),
    )


# --- matching ---------------------------------------------------------------------------


def matched_resource(match: Match, request: WebhookRequest, registry: Registry) -> ResourceType | None:
    """The rules part of kube's policy matcher: no excluded rule matches the write, and a resource
    rule does, naming its own resource or (``matchPolicy: Equivalent``) an equivalent one, which is
    returned (None: no match). A match without resource rules (a binding's ``matchResources`` may
    have none) takes every write, as the request's own resource. (The selectors are
    :func:`~.matching.namespace_matches` and :func:`~.matching.object_matches`.)"""
    if any(matching.rule_matches(rule, request) for rule in match.excluded):
        return None
    if not match.rules:
        return request.resource
    return matching.matched_type(match, request, registry)


# --- evaluation -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """One validation's outcome (or the policy's, for an error before its validations): a denial,
    or (``denied`` false) an evaluation error ignored under ``failurePolicy: Ignore``, which kube's
    dispatcher only counts."""

    denied: bool
    message: str = ""
    reason: str = "Invalid"
    #: An audit annotation's error under ``failurePolicy: Fail``: kube denies the write whatever
    #: the binding's actions.
    denies_always: bool = False


def _error(policy: Policy, message: str) -> list[Decision]:
    """An evaluation error: its failure policy decides (kube's ``policyDecisionActionForError``)."""
    return [Decision(not policy.fails_open, message)]


def evaluate(
    policy: Policy, variables: dict[str, Any], functions: dict[str, Any] | None = None,
    annotations: list[tuple[str, str]] | None = None,
) -> list[Decision]:
    """The decisions of ``policy`` for one write (and one param): the denials and ignored errors, in its order.
    ``variables``: ``object``, ``oldObject``, ``request``, ``namespaceObject``, ``params`` (and
    ``authorizer``, with its ``functions``: :func:`.expressions.authorizer_functions`). The audit
    annotations to publish are added to ``annotations`` (key, value), as kube's validator does."""
    context = cel.activation({**variables, "variables": {}}, functions)
    if policy.match_conditions:
        matches, error = conditions_match(policy.match_conditions, context, fails_open=policy.fails_open)
        if error is not None:
            return [Decision(True, f"failed to evaluate matchConditions for policy {policy.name}: {error}")]
        if not matches:
            return []
    failed: dict[str, str] = {}
    if policy.variables:
        values: dict[str, Any] = {}
        for name, variable in policy.variables:
            try:
                values[name] = cel.execute(variable.program, cel.activation({**variables, "variables": values}, functions))
            except cel.EvaluationError as exc:
                failed[name] = evaluation_error(variable.source, exc)
        context = cel.activation({**variables, "variables": values}, functions)
    out: list[Decision] = []
    for validation in policy.validations:
        check = validation.expression
        broken = [failed[name] for name in check.reads if name in failed]
        if broken:
            out += _error(policy, broken[0])
            continue
        try:
            result = cel.execute(check.program, context)
        except cel.EvaluationError as exc:
            out += _error(policy, evaluation_error(check.source, exc))
            continue
        if result is True:
            continue
        if result is not False:
            out += _error(policy, evaluation_error(check.source, TypeError("expected a bool result")))
            continue
        out.append(Decision(True, _message(validation, context), validation.reason))
    for key, value_expression in policy.audit_annotations:
        value, error = _audit_annotation(policy, value_expression, context, failed)
        if error is not None:
            out.append(Decision(True, error, denies_always=True))
        elif value and annotations is not None:
            annotations.append((key, value))
    return out


_CEL_TYPES = ((bool, "bool"), (int, "int"), (float, "double"), (bytes, "bytes"), (list, "list"), (dict, "map"))


def _audit_annotation(
    policy: Policy, value_expression: Expression, context: Any, failed: dict[str, str]
) -> tuple[str | None, str | None]:
    """kube's audit annotation result: (the value, or None to leave it out; an error that denies).
    A string is trimmed (empty: left out), null is left out, another type is an error whatever
    the failure policy; an evaluation error denies under ``Fail`` and is left out under ``Ignore``."""
    broken = [failed[name] for name in value_expression.reads if name in failed]
    try:
        if broken:
            raise _Failed(broken[0])
        try:
            result = cel.execute(value_expression.program, context)
        except cel.EvaluationError as exc:
            raise _Failed(evaluation_error(value_expression.source, exc)) from None
    except _Failed as exc:
        return None, None if policy.fails_open else str(exc)
    if result is None:
        return None, None
    if isinstance(result, str):
        value = result.strip().encode()[:MAX_AUDIT_ANNOTATION_BYTES].decode("utf-8", "ignore")
        return value or None, None
    type_name = next((name for kind, name in _CEL_TYPES if isinstance(result, kind)), type(result).__name__)
    return None, (
        f"valueExpression '{value_expression.source}' resulted in unsupported return type: {type_name}. "
        "Return type must be either string or null."
    )


class _Failed(Exception):
    pass


def _message(validation: Validation, context: Any) -> str:
    """kube's message of a failed validation: its messageExpression's result (trimmed; dropped
    when it fails, is empty, too long or has a line break), its message, or ``failed expression``."""
    if validation.message_expression is not None:
        try:
            produced = cel.execute(validation.message_expression.program, context)
        except cel.EvaluationError:
            produced = None
        if isinstance(produced, str):
            produced = produced.strip()
            if produced and "\n" not in produced and len(produced.encode()) <= MAX_MESSAGE_BYTES:
                return produced
    if validation.message.strip():
        return validation.message.strip()
    return f"failed expression: {validation.expression.source.strip()}"
