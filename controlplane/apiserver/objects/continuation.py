"""A list's continue token, as kube's storage writes and reads it (``meta.k8s.io/v1``: the
revision the list was read at and the key to resume after, in unpadded URL-safe base64 JSON).

A token that does not decode is kube's 400 ``invalid continue token: continue key is not valid...``
with the words of the step that failed: Go's base64 error, Go's JSON syntax error for a body
that does not parse (``invalid character 'x' looking for beginning of value``, ``unexpected end
of JSON input``: only a forged token can get there), Go's error for the first field of the wrong
type, a zero revision, an empty or unclean start key, an unknown version.
A negative revision (kube's "the latest") lists at the current revision.

In: a token and the list's key prefix. Out: the revision (None: now) and the storage key to
resume after; or the token for a page. Pure: no I/O.
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
from typing import Any, Final

from controlplane.apiserver import codec, errors
from controlplane.apiserver.decoding import INT64_MAX

VERSION: Final = "meta.k8s.io/v1"
_ALPHABET: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_INTEGER: Final = re.compile(r"-?(0|[1-9][0-9]*)")
_NOT_VALID: Final = "continue key is not valid"
#: The token's fields and their Go types (kube's storage.continueToken).
_FIELDS: Final = {"v": "string", "rv": "int64", "start": "string"}


class _Number(str):
    """A JSON number as written, so Go's error can quote it."""


class _Object(list[tuple[str, Any]]):
    """A JSON object's members in order (a duplicate key's last value wins, as in Go)."""


def encode(revision: int, start: str, prefix: str) -> str:
    """The token that resumes a list read at ``revision`` after the key ``start``."""
    token = {"v": VERSION, "rv": revision, "start": start.removeprefix(prefix)}
    return base64.urlsafe_b64encode(codec.dumps(token)).decode().rstrip("=")


def decode(token: str, prefix: str) -> tuple[int | None, str]:
    """The revision (None: the latest) and the key after which the list goes on."""
    try:
        fields = _fields(_json(_raw_url_base64(token)))
    except _Invalid as invalid:
        raise errors.BadRequest(f"invalid continue token: {_NOT_VALID}: {invalid}") from None
    version, revision, start = fields["v"], fields["rv"], fields["start"]
    if version != VERSION:
        raise errors.BadRequest(
            f"invalid continue token: {_NOT_VALID}: server does not recognize this encoded version {version}"
        )
    if revision == 0:
        raise errors.BadRequest(
            f"invalid continue token: {_NOT_VALID}: incorrect encoded start resourceVersion (version {VERSION})"
        )
    if not start:
        raise errors.BadRequest(f"invalid continue token: {_NOT_VALID}: encoded start key empty (version {VERSION})")
    key = start if start.startswith("/") else "/" + start
    if _go_path_clean(key) != key:  # no climbing out of the list's prefix
        raise errors.BadRequest(f"invalid continue token: {_NOT_VALID}: {start}")
    return (revision if revision > 0 else None), prefix + key[1:]


class _Invalid(Exception):
    """One decoding step failed; the message is Go's."""


def _raw_url_base64(token: str) -> bytes:
    """Go's ``base64.RawURLEncoding.DecodeString``: no padding, line breaks skipped, the
    offset of the first byte it cannot take."""
    raw = token.encode()
    count = 0
    for index, byte in enumerate(raw):
        if byte in b"\r\n":
            continue
        if byte not in _ALPHABET:
            raise _Invalid(f"illegal base64 data at input byte {index}")
        count += 1
    if count % 4 == 1:
        raise _Invalid(f"illegal base64 data at input byte {len(raw) - 1}")
    data = raw.replace(b"\r", b"").replace(b"\n", b"")
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


def _json(data: bytes) -> Any:
    """The token's JSON as Go's ``json.Unmarshal`` sees it: the whole body checked first (Go's
    syntax error), then the top-level value, and an object's members with only their kinds
    kept for nested objects and arrays (all the token's fields need, at any depth)."""
    top, members = _Scanner(data).scan()
    if members is None:
        return _value(data, *top)
    return _Object((json.loads(data[key[0]:key[1]].decode(errors="replace")), _value(data, *value))
                   for key, value in members)


