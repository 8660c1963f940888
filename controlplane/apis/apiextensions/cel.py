"""``x-kubernetes-validations``: a CRD schema's CEL rules, compiled once and run on each write.

Rules are compiled with the ``cel`` package (common-expression-language, a Rust CEL
implementation), cel-go's syntax it lacks (optional selection, two-variable comprehensions) and a
string's ``size`` in code points first written as calls it has (:func:`.cel_parse.plain`).
:func:`compile_error` says why a rule does not compile or would cost too
much; :func:`compile_schema_rules` collects every rule of a schema and
:meth:`SchemaRules.evaluate` runs them over an object (``self`` the value at the rule's
node, ``oldSelf`` the stored value on update). As kube does: a rule with ``oldSelf`` (a
transition rule) runs only when there is an old value, unless it sets ``optionalOldSelf`` (then
it runs on create too, its ``oldSelf`` an optional: ``optional.none()`` without an old value,
else the old value's, read with ``hasValue()``, ``value()``, ``orValue()``); a failing rule gives
a field error at its node (or ``fieldPath``; a map's key in brackets, ``spec.map[key]``) with its
``message``, its ``messageExpression``'s result, or ``failed rule: <rule>``; ``reason`` picks the error type. Rules have the libraries of kube's
CRD environment beyond core CEL (:mod:`.cel_library`). On update they ratchet as kube does
(CRDValidationRatcheting): a rule that is not a transition rule and evaluates to false (one that
cannot be evaluated is reported) does not refuse a value equal to its old value, nor a value whose old one cannot be found (an item of a ``set`` list) below an
unchanged node. :meth:`SchemaRules.after` runs them after the schema's own checks, as kube's
CRD strategy does: not at all when those found an error that blocks them (a value of the wrong
type, a missing, unsupported, too long or too many one), which it says in a field error of its
own, without a field (kubectl prints ``<nil>``).

Cost is bounded before anything runs, as kube bounds it (:mod:`.cel_cost`); a CRD whose rule
exceeds kube's per-rule budget is refused. The same compiler, libraries and bound
serve expressions outside a schema (:func:`compiled`, :func:`activation`, :func:`execute`):
admission policies' and webhooks' CEL. Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from controlplane.apis.apiextensions.cel_cost import COST_LIMIT, estimated_cost
from controlplane.apis.apiextensions.cel_parse import plain
from controlplane.apis.apiextensions.cel_types import (
    CORE_FUNCTIONS,
    Issue,
    SchemaTypes,
    Type,
    check,
    display,
    optional,
    string_sizes,
)
from controlplane.apis.apiextensions.cel_values import Converter, converter
from controlplane.apis.apiextensions.schema import (
    NO_OLD,
    MapKey,
    Path,
    Schema,
    correlate,
    format_path,
)
from controlplane.apis.kube.field import CauseType, FieldError, blocks_rules, invalid
from controlplane.gojson import deep_equal

#: kube's error in place of a CRD's rules after a blocking one (its strategy's ``hasBlockingErr``):
#: ``field.Invalid(nil, nil, ...)``, whose nil path prints as ``<nil>``.
RULES_NOT_CHECKED = invalid(
    "<nil>",
    None,
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation",
)

#: kube's refusal of a rule whose type is known and not ``bool``.
MUST_BE_BOOL = "cel expression must evaluate to a bool"
#: How kube's refusal of a rule over the cost budget starts (a Forbidden error, not Invalid).
OVER_BUDGET = "estimated rule cost exceeds budget"
#: cel-go's optional macros (``o.optMap(v, expr)``, ``o.optFlatMap(v, expr)``), which the
#: evaluator here does not expand: a rule using one is refused when written, not at each object.
_OPTIONAL_MACRO = re.compile(r"\.\s*(optMap|optFlatMap)\s*\(")
_ALL_OR_EXISTS = re.compile(r"\.\s*(all|exists)\s*\(")
#: How the package wraps a library function's exception: "Function 'f' error: Python function
#: call failed: ValueError: <message>. Check function arguments and their types."
_WRAPPED = re.compile(
    r"Python function call failed: \w+: (.*?)\.? Check function arguments and their types\.?$", re.S
)
#: How it wraps one of its own functions' errors: "Function 'value' error: optional.none()
#: dereference. Check function arguments and their types."
_FAILED = re.compile(r"^Function '[\w.]+' error: (.*?)\.? Check function arguments and their types\.?$", re.S)
_REASONS = {
    "FieldValueInvalid": CauseType.FIELD_VALUE_INVALID,
    "FieldValueForbidden": CauseType.FIELD_VALUE_FORBIDDEN,
    "FieldValueRequired": CauseType.FIELD_VALUE_REQUIRED,
    "FieldValueDuplicate": CauseType.FIELD_VALUE_DUPLICATE,
}


@functools.cache
def _library() -> tuple[Any, dict[str, Any]]:
    """The CEL library and kube's CEL functions, imported with the first rule: a process that
    serves no CRD with validation rules (every member, most hubs) does not pay their import."""
    import cel

    from controlplane.apis.apiextensions.cel_library import FUNCTIONS

    return cel, FUNCTIONS


def _compile(
    rule: str,
    schema: Schema | None = None,
    *,
    root: bool = False,
    optional_old_self: bool = False,
    tolerant: bool = False,
) -> Any:
    """``rule`` compiled; with ``schema`` (its node's), a ``size`` of what the schema types a string
    counts code points, as cel-go's does; ``tolerant``: ``all`` and ``exists`` as cel-go evaluates
    them, element by element (slower: run only when the rule failed to evaluate)."""
    cel, _ = _library()
    sizes: frozenset[int] = frozenset()
    if schema is not None and "size" in rule:
        sizes = string_sizes(rule, *_typed(schema, root=root, optional_old_self=optional_old_self))
    return cel.compile(plain(rule, sizes, tolerant=frozenset({"self", "oldSelf"}) if tolerant else None))


def compile_error(
    rule: str,
    schema: Schema | None = None,
    *,
    root: bool = False,
    optional_old_self: bool = False,
    message: bool = False,
) -> str | None:
    """Why ``rule`` cannot be used (None: it compiles and fits the cost budget); ``message``: it is a
    rule's ``messageExpression`` (:func:`message_expression_error`). With ``schema``,
    ``self`` is typed by it as kube's SchemaDeclType types it (``root``: a resource's root or an
    embedded resource, which always has ``apiVersion``, ``kind`` and ``metadata.name``), and so is
    ``oldSelf`` (an optional of it with ``optional_old_self``); what cel-go's checker finds for sure
    is refused in its words (``undefined field 'x'``, ``found no matching overload ...``)."""
    if message:
        return message_expression_error(rule, schema or {}, root=root, optional_old_self=optional_old_self)
    problem = _syntax_error(rule)
    if problem is not None:
        return problem
    if schema:
        result, issues = _checked(rule, schema, root=root, optional_old_self=optional_old_self)
        if issues:
            return display(rule, issues)
        if result.name not in ("bool", "dyn"):
            return MUST_BE_BOOL
    if schema is not None:
        cost = estimated_cost(rule, schema)
        if cost > COST_LIMIT:
            return (
                f"{OVER_BUDGET} by factor of {cost // COST_LIMIT}x (try simplifying the rule, "
                "or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
            )
    return None


def message_expression_error(
    expression: str, schema: Schema, *, root: bool = False, optional_old_self: bool = False
) -> str | None:
    """Why a rule's ``messageExpression`` cannot be used, in kube's words (None: it can):
    ``messageExpression compilation failed: ...`` or ``messageExpression must evaluate to a string``
    (when its type is known to be another). It has its rule's variables (``optional_old_self``:
    ``oldSelf`` an optional), as kube compiles it in the rule's environment."""
    problem = _syntax_error(expression)
    if problem is None:
        result, issues = (
            _checked(expression, schema, root=root, optional_old_self=optional_old_self)
            if schema
            else (None, [])
        )
        if issues:
            problem = display(expression, issues)
        elif result is not None and result.name not in ("string", "dyn"):
            return "messageExpression must evaluate to a string"
    return None if problem is None else f"messageExpression compilation failed: {problem}"


