"""Validation of objects before anything is written: metadata (:mod:`.objectmeta`) and typed kinds.

Inputs are object dicts and their :class:`ResourceType`; outputs are kube field causes
(``Cause``) and the list of unknown fields. ``check_object`` is the single entry point
the object layer calls: it raises ``Invalid`` (422) with causes, or ``BadRequest`` (400)
for unknown fields under ``fieldValidation=Strict``, and for Warn/Ignore returns the
object with unknown fields removed plus the warnings to send. Pure: no I/O.

Custom kinds (a CRD's) are pruned by their structural schema (:mod:`controlplane.apis.apiextensions`),
with the same Strict/Warn/Ignore answers; their schema validation is the type's ``validate``, and
a write of their status subresource prunes and validates what it can change (``CustomKind.prune_status``,
``validate_status``).
Typed kinds are validated with their pydantic model, strictly (a value of its field's JSON type,
as kube's schema validation of a CRD wants it; see :func:`_strictly_validated`); the nulls kube
drops from a custom resource are dropped before (:mod:`.nullpruning`). The operators' kinds built
in (:attr:`ResourceType.crd_schema`) are checked by the structural schema served for them (an integer
sent as ``3.0`` is stored ``3`` there too). ``metadata`` is validated here, by kube's rules, not by the
model (models describe spec and status; metadata is the server's): its model errors and unknown fields are ignored.
"""

from __future__ import annotations

import copy
import functools
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from controlplane.apis.apiextensions.cel import RULES_NOT_CHECKED, has_rules
from controlplane.apis.apiextensions.schema import integral_floats_made_ints
from controlplane.apis.kube.field import blocks_rules, error_list_text
from controlplane.apiserver.decoding import INT64_MAX, INT64_MIN
from controlplane.apiserver.errors import (
    BadRequest,
    Cause,
    CauseType,
    Invalid,
    StatusReason,
    WebhookDenied,
    invalid,
)
from controlplane.apiserver.objectmeta import finalizer_write_warnings, metadata_causes
from controlplane.apiserver.objectmeta import quote as _quote
from controlplane.apiserver.openapi import known_fields
from controlplane.apiserver.openapi.structural import rule_errors, schema_errors, served_list_errors
from controlplane.apiserver.ratcheting import unchanged_at
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.schemawording import merged_types, schema_cause
from controlplane.gojson import go_quote


class FieldValidation(StrEnum):
    """The ``fieldValidation`` query parameter of writes."""

    STRICT = "Strict"
    WARN = "Warn"
    IGNORE = "Ignore"

    @classmethod
    def parse(cls, value: str | None, *, default: FieldValidation) -> FieldValidation:
        if not value:
            return default
        for member in cls:
            if member.value.lower() == value.lower():
                return member
        raise BadRequest(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"'
        )


# --- typed kinds ----------------------------------------------------------------------

Loc = tuple[str | int, ...]


_FIELD_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
"""A struct field's name; any other key (``nvidia.com/gpu``, ``app.kubernetes.io/name``) is a map key."""


def format_path(loc: Loc) -> str:
    """``("spec", "clusters", 0, "name")`` -> ``spec.clusters[0].name``; map keys in brackets as
    kube writes them: ``("spec", "resources", "nvidia.com/gpu")`` -> ``spec.resources[nvidia.com/gpu]``."""
    out = ""
    for part in loc:
        if isinstance(part, int) or (out and not _FIELD_NAME.fullmatch(part)):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _input_path(loc: tuple[Any, ...], data: Any, *, missing: bool = False) -> Loc:
    """Keep the parts of a pydantic ``loc`` that walk the input, dropping union tags; ``missing``:
    the error is a required field the input lacks, named by the last part."""
    kept: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        in_dict = isinstance(node, dict) and isinstance(part, str) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            kept.append(part)
            node = node[part]
        elif last and missing and isinstance(part, str):
            kept.append(part)
        # Anything else is a union member tag ("str", "int") or a validator label, not a field.
    return tuple(kept)


