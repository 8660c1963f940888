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
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.label_selectors import selector_errors
from controlplane.apis.kube.names import (
    dns_1035_errors,
    dns_subdomain_errors,
    path_segment_errors,
    qualified_name_errors,
)
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

_REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized")  # sorted, as kube lists them
_ACTIONS = ("Audit", "Deny", "Warn")
_NOT_FOUND_ACTIONS = ("Deny", "Allow")
_CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_CEL_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import",
    "let", "loop", "package", "namespace", "return", "var", "void", "while",
})


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
    """``validateValidatingAdmissionPolicySpec`` (the metadata is checked by the caller)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    if spec.get("failurePolicy") is None:
        errors.append(field.required("spec.failurePolicy"))
    errors += one_of(spec.get("failurePolicy"), FAILURE_POLICIES, "spec.failurePolicy")
    if spec.get("paramKind") is not None:
        errors += _param_kind_errors(field.mapping(spec["paramKind"]), "spec.paramKind")
    if spec.get("matchConstraints") is None:
        errors.append(field.required("spec.matchConstraints"))
    else:
        constraints = field.mapping(spec["matchConstraints"])
        errors += match_resources_errors(constraints, "spec.matchConstraints")
        if not field.items(constraints.get("resourceRules")):
            errors.append(field.required("spec.matchConstraints.resourceRules"))
    errors += match_conditions_errors(spec.get("matchConditions"), "spec.matchConditions")
    for path, variable in field.indexed(spec.get("variables"), "spec.variables"):
        name = str(variable.get("name") or "")
        if not name.strip():
            errors.append(field.required(f"{path}.name", "name is not specified"))
        elif not _CEL_IDENTIFIER.match(name) or name in _CEL_RESERVED:
            errors.append(field.invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
        errors += expression_errors(variable.get("expression"), f"{path}.expression")
    validations, annotations = field.items(spec.get("validations")), field.items(spec.get("auditAnnotations"))
    if not validations and not annotations:
        errors.append(field.required("spec.validations", "validations or auditAnnotations must contain at least one item"))
        errors.append(field.required("spec.auditAnnotations", "validations or auditAnnotations must contain at least one item"))
        return errors
    for path, validation in field.indexed(validations, "spec.validations"):
        errors += _validation_errors(validation, path)
    policy = str(field.mapping(obj.get("metadata")).get("name") or "")
    keys: set[str] = set()
    for path, annotation in field.indexed(annotations, "spec.auditAnnotations"):
        key = str(annotation.get("key") or "")
        if policy:
            errors += [field.invalid(f"{path}.key", f"{policy}/{key}", m) for m in qualified_name_errors(f"{policy}/{key}")]
        errors += expression_errors(annotation.get("valueExpression"), f"{path}.valueExpression",
                                    required="valueExpression is not specified")
        if key in keys:
            errors.append(field.duplicate(f"{path}.key", key))
        keys.add(key)
    return errors


def _param_kind_errors(kind: Obj, path: str) -> list[FieldError]:
    """``validateParamKind``: an ``apiVersion`` kube can parse and a kind-like ``kind``."""
    errors: list[FieldError] = []
    api_version = str(kind.get("apiVersion") or "")
    if not api_version:
        errors.append(field.required(f"{path}.apiVersion"))
    elif api_version.count("/") > 1:
        errors.append(field.invalid(f"{path}.apiVersion", api_version, f"unexpected GroupVersion string: {api_version}"))
    elif api_version != "/":
        group, _, version = api_version.rpartition("/")
        if group and (bad := dns_subdomain_errors(group)):
            errors.append(field.invalid(f"{path}.apiVersion", group, ",".join(bad)))
        if not version:
            errors.append(field.invalid(f"{path}.apiVersion", api_version, "version must be specified"))
        elif bad := dns_1035_errors(version):
            errors.append(field.invalid(f"{path}.apiVersion", version, ",".join(bad)))
    name = str(kind.get("kind") or "")
    if not name:
        errors.append(field.required(f"{path}.kind"))
    elif bad := dns_1035_errors(name.lower()):
        errors.append(field.invalid(f"{path}.kind", name, "may have mixed case, but should otherwise match: " + ",".join(bad)))
    return errors


def match_resources_errors(match: Obj, path: str) -> list[FieldError]:
    """``validateMatchResources`` (a policy's ``matchConstraints``, a binding's ``matchResources``)."""
    errors: list[FieldError] = []
    if match.get("matchPolicy") is None:
        errors.append(field.required(f"{path}.matchPolicy"))
    errors += one_of(match.get("matchPolicy"), MATCH_POLICIES, f"{path}.matchPolicy")
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            errors.append(field.required(f"{path}.{key}"))
        else:
            errors += selector_errors(match[key], f"{path}.{key}")
    for key in ("resourceRules", "excludeResourceRules"):
        for rule_path, rule in field.indexed(match.get(key), f"{path}.{key}"):
            seen: set[str] = set()
            for i, name in enumerate(field.items(rule.get("resourceNames"))):
                name = str(name)
                errors += [field.invalid(f"{rule_path}.resourceNames[{i}]", name, m) for m in path_segment_errors(name)]
                if name in seen:
                    errors.append(field.duplicate(f"{rule_path}.resourceNames[{i}]", name))
                seen.add(name)
            errors += rule_errors(rule, rule_path)
    return errors


def _validation_errors(validation: Obj, path: str) -> list[FieldError]:
    """``validateValidation``: the expression, messageExpression, message and reason."""
    errors = expression_errors(validation.get("expression"), f"{path}.expression")
    message_expression = validation.get("messageExpression")
    if isinstance(message_expression, str) and message_expression:
        if not message_expression.strip():
            errors.append(field.invalid(f"{path}.messageExpression", message_expression, "must be non-empty if specified"))
        else:
            errors += expression_errors(message_expression, f"{path}.messageExpression")
    message = validation.get("message")
    if isinstance(message, str) and message:
        if not message.strip():
            errors.append(field.invalid(f"{path}.message", message, "message must be non-empty if specified"))
        elif re.search(r"[\n\r]", message.strip()):
            errors.append(field.invalid(f"{path}.message", message, "message must not contain line breaks"))
    return errors + one_of(validation.get("reason"), _REASONS, f"{path}.reason")


def validate_validating_admission_policy_binding(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``validateValidatingAdmissionPolicyBindingSpec``."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    policy = str(spec.get("policyName") or "")
    if not policy:
        errors.append(field.required("spec.policyName"))
    else:
        errors += [field.invalid("spec.policyName", policy, m) for m in dns_subdomain_errors(policy)]
    if spec.get("paramRef") is not None:
        errors += _param_ref_errors(field.mapping(spec["paramRef"]), "spec.paramRef")
    if spec.get("matchResources") is not None:
        errors += match_resources_errors(field.mapping(spec["matchResources"]), "spec.matchResources")
    return errors + _validation_actions_errors(field.items(spec.get("validationActions")), "spec.validationActions")


def _param_ref_errors(ref: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name, selector = str(ref.get("name") or ""), ref.get("selector")
    if name:
        errors += [field.invalid(f"{path}.name", name, m) for m in path_segment_errors(name)]
        if selector is not None:
            errors.append(field.forbidden(f"{path}.name", "name and selector are mutually exclusive"))
    if selector is not None:
        errors += selector_errors(selector, f"{path}.selector")
        if name:
            errors.append(field.forbidden(f"{path}.selector", "name and selector are mutually exclusive"))
    if not name and selector is None:
        errors.append(field.required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        errors.append(field.required(f"{path}.parameterNotFoundAction"))
    else:
        errors += one_of(action, _NOT_FOUND_ACTIONS, f"{path}.parameterNotFoundAction")
    return errors


def _validation_actions_errors(actions: list[Any], path: str) -> list[FieldError]:
    """``validateValidationActions``."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        action = str(action)
        errors += one_of(action, _ACTIONS, f"{path}[{i}]")
        if action in seen:
            errors.append(field.duplicate(f"{path}[{i}]", action))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        shown = GoValue("[]admissionregistration.ValidationAction{" + ", ".join(go_quote(str(a)) for a in actions) + "}")
        errors.append(field.invalid(
            path, shown,
            "must not contain both Deny and Warn (repeating the same validation failure information in the API "
            "response and headers serves no purpose)",
        ))
    if not seen:
        errors.append(field.required(path, "at least one validation action is required"))
    return errors
