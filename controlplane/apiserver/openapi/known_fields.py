"""The fields kube's decoder knows in a built-in kind, and their JSON types, from kube's own definitions.

kube-apiserver decodes a built-in kind into its Go type. A field the type does not have
(``spec.replica`` for ``spec.replicas``, a container's ``resource``) cannot be stored: under
``fieldValidation=Strict`` (kubectl's default) the write is refused with ``Deployment in
version "v1" cannot be handled as a Deployment: strict decoding error: unknown field
"spec.replica"``; under ``Warn`` and ``Ignore`` the field is dropped (with a warning under
``Warn``). A timestamp (``metav1.Time``, ``MicroTime``) is parsed as Go parses it and kept in
kube's form, UTC (:mod:`controlplane.apis.kube.gotime`): ``+02:00`` and fractions of a second go,
and one Go cannot parse fails the decoding with Go's words (``parsing time "yesterday" as
"2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"``). A value of the wrong JSON type (an env var's ``value: 8080``, a ConfigMap's
``data: {port: 80}``) cannot be decoded at all, whatever the mode: ``... cannot be handled as a
Deployment: json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value
of type string`` (:class:`CannotUnmarshal`), and neither can a quantity that does not parse
(``cpu: abc``: ``... cannot be handled as a Deployment: quantities must match the regular
expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'``, the error of Quantity's own
``UnmarshalJSON``, which ends the decoding there). :func:`unknown_fields_of` gives that decoder for
any kind kube has, read from the definitions the hub already serves as its OpenAPI
(:mod:`.upstream`): a struct's ``properties`` are its fields, ``additionalProperties`` a map's
values, ``items`` a list's, ``type``/``format`` a scalar's JSON types (a Quantity and an
IntOrString take a number or a string); ``x-kubernetes-preserve-unknown-fields`` and objects
without properties (RawExtension, FieldsV1, JSON) hold anything; ``null`` is always accepted.

Pure: in an object, out the paths of the fields kube's decoder would drop from it (in
document order, as it meets them); the object is changed only where kube's decoding changes what
is stored: its timestamps are rewritten in kube's form, in place.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from controlplane.apis.kube.gobase64 import CorruptInput, std_decode
from controlplane.apis.kube.gotime import TimeParseError, kube_time
from controlplane.apis.quantity import unparsable_reason
from controlplane.apiserver.openapi.upstream import (
    DEFINITIONS_PREFIX,
    INT_OR_STRING,
    MICRO_TIME,
    OBJECT_META,
    QUANTITY,
    TIME,
    shared_definitions,
)

Path = tuple[str | int, ...]
#: ``(object, status_only)`` -> the paths of the fields kube's decoder does not know, in document
#: order; raises :class:`CannotUnmarshal` for a value of the wrong type.
UnknownFields = Callable[[dict[str, Any], bool], list[Path]]


class CannotUnmarshal(ValueError):
    """A value of another JSON type than the field's: ``json: cannot unmarshal number into Go
    struct field EnvVar.spec.template.spec.containers.env.value of type string`` (Go's words: the
    innermost struct, the field's JSON path without indices or map keys, the Go type).
    ``unknown``: the unknown fields found as well. ``converted``: the same value's error in the
    words of kube's unstructured converter (``cannot restore slice from map``), which turns the
    map a strategic merge patch leaves into the kind; None where its words are not known."""

    def __init__(self, message: str, unknown: list[Path], converted: str | None = None) -> None:
        super().__init__(message)
        self.unknown = unknown
        self.converted = converted


class _Shape(Enum):
    STRUCT = "struct"
    MAP = "map"
    LIST = "list"
    SCALAR = "scalar"
    ANY = "any"


@dataclass(slots=True, eq=False)
class _Node:
    """A compiled schema: a struct's fields, a map's values or a list's items (``element``), or a
    scalar's accepted JSON types; ``go`` the Go type kube decodes it into (``v1.EnvVar``,
    ``[]v1.Container``, ``int32``), ``struct`` a struct's own name (``EnvVar``)."""

    shape: _Shape = _Shape.ANY
    fields: dict[str, _Node] = field(default_factory=dict)
    element: _Node | None = None
    accepts: frozenset[str] = frozenset()
    go: str = ""
    struct: str = ""
    #: A timestamp's Go type (``Time``, ``MicroTime``), parsed by its own UnmarshalJSON.
    clock: str = ""


