"""Go's ``encoding/json`` syntax errors, in its words, for the places where kube-apiserver passes
them on to the client (a malformed continue token: ``invalid continue token: continue key is not
valid: invalid character 'x' looking for beginning of value``).

Python's parser rejects the same documents but says so differently; :func:`syntax_error` scans
a document as Go's ``checkValid`` does and returns the message of the first error Go reports.

In: the raw bytes of a JSON document. Out: None when Go accepts it, else Go's message. Pure.
"""

from __future__ import annotations

from typing import Final

_END: Final = "unexpected end of JSON input"
_SPACE: Final = b" \t\r\n"
_ESCAPES: Final = b'"\\/bfnrtu'
_HEX: Final = b"0123456789abcdefABCDEF"
_DIGITS: Final = b"0123456789"
_GO_ESCAPES: Final = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}


class _Failed(Exception):
    pass


def quote_char(byte: int) -> str:
    """Go's ``quoteChar``: how its JSON errors print one byte (``'x'``, ``'\\x00'``, ``'\\u0080'``)."""
    if byte == 0x27:
        return "'\\''"
    if byte == 0x22:
        return "'\"'"
    if byte in _GO_ESCAPES:
        return f"'{_GO_ESCAPES[byte]}'"
    char = chr(byte)  # Go's string(byte) is the code point, as here
    if byte < 0x20 or byte == 0x7F:
        return f"'\\x{byte:02x}'"
    if 0x80 <= byte < 0xA0 or byte == 0xAD:
        return f"'\\u{byte:04x}'"
    return f"'{char}'"


def syntax_error(data: bytes) -> str | None:
    """Go's message for the first syntax error in ``data`` (None: valid JSON)."""
    try:
        end = _value(data, _skip(data, 0))
        end = _skip(data, end)
        if end < len(data):
            raise _Failed(f"invalid character {quote_char(data[end])} after top-level value")
    except _Failed as failed:
        return str(failed)
    except RecursionError:  # nesting far deeper than any document the hub reads this way
        return "exceeded max depth"
    return None


def _skip(data: bytes, at: int) -> int:
    while at < len(data) and data[at] in _SPACE:
        at += 1
    return at


def _at(data: bytes, at: int) -> int:
    if at >= len(data):
        raise _Failed(_END)
    return data[at]


def _invalid(byte: int, where: str) -> _Failed:
    return _Failed(f"invalid character {quote_char(byte)} {where}")


def _value(data: bytes, at: int) -> int:
    byte = _at(data, at)
    if byte == ord("{"):
        return _object(data, at + 1)
    if byte == ord("["):
        return _array(data, at + 1)
    if byte == ord('"'):
        return _string(data, at + 1)
    if byte == ord("-") or byte in _DIGITS:
        return _number(data, at)
    for literal in (b"true", b"false", b"null"):
        if byte == literal[0]:
            for index in range(1, len(literal)):
                got = _at(data, at + index)
                if got != literal[index]:
                    expected = chr(literal[index])
                    raise _invalid(got, f"in literal {literal.decode()} (expecting '{expected}')")
            return at + len(literal)
    raise _invalid(byte, "looking for beginning of value")


def _object(data: bytes, at: int) -> int:
    at = _skip(data, at)
    if _at(data, at) == ord("}"):
        return at + 1
    while True:
        byte = _at(data, at)
        if byte != ord('"'):
            raise _invalid(byte, "looking for beginning of object key string")
        at = _skip(data, _string(data, at + 1))
        byte = _at(data, at)
        if byte != ord(":"):
            raise _invalid(byte, "after object key")
        at = _skip(data, _value(data, _skip(data, at + 1)))
        byte = _at(data, at)
        if byte == ord("}"):
            return at + 1
        if byte != ord(","):
            raise _invalid(byte, "after object key:value pair")
        at = _skip(data, at + 1)


def _array(data: bytes, at: int) -> int:
    at = _skip(data, at)
    if _at(data, at) == ord("]"):
        return at + 1
    while True:
        at = _skip(data, _value(data, at))
        byte = _at(data, at)
        if byte == ord("]"):
            return at + 1
        if byte != ord(","):
            raise _invalid(byte, "after array element")
        at = _skip(data, at + 1)


def _string(data: bytes, at: int) -> int:
    while True:
        byte = _at(data, at)
        at += 1
        if byte == ord('"'):
            return at
        if byte < 0x20:
            raise _invalid(byte, "in string literal")
        if byte == ord("\\"):
            escape = _at(data, at)
            at += 1
            if escape not in _ESCAPES:
                raise _invalid(escape, "in string escape code")
            if escape == ord("u"):
                for _ in range(4):
                    digit = _at(data, at)
                    if digit not in _HEX:
                        raise _invalid(digit, "in \\u hexadecimal character escape")
                    at += 1


def _number(data: bytes, at: int) -> int:
    if data[at] == ord("-"):
        at += 1
        if _at(data, at) not in _DIGITS:
            raise _invalid(data[at], "in numeric literal")
    if data[at] == ord("0"):
        at += 1
    else:
        at = _digits(data, at)
    if at < len(data) and data[at] == ord("."):
        at += 1
        if _at(data, at) not in _DIGITS:
            raise _invalid(data[at], "in numeric literal")
        at = _digits(data, at)
    if at < len(data) and data[at] in b"eE":
        at += 1
        if _at(data, at) in b"+-":
            at += 1
        if _at(data, at) not in _DIGITS:
            raise _invalid(data[at], "in numeric literal")
        at = _digits(data, at)
    return at


def _digits(data: bytes, at: int) -> int:
    while at < len(data) and data[at] in _DIGITS:
        at += 1
    return at
