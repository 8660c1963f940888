"""An applied configuration typed as structured-merge-diff types it, and its errors in SMD's words.

Before merging, kube's field manager turns the applied object into a typed value
(``typed.AsTyped``); a value that does not fit its kind's schema is refused with SMD's
validation errors, each ``<path>: <message>``, several joined as ``errors:`` with one indented
line each. What this module checks, as SMD's ``validate.go`` and ``helpers.go`` do:

- a value where a list is expected (an associative list, a set, a list with item schema) is
  ``expected list, got &{5}``; one where an object or map is expected ``expected map, got
  &{x}`` (the value as Go's ``%v`` prints SMD's wrapper of it; ``null`` is always accepted);
- an item of a keyed list (``x-kubernetes-list-type: map``) must be an object
  (``element 0: associative list with keys may not have non-map elements``, ``... may not have
  a null element``) that has every key field or a default for it (``... omits key field "name"
  (and doesn't have default value)``). A key field given as ``null`` is present: its key value
  is null, as SMD reads it;
- an item of a set must be a scalar (``... without keys has an element that's a map type``,
  ``not supported: associative list with lists as elements``, ``... an explicit null``);
- two items with the same key or value are ``duplicate entries for key [name="a"]`` at the list;
- with the kind's field types (:mod:`.smdtypes`), a scalar of another type is ``expected numeric
  (int or float), got string`` (Go's ``%T``), ``expected string, got
  &value.valueUnstructured{Value:5}`` (``%#v``), ``expected boolean, got &{yes}``, and an untyped
  one (Quantity, time) given a list or map ``expected any scalar, got &{[1]}``; a
  field an object does not declare is ``.spec.foo: field not declared in schema``, which ends the
  checks of that object, as SMD stops walking it.

As in SMD, the first item of a list that has no key ends the checks of that list. Nothing
below a value no schema describes (kube's deduced type) is checked.

In: the applied object, the kind's :class:`FieldSchema` and, when known, its :class:`SmdType`.
Out: the error lines (empty when the object types), or :func:`applied_typing_error`'s one text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apiserver.patching.schema import DEDUCED, FieldSchema, ListType
from controlplane.apiserver.patching.smdtypes import DEDUCED_TYPE, Scalar, Shape, SmdType
from controlplane.gojson import go_float, go_printed, go_quote, go_syntax


def applied_typing_error(applied: Mapping[str, Any], schema: FieldSchema, typed: SmdType | None = None) -> str | None:
    """SMD's error typing an applied object, as ``ValidationErrors.Error()`` words it, or None when
    it types. ``typed``: the kind's field types (:mod:`.smdtypes`), when known. An apply whose
    ``metadata.managedFields`` Go reads as entries is refused before (:func:`applied_managed_fields`);
    one it cannot read as entries (a string) is typed like any field, as kube types it."""
    found = typing_errors(applied, schema, typed)
    return joined(found) if found else None


def applied_managed_fields(applied: Mapping[str, Any]) -> bool:
    """Whether an applied object carries ``metadata.managedFields`` as kube's field manager reads
    them (``GetManagedFields() != nil``): a list, empty or of objects only. ``null``, or a value
    Go cannot read as entries (a string, a list holding a string), reads as none."""
    metadata = applied.get("metadata")
    entries = metadata.get("managedFields") if isinstance(metadata, Mapping) else None
    return isinstance(entries, list) and all(isinstance(entry, Mapping) for entry in entries)


def typing_errors(value: Any, schema: FieldSchema, typed: SmdType | None = None) -> list[str]:
    """SMD's validation errors of ``value`` against ``schema`` (and ``typed``), each ``path: message``."""
    out: list[str] = []
    _check(value, schema, "", out, typed)
    return out


def joined(errors: list[str]) -> str:
    """``ValidationErrors.Error()``: one error as it is, several under ``errors:``."""
    if len(errors) == 1:
        return errors[0]
    return "\n".join(["errors:", *(f"  {error}" for error in errors)])


def _error(path: str, message: str) -> str:
    return f"{path}: {message}" if path else message


def _shown(value: Any) -> str:
    """``%v`` of SMD's pointer to its wrapper of an unstructured value: ``&{...}``; kube decodes
    an apply body's numbers as float64."""
    return "&{" + go_printed(_as_go(value)) + "}"


