"""Validation of a ResourceInterpreterWebhookConfiguration, as Karmada's admission webhook does it.

Every ``webhooks[i]`` has a fully qualified domain name (unique in the configuration), rules
naming operations among :data:`OPERATIONS` (``*`` alone) over non-empty ``apiGroups``,
``apiVersions`` and ``kinds`` (``*`` alone), ``timeoutSeconds`` of 1 to 30, a ``clientConfig``
with exactly one of ``url`` (https) and ``service`` (kube's rules for admission webhooks), and
``interpreterContextVersions`` that include ``v1alpha1``. In: the object. Out: kube field
errors (none: valid), with Karmada's messages. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, go_strings
from controlplane.apis.kube.validate_discovery import fully_qualified_domain_name_errors
from controlplane.apis.kube.webhookclient import client_config_errors, review_versions_errors

__all__ = ["CONTEXT_VERSIONS", "OPERATIONS", "validate_webhook_configuration"]

#: The operations a rule may name, as Karmada lists them (sorted).
OPERATIONS: Final = (
    "*", "AggregateStatus", "InterpretDependency", "InterpretHealth", "InterpretReplica", "InterpretStatus",
    "Retain", "ReviseReplica",
)
#: The ResourceInterpreterContext versions the hub sends.
CONTEXT_VERSIONS: Final = ("v1alpha1",)


def validate_webhook_configuration(obj: dict[str, Any], _old: dict[str, Any] | None = None) -> list[FieldError]:
    """The field errors of a ResourceInterpreterWebhookConfiguration (none: valid)."""
    errors: list[FieldError] = []
    names: set[str] = set()
    for path, hook in field.indexed(obj.get("webhooks"), "webhooks"):
        errors += _webhook_errors(hook, path)
        name = str(hook.get("name") or "")
        if name in names:
            errors.append(field.duplicate(f"{path}.name", name))
            continue
        names.add(name)
    return errors


def _webhook_errors(hook: dict[str, Any], path: str) -> list[FieldError]:
    errors = fully_qualified_domain_name_errors(str(hook.get("name") or ""), f"{path}.name")
    for rule_path, rule in field.indexed(hook.get("rules"), f"{path}.rules"):
        errors += _rule_errors(rule, rule_path)
    timeout = hook.get("timeoutSeconds")
    if isinstance(timeout, int) and not 1 <= timeout <= 30:
        errors.append(field.invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds"))
    errors += client_config_errors(field.mapping(hook.get("clientConfig")), f"{path}.clientConfig")
    shown = ", ".join(CONTEXT_VERSIONS)
    errors += review_versions_errors(
        hook.get("interpreterContextVersions"), f"{path}.interpreterContextVersions",
        required_detail=f"must specify one of {shown}", accepted=CONTEXT_VERSIONS,
    )
    return errors


def _rule_errors(rule: dict[str, Any], path: str) -> list[FieldError]:
    """Karmada's ``validateRuleWithOperations`` and ``validateRule``."""
    operations = [str(o) for o in field.items(rule.get("operations"))]
    errors: list[FieldError] = []
    if not operations:
        errors.append(field.required(f"{path}.operations"))
    if len(operations) > 1 and "*" in operations:
        errors.append(
            field.invalid(
                f"{path}.operations", go_strings(operations, "v1alpha1.InterpreterOperation"),
                "if '*' is present, must not specify other operations",
            )
        )
    for i, operation in enumerate(operations):
        if operation not in OPERATIONS:
            errors.append(field.not_supported(f"{path}.operations[{i}]", operation, OPERATIONS))
    for key, words, empty_items in (
        ("apiGroups", "API groups", False), ("apiVersions", "API versions", True), ("kinds", "kinds", True)
    ):
        values = [str(v) for v in field.items(rule.get(key))]
        if not values:
            errors.append(field.required(f"{path}.{key}"))
        if len(values) > 1 and "*" in values:
            errors.append(
                field.invalid(f"{path}.{key}", go_strings(values), f"if '*' is present, must not specify other {words}")
            )
        if empty_items:  # the core group is ""; a version or kind is never empty
            errors += [field.required(f"{path}.{key}[{i}]") for i, value in enumerate(values) if not value]
    return errors
