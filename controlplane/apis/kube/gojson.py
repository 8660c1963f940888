"""Why Go's ``json.Unmarshal`` refuses some bytes, in its own words.

kube checks that a docker-registry Secret's ``.dockerconfigjson`` (or ``.dockercfg``) is a JSON
object by unmarshalling it into ``map[string]interface{}`` and quoting the error:
``invalid character 'o' in literal null (expecting 'u')``, ``unexpected end of JSON input``,
``json: cannot unmarshal array into Go value of type map[string]interface {}``. Python's parser
accepts other inputs (``NaN``, a lone surrogate escape) and words its errors differently, so the
check is encoding/json's scanner, one byte at a time: the first byte no JSON value can continue
with is named, with what the scanner was looking for.

Pure: bytes in, Go's message or None out. Memory stays bounded by the input (the scanner keeps
one entry per open object or array, at most :data:`MAX_DEPTH`).
"""

from __future__ import annotations

import unicodedata
from enum import Enum

MAX_DEPTH = 10000  # encoding/json's maxNestingDepth
_SPACE = frozenset(b" \t\r\n")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'bfnrt\\/"')
_LITERALS = {ord("t"): "true", ord("f"): "false", ord("n"): "null"}


class _In(Enum):
    """An open container: an object waiting for a key or a value, or an array."""

    OBJECT_KEY = 0
    OBJECT_VALUE = 1
    ARRAY = 2


class _SyntaxError(Exception):
    pass