def _as_go(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _as_go(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_go(v) for v in value]
    return value


def _is_list(schema: FieldSchema) -> bool:
    return schema.list_type is not ListType.ATOMIC or schema.item is not None


def _is_map(schema: FieldSchema) -> bool:
    return bool(schema.fields) or schema.values is not None


def _check(value: Any, schema: FieldSchema, path: str, out: list[str], typed: SmdType | None) -> None:
    """``typed`` None: the field's type is not known, only its merge schema's shape is checked."""
    if value is None or typed is DEDUCED_TYPE or (schema is DEDUCED and typed is None):
        return
    shape = typed.shape if typed is not None else None
    if shape is Shape.SCALAR:
        assert typed is not None and typed.scalar is not None
        if (problem := _scalar_problem(typed.scalar, value)) is not None:
            out.append(_error(path, problem))
    elif shape is Shape.LIST or (shape is None and _is_list(schema)):
        if not isinstance(value, list):
            out.append(_error(path, f"expected list, got {_shown(value)}"))
            return
        _check_items(value, schema, path, out, typed.element if typed is not None else None)
    elif shape is Shape.MAP or (shape is None and _is_map(schema)):
        if not isinstance(value, Mapping):
            out.append(_error(path, f"expected map, got {_shown(value)}"))
            return
        for key in sorted(value, key=str):
            member = typed.member(str(key)) if typed is not None else None
            if typed is not None and member is None:
                # SMD stops walking an object at a field it does not declare.
                out.append(_error(f"{path}.{key}", "field not declared in schema"))
                return
            _check(value[key], schema.child(key), f"{path}.{key}", out, member)


def _scalar_problem(scalar: Scalar, value: Any) -> str | None:
    """SMD's ``validateScalar``: what a value that is not of the scalar type gets (null is any)."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if scalar is Scalar.NUMERIC and not is_number:
        return f"expected numeric (int or float), got {_go_type(value)}"
    if scalar is Scalar.STRING and not isinstance(value, str):
        return f"expected string, got &value.valueUnstructured{{Value:{go_syntax(_as_go(value))}}}"
    if scalar is Scalar.BOOLEAN and not isinstance(value, bool):
        return f"expected boolean, got {_shown(value)}"
    if scalar is Scalar.UNTYPED and isinstance(value, Mapping | list):
        return f"expected any scalar, got {_shown(value)}"
    return None


def _go_type(value: Any) -> str:
    """``%T`` of a value kube decoded from an apply body."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "float64"
    return "[]interface {}" if isinstance(value, list) else "map[string]interface {}"


def _check_items(items: list[Any], schema: FieldSchema, path: str, out: list[str], typed: SmdType | None) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        if schema.list_type is ListType.ATOMIC:
            element = f"[{index}]"
        else:
            element, problem = _key_element(item, schema) if schema.list_type is ListType.MAP else _set_element(item)
            if problem:
                out.append(_error(path, f"element {index}: {problem}"))
                return
            if element in seen:
                out.append(_error(path, f"duplicate entries for key {element}"))
            seen.add(element)
        _check(item, schema.element(), f"{path}{element}", out, typed)


def _key_element(item: Any, schema: FieldSchema) -> tuple[str, str]:
    """The item's path element ``[name="a",port=80]`` and ``""``, or ``""`` and why it has none."""
    if item is None:
        return "", "associative list with keys may not have a null element"
    if not isinstance(item, Mapping):
        return "", "associative list with keys may not have non-map elements"
    key: dict[str, Any] = {}
    for name in schema.keys:
        if name in item:
            key[name] = item[name]
        elif name in schema.key_defaults:
            key[name] = schema.key_defaults[name]
        else:
            return "", (f"associative list with keys has an element that omits key field {go_quote(name)} "
                        "(and doesn't have default value)")
    return "[" + ",".join(f"{name}={_smd_text(key[name])}" for name in sorted(key)) + "]", ""


def _set_element(item: Any) -> tuple[str, str]:
    """A set item's path element ``[="a"]`` and ``""``, or ``""`` and why it has none."""
    if isinstance(item, Mapping):
        return "", "associative list without keys has an element that's a map type"
    if isinstance(item, list):
        return "", "not supported: associative list with lists as elements"
    if item is None:
        return "", "associative list without keys has an element that's an explicit null"
    return f"[={_smd_text(item)}]", ""


def _smd_text(value: Any) -> str:
    """SMD's ``value.ToString``: strings quoted, numbers and booleans as ``%v``, null as ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, int | float):
        return go_float(float(value))
    if isinstance(value, list):
        return "[" + ",".join(_smd_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "".join(f"{k}={_smd_text(v)}" for k, v in sorted(value.items()))
    return str(value)
