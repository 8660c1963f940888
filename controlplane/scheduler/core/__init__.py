"""The scheduler's pure core: snapshots, the MIG-aware estimator, reservations, plugins, decisions.

In: a :class:`BindingRequest`, the fleet's :class:`ClusterSnapshot` values and the
:class:`Reservations` not yet reported, and the scheduler's :class:`SchedulerCache`. Out: a :class:`ScheduleResult`. No I/O; the
scheduler controller reads and writes the objects around it.
"""

from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import reserve_decision, schedule
from controlplane.scheduler.core.estimating import Estimate
from controlplane.scheduler.core.estimator import estimate_max_replicas
from controlplane.scheduler.core.explanation import ClusterExplanation
from controlplane.scheduler.core.framework import BindingRequest, GpuShape
from controlplane.scheduler.core.gangs import fits_gang
from controlplane.scheduler.core.outcome import ScheduledCondition, ScheduleResult
from controlplane.scheduler.core.reservations import Demand, Reservation, Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

__all__ = [
    "BindingRequest",
    "ClusterExplanation",
    "ClusterSnapshot",
    "Demand",
    "Estimate",
    "GpuShape",
    "NodeShape",
    "Reservation",
    "Reservations",
    "ScheduleResult",
    "ScheduledCondition",
    "SchedulerCache",
    "estimate_max_replicas",
    "fits_gang",
    "reserve_decision",
    "schedule",
]