#: Holds anything (an open object, RawExtension, a schema kube leaves unchecked).
_ANY = _Node()
_INT_OR_STRING_GO = "intstr.IntOrString"
_QUANTITY_GO = "resource.Quantity"
#: A ``[]byte`` field: base64 in JSON, decoded as Go decodes it.
_BYTES_GO = "[]uint8"
_TIMES = {TIME: "Time", MICRO_TIME: "MicroTime"}
#: JSON kinds a scalar type takes, and the Go type it decodes into.
_SCALARS: dict[tuple[str, str | None], tuple[frozenset[str], str]] = {
    ("string", None): (frozenset({"string"}), "string"),
    ("string", "byte"): (frozenset({"string"}), _BYTES_GO),
    ("string", "date-time"): (frozenset({"string"}), "v1.Time"),
    ("string", "int-or-string"): (frozenset({"string", "number"}), _INT_OR_STRING_GO),
    ("integer", "int32"): (frozenset({"number"}), "int32"),
    ("integer", "int64"): (frozenset({"number"}), "int64"),
    ("integer", None): (frozenset({"number"}), "int64"),
    ("number", "double"): (frozenset({"number"}), "float64"),
    ("number", None): (frozenset({"number"}), "float64"),
    ("boolean", None): (frozenset({"bool"}), "bool"),
}
#: Go types that take a JSON number only when it is whole (``1.5`` is refused, ``2.0`` kept).
_INTEGRAL = frozenset({"int32", "int64"})
#: The whole numbers each integer type holds (a larger one is refused: ``number 3000000000``).
_RANGES = {"int32": (-(2**31), 2**31 - 1), _INT_OR_STRING_GO: (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
#: Definitions whose own JSON decoding takes more than their schema says.
_NAMED_SCALARS = {
    QUANTITY: (frozenset({"string", "number"}), _QUANTITY_GO),  # UnmarshalJSON parses a number too
    INT_OR_STRING: (frozenset({"string", "number"}), _INT_OR_STRING_GO),
}


def _go_name(definition: str) -> str:
    """``io.k8s.api.core.v1.EnvVar`` -> ``v1.EnvVar`` (the package and the type, as Go prints it)."""
    parts = definition.split(".")
    return ".".join(parts[-2:])


class _Compiler:
    """Compiles definitions into :class:`_Node` trees, each named definition once (they refer to
    one another, and to themselves: JSONSchemaProps)."""

    def __init__(self, definitions: dict[str, dict[str, Any]]) -> None:
        self._definitions = definitions
        self._named: dict[str, _Node] = {}
        self._compiling = threading.RLock()

    def named(self, name: str) -> _Node:
        """Definition ``name``'s node. Compiled under a lock, as a large write is checked in a
        worker thread: a definition is recorded before its fields are filled in (it may contain
        itself), and no other thread may read it half made."""
        with self._compiling:
            return self._named_now(name)

    def _named_now(self, name: str) -> _Node:
        if name in self._named:
            return self._named[name]
        schema = self._definitions.get(name)
        if schema is None:
            self._named[name] = _ANY
            return _ANY
        if name in _NAMED_SCALARS:
            accepts, go = _NAMED_SCALARS[name]
            node = self._named[name] = _Node(_Shape.SCALAR, accepts=accepts, go=go)
            return node
        if name in _TIMES:
            clock = _TIMES[name]
            node = self._named[name] = _Node(_Shape.SCALAR, accepts=frozenset({"string"}), go=f"v1.{clock}", clock=clock)
            return node
        node = _Node(go=_go_name(name), struct=name.rsplit(".", 1)[-1])
        self._named[name] = node  # before its fields: a definition may contain itself
        compiled = self.schema(schema, into=node)
        self._named[name] = compiled
        return compiled

    def schema(self, schema: dict[str, Any], *, into: _Node | None = None) -> _Node:
        ref = schema.get("$ref")
        if ref is None and len(schema.get("allOf") or ()) == 1:  # a referenced type with a default
            ref = schema["allOf"][0].get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFINITIONS_PREFIX):
            return self.named(ref[len(DEFINITIONS_PREFIX):])
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return _ANY
        node = into if into is not None else _Node()
        kind = schema.get("type")
        if kind == "array":
            element = self.schema(schema.get("items") or {})
            node.shape, node.element, node.go = _Shape.LIST, element, f"[]{element.go or 'interface {}'}"
            return node
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            node.shape = _Shape.STRUCT
            # Filled in place: a field may refer back to the definition being compiled.
            for name, sub in properties.items():
                node.fields[name] = self.schema(sub) if isinstance(sub, dict) else _ANY
            return node
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            element = self.schema(additional)
            node.shape, node.element, node.go = _Shape.MAP, element, f"map[string]{element.go or 'interface {}'}"
            return node
        scalar = _SCALARS.get((str(kind), schema.get("format")))
        if scalar is not None:
            node.shape, (node.accepts, node.go) = _Shape.SCALAR, scalar
            return node
        return _ANY


def _out_of_range(value: Any, node: _Node) -> bool:
    """A whole JSON number too large for the node's integer type."""
    bounds = _RANGES.get(node.go)
    return bounds is not None and isinstance(value, int) and not isinstance(value, bool) and not (
        bounds[0] <= value <= bounds[1]
    )


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


#: Go's names of the kinds of value a JSON document decodes into (``UnmarshalCaseSensitivePreserveInts``).
_GO_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "bool"), (int, "int64"), (float, "float64"), (str, "string"), (list, "slice"), (dict, "map"),
)
#: The plain Go types kube's unstructured converter sets by reflection (not by their own UnmarshalJSON).
_REFLECTED_SCALARS = frozenset({"string", "bool", "int32", "int64", "float64"})


