"""``x-kubernetes-validations``: a CRD schema's CEL rules, compiled once and run on each write.

Rules are compiled with the ``cel`` package (common-expression-language, a Rust CEL
implementation). :func:`compile_error` says why a rule does not compile or would cost too
much; :func:`compile_schema_rules` collects every rule of a schema and
:meth:`SchemaRules.evaluate` runs them over an object (``self`` the value at the rule's
node, ``oldSelf`` the stored value on update). As kube does: a rule with ``oldSelf`` (a
transition rule) runs only when there is an old value; a failing rule gives a field error
at its node (or ``fieldPath``) with its ``message``, its ``messageExpression``'s result, or
``failed rule: <rule>``; ``reason`` picks the error type.

Cost is bounded before anything runs, as kube bounds it: a rule's cost is estimated from
the sizes its schema allows (``maxItems``, ``maxProperties``, ``maxLength``; without them,
what fits in a request) raised to the depth of its nested comprehensions, and a CRD whose
rule exceeds the budget is refused. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import cel

from controlplane.apis.apiextensions.schema import Path, Schema, format_path, type_name
from controlplane.apis.kube.field import ErrorType, FieldError

#: kube's StaticEstimatedCostLimit for one rule.
COST_LIMIT = 10_000_000
#: The most elements a list, map or string could have without a declared bound (what a 3 MiB
#: request can hold: kube estimates unbounded sizes from the request size limit too).
UNBOUNDED_SIZE = 3 * 1024 * 1024 // 2
_COMPREHENSION = re.compile(r"\.\s*(all|exists|exists_one|map|filter)\s*\(")
_REASONS = {
    "FieldValueInvalid": ErrorType.INVALID,
    "FieldValueForbidden": ErrorType.FORBIDDEN,
    "FieldValueRequired": ErrorType.REQUIRED,
    "FieldValueDuplicate": ErrorType.DUPLICATE,
}


def _compile(rule: str) -> Any:
    return cel.compile(rule)


def _depth(rule: str) -> int:
    """How deeply the rule's comprehension macros nest (0: none)."""
    depth = best = 0
    stack: list[bool] = []
    index = 0
    while index < len(rule):
        match = _COMPREHENSION.match(rule, index)
        if match:
            depth += 1
            best = max(best, depth)
            stack.append(True)
            index = match.end()
            continue
        char = rule[index]
        if char == "(":
            stack.append(False)
        elif char == ")" and stack and stack.pop():
            depth -= 1
        index += 1
    return best


def _largest_size(schema: Schema) -> int:
    """The largest collection (or string) anywhere under ``schema``, by its declared bounds."""
    from controlplane.apis.apiextensions.schema import walk

    largest = 1
    for _path, node in walk(schema):
        kind = node.get("type")
        if kind == "array":
            largest = max(largest, int(node.get("maxItems", UNBOUNDED_SIZE)))
        elif kind == "object" and isinstance(node.get("additionalProperties"), dict):
            largest = max(largest, int(node.get("maxProperties", UNBOUNDED_SIZE)))
        elif kind == "string" and node.get("maxLength") is None and not node.get("enum"):
            largest = max(largest, 1)
    return largest


def estimated_cost(rule: str, schema: Schema) -> int:
    """An upper bound of the rule's cost at ``schema``'s node."""
    depth = _depth(rule)
    return _largest_size(schema) ** depth if depth else 1


def compile_error(rule: str, schema: Schema | None = None) -> str | None:
    """Why ``rule`` cannot be used (None: it compiles and fits the cost budget)."""
    try:
        _compile(rule)
    except Exception as exc:  # the compiler's own message is the answer
        text = str(exc).strip()
        if ": ERROR: " in text:
            text = "ERROR: " + text.split(": ERROR: ", 1)[1]
        return text.splitlines()[0] if text else type(exc).__name__
    if schema is not None:
        cost = estimated_cost(rule, schema)
        if cost > COST_LIMIT:
            return (
                f"estimated rule cost exceeds budget by factor of {cost // COST_LIMIT}x (try simplifying the rule, "
                "or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
            )
    return None


@dataclass(frozen=True, slots=True)
class Rule:
    source: str
    program: Any
    message: str = ""
    message_expression: Any = None
    reason: ErrorType = ErrorType.INVALID
    field_path: str = ""
    transition: bool = False


