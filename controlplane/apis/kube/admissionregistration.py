"""ValidatingWebhookConfiguration and MutatingWebhookConfiguration (admissionregistration.k8s.io/v1):
kube's v1 defaults (``pkg/apis/admissionregistration/v1/defaults.go``) and validation
(``pkg/apis/admissionregistration/validation/validation.go`` with v1's options, and
``apiserver/pkg/util/webhook/validation.go`` for a client's URL and service), with kube's messages.

In: a configuration object (and, on update, the stored one). Out: the object defaulted in place,
or kube's field errors. The rules of one webhook (what it matches) are read by
:mod:`controlplane.apiserver.webhooks.matching`.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.apiextensions.cel import compile_error
from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, go_strings
from controlplane.apis.kube.label_selectors import selector_errors
from controlplane.apis.kube.names import dns_subdomain_errors, qualified_name_errors
from controlplane.apis.kube.webhookclient import (
    ACCEPTED_REVIEW_VERSIONS,
    client_config_errors,
    review_versions_errors,
)
from controlplane.apis.untyped import Obj

FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")  # v1 takes only the classes without side effects
_REINVOCATION_POLICIES = ("IfNeeded", "Never")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_MAX_MATCH_CONDITIONS = 64


# --- defaults ---------------------------------------------------------------------------


def validating_webhook_configuration(obj: Obj) -> None:
    """``SetDefaults_ValidatingWebhook`` (and its rules' and service's) for each webhook."""
    for hook in field.items(obj.get("webhooks")):
        if isinstance(hook, dict):
            _default_webhook(hook)


def mutating_webhook_configuration(obj: Obj) -> None:
    """``SetDefaults_MutatingWebhook``: a validating webhook's defaults and ``reinvocationPolicy: Never``."""
    for hook in field.items(obj.get("webhooks")):
        if isinstance(hook, dict):
            _default_webhook(hook)
            hook.setdefault("reinvocationPolicy", "Never")


def _default_webhook(hook: Obj) -> None:
    # sideEffects and admissionReviewVersions have no default in v1: they are required.
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    if hook.get("namespaceSelector") is None:
        hook["namespaceSelector"] = {}
    if hook.get("objectSelector") is None:
        hook["objectSelector"] = {}
    hook.setdefault("timeoutSeconds", 10)
    for rule in field.items(hook.get("rules")):
        if isinstance(rule, dict) and rule.get("scope") is None:
            rule["scope"] = "*"
    service = field.mapping(field.mapping(hook.get("clientConfig")).get("service"))
    if service and service.get("port") is None:
        service["port"] = 443


# --- validation -------------------------------------------------------------------------


