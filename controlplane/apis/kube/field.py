"""Field errors, as k8s.io/apimachinery/pkg/util/validation/field reports them.

A :class:`FieldError` is one problem with one field: its type (the ``Status`` cause
reason kube sends), the field path (``spec.template.spec.containers[0].image``) and the
message kube writes for it. The API server turns a list of them into one 422 ``Invalid``
``Status`` with a cause each.

The constructors (:func:`invalid`, :func:`required`, ...) write the message as kube's
``Error.ErrorBody`` does: the type's words, the bad value as Go prints it, then the detail
(``Invalid value: -2: must be greater than or equal to 0``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# go_float and go_printed are re-exported for the API rules that print values.
from controlplane.gojson import go_float as go_float
from controlplane.gojson import go_printed as go_printed
from controlplane.gojson import go_quote


class CauseType(StrEnum):
    """``Status.details.causes[].reason`` (metav1.CauseType): the ``FieldValue*`` reasons of field
    errors (kube's ``field.ErrorType`` takes the same values) and the other causes of the API
    server's ``Status`` errors."""

    FIELD_VALUE_NOT_FOUND = "FieldValueNotFound"
    FIELD_VALUE_INVALID = "FieldValueInvalid"
    FIELD_VALUE_REQUIRED = "FieldValueRequired"
    FIELD_VALUE_NOT_SUPPORTED = "FieldValueNotSupported"
    FIELD_VALUE_DUPLICATE = "FieldValueDuplicate"
    FIELD_VALUE_FORBIDDEN = "FieldValueForbidden"
    FIELD_VALUE_TOO_LONG = "FieldValueTooLong"
    FIELD_VALUE_TOO_MANY = "FieldValueTooMany"
    FIELD_VALUE_UNKNOWN = "FieldValueUnknown"
    FIELD_VALUE_TYPE_INVALID = "FieldValueTypeInvalid"
    FIELD_MANAGER_CONFLICT = "FieldManagerConflict"
    UNEXPECTED_SERVER_RESPONSE = "UnexpectedServerResponse"
    RESOURCE_VERSION_TOO_LARGE = "ResourceVersionTooLarge"
    #: v1.NamespaceTerminatingCause: content refused in a namespace being deleted.
    NAMESPACE_TERMINATING = "NamespaceTerminating"


#: The schema errors after which kube's CRD strategy runs none of the CRD's rules (``hasBlockingErr``).
CRD_RULES_BLOCKED_BY: frozenset[str] = frozenset({
    CauseType.FIELD_VALUE_TYPE_INVALID, CauseType.FIELD_VALUE_REQUIRED, CauseType.FIELD_VALUE_NOT_SUPPORTED,
    CauseType.FIELD_VALUE_TOO_LONG, CauseType.FIELD_VALUE_TOO_MANY,
})


def blocks_rules(reason: str, *, built_in: bool) -> bool:
    """Whether an error of ``reason`` found before a kind's own rules keeps them from running, so
    that they read only an object they can: for a built-in kind a value of another type (kube's
    decoding refuses it before validation), for a CRD's (and an operator's) kind any error kube's
    CRD strategy deems blocking (:data:`CRD_RULES_BLOCKED_BY`)."""
    return reason == CauseType.FIELD_VALUE_TYPE_INVALID if built_in else reason in CRD_RULES_BLOCKED_BY


@dataclass(frozen=True, slots=True)
class FieldError:
    type: CauseType
    #: The field's path as kube prints it: ``spec.replicas``, ``spec.template.spec.containers[0].name``.
    field: str
    #: The whole message of the cause, as kube writes it (``Invalid value: -2: must be greater
    #: than or equal to 0``).
    message: str


class GoValue:
    """A bad value kube prints in Go syntax (``%#v`` of a struct), given as that text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def go_strings(values: Sequence[Any] | None, type_name: str = "string") -> GoValue:
    """``%#v`` of a ``[]string`` (or of another slice of strings: ``type_name``), as kube prints
    one in its errors: ``[]string{"a", "b"}``; None is Go's nil slice, ``[]string(nil)``."""
    if values is None:
        return GoValue(f"[]{type_name}(nil)")
    return GoValue(f"[]{type_name}{{" + ", ".join(go_quote(str(v)) for v in values) + "}")


def go_string_map(value: Mapping[str, Any] | None) -> GoValue:
    """``%#v`` of a ``map[string]string``: keys sorted, as Go's fmt prints maps."""
    if value is None:
        return GoValue("map[string]string(nil)")
    pairs = ", ".join(f"{go_quote(str(k))}:{go_quote(str(v))}" for k, v in sorted(value.items()))
    return GoValue("map[string]string{" + pairs + "}")


def go_label_selector(selector: Mapping[str, Any]) -> GoValue:
    """``%#v`` of a ``metav1.LabelSelector``, as kube prints an immutable or empty selector."""
    labels = selector.get("matchLabels")
    match_labels = go_string_map(labels if isinstance(labels, Mapping) else None).text
    exprs = selector.get("matchExpressions")
    if not isinstance(exprs, list) or not exprs:
        expressions = "[]v1.LabelSelectorRequirement(nil)"
    else:
        parts = []
        for expr in exprs:
            expr = expr if isinstance(expr, Mapping) else {}
            values = expr.get("values")
            shown = go_strings(values if isinstance(values, list) and values else None).text
            parts.append(
                f"v1.LabelSelectorRequirement{{Key:{go_quote(str(expr.get('key') or ''))}, "
                f'Operator:"{expr.get("operator") or ""}", Values:{shown}}}'
            )
        expressions = "[]v1.LabelSelectorRequirement{" + ", ".join(parts) + "}"
    return GoValue(f"v1.LabelSelector{{MatchLabels:{match_labels}, MatchExpressions:{expressions}}}")


def show(value: Any) -> str:
    """The bad value as kube's ``ErrorBody`` prints it: numbers and booleans bare, strings
    quoted, nil as ``null``; structures kube prints with ``%#v`` are given as :class:`GoValue`,
    anything else is shown as compact JSON."""
    if value is None:
        return "null"
    if isinstance(value, GoValue):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _with_detail(head: str, detail: str) -> str:
    return f"{head}: {detail}" if detail else head


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_INVALID, path, _with_detail(f"Invalid value: {show(value)}", detail))


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_REQUIRED, path, _with_detail("Required value", detail))


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_FORBIDDEN, path, _with_detail("Forbidden", detail))


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_DUPLICATE, path, f"Duplicate value: {show(value)}")


