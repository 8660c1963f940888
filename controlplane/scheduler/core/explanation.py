"""Why each cluster was chosen or rejected: the binding's ``status.explanation``.

One :class:`ClusterExplanation` per cluster the scheduler looked at, readable with
``kubectl describe`` and ``gpufed explain``; ``to_wire`` gives the shape of
``work_v1alpha1.ClusterExplanation`` (camelCase keys, absent values left out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controlplane.scheduler.core.framework import Code, Status
from controlplane.scheduler.core.slots import slot_setters


@dataclass(frozen=True, slots=True)
class ClusterExplanation:
    cluster: str
    chosen: bool
    replicas: int = 0
    reasons: tuple[str, ...] = ()
    score: float | None = None
    tier: int | None = None
    price: float | None = None
    """Dollars per GPU-hour the binding would pay there."""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster": self.cluster, "chosen": self.chosen, "replicas": self.replicas}
        if self.reasons:
            out["reasons"] = list(self.reasons)
        if self.score is not None:
            out["score"] = round(self.score, 3)
        if self.tier is not None:
            out["tier"] = self.tier
        if self.price is not None:
            out["pricePerGpuHour"] = self.price
        return out


_NEW = object.__new__
_SET = slot_setters(ClusterExplanation)


def cluster_explanation(
    cluster: str,
    *,
    chosen: bool,
    replicas: int,
    reasons: tuple[str, ...],
    score: float | None,
    tier: int | None,
    price: float | None,
) -> ClusterExplanation:
    """``ClusterExplanation(...)`` without the frozen dataclass's ``__init__``: an explanation has an
    entry per cluster of the fleet, so the constructor is a noticeable part of building it. Sets
    every field."""
    out: ClusterExplanation = _NEW(ClusterExplanation)
    _SET["cluster"](out, cluster)
    _SET["chosen"](out, chosen)
    _SET["replicas"](out, replicas)
    _SET["reasons"](out, reasons)
    _SET["score"](out, score)
    _SET["tier"](out, tier)
    _SET["price"](out, price)
    return out


def rejection_reasons(status: Status) -> tuple[str, ...]:
    """A filter's reasons, each prefixed by the plugin that gave it (kube-scheduler style)."""
    return tuple(f"{status.plugin}: {reason}" for reason in status.reasons) or (f"{status.plugin}: rejected",)


def summarize_rejections(total: int, rejected: Mapping[str, Status]) -> str:
    """``0/5 clusters are available: 2 rejected by ClusterAffinity, 3 rejected by GpuFeasibility.``"""
    counts: dict[str, int] = {}
    for status in rejected.values():
        counts[status.plugin] = counts.get(status.plugin, 0) + 1
    parts = ", ".join(f"{n} rejected by {plugin}" for plugin, n in sorted(counts.items()))
    available = total - len(rejected)
    return f"{available}/{total} clusters are available" + (f": {parts}." if parts else ".")


def only_placement_rejections(rejected: Mapping[str, Status]) -> bool:
    """Whether every rejection is by the placement itself (no cluster fit), not by capacity."""
    return all(status.code is Code.UNRESOLVABLE for status in rejected.values())