def _syntax_error(rule: str) -> str | None:
    try:
        _compile(rule)
    except Exception as exc:  # the compiler's own message is the answer
        text = str(exc).strip()
        if ": ERROR: " in text:
            text = "ERROR: " + text.split(": ERROR: ", 1)[1]
        return text.splitlines()[0] if text else type(exc).__name__
    if macro := _OPTIONAL_MACRO.search(rule):
        return f"ERROR: <input>:1:{macro.start() + 2}: the {macro.group(1)} macro is not supported by this server"
    return None


def _typed(schema: Schema, *, root: bool, optional_old_self: bool) -> tuple[SchemaTypes, dict[str, Type]]:
    """A rule's variables typed by its node's schema: ``self``, and ``oldSelf`` (an optional of it)."""
    types = SchemaTypes(lambda _ref: None)
    typed = types.of(schema, root=root)
    return types, {"self": typed, "oldSelf": optional(typed) if optional_old_self else typed}


def _checked(rule: str, schema: Schema, *, root: bool, optional_old_self: bool) -> tuple[Type, list[Issue]]:
    """What cel-go's checker reports on a rule in kube's CRD environment: its variables are ``self``
    and ``oldSelf`` alone, its functions cel-go's own and kube's libraries' (:func:`_declared`)."""
    return check(rule, *_typed(schema, root=root, optional_old_self=optional_old_self), declared=_declared())


