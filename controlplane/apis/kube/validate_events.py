"""kube's validation of an Event written through ``events.k8s.io/v1`` (``pkg/apis/core/validation/
events.go``), on the core form it is stored as: the field paths are kube's internal type's
(``reportingController``, ``message``, ``firstTimestamp``), as kube's errors print them.

Every Event passes kube's legacy rules: one with an ``eventTime`` names its reporting controller
(a qualified name) and instance, its action and reason (at most 128 bytes each) and a message of
at most 1 KiB, and is about an object of its namespace (or of none, in ``default`` or
``kube-system``); one without lives in its object's namespace (``default`` for an object of
none). A create through ``events.k8s.io/v1`` must also have an ``eventTime``, a type of
``Normal`` or ``Warning``, a series of at least 2 with a last observed time, and none of the
deprecated fields (``deprecatedSource``, ``deprecatedFirstTimestamp``, ... stored as core's).
Not checked: an update's immutable fields.

In: the Event as core ``v1`` stores it (and the stored one on update). Out: field errors. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import qualified_name_errors

Obj = dict[str, Any]

_LENGTH_LIMITS: Final = (("reportingInstance", 128), ("action", 128), ("reason", 128))
NOTE_LENGTH_LIMIT: Final = 1024
_TYPES: Final = ("Normal", "Warning")


def validate_events_event(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateEventCreate`` / ``ValidateEventUpdate`` for a request of ``events.k8s.io/v1``."""
    errors = legacy_event_errors(obj)
    if old is not None:
        return errors
    series = obj.get("series")
    if isinstance(series, dict):
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            errors.append(field.invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errors.append(field.required("series.lastObservedTime"))
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
