"""The Events the scheduler controller records on a binding's workload.

In: the binding, what its decision changed (the ``Scheduled`` condition, the clusters and their
replicas, replicas moved off clusters whose members could not place them, failover evictions,
evictions waiting for room). Out: Events on the hub workload — ``Scheduled`` and
``FailedScheduling`` when the condition or the placement changes, ``ReplicasMoved`` for every
move of running replicas, ``ReplicasEvicted`` per eviction, and ``EvictionWaiting`` when a due
eviction finds no room elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controlplane.apis.events import EventType
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.failover import EvictionCause
from controlplane.scheduler.controller.reading import binding_key, key_text, workload_of
from controlplane.scheduler.core.rescheduling import replicas_moved

log = logging.getLogger(__name__)


def placement_text(clusters: list[dict[str, Any]]) -> str:
    """A binding's clusters (``spec.clusters`` form) as Events say them: ``a:2, b:1``."""
    return ", ".join(f"{c['name']}:{c['replicas']}" for c in clusters) or "no cluster"


def _moves_text(moved: Mapping[str, int]) -> str:
    """Replicas moved off clusters as Events say them: ``2 from a, 1 from b``."""
    return ", ".join(f"{n} from {c}" for c, n in sorted(moved.items()))


async def record_evictions(
    ctx: ControllerContext,
    binding: dict[str, Any],
    evicted: Mapping[str, EvictionCause],
    clusters: list[dict[str, Any]],
) -> None:
    workload = workload_of(ctx, binding)
    if workload is None:
        return
    placed = placement_text(clusters)
    for name, cause in sorted(evicted.items()):
        log.warning("binding %s: %s", key_text(binding_key(binding)), cause.message, extra={"cluster": name})
        await record_event(
            ctx, workload, type=EventType.WARNING, reason=EventReason.REPLICAS_EVICTED,
            message=f"{cause.reason}: {cause.message} (purgeMode {cause.purge_mode}); now {placed}",
        )


async def record_rescheduled(
    ctx: ControllerContext,
    binding: dict[str, Any],
    previous: Mapping[str, int],
    decided: Mapping[str, int],
    clusters: list[dict[str, Any]],
    *,
    why: str | None,
) -> None:
    """A ``ReplicasMoved`` Event for replicas a decision took off a cluster and gave to another
    for any other cause than a member's unschedulable report or an eviction (those record their
    own): every move of running replicas is on the workload's record."""
    left = replicas_moved(previous, decided)
    if not left:
        return
    workload = workload_of(ctx, binding)
    if workload is None:
        return
    placed = placement_text(clusters)
    text = _moves_text(left)
    await record_event(
        ctx, workload, type=EventType.NORMAL, reason=EventReason.REPLICAS_MOVED,
        message=f"rescheduled ({why or 'placement changed'}): moved {text}; now {placed}",
    )


async def record_eviction_waits(ctx: ControllerContext, binding: dict[str, Any], due: Mapping[str, EvictionCause]) -> None:
    """Say (once per hub term) that due evictions wait for room elsewhere."""
    where = ", ".join(sorted(due))
    message = (
        f"replicas in {where} are due for eviction ({'; '.join(c.message for _, c in sorted(due.items()))}) "
        "but the other clusters cannot hold them; they stay until capacity appears"
    )
    log.warning("binding %s: %s", key_text(binding_key(binding)), message)
    workload = workload_of(ctx, binding)
    if workload is not None:
        await record_event(ctx, workload, type=EventType.WARNING, reason=EventReason.EVICTION_WAITING, message=message)


async def record_decision(
    ctx: ControllerContext,
    binding: dict[str, Any],
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    previous_clusters: Any,
    clusters: list[dict[str, Any]],
    moved: Mapping[str, int],
) -> None:
    changed = old is None or (old.get("status"), old.get("reason")) != (new.get("status"), new.get("reason"))
    if not changed and previous_clusters == clusters and not moved:
        return
    workload = workload_of(ctx, binding)
    if workload is None:
        return
    placed = placement_text(clusters)
    if moved:
        text = _moves_text(moved)
        await record_event(
            ctx, workload, type=EventType.NORMAL, reason=EventReason.REPLICAS_MOVED,
            message=f"moved replicas members could not place ({text}); now {placed}",
        )
    if new.get("status") == "True":
        await record_event(
            ctx, workload, type=EventType.NORMAL, reason=EventReason.SCHEDULED,
            message=f"{new.get('message')}: {placed}",
        )
    else:
        await record_event(
            ctx, workload, type=EventType.WARNING, reason=EventReason.FAILED_SCHEDULING,
            message=f"{new.get('reason')}: {new.get('message')}",
        )