_VALID = "Input should be a valid "


def _merge_union_members(errors: list[dict[str, Any]], data: Any) -> list[dict[str, Any]]:
    """One error per field and kind of failure: a value that fits no member of a union
    (``str | int``) fails once per member at the same input path; it is reported once, "Input
    should be a valid string or integer", not once per member with the member in its path."""
    grouped: dict[tuple[Loc, bool], list[dict[str, Any]]] = {}
    for error in errors:
        special = error["type"] in ("missing", "extra_forbidden", "literal_error", "enum")
        path = _input_path(tuple(error["loc"]), data, missing=error["type"] == "missing")
        grouped.setdefault((path, special), []).append(error)
    out: list[dict[str, Any]] = []
    for (_, special), group in grouped.items():
        if special or len(group) == 1:
            out.extend(group)
            continue
        if (types := merged_types(group)) is not None:
            out.append(types)
            continue
        messages = list(dict.fromkeys(str(error["msg"]) for error in group))
        if all(message.startswith(_VALID) for message in messages):
            message = _VALID + " or ".join(m.removeprefix(_VALID) for m in messages)
        else:
            message = " or ".join(messages)
        out.append({**group[0], "msg": message})
    return out


def _cause_for(error: dict[str, Any], data: Any) -> tuple[Loc, Cause]:
    loc = _input_path(tuple(error["loc"]), data, missing=error["type"] == "missing")
    field_path = format_path(loc)
    err_type = str(error["type"])
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    elif message.startswith("Assertion failed, "):
        message = message.removeprefix("Assertion failed, ")
    if err_type == "missing":
        return loc, Cause(CauseType.FIELD_VALUE_REQUIRED, "Required value", field_path)
    value = error.get("input")
    if err_type in ("literal_error", "enum"):
        # pydantic says "'A', 'B' or 'C'"; kube lists them: "A", "B", "C".
        expected = (
            str((error.get("ctx") or {}).get("expected", "")).replace("' or '", "', '").replace("'", '"')
        )
        return loc, Cause(
            CauseType.FIELD_VALUE_NOT_SUPPORTED,
            f"Unsupported value: {_quote(value)}: supported values: {expected}",
            field_path,
        )
    if (schema := schema_cause(error, field_path)) is not None:
        return loc, schema
    detail = message[:1].lower() + message[1:] if message else "invalid"
    try:
        shown = _quote(value)
    except (TypeError, ValueError):
        shown = repr(value)
    return loc, Cause(CauseType.FIELD_VALUE_INVALID, f"Invalid value: {shown}: {detail}", field_path)


def _unknown_paths(data: Any, dumped: Any, prefix: Loc) -> list[Loc]:
    """Paths present in the input but absent from the model's dump (of the fields the input
    set: ``exclude_unset``): unknown fields. A subtree the dump reproduces exactly has none,
    which one comparison (in C) tells without walking it."""
    found: list[Loc] = []
    if data == dumped:
        return found
    if isinstance(data, dict) and isinstance(dumped, dict):
        for key, value in data.items():
            if key not in dumped:
                found.append((*prefix, key))
            else:
                found.extend(_unknown_paths(value, dumped[key], (*prefix, key)))
    elif isinstance(data, list) and isinstance(dumped, list) and len(data) == len(dumped):
        for index, (item, dumped_item) in enumerate(zip(data, dumped, strict=True)):
            found.extend(_unknown_paths(item, dumped_item, (*prefix, index)))
    return found


def _prune(obj: dict[str, Any], loc: Loc) -> None:
    node: Any = obj
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict) and isinstance(loc[-1], str):
        node.pop(loc[-1], None)


@dataclass(slots=True)
class ModelCheck:
    causes: list[Cause] = field(default_factory=list)
    unknown: list[Loc] = field(default_factory=list)


