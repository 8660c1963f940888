"""Label and field selectors: kube's query syntax parsed into matchers.

``parse_label_selector("app=web,tier in (a,b),!canary")`` gives a :class:`LabelSelector`
whose ``matches(labels)`` follows kube's semantics (``!=`` and ``notin`` match objects
without the key). ``parse_field_selector("status.phase=Running")`` gives a
:class:`FieldSelector` checked against a resource type's supported fields. Malformed
input raises :class:`SelectorError` with kube's wording, which the API server answers as
its 400 ``BadRequest``. :func:`scale_status_selector` is the selector an autoscaling/v1 Scale shows.
(``label_selectors`` is the other side: a ``metav1.LabelSelector`` in a spec, validated.)
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.apis.kube.names import label_value_errors, qualified_name_errors
from controlplane.apis.untyped import dig


class SelectorError(ValueError):
    """A label or field selector that does not parse, or asks for what its kind does not offer:
    ``message`` is kube's error, word for word."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Operator(StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if op in (Operator.EQUALS, Operator.IN):
            return value is not None and value in self.values
        if op in (Operator.NOT_EQUALS, Operator.NOT_IN):
            return value is None or value not in self.values
        if value is None:
            return False
        try:
            actual, bound = int(value), int(next(iter(self.values)))
        except ValueError:
            return False
        return actual > bound if op is Operator.GREATER_THAN else actual < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req.matches(labels) for req in self.requirements)

    def to_string(self) -> str:
        """kube's string form (``app=web,tier in (a,b)``)."""
        parts = []
        for req in self.requirements:
            values = sorted(req.values)
            if req.operator is Operator.EQUALS:
                parts.append(f"{req.key}={values[0]}")
            elif req.operator is Operator.NOT_EQUALS:
                parts.append(f"{req.key}!={values[0]}")
            elif req.operator in (Operator.IN, Operator.NOT_IN):
                parts.append(f"{req.key} {req.operator.value} ({','.join(values)})")
            elif req.operator is Operator.EXISTS:
                parts.append(req.key)
            elif req.operator is Operator.DOES_NOT_EXIST:
                parts.append(f"!{req.key}")
            else:
                parts.append(f"{req.key}{'>' if req.operator is Operator.GREATER_THAN else '<'}{values[0]}")
        return ",".join(parts)

    @classmethod
    def from_dict(cls, selector: Mapping[str, Any] | None) -> LabelSelector:
        """A ``metav1.LabelSelector`` (matchLabels + matchExpressions) as a matcher."""
        if not selector:
            return cls()
        reqs = [
            Requirement(str(k), Operator.EQUALS, frozenset({str(v)}))
            for k, v in sorted((selector.get("matchLabels") or {}).items())
        ]
        ops = {
            "In": Operator.IN,
            "NotIn": Operator.NOT_IN,
            "Exists": Operator.EXISTS,
            "DoesNotExist": Operator.DOES_NOT_EXIST,
        }
        for expr in selector.get("matchExpressions") or []:
            op = ops.get(str(expr.get("operator")))
            if op is None:
                raise SelectorError(f'"{expr.get("operator")}" is not a valid label selector operator')
            reqs.append(Requirement(str(expr.get("key")), op, frozenset(str(v) for v in expr.get("values") or [])))
        return cls(tuple(reqs))


def scale_status_selector(obj: Mapping[str, Any], *, path: str, label_set: bool) -> str | None:
    """What an autoscaling/v1 Scale's ``status.selector`` shows of ``obj``'s label selector at the
    dotted ``path`` (its kind's; empty for none): a ``metav1.LabelSelector`` (or, with
    ``label_set``, a plain map of labels) in kube's string form, a string as it is (a custom kind's
    serialized selector, LeaderWorkerSet's ``status.hpaPodSelector``); None for anything else."""
    selector = dig(obj, *path.split(".")) if path else None
    if isinstance(selector, dict):
        return LabelSelector.from_dict({"matchLabels": selector} if label_set else selector).to_string()
    if isinstance(selector, str) and selector:
        return selector
    return None


