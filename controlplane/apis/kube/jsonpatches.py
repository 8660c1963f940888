"""A JSON patch (RFC 6902) applied as kube-apiserver applies it: with its JSON patch library,
evanphx/json-patch v4 (``gopkg.in/evanphx/json-patch.v4``, vendored by kubernetes/kubernetes), its
leniencies and its words.

What that library does that the RFC does not say: ``replace`` of a key an object lacks adds it
(its object lookup never fails), ``test`` of a missing key holds when the value is ``null`` or
left out, ``copy`` from a missing key copies ``null``, negative array indices count from the end
(``add`` at ``-1`` appends, after the last item), an index is read as Go's ``strconv.Atoi`` reads
it (``+1`` is 1), a null value is not walked through, and scalars compare as their JSON text
(``1`` is not ``1.0``). Its errors name the operation and its path (``error in remove for path:
'/spec/x/3': Unable to access invalid index: 3: invalid index referenced``), never the document.

kube-apiserver also sets the library's ``AccumulatedCopySizeLimit`` process-wide to its
``JSONPatchMaxCopyBytes`` (3 MiB): the JSON size of what the ``copy`` operations of one patch add,
summed over the patch. Every JSON patch it applies counts against it: a client's (a PATCH request,
422 past it) and the one a mutating admission webhook answers with (its dispatcher's 500
``Internal error occurred: Unable to complete the copy, ...``). Without it a patch of a few dozen
copies, each of the document into itself, doubles the object each time.

Karmada applies its interpreter webhooks' patches with the library's v5 instead
(``json_patched(..., v5=True)``): there an object's missing key is not there to ``replace``,
``copy`` or ``move`` (``unable to get nonexistent key: x: missing value``), though ``test`` still
reads it as null; its ``remove`` says ``unable to remove nonexistent key`` and its ``copy`` quotes a
missing ``from`` path.

In: a document and a JSON patch (parsed). Out: the patched document, or :class:`JsonPatchFailed`
(:class:`CopiedTooMuch` among them) in the library's words. Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterator
from typing import Any, Final

import jsonpatch

from controlplane.gojson import cannot_unmarshal, go_json

#: kube's ``JSONPatchMaxCopyBytes`` (3 MiB, as the request body limit): the most the ``copy``
#: operations of one JSON patch may add, in bytes of JSON.
MAX_JSON_PATCH_COPY_BYTES: Final = 3 * 1024 * 1024

_MISSING: Final = "missing value"
_INVALID_INDEX: Final = "invalid index referenced"
_TEST_FAILED: Final = "test failed"
_DIGITS: Final = re.compile(r"[0-9]*")
_INT_BITS: Final = 63
#: The most significant digits Go's ``ParseUint`` reads before it overflows 64 bits.
_UINT_DIGITS: Final = 20


class JsonPatchFailed(jsonpatch.JsonPatchException):
    """An operation of a JSON patch that does not apply; the text is the library's."""


class CopiedTooMuch(JsonPatchFailed):
    """The ``copy`` operations of a JSON patch added more than :data:`MAX_JSON_PATCH_COPY_BYTES`."""


class _Absent:
    """A patch operation's field that is not there (Go's nil ``*lazyNode``): unlike ``null``."""


_ABSENT: Final = _Absent()
#: What ``findObject`` found: the container (a dict or a list) and the key in it, or None.
_Found = tuple[dict[str, Any] | list[Any], str] | None


def json_patched(doc: Any, patch: list[Any], *, v5: bool = False) -> Any:
    """A copy of ``doc`` with the RFC 6902 ``patch`` applied as evanphx/json-patch v4 applies it
    (``Patch.Apply``), one operation after the other; :class:`JsonPatchFailed` names the first
    that does not apply. ``v5``: as the library's v5 applies it instead (Karmada's, for its
    interpreter webhooks' patches), where an object's missing key is not there to replace, copy
    or move (``unable to get nonexistent key``)."""
    state = _Patching(copy.deepcopy(doc), v5=v5)
    for op in patch:
        state.apply(op if isinstance(op, dict) else {})
    return state.doc


def _atoi(key: str) -> int:
    """Go's ``strconv.Atoi``, with its errors: it reads the digits in turn and stops at the first
    that overflows 64 bits (out of range) or is not a digit (invalid syntax), so the digits are
    bounded before Python reads them."""
    sign = 1 if key[:1] in ("+", "-") else 0
    run = _DIGITS.match(key, sign)
    assert run is not None  # the pattern matches the empty string
    significant = run[0].lstrip("0")
    if len(significant) > _UINT_DIGITS or int(significant or "0") >= 2 ** (_INT_BITS + 1):
        raise JsonPatchFailed(f'strconv.Atoi: parsing "{key}": value out of range')
    if not run[0] or run.end() < len(key):
        raise JsonPatchFailed(f'strconv.Atoi: parsing "{key}": invalid syntax')
    value = int(significant or "0") * (-1 if sign and key[0] == "-" else 1)
    if not -(2**_INT_BITS) <= value < 2**_INT_BITS:
        raise JsonPatchFailed(f'strconv.Atoi: parsing "{key}": value out of range')
    return value


