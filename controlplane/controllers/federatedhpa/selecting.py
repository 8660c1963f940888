"""The scale target's pod selector, checked as kube's HPA checks it (``validateAndParseSelector``).

In: the target and its kind. Out: the selector's text as the target's ``scale`` subresource
gives it (``status.selector``), or :class:`InvalidSelector` -- the ``ScalingActive`` condition,
the Warning Event's reason and message kube writes -- when the scale has no selector or its
selector does not parse. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controlplane.apiserver.objects.scale import scale_of
from controlplane.apiserver.selectors import parse_label_selector
from controlplane.controllers.events import EventReason
from controlplane.controllers.federatedhpa.behavior import Condition
from controlplane.objectclient import ResourceType
from controlplane.objectclient.errors import BadRequest


@dataclass(frozen=True, slots=True)
class InvalidSelector:
    condition: Condition
    """``ScalingActive`` ``False``, reason ``InvalidSelector``."""
    reason: EventReason
    """The Warning Event's: ``SelectorRequired`` or ``InvalidSelector``."""
    message: str
    """The Warning Event's message (kube's error)."""


MISSING = InvalidSelector(
    Condition("False", "InvalidSelector", "the HPA target's scale is missing a selector"),
    EventReason.SELECTOR_REQUIRED, "selector is required")


def scale_selector(rt: ResourceType, target: dict[str, Any]) -> str | InvalidSelector:
    """The selector of ``target``'s scale, or why kube's HPA cannot use it."""
    try:
        text = str(scale_of(rt, target)["status"].get("selector") or "")
        if not text:
            return MISSING
        parse_label_selector(text)
    except BadRequest as exc:
        message = f"couldn't convert selector into a corresponding internal selector object: {exc.message}"
        return InvalidSelector(Condition("False", "InvalidSelector", message), EventReason.INVALID_SELECTOR, message)
    return text


__all__ = ["InvalidSelector", "scale_selector"]
