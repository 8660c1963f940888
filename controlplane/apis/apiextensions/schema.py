"""A CustomResourceDefinition's structural schema applied to its objects, as kube does it.

Passes over an object, each driven by the version's ``openAPIV3Schema`` (a plain
JSONSchemaProps dict):

* :func:`prune` drops every field the schema does not declare (kube's pruning), unless a
  node says ``x-kubernetes-preserve-unknown-fields``; it returns the dropped paths so the
  server can warn about them or, with ``fieldValidation=Strict``, refuse the write.
  :func:`prune_nulls` drops the nulls of fields that are neither ``nullable`` nor defaulted.
* :func:`integral_floats_made_ints` turns a number without a fraction (``3.0``) where the schema
  wants an integer into that integer, as kube stores it (``3``).
* :func:`apply_defaults` fills unset fields from the schema's ``default`` values.
* :func:`validate` returns kube's field errors for the value validations: types,
  ``nullable``, ``required``, ``enum``, ``pattern`` (RE2, as kube), bounds, lengths and sizes, ``format``
  where kube checks it, ``x-kubernetes-int-or-string``, ``x-kubernetes-embedded-resource``,
  list types (``set``/``map`` uniqueness) and ``allOf``/``anyOf``/``oneOf``/``not``. Given the
  stored object of an update it ratchets as kube does (CRDValidationRatcheting): a value equal
  to its old value (:func:`~controlplane.gojson.deep_equal`) is not refused, wherever its old
  value can be found
  (:func:`correlate`: fields by name, items of ``map`` lists by their keys, items of lists with
  no list type by index; ``set`` and ``atomic`` lists only as a whole).

Field paths and messages are kube's (``spec.replicas: Invalid value: "string": spec.replicas
in body must be of type integer: "string"``). Pure: no I/O.
"""

from __future__ import annotations

import base64
import copy
import functools
import ipaddress
import json
import re
import uuid
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import re2

from controlplane.apis.kube.field import CauseType, FieldError
from controlplane.apis.kube.names import (
    DNS_LABEL,
    DNS_LABEL_REGEX_MESSAGE,
    format_errors,
    label_value_errors,
    path_segment_errors,
    path_segment_prefix_errors,
    qualified_name_errors,
)
from controlplane.gojson import deep_equal, go_quote, go_syntax

Schema = dict[str, Any]
Path = tuple[str | int, ...]

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_FIELD_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
#: Fields every object keeps whatever its schema says (kube's pruning leaves them to the server).
_ROOT_KEPT = ("apiVersion", "kind", "metadata")


class MapKey(str):
    """A map's key in a path that kube's CEL errors print in brackets (``fldPath.Key``:
    ``spec.map[key].field``) where its schema errors print it as a field."""

    __slots__ = ()


def format_path(path: Path) -> str:
    """``("spec", "items", 0, "name")`` → ``spec.items[0].name``; odd map keys, and any
    :class:`MapKey`, in brackets."""
    out = ""
    for part in path:
        if isinstance(part, int | MapKey) or (out and not _FIELD_NAME.fullmatch(part)):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def type_name(value: Any) -> str:
    """The JSON type of ``value`` as kube's messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _shown(value: Any) -> str:
    """A value as kube's ``Invalid value: ...`` shows it (JSON)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


# --- pruning -----------------------------------------------------------------------------


def prune(obj: Any, schema: Schema, *, root: bool = True) -> list[Path]:
    """Drop the fields of ``obj`` that ``schema`` does not declare, in place; the dropped paths."""
    dropped: list[Path] = []
    _prune(obj, schema, (), dropped, root=root)
    return dropped