def _invalid_index(idx: int) -> JsonPatchFailed:
    return JsonPatchFailed(f"Unable to access invalid index: {idx}: {_INVALID_INDEX}")


def _array_get(ary: list[Any], key: str) -> Any:
    idx = _atoi(key)
    if idx < 0:
        if idx < -len(ary):
            raise _invalid_index(idx)
        idx += len(ary)
    if idx >= len(ary):
        raise _invalid_index(idx)
    return ary[idx]


class _MissingKey(JsonPatchFailed):
    """v5's ``get`` of a key an object lacks (its ``ErrMissing``, which its ``test`` reads as null)."""


def _get(con: dict[str, Any] | list[Any], key: str, *, v5: bool = False) -> Any:
    """The library's ``get``: in v4 an object's missing key is ``None`` (never an error), in v5
    :class:`_MissingKey`."""
    if not isinstance(con, dict):
        return _array_get(con, key)
    if v5 and key not in con:
        raise _MissingKey(f"unable to get nonexistent key: {key}: {_MISSING}")
    return con.get(key)


def _add(con: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(con, dict):
        con[key] = value
        return
    if key == "-":
        con.append(value)
        return
    try:
        idx = _atoi(key)
    except JsonPatchFailed as exc:
        raise JsonPatchFailed(f"value was not a proper array index: '{key}': {exc}") from None
    size = len(con) + 1
    if idx >= size or idx < -size:
        raise _invalid_index(idx)
    con.insert(idx + size if idx < 0 else idx, value)


def _remove(con: dict[str, Any] | list[Any], key: str, *, v5: bool = False) -> Any:
    if isinstance(con, dict):
        if key not in con:
            raise JsonPatchFailed(f"{'u' if v5 else 'U'}nable to remove nonexistent key: {key}: {_MISSING}")
        return con.pop(key)
    idx = _atoi(key)
    if idx >= len(con) or idx < -len(con):
        raise _invalid_index(idx)
    return con.pop(idx)


def _set(con: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(con, dict):
        con[key] = value
    else:
        idx = _atoi(key)
        con[idx + len(con) if idx < 0 else idx] = value


def _equal(a: Any, b: Any) -> bool:
    """``lazyNode.equal``: objects and arrays item by item, scalars as their JSON text."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    return type(a) is type(b) and a == b


class _Patching:
    """One patch being applied: the document and what its copies have added so far."""

    def __init__(self, doc: Any, *, v5: bool) -> None:
        self.doc = doc
        self.copied = 0
        self.v5 = v5

    def find(self, path: str) -> _Found:
        """``findObject``: the container of the path's last token, walked through objects and
        arrays (not through a null, a scalar, or a path without ``/``)."""
        parts = path.split("/")
        if len(parts) < 2:
            return None
        con = self.doc
        for part in parts[1:-1]:
            if not isinstance(con, (dict, list)):
                return None
            try:
                con = _get(con, _decoded(part))
            except JsonPatchFailed:
                return None
        if not isinstance(con, (dict, list)):
            return None
        return con, _decoded(parts[-1])

    def apply(self, op: dict[str, Any]) -> None:
        kind = op.get("op")
        kind = kind if isinstance(kind, str) else "unknown"
        handler = getattr(self, f"_op_{kind}", None) if kind in _KINDS else None
        if handler is None:
            raise JsonPatchFailed(f"Unexpected kind: {kind}")
        handler(op)

    def located(self, path: str, missing: str) -> tuple[dict[str, Any] | list[Any], str]:
        """:meth:`find`, or the operation's ``missing`` words (ending in "missing value")."""
        found = self.find(path)
        if found is None:
            raise JsonPatchFailed(f"{missing}: {_MISSING}")
        return found

    def _op_add(self, op: dict[str, Any]) -> None:
        path = _field(op, "path", "add operation failed to decode path", terse=True)
        found = self.located(path, f'add operation does not apply: doc is missing path: "{path}"')
        with _wrapped(f"error in add for path: '{path}'"):
            _add(*found, _value(op))

    def _op_remove(self, op: dict[str, Any]) -> None:
        path = _field(op, "path", "remove operation failed to decode path", terse=True)
        found = self.located(path, f'remove operation does not apply: doc is missing path: "{path}"')
        with _wrapped(f"error in remove for path: '{path}'"):
            _remove(*found, v5=self.v5)

    def _op_replace(self, op: dict[str, Any]) -> None:
        path = _field(op, "path", "replace operation failed to decode path")
        if path == "":
            value = op.get("value")
            if not isinstance(value, (dict, list)):
                # The library wraps a nil error here, which Go prints as %!w(<nil>); without a value
                # at all it dereferences nil (a panic), answered here with the same words.
                raise JsonPatchFailed("replace operation value must be object or array: %!w(<nil>)")
            self.doc = copy.deepcopy(value)
            return
        found = self.located(path, f"replace operation does not apply: doc is missing path: {path}")
        try:
            _get(*found, v5=self.v5)
        except JsonPatchFailed:
            raise JsonPatchFailed(
                f"replace operation does not apply: doc is missing key: {path}: {_MISSING}"
            ) from None
        _set(*found, _value(op))

    def _op_move(self, op: dict[str, Any]) -> None:
        source = _field(op, "from", "move operation failed to decode from")
        con, key = self.located(source, f"move operation does not apply: doc is missing from path: {source}")
        with _wrapped(f"error in move for path: '{key}'"):
            _get(con, key, v5=self.v5)
            value = _remove(con, key, v5=self.v5)
        path = _field(op, "path", "move operation failed to decode path")
        target = self.located(path, f"move operation does not apply: doc is missing destination path: {path}")
        with _wrapped(f"error in move for path: '{path}'"):
            _add(*target, value)

    def _op_test(self, op: dict[str, Any]) -> None:
        path = _field(op, "path", "test operation failed to decode path")
        expected = op.get("value", _ABSENT)
        if path == "":
            holds = _equal(self.doc, expected)
        else:
            found = self.located(path, f"test operation does not apply: is missing path: {path}")
            with _wrapped(f"error in test for path: '{path}'"):
                try:
                    value = _get(*found, v5=self.v5)
                except _MissingKey:  # v5 tests a missing key as null
                    value = None
            holds = expected is _ABSENT or expected is None if value is None else _equal(value, expected)
        if not holds:
            raise JsonPatchFailed(f"testing value {path} failed: {_TEST_FAILED}")

    def _op_copy(self, op: dict[str, Any]) -> None:
        source = _field(op, "from", "copy operation failed to decode from")
        shown = f'"{source}"' if self.v5 else source  # v5 quotes it
        found = self.located(source, f"copy operation does not apply: doc is missing from path: {shown}")
        with _wrapped(f"error in copy for from: '{source}'"):
            value = _get(*found, v5=self.v5)
        path = _field(op, "path", "copy operation failed to decode path", terse=True)
        target = self.located(path, f"copy operation does not apply: doc is missing destination path: {path}")
        if value is not None:
            self.copied += len(go_json(value).encode())
        if self.copied > MAX_JSON_PATCH_COPY_BYTES:
            raise CopiedTooMuch(
                f"Unable to complete the copy, the accumulated size increase of copy is {self.copied}, "
                f"exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
            )
        with _wrapped("error while adding value during copy"):
            _add(*target, copy.deepcopy(value))


@contextlib.contextmanager
def _wrapped(prefix: str) -> Iterator[None]:
    """The library's ``fmt.Errorf("<prefix>: %w", err)`` around what the block raises."""
    try:
        yield
    except JsonPatchFailed as exc:
        raise JsonPatchFailed(f"{prefix}: {exc}") from None


_KINDS: Final = frozenset({"add", "remove", "replace", "move", "test", "copy"})


def _field(op: dict[str, Any], name: str, failure: str, *, terse: bool = False) -> str:
    """An operation's ``path`` or ``from`` (``Operation.Path``/``From``); where it is missing or
    not a string, ``failure`` with the cause (or, ``terse``, with the library's "missing value",
    as its ``add``, ``remove`` and a copy's path say)."""
    value = op.get(name)
    if isinstance(value, str):
        return value
    if terse:
        raise JsonPatchFailed(f"{failure}: {_MISSING}")
    cause = (
        (
            f"operation, missing from field: {_MISSING}"
            if name == "from"
            else f"operation missing path field: {_MISSING}"
        )
        if value is None
        else cannot_unmarshal(value, "string")
    )
    raise JsonPatchFailed(f"{failure}: {cause}")


def _value(op: dict[str, Any]) -> Any:
    """The operation's value, a copy (none is JSON's null)."""
    return copy.deepcopy(op.get("value"))


def _decoded(token: str) -> str:
    """A JSON pointer token unescaped (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``)."""
    return token.replace("~1", "/").replace("~0", "~")
