"""A CRD value as a rule sees it: the strings whose schema ``format`` gives them a CEL type of
their own, converted as kube's ``UnstructuredToVal`` converts them (``byte``: base64 decoded to
bytes; ``date`` and ``date-time``: timestamps, a date at midnight UTC; ``duration``: a
duration), so ``self.expires > timestamp('2024-01-01T00:00:00Z')`` compares two timestamps. A
string that does not parse is left as it is (the schema's own format check says why). A
``number`` is a double, also when its JSON has no fraction (``1``), as kube converts it. An
object's properties are named as kube's :func:`escape` names them for CEL (``namespace`` is
``__namespace__``, ``x-y`` is ``x__dash__y``). The converter of a schema is built once; None when
nothing in the schema needs one, the common case, which costs a rule nothing. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from controlplane.apis.apiextensions.schema import Schema
from controlplane.apis.durations import go_duration_error, go_duration_seconds

Converter = Callable[[Any], Any]

#: The words CEL reserves, which a property is named with ``__`` around (kube's celReservedSymbols).
_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if"}
    | {"import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
)
_EXPAND = re.compile(r"__|[-./]|[^a-zA-Z0-9\-./_]")
_EXPANDED = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def escape(name: str) -> str | None:
    """How a rule names property ``name`` (kube's ``Escape``); None: a rule cannot name it."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if any(match.group() not in _EXPANDED for match in _EXPAND.finditer(name)):
        return None
    return _EXPAND.sub(lambda match: _EXPANDED[match.group()], name)


def _bytes(text: str) -> Any:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text


def _timestamp(text: str) -> Any:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return text
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _date(text: str) -> Any:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return text
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _duration(text: str) -> Any:
    return text if go_duration_error(text) else timedelta(seconds=go_duration_seconds(text))


_SCALARS: dict[str, Callable[[str], Any]] = {
    "byte": _bytes,
    "date": _date,
    "date-time": _timestamp,
    "duration": _duration,
}


def _double(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def converter(schema: Schema) -> Converter | None:
    """How a value of ``schema`` is converted for a rule (None: it is used as it is)."""
    if schema.get("type") == "number":
        return _double
    if schema.get("type") == "string":
        scalar = _SCALARS.get(str(schema.get("format") or ""))
        return None if scalar is None else lambda value: scalar(value) if isinstance(value, str) else value
    properties = {
        name: below
        for name, sub in (schema.get("properties") or {}).items()
        if isinstance(sub, dict) and (below := converter(sub)) is not None
    }
    renamed = {
        name: escaped
        for name in (schema.get("properties") or {})
        if (escaped := escape(name)) is not None and escaped != name
    }
    items = converter(schema["items"]) if isinstance(schema.get("items"), dict) else None
    values = (
        converter(schema["additionalProperties"])
        if isinstance(schema.get("additionalProperties"), dict)
        else None
    )
    if not (properties or items or values or renamed):
        return None

    def convert(value: Any) -> Any:
        if isinstance(value, list) and items is not None:
            return [items(item) for item in value]
        if not isinstance(value, dict):
            return value
        out = dict(value)
        for key, item in value.items():
            each = properties.get(key) or (values if key not in (schema.get("properties") or {}) else None)
            if each is not None and item is not None:
                out[key] = each(item)
        for name, escaped in renamed.items():
            if name in out:
                out[escaped] = out.pop(name)
        return out

    return convert
