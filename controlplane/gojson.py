"""Go's text of values, as kube writes it into objects and messages.

:func:`go_json` is ``encoding/json``'s text, for the two layers that write it and may not import
each other: the kube API rules (``apis.kube``: the autoscaling/v1 annotations, patch error
messages) and the API server's pure patch logic (``apiserver.patching``: the last-applied
annotation). :func:`go_quote` is ``strconv.Quote`` (``%q``), which kube's messages use, and
:func:`go_time_quote` the ``time`` package's own quoting in its duration errors;
:func:`go_json_value` is ``json.Marshal`` of a decoded JSON value (a CRD's printer columns).

Decoding: :func:`syntax_error` is the error ``json.Unmarshal`` gives for text that is not JSON
(its scanner's ``invalid character 'x' looking for beginning of value``, ``unexpected end of
JSON input``), :func:`scan` the same check keeping where the top-level value and an object's
members lie, and :func:`cannot_unmarshal` its error for a value of the wrong JSON type. They run
only to word a refusal: good input is parsed by a fast parser and never scanned here.
:func:`go_printed` is ``%v`` of a decoded JSON value and :func:`go_float` that of a float64.
:func:`parse_bool` is ``strconv.ParseBool``, which reads kube's boolean flags, query parameters
and annotations. :func:`go_string` is the text Go's encoder writes for a string of bytes that may
not be UTF-8, :func:`deep_equal` ``reflect.DeepEqual`` on decoded JSON. A leaf: the standard
library only, no I/O.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Final

#: What Go's encoder escapes that Python's leaves as is: HTML's special characters and the two
#: line separators JavaScript does not allow in strings.
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


#: The escapes strconv.Quote writes for these control characters (others are ``\\xNN``).
_GO_CONTROL = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """``strconv.Quote``: ``"`` and ``\\`` escaped, printable runes as they are, the control
    characters ``\\a \\b \\f \\n \\r \\t \\v`` by name, other ASCII controls and DEL as ``\\xNN``,
    other unprintable runes (spaces but U+0020, format characters, line separators) as ``\\uNNNN``
    or ``\\UNNNNNNNN``, and what is not UTF-8 (a lone surrogate) as its bytes, ``\\xNN`` each."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():  # Python's printable runes are Go's unicode.IsPrint ones
            out.append(ch)
        elif ch in _GO_CONTROL:
            out.append(_GO_CONTROL[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape" if code >= 0xDC80 else "surrogatepass"))
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_time_quote(text: str) -> str:
    """The ``time`` package's quoting of a duration in its errors (not strconv's): ``"`` and
    ``\\`` escaped, every byte of a control or non-ASCII character as ``\\xNN``."""
    out = ['"']
    for byte in text.encode("utf-8", "surrogatepass"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x80:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    out.append('"')
    return "".join(out)


#: What Go's ``strconv.ParseBool`` reads as true and as false; it refuses any other text.
_BOOLS: Final = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def go_printed(value: Any) -> str:
    """``%+v`` of a decoded JSON value (``map[string]interface{}`` and what it holds): maps as
    ``map[key:value ...]`` with sorted keys, lists as ``[a b]``, strings bare, nil as ``<nil>``,
    floats in Go's shortest ``%g`` form (``1.5``, ``1e+21``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_printed(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_printed(v) for v in value) + "]"
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def go_syntax(value: Any) -> str:
    """``%#v`` of a decoded JSON value inside ``interface{}``: strings quoted, maps and lists as
    Go literals (``map[string]interface {}{"a":1}``, ``[]interface {}{"x"}``), nil as
    ``interface {}(nil)``."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{go_quote(str(k))}:{go_syntax(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_syntax(v) for v in value) + "}"
    return str(value)


def go_float(value: float) -> str:
    """strconv's shortest ``'g'`` form, as ``%v`` prints a float64: an exponent below -4 or
    from 6 on is written ``1.5e+06``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = Decimal(repr(value)).normalize()
    exponent = shortest.adjusted()
    if -4 <= exponent < 6:
        return format(shortest, "f")
    sign, digits, _ = shortest.as_tuple()
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def parse_bool(text: object) -> bool | None:
    """Go's ``strconv.ParseBool``: True or False, None for a text it refuses (or no text at all)."""
    return _BOOLS.get(text) if isinstance(text, str) else None


def go_json(value: Any, *, sort_keys: bool = False) -> str:
    """``json.Marshal``'s text of ``value``: compact, keys in the order given (``sort_keys``: as
    Go orders a map's), and ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as Go escapes them."""
    text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _GO_ESCAPES:
        text = text.replace(raw, escaped)
    return text


def go_json_value(value: Any) -> str:
    """``json.Marshal`` of a decoded JSON value (``map[string]interface{}`` and what it holds): as
    :func:`go_json` with a map's keys sorted as Go sorts them, and a float64 as Go writes it (``1``
    for 1.0, ``0.5``, ``1e-7``, ``1e+21``). ValueError for NaN and infinities, which Go refuses."""
    if isinstance(value, float):
        return _go_json_float(value)
    if not isinstance(value, dict | list):
        return go_json(value)
    if isinstance(value, list):
        return "[" + ",".join(map(go_json_value, value)) + "]"
    return "{" + ",".join(f"{go_json(str(k))}:{go_json_value(v)}" for k, v in sorted(value.items())) + "}"


def _go_json_float(value: float) -> str:
    # encoding/json: strconv's shortest 'f' form, or its 'e' form below 1e-6 and from 1e21 on,
    # with a one-digit negative exponent written as such (1e-7, not 1e-07).
    if not math.isfinite(value):
        raise ValueError(f"json: unsupported value: {value}")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)
        return text[:-2] + text[-1] if text[-4:-1] == "e-0" else text
    return format(Decimal(repr(value)).normalize(), "f")


#: The escapes ``surrogateescape`` decodes the bytes of invalid UTF-8 to, each one U+FFFD.
_INVALID_BYTES: Final = dict.fromkeys(range(0xDC80, 0xDD00), "\ufffd")


def go_string(data: bytes) -> str:
    """The text ``encoding/json`` writes for a Go string of bytes ``data``: valid UTF-8 as it is,
    each byte that is not part of a valid sequence (a string cut inside a character) as U+FFFD."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape").translate(_INVALID_BYTES)


def deep_equal(a: Any, b: Any) -> bool:
    """Go's ``reflect.DeepEqual`` on decoded JSON (kube's ratcheting compares with it): unlike
    Python's ``==``, ``true`` is not ``1`` and ``1`` is not ``1.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(deep_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def json_kind(value: Any) -> str:
    """The word Go's ``UnmarshalTypeError`` uses for a decoded JSON value's type."""
    kinds = ((bool, "bool"), ((int, float), "number"), (str, "string"), (list, "array"), (dict, "object"))
    return next((name for types, name in kinds if isinstance(value, types)), "null")


