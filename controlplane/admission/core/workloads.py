"""The workloads the admission cycle reads and decides: pending and admitted ones in, admissions,
waits and preemptions out, and the order a ClusterQueue takes its pending workloads in. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controlplane.admission.core.preemption import Target
from controlplane.admission.core.quota import FlavorResource


@dataclass(frozen=True)
class PodSetRequest:
    name: str
    count: int
    per_pod: Mapping[str, int]
    """Requests of one pod per resource, in base units."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Labels the pods require: a flavor whose node labels give another value for a key is skipped."""
    min_count: int | None = None
    """Kueue's ``minCount``: the fewest pods it may be admitted with when ``count`` does not fit."""

    def total(self, resource: str) -> int:
        return self.per_pod.get(resource, 0) * self.count


@dataclass(frozen=True)
class Pending:
    key: str
    """namespace/name of the Workload."""
    queue: str
    """The ClusterQueue."""
    pod_sets: tuple[PodSetRequest, ...]
    priority: int = 0
    created: str = ""
    """The time it counts from in its queue (RFC 3339 sorts by time), older first at equal
    priority: its creation, or its last PodsReady-timeout eviction (Kueue's queue-order timestamp)."""
    local_queue: str = ""
    """namespace/name of its LocalQueue (admission fair sharing orders by its usage)."""


@dataclass(frozen=True)
class Admitted:
    key: str
    queue: str
    usage: Mapping[FlavorResource, int]
    priority: int = 0
    created: str = ""
    reserved_at: str = ""
    """When its quota was reserved (RFC 3339): preemption evicts the most recent first."""


@dataclass(frozen=True)
class Assignment:
    """A pod set's flavor per resource."""

    pod_set: str
    flavors: Mapping[str, str]
    usage: Mapping[str, int]
    count: int


@dataclass(frozen=True)
class Admission:
    key: str
    queue: str
    assignments: tuple[Assignment, ...]
    borrows: bool

    def usage(self) -> dict[FlavorResource, int]:
        out: dict[FlavorResource, int] = {}
        for a in self.assignments:
            for resource, amount in a.usage.items():
                fr = (a.flavors[resource], resource)
                out[fr] = out.get(fr, 0) + amount
        return out


@dataclass(frozen=True)
class Waiting:
    key: str
    queue: str
    reason: str
    """Kueue's QuotaReserved=False reason: Pending, or Inadmissible when it can never fit as things are."""
    message: str
    position: int
    """0-based place in its ClusterQueue's order."""


@dataclass(frozen=True)
class Preempting:
    """A waiting workload that fits once ``targets`` are evicted."""

    key: str
    queue: str
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class Decisions:
    admitted: tuple[Admission, ...]
    waiting: tuple[Waiting, ...]
    preempting: tuple[Preempting, ...] = ()


def queue_order(pending: Pending) -> tuple[int, str, str]:
    """A ClusterQueue's order: higher priority first, then older, then by key (Kueue's queue
    ordering). The cycle takes its workloads in it; ``gpufed explain`` and the visibility API
    report positions in it."""
    return (-pending.priority, pending.created, pending.key)