def _converter_error(value: Any, node: _Node) -> str | None:
    """What kube's unstructured converter (``runtime.DefaultUnstructuredConverter``) answers
    for ``value`` in a field of ``node``'s type: a struct, map or slice from another kind of
    value cannot be restored, a whole number can be made any integer (an int64 too large for an
    int32 wraps, so None: not its error) and a float a whole one, and a scalar of another kind
    is a type it does not recognise. None for a type decoded by its own UnmarshalJSON (a
    Quantity, a Time, base64 bytes), whose errors are that method's."""
    source = next(name for types, name in _GO_KINDS if isinstance(value, types))
    if node.shape is _Shape.STRUCT:
        return f"cannot restore struct from: {source}"
    if node.shape is _Shape.MAP:
        return f"cannot restore map from {source}"
    if node.shape is _Shape.LIST:
        return f"cannot restore slice from {source}"
    target = node.go
    if target not in _REFLECTED_SCALARS:
        return None
    if source == "int64" and target == "string":
        return "cannot convert int64 to string"  # Go converts an integer to a string, the converter does not
    if source == "int64" and target in _INTEGRAL:
        return None
    if source == "float64" and target in _INTEGRAL:
        return f"cannot convert float64 to {target}"
    return f"unrecognized type: {target}"


class _Aborted(Exception):
    """A value whose own ``UnmarshalJSON`` failed (a Quantity that does not parse): Go's
    decoder stops there and answers that error, whatever it met before."""