_INT_TYPE_ERRORS = ("int_type", "int_from_float")


def _strictly_validated(data: Any, validate: Callable[[bytes], Any]) -> Any:
    """``validate`` over ``data``'s JSON in pydantic's strict mode: a value is of its field's JSON
    type or refused, as kube's schema validation of a custom resource refuses ``"3"`` for an
    integer and ``"true"`` for a boolean (the lax mode's coercions are not kube's). kube's one
    leniency is kept: a number without a fraction (``3.0``) is an integer; it becomes one in
    ``data``, as kube stores it (``3``). Raises ValidationError."""
    try:
        return validate(orjson.dumps(data))
    except ValidationError as exc:
        if not _integral_floats_made_ints(data, exc):
            raise
    return validate(orjson.dumps(data))


def _integral_floats_made_ints(data: Any, exc: ValidationError) -> bool:
    """Turn each integral float ``exc`` refuses as an integer into that integer, in place;
    whether one was."""
    changed = False
    for error in exc.errors(include_url=False):
        value = error.get("input")
        if error["type"] not in _INT_TYPE_ERRORS or type(value) is not float:
            continue
        if not value.is_integer() or not INT64_MIN <= value <= INT64_MAX:
            continue
        loc = _input_path(tuple(error["loc"]), data)
        node = data
        for part in loc[:-1]:
            node = node[part]
        if loc and type(node[loc[-1]]) is float and node[loc[-1]] == value:
            node[loc[-1]] = int(value)
            changed = True
    return changed


@functools.cache
def _status_adapter(model: type[BaseModel]) -> TypeAdapter[Any] | None:
    """A validator of ``model``'s ``status`` field alone (None when the model has none)."""
    found = model.model_fields.get("status")
    if found is None or found.annotation is None or found.alias not in (None, "status"):
        return None
    return TypeAdapter(found.annotation)


@functools.cache
def _kept_unchecked(model: type[BaseModel]) -> frozenset[str]:
    """The ``status`` fields of ``model`` not validated again when a status write leaves them as
    stored (its status model's ``UNCHANGED_NOT_REVALIDATED``)."""
    found = model.model_fields.get("status")
    annotation = found.annotation if found is not None else None
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return frozenset(getattr(candidate, "UNCHANGED_NOT_REVALIDATED", ()))
    return frozenset()


def check_model(
    obj: dict[str, Any],
    model: type[BaseModel],
    *,
    status_only: bool = False,
    old: dict[str, Any] | None = None,
) -> ModelCheck:
    """Validate with the pydantic model; report causes and unknown fields (outside metadata).

    ``status_only``: a write of the status subresource, whose other fields are the stored
    object's, validated when they were written; only its ``status`` is validated (as kube's
    status strategies validate the status of a status update), when the model has one. A large
    status field its model names as ``UNCHANGED_NOT_REVALIDATED`` (a Cluster's ``apiEnablements``,
    sent whole with every report) is not validated again when it equals ``old``'s, which was
    validated when it was written."""
    adapter = _status_adapter(model) if status_only else None
    if adapter is not None:
        return _check_status(obj, adapter, _unchanged(_kept_unchecked(model), obj, old))
    result = ModelCheck()
    try:
        instance = _strictly_validated(obj, lambda raw: model.model_validate_json(raw, strict=True))
    except ValidationError as exc:
        for error in _merge_union_members([dict(e) for e in exc.errors(include_url=False)], obj):
            loc, cause = _cause_for(error, obj)
            if loc[:1] == ("metadata",):
                continue
            if error["type"] == "extra_forbidden":
                result.unknown.append(loc)
            else:
                result.causes.append(cause)
        return result
    dumped = instance.model_dump(mode="json", by_alias=True, exclude_unset=True)
    result.unknown = [loc for loc in _unknown_paths(obj, dumped, ()) if loc[:1] != ("metadata",)]
    return result


