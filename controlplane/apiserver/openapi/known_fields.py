"""The fields kube's decoder knows in a built-in kind, from kube's own definitions.

kube-apiserver decodes a built-in kind into its Go type: a field the type does not have
(``spec.replica`` for ``spec.replicas``, a container's ``resource``) cannot be stored. Under
``fieldValidation=Strict`` (kubectl's default) the write is refused with ``Deployment in
version "v1" cannot be handled as a Deployment: strict decoding error: unknown field
"spec.replica"``; under ``Warn`` and ``Ignore`` the field is dropped (with a warning under
``Warn``). :func:`unknown_fields_of` gives that decoder for any kind kube has, read from the
definitions the hub already serves as its OpenAPI (:mod:`.upstream`): a struct's
``properties`` are its fields, ``additionalProperties`` a map's values, ``items`` a list's;
``x-kubernetes-preserve-unknown-fields`` and objects without properties (RawExtension,
FieldsV1, JSON) hold anything.

Pure: in an object, out the paths of the fields kube's decoder would drop from it (in
document order, as it meets them); the object is not changed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META, shared_definitions

Path = tuple[str | int, ...]
#: ``(object, status_only)`` -> the paths of the fields kube's decoder does not know, in document order.
UnknownFields = Callable[[dict[str, Any], bool], list[Path]]


class _Shape(Enum):
    STRUCT = "struct"
    MAP = "map"
    LIST = "list"
    ANY = "any"


@dataclass(slots=True, eq=False)
class _Node:
    """A compiled schema: a struct's fields, or a map's values / a list's items (``element``).
    A field or element of None holds anything (a scalar, or an open object)."""

    shape: _Shape = _Shape.ANY
    fields: dict[str, _Node | None] = field(default_factory=dict)
    element: _Node | None = None


class _Compiler:
    """Compiles definitions into :class:`_Node` trees, each named definition once (they refer to
    one another, and to themselves: JSONSchemaProps)."""

    def __init__(self, definitions: dict[str, dict[str, Any]]) -> None:
        self._definitions = definitions
        self._named: dict[str, _Node | None] = {}

    def named(self, name: str) -> _Node | None:
        if name in self._named:
            return self._named[name]
        schema = self._definitions.get(name)
        if schema is None:
            self._named[name] = None
            return None
        node = _Node()
        self._named[name] = node  # before its fields: a definition may contain itself
        compiled = self.schema(schema, into=node)
        self._named[name] = compiled
        return compiled

    def schema(self, schema: dict[str, Any], *, into: _Node | None = None) -> _Node | None:
        ref = schema.get("$ref")
        if ref is None and len(schema.get("allOf") or ()) == 1:  # a referenced type with a default
            ref = schema["allOf"][0].get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFINITIONS_PREFIX):
            return self.named(ref[len(DEFINITIONS_PREFIX):])
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return None
        node = into if into is not None else _Node()
        kind = schema.get("type")
        if kind == "array":
            element = self.schema(schema.get("items") or {})
            if element is None:
                return None
            node.shape, node.element = _Shape.LIST, element
            return node
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            node.shape = _Shape.STRUCT
            # Filled in place: a field may refer back to the definition being compiled.
            for name, sub in properties.items():
                node.fields[name] = self.schema(sub) if isinstance(sub, dict) else None
            return node
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            element = self.schema(additional)
            if element is None:
                return None
            node.shape, node.element = _Shape.MAP, element
            return node
        return None


def _unknown(value: Any, node: _Node, path: list[str | int], out: list[Path]) -> None:
    if node.shape is _Shape.STRUCT:
        if not isinstance(value, dict):
            return
        fields = node.fields
        for key in value:
            if key not in fields:
                out.append((*path, key))
                continue
            child = fields[key]
            if child is not None:
                path.append(key)
                _unknown(value[key], child, path, out)
                path.pop()
    elif node.shape is _Shape.MAP:
        element = node.element
        if isinstance(value, dict) and element is not None:
            for key, item in value.items():
                path.append(key)
                _unknown(item, element, path, out)
                path.pop()
    elif node.shape is _Shape.LIST:
        element = node.element
        if isinstance(value, list) and element is not None:
            for index, item in enumerate(value):
                path.append(index)
                _unknown(item, element, path, out)
                path.pop()


@functools.cache
def _compiler() -> _Compiler:
    return _Compiler(dict(shared_definitions().definitions))


def unknown_fields_of(group: str, version: str, kind: str) -> UnknownFields:
    """kube's decoding of ``kind`` as :data:`UnknownFields` (finding none when kube has no such
    kind). The definitions are read and compiled on the first object pruned, not here: a
    process that never writes a built-in kind never reads them."""
    root: list[_Node | None] = []

    def node() -> _Node | None:
        if not root:
            name = shared_definitions().for_kind(group, version, kind)
            root.append(_compiler().named(name) if name is not None else None)
        return root[0]

    def unknown(obj: dict[str, Any], status_only: bool = False) -> list[Path]:
        top = node()
        out: list[Path] = []
        if top is None or top.shape is not _Shape.STRUCT:
            return out
        if status_only:
            status = top.fields.get("status")
            if status is not None:
                _unknown(obj.get("status"), status, ["status"], out)
            return out
        _unknown(obj, top, [], out)
        return out

    return unknown



def unknown_metadata(obj: dict[str, Any]) -> list[Path]:
    """The fields of ``obj["metadata"]`` kube's ObjectMeta does not have (for kinds whose own
    schema, a model or a CRD's, leaves metadata to kube)."""
    out: list[Path] = []
    node = _compiler().named(OBJECT_META)
    if node is not None:
        _unknown(obj.get("metadata"), node, ["metadata"], out)
    return out
