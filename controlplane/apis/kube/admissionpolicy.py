"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1):
kube's v1 defaults (``pkg/apis/admissionregistration/v1/defaults.go``) and validation
(``pkg/apis/admissionregistration/validation/validation.go``), with kube's messages.

In: a policy or a binding (and, on update, the stored one). Out: the object defaulted in place, or
kube's field errors. A policy's CEL expressions must compile and fit the static cost bound the CRD
rules have (:func:`controlplane.apis.apiextensions.cel.compile_error`). The policies are run by
:mod:`controlplane.apiserver.webhooks.policies`. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.admissionregistration import (
    FAILURE_POLICIES,
    MATCH_POLICIES,
    expression_errors,
    match_conditions_errors,
    one_of,
    rule_errors,
)
from controlplane.apis.kube.field import FieldError, GoValue, go_quote
from controlplane.apis.kube.label_selectors import selector_errors
from controlplane.apis.kube.names import dns_subdomain_errors

Obj = dict[str, Any]

_REASONS = ("Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge")
_ACTIONS = ("Deny", "Warn", "Audit")
_NOT_FOUND_ACTIONS = ("Allow", "Deny")
_CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


# --- defaults ---------------------------------------------------------------------------


def validating_admission_policy(obj: Obj) -> None:
    """``SetDefaults_ValidatingAdmissionPolicySpec`` and its match resources'."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("failurePolicy", "Fail")
        if isinstance(spec.get("matchConstraints"), dict):
            _default_match_resources(spec["matchConstraints"])


def validating_admission_policy_binding(obj: Obj) -> None:
    """``SetDefaults_MatchResources`` of a binding's ``matchResources``."""
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("matchResources"), dict):
        _default_match_resources(spec["matchResources"])


def _default_match_resources(match: Obj) -> None:
    match.setdefault("matchPolicy", "Equivalent")
    if match.get("namespaceSelector") is None:
        match["namespaceSelector"] = {}
    if match.get("objectSelector") is None:
        match["objectSelector"] = {}
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in field.items(match.get(key)):
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = "*"


# --- validation -------------------------------------------------------------------------


