"""kube's validation of an Event (``pkg/apis/core/validation/events.go``), on the core form it is
stored as: the field paths are kube's internal type's (``reportingController``, ``message``,
``firstTimestamp``), as kube's errors print them.

Every Event passes kube's legacy rules: one with an ``eventTime`` names its reporting controller
(a qualified name) and instance, its action and reason (at most 128 bytes each) and a message of
at most 1 KiB, and is about an object of its namespace (or of none, in ``default`` or
``kube-system``); one without lives in its object's namespace (``default`` for an object of
none). A create through ``events.k8s.io/v1`` must also have an ``eventTime``, a type of
``Normal`` or ``Warning``, a series of at least 2 with a last observed time, and none of the
deprecated fields (``deprecatedSource``, ``deprecatedFirstTimestamp``, ... stored as core's).
An update through ``events.k8s.io/v1`` changes none of what the Event says (its object, reason,
note, type, times, count, source, action, related object, reporting controller and instance),
only its series (checked again when changed) and metadata. A write through core ``v1`` gets the
legacy rules alone.

In: the Event as core ``v1`` stores it (and the stored one on update). Out: field errors. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

_LENGTH_LIMITS: Final = (("reportingInstance", 128), ("action", 128), ("reason", 128))
NOTE_LENGTH_LIMIT: Final = 1024
_TYPES: Final = ("Normal", "Warning")


def validate_core_event(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateEventCreate`` / ``ValidateEventUpdate`` for a request of core ``v1``: the legacy
    rules alone, "for backwards compatibility"."""
    return legacy_event_errors(obj)


def validate_events_event(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateEventCreate`` / ``ValidateEventUpdate`` for a request of ``events.k8s.io/v1``."""
    errors = legacy_event_errors(obj)
    if old is not None:
        if obj.get("series") != old.get("series"):
            errors.extend(_series_errors(obj))
        return errors + _changed_fields(obj, old)
    errors.extend(_series_errors(obj))
    if not obj.get("eventTime"):
        errors.append(field.required("eventTime"))
    kind = obj.get("type") or ""
    if kind not in _TYPES:
        errors.append(field.invalid("type", "", f"has invalid value: {kind}"))
    for path in ("firstTimestamp", "lastTimestamp"):
        if obj.get(path):
            errors.append(field.invalid(path, "", "needs to be unset"))
    if obj.get("count"):
        errors.append(field.invalid("count", "", "needs to be unset"))
    source = field.mapping(obj.get("source"))
    if source.get("component") or source.get("host"):
        errors.append(field.invalid("source", "", "needs to be unset"))
    return errors


def _series_errors(obj: Obj) -> list[FieldError]:
    """``validateV1EventSeries``."""
    series = obj.get("series")
    if not isinstance(series, dict):
        return []
    errors = []
    if not isinstance(series.get("count"), int) or series["count"] < 2:
        errors.append(field.invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errors.append(field.required("series.lastObservedTime"))
    return errors


def _changed_fields(new: Obj, old: Obj) -> list[FieldError]:
    """The immutable fields of ``ValidateEventUpdate``, in its order (``reason`` twice, as kube
    checks it twice), each shown as Go prints the internal field's value."""
    errors: list[FieldError] = []
    for key, path, shown in _IMMUTABLE:
        value, before = new.get(key), old.get(key)
        if _comparable(key, value) != _comparable(key, before):
            errors.append(field.invalid(path, shown(value), field.IMMUTABLE))
    return errors


def _comparable(key: str, value: Any) -> Any:
    """``value`` as Go's DeepEqual sees the internal field: an absent field is its zero value,
    and a time is the instant it names."""
    if key in _TIMES:
        return _instant(value)
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v not in (None, "")} or None
    return value or None


def _instant(value: Any) -> datetime | None:
    return parse_time_or_none(value, naive_as_utc=True)


def _go_time(value: Any) -> field.GoValue:
    """A ``metav1.Time`` or ``MicroTime`` as its ``String()`` prints it (``2026-01-01 00:00:00 +0000 UTC``)."""
    instant = _instant(value) or datetime(1, 1, 1, tzinfo=UTC)
    instant = instant.astimezone(UTC)
    fraction = f".{instant.microsecond:06d}".rstrip("0") if instant.microsecond else ""
    return field.GoValue(f"{instant.year:04d}-{instant:%m-%d %H:%M:%S}{fraction} +0000 UTC")


def _go_reference(value: Any) -> field.GoValue | None:
    """``%#v`` of a ``core.ObjectReference`` (``related`` is a pointer: nil shows ``null``)."""
    if not isinstance(value, dict):
        return None
    parts = ", ".join(f"{name}:{go_quote(str(value.get(key) or ''))}" for name, key in _REFERENCE_FIELDS)
    return field.GoValue(f"core.ObjectReference{{{parts}}}")


def _go_source(value: Any) -> field.GoValue:
    source = field.mapping(value)
    component, host = (go_quote(str(source.get(key) or "")) for key in ("component", "host"))
    return field.GoValue(f"core.EventSource{{Component:{component}, Host:{host}}}")


def _text(value: Any) -> str:
    return str(value or "")


_REFERENCE_FIELDS: Final = (
    ("Kind", "kind"), ("Namespace", "namespace"), ("Name", "name"), ("UID", "uid"),
    ("APIVersion", "apiVersion"), ("ResourceVersion", "resourceVersion"), ("FieldPath", "fieldPath"),
)
_TIMES: Final = ("firstTimestamp", "lastTimestamp", "eventTime")
_IMMUTABLE: Final[tuple[tuple[str, str, Callable[[Any], Any]], ...]] = (
    ("involvedObject", "involvedObject", lambda v: _go_reference(v or {})),
    ("reason", "reason", _text),
    ("message", "message", _text),
    ("source", "source", _go_source),
    ("firstTimestamp", "firstTimestamp", _go_time),
    ("lastTimestamp", "lastTimestamp", _go_time),
    ("count", "count", lambda v: v or 0),
    ("reason", "reason", _text),
    ("type", "type", _text),
    ("eventTime", "eventTime", _go_time),
    ("action", "action", _text),
    ("related", "related", _go_reference),
    ("reportingComponent", "reportingController", _text),
    ("reportingInstance", "reportingInstance", _text),
)


def legacy_event_errors(obj: Obj) -> list[FieldError]:
    """``legacyValidateEvent``: what every Event must satisfy, whichever version wrote it."""
    errors: list[FieldError] = []
    namespace = field.mapping(obj.get("metadata")).get("namespace") or ""
    about = field.mapping(obj.get("involvedObject")).get("namespace") or ""
    if not obj.get("eventTime"):
        if (not about and namespace not in ("", "default")) or (about and namespace != about):
            errors.append(field.invalid("involvedObject.namespace", about, "does not match event.namespace"))
        return errors
    if not about and namespace not in ("default", "kube-system"):
        errors.append(field.invalid("involvedObject.namespace", about, "does not match event.namespace"))
    controller = str(obj.get("reportingComponent") or "")
    if not controller:
        errors.append(field.required("reportingController"))
    errors.extend(field.invalid("reportingController", controller, message) for message in qualified_name_errors(controller))
    for path, limit in _LENGTH_LIMITS:
        value = str(obj.get(path) or "")
        if not value:
            errors.append(field.required(path))
        if len(value.encode()) > limit:
            errors.append(field.invalid(path, "", f"can have at most {limit} characters"))
    if len(str(obj.get("message") or "").encode()) > NOTE_LENGTH_LIMIT:
        errors.append(field.invalid("message", "", f"can have at most {NOTE_LENGTH_LIMIT} characters"))
    return errors
