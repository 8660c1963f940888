"""Fleet disruption: when most clusters look unhealthy at once, suspect the hub, not the clusters.

A hub that cannot hear its agents (its own network, a frozen replica behind the load balancer
the agents' heartbeats go through) sees every cluster stop reporting at the same time. Tainting
them all ``NoExecute`` would then move every workload — to nowhere. Kubernetes' node lifecycle
controller (``pkg/controller/nodelifecycle``) guards against the same failure per zone, and this
module applies it to the fleet as one zone:

* **full disruption** — no cluster is Ready and at least one is not: the hub suspects itself.
  No cluster gets a ``NoExecute`` health taint and the ones already set are removed (kube's
  "master disruption mode", ``markNodeAsReachable``), so no failover starts or continues. The
  Ready conditions and the ``NoSchedule`` taints still tell the truth as the hub sees it.
* **partial disruption** — more than :data:`MIN_UNHEALTHY_FOR_PARTIAL` clusters and at least
  ``unhealthy_threshold`` (``--unhealthy-fleet-threshold``, kube's ``--unhealthy-zone-threshold``,
  0.55) of them are not Ready: evictions slow down. In a fleet of at most
  :data:`LARGE_FLEET_THRESHOLD` clusters they stop (no new ``NoExecute`` taint; those already
  set stay), in a larger one a new ``NoExecute`` taint is added at most once per
  ``1 / SECONDARY_EVICTION_RATE`` seconds (kube's ``ReducedQPSFunc`` with
  ``--large-cluster-size-threshold`` 50 and ``--secondary-node-eviction-rate`` 0.01).
* **normal** — taints as the health of each cluster says.

Clusters still starting (no verdict yet) count neither way. Everything here is pure: counts and
times in, a decision out; the cluster health monitor (:mod:`controlplane.controllers.health`)
applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

DEFAULT_UNHEALTHY_THRESHOLD = 0.55
#: A partial disruption needs more unhealthy clusters than this (kube: more than 2 nodes).
MIN_UNHEALTHY_FOR_PARTIAL = 2
#: Fleets larger than this keep evicting slowly in a partial disruption; smaller ones stop.
LARGE_FLEET_THRESHOLD = 50
#: New NoExecute taints per second in a partial disruption of a large fleet.
SECONDARY_EVICTION_RATE = 0.01


class FleetState(StrEnum):
    NORMAL = "Normal"
    PARTIAL_DISRUPTION = "PartialDisruption"
    FULL_DISRUPTION = "FullDisruption"


class EvictionTaints(StrEnum):
    """What the health monitor may do with the ``NoExecute`` health taints."""

    APPLY = "Apply"
    """Add and remove them as each cluster's health says."""
    HOLD = "Hold"
    """Keep those already set; add none."""
    REMOVE = "Remove"
    """Remove every one (the hub suspects itself)."""


def fleet_state(*, ready: int, unhealthy: int, unhealthy_threshold: float = DEFAULT_UNHEALTHY_THRESHOLD) -> FleetState:
    """The fleet's state from how many clusters are Ready and how many are not (kube's
    ``ComputeZoneState``)."""
    if ready == 0 and unhealthy > 0:
        return FleetState.FULL_DISRUPTION
    if unhealthy > MIN_UNHEALTHY_FOR_PARTIAL and unhealthy / (ready + unhealthy) >= unhealthy_threshold:
        return FleetState.PARTIAL_DISRUPTION
    return FleetState.NORMAL


@dataclass(frozen=True)
class EvictionGate:
    """Whether a new ``NoExecute`` health taint may be added now, and when to ask again if not."""

    taints: EvictionTaints
    #: In a slowed partial disruption: when the next new taint may be added (None: not slowed).
    next_allowed_at: datetime | None = None


def eviction_gate(
    state: FleetState,
    *,
    fleet_size: int,
    last_added: datetime | None,
    now: datetime,
    large_fleet_threshold: int = LARGE_FLEET_THRESHOLD,
    secondary_rate: float = SECONDARY_EVICTION_RATE,
) -> EvictionGate:
    """What the monitor may do with ``NoExecute`` health taints in ``state``.

    ``last_added`` is when the last new one was added during this partial disruption (None:
    none yet).
    """
    if state is FleetState.FULL_DISRUPTION:
        return EvictionGate(EvictionTaints.REMOVE)
    if state is FleetState.NORMAL:
        return EvictionGate(EvictionTaints.APPLY)
    if fleet_size <= large_fleet_threshold or secondary_rate <= 0:
        return EvictionGate(EvictionTaints.HOLD)
    next_at = None if last_added is None else last_added + timedelta(seconds=1 / secondary_rate)
    if next_at is None or next_at <= now:
        return EvictionGate(EvictionTaints.APPLY)
    return EvictionGate(EvictionTaints.HOLD, next_allowed_at=next_at)


def describe_transition(before: FleetState, after: FleetState, *, ready: int, unhealthy: int) -> str:
    """The log line for a change of the fleet's state, for the person reading the hub's log."""
    total = ready + unhealthy
    if after is FleetState.FULL_DISRUPTION:
        return (
            f"all {total} clusters stopped reporting or are not ready at once; suspecting the hub's own "
            "connectivity, not evicting (NoExecute health taints removed, no failover until a cluster is Ready)"
        )
    if after is FleetState.PARTIAL_DISRUPTION:
        return (
            f"{unhealthy} of {total} clusters are not ready at once (partial disruption); "
            "evictions are held back until more clusters are Ready"
        )
    return (
        f"{ready} of {total} clusters are Ready again: leaving {before} mode, evictions resume "
        "(toleration periods count from now)"
    )


__all__ = [
    "DEFAULT_UNHEALTHY_THRESHOLD",
    "EvictionGate",
    "EvictionTaints",
    "FleetState",
    "describe_transition",
    "eviction_gate",
    "fleet_state",
]