@functools.cache
def _declared() -> frozenset[str]:
    return CORE_FUNCTIONS | frozenset(_library()[1])


@dataclass(frozen=True, slots=True)
class Rule:
    source: str
    program: Any
    message: str = ""
    message_expression: Any = None
    reason: CauseType = CauseType.FIELD_VALUE_INVALID
    field_path: str = ""
    transition: bool = False
    #: ``optionalOldSelf: true``: the rule runs with no old value too, ``oldSelf`` an optional.
    optional_old_self: bool = False
    #: The rule with ``all`` and ``exists`` evaluated as cel-go does, run when ``program`` fails
    #: (None: it has neither).
    tolerant: Any = None


def _rule(spec: dict[str, Any], schema: Schema, root: bool) -> Rule:
    source = str(spec["rule"])
    expression = spec.get("messageExpression")
    optional_old_self = spec.get("optionalOldSelf") is True
    return Rule(
        source=source,
        program=_compile(source, schema, root=root, optional_old_self=optional_old_self),
        tolerant=_tolerant(source, schema, root=root, optional_old_self=optional_old_self),
        message=str(spec.get("message") or ""),
        message_expression=(
            _compile(expression, schema, root=root, optional_old_self=optional_old_self)
            if isinstance(expression, str) and expression
            else None
        ),
        reason=_REASONS.get(str(spec.get("reason") or ""), CauseType.FIELD_VALUE_INVALID),
        field_path=str(spec.get("fieldPath") or "").lstrip("."),
        transition=re.search(r"\boldSelf\b", source) is not None,
        optional_old_self=optional_old_self,
    )


