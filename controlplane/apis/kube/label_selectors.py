"""``metav1.LabelSelector`` as kube validates and matches it in workload specs.

``selector_errors`` is ``ValidateLabelSelector`` (matchLabels keys and values, each
requirement's operator, key and values); ``matches`` is ``LabelSelectorAsSelector(...)
.Matches(labels)``, where a missing selector matches nothing and an empty one everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import label_value_errors, qualified_name_errors
from controlplane.apis.kube.validate_pod import labels_errors
from controlplane.apis.pods import requirement_matches

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_errors(selector: Any, path: str) -> list[FieldError]:
    """``ValidateLabelSelector`` of a selector that is set (strict label values)."""
    selector = field.mapping(selector)
    errors = labels_errors(selector.get("matchLabels"), f"{path}.matchLabels")
    for index_path, expr in field.indexed(selector.get("matchExpressions"), f"{path}.matchExpressions"):
        operator, values = expr.get("operator"), field.items(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(field.required(
                    f"{index_path}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                ))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(field.forbidden(
                    f"{index_path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                ))
        else:
            errors.append(field.invalid(f"{index_path}.operator", operator, "not a valid selector operator"))
        key = expr.get("key")
        errors += [field.invalid(f"{index_path}.key", key, msg) for msg in qualified_name_errors(str(key or ""))]
        for j, value in enumerate(values):
            errors += [
                field.invalid(f"{index_path}.values[{j}]", value, msg) for msg in label_value_errors(str(value))
            ]
    return errors


def is_empty(selector: Any) -> bool:
    """A selector that is set but selects by nothing (``{}``)."""
    selector = field.mapping(selector)
    return not field.mapping(selector.get("matchLabels")) and not field.items(selector.get("matchExpressions"))


def matches(selector: Any, labels: Mapping[str, Any] | None) -> bool:
    """Whether ``labels`` are selected; a missing selector selects nothing."""
    if not isinstance(selector, dict):
        return False
    labels = labels or {}
    for key, value in field.mapping(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in field.items(selector.get("matchExpressions")):
        expr = field.mapping(expr)
        have = labels.get(str(expr.get("key")))
        values = [str(v) for v in field.items(expr.get("values"))]
        if not requirement_matches(str(expr.get("operator")), values, None if have is None else str(have)):
            return False
    return True


def normalized(selector: Any) -> Any:
    """A selector compared as kube compares it semantically: empty parts are absent."""
    if not isinstance(selector, dict):
        return selector
    return {k: v for k, v in selector.items() if v not in (None, {}, [])}


def shown(selector: Any) -> Any:
    """The selector as kube prints it in a message (``v1.LabelSelector{...}``)."""
    return field.go_label_selector(selector) if isinstance(selector, dict) else selector


def template_match_errors(selector: Any, template: Any, path: str) -> list[FieldError]:
    """The template's labels must be selected (unless the selector is set and empty)."""
    if isinstance(selector, dict) and is_empty(selector):
        return []
    raw = field.mapping(field.mapping(template).get("metadata")).get("labels")
    labels = field.mapping(raw)
    if matches(selector, labels):
        return []
    return [field.invalid(
        f"{path}.metadata.labels",
        field.go_string_map(labels if isinstance(raw, dict) else None),
        "`selector` does not match template `labels`",
    )]
