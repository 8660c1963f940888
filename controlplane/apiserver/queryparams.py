"""Reading a resource request's query parameters as kube's parameter codec reads them: kube's
400 for a value that does not parse (the options they make are checked in :mod:`.requestoptions`).
Pure: no I/O beyond the request object.

The boolean parameters kube decodes into its option structs (``watch``, ``allowWatchBookmarks``,
``sendInitialEvents``, ``force``, ``orphanDependents``) are read here and nowhere else, as its
``Convert_Slice_string_To_bool`` reads them: false only when absent, ``0`` or ``false`` in any
case; any other value is true, the empty one included (``?watch`` and ``?watch=yes`` watch).
``pretty`` is not one of them: kube reads it by hand, with ``strconv.ParseBool`` (``negotiation``).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.decoding import INT64_MAX
from controlplane.apiserver.validation import FieldValidation


def field_validation(request: web.Request) -> FieldValidation:
    return FieldValidation.parse(request.query.get("fieldValidation"), default=FieldValidation.WARN)


def parameter_int64(value: str | None) -> int:
    """A query integer as kube's parameter codec reads it (Go's ``strconv.ParseInt``, whose error
    is kube's 400): any int64, 0 when absent."""
    if value in (None, ""):
        return 0
    assert value is not None
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise errors.BadRequest(f'strconv.ParseInt: parsing "{value[:40]}": invalid syntax')
    parsed = int(value)
    if not -INT64_MAX - 1 <= parsed <= INT64_MAX:
        raise errors.BadRequest(f'strconv.ParseInt: parsing "{value[:40]}": value out of range')
    return parsed


def query_bool(query: Mapping[str, str], name: str) -> bool:
    """A ``bool`` field of kube's option structs from the query (``Convert_Slice_string_To_bool``):
    its first value, false when absent, ``0``, or ``false`` in any case; true otherwise."""
    value = query.get(name)
    return value is not None and not _false(value)


def query_optional_bool(query: Mapping[str, str], name: str) -> bool | None:
    """A ``*bool`` field of kube's option structs (``Convert_Slice_string_To_Pointer_bool``): None
    when absent (the field stays unset), else as :func:`query_bool` reads it."""
    value = query.get(name)
    return None if value is None else not _false(value)


def _false(value: str) -> bool:
    # Go's strings.EqualFold(value, "false"): Unicode case folding, so the long s (U+017F) counts
    # as an "s". Five characters that casefold to "false" are exactly those Go's folding matches.
    return value == "0" or (len(value) == 5 and value.casefold() == "false")


def watch_asked(query: Mapping[str, str]) -> bool:
    """Whether a collection GET is a watch (``?watch``), as kube's request info tells."""
    return query_bool(query, "watch")
