"""The scheduler controller: when to schedule a binding, and writing what was decided.

The decisions are the pure :mod:`controlplane.scheduler.core`; this package is their I/O side,
split by concern:

* :mod:`.controller` — :class:`SchedulerController`: watch handlers, the queue, the reconcile
  loop (when a binding is scheduled again);
* :mod:`.moves` — replicas a member reports it cannot place: when they are due to move;
* :mod:`.evictions` — failover: which clusters a binding must leave, and when;
* :mod:`.reserving` — reservations: made with each decision, settled by reports, derived afresh
  by a new leader;
* :mod:`.finished` — finished workloads keep their placement;
* :mod:`.writing`, :mod:`.explaining`, :mod:`.recording` — the binding's spec and status, its
  per-cluster explanation, the workload's Events;
* :mod:`.reading` — what the controller reads off bindings, Works and Clusters.

In: ResourceBindings, Clusters and Works from the hub's informers. Out: the bindings' scheduling
decisions, their status and Events.
"""

from controlplane.scheduler.controller.controller import SchedulerController

__all__ = ["SchedulerController"]