def _unchanged(names: frozenset[str], obj: dict[str, Any], old: dict[str, Any] | None) -> frozenset[str]:
    """Those of ``names`` whose value in ``obj``'s status equals the one in ``old``'s."""
    if not names or old is None:
        return frozenset()
    status, stored = obj.get("status"), old.get("status")
    if not isinstance(status, dict) or not isinstance(stored, dict):
        return frozenset()
    return frozenset(n for n in names if n in status and n in stored and status[n] == stored[n])


def _check_status(obj: dict[str, Any], adapter: TypeAdapter[Any], unchanged: frozenset[str]) -> ModelCheck:
    """:func:`check_model` of ``obj["status"]`` alone, with paths from the object's root; the
    ``unchanged`` fields left out (validated when they were stored)."""
    result = ModelCheck()
    status = obj.get("status")
    if unchanged and isinstance(status, dict):
        status = {k: v for k, v in status.items() if k not in unchanged}
    try:
        instance = _strictly_validated(status, lambda raw: adapter.validate_json(raw, strict=True))
    except ValidationError as exc:
        errors = [{**e, "loc": ("status", *e["loc"])} for e in exc.errors(include_url=False)]
        for error in _merge_union_members(errors, obj):
            loc, cause = _cause_for(error, obj)
            if error["type"] == "extra_forbidden":
                result.unknown.append(loc)
            else:
                result.causes.append(cause)
        return result
    dumped = adapter.dump_python(instance, mode="json", by_alias=True, exclude_unset=True)
    result.unknown = _unknown_paths(status, dumped, ("status",))
    return result


def _holds(obj: Any, loc: Loc) -> bool:
    """Whether ``obj`` has a value at ``loc``."""
    for part in loc:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            return False
    return True


def _metadata_unknown(obj: dict[str, Any], _status_only: bool) -> list[Loc]:
    """kube's ObjectMeta decoding, for kinds whose own schema (a model, a CRD's) leaves metadata to kube."""
    return known_fields.unknown_metadata(obj)


def _decoded(
    rt: ResourceType,
    decode: Callable[[dict[str, Any], bool], list[Loc]],
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    status_only: bool,
) -> list[Loc]:
    """The unknown fields ``decode`` (kube's decoder of the kind, which leaves timestamps in kube's
    form) finds in ``obj``; a value of the wrong type is kube's 400 (``Deployment in version "v1"
    cannot be handled as a Deployment: json: cannot unmarshal ...``), unless the stored object ``old`` has the same one
    (stored before the hub decoded the kind as kube does: an update that keeps it is not refused)."""
    try:
        return decode(obj, status_only)
    except known_fields.CannotUnmarshal as exc:
        if old is not None:
            try:
                decode(copy.deepcopy(old), status_only)  # the stored object is not rewritten
            except known_fields.CannotUnmarshal as stored:
                if str(stored) == str(exc):
                    return exc.unknown
        raise DecodingError(rt, str(exc), converted=exc.converted) from exc


def decoded_applied(rt: ResourceType, applied: dict[str, Any], field_validation: FieldValidation) -> Checked:
    """A server-side apply's configuration as the kind's decoding leaves it: the fields the kind
    does not have dropped (warned about, or refused under Strict), a value of the wrong type
    refused. Done before the apply is merged, so that the applier's managedFields never name a
    field that is not stored (the object's own check comes too late for them). The configuration
    is partial: only the unknown fields are looked for here, its values are checked with the object.
    A kind whose field types structured-merge-diff knows (a built-in kind of kube's, a custom
    resource) has had an undeclared field refused before, as kube's field manager refuses it."""
    unknown = _unknown_in(rt, applied, None, status_only=False)
    if not unknown:
        return Checked(applied, [])
    return Checked(*_unknown_dropped(applied, rt, unknown, None, field_validation))


