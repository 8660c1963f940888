"""Static type checking of a CEL expression against OpenAPI schemas, as cel-go's checker reports it.

kube type-checks a ValidatingAdmissionPolicy's expressions with ``object`` typed by the schema
of each kind the policy matches (:mod:`controlplane.apis.kube.policytypechecking`). This module
does the part of cel-go's checking that a schema decides for sure, with cel-go's messages:

- a field the schema does not have: ``undefined field 'x'`` (at the ``.`` that selects it, or at
  ``has(``'s parenthesis), through objects, lists' items, maps' values, comprehension variables
  (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) and the policy's ``variables``;
- an operator applied to scalars of kinds no overload takes together (a string compared with,
  added to, or ordered against a number, a bool or bytes; a non-bool scalar under ``&&``, ``||``
  or ``!``): ``found no matching overload for '_==_' applied to '(string, int)'``.

A schema turns into CEL types as kube's ``SchemaDeclType``: ``integer`` int, ``number`` double,
``string`` string (``byte`` bytes, ``date``/``date-time`` timestamp, ``duration`` duration),
``boolean`` bool, arrays lists, objects with ``additionalProperties`` maps, objects with
``properties`` objects whose fields are those properties, named as kube escapes them
(``__namespace__``, ``x__dash__y``; ``apiVersion``, ``kind`` and ``metadata.name``/``generateName``
always there at a resource's root). Whatever is less certain is ``dyn`` and never reported:
int-or-string, an object with no ``properties`` (open or preserving unknown fields), a schema
with no type, function results other than a few well-known ones. :func:`issues` answers cel-go's
``Issues.String()``: each error ``ERROR: <input>:L:C: message`` with the line and a caret under
the column, sorted by place, one per line. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis.apiextensions.cel_parse import Node, parse
from controlplane.apis.apiextensions.cel_values import escape

Schema = Mapping[str, Any]
#: Finds a definition by its ``$ref`` (``#/definitions/io.k8s...``); None when it has none.
Resolve = Callable[[str], Schema | None]

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: The two-variable comprehensions' macros beyond those (``transformList(i, v, expr)``, ...).
_TWO_VARIABLE_MACROS = frozenset({"existsOne", "transformList", "transformMap", "transformMapEntry"})
_NUMBERS = frozenset({"int", "uint", "double"})
_SCALARS = frozenset({"int", "uint", "double", "string", "bool", "bytes"})
#: String member functions whose receiver and argument are strings (cel-go has no other overload).
_STRING_TESTS = frozenset({"startsWith", "endsWith", "contains", "matches"})
_COMPARISONS = frozenset({"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"})
_ARITHMETIC = frozenset({"_+_", "_-_", "_*_", "_/_", "_%_"})
_RETURNS = {  # functions whose result type does not depend on their arguments
    "size": "int", "int": "int", "uint": "uint", "double": "double", "string": "string", "bool": "bool",
    "bytes": "bytes", "startsWith": "bool", "endsWith": "bool", "contains": "bool", "matches": "bool",
    "lowerAscii": "string", "upperAscii": "string", "trim": "string", "replace": "string",
    "substring": "string", "indexOf": "int", "lastIndexOf": "int", "join": "string", "isSorted": "bool",
}
_WIDE_DOT, _WIDE_CARET = "\uff0e", "\uff3e"
#: cel-go's standard functions and macros, and its optional values' (the libraries' are the caller's).
CORE_FUNCTIONS = frozenset({
    "size", "int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp", "dyn", "type",
    "matches", "contains", "startsWith", "endsWith", "has", *_MACROS, *_TWO_VARIABLE_MACROS, "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth",
    "getDate", "getDayOfWeek", "getHours", "getMinutes", "getSeconds", "getMilliseconds",
    "optional.of", "optional.ofNonZeroValue", "optional.none", "hasValue", "value", "orValue", "or",
})
#: The type names an expression may use as identifiers (``type(x) == int``).
_TYPE_NAMES = frozenset({"bool", "bytes", "double", "int", "uint", "string", "list", "map", "null_type", "type"})


@dataclass(frozen=True, slots=True)
class Type:
    """A CEL type: ``name`` is ``dyn``, a scalar, ``null_type``, ``timestamp``, ``duration``,
    ``list`` (``params``: the element), ``map`` (key, value) or ``object`` (``schema``: its
    properties, ``root``: a resource's root)."""

    name: str
    params: tuple[Type, ...] = ()
    schema: Schema | None = field(default=None, compare=False)
    fields: Mapping[str, Type] | None = field(default=None, compare=False)

    def shown(self) -> str | None:
        """How cel-go writes the type (None for an object type: its name is generated)."""
        if self.name in ("list", "map"):
            inner = [p.shown() for p in self.params]
            return None if None in inner else f"{self.name}({', '.join(str(i) for i in inner)})"
        if self.name == "object":
            return None
        if self.name == "optional":
            value = self.params[0].shown()
            return None if value is None else f"optional_type({value})"
        return {"timestamp": "google.protobuf.Timestamp", "duration": "google.protobuf.Duration"}.get(self.name, self.name)


DYN = Type("dyn")
BOOL = Type("bool")
STRING = Type("string")


def _list(element: Type) -> Type:
    return Type("list", (element,))


def optional(inner: Type) -> Type:
    """cel-go's ``optional_type(inner)``: what ``a.?b``, ``a[?k]``, ``optional.of(x)`` give."""
    return Type("optional", (inner,))


class SchemaTypes:
    """CEL types from OpenAPI schemas whose ``$ref``s ``resolve`` finds."""

    def __init__(self, resolve: Resolve) -> None:
        self._resolve = resolve

    def deref(self, schema: Schema | None) -> Schema | None:
        seen = 0
        while isinstance(schema, Mapping) and seen < 32:
            seen += 1
            if isinstance(schema.get("$ref"), str):
                schema = self._resolve(schema["$ref"])
                continue
            all_of = schema.get("allOf")
            if not schema.get("type") and not schema.get("properties") and isinstance(all_of, list) and len(all_of) == 1:
                schema = all_of[0]
                continue
            return schema
        return None

    def of(self, schema: Schema | None, *, root: bool = False) -> Type:
        node = self.deref(schema)
        if node is None:
            return DYN
        if node.get("x-kubernetes-int-or-string") or node.get("format") == "int-or-string":
            return DYN
        kind = node.get("type")
        if root and kind in (None, "object") and node.get("properties"):
            return Type("object", schema=node, fields=self._root_fields(node))
        if kind == "array":
            return _list(self.of(node.get("items"), root=self._embedded(node.get("items"))))
        if kind == "object":
            values = node.get("additionalProperties")
            if isinstance(values, Mapping):
                return Type("map", (STRING, self.of(values, root=self._embedded(values))))
            if isinstance(node.get("properties"), Mapping) and node["properties"]:
                return Type("object", schema=node)
            return DYN
        if kind == "string":
            return Type({"byte": "bytes", "date": "timestamp", "date-time": "timestamp", "duration": "duration"}.get(
                str(node.get("format") or ""), "string"))
        return Type({"boolean": "bool", "number": "double", "integer": "int"}.get(str(kind), "dyn"))

    def _embedded(self, schema: Any) -> bool:
        node = self.deref(schema)
        return bool(node and node.get("x-kubernetes-embedded-resource"))

    def _root_fields(self, node: Schema) -> dict[str, Type]:
        """kube's ``WithTypeAndObjectMeta``: a resource's root always has ``apiVersion``, ``kind``
        and ``metadata`` with ``name`` and ``generateName``."""
        fields = {name: self.of(sub, root=self._embedded(sub)) for name, sub in node["properties"].items()}
        fields.setdefault("apiVersion", STRING)
        fields.setdefault("kind", STRING)
        metadata = fields.get("metadata")
        if metadata is None or metadata.name != "object":
            fields["metadata"] = Type("object", fields={"name": STRING, "generateName": STRING})
        return fields

    def field(self, owner: Type, name: str) -> Type | None:
        """The type of ``owner.name`` (None: the object has no such field), ``name`` a property's
        name as kube escapes it (``__namespace__``, ``x__dash__y``)."""
        if owner.fields is not None:
            key = _property(owner.fields, name)
            return None if key is None else owner.fields[key]
        properties = (owner.schema or {}).get("properties") or {}
        key = _property(properties, name)
        if key is None:
            return None
        sub = properties[key]
        return self.of(sub, root=self._embedded(sub))


def _property(properties: Mapping[str, Any], name: str) -> str | None:
    """The property a rule names ``name`` (kube's escaping: ``__namespace__`` is ``namespace``)."""
    if name in properties and escape(name) == name:
        return name
    if "__" not in name:
        return None
    return next((key for key in properties if escape(key) == name), None)


def _family(scalar: Type) -> str:
    """Scalars of one family meet in some overload (kube compares numbers across types)."""
    return "number" if scalar.name in _NUMBERS else scalar.name


@dataclass(frozen=True, slots=True)
class Issue:
    at: int
    message: str


@dataclass(slots=True)
class _Checker:
    types: SchemaTypes
    scope: dict[str, Type]
    found: list[Issue] = field(default_factory=list)
    #: Where a ``size`` call of a string is (its ``at``): cel-go counts a string's code points.
    string_sizes: set[int] = field(default_factory=set)
    #: The functions the environment declares, when ``scope`` holds every variable it declares:
    #: then another name is cel-go's ``undeclared reference``; None: nothing is reported so.
    declared: frozenset[str] | None = None

    def check(self, node: Node) -> Type:
        method = getattr(self, f"_{node.kind}")
        result: Type = method(node)
        return result

    def _literal(self, node: Node) -> Type:
        return Type(node.name)

    def _ident(self, node: Node) -> Type:
        if node.name not in self.scope and self.declared is not None and node.name not in _TYPE_NAMES:
            self._undeclared(node.at, node.name)
        return self.scope.get(node.name, DYN)

    def _undeclared(self, at: int, name: str) -> None:
        self.found.append(Issue(at, f"undeclared reference to '{name}' (in container '')"))

    def _undeclared_call(self, node: Node) -> bool:
        """Whether ``node`` calls a function the environment does not declare, reported as cel-go's
        checker reports it: at the call (a member call's name alone), and for a ``ns.f(...)`` whose
        ``ns`` is no variable and ``ns.f`` no function, at ``ns`` too."""
        if self.declared is None or not node.name[:1].isalpha():
            return False
        target = node.target
        namespace = target.name if target is not None and target.kind == "ident" and target.name not in self.scope else ""
        if (f"{namespace}.{node.name}" if namespace else node.name) in self.declared:
            return False
        for arg in node.args:
            self.check(arg)
        if target is not None:
            self.check(target)  # an undeclared namespace is reported as cel-go's checker reports the name
        if node.name not in self.declared:
            self._undeclared(node.at, node.name)
        return True

    def _list(self, node: Node) -> Type:
        elements = [self.check(arg) for arg in node.args]
        return _list(elements[0]) if elements and all(e == elements[0] for e in elements) else _list(DYN)

    def _map(self, node: Node) -> Type:
        for arg in node.args:
            self.check(arg)
        return Type("map", (DYN, DYN))

    def _index(self, node: Node) -> Type:
        assert node.target is not None
        owner = self.check(node.target)
        self.check(node.args[0])
        # As cel-go: ``[?k]``, or any index of an optional, is optional.
        chained = owner.name == "optional"
        owner = owner.params[0] if chained else owner
        element = owner.params[0] if owner.name == "list" else owner.params[1] if owner.name == "map" else DYN
        return optional(element) if node.optional or chained else element

    def _select(self, node: Node, at: int | None = None) -> Type:
        assert node.target is not None
        owner = self.check(node.target)
        # As cel-go: ``.?f``, or any selection on an optional, is optional (its field still checked).
        chained = owner.name == "optional"
        found = self._field(owner.params[0] if chained else owner, node.name, node.at if at is None else at)
        return optional(found) if node.optional or chained else found

    def _field(self, owner: Type, name: str, at: int) -> Type:
        if owner.name == "map":
            return owner.params[1]
        if owner.name in _SCALARS or owner.name == "list":
            if (shown := owner.shown()) is not None:
                self.found.append(Issue(at, f"type '{shown}' does not support field selection"))
            return DYN
        if owner.name != "object":
            return DYN
        found = self.types.field(owner, name)
        if found is None:
            self.found.append(Issue(at, f"undefined field '{name}'"))
            return DYN
        return found

    def _call(self, node: Node) -> Type:
        if node.target is None and node.name == "has" and len(node.args) == 1 and node.args[0].kind == "select":
            self._select(node.args[0], at=node.at)
            return BOOL
        macro = node.name in _MACROS or node.name in _TWO_VARIABLE_MACROS
        if node.target is not None and macro and node.args and node.args[0].kind == "ident":
            return self._comprehension(node)
        if self._undeclared_call(node):
            return DYN
        namespace = node.target is not None and node.target.kind == "ident" and node.target.name not in self.scope
        receiver = None if node.target is None else DYN if namespace else self.check(node.target)
        args = [self.check(arg) for arg in node.args]
        if receiver is not None and (opt := self._optional_call(node, receiver, args)) is not None:
            return opt
        if node.name == "size" and [*([receiver] if receiver is not None else []), *args] == [STRING]:
            self.string_sizes.add(node.at)
        if receiver is not None and node.name in _STRING_TESTS:
            typed = [receiver, *args]
            if all(t.name in _SCALARS for t in typed) and any(t.name != "string" for t in typed):
                self._no_overload(node, args, receiver)
            return BOOL
        if node.name in _COMPARISONS or node.name in _ARITHMETIC:
            return self._binary(node, args)
        if node.name in ("_&&_", "_||_", "!_"):
            if any(a.name in _SCALARS and a.name != "bool" for a in args):
                self._no_overload(node, args)
            return BOOL
        if node.name == "@in":
            return BOOL
        if node.name == "-_":
            return args[0] if args[0].name in _NUMBERS else DYN
        if node.name == "_?_:_":
            return args[1] if args[1] == args[2] and args[1].name != "object" else DYN
        return Type(_RETURNS[node.name]) if node.name in _RETURNS else DYN

    def _optional_call(self, node: Node, receiver: Type, args: list[Type]) -> Type | None:
        """The type of cel-go's optional functions' calls (None: ``node`` is not one)."""
        assert node.target is not None
        if node.target.kind == "ident" and node.target.name == "optional" and "optional" not in self.scope:
            if node.name in ("of", "ofNonZeroValue") and len(args) == 1:
                return optional(args[0])
            return optional(DYN) if node.name == "none" and not args else None
        if receiver.name != "optional":
            return None
        inner = receiver.params[0]
        if node.name == "hasValue" and not args:
            return BOOL
        if node.name == "value" and not args:
            return inner
        if node.name == "orValue" and len(args) == 1:
            return inner if args[0] == inner else DYN
        if node.name == "or" and len(args) == 1:
            return receiver if args[0] == receiver else DYN
        return None

    def _binary(self, node: Node, args: list[Type]) -> Type:
        left, right = args
        if left.name in _SCALARS and right.name in _SCALARS and _family(left) != _family(right):
            self._no_overload(node, args)
            return BOOL if node.name in _COMPARISONS else DYN
        if node.name in _COMPARISONS:
            return BOOL
        if left == right and (left.name in _NUMBERS or (node.name == "_+_" and left.name in ("string", "bytes"))):
            return left
        if node.name == "_+_" and left.name == right.name == "list":
            return left if left == right else _list(DYN)
        return DYN

    def _no_overload(self, node: Node, args: list[Type], receiver: Type | None = None) -> None:
        """cel-go's message; a member call's signature is written ``receiver.(args)``."""
        shown = [a.shown() for a in args]
        head = "" if receiver is None else receiver.shown()
        if None in shown or head is None:
            return
        signature = f"{head}{'.' if receiver is not None else ''}({', '.join(str(s) for s in shown)})"
        self.found.append(Issue(node.at, f"found no matching overload for '{node.name}' applied to '{signature}'"))

    def _comprehension(self, node: Node) -> Type:
        assert node.target is not None
        ranged = self.check(node.target)
        element = ranged.params[0] if ranged.name in ("list", "map") else DYN
        bound = {node.args[0].name: element}
        if len(node.args) > 2 and node.args[1].kind == "ident":
            # The two-variable forms (``all(i, v, ...)``): index or key, then value; not typed here.
            bound = {node.args[0].name: DYN, node.args[1].name: DYN}
        saved = dict(self.scope)
        self.scope.update(bound)
        try:
            results = [self.check(arg) for arg in node.args[len(bound):]]
        finally:
            self.scope = saved
        if node.name in _TWO_VARIABLE_MACROS:
            return BOOL if node.name == "existsOne" else DYN
        if node.name == "map":
            return _list(results[-1]) if results else _list(DYN)
        if node.name == "filter":
            return ranged if ranged.name == "list" else _list(element)
        return BOOL


def check(
    expression: str, types: SchemaTypes, scope: Mapping[str, Type], *, declared: frozenset[str] | None = None
) -> tuple[Type, list[Issue]]:
    """The expression's type and what cel-go's checker would report on it, in ``scope`` (the
    variables' types; an unknown name is ``dyn``, unless ``declared`` names the functions of an
    environment whose variables are all in ``scope``). An expression this checker cannot read
    reports nothing."""
    checker = _Checker(types, dict(scope), declared=declared)
    try:
        result = checker.check(parse(expression))
    except (SyntaxError, RecursionError):
        return DYN, []
    return result, sorted(checker.found, key=lambda issue: issue.at)


def string_sizes(expression: str, types: SchemaTypes, scope: Mapping[str, Type]) -> frozenset[int]:
    """Where the expression calls ``size`` of a value typed a string (each call's ``at``)."""
    checker = _Checker(types, dict(scope))
    try:
        checker.check(parse(expression))
    except (SyntaxError, RecursionError):
        return frozenset()
    return frozenset(checker.string_sizes)


def display(expression: str, found: list[Issue]) -> str:
    """cel-go's ``Issues.String()``: each issue with its place, line and caret."""
    return "\n".join(_one(expression, issue) for issue in found)


def _one(expression: str, issue: Issue) -> str:
    line_start = expression.rfind("\n", 0, issue.at) + 1
    line = expression[:issue.at].count("\n") + 1
    column = issue.at - line_start
    line_end = expression.find("\n", line_start)
    snippet = expression[line_start:line_end if line_end >= 0 else len(expression)].replace("\t", " ")
    marks = "".join(_WIDE_DOT if ord(c) > 127 else "." for c in snippet[:column])
    caret = _WIDE_CARET if column < len(snippet) and ord(snippet[column]) > 127 else "^"
    return f"ERROR: <input>:{line}:{column + 1}: {issue.message}\n | {snippet}\n | {marks}{caret}"
