"""The types structured-merge-diff gives a kind's fields, read from its OpenAPI schema as kube reads it.

:mod:`.schema` and :mod:`.structural` say how lists and maps merge; SMD's typing of an applied
object (:mod:`.typedvalue`) also needs what each field holds and which fields an object
declares. kube builds both from the kind's OpenAPI (kube-openapi's ``schemaconv``), and so does
this module:

- an ``integer`` or ``number`` is numeric, a ``boolean`` boolean, a ``string`` (or ``byte``
  string) a string; a string of any other format (``date-time``) and a Quantity (which kube's
  conversion hardcodes so) are untyped scalars, which take any scalar but no list or map;
- an object's ``properties`` are its declared fields: any other field is ``field not declared in
  schema``, unless ``additionalProperties`` types its other members or
  ``x-kubernetes-preserve-unknown-fields`` keeps them (deduced);
- an ``array`` is a list of its ``items``' type;
- an object with neither properties nor additional properties (FieldsV1) holds members of any
  type; a schema with no type at all (an IntOrString in kube's OpenAPI v3, a CRD's
  ``x-kubernetes-int-or-string``) and a RawExtension (hardcoded) are deduced: anything goes
  there and below.

A custom resource's root (and every ``x-kubernetes-embedded-resource``) also declares
``apiVersion`` and ``kind`` and has ObjectMeta's ``metadata``, as kube's CRD OpenAPI adds them.

In: a built-in kind's definitions (``#/definitions/`` references) or a CRD version's structural
schema. Out: its root :class:`SmdType`. Pure; compiled once per kind, never per write.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

DEFINITIONS_PREFIX = "#/definitions/"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
#: kube's OpenAPI v3, which kube types applied objects by, gives IntOrString no type (a ``oneOf``
#: integer or string): SMD reads that as anything at all.
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META_DEFINITION = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_PRESERVE = "x-kubernetes-preserve-unknown-fields"


class Shape(StrEnum):
    DEDUCED = "deduced"  # anything, unchecked
    SCALAR = "scalar"
    LIST = "list"
    MAP = "map"  # an object: declared fields, and/or typed other members


class Scalar(StrEnum):
    """SMD's scalar types, as its errors name what they expect."""

    NUMERIC = "numeric"
    STRING = "string"
    BOOLEAN = "boolean"
    UNTYPED = "untyped"


@dataclass(slots=True, eq=False)
class SmdType:
    """One type: a scalar's, a list's (``element``: its items'), or an object's (``fields``: the
    declared ones; ``element``: the type of the others, None when they are not declared)."""

    shape: Shape = Shape.DEDUCED
    scalar: Scalar | None = None
    fields: dict[str, SmdType] = field(default_factory=dict)
    element: SmdType | None = None

    def member(self, name: str) -> SmdType | None:
        """An object's member ``name``: its declared type, the others' type, or None (undeclared)."""
        return self.fields.get(name, self.element)


DEDUCED_TYPE = SmdType()


def _string_type(fmt: Any) -> Scalar:
    return Scalar.STRING if fmt in (None, "", "byte") else Scalar.UNTYPED


