"""Lenient readers for objects held as plain dicts (JSON as stored).

Why this module exists: the adapters that read agents' reports and stored objects without a
typed model (the utilization decoder, the waste report's snapshot and demand extraction, the
kind interpreters and the agent reading member statuses) must not fail on a field of the wrong
type -- a malformed report loses only what it garbled. These readers are that rule in one place.
In: any JSON value. Out: a mapping, a list, an int or the value at a path, empty (the default,
None) when the value is not of that type or the path is not there. No I/O happens here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: An object as JSON holds it (a stored object, a request body, a part of either): the type the
#: kube rules, the interpreters and the table columns take and give.
Obj = dict[str, Any]


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` as a list when it is a list or tuple, else an empty list."""
    return list(value) if isinstance(value, list | tuple) else []


def as_int(value: Any, default: int = 0) -> int:
    """``int(value)``, or ``default`` when it does not convert."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def json_int(value: Any) -> int:
    """``value`` when it is an integer (a bool is not), else 0: no conversion, unlike :func:`as_int`
    (``"3"`` and ``3.0`` are 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None as soon as a step is missing or not a mapping."""
    for step in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(step)
    return obj
