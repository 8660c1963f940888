"""Field errors, as k8s.io/apimachinery/pkg/util/validation/field reports them.

A :class:`FieldError` is one problem with one field: its type (the ``Status`` cause
reason kube sends), the field path (``spec.template.spec.containers[0].image``) and the
message kube writes for it. The API server turns a list of them into one 422 ``Invalid``
``Status`` with a cause each.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorType(StrEnum):
    """``field.ErrorType`` as sent in ``Status.details.causes[].reason``."""

    INVALID = "FieldValueInvalid"
    REQUIRED = "FieldValueRequired"
    NOT_SUPPORTED = "FieldValueNotSupported"
    DUPLICATE = "FieldValueDuplicate"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"


@dataclass(frozen=True, slots=True)
class FieldError:
    type: ErrorType
    #: The field's path as kube prints it: ``spec.replicas``, ``spec.template.spec.containers[0].name``.
    field: str
    #: The whole message of the cause, as kube writes it (``Invalid value: -2: must be greater
    #: than or equal to 0``).
    message: str