def not_found(path: str, value: Any) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_NOT_FOUND, path, f"Not found: {show(value)}")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    quoted = ", ".join(go_quote(v) for v in supported)
    return FieldError(
        CauseType.FIELD_VALUE_NOT_SUPPORTED, path, _with_detail(f"Unsupported value: {show(value)}", f"supported values: {quoted}")
    )


def too_long(path: str, max_length: int) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_TOO_LONG, path, f"Too long: may not be more than {max_length} bytes")


def too_many(path: str, actual: int, maximum: int) -> FieldError:
    return FieldError(
        CauseType.FIELD_VALUE_TOO_MANY, path, f"Too many: {actual}: must have at most {maximum} item{'' if maximum == 1 else 's'}"
    )


def aggregate(messages: list[str]) -> str:
    """kube's ``utilerrors.NewAggregate`` text: one error alone, several as ``[a, b]``."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def error_list_text(errors: Iterable[FieldError]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: each error as ``<field>: <message>``, aggregated."""
    return aggregate([f"{error.field}: {error.message}" for error in errors])


IS_NEGATIVE = "must be greater than or equal to 0"
IMMUTABLE = "field is immutable"


def nonnegative(value: Any, path: str) -> list[FieldError]:
    """``ValidateNonnegativeField``: an integer field that must not be below zero."""
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int):
        return [invalid(path, value, "must be an integer")]
    return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []


def immutable(new: Any, old: Any, path: str, *, shown: Any = None) -> list[FieldError]:
    """``ValidateImmutableField``: ``new`` must equal ``old`` (``shown``: the value as kube prints it)."""
    if new == old:
        return []
    return [invalid(path, new if shown is None else shown, IMMUTABLE)]


def mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is an object, else an empty one: validators walk any JSON safely."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def indexed(value: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each entry of the list ``value`` as an object (see :func:`mapping`), with its path ``path[i]``."""
    for i, entry in enumerate(items(value)):
        yield f"{path}[{i}]", mapping(entry)
