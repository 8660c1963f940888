"""A policy's ``schedulePriority`` (Karmada's priority scheduling) resolved to the integer the
scheduler orders bindings by: with ``priorityClassSource: KubePriorityClass``, the ``value`` of the
hub's PriorityClass ``priorityClassName`` (without a name: the one marked ``globalDefault``, else 0);
a PriorityClass the hub does not have, or another source, gives 0, unresolved. The detector writes
the result into the binding and its ``SchedulePriorityResolved`` condition. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controlplane.apis.kube.validate_groups import global_default_priority_class
from controlplane.apis.views import ObjectView
from controlplane.apis.work_v1alpha1 import PriorityReason
from policies.models import SchedulePriority

KUBE_PRIORITY_CLASS = "KubePriorityClass"


@dataclass(frozen=True, slots=True)
class PriorityResolution:
    """A policy's ``schedulePriority`` as an integer, and how it was found."""

    priority: int
    resolved: bool
    reason: PriorityReason
    message: str


def _priority_value(obj: Mapping[str, Any]) -> int | None:
    value = obj.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def resolve_schedule_priority(
    schedule_priority: SchedulePriority | None, *, priority_classes: Iterable[Mapping[str, Any]]
) -> PriorityResolution | None:
    """The priority ``schedule_priority`` names among the hub's ``priority_classes`` (None: the
    policy sets none). Unknown classes and sources give 0, unresolved. Pure."""
    if schedule_priority is None:
        return None
    source = schedule_priority.priority_class_source
    if source != KUBE_PRIORITY_CLASS:
        return PriorityResolution(
            0, False, PriorityReason.UNSUPPORTED_SOURCE,
            f"priorityClassSource {source} is not supported (only {KUBE_PRIORITY_CLASS}); priority 0",
        )
    name = schedule_priority.priority_class_name
    classes = [pc for pc in priority_classes if _priority_value(pc) is not None]
    if not name:
        chosen = global_default_priority_class(classes)
        if chosen is None:
            return PriorityResolution(
                0, True, PriorityReason.DEFAULT, "no priorityClassName and no globalDefault PriorityClass: priority 0"
            )
        value = _priority_value(chosen) or 0
        return PriorityResolution(
            value, True, PriorityReason.DEFAULT,
            f"priority {value} from the globalDefault PriorityClass {ObjectView(chosen).name}",
        )
    for pc in classes:
        if ObjectView(pc).name == name:
            value = _priority_value(pc) or 0
            return PriorityResolution(value, True, PriorityReason.RESOLVED, f"priority {value} from PriorityClass {name}")
    return PriorityResolution(
        0, False, PriorityReason.NOT_FOUND,
        f"PriorityClass {name} (scheduling.k8s.io/v1) does not exist on the hub; priority 0 until it does",
    )