def cannot_unmarshal(value: Any, go_type: str) -> str:
    """``json.Unmarshal``'s error for a top-level ``value`` of another JSON type than ``go_type``."""
    return f"json: cannot unmarshal {json_kind(value)} into Go value of type {go_type}"


class GoJSONError(ValueError):
    """``encoding/json``'s error, word for word."""


Span = tuple[int, int]
_DIGITS: Final = frozenset(b"0123456789")
_WHITESPACE: Final = frozenset(b" \t\r\n")
_LITERALS: Final = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
_ESCAPES: Final = frozenset(b'bfnrt\\/"')
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_VALUE_STARTS: Final = frozenset(b'{["-') | _DIGITS | frozenset(_LITERALS)
_MAX_DEPTH: Final = 10000  # Go's maxNestingDepth


def quote_char(byte: int) -> str:
    """Go's ``quoteChar``: a byte as its scanner's errors quote it (``'x'``, ``'\\x00'``,
    ``'\\u0080'``): the byte read as the rune of that number, in ``strconv.Quote``'s escapes."""
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(byte))[1:-1] + "'"


def syntax_error(data: bytes) -> str | None:
    """The error ``json.Unmarshal`` gives for ``data`` before decoding anything (its ``checkValid``),
    or None when ``data`` is one JSON value."""
    try:
        scan(data)
    except GoJSONError as error:
        return str(error)
    return None


def scan(data: bytes) -> tuple[Span, list[tuple[Span, Span]] | None]:
    """Go's check of ``data``: GoJSONError with its syntax error, or the span of the top-level value
    and, when it is an object, the spans of each member's key and value, in order."""
    return _Scanner(data).scan()


