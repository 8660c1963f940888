"""A write's body as kube's decoder reads it: whole, before anything else.

kube's create and update handlers decode the request's body into the kind before admission and
before the store reads the object (``create.go``, ``update.go``; a patch's result is decoded as
its patcher makes it, before the store compares resourceVersions): under ``fieldValidation=Strict``
an unknown field anywhere in it is the 400 ``strict decoding error``, under ``Warn`` a warning, and
a value of the wrong type is refused in every mode.

The hub's own check of a write (:func:`~controlplane.apiserver.validation.check_object`) sees the
object the write stores: a create or an update of the main resource stores no ``status`` of the
body's, a status write none of the rest. :func:`decoded_dropped` decodes that other part of the
body, where it is not as stored (what the stored object holds already is not refused, as
``check_object`` lets it go), so the whole body is decoded once. The store's refusals (404, the
uid's or the resourceVersion's 409, the 422 of an update that must name one), which the hub meets
before its own check, give way to the decoder's: the writer decodes the body on those error paths.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.objects.values import WriteOptions
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.validation import (
    Checked,
    FieldValidation,
    check_object,
    new_unknown_fields,
    strict_decoding_error,
)

#: What every part of a body is decoded with (the kind's identity).
_TYPE_META = frozenset({"apiVersion", "kind"})


def decoded_dropped(
    rt: ResourceType,
    body: dict[str, Any],
    old: dict[str, Any] | None,
    field_validation: FieldValidation,
    *,
    status_write: bool,
) -> list[str]:
    """Decode the part of ``body`` a write of ``old`` (None: a create) does not store: its
    ``status`` (``status_write`` False; for a kind with a status subresource), or, on a status
    write, all but its status. Returns the warnings to send under Warn; under Strict an unknown
    field there is the decoder's 400 naming every unknown field of the body, as kube's does.
    Parts equal to the stored object's are not walked: they hold nothing it does not."""
    if status_write:
        part = {
            key: value
            for key, value in body.items()
            if key != "status" and (old is None or key in _TYPE_META or old.get(key) != value)
        }
        if part.keys() <= _TYPE_META:
            return []
        paths = new_unknown_fields(rt, part, old)
    else:
        if "status" not in body or (old is not None and body["status"] == old.get("status")):
            return []
        paths = new_unknown_fields(rt, body, old, status_only=True)
    if not paths or field_validation is FieldValidation.IGNORE:
        return []
    if field_validation is FieldValidation.STRICT:
        raise strict_decoding_error(rt, new_unknown_fields(rt, body, old))
    return [f'unknown field "{path}"' for path in paths]


def checked_warned(
    rt: ResourceType,
    obj: dict[str, Any],
    options: WriteOptions,
    dropped: list[str] | None,
    *,
    dropped_first: bool = False,
    **check: Any,
) -> Checked:
    """:func:`~controlplane.apiserver.validation.check_object` of what a write stores, with the
    request's warnings about the whole body added at once, in the body's order (``dropped``: those
    of the part it does not store, first for a status write): kube adds them right after decoding,
    so a refusal that follows carries them too."""
    refused: list[str] = []
    try:
        checked = check_object(obj, rt, field_validation=options.field_validation, request_warnings=refused, **check)
    except Exception:
        _warn(options, refused, dropped or [], dropped_first=dropped_first)
        raise
    _warn(options, checked.warnings, dropped or [], dropped_first=dropped_first)
    return checked


def _warn(options: WriteOptions, stored: list[str], dropped: list[str], *, dropped_first: bool) -> None:
    if options.warnings is not None:
        options.warnings.extend([*dropped, *stored] if dropped_first else [*stored, *dropped])
