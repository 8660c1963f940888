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
from controlplane.gojson import GoJSONError, scan

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
    except (_Invalid, GoJSONError) as invalid:
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
    top, members = scan(data)
    if members is None:
        return _value(data, *top)
    return _Object((json.loads(data[key[0]:key[1]].decode(errors="replace")), _value(data, *value))
                   for key, value in members)


def _value(data: bytes, start: int, end: int) -> Any:
    if data[start] in b"{[":
        return _Object() if data[start] == ord("{") else []
    return json.loads(data[start:end].decode(errors="replace"), parse_int=_Number, parse_float=_Number)


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