def _unknown_in(
    rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *, status_only: bool
) -> list[Loc]:
    """The fields of ``obj`` the kind's decoding would drop (``obj`` is left as it is, but for its
    timestamps in kube's form); a value of the wrong type is the decoder's 400 (:func:`_decoded`)."""
    if rt.decoded_by_kube:
        return _decoded(rt, rt.unknown_fields, obj, old, status_only) if rt.unknown_fields is not None else []
    unknown = [] if status_only else _decoded(rt, _metadata_unknown, obj, old, status_only)
    if rt.model is not None:
        unknown += check_model(obj, rt.model, status_only=status_only, old=old).unknown
    elif rt.custom is not None:
        prune = (rt.custom.prune_status or rt.custom.prune) if status_only else rt.custom.prune
        unknown += prune(copy.deepcopy(obj))
    elif rt.unknown_fields is not None:
        unknown += _decoded(rt, rt.unknown_fields, obj, old, status_only)
    return unknown


def refuse_unknown_fields(
    rt: ResourceType,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    field_validation: FieldValidation,
    *,
    status_only: bool = False,
) -> None:
    """Under ``fieldValidation=Strict``, what kube's decoder refuses of a write's object before any
    admission runs: its unknown fields (400 ``strict decoding error``; those the stored ``old`` has
    already go, as :func:`check_object` lets them go), or a value of the wrong type met on the way.
    Called before the admission the hub runs ahead of :func:`check_object` (the kind's own webhooks
    when they refuse, the mutating webhooks); nothing to do under Warn or Ignore."""
    if field_validation is not FieldValidation.STRICT:
        return
    paths = new_unknown_fields(rt, obj, old, status_only=status_only)
    if paths:
        raise strict_decoding_error(rt, paths)


def new_unknown_fields(
    rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *, status_only: bool = False
) -> list[str]:
    """The fields of ``obj`` kube's decoder does not keep, as kube prints them (``status_only``:
    those in its ``.status``), but those the stored ``old`` has too; a value of the wrong type is
    the decoder's 400 (:class:`DecodingError`)."""
    unknown = _unknown_in(rt, obj, old, status_only=status_only)
    if status_only:  # a kind whose status is not pruned alone (a CRD's) finds the rest too
        unknown = [loc for loc in unknown if loc[:1] == ("status",)]
    return _new_paths(unknown, old)


def _new_paths(unknown: list[Loc], old: dict[str, Any] | None) -> list[str]:
    """The ``unknown`` fields as kube prints them, but those the stored object ``old`` has too."""
    return [format_path(loc) for loc in unknown if old is None or not _holds(old, loc)]