def validate_validating_admission_policy(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateValidatingAdmissionPolicy`` (its spec; the metadata is checked by the caller)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    errors += one_of(spec.get("failurePolicy"), FAILURE_POLICIES, "spec.failurePolicy")
    if spec.get("paramKind") is not None:
        errors += _param_kind_errors(field.mapping(spec["paramKind"]), "spec.paramKind")
    if spec.get("matchConstraints") is None:
        errors.append(field.required("spec.matchConstraints"))
    else:
        errors += match_resources_errors(field.mapping(spec["matchConstraints"]), "spec.matchConstraints", policy=True)
    errors += match_conditions_errors(spec.get("matchConditions"), "spec.matchConditions")
    for path, variable in field.indexed(spec.get("variables"), "spec.variables"):
        name = str(variable.get("name") or "")
        if not name:
            errors.append(field.required(f"{path}.name", "name is not specified"))
        elif not _CEL_IDENTIFIER.match(name):
            errors.append(field.invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
        errors += expression_errors(variable.get("expression"), f"{path}.expression")
    validations = field.items(spec.get("validations"))
    if not validations and not field.items(spec.get("auditAnnotations")):
        errors.append(field.required("spec.validations", "validations or auditAnnotations must contain at least one item"))
    for path, validation in field.indexed(validations, "spec.validations"):
        errors += _validation_errors(validation, path)
    return errors


def _param_kind_errors(kind: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    api_version = str(kind.get("apiVersion") or "")
    if not api_version:
        errors.append(field.required(f"{path}.apiVersion"))
    elif api_version.count("/") > 1 or api_version.startswith("/") or api_version.endswith("/"):
        errors.append(field.invalid(f"{path}.apiVersion", api_version, f"unexpected GroupVersion string: {api_version}"))
    if not kind.get("kind"):
        errors.append(field.required(f"{path}.kind"))
    return errors


def match_resources_errors(match: Obj, path: str, *, policy: bool) -> list[FieldError]:
    """``validateMatchResources``: a policy's ``matchConstraints`` must name resource rules."""
    errors: list[FieldError] = []
    if match.get("matchPolicy") is None:
        errors.append(field.required(f"{path}.matchPolicy"))
    errors += one_of(match.get("matchPolicy"), MATCH_POLICIES, f"{path}.matchPolicy")
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            errors.append(field.required(f"{path}.{key}"))
        else:
            errors += selector_errors(match[key], f"{path}.{key}")
    if policy and not field.items(match.get("resourceRules")):
        errors.append(field.required(f"{path}.resourceRules"))
    for key in ("resourceRules", "excludeResourceRules"):
        for rule_path, rule in field.indexed(match.get(key), f"{path}.{key}"):
            errors += rule_errors(rule, rule_path)
            seen: set[str] = set()
            for i, name in enumerate(field.items(rule.get("resourceNames"))):
                name = str(name)
                if name in seen:
                    errors.append(field.duplicate(f"{rule_path}.resourceNames[{i}]", name))
                seen.add(name)
    return errors


def _validation_errors(validation: Obj, path: str) -> list[FieldError]:
    errors = expression_errors(validation.get("expression"), f"{path}.expression")
    message = validation.get("message")
    if isinstance(message, str) and message:
        if not message.strip():
            errors.append(field.invalid(f"{path}.message", message, "message must be non-empty if specified"))
        elif "\n" in message:
            errors.append(field.invalid(f"{path}.message", message, "message must not contain line breaks"))
    message_expression = validation.get("messageExpression")
    if isinstance(message_expression, str) and message_expression:
        if not message_expression.strip():
            errors.append(field.required(f"{path}.messageExpression", "messageExpression must be non-empty if specified"))
        else:
            errors += expression_errors(message_expression, f"{path}.messageExpression", what="messageExpression")
    errors += one_of(validation.get("reason"), _REASONS, f"{path}.reason")
    return errors


def validate_validating_admission_policy_binding(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateValidatingAdmissionPolicyBinding`` (its spec)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    policy = str(spec.get("policyName") or "")
    if not policy:
        errors.append(field.required("spec.policyName"))
    else:
        errors += [field.invalid("spec.policyName", policy, m) for m in dns_subdomain_errors(policy)]
    if spec.get("matchResources") is not None:
        errors += match_resources_errors(field.mapping(spec["matchResources"]), "spec.matchResources", policy=False)
    if spec.get("paramRef") is not None:
        errors += _param_ref_errors(field.mapping(spec["paramRef"]), "spec.paramRef")
    return errors + _validation_actions_errors(field.items(spec.get("validationActions")), "spec.validationActions")


def _param_ref_errors(ref: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name, selector = str(ref.get("name") or ""), ref.get("selector")
    if name:
        errors += [field.invalid(f"{path}.name", name, m) for m in dns_subdomain_errors(name)]
        if selector is not None:
            errors.append(field.forbidden(f"{path}.name", "name and selector are mutually exclusive"))
    if selector is not None:
        errors += selector_errors(selector, f"{path}.selector")
        if name:
            errors.append(field.forbidden(f"{path}.selector", "name and selector are mutually exclusive"))
    if not name and selector is None:
        errors.append(field.required(path, "one of name or selector must be specified"))
    namespace = str(ref.get("namespace") or "")
    errors += [field.invalid(f"{path}.namespace", namespace, m) for m in dns_subdomain_errors(namespace)] if namespace else []
    action = ref.get("parameterNotFoundAction")
    if not action:
        errors.append(field.required(f"{path}.parameterNotFoundAction"))
    else:
        errors += one_of(action, _NOT_FOUND_ACTIONS, f"{path}.parameterNotFoundAction")
    return errors


def _validation_actions_errors(actions: list[Any], path: str) -> list[FieldError]:
    if not actions:
        return [field.required(path)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        action = str(action)
        if action in seen:
            errors.append(field.duplicate(f"{path}[{i}]", action))
        elif action not in _ACTIONS:
            errors.append(field.not_supported(f"{path}[{i}]", action, _ACTIONS))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        shown = GoValue("[]admissionregistration.ValidationAction{" + ", ".join(go_quote(str(a)) for a in actions) + "}")
        errors.append(field.invalid(
            path, shown,
            "must not contain both Deny and Warn (repeating the same validation failure information in the API "
            "response and headers serves no purpose)",
        ))
    return errors
