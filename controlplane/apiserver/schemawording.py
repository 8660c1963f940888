"""A modelled kind's schema refusals in the words kube-apiserver uses for a CRD.

The hub validates its own, Karmada's and Kueue's kinds with pydantic models; on a real cluster
these kinds are CRDs, refused by the structural-schema validator (kube-openapi's
``validate``/``errors``, wrapped by apiextensions-apiserver in ``field.TypeInvalid``,
``field.Invalid``, ``field.TooLong``, ``field.TooMany``). :func:`schema_cause` turns one
pydantic error into that cause, or None when pydantic's error is no schema keyword's (a model's
own validator, which writes its own words). Pure: no I/O.

=========================================  ==========================================================
pydantic error                             kube's cause
=========================================  ==========================================================
``string_type``, ``int_type``, ...         ``FieldValueTypeInvalid``: ``Invalid value: "integer":
                                           <path> in body must be of type string: "integer"``
``string_pattern_mismatch``                ``Invalid value: "x": <path> in body should match '<re>'``
``greater_than_equal`` / ``greater_than``  ``... in body should be greater than or equal to N`` /
                                           ``... should be greater than N``
``less_than_equal`` / ``less_than``        ``... should be less than or equal to N`` / ``less than N``
``multiple_of``                            ``... in body should be a multiple of N``
``datetime_parsing`` (a string)            ``FieldValueTypeInvalid``: ``... must be of type
                                           date-time: "<value>"``
``string_too_long``, ``too_long``, ...     ``Too long``/``Too many``/``should be at least``
=========================================  ==========================================================
"""

from __future__ import annotations

import json
from typing import Any

from controlplane.apis.apiextensions.schema import type_name
from controlplane.apiserver.errors import Cause, CauseType
from controlplane.gojson import go_quote

_WANTED_TYPE: dict[str, str] = {
    "string_type": "string",
    "string_sub_type": "string",
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "dict_type": "object",
    "mapping_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "dataclass_type": "object",
    "list_type": "array",
    "tuple_type": "array",
    "set_type": "array",
    "datetime_type": "string",
    "date_type": "string",
    "uuid_type": "string",
}
"""The schema ``type`` a pydantic type error stands for."""

_FORMAT: dict[str, str] = {
    "datetime_parsing": "date-time",
    "datetime_from_date_parsing": "date-time",
    "date_parsing": "date",
    "date_from_datetime_parsing": "date",
    "uuid_parsing": "uuid",
}
"""The schema ``format`` a pydantic parsing error of a string stands for."""

_BOUNDS: dict[str, tuple[str, str]] = {
    "greater_than_equal": ("ge", "should be greater than or equal to"),
    "greater_than": ("gt", "should be greater than"),
    "less_than_equal": ("le", "should be less than or equal to"),
    "less_than": ("lt", "should be less than"),
    "multiple_of": ("multiple_of", "should be a multiple of"),
}

UNION_TYPE = "union_type"
"""The error type :func:`merged_types` gives a value that fits no member of a union."""


def wanted_type(error: dict[str, Any]) -> str | None:
    """The schema type a pydantic error says the value is not, or None (not a type error, or the
    value has that type: pydantic refused it for something else, an integer too large)."""
    wanted = _WANTED_TYPE.get(str(error["type"]))
    if wanted is None or type_name(error.get("input")) == wanted:
        return None
    if wanted == "integer" and type_name(error.get("input")) == "number" and float(error["input"]).is_integer():
        return None
    return wanted


def merged_types(group: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One error for a value that fits no member of a union, when each member refused its type:
    ``must be of type integer,string`` (kube's words for ``x-kubernetes-int-or-string``, whose
    schema types kube joins with a comma)."""
    wanted = [wanted_type(error) for error in group]
    if not wanted or any(w is None for w in wanted):
        return None
    names = list(dict.fromkeys(w for w in wanted if w is not None))
    if set(names) == {"integer", "string"}:
        names = ["integer", "string"]
    return {**group[0], "type": UNION_TYPE, "ctx": {"wanted": ",".join(names)}}


def shown(value: Any) -> str:
    """A bad value as kube's field errors print it: strings quoted, numbers as Go's ``%v``."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _number(limit: Any) -> str:
    if isinstance(limit, float) and limit.is_integer() and abs(limit) < 1e21:
        return str(int(limit))
    return str(limit)


def _invalid(field_path: str, value: Any, detail: str) -> Cause:
    return Cause(CauseType.FIELD_VALUE_INVALID, f"Invalid value: {shown(value)}: {detail}", field_path)


def _type_invalid(field_path: str, value: str, wanted: str) -> Cause:
    where = field_path or "body"
    return Cause(
        CauseType.FIELD_VALUE_TYPE_INVALID,
        f"Invalid value: {go_quote(value)}: {where} in body must be of type {wanted}: {go_quote(value)}",
        field_path,
    )


def schema_cause(error: dict[str, Any], field_path: str) -> Cause | None:
    """kube's cause for a pydantic error of a schema keyword (type, pattern, bounds, format,
    lengths), or None."""
    err_type = str(error["type"])
    ctx = error.get("ctx") or {}
    value = error.get("input")
    where = field_path or "body"
    if err_type == UNION_TYPE:
        return _type_invalid(field_path, type_name(value), str(ctx["wanted"]))
    if (wanted := wanted_type(error)) is not None:
        return _type_invalid(field_path, type_name(value), wanted)
    if err_type in _FORMAT and isinstance(value, str):
        return Cause(
            CauseType.FIELD_VALUE_TYPE_INVALID,
            f"Invalid value: {go_quote(value)}: {where} in body must be of type {_FORMAT[err_type]}: {go_quote(value)}",
            field_path,
        )
    if err_type == "string_pattern_mismatch":
        return _invalid(field_path, value, f"{where} in body should match '{ctx.get('pattern')}'")
    if err_type in _BOUNDS:
        key, words = _BOUNDS[err_type]
        return _invalid(field_path, value, f"{where} in body {words} {_number(ctx.get(key))}")
    return _length_limit(err_type, ctx, value, field_path)


def _length_limit(err_type: str, ctx: dict[str, Any], value: Any, field_path: str) -> Cause | None:
    """A length limit (``maxLength``, ``minLength``, ``maxItems``, ``minItems``,
    ``maxProperties``, ``minProperties``), or None."""
    where = field_path or "body"
    if err_type == "string_too_long":
        return Cause(CauseType.FIELD_VALUE_TOO_LONG, f"Too long: may not be more than {ctx.get('max_length')} bytes", field_path)
    if err_type == "string_too_short":
        return _invalid(field_path, value, f"{where} in body should be at least {ctx.get('min_length')} chars long")
    if err_type == "too_long" and isinstance(value, list | dict):
        return Cause(CauseType.FIELD_VALUE_TOO_MANY, f"Too many: {len(value)}: must have at most {ctx.get('max_length')} items",
                     field_path)
    if err_type == "too_short" and isinstance(value, list | dict):
        what = "items" if isinstance(value, list) else "properties"
        return _invalid(field_path, len(value), f"{where} in body should have at least {ctx.get('min_length')} {what}")
    return None