@dataclass(slots=True)
class SchemaRules:
    """The compiled rules of one schema node and of the nodes below it."""

    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, SchemaRules] = field(default_factory=dict)
    items: SchemaRules | None = None
    values: SchemaRules | None = None
    #: ``x-kubernetes-list-map-keys`` of a ``map`` list: how its items find their old selves.
    map_keys: tuple[str, ...] = ()
    #: The node's list type and keys, as :func:`~.schema.correlate` reads them (ratcheting).
    list_shape: Schema = field(default_factory=dict)
    #: The node's schema ``type``, which kube's error shows for a failed rule's value (``"object"``;
    #: ``""`` for an int-or-string, which has none).
    type: str = ""
    #: How the node's value is converted for its rules (formatted strings: bytes, timestamps,
    #: durations); None: as it is.
    convert: Converter | None = None

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.values)

    def after(self, found: list[FieldError], obj: Any, old: Any) -> list[FieldError]:
        """``found`` (the schema's errors for ``obj``) and what the rules add, as kube's CRD strategy
        runs them: none when the schema has none, :data:`RULES_NOT_CHECKED` instead of them when
        ``found`` holds an error that blocks them, else every failed rule's error."""
        if self.empty():
            return found
        if any(blocks_rules(str(error.type), built_in=False) for error in found):
            return [*found, RULES_NOT_CHECKED]
        return [*found, *self.evaluate(obj, old)]

    def evaluate(self, obj: Any, old: Any, *, path: Path = ()) -> list[FieldError]:
        """Every failed rule's field error for ``obj`` (``old``: the stored object, on update;
        ``path``: where ``obj`` is)."""
        out: list[FieldError] = []
        was = NO_OLD if old is None else old
        self._run(obj, old, path, out, was, _Unchanged(None, NO_OLD))
        return out

    def _run(
        self, value: Any, old: Any, path: Path, out: list[FieldError], was: Any, above: _Unchanged
    ) -> None:
        """``old``: the value's old self (``oldSelf``); ``was``: its old value for ratcheting
        (:data:`NO_OLD` where it has none); ``above``: whether the nearest node above that has
        one is unchanged."""
        if value is None:
            return
        unchanged = _Unchanged(value, was) if was is not NO_OLD else above
        typed, typed_old = value, old
        if self.rules and self.convert is not None:
            typed, typed_old = self.convert(value), None if old is None else self.convert(old)
        for rule in self.rules:
            if rule.transition and old is None and not rule.optional_old_self:
                continue
            outcome = _check(rule, typed, typed_old, path, self.type)
            if outcome is None:
                continue
            error, failed = outcome
            # As kube: a transition rule is never ratcheted, nor a rule that could not be evaluated;
            # the others are on unchanged values.
            if rule.transition or not failed or not unchanged():
                out.append(error)
        above = unchanged

        def child(key: str | int, item: Any) -> Any:
            return NO_OLD if was is NO_OLD else correlate(self.list_shape, was, key, item)

        if isinstance(value, dict):
            for key, sub in self.properties.items():
                if key in value:
                    _old = old.get(key) if isinstance(old, dict) else None
                    sub._run(value[key], _old, (*path, key), out, child(key, value[key]), above)
            if self.values is not None:
                for key, item in value.items():
                    _old = old.get(key) if isinstance(old, dict) else None
                    self.values._run(item, _old, (*path, MapKey(key)), out, child(key, item), above)
        elif isinstance(value, list) and self.items is not None:
            # As kube: only a map list's items have old selves (the old item with the same keys).
            olds = {}
            if self.map_keys and isinstance(old, list):
                olds = {self._key(item): item for item in old if isinstance(item, dict)}
            for index, item in enumerate(value):
                previous = olds.get(self._key(item)) if olds and isinstance(item, dict) else None
                self.items._run(item, previous, (*path, index), out, child(index, item), above)

    def _key(self, item: dict[str, Any]) -> str:
        return json.dumps([item.get(key) for key in self.map_keys], sort_keys=True, default=str)


class _Unchanged:
    """Whether a value equals its old value, worked out once and only when a rule failed (a
    value with no old value, the root of a create: False)."""

    __slots__ = ("_answer", "_value", "_was")

    def __init__(self, value: Any, was: Any) -> None:
        self._value, self._was = value, was
        self._answer: bool | None = None if was is not NO_OLD else False

    def __call__(self) -> bool:
        if self._answer is None:
            self._answer = deep_equal(self._value, self._was)
        return self._answer


def _check(rule: Rule, value: Any, old: Any, path: Path, node_type: str) -> tuple[FieldError, bool] | None:
    """The rule's field error, and whether the rule evaluated to false (else it could not be
    evaluated); None when it holds."""
    cel, functions = _library()
    variables: dict[str, Any] = {"self": value}
    if rule.optional_old_self:
        variables["oldSelf"] = cel.OptionalValue.none() if old is None else cel.OptionalValue.of(old)
    elif old is not None:
        variables["oldSelf"] = old
    context = cel.Context(variables, functions)
    # A rule of the schema's root without a fieldPath has kube's nil path, printed ``<nil>``.
    where = format_path((*path, *[p for p in rule.field_path.split(".") if p])) or "<nil>"
    with _quiet():
        return _outcome(rule, context, f'"{node_type}"', where)


