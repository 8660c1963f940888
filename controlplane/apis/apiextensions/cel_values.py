"""A CRD value as a rule sees it: the strings whose schema ``format`` gives them a CEL type of
their own, converted as kube's ``UnstructuredToVal`` converts them (``byte``: base64 decoded to
bytes; ``date`` and ``date-time``: timestamps, a date at midnight UTC; ``duration``: a
duration), so ``self.expires > timestamp('2024-01-01T00:00:00Z')`` compares two timestamps. A
string that does not parse is left as it is (the schema's own format check says why). The
converter of a schema is built once; None when nothing in the schema needs one, the common case,
which costs a rule nothing. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from controlplane.apis.apiextensions.schema import Schema
from controlplane.apis.durations import go_duration_error, go_duration_seconds

Converter = Callable[[Any], Any]


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


def converter(schema: Schema) -> Converter | None:
    """How a value of ``schema`` is converted for a rule (None: it is used as it is)."""
    if schema.get("type") == "string":
        scalar = _SCALARS.get(str(schema.get("format") or ""))
        return None if scalar is None else lambda value: scalar(value) if isinstance(value, str) else value
    properties = {
        name: below
        for name, sub in (schema.get("properties") or {}).items()
        if isinstance(sub, dict) and (below := converter(sub)) is not None
    }
    items = converter(schema["items"]) if isinstance(schema.get("items"), dict) else None
    values = (
        converter(schema["additionalProperties"])
        if isinstance(schema.get("additionalProperties"), dict)
        else None
    )
    if not (properties or items or values):
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
        return out

    return convert