def _unknown_dropped(
    obj: dict[str, Any],
    rt: ResourceType,
    unknown: list[Loc],
    old: dict[str, Any] | None,
    field_validation: FieldValidation,
) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``obj`` without the ``unknown`` fields kube's decoder would not keep, and the
    warnings to send (BadRequest under ``fieldValidation=Strict``, as kube answers). Fields the
    stored object ``old`` already has (stored before the hub knew the kind's fields) go without
    a word: an update that keeps them, a controller's among them, is not refused for them."""
    obj = copy.deepcopy(obj)
    for loc in unknown:
        _prune(obj, loc)
    paths = _new_paths(unknown, old)
    if paths and field_validation is FieldValidation.STRICT:
        raise strict_decoding_error(rt, paths)
    if field_validation is FieldValidation.WARN:
        return obj, [f'unknown field "{p}"' for p in paths]
    return obj, []


class DecodingError(BadRequest):
    """A body kube's decoder cannot turn into the kind: ``Deployment in version "v1" cannot be
    handled as a Deployment: <error>`` (400), where ``error`` is the decoder's own (a value of
    the wrong type, a quantity that does not parse, unknown fields under Strict)."""

    def __init__(self, rt: ResourceType, error: str, *, converted: str | None = None) -> None:
        super().__init__(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {error}')
        self.error = error
        #: The same error in kube's unstructured converter's words, where known.
        self.converted = converted

    def in_patch(self, patched: str, *, strategic: bool = False) -> Invalid:
        """The same failure where a JSON, merge or strategic merge patch produced the body: kube's
        patch handler answers 422 ``"" is invalid: patch: Invalid value: "<patched>": <error>``,
        ``patched`` being the patched object's JSON (a strategic merge patch: the patch, as Go
        prints a map). kube converts a strategic merge patch's result from a map instead of
        decoding it, so the error is that converter's: a value of the wrong type is ``cannot
        restore slice from map``, ``unrecognized type: int32`` (:attr:`converted`), and a base64
        error is wrapped, ``error decoding from json: illegal base64 data at input byte 0``."""
        error = self.error
        if strategic and self.converted is not None:
            error = self.converted
        elif strategic and error.startswith("illegal base64 data"):
            error = f"error decoding from json: {error}"
        message = f"Invalid value: {go_quote(patched)}: {error}"
        return invalid(
            kind="", group="", name="", causes=[Cause(CauseType.FIELD_VALUE_INVALID, message, "patch")]
        )


def strict_decoding_error(rt: ResourceType, paths: list[str]) -> DecodingError:
    """kube's answer to unknown fields under ``fieldValidation=Strict``: ``Deployment in version
    "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica"``."""
    unknown = ", ".join(f'unknown field "{p}"' for p in paths)
    return DecodingError(rt, f"strict decoding error: {unknown}")


@dataclass(slots=True)
class Checked:
    obj: dict[str, Any]
    warnings: list[str]


def _webhook_checks(rt: ResourceType, old: dict[str, Any] | None, subresource: str | None) -> bool:
    """Whether :attr:`ResourceType.validate_once_valid` checks this write: a write of the object,
    or of its status where the webhook is called for it too; not an update of an object those
    checks refuse already (stored before them), which stays changeable and deletable."""
    if rt.validate_once_valid is None:
        return False
    if subresource is not None and not (subresource == "status" and rt.once_valid_on_status):
        return False
    return old is None or not rt.validate_once_valid(old, None)


def check_object(
    obj: dict[str, Any],
    rt: ResourceType,
    *,
    field_validation: FieldValidation,
    old: dict[str, Any] | None = None,
    status_only: bool = False,
    subresource: str | None = None,
    request_warnings: list[str] | None = None,
) -> Checked:
    """Validate ``obj`` for a write (``old``: the stored object, on update; ``status_only``: a
    write of the status subresource, see :func:`check_model`). Raise BadRequest/Invalid; return
    it (pruned) and warnings. A refusal first adds the warnings about dropped fields to
    ``request_warnings`` (the request's): kube adds them right after decoding, so its 422 carries them."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    causes = metadata_causes(obj, rt, old)
    warnings: list[str] = []
    # A kind with a schema of its own (a model, a CRD's, an operator's) leaves its metadata to kube's ObjectMeta.
    schema_of_its_own = rt.model is not None or rt.custom is not None or rt.crd_schema is not None
    metadata_unknown = (
        _decoded(rt, _metadata_unknown, obj, old, status_only)
        if schema_of_its_own and not status_only
        else []
    )
    if rt.model is not None:
        checked = check_model(obj, rt.model, status_only=status_only, old=old)
        if checked.unknown or metadata_unknown:
            obj, dropped_warnings = _unknown_dropped(
                obj, rt, [*metadata_unknown, *checked.unknown], old, field_validation
            )
            warnings.extend(dropped_warnings)
            # Validate what will be stored: dropping a field can leave an object that is not
            # valid (``{application: {bogus: 1}}`` becomes ``{application: {}}``).
            checked = check_model(obj, rt.model, status_only=status_only, old=old)
        # The CRD it stands for refuses a repeated key of a ``map`` list, a repeated ``set`` value.
        repeated = served_list_errors(rt.group, rt.version, rt.kind, rt.model, obj, status_only=status_only)
        model_causes = [*checked.causes, *(Cause(str(e.type), e.message, e.field) for e in repeated)]
        if old is not None and rt.ratchets:
            model_causes = [cause for cause in model_causes if not unchanged_at(cause.field, obj, old)]
        causes.extend(model_causes)
    # A status write keeps the stored spec and labels (``merged``): kube's status strategies
    # (ValidateDeploymentStatusUpdate and the like) validate the object's metadata and status,
    # not its spec again: ``validate_status``, where the kind has one.
    validate = rt.validate_status if status_only and rt.custom is None else rt.validate
    if subresource is not None and subresource in rt.status_writes:
        validate = rt.status_writes[subresource].validate
    elif subresource == "finalize" and rt.finalize is not None:
        validate = rt.finalize
    if rt.model is None and rt.custom is not None:
        prune = rt.custom.prune
        if status_only:
            prune = rt.custom.prune_status or prune
            validate = rt.custom.validate_status or validate
        # The schema's pruning drops its fields in place (``obj`` is the writer's own copy); what
        # it dropped is refused or warned about with the metadata's, in one answer as kube's.
        unknown = [*metadata_unknown, *prune(obj)]
        if unknown:
            obj, dropped_warnings = _unknown_dropped(obj, rt, unknown, old, field_validation)
            warnings.extend(dropped_warnings)
    elif rt.model is None and rt.unknown_fields is not None:
        unknown = _decoded(rt, rt.unknown_fields, obj, old, status_only)
        if unknown:
            obj, dropped_warnings = _unknown_dropped(obj, rt, unknown, old, field_validation)
            warnings.extend(dropped_warnings)
    if rt.crd_schema is not None:
        integral_floats_made_ints(
            obj, dict(rt.crd_schema())
        )  # kube stores an integer sent as ``3.0`` as ``3``
        schema_found = schema_errors(rt.crd_schema(), obj, old, status_only=status_only)
        causes.extend(Cause(str(e.type), e.message, e.field) for e in schema_found)
        stopped = any(blocks_rules(str(c.reason), built_in=False) for c in causes)
        ruled = rule_errors(rt.crd_schema(), obj, old, blocked=stopped)
        causes.extend(Cause(str(e.type), e.message, e.field) for e in ruled)
    blocked = any(blocks_rules(str(c.reason), built_in=rt.built_in) for c in causes)
    if validate is not None and not blocked:
        causes.extend(Cause(str(e.type), e.message, e.field) for e in validate(obj, old))
    elif rt.model is None and rt.custom is not None:
        # kube's CRD strategy checks the schema whatever the metadata's errors; after a blocking
        # one it runs none of the rules and says so.
        found = schema_errors(rt.custom.schema, obj, old, status_only=status_only)
        if has_rules(rt.custom.schema):
            found.append(RULES_NOT_CHECKED)
        causes.extend(Cause(str(e.type), e.message, e.field) for e in found)
    if not causes and _webhook_checks(rt, old, subresource):
        assert rt.validate_once_valid is not None
        found_once_valid = rt.validate_once_valid(obj, old)
        if found_once_valid and rt.once_valid_webhook:
            # A webhook's field errors, as controller-runtime's ``admission.Denied`` of their
            # aggregate: 403 ``admission webhook "<name>" denied the request: <errors>``.
            if request_warnings is not None:
                request_warnings.extend(warnings)
            raise WebhookDenied(
                rt.once_valid_webhook, error_list_text(found_once_valid), code=403, reason=StatusReason.FORBIDDEN
            )
        causes.extend(Cause(str(e.type), e.message, e.field) for e in found_once_valid)
    if causes:
        if request_warnings is not None:
            request_warnings.extend(warnings)
        raise invalid(kind=rt.kind, group=rt.group, name=name, causes=causes)
    if not status_only:
        warnings.extend(finalizer_write_warnings(rt, obj, old))
    return Checked(obj, warnings)