class _Scanner:
    """Go's JSON scanner (``encoding/json``'s ``checkValid``): its syntax error, word for word, or
    the span of the top-level value and, for an object, of each member's key and value. At the
    end of the input Go feeds the scanner one space: a value cut short inside a literal, a number
    or an escape is an ``invalid character ' '``, anything else ``unexpected end of JSON input``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)

    def error(self, at: int, context: str) -> GoJSONError:
        """Go's error at a structural point (the end of the input is ``unexpected end``)."""
        if at >= self.n:
            return GoJSONError("unexpected end of JSON input")
        return GoJSONError(f"invalid character {quote_char(self.data[at])} {context}")

    def error_in_value(self, at: int, context: str) -> GoJSONError:
        """Go's error inside a scalar (the end of the input is the space Go feeds it)."""
        byte = self.data[at] if at < self.n else ord(" ")
        return GoJSONError(f"invalid character {quote_char(byte)} {context}")

    def skip(self, at: int) -> int:
        while at < self.n and self.data[at] in _WHITESPACE:
            at += 1
        return at

    def digits(self, at: int) -> int:
        while at < self.n and self.data[at] in _DIGITS:
            at += 1
        return at

    def scalar(self, at: int) -> int:
        """Where the string, literal or number starting at ``at`` ends."""
        data, first = self.data, self.data[at]
        if first == ord('"'):
            return self.string(at)
        if first in _LITERALS:
            word = _LITERALS[first]
            for offset in range(1, len(word)):
                if at + offset >= self.n or data[at + offset] != word[offset]:
                    raise self.error_in_value(at + offset, f"in literal {word.decode()} (expecting '{chr(word[offset])}')")
            return at + len(word)
        if first == ord("-"):
            at += 1
            if at >= self.n or data[at] not in _DIGITS:
                raise self.error_in_value(at, "in numeric literal")
        at = at + 1 if data[at] == ord("0") else self.digits(at)
        if at < self.n and data[at] == ord("."):
            if at + 1 >= self.n or data[at + 1] not in _DIGITS:
                raise self.error_in_value(at + 1, "after decimal point in numeric literal")
            at = self.digits(at + 1)
        if at < self.n and data[at] in b"eE":
            at += 1
            if at < self.n and data[at] in b"+-":
                at += 1
            if at >= self.n or data[at] not in _DIGITS:
                raise self.error_in_value(at, "in exponent of numeric literal")
            at = self.digits(at)
        return at

    def string(self, at: int) -> int:
        data = self.data
        at += 1
        while True:
            if at >= self.n:
                raise GoJSONError("unexpected end of JSON input")
            byte = data[at]
            if byte == ord('"'):
                return at + 1
            if byte < 0x20:
                raise self.error_in_value(at, "in string literal")
            if byte == ord("\\"):
                at += 1
                if at < self.n and data[at] == ord("u"):
                    for _ in range(4):
                        at += 1
                        if at >= self.n or data[at] not in _HEX:
                            raise self.error_in_value(at, "in \\u hexadecimal character escape")
                elif at >= self.n or data[at] not in _ESCAPES:
                    raise self.error_in_value(at, "in string escape code")
            at += 1

    def scan(self) -> tuple[Span, list[tuple[Span, Span]] | None]:
        data, stack = self.data, bytearray()  # the open containers' brackets
        members: list[tuple[Span, Span]] = []
        key: Span = (0, 0)
        top = member = -1  # where the top-level value and the current member's value start
        at, state = 0, "value"  # what comes next: "value", "value-or-]", "key", "key-or-}", "after"
        while True:
            if state == "after":  # a value ended at ``at``
                if member >= 0 and len(stack) == 1:
                    members.append((key, (member, at)))
                    member = -1
                at = self.skip(at)
                if not stack:
                    if at < self.n:
                        raise self.error(at, "after top-level value")
                    return (top, at), (members if data[top] == ord("{") else None)
                in_object = stack[-1] == ord("{")
                if at < self.n and data[at] == ord(","):
                    at, state = at + 1, ("key" if in_object else "value")
                elif at < self.n and data[at] == (ord("}") if in_object else ord("]")):
                    stack.pop()
                    at += 1
                else:
                    raise self.error(at, "after object key:value pair" if in_object else "after array element")
                continue
            at = self.skip(at)
            closing = {"value-or-]": ord("]"), "key-or-}": ord("}")}.get(state)
            if closing is not None and at < self.n and data[at] == closing:
                stack.pop()
                at, state = at + 1, "after"
            elif state in ("key", "key-or-}"):
                if at >= self.n or data[at] != ord('"'):
                    raise self.error(at, "looking for beginning of object key string")
                end = self.string(at)
                if len(stack) == 1:
                    key = (at, end)
                at = self.skip(end)
                if at >= self.n or data[at] != ord(":"):
                    raise self.error(at, "after object key")
                at, state = at + 1, "value"
            elif at >= self.n or data[at] not in _VALUE_STARTS:
                raise self.error(at, "looking for beginning of value")
            else:
                if not stack:
                    top = at
                elif len(stack) == 1 and stack[0] == ord("{"):
                    member = at
                if data[at] in b"{[":
                    if len(stack) >= _MAX_DEPTH:
                        raise self.error(at, "exceeded max depth")
                    stack.append(data[at])
                    at, state = at + 1, ("key-or-}" if data[at] == ord("{") else "value-or-]")
                else:
                    at, state = self.scalar(at), "after"