def _rule(spec: dict[str, Any]) -> Rule:
    source = str(spec["rule"])
    expression = spec.get("messageExpression")
    return Rule(
        source=source,
        program=_compile(source),
        message=str(spec.get("message") or ""),
        message_expression=_compile(expression) if isinstance(expression, str) and expression else None,
        reason=_REASONS.get(str(spec.get("reason") or ""), ErrorType.INVALID),
        field_path=str(spec.get("fieldPath") or "").lstrip("."),
        transition=re.search(r"\boldSelf\b", source) is not None,
    )


@dataclass(slots=True)
class SchemaRules:
    """The compiled rules of one schema node and of the nodes below it."""

    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, SchemaRules] = field(default_factory=dict)
    items: SchemaRules | None = None
    values: SchemaRules | None = None

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.values)

    def evaluate(self, obj: Any, old: Any) -> list[FieldError]:
        """Every failed rule's field error for ``obj`` (``old``: the stored object, on update)."""
        out: list[FieldError] = []
        self._run(obj, old, (), out)
        return out

    def _run(self, value: Any, old: Any, path: Path, out: list[FieldError]) -> None:
        if value is None:
            return
        for rule in self.rules:
            if rule.transition and old is None:
                continue
            error = _check(rule, value, old, path)
            if error is not None:
                out.append(error)
        if isinstance(value, dict):
            for key, sub in self.properties.items():
                if key in value:
                    _old = old.get(key) if isinstance(old, dict) else None
                    sub._run(value[key], _old, (*path, key), out)
            if self.values is not None:
                for key, item in value.items():
                    _old = old.get(key) if isinstance(old, dict) else None
                    self.values._run(item, _old, (*path, key), out)
        elif isinstance(value, list) and self.items is not None:
            for index, item in enumerate(value):
                self.items._run(item, None, (*path, index), out)


def _check(rule: Rule, value: Any, old: Any, path: Path) -> FieldError | None:
    variables: dict[str, Any] = {"self": value}
    if old is not None:
        variables["oldSelf"] = old
    where = format_path((*path, *[p for p in rule.field_path.split(".") if p]))
    shown = f'"{type_name(value)}"'
    try:
        result = rule.program.execute(variables)
    except KeyError as exc:  # a field the rule reads is not set: kube's "no such key"
        return FieldError(ErrorType.INVALID, where, f"Invalid value: {shown}: no such key: {exc.args[0] if exc.args else ''}")
    except Exception as exc:  # the evaluator's message is kube's "Invalid value" detail
        return FieldError(ErrorType.INVALID, where, f"Invalid value: {shown}: {str(exc).strip() or type(exc).__name__}")
    if result is True:
        return None
    message = rule.message or f"failed rule: {rule.source}"
    if rule.message_expression is not None:
        try:
            produced = rule.message_expression.execute(variables)
        except Exception:  # kube falls back to message when messageExpression fails
            produced = None
        if isinstance(produced, str) and produced.strip():
            message = produced
    if rule.reason is ErrorType.FORBIDDEN:
        return FieldError(rule.reason, where, f"Forbidden: {message}")
    if rule.reason is ErrorType.REQUIRED:
        return FieldError(rule.reason, where, f"Required value: {message}")
    if rule.reason is ErrorType.DUPLICATE:
        return FieldError(rule.reason, where, f"Duplicate value: {message}")
    return FieldError(ErrorType.INVALID, where, f"Invalid value: {shown}: {message}")


def compile_schema_rules(schema: Schema) -> SchemaRules:
    """The rules of ``schema`` (rules that do not compile are left out: the CRD's validation
    refuses them before any object is written)."""
    node = SchemaRules()
    for spec in schema.get("x-kubernetes-validations") or []:
        if isinstance(spec, dict) and isinstance(spec.get("rule"), str):
            try:
                node.rules.append(_rule(spec))
            except Exception:  # refused by compile_error when the CRD was written
                continue
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            child = compile_schema_rules(sub)
            if not child.empty():
                node.properties[name] = child
    if isinstance(schema.get("items"), dict):
        child = compile_schema_rules(schema["items"])
        node.items = None if child.empty() else child
    if isinstance(schema.get("additionalProperties"), dict):
        child = compile_schema_rules(schema["additionalProperties"])
        node.values = None if child.empty() else child
    return node
