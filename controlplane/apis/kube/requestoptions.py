"""The checks kube-apiserver makes of a write's options before it reads the object
(k8s.io/apimachinery ``pkg/apis/meta/v1/validation``): Create, Update, Patch and DeleteOptions.

Each function returns every field error kube finds, in kube's order; the API server answers
them as one 422 naming the options' kind (``PatchOptions.meta.k8s.io "" is invalid: [...]``).
Pure: the options' values in, :class:`FieldError` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from controlplane.apis.kube.field import (
    FieldError,
    forbidden,
    go_strings,
    invalid,
    not_supported,
    required,
    too_long,
)
from controlplane.apis.kube.garbagecollection import DeletionPropagation

#: kube's ``FieldManagerMaxLength``, in bytes.
FIELD_MANAGER_MAX_LENGTH: Final = 128
DRY_RUN_VALUES: Final = ("All",)
#: ``fieldValidation`` as kube accepts it: exactly these, the empty one meaning its default.
FIELD_VALIDATION_VALUES: Final = ("", "Ignore", "Strict", "Warn")
#: What kube names as the ``propagationPolicy`` values it supports ("nil": the field left out).
PROPAGATION_POLICY_VALUES: Final = ("Foreground", "Background", "Orphan", "nil")


def field_manager_errors(manager: str, path: str = "fieldManager") -> list[FieldError]:
    """``ValidateFieldManager``: at most 128 bytes, and each unprintable character (Go's
    ``unicode.IsPrint``, which Python's ``isprintable`` matches) an error naming its byte offset."""
    found: list[FieldError] = []
    if len(manager.encode("utf-8", "surrogatepass")) > FIELD_MANAGER_MAX_LENGTH:
        found.append(too_long(path, FIELD_MANAGER_MAX_LENGTH))
    offset = 0
    for char in manager:
        if not char.isprintable():
            found.append(invalid(path, manager, f"invalid character U+{ord(char):04X} (at position {offset})"))
        offset += len(char.encode("utf-8", "surrogatepass"))
    return found


def dry_run_errors(values: Sequence[str]) -> list[FieldError]:
    """``ValidateDryRun``: every value ``All``; kube shows the whole list as Go prints it."""
    if all(value in DRY_RUN_VALUES for value in values):
        return []
    return [not_supported("dryRun", go_strings(values), DRY_RUN_VALUES)]


def field_validation_errors(value: str) -> list[FieldError]:
    """``ValidateFieldValidation``: one of kube's directives, spelled as kube spells them."""
    return [] if value in FIELD_VALIDATION_VALUES else [not_supported("fieldValidation", value, FIELD_VALIDATION_VALUES)]


def write_options_errors(*, manager: str, dry_run: Sequence[str], field_validation: str) -> list[FieldError]:
    """``ValidateCreateOptions`` and ``ValidateUpdateOptions``."""
    return [*field_manager_errors(manager), *dry_run_errors(dry_run), *field_validation_errors(field_validation)]


def patch_options_errors(
    *, apply: bool, force_given: bool, manager: str, dry_run: Sequence[str], field_validation: str
) -> list[FieldError]:
    """``ValidatePatchOptions``: ``force`` only on an apply, which must name its field manager."""
    found: list[FieldError] = []
    if not apply and force_given:
        found.append(forbidden("force", "may not be specified for non-apply patch"))
    elif apply and not manager:
        found.append(required("fieldManager", "is required for apply patch"))
    return found + write_options_errors(manager=manager, dry_run=dry_run, field_validation=field_validation)


def delete_options_errors(*, policy: str | None, orphan: bool | None, dry_run: Sequence[str]) -> list[FieldError]:
    """``ValidateDeleteOptions``: a known ``propagationPolicy``, not given with the legacy
    ``orphanDependents``, and ``dryRun`` values kube knows."""
    found: list[FieldError] = []
    if orphan is not None and policy is not None:
        found.append(invalid("propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in {p.value for p in DeletionPropagation}:
        found.append(not_supported("propagationPolicy", policy, PROPAGATION_POLICY_VALUES))
    return found + dry_run_errors(dry_run)
