"""Field paths and the FieldsV1 encoding of ``metadata.managedFields``.

Server-side apply records, per field manager, the set of fields it owns. A field is a
path from the object's root: ``f:<name>`` steps into an object field, ``k:<json>`` picks
the item of an associative list by its key fields, ``v:<json>`` picks a value of a set
list, ``i:<n>`` an index. Kubernetes serialises such a set as a tree ("FieldsV1"): each
step is a key, ``{}`` marks an owned leaf and ``".": {}`` marks an owned node that also
has owned children, e.g. ``{"f:spec":{"f:containers":{"k:{\\"name\\":\\"a\\"}":{".":{},"f:image":{}}}}}``.

In: paths as tuples of :data:`PathElement`, FieldsV1 dicts from stored objects.
Out: FieldsV1 dicts exactly as Kubernetes writes them, the human form of a path used in
conflict messages (``.spec.containers[name="a"].image``), and list-item keys computed from
a :class:`~controlplane.apiserver.patching.schema.FieldSchema`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apiserver.patching.schema import FieldSchema, ListType

FIELD = "f"
KEY = "k"
VALUE = "v"
INDEX = "i"
_ORDER = {FIELD: 0, KEY: 1, VALUE: 2, INDEX: 3}

PathElement = tuple[str, str]
"""One step of a path: (``"f"``, field name) or (``"k"``/``"v"``, canonical JSON) or (``"i"``, index)."""

Path = tuple[PathElement, ...]


class FieldsError(ValueError):
    """A managedFields entry whose FieldsV1 tree cannot be read."""


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted object keys, as Kubernetes writes list keys and set values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def field_element(name: str) -> PathElement:
    """The step into object field ``name``."""
    return (FIELD, name)


def item_element(item: Any, schema: FieldSchema) -> PathElement | None:
    """The step that names ``item`` inside a list described by ``schema``.

    Associative lists name an item by its key fields (API defaults filled in where a key
    field is absent, as the server defaults them before tracking ownership; one given as
    ``null`` is the key value null); set lists name it by its value (a
    scalar, or an object its schema makes atomic). ``None`` when the item lacks a key
    field or the list is atomic.
    """
    if schema.list_type is ListType.MAP:
        if not isinstance(item, Mapping):
            return None
        key: dict[str, Any] = {}
        for name in schema.keys:
            if name in item:  # a key given as null is null, as structured-merge-diff reads it
                key[name] = item[name]
            elif name in schema.key_defaults:
                key[name] = schema.key_defaults[name]
            else:
                return None
        return (KEY, canonical_json(key))
    if schema.list_type is ListType.SET:
        if isinstance(item, list) or (isinstance(item, Mapping) and not schema.element().atomic):
            return None
        return (VALUE, canonical_json(item))
    return None


def describe(path: Path) -> str:
    """The human form Kubernetes prints in apply conflicts: ``.spec.containers[name="a"].image``."""
    parts: list[str] = []
    for kind, text in path:
        if kind == FIELD:
            parts.append(f".{text}")
        elif kind == KEY:
            fields = json.loads(text)
            inner = ",".join(f"{name}={canonical_json(fields[name])}" for name in sorted(fields))
            parts.append(f"[{inner}]")
        elif kind == VALUE:
            parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


def sort_key(path: Path) -> tuple[tuple[int, str], ...]:
    """Order paths the way Kubernetes orders them: fields, then keys, then values, then indexes."""
    return tuple((_ORDER[kind], text) for kind, text in path)


def with_named_ancestors(paths: Iterable[Path]) -> set[Path]:
    """``paths`` plus every ancestor that ends in a named field.

    Owning ``.spec.strategy.type`` implies an interest in ``.spec.strategy`` and ``.spec``
    existing; owning an item's field does not imply owning the list item itself.
    """
    out: set[Path] = set()
    for path in paths:
        out.add(path)
        for end in range(1, len(path)):
            if path[end - 1][0] == FIELD:
                out.add(path[:end])
    return out


class PathTree:
    """A set of paths as a tree: a node per step, ``member`` where a path ends."""

    __slots__ = ("children", "member")

    def __init__(self) -> None:
        self.member = False
        self.children: dict[PathElement, PathTree] = {}


def path_tree(paths: Iterable[Path]) -> PathTree:
    """The tree of a set of paths."""
    root = PathTree()
    for path in paths:
        node = root
        for element in path:
            node = node.children.setdefault(element, PathTree())
        node.member = True
    return root


def encode_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 tree of a set of paths."""
    return _encode_node(path_tree(paths))


def _encode_node(node: PathTree) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node.member and node.children:
        out["."] = {}
    for element in sorted(node.children, key=lambda e: (_ORDER[e[0]], e[1])):
        kind, text = element
        out[f"{kind}:{text}"] = _encode_node(node.children[element])
    return out


def decode_fields(tree: Any) -> set[Path]:
    """The set of paths a FieldsV1 tree describes; :class:`FieldsError` when malformed."""
    if not isinstance(tree, Mapping):
        raise FieldsError("fieldsV1 must be an object")
    out: set[Path] = set()
    _decode_node(tree, (), out)
    return out


def _decode_node(tree: Mapping[str, Any], path: Path, out: set[Path]) -> None:
    for raw, child in tree.items():
        if not isinstance(child, Mapping):
            raise FieldsError(f"fieldsV1 entry {raw!r} must be an object")
        if raw == ".":
            if path:
                out.add(path)
            continue
        element = _parse_element(raw)
        child_path = (*path, element)
        if not child:
            out.add(child_path)
        else:
            _decode_node(child, child_path, out)


def _parse_element(raw: str) -> PathElement:
    kind, sep, text = raw.partition(":")
    if not sep or kind not in _ORDER:
        raise FieldsError(f"fieldsV1 key {raw!r} must start with f:, k:, v: or i:")
    if kind == FIELD:
        return (FIELD, text)
    if kind == INDEX:
        if not text.isdigit():
            raise FieldsError(f"fieldsV1 key {raw!r} needs a list index")
        return (INDEX, text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FieldsError(f"fieldsV1 key {raw!r} does not hold valid JSON") from exc
    if kind == KEY and not isinstance(value, dict):
        raise FieldsError(f"fieldsV1 key {raw!r} must hold a JSON object of key fields")
    return (kind, canonical_json(value))