def _quote_char(c: int) -> str:
    """encoding/json's ``quoteChar``: the byte as a Go rune literal."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 92: "\\\\"}
    if c in named:
        return f"'{named[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    char = chr(c)
    if c < 0x80 or unicodedata.category(char)[0] in "LMNPS":
        return f"'{char}'"
    return f"'\\u{c:04x}'"


class _Scanner:
    """encoding/json's ``scanner``: :meth:`step` takes one byte; errors are :class:`_SyntaxError`."""

    def __init__(self) -> None:
        self.stack: list[_In] = []
        self.state = self.begin_value
        self.ended = False
        self.literal = ""  # the rest of true/false/null still expected
        self.word = ""
        self.hex_left = 0

    @staticmethod
    def fail(c: int, context: str) -> _SyntaxError:
        return _SyntaxError(f"invalid character {_quote_char(c)} {context}")

    def step(self, c: int) -> None:
        self.state(c)

    def push(self, kind: _In) -> None:
        self.stack.append(kind)
        if len(self.stack) > MAX_DEPTH:
            raise _SyntaxError("exceeded max depth")

    def begin_value_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("]"):
            self.end_value(c)
            return
        self.begin_value(c)

    def begin_value(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("{"):
            self.state = self.begin_string_or_empty
            self.push(_In.OBJECT_KEY)
        elif c == ord("["):
            self.state = self.begin_value_or_empty
            self.push(_In.ARRAY)
        elif c == ord('"'):
            self.state = self.in_string
        elif c == ord("-"):
            self.state = self.negative
        elif c == ord("0"):
            self.state = self.zero
        elif ord("1") <= c <= ord("9"):
            self.state = self.integer
        elif c in _LITERALS:
            self.word = _LITERALS[c]
            self.literal = self.word[1:]
            self.state = self.in_literal
        else:
            raise self.fail(c, "looking for beginning of value")

    def begin_string_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("}"):
            self.stack[-1] = _In.OBJECT_VALUE
            self.end_value(c)
            return
        self.begin_string(c)

    def begin_string(self, c: int) -> None:
        if c in _SPACE:
            return
        if c != ord('"'):
            raise self.fail(c, "looking for beginning of object key string")
        self.state = self.in_string

    def end_value(self, c: int) -> None:
        if not self.stack:
            self.state = self.end_top
            self.ended = True
            self.end_top(c)
            return
        if c in _SPACE:
            self.state = self.end_value
            return
        top = self.stack[-1]
        if top is _In.OBJECT_KEY:
            if c != ord(":"):
                raise self.fail(c, "after object key")
            self.stack[-1] = _In.OBJECT_VALUE
            self.state = self.begin_value
        elif top is _In.OBJECT_VALUE:
            if c == ord(","):
                self.stack[-1] = _In.OBJECT_KEY
                self.state = self.begin_string
            elif c == ord("}"):
                self.stack.pop()
                self.state = self.end_value
            else:
                raise self.fail(c, "after object key:value pair")
        elif c == ord(","):
            self.state = self.begin_value
        elif c == ord("]"):
            self.stack.pop()
            self.state = self.end_value
        else:
            raise self.fail(c, "after array element")

    def end_top(self, c: int) -> None:
        if c not in _SPACE:
            raise self.fail(c, "after top-level value")

    def in_string(self, c: int) -> None:
        if c == ord('"'):
            self.state = self.end_value
        elif c == ord("\\"):
            self.state = self.in_escape
        elif c < 0x20:
            raise self.fail(c, "in string literal")

    def in_escape(self, c: int) -> None:
        if c in _ESCAPES:
            self.state = self.in_string
        elif c == ord("u"):
            self.hex_left = 4
            self.state = self.in_hex
        else:
            raise self.fail(c, "in string escape code")

    def in_hex(self, c: int) -> None:
        if c not in _HEX:
            raise self.fail(c, "in \\u hexadecimal character escape")
        self.hex_left -= 1
        if not self.hex_left:
            self.state = self.in_string

    def negative(self, c: int) -> None:
        if c == ord("0"):
            self.state = self.zero
        elif ord("1") <= c <= ord("9"):
            self.state = self.integer
        else:
            raise self.fail(c, "in numeric literal")

    def integer(self, c: int) -> None:
        if c in _DIGITS:
            return
        self.zero(c)

    def zero(self, c: int) -> None:
        if c == ord("."):
            self.state = self.dot
        elif c in b"eE":
            self.state = self.exponent
        else:
            self.end_value(c)

    def dot(self, c: int) -> None:
        if c not in _DIGITS:
            raise self.fail(c, "after decimal point in numeric literal")
        self.state = self.fraction

    def fraction(self, c: int) -> None:
        if c in _DIGITS:
            return
        if c in b"eE":
            self.state = self.exponent
        else:
            self.end_value(c)

    def exponent(self, c: int) -> None:
        if c in b"+-":
            self.state = self.exponent_sign
            return
        self.exponent_sign(c)

    def exponent_sign(self, c: int) -> None:
        if c not in _DIGITS:
            raise self.fail(c, "in exponent of numeric literal")
        self.state = self.exponent_digits

    def exponent_digits(self, c: int) -> None:
        if c in _DIGITS:
            return
        self.end_value(c)

    def in_literal(self, c: int) -> None:
        expected = self.literal[0]
        if c != ord(expected):
            raise self.fail(c, f"in literal {self.word} (expecting '{expected}')")
        self.literal = self.literal[1:]
        if not self.literal:
            self.state = self.end_value


def _syntax_error(data: bytes) -> str | None:
    """encoding/json's ``checkValid``: the scanner over every byte, then a space for the end."""
    scanner = _Scanner()
    try:
        for c in data:
            scanner.step(c)
        if not scanner.ended:
            scanner.step(ord(" "))
    except _SyntaxError as exc:
        return str(exc)
    return None if scanner.ended else "unexpected end of JSON input"


def map_unmarshal_error(data: bytes) -> str | None:
    """Why ``json.Unmarshal(data, &map[string]interface{}{})`` fails, in Go's words, or None."""
    error = _syntax_error(data)
    if error is not None:
        return error
    first = data.lstrip(b" \t\r\n")[:1]
    if first in (b"{", b"n"):
        return None
    value = {b"[": "array", b'"': "string", b"t": "bool", b"f": "bool"}.get(first, "number")
    return f"json: cannot unmarshal {value} into Go value of type map[string]interface {{}}"