def _prune(value: Any, schema: Schema, path: Path, dropped: list[Path], *, root: bool) -> None:
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if (root or embedded) and key == "metadata":
                continue  # ObjectMeta is the server's: a schema's ``metadata: {type: object}`` prunes nothing
            if key in properties:
                _prune(value[key], properties[key], (*path, key), dropped, root=False)
            elif isinstance(additional, dict):
                _prune(value[key], additional, (*path, key), dropped, root=False)
            elif (root or embedded) and key in _ROOT_KEPT:
                continue
            elif not preserve and additional is not True:
                del value[key]
                dropped.append((*path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _prune(item, schema["items"], (*path, index), dropped, root=False)


def prune_nulls(obj: Any, schema: Schema | None) -> None:
    """Drop, in place, every field whose value is null where ``schema`` declares the field (a
    property, or a value of a map with ``additionalProperties``) without ``nullable: true`` and
    without a ``default``: kube drops those nulls when it decodes a custom resource, before it
    defaults and validates it (a null with a default is defaulted instead). Array items are
    kept, null or not, and so are nulls where the schema says nothing (a preserved unknown
    field's)."""
    if isinstance(obj, dict):
        for key in list(obj):
            sub = _field_schema(schema, key)
            value = obj[key]
            if value is None and sub is not None and not sub.get("nullable") and "default" not in sub:
                del obj[key]
            elif isinstance(value, dict | list):
                prune_nulls(value, sub)
    elif isinstance(obj, list):
        items = schema.get("items") if schema is not None else None
        for item in obj:
            if isinstance(item, dict | list):
                prune_nulls(item, items if isinstance(items, dict) else None)


def integral_floats_made_ints(obj: Any, schema: Schema | None) -> None:
    """Turn, in place, each float without a fraction of a field (or an array item) that
    ``schema`` types ``integer`` into that integer: kube decodes a custom resource's ``3.0`` as a
    float64, which the schema's integer check takes (kube-openapi's ``IsFloat64AJSONInteger``),
    and writes it out again as ``3``. A float with a fraction is left for :func:`validate` to
    refuse, as are the floats of other fields."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            sub = _field_schema(schema, key)
            if type(value) is float and sub is not None and _wants_integer(sub) and _json_integer(value):
                obj[key] = int(value)
            elif isinstance(value, dict | list):
                integral_floats_made_ints(value, sub)
    elif isinstance(obj, list) and schema is not None and isinstance(schema.get("items"), dict):
        items = schema["items"]
        for index, value in enumerate(obj):
            if type(value) is float and _wants_integer(items) and _json_integer(value):
                obj[index] = int(value)
            elif isinstance(value, dict | list):
                integral_floats_made_ints(value, items)


def _wants_integer(schema: Schema) -> bool:
    return schema.get("type") == "integer" and not schema.get("x-kubernetes-int-or-string")


def _field_schema(schema: Schema | None, key: str) -> Schema | None:
    """The schema of the field ``key`` of an object of ``schema`` (None: it has none)."""
    if schema is None:
        return None
    found = (schema.get("properties") or {}).get(key)
    if isinstance(found, dict):
        return found
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, dict) else None


# --- defaulting --------------------------------------------------------------------------


def apply_defaults(obj: Any, schema: Schema) -> None:
    """Set every unset field that has a ``default`` in ``schema``, in place (kube's defaulting:
    also where a field is null and not nullable)."""
    if isinstance(obj, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        for key, sub in properties.items():
            if "default" in sub and (key not in obj or (obj[key] is None and not sub.get("nullable"))):
                obj[key] = copy.deepcopy(sub["default"])
        for key, value in obj.items():
            if key in properties:
                apply_defaults(value, properties[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                apply_defaults(value, schema["additionalProperties"])
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


# --- validation --------------------------------------------------------------------------

#: "No old value to ratchet against" (None is a value: a field explicitly null).
NO_OLD: Any = object()


def correlate(schema: Schema, old: Any, key: str | int, value: Any) -> Any:
    """The old value of a child of a node (``key``: a field name or an item's index; ``value``:
    the child's new value), or :data:`NO_OLD` where kube's ratcheting finds none."""
    if isinstance(key, str):
        return old[key] if isinstance(old, dict) and key in old else NO_OLD
    if not isinstance(old, list):
        return NO_OLD
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = list(schema.get("x-kubernetes-list-map-keys") or [])
        if not isinstance(value, dict):
            return NO_OLD
        wanted = [value.get(k) for k in keys]
        found = [item for item in old if isinstance(item, dict) and [item.get(k) for k in keys] == wanted]
        return found[0] if found else NO_OLD
    if list_type in ("set", "atomic"):
        return NO_OLD
    return old[key] if key < len(old) else NO_OLD


def _err(kind: CauseType, path: Path, message: str) -> FieldError:
    return FieldError(kind, format_path(path), message)


def _invalid(path: Path, value: Any, detail: str) -> FieldError:
    return _err(CauseType.FIELD_VALUE_INVALID, path, f"Invalid value: {_shown(value)}: {detail}")


def _where(path: Path) -> str:
    """The value's path as kube-openapi's messages name it (``body`` for the root); made only for
    an error, as it is the costliest step of a value's checks."""
    return format_path(path) or "body"


def _type_invalid(path: Path, value: Any, detail: str) -> FieldError:
    """A value of the wrong type or format: kube-openapi's ``InvalidTypeCode``, which
    apiextensions-apiserver reports with ``field.TypeInvalid``."""
    return _err(CauseType.FIELD_VALUE_TYPE_INVALID, path, f"Invalid value: {_shown(value)}: {detail}")


def validate(obj: Any, schema: Schema, *, path: Path = (), old: Any = NO_OLD) -> list[FieldError]:
    """kube's field errors for ``obj`` against ``schema`` (empty: valid); ``old``: its stored
    value, on update, to ratchet against (see the module docstring)."""
    out: list[FieldError] = []
    _validate(obj, schema, path, out, root=not path, old=old)
    return out


#: The magnitude up to which kube-openapi takes a float64 for a JSON integer (``IsFloat64AJSONInteger``:
#: JavaScript's safe integers).
_JSON_INTEGER_MAX = 2**53 - 1


def _json_integer(value: float) -> bool:
    """Whether the float ``value`` is an integer as kube's schema validation sees one."""
    return value.is_integer() and abs(value) <= _JSON_INTEGER_MAX


def _type_ok(value: Any, schema: Schema) -> bool:
    wanted = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if not wanted:
        return True
    actual = type_name(value)
    if wanted == "number":
        return actual in ("number", "integer")
    if wanted == "integer" and actual == "number":
        return _json_integer(float(value))
    return bool(actual == wanted)


def _validate(
    value: Any, schema: Schema, path: Path, out: list[FieldError], *, root: bool = False, old: Any = NO_OLD
) -> None:
    if old is not NO_OLD and deep_equal(value, old):
        return  # unchanged: ratcheted, whatever the schema says of it now
    if value is None:
        if not schema.get("nullable") and (schema.get("type") or schema.get("x-kubernetes-int-or-string")):
            wanted = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
            out.append(_type_invalid(path, "null", f"{_where(path)} in body must be of type {wanted}: \"null\""))
        return
    if not _type_ok(value, schema):
        wanted = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
        actual = type_name(value)
        out.append(_type_invalid(path, actual, f'{_where(path)} in body must be of type {wanted}: "{actual}"'))
        return
    before = len(out)
    _value_checks(value, schema, path, out)
    for sub in schema.get("allOf") or []:
        _validate(value, sub, path, out)
    if schema.get("anyOf") and not any(_passes(value, sub, path) for sub in schema["anyOf"]):
        out.append(_invalid(path, value, f"{_where(path)} in body must match at least one schema in anyOf"))
    if schema.get("oneOf") and sum(_passes(value, sub, path) for sub in schema["oneOf"]) != 1:
        out.append(_invalid(path, value, f"{_where(path)} in body must validate one and only one schema (oneOf)"))
    if isinstance(schema.get("not"), dict) and _passes(value, schema["not"], path):
        out.append(_invalid(path, value, f"{_where(path)} in body must not validate the schema (not)"))
    if len(out) > before:
        return
    if isinstance(value, dict):
        _validate_object(value, schema, path, out, root=root, old=old)
    elif isinstance(value, list):
        _validate_array(value, schema, path, out, old=old)


def _passes(value: Any, schema: Schema, path: Path) -> bool:
    found: list[FieldError] = []
    _validate(value, schema, path, found)
    return not found


def _value_checks(value: Any, schema: Schema, path: Path, out: list[FieldError]) -> None:
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_shown(v) for v in schema["enum"])
        out.append(_err(CauseType.FIELD_VALUE_NOT_SUPPORTED, path, f"Unsupported value: {_shown(value)}: supported values: {supported}"))
    if isinstance(value, str):
        _string_checks(value, schema, path, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _number_checks(value, schema, path, out)
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(_err(CauseType.FIELD_VALUE_TOO_MANY, path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(_invalid(path, len(value), f"{_where(path)} in body should have at least {schema['minItems']} items"))
    elif isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            out.append(_err(
                CauseType.FIELD_VALUE_TOO_MANY, path, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items"
            ))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            out.append(_invalid(path, len(value), f"{_where(path)} in body should have at least {schema['minProperties']} properties"))


def _string_checks(value: str, schema: Schema, path: Path, out: list[FieldError]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(_err(CauseType.FIELD_VALUE_TOO_LONG, path, f"Too long: may not be more than {schema['maxLength']} bytes"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(_invalid(path, value, f"{_where(path)} in body should be at least {schema['minLength']} chars long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        compiled = compiled_pattern(pattern)
        # A pattern that does not compile was refused with its CRD; nothing to check here.
        if not isinstance(compiled, str) and compiled.search(value) is None:
            out.append(_invalid(path, value, f"{_where(path)} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if isinstance(fmt, str) and not schema.get("x-kubernetes-int-or-string") and not format_ok(fmt, value):
        out.append(_type_invalid(path, value, f'{_where(path)} in body must be of type {fmt}: "{value}"'))


def _number_checks(value: float, schema: Schema, path: Path, out: list[FieldError]) -> None:
    if "maximum" in schema:
        limit = schema["maximum"]
        if schema.get("exclusiveMaximum") and value >= limit:
            out.append(_invalid(path, value, f"{_where(path)} in body should be less than {_number(limit)}"))
        elif value > limit:
            out.append(_invalid(path, value, f"{_where(path)} in body should be less than or equal to {_number(limit)}"))
    if "minimum" in schema:
        limit = schema["minimum"]
        if schema.get("exclusiveMinimum") and value <= limit:
            out.append(_invalid(path, value, f"{_where(path)} in body should be greater than {_number(limit)}"))
        elif value < limit:
            out.append(_invalid(path, value, f"{_where(path)} in body should be greater than or equal to {_number(limit)}"))
    factor = schema.get("multipleOf")
    if isinstance(factor, int | float) and factor > 0 and (value / factor) != int(value / factor):
        out.append(_invalid(path, value, f"{_where(path)} in body should be a multiple of {_number(factor)}"))


def _validate_object(
    value: dict[str, Any], schema: Schema, path: Path, out: list[FieldError], *, root: bool, old: Any
) -> None:
    properties: dict[str, Schema] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            out.append(_err(CauseType.FIELD_VALUE_REQUIRED, (*path, name), "Required value"))
    if schema.get("x-kubernetes-embedded-resource"):
        for name in ("apiVersion", "kind"):
            if not isinstance(value.get(name), str) or not value.get(name):
                out.append(_err(CauseType.FIELD_VALUE_REQUIRED, (*path, name), "Required value: must not be empty"))
        if isinstance(value.get("metadata"), dict):
            out.extend(_embedded_metadata_errors(value["metadata"], (*path, "metadata")))
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key in _ROOT_KEPT and key not in properties:
            continue
        if key in properties:
            _validate(item, properties[key], (*path, key), out, old=correlate(schema, old, key, item))
        elif isinstance(additional, dict):
            _validate(item, additional, (*path, key), out, old=correlate(schema, old, key, item))


def _embedded_metadata_errors(meta: dict[str, Any], path: Path) -> list[FieldError]:
    """kube's ``validateEmbeddedResource``: an embedded object's metadata by ``ValidateObjectMeta``
    with path-segment names (its name, its namespace if any, its labels and annotations)."""
    out: list[FieldError] = []

    def invalid(at: Path, value: str, problems: list[str]) -> None:
        out.extend(_err(CauseType.FIELD_VALUE_INVALID, at, f"Invalid value: {go_quote(value)}: {p}") for p in problems)

    for key, errors_of in (("name", path_segment_errors), ("generateName", path_segment_prefix_errors)):
        if isinstance(meta.get(key), str) and meta[key]:
            invalid((*path, key), meta[key], errors_of(meta[key]))
    if isinstance(meta.get("namespace"), str) and meta["namespace"]:
        invalid((*path, "namespace"), meta["namespace"], format_errors(meta["namespace"], DNS_LABEL, 63, DNS_LABEL_REGEX_MESSAGE))
    labels, annotations = meta.get("labels"), meta.get("annotations")
    for key, label in labels.items() if isinstance(labels, dict) else ():
        invalid((*path, "labels"), str(key), qualified_name_errors(str(key)))
        if isinstance(label, str):
            invalid((*path, "labels"), label, label_value_errors(label))
    for key in annotations if isinstance(annotations, dict) else ():
        invalid((*path, "annotations"), str(key), qualified_name_errors(str(key).lower()))
    return out


def _validate_array(value: list[Any], schema: Schema, path: Path, out: list[FieldError], *, old: Any) -> None:
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _validate(item, items, (*path, index), out, old=correlate(schema, old, index, item))
    out.extend(_repeated_items(value, schema, path))


def _repeated_items(value: list[Any], schema: Schema, path: Path) -> list[FieldError]:
    """kube's uniqueness check of one ``set`` or ``map`` list (apiextensions' ``listtype``): the
    first repeat of each value (a set's item, a map list's keys, ``map[string]interface {}{"name":"a"}``)
    is a ``Duplicate value``; an item of a map list that is not an object is invalid."""
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        for index, item in enumerate(value):
            if item is not None and not isinstance(item, dict):
                return [_invalid((*path, index), item, "must be an object for an array of list-type map")]
        keys = list(schema.get("x-kubernetes-list-map-keys") or [])
        value = [{k: item[k] for k in keys if k in item} if isinstance(item, dict) else {} for item in value]
    elif list_type != "set":
        return []
    seen: dict[str, int] = {}
    out: list[FieldError] = []
    for index, item in enumerate(value):
        marker = json.dumps(item, sort_keys=True, default=str) + type(item).__name__
        seen[marker] = seen.get(marker, 0) + 1
        if seen[marker] == 2:
            shown = go_quote(item) if isinstance(item, str) else go_syntax(item)
            out.append(_err(CauseType.FIELD_VALUE_DUPLICATE, (*path, index), f"Duplicate value: {shown}"))
    return out


def list_type_errors(value: Any, schema: Schema, path: Path = ()) -> list[FieldError]:
    """kube's ``ValidateListSetsAndMaps`` alone: the uniqueness of every ``set`` and ``map`` list
    in ``value`` (:func:`_repeated_items`), whatever else the schema would refuse."""
    out: list[FieldError] = []
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if isinstance(additional, dict):
                out.extend(list_type_errors(item, additional, (*path, key)))
            if isinstance(properties.get(key), dict):
                out.extend(list_type_errors(item, properties[key], (*path, key)))
    elif isinstance(value, list):
        out.extend(_repeated_items(value, schema, path))
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                out.extend(list_type_errors(item, items, (*path, index)))
    return out


@functools.lru_cache(maxsize=1024)
def compiled_pattern(pattern: str) -> Any:
    """``pattern`` compiled with RE2, as kube matches it (linear time whatever the input: a
    pattern cannot stall the server), or why it does not compile."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "invalid"
        return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)


# --- formats -----------------------------------------------------------------------------

_HOSTNAME = re.compile(r"^(?=.{1,253}\Z)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*\Z")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+\Z")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d|w))+\Z")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}\Z")


def _datetime_ok(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in value.upper()


def parses(parse: Any, value: Any) -> bool:
    """Whether ``parse(value)`` reads it (raises no ValueError or TypeError)."""
    try:
        parse(value)
    except (ValueError, TypeError):
        return False
    return True


def format_ok(fmt: str, value: str) -> bool:
    """Whether ``value`` is a valid ``fmt`` (kube's strfmt checks; unknown formats pass)."""
    checks: dict[str, Any] = {
        "date-time": _datetime_ok,
        "datetime": _datetime_ok,
        "date": lambda v: parses(date.fromisoformat, v) and len(v) == 10,
        "uuid": lambda v: parses(uuid.UUID, v) and len(v) == 36,
        "ipv4": lambda v: parses(ipaddress.IPv4Address, v),
        "ipv6": lambda v: parses(ipaddress.IPv6Address, v),
        "cidr": lambda v: "/" in v and parses(lambda s: ipaddress.ip_network(s, strict=False), v),
        "byte": lambda v: parses(lambda s: base64.b64decode(s, validate=True), v),
        "hostname": lambda v: _HOSTNAME.match(v) is not None,
        "email": lambda v: _EMAIL.match(v) is not None,
        "duration": lambda v: _DURATION.match(v) is not None,
        "mac": lambda v: _MAC.match(v) is not None,
    }
    check = checks.get(fmt)
    return True if check is None else bool(check(value))


# --- walking -----------------------------------------------------------------------------


def walk(schema: Schema, path: Path = ()) -> Iterator[tuple[Path, Schema]]:
    """Every node of ``schema`` with its path (``*`` for array items and map values)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from walk(sub, (*path, name))
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], (*path, "*"))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], (*path, "*"))
