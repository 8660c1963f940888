"""An Event as ``events.k8s.io/v1`` serves it, and back: kube's conversion through its internal type.

kube stores one Event, the core ``v1`` one, and serves it under both ``v1`` and
``events.k8s.io/v1``; the newer version renames fields (pkg/apis/events/v1's conversion):
``regarding`` is ``involvedObject``, ``note`` is ``message``, ``reportingController`` is
``reportingComponent``, and the older fields are kept as ``deprecatedSource``,
``deprecatedFirstTimestamp``, ``deprecatedLastTimestamp`` and ``deprecatedCount``. The other
fields (``eventTime``, ``series``, ``reason``, ``type``, ``action``, ``related``,
``reportingInstance``) have the same names. An Event written through ``v1`` without an
``eventTime`` reads back with ``eventTime: null`` (kube's zero MicroTime).

Pure: in an object, out a new object of the other version.
"""

from __future__ import annotations

from typing import Any, Final

#: events.k8s.io/v1 field -> core v1 field.
_RENAMED: Final = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_SAME: Final = ("metadata", "eventTime", "series", "reason", "type", "action", "related", "reportingInstance")


def _moved(obj: dict[str, Any], pairs: tuple[tuple[str, str], ...], api_version: str) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": api_version, "kind": "Event"}
    for field in _SAME:
        if field in obj:
            out[field] = obj[field]
    for source, target in pairs:
        if source in obj:
            out[target] = obj[source]
    return out


def core_event(obj: dict[str, Any]) -> dict[str, Any]:
    """An ``events.k8s.io/v1`` Event as core ``v1`` stores it."""
    return _moved(obj, _RENAMED, "v1")


def events_event(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored core ``v1`` Event as ``events.k8s.io/v1`` serves it."""
    out = _moved(obj, tuple((core, new) for new, core in _RENAMED), "events.k8s.io/v1")
    out.setdefault("eventTime", None)
    return out