def _time_text(value: Any, *, micro: bool) -> str | None:
    """A timestamp as ``metav1.Time`` (``micro``: ``MicroTime``) reads and writes it: it
    unmarshals a JSON string, then parses it (:func:`~controlplane.apis.kube.gotime.kube_time`)."""
    if not isinstance(value, str):
        raise _Aborted(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
    try:
        return kube_time(value, micro=micro)
    except TimeParseError as exc:
        raise _Aborted(str(exc)) from None


def decoded_time(value: Any) -> str | None:
    """``value`` as kube stores a ``metav1.Time`` it decoded from it (None for the zero time);
    :class:`CannotUnmarshal` where it cannot: for a field kube decodes, then drops or overwrites."""
    try:
        return _time_text(value, micro=False)
    except _Aborted as exc:
        raise CannotUnmarshal(str(exc), []) from None


@dataclass(slots=True)
class _Walk:
    """One object's decoding: the unknown fields met and the first value of the wrong type."""

    unknown: list[Path] = field(default_factory=list)
    error: str | None = None
    converted: str | None = None
    path: list[str | int] = field(default_factory=list)
    #: The JSON field names from the root (Go names a field by these: no indices, no map keys).
    keys: list[str] = field(default_factory=list)
    #: Whether timestamps are parsed and rewritten as kube's typed decoding does (a built-in
    #: kind's); else they are strings (a custom resource's metadata, which kube leaves as sent).
    times: bool = False

    def stamp(self, holder: dict[str, Any] | list[Any], key: Any, value: Any, node: _Node) -> None:
        """A timestamp as its UnmarshalJSON reads it, rewritten in ``holder`` as its MarshalJSON
        writes it; one it cannot read ends the decoding with its error."""
        if value is not None:
            kept = _time_text(value, micro=node.clock == "MicroTime")
            if kept != value:
                holder[key] = kept

    def mistyped(self, value: Any, node: _Node, struct: str) -> None:
        if self.error is None:
            kind = _json_kind(value)
            if kind == "number" and node.go in _INTEGRAL and (isinstance(value, float) or _out_of_range(value, node)):
                kind = f"number {value}"  # Go names the number it cannot make an integer
            self.error = (
                f"json: cannot unmarshal {kind} into Go struct field {struct}.{'.'.join(self.keys)} of type {node.go}"
            )
            self.converted = _converter_error(value, node)

    def undecodable(self, value: str) -> None:
        """Go's decoder saves a base64 error as it does a value of the wrong type: the first
        one is answered once the whole object is read (``illegal base64 data at input byte 4``)."""
        if self.error is None:
            try:
                std_decode(value)
            except CorruptInput as exc:
                self.error = str(exc)

    def run(self, value: Any, node: _Node, struct: str) -> None:
        """Decode ``value`` as ``node``; :class:`CannotUnmarshal` with the error Go's decoder
        answers: a value that failed its own decoding, else the first value of the wrong type."""
        try:
            self.walk(value, node, struct)
        except _Aborted as exc:
            raise CannotUnmarshal(str(exc), self.unknown) from None
        if self.error is not None:
            raise CannotUnmarshal(self.error, self.unknown, self.converted)

    def walk(self, value: Any, node: _Node, struct: str) -> None:
        shape = node.shape
        if value is None or shape is _Shape.ANY:
            return
        if shape is _Shape.SCALAR:
            kind = _json_kind(value)
            if node.go == _INT_OR_STRING_GO and kind != "string":
                # Its UnmarshalJSON reads anything but a string into an int32, and fails there.
                if kind != "number" or (isinstance(value, float) and not value.is_integer()) or _out_of_range(value, node):
                    number = f"number {value}" if kind == "number" else kind
                    raise _Aborted(f"json: cannot unmarshal {number} into Go value of type int32")
                return
            if kind not in node.accepts or (
                node.go in _INTEGRAL and isinstance(value, float) and not value.is_integer()
            ) or _out_of_range(value, node):
                self.mistyped(value, node, struct)
            elif node.go == _QUANTITY_GO and kind == "string":
                reason = unparsable_reason(value)
                if reason is not None:
                    raise _Aborted(reason)
            elif node.go == _BYTES_GO and kind == "string":
                self.undecodable(value)
            return
        if shape is _Shape.STRUCT:
            if not isinstance(value, dict):
                self.mistyped(value, node, struct)
                return
            fields = node.fields
            for key, item in value.items():
                child = fields.get(key)
                if child is None:
                    self.unknown.append((*self.path, key))
                    continue
                if child.clock and self.times:
                    self.stamp(value, key, item, child)
                elif child is not _ANY:
                    self.path.append(key)
                    self.keys.append(key)
                    self.walk(item, child, node.struct)
                    self.keys.pop()
                    self.path.pop()
            return
        element = node.element
        assert element is not None
        if shape is _Shape.MAP:
            if not isinstance(value, dict):
                self.mistyped(value, node, struct)
                return
            for key, item in value.items():
                if element.clock and self.times:
                    self.stamp(value, key, item, element)
                    continue
                self.path.append(key)
                self.walk(item, element, struct)
                self.path.pop()
            return
        if not isinstance(value, list):
            self.mistyped(value, node, struct)
            return
        for index, item in enumerate(value):
            if element.clock and self.times:
                self.stamp(value, index, item, element)
                continue
            self.path.append(index)
            self.walk(item, element, struct)
            self.path.pop()


@functools.cache
def _compiler() -> _Compiler:
    return _Compiler(dict(shared_definitions().definitions))


def unknown_fields_of(group: str, version: str, kind: str) -> UnknownFields:
    """kube's decoding of ``kind`` as :data:`UnknownFields` (finding none when kube has no such
    kind), raising :class:`CannotUnmarshal` for a value of the wrong type or a timestamp Go
    cannot parse, and rewriting the object's timestamps in kube's form. The definitions are
    read and compiled on the first object decoded, not here: a process that never writes a
    built-in kind never reads them."""
    root: list[_Node] = []

    def node() -> _Node:
        if not root:
            name = shared_definitions().for_kind(group, version, kind)
            root.append(_compiler().named(name) if name is not None else _ANY)
        return root[0]

    def unknown(obj: dict[str, Any], status_only: bool = False) -> list[Path]:
        top = node()
        walk = _Walk(times=True)
        if top.shape is not _Shape.STRUCT:
            return walk.unknown
        if status_only:
            status = top.fields.get("status")
            if status is not None and status is not _ANY:
                walk.path, walk.keys = ["status"], ["status"]
                walk.run(obj.get("status"), status, kind)
        else:
            walk.run(obj, top, kind)
        return walk.unknown

    return unknown


def unknown_metadata(obj: dict[str, Any]) -> list[Path]:
    """The fields of ``obj["metadata"]`` kube's ObjectMeta does not have (for kinds whose own
    schema, a model or a CRD's, leaves metadata to kube); :class:`CannotUnmarshal` for a value
    of the wrong type (``labels: {app: 1}``)."""
    walk = _Walk(path=["metadata"], keys=["metadata"])
    kind = str(obj.get("kind") or "")
    walk.run(obj.get("metadata"), _compiler().named(OBJECT_META), kind)
    return walk.unknown