def validate_validating_webhook_configuration(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateValidatingWebhookConfiguration`` (and its update)."""
    return _validate_configuration(obj, old, mutating=False)


def validate_mutating_webhook_configuration(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateMutatingWebhookConfiguration`` (and its update)."""
    return _validate_configuration(obj, old, mutating=True)


def _validate_configuration(obj: Obj, old: Obj | None, *, mutating: bool) -> list[FieldError]:
    # kube requires unique names on create, and on update unless the stored object had duplicates.
    unique = old is None or _names_unique(old)
    errors: list[FieldError] = []
    seen: set[str] = set()
    for path, hook in field.indexed(obj.get("webhooks"), "webhooks"):
        errors += webhook_errors(hook, path, mutating=mutating)
        errors += review_versions_errors(
            hook.get("admissionReviewVersions"), f"{path}.admissionReviewVersions",
            required_detail=f"must specify one of {', '.join(ACCEPTED_REVIEW_VERSIONS)}",
        )
        name = hook.get("name")
        if unique and isinstance(name, str) and name:
            if name in seen:
                errors.append(field.duplicate(f"{path}.name", name))
            seen.add(name)
    return errors


def _names_unique(obj: Obj) -> bool:
    names = [field.mapping(hook).get("name") for hook in field.items(obj.get("webhooks"))]
    return len(names) == len(set(map(str, names)))


def webhook_errors(hook: Obj, path: str, *, mutating: bool) -> list[FieldError]:
    """``validateValidatingWebhook``/``validateMutatingWebhook`` with v1's options (the review
    versions and the name's uniqueness are the configuration's checks, after these)."""
    errors = _fully_qualified_name_errors(str(hook.get("name") or ""), f"{path}.name")
    for rule_path, rule in field.indexed(hook.get("rules"), f"{path}.rules"):
        errors += rule_errors(rule, rule_path)
    errors += one_of(hook.get("failurePolicy"), FAILURE_POLICIES, f"{path}.failurePolicy")
    errors += one_of(hook.get("matchPolicy"), MATCH_POLICIES, f"{path}.matchPolicy")
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errors.append(field.required(f"{path}.sideEffects", f"must specify one of {', '.join(_SIDE_EFFECTS)}"))
    else:
        errors += one_of(side_effects, _SIDE_EFFECTS, f"{path}.sideEffects")
    timeout = hook.get("timeoutSeconds")
    if isinstance(timeout, int) and not 1 <= timeout <= 30:
        errors.append(field.invalid(
            f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds"
        ))
    if hook.get("namespaceSelector") is not None:
        errors += selector_errors(hook["namespaceSelector"], f"{path}.namespaceSelector")
    if hook.get("objectSelector") is not None:
        errors += selector_errors(hook["objectSelector"], f"{path}.objectSelector")
    errors += match_conditions_errors(hook.get("matchConditions"), f"{path}.matchConditions")
    if mutating:
        errors += one_of(hook.get("reinvocationPolicy"), _REINVOCATION_POLICIES, f"{path}.reinvocationPolicy")
    return errors + client_config_errors(field.mapping(hook.get("clientConfig")), f"{path}.clientConfig")


def one_of(value: Any, supported: tuple[str, ...], path: str) -> list[FieldError]:
    return [] if value is None or value in supported else [field.not_supported(path, value, supported)]


def match_conditions_errors(conditions: Any, path: str) -> list[FieldError]:
    """``validateMatchConditions``: a webhook's or a policy's (at most 64, unique names, compiling)."""
    conditions = field.items(conditions)
    errors: list[FieldError] = []
    if len(conditions) > _MAX_MATCH_CONDITIONS:
        errors.append(field.too_many(path, len(conditions), _MAX_MATCH_CONDITIONS))
    seen: set[str] = set()
    for item_path, condition in field.indexed(conditions, path):
        errors += expression_errors(condition.get("expression"), f"{item_path}.expression", required="")
        name = str(condition.get("name") or "")
        if not name:
            errors.append(field.required(f"{item_path}.name"))
        else:
            errors += [field.invalid(f"{item_path}.name", name, m) for m in qualified_name_errors(name)]
            if name in seen:
                errors.append(field.duplicate(f"{item_path}.name", name))
            seen.add(name)
    return errors


def expression_errors(expression: Any, path: str, *, required: str = "expression is not specified") -> list[FieldError]:
    """A required CEL expression (kube's Required with ``required`` when blank) that must compile
    (kube's ``compilation failed: ...``). Its cost is not estimated: kube compiles a policy's or a
    webhook's expressions with ``object`` untyped (``CompileCELExpression``), so no bound is known
    when it is written (a CRD rule's cost is, from its schema)."""
    if not isinstance(expression, str) or not expression.strip():
        return [field.required(path, required)]
    problem = compile_error(expression)
    if problem is None:
        return []
    return [field.invalid(path, expression, f"compilation failed: {problem}")]


def _fully_qualified_name_errors(name: str, path: str) -> list[FieldError]:
    """``IsFullyQualifiedName``."""
    if not name:
        return [field.required(path)]
    bad = dns_subdomain_errors(name)
    if bad:
        return [field.invalid(path, name, ",".join(bad))]
    if len(name.split(".")) < 3:
        return [field.invalid(path, name, "should be a domain with at least three segments separated by dots")]
    return []


def rule_errors(rule: Obj, path: str) -> list[FieldError]:
    """``validateRuleWithOperations`` (subresources allowed)."""
    operations = field.items(rule.get("operations"))
    errors = _listed_errors(
        operations, f"{path}.operations", "operations", go_type="admissionregistration.OperationType"
    )
    for i, operation in enumerate(operations):
        if operation not in _OPERATIONS:
            errors.append(field.not_supported(f"{path}.operations[{i}]", operation, _OPERATIONS))
    errors += _listed_errors(field.items(rule.get("apiGroups")), f"{path}.apiGroups", "API groups")
    versions = field.items(rule.get("apiVersions"))
    errors += _listed_errors(versions, f"{path}.apiVersions", "API versions")
    errors += [field.required(f"{path}.apiVersions[{i}]") for i, version in enumerate(versions) if not version]
    errors += _resources_errors(field.items(rule.get("resources")), f"{path}.resources")
    errors += one_of(rule.get("scope"), _SCOPES, f"{path}.scope")
    return errors


def _listed_errors(values: list[Any], path: str, what: str, *, go_type: str = "string") -> list[FieldError]:
    """A rule's list: required, and ``*`` alone or not at all."""
    if not values:
        return [field.required(path)]
    if len(values) > 1 and "*" in values:
        return [field.invalid(path, go_strings(values, go_type), f"if '*' is present, must not specify other {what}")]
    return []


def _resources_errors(resources: list[Any], path: str) -> list[FieldError]:
    """``validateResources``: ``x``, ``x/y``, ``*``, ``x/*``, ``*/y``, ``*/*`` without overlaps."""
    errors: list[FieldError] = []
    if not resources:
        errors.append(field.required(path))
    wildcard_subresources: set[str] = set()  # x/*
    wildcard_resources: set[str] = set()  # */x
    double_wildcard = single_wildcard = plain_resource = False
    for i, entry in enumerate(resources):
        entry = str(entry) if entry is not None else ""
        if not entry:
            errors.append(field.required(f"{path}[{i}]"))
            continue
        double_wildcard = double_wildcard or entry == "*/*"
        single_wildcard = single_wildcard or entry == "*"
        resource, slash, sub = entry.partition("/")
        if not slash:
            plain_resource = entry != "*"  # as kube: the last plain entry decides
            continue
        if resource in wildcard_subresources:
            errors.append(field.invalid(f"{path}[{i}]", entry, f"if '{resource}/*' is present, must not specify {entry}"))
        if sub in wildcard_resources:
            errors.append(field.invalid(f"{path}[{i}]", entry, f"if '*/{sub}' is present, must not specify {entry}"))
        if sub == "*":
            wildcard_subresources.add(resource)
        if resource == "*":
            wildcard_resources.add(sub)
    if len(resources) > 1 and double_wildcard:
        errors.append(field.invalid(path, go_strings(resources), "if '*/*' is present, must not specify other resources"))
    if single_wildcard and plain_resource:
        errors.append(field.invalid(
            path, go_strings(resources), "if '*' is present, must not specify other resources without subresources"
        ))
    return errors
