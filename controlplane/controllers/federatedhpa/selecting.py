"""The scale target's pod selector, checked as kube's HPA checks it (``validateAndParseSelector``).

In: the target and its kind. Out: the selector's text as the target's ``scale`` subresource
gives it (``status.selector``), or :class:`InvalidSelector` -- the ``ScalingActive`` condition,
the Warning Event's reason and message kube writes -- when the scale has no selector or its
selector does not parse. :class:`HPASelectors` is kube's (and Karmada's) ``hpaSelectors``: each
FederatedHPA's selector, so that pods more than one of them selects stop them all with
``AmbiguousSelector``. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controlplane.apis.kube.selectors import SelectorError, parse_label_selector, scale_status_selector
from controlplane.controllers.events import EventReason
from controlplane.controllers.federatedhpa.behavior import Condition
from controlplane.objectclient import ResourceType


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
    """The selector of ``target``'s scale (``rt`` has one), or why kube's HPA cannot use it."""
    scale = rt.scale
    if scale is None:
        return MISSING
    try:
        text = scale_status_selector(target, path=scale.label_selector, label_set=scale.label_set)
        if not text:
            return MISSING
        parse_label_selector(text)
    except SelectorError as exc:
        message = f"couldn't convert selector into a corresponding internal selector object: {exc.message}"
        return InvalidSelector(Condition("False", "InvalidSelector", message), EventReason.INVALID_SELECTOR, message)
    return text


def selected(selector: str, pod_labels: Iterable[Mapping[str, str]]) -> list[Mapping[str, str]]:
    """The pods (their labels) that ``selector`` (a parsed one) selects."""
    matches = parse_label_selector(selector).matches
    return [labels for labels in pod_labels if matches(labels)]


class HPASelectors:
    """kube's ``hpaSelectors``: the pod selector of each FederatedHPA (namespace, name), kept in
    memory by the controller. A FederatedHPA is known from its first sync and selects nothing
    until its selector has been checked, as in kube."""

    def __init__(self) -> None:
        self._selectors: dict[tuple[str, str], Callable[[Mapping[str, str]], bool] | None] = {}

    def known(self, key: tuple[str, str]) -> None:
        self._selectors.setdefault(key, None)

    def forget(self, key: tuple[str, str]) -> None:
        self._selectors.pop(key, None)

    def ambiguity(self, key: tuple[str, str], selector: str,
                  pod_labels: Iterable[Mapping[str, str]]) -> InvalidSelector | None:
        """Record ``selector`` (a parsed one) as ``key``'s; kube's ``AmbiguousSelector`` when the
        pods it selects (their ``pod_labels``) are selected by another FederatedHPA of the
        namespace too."""
        if key in self._selectors:
            self._selectors[key] = parse_label_selector(selector).matches
        namespace = key[0]
        selecting: set[tuple[str, str]] = set()
        for labels in pod_labels:
            selecting.update(other for other, matches in self._selectors.items()
                             if other[0] == namespace and matches is not None and matches(labels))
        if len(selecting) <= 1:
            return None
        names = " ".join(f"{ns}/{name}" for ns, name in sorted(selecting))
        message = f"pods by selector {selector} are controlled by multiple HPAs: [{names}]"
        return InvalidSelector(Condition("False", "AmbiguousSelector", message), EventReason.AMBIGUOUS_SELECTOR,
                               message)


__all__ = ["HPASelectors", "InvalidSelector", "scale_selector", "selected"]