class _NoFunctionFailures(logging.Filter):
    """Drops the ``cel`` package's warning for a library function that raised ("Python function
    'ip' failed: ... "bad" ..."): it carries the user's value, and the failure is the rule's answer
    to that user (a Status), not a server log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Python function")


logging.getLogger("cel").addFilter(_NoFunctionFailures())


class _Quieting:
    """``sys.stderr`` swapped for a sink while any thread evaluates rules: the first to enter
    swaps it, the last to leave puts it back (a large write's rules run in a worker thread while
    the event loop's run too; two ``redirect_stderr`` overlapping would leave the sink in place
    for good, swallowing the process's stderr)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: TextIO | None = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._saved, sys.stderr = sys.stderr, io.StringIO()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._saved is not None:
                    sys.stderr, self._saved = self._saved, None


#: The ``cel`` package prints a line to ``sys.stderr`` whenever a library function raises; a
#: rule failing on a user's object is an answer to that user, not a server log line. (Logging
#: handlers hold the real stream and are not affected.)
_quiet = _Quieting()


#: The evaluator's arithmetic errors as cel-go words them (common/types/overflow.go).
_ARITHMETIC = (
    (re.compile(r"^division by zero in CEL expression$"), "division by zero"),
    (re.compile(r"^modulo by zero in CEL expression$"), "modulus by zero"),
    (re.compile(r"^Arithmetic overflow in '\w+' on .*$", re.S), "integer overflow"),
    (re.compile(r"^Function '\w+' error: (unsigned integer overflow|integer overflow)\..*$", re.S), r"\1"),
)


def _runtime_message(exc: Exception) -> str:
    """The evaluator's message without the package's wrapping of a library function's error, its
    arithmetic errors in cel-go's words."""
    text = str(exc).strip() or type(exc).__name__
    while match := _WRAPPED.search(text) or _FAILED.search(text):  # unwrapped, also when nested
        text = match.group(1)
    for pattern, cel_go in _ARITHMETIC:
        if pattern.match(text):
            return pattern.sub(cel_go, text)
    return text


def _tolerant(source: str, schema: Schema, *, root: bool, optional_old_self: bool) -> Any:
    """The rule compiled with ``all`` and ``exists`` as cel-go evaluates them (None: it has
    neither, or that form does not compile, and the rule runs as the evaluator runs it)."""
    if _ALL_OR_EXISTS.search(source) is None:
        return None
    try:
        return _compile(source, schema, root=root, optional_old_self=optional_old_self, tolerant=True)
    except Exception:  # the rule itself compiled: it runs as it is
        return None


def _executed(rule: Rule, context: Any) -> Any:
    """The rule's result; when it fails to evaluate and has ``all`` or ``exists``, as cel-go
    evaluates those (an element that fails does not decide when another does)."""
    try:
        return rule.program.execute(context)
    except Exception:
        if rule.tolerant is None:
            raise
    return rule.tolerant.execute(context)


def _outcome(rule: Rule, context: Any, shown: str, where: str) -> tuple[FieldError, bool] | None:
    try:
        result = _executed(rule, context)
    except Exception as exc:
        return _not_evaluated(rule, exc, shown, where), False
    if result is True:
        return None
    return _failed(rule, context, shown, where), True


def _not_evaluated(rule: Rule, exc: Exception, shown: str, where: str) -> FieldError:
    # kube names a rule that could not be evaluated by its message, else its expression.
    named = rule.message.strip() or rule.source.strip()
    if isinstance(exc, KeyError):  # a field the rule reads is not set: kube's "no such key"
        key = exc.args[0] if exc.args else ""
        return FieldError(
            CauseType.FIELD_VALUE_INVALID,
            where,
            f"Invalid value: {shown}: no such key: {key} evaluating rule: {named}",
        )
    text = _runtime_message(exc)  # the evaluator's message is kube's "Invalid value" detail
    if text.lower().startswith("no such overload"):  # an int-or-string's value of the other type
        text = (
            "'no such overload': call arguments did not match a supported operator, function or macro "
            f"signature for rule: {named}"
        )
    else:
        text = f"{text} evaluating rule: {named}"
    return FieldError(CauseType.FIELD_VALUE_INVALID, where, f"Invalid value: {shown}: {text}")


def _failed(rule: Rule, context: Any, shown: str, where: str) -> FieldError:
    message = rule.message or f"failed rule: {rule.source}"
    if rule.message_expression is not None:
        try:
            produced = rule.message_expression.execute(context)
        except Exception:  # kube falls back to message when messageExpression fails
            produced = None
        if isinstance(produced, str) and produced.strip():
            message = produced
    if rule.reason is CauseType.FIELD_VALUE_FORBIDDEN:
        return FieldError(rule.reason, where, f"Forbidden: {message}")
    if rule.reason is CauseType.FIELD_VALUE_REQUIRED:
        return FieldError(rule.reason, where, f"Required value: {message}")
    if rule.reason is CauseType.FIELD_VALUE_DUPLICATE:
        return FieldError(rule.reason, where, f"Duplicate value: {message}")
    return FieldError(CauseType.FIELD_VALUE_INVALID, where, f"Invalid value: {shown}: {message}")


def has_rules(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` has an ``x-kubernetes-validations`` rule anywhere (kube's CRD strategy
    has no CEL validator otherwise), read without compiling any."""
    if schema.get("x-kubernetes-validations"):
        return True
    below = [
        *(schema.get("properties") or {}).values(),
        schema.get("items"),
        schema.get("additionalProperties"),
    ]
    return any(isinstance(sub, Mapping) and has_rules(sub) for sub in below)


def compile_schema_rules(schema: Schema, *, root: bool = True) -> SchemaRules:
    """The rules of ``schema`` (a resource's root, or with ``root`` false a node below it; rules
    that do not compile are left out: the CRD's validation refuses them before any object is
    written)."""
    node = SchemaRules(type=str(schema.get("type") or ""))
    embedded = root or schema.get("x-kubernetes-embedded-resource") is True
    for spec in schema.get("x-kubernetes-validations") or []:
        if isinstance(spec, dict) and isinstance(spec.get("rule"), str):
            try:
                node.rules.append(_rule(spec, schema, embedded))
            except Exception:  # refused by compile_error when the CRD was written
                continue
    if node.rules:
        node.convert = converter(schema)
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            child = compile_schema_rules(sub, root=False)
            if not child.empty():
                node.properties[name] = child
    if isinstance(schema.get("items"), dict):
        child = compile_schema_rules(schema["items"], root=False)
        node.items = None if child.empty() else child
        node.list_shape = {
            k: schema[k] for k in ("x-kubernetes-list-type", "x-kubernetes-list-map-keys") if k in schema
        }
        if schema.get("x-kubernetes-list-type") == "map":
            node.map_keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    if isinstance(schema.get("additionalProperties"), dict):
        child = compile_schema_rules(schema["additionalProperties"], root=False)
        node.values = None if child.empty() else child
    return node


# --- expressions outside a schema (admission policies, webhook match conditions) --------


class EvaluationError(Exception):
    """An expression failed at run time; the message is the evaluator's (kube's ``no such key: x``)."""


def compiled(expression: str) -> Any:
    """``expression`` compiled (the caller checked it with :func:`compile_error` first)."""
    return _compile(expression)


def activation(variables: dict[str, Any], functions: dict[str, Any] | None = None) -> Any:
    """The variables of one evaluation, with kube's libraries (and ``functions``), for :func:`execute`."""
    cel, library = _library()
    return cel.Context(variables, {**library, **functions} if functions else library)


def execute(program: Any, context: Any) -> Any:
    """Run a compiled expression; :class:`EvaluationError` with the evaluator's message."""
    with _quiet():
        try:
            return program.execute(context)
        except KeyError as exc:
            raise EvaluationError(f"no such key: {exc.args[0] if exc.args else ''}") from None
        except Exception as exc:  # the evaluator's message is the answer
            raise EvaluationError(_runtime_message(exc)) from None
