"""Works waiting for a kind the member does not serve yet: when to apply them again.

A Work whose manifests include a kind the member does not serve ends ``Applied=False``
reason ``KindNotServed``. Often the kind is on its way: the CustomResourceDefinition that
serves it comes in another Work (its ClusterPropagationPolicy's) and the member establishes
it moments later. Such a Work is applied again after a bounded, doubling back-off (not only
at the next full resync), and at once whenever a Work that carries a CRD has been applied.
A kind that never comes costs one attempt per :data:`MAX_RETRY_SECONDS`, not a retry storm.
In: Works and the statuses the applier computed. Out: delays. Pure: the agent owns the timers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apis.work_v1alpha1 import ConditionType, WorkReason

FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
CRD_GROUP = "apiextensions.k8s.io"


def waits_for_a_kind(status: Mapping[str, Any]) -> bool:
    """Whether a Work status says some kind of its manifests is not served by the member."""
    return any(
        cond.get("type") == ConditionType.APPLIED and cond.get("reason") == WorkReason.KIND_NOT_SERVED
        for cond in status.get("conditions") or ()
    )


def carries_crd(work: Mapping[str, Any]) -> bool:
    """Whether a Work's manifests include a CustomResourceDefinition."""
    manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or ()
    return any(
        isinstance(m, Mapping) and m.get("kind") == "CustomResourceDefinition"
        and str(m.get("apiVersion", "")).startswith(CRD_GROUP + "/")
        for m in manifests
    )


class UnservedRetries:
    """Per Work key, how many times in a row it found a kind unserved."""

    def __init__(self, *, first: float = FIRST_RETRY_SECONDS, maximum: float = MAX_RETRY_SECONDS) -> None:
        self._first = first
        self._maximum = maximum
        self._attempts: dict[str, int] = {}

    def after(self, key: str, status: Mapping[str, Any]) -> float | None:
        """Seconds until the Work ``key`` is applied again, given the status its apply produced
        (None: every kind was served; its back-off starts over)."""
        if not waits_for_a_kind(status):
            self._attempts.pop(key, None)
            return None
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        return float(min(self._maximum, self._first * 2.0**attempt))

    def waiting(self) -> list[str]:
        """The Works whose last apply found a kind unserved."""
        return sorted(self._attempts)

    def forget(self, key: str) -> None:
        self._attempts.pop(key, None)