class TypeCompiler:
    """Compiles OpenAPI schemas into :class:`SmdType` trees, each named definition once (they
    refer to one another and to themselves)."""

    def __init__(self, definitions: Mapping[str, Mapping[str, Any]]) -> None:
        self._definitions = definitions
        self._named: dict[str, SmdType] = {}
        self._compiling = threading.RLock()

    def named(self, name: str) -> SmdType:
        """The type of definition ``name`` (deduced when there is no such definition). Compiled
        under a lock, as a large write's apply runs in a worker thread: a definition is recorded
        before its fields are filled in (it may contain itself), and no other thread may read it
        half made."""
        with self._compiling:
            return self._named_now(name)

    def _named_now(self, name: str) -> SmdType:
        found = self._named.get(name)
        if found is not None:
            return found
        schema = self._definitions.get(name)
        if schema is None:
            return DEDUCED_TYPE
        if name == QUANTITY:  # kube's conversion hardcodes it: an untyped scalar
            node = self._named[name] = SmdType(Shape.SCALAR, Scalar.UNTYPED)
            return node
        if name in (INT_OR_STRING, RAW_EXTENSION):  # a RawExtension is hardcoded as anything
            self._named[name] = DEDUCED_TYPE
            return DEDUCED_TYPE
        node = self._named[name] = SmdType()  # before its fields: a definition may contain itself
        self.schema(schema, into=node)
        return node

    def schema(self, schema: Mapping[str, Any], *, into: SmdType | None = None, preserve: bool = False) -> SmdType:
        ref = schema.get("$ref")
        all_of = schema.get("allOf")
        if ref is None and isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
            ref = all_of[0].get("$ref")  # a referenced type with a default or a description
        if isinstance(ref, str) and ref.startswith(DEFINITIONS_PREFIX):
            return self.named(ref[len(DEFINITIONS_PREFIX):])
        node = into if into is not None else SmdType()
        preserve = preserve or schema.get(_PRESERVE) is True
        kind = schema.get("type")
        if kind is None and not isinstance(schema.get("properties"), Mapping) and not isinstance(
            schema.get("items"), Mapping
        ):
            return node  # no type (int-or-string, preserve-unknown-fields): anything, deduced
        if kind == "array" or (kind is None and isinstance(schema.get("items"), Mapping)):
            items = schema.get("items")
            node.shape = Shape.LIST
            node.element = self.schema(items, preserve=preserve) if isinstance(items, Mapping) else DEDUCED_TYPE
        elif kind == "object" or isinstance(schema.get("properties"), Mapping):
            self._object(schema, node, preserve=preserve)
        elif kind in ("integer", "number"):
            node.shape, node.scalar = Shape.SCALAR, Scalar.NUMERIC
        elif kind == "boolean":
            node.shape, node.scalar = Shape.SCALAR, Scalar.BOOLEAN
        elif kind == "string":
            node.shape, node.scalar = Shape.SCALAR, _string_type(schema.get("format"))
        else:
            node.shape, node.scalar = Shape.SCALAR, Scalar.UNTYPED
        return node

    def _object(self, schema: Mapping[str, Any], node: SmdType, *, preserve: bool) -> None:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        additional = schema.get("additionalProperties")
        node.shape = Shape.MAP
        # Filled in place: a field may refer back to the definition being compiled.
        for name, sub in properties.items():
            node.fields[name] = self.schema(sub, preserve=preserve) if isinstance(sub, Mapping) else DEDUCED_TYPE
        if schema.get("x-kubernetes-embedded-resource") is True:
            self._resource_fields(node)
        if isinstance(additional, Mapping):
            node.element = self.schema(additional, preserve=preserve)
        elif additional is True or preserve or (additional is None and not properties):
            node.element = DEDUCED_TYPE  # a free-form object: members of any type

    def _resource_fields(self, node: SmdType) -> None:
        """``apiVersion``, ``kind`` and ObjectMeta's ``metadata``, as kube adds them to a custom
        resource's root and to an embedded resource."""
        string = SmdType(Shape.SCALAR, Scalar.STRING)
        node.fields.setdefault("apiVersion", string)
        node.fields.setdefault("kind", string)
        node.fields["metadata"] = self.named(OBJECT_META_DEFINITION)

    def custom_resource(self, openapi: Mapping[str, Any]) -> SmdType:
        """The type of a custom resource whose CRD version has this ``openAPIV3Schema``."""
        root = SmdType()
        self.schema(openapi, into=root)
        if root.shape is not Shape.MAP:  # a root without a type: anything, but its metadata
            root.shape, root.scalar, root.element = Shape.MAP, None, DEDUCED_TYPE
        self._resource_fields(root)
        return root