def _value(data: bytes, start: int, end: int) -> Any:
    if data[start] in b"{[":
        return _Object() if data[start] == ord("{") else []
    return json.loads(data[start:end].decode(errors="replace"), parse_int=_Number, parse_float=_Number)


Span = tuple[int, int]
_DIGITS: Final = frozenset(b"0123456789")
_WHITESPACE: Final = frozenset(b" \t\r\n")
_LITERALS: Final = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
_ESCAPES: Final = frozenset(b'bfnrt\\/"')
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_VALUE_STARTS: Final = frozenset(b'{["-') | _DIGITS | frozenset(_LITERALS)
_MAX_DEPTH: Final = 10000  # Go's maxNestingDepth
_GO_ESCAPES: Final = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}


def _quote_char(byte: int) -> str:
    """Go's ``quoteChar``: a byte as its scanner's errors quote it (``'x'``, ``'\\x00'``, ``'\\u0080'``)."""
    if byte in (ord("'"), ord('"')):
        return "'\\''" if byte == ord("'") else "'\"'"
    if byte in _GO_ESCAPES:
        text = _GO_ESCAPES[byte]
    elif byte == ord("\\"):
        text = "\\\\"
    elif byte < 0x20 or byte == 0x7F:
        text = f"\\x{byte:02x}"
    elif 0x7F < byte <= 0xA0 or byte == 0xAD:  # not printable for Go's strconv.IsPrint
        text = f"\\u{byte:04x}"
    else:
        text = chr(byte)
    return f"'{text}'"


class _Scanner:
    """Go's JSON scanner (``encoding/json``'s ``checkValid``) over a token's bytes: its syntax
    error, word for word, or the span of the top-level value and, for an object, of each
    member's key and value. At the end of the input Go feeds the scanner one space: a value cut
    short inside a literal, a number or an escape is an ``invalid character ' '``, anything
    else ``unexpected end of JSON input``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)

    def error(self, at: int, context: str) -> _Invalid:
        """Go's error at a structural point (the end of the input is ``unexpected end``)."""
        if at >= self.n:
            return _Invalid("unexpected end of JSON input")
        return _Invalid(f"invalid character {_quote_char(self.data[at])} {context}")

    def error_in_value(self, at: int, context: str) -> _Invalid:
        """Go's error inside a scalar (the end of the input is the space Go feeds it)."""
        byte = self.data[at] if at < self.n else ord(" ")
        return _Invalid(f"invalid character {_quote_char(byte)} {context}")

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
                raise _Invalid("unexpected end of JSON input")
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


def _fields(value: Any) -> dict[str, Any]:
    """Go's ``json.Unmarshal`` into the token's struct: keys matched without regard to case, a
    value of the wrong type left out (the first one is the error), unknown keys ignored."""
    fields: dict[str, Any] = {"v": "", "rv": 0, "start": ""}
    if value is None:
        return fields
    if not isinstance(value, _Object):
        raise _Invalid(f"json: cannot unmarshal {_kind(value)} into Go value of type storage.continueToken")
    first_error: str | None = None
    for key, item in value:
        name = key if key in _FIELDS else next((f for f in _FIELDS if f.lower() == key.lower()), None)
        if name is None or item is None:
            continue
        go_type = _FIELDS[name]
        if go_type == "string" and isinstance(item, str) and not isinstance(item, _Number):
            fields[name] = item
        elif go_type == "int64" and isinstance(item, _Number) and len(item) <= 20 and _INTEGER.fullmatch(item) and (
            -INT64_MAX - 1 <= int(item) <= INT64_MAX
        ):
            fields[name] = int(item)
        elif first_error is None:
            kind = f"number {item}" if isinstance(item, _Number) and go_type == "int64" else _kind(item)
            first_error = f"json: cannot unmarshal {kind} into Go struct field continueToken.{name} of type {go_type}"
    if first_error is not None:
        raise _Invalid(first_error)
    return fields


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _Number):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, _Object) else "array"


def _go_path_clean(key: str) -> str:
    """Go's ``path.Clean`` of a key that starts with ``/`` (POSIX keeps a leading ``//``; Go does not)."""
    cleaned = posixpath.normpath(key)
    return "/" + cleaned.lstrip("/")
