"""The Event of ``events.k8s.io/v1``: kube's core ``v1`` Events, served under the newer group.

kube stores one Event and serves it under both groups (:mod:`controlplane.apis.kube.convert_events`
renames the fields). A write through either is the same stored object, and so is a watch's
event; the table is the core one, printed from the core form, and the field selectors are the
newer names of the core ones (``regarding.name``, ``reportingController``).
"""

from __future__ import annotations

from dataclasses import replace

from controlplane.apis.kube import convert_events
from controlplane.apis.kube.fieldlabels import field_path
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.kinds.core import EVENT_COLUMNS
from controlplane.apiserver.resources import ResourceType, VersionConversion

_SELECTABLE = (
    "regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid", "regarding.apiVersion",
    "regarding.resourceVersion", "regarding.fieldPath", "reason", "reportingController", "type",
)


EVENT = ResourceType(
    "events.k8s.io", "v1", "Event", "events", "event", namespaced=True,
    short_names=("ev",), strategic_merge=True, name_first=False,
    conversion=VersionConversion(
        storage_version="v1", storage_group="",
        to_storage=convert_events.core_event, from_storage=convert_events.events_event,
    ),
    columns=tuple(
        replace(column, getter=cells.of_converted(convert_events.core_event, column.getter)) for column in EVENT_COLUMNS
    ),
    extra_field_selectors={name: field_path(name) for name in _SELECTABLE},
)