_TOKEN = re.compile(r"\s*(\(|\)|,|!=|==|=|!|[^\s(),!=<>]+|<|>)")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse kube's label selector string; :class:`SelectorError` on malformed input."""
    if not text or not text.strip():
        return LabelSelector()
    tokens = _tokenize(text)
    reqs: list[Requirement] = []
    pos = 0

    def fail(why: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement: {why}")

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise fail(f'found end of input in selector "{text}"')
        token = tokens[pos]
        pos += 1
        return token

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    while True:
        token = take()
        negated = token == "!"
        key = take() if negated else token
        _check_key(key, fail)
        nxt = peek()
        if negated:
            reqs.append(Requirement(key, Operator.DOES_NOT_EXIST))
        elif nxt is None or nxt == ",":
            reqs.append(Requirement(key, Operator.EXISTS))
        else:
            op_token = take()
            if op_token in ("=", "==", "!="):
                value = "" if peek() in (None, ",") else take()
                op = Operator.NOT_EQUALS if op_token == "!=" else Operator.EQUALS
                reqs.append(Requirement(key, op, frozenset({_value(value, fail)})))
            elif op_token in (">", "<"):
                bound = take()
                if not bound.lstrip("-").isdigit():
                    raise fail(f"for 'gt', 'lt' operators, the value must be an integer: {bound}")
                op = Operator.GREATER_THAN if op_token == ">" else Operator.LESS_THAN
                reqs.append(Requirement(key, op, frozenset({bound})))
            elif op_token in ("in", "notin"):
                if take() != "(":
                    raise fail(f"found '{tokens[pos - 1]}', expected: '('")
                values: set[str] = set()
                while True:
                    item = take()
                    if item == ")":
                        break
                    if item == ",":
                        continue
                    values.add(_value(item, fail))
                op = Operator.IN if op_token == "in" else Operator.NOT_IN
                if not values:
                    raise fail(f"for '{op_token}', 'notin' operators, values set can't be empty")
                reqs.append(Requirement(key, op, frozenset(values)))
            else:
                raise fail(f"found '{op_token}', expected: in, notin, =, ==, !=, gt, lt")
        nxt = peek()
        if nxt is None:
            break
        if nxt != ",":
            raise fail(f"found '{nxt}', expected: ',' or 'end of string'")
        pos += 1
    return LabelSelector(tuple(reqs))


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            if text[pos:].strip() == "":
                break
            raise SelectorError(f"unable to parse requirement: unexpected character in selector \"{text}\"")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def _check_key(key: str, fail: Callable[[str], SelectorError]) -> None:
    if key in ("(", ")", ",", "=", "==", "!=", "!"):
        raise fail(f"found '{key}', expected: identifier")
    errors = qualified_name_errors(key)
    if errors:
        raise fail(f'key: Invalid value: "{key}": {"; ".join(errors)}')


def _value(value: str, fail: Callable[[str], SelectorError]) -> str:
    if value in ("(", ")", "=", "==", "!=", "!"):
        raise fail(f"found '{value}', expected: identifier")
    errors = label_value_errors(value)
    if errors:
        raise fail(f'values[0][key]: Invalid value: "{value}": {"; ".join(errors)}')
    return value


# --- field selectors ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    value: str
    negated: bool
    getter: Callable[[dict[str, Any]], str]

    def matches(self, obj: dict[str, Any]) -> bool:
        return (self.getter(obj) == self.value) != self.negated


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(req.matches(obj) for req in self.requirements)

    def exact_name(self) -> str | None:
        """The name an ``metadata.name=x`` requirement pins, so a list can read one key."""
        for req in self.requirements:
            if req.field == "metadata.name" and not req.negated:
                return req.value
        return None


def of_named_object(
    selector: FieldSelector, name: str, supported: Mapping[str, Callable[[dict[str, Any]], str]]
) -> FieldSelector:
    """The field selector of a watch of the object ``name`` (kube's deprecated ``/watch/`` path of
    an object): ``metadata.name=<name>``, or ``selector`` when it pins that same name; any other
    is kube's 400 (a :class:`SelectorError`)."""
    if selector.empty:
        return FieldSelector((FieldRequirement("metadata.name", name, False, supported["metadata.name"]),))
    if selector.exact_name() != name:
        raise SelectorError("fieldSelector metadata.name doesn't match requested name")
    return selector


def parse_field_selector(
    text: str | None,
    supported: Mapping[str, Callable[[dict[str, Any]], str]],
    *,
    refuse: Callable[[str], str] = lambda name: f"field label not supported: {name}",
) -> FieldSelector:
    """The selector over the ``supported`` fields; another field is a :class:`SelectorError`
    in ``refuse``'s words (kube's 400)."""
    if not text or not text.strip():
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for part in _split_unescaped(text, ","):
        part = part.strip()
        if not part:
            continue
        op = next((candidate for candidate in ("!=", "==", "=") if candidate in part), None)
        if op is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, _, value = part.partition(op)
        negated = op == "!="
        field = field.strip()
        getter = supported.get(field)
        if getter is None:
            raise SelectorError(refuse(field))
        reqs.append(FieldRequirement(field, _unescape(value.strip()), negated, getter))
    return FieldSelector(tuple(reqs))


def pinned_name(text: str | None) -> str | None:
    """The name a field selector pins with ``metadata.name=x`` (or ``==``), whatever else it
    selects on, as kube's ``RequiresExactMatch`` reads it; None when it pins none, the
    selector does not parse, or the name could not be a path segment (kube's
    ``IsValidPathSegmentName``: not ``.`` or ``..``, no ``/`` or ``%``)."""
    if not text:
        return None
    for part in _split_unescaped(text, ","):
        op = next((candidate for candidate in ("!=", "==", "=") if candidate in part), None)
        if op is None:
            return None
        field, _, value = part.partition(op)
        if op != "!=" and field.strip() == "metadata.name":
            name = _unescape(value.strip())
            return None if name in (".", "..") or "/" in name or "%" in name else name
    return None


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)
