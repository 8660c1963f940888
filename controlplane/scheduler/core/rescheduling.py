"""Re-deciding a placed binding: when its placement broke, and a decision without some clusters.

The scheduler controller decides *when* a placed binding is scheduled again (its spec changed,
a cluster it runs in is gone or left its affinity, a member cannot place some replicas, a
failover eviction is due); this module holds the pure decisions it takes then.

In: a :class:`~controlplane.scheduler.core.framework.BindingRequest` (``previous`` is where it
runs now), the fleet's :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot` values,
the :class:`~controlplane.scheduler.core.reservations.Reservations` and the clusters to leave
(evicted) or to take replicas off (their member cannot place them). Out: the request as it was
decided and its :class:`~controlplane.scheduler.core.outcome.ScheduleResult`, or None when
the replicas would not find room elsewhere (then they stay where they are); why a placement
broke; which replicas a decision moved. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.outcome import ScheduleResult
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.affinity import cluster_matches_affinity


def placement_broken(request: BindingRequest, snapshots: Mapping[str, ClusterSnapshot]) -> str | None:
    """Why clusters the binding runs in can no longer hold it (gone, affinity), or None.

    Under ``clusterAffinities`` a cluster of an earlier term than the one observed is in place
    too: replicas on their way back to a preferred term run there (``preferring.py``).
    ``NoExecute`` taints are failover's (:func:`decide_with_evictions`): they evict only once
    their toleration runs out.
    """
    terms = request.placement.affinity_terms()
    observed = next((i for i, t in enumerate(terms) if t.affinity_name == request.previous_affinity_name), 0)
    for name in sorted(request.previous):
        snapshot = snapshots.get(name)
        if snapshot is None:
            return f"cluster {name} is gone"
        if not any(cluster_matches_affinity(snapshot.view, term).fits for term in terms[: observed + 1]):
            return f"cluster {name} no longer matches the placement's cluster affinity"
    return None


def decide_with_evictions(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    leaving: Iterable[str],
    *,
    reservations: Reservations,
    now: datetime,
    cache: SchedulerCache | None = None,
) -> tuple[BindingRequest, ScheduleResult] | None:
    """Re-decide without the clusters in ``leaving`` (a gang leaves all its clusters).

    None when the replicas would not find room elsewhere: fewer would be placed than run now.
    """
    gone = set(leaving) & set(request.previous)
    if not gone:
        return None
    previous = {} if request.gang else {k: v for k, v in request.previous.items() if k not in gone}
    evicting = replace(request, previous=previous)
    result = schedule(evicting, [s for s in snapshots if s.name not in gone], reservations=reservations, now=now, cache=cache)
    if not result.condition.status and result.placed < min(request.replicas, sum(request.previous.values())):
        return None
    return evicting, result


def replicas_moved(previous: Mapping[str, int], decided: Mapping[str, int]) -> dict[str, int]:
    """Per cluster, replicas a decision took away from it while another cluster gained some:
    a move (a scale-down or a scale-up alone moves nothing). Empty when nothing moved."""
    gained = sum(max(0, n - previous.get(c, 0)) for c, n in decided.items())
    if not gained:
        return {}
    lost = {c: n - decided.get(c, 0) for c, n in previous.items() if n > decided.get(c, 0)}
    total = sum(lost.values())
    if total <= gained:
        return lost
    # Partly a scale-down: count as moved only as many as other clusters gained, largest loss first.
    out: dict[str, int] = {}
    left = gained
    for cluster, n in sorted(lost.items(), key=lambda kv: (-kv[1], kv[0])):
        take = min(n, left)
        if take:
            out[cluster] = take
        left -= take
    return out


def decide_with_moves(
    request: BindingRequest,
    snapshots: Sequence[ClusterSnapshot],
    moves: Mapping[str, int],
    *,
    reasons: Mapping[str, str] | None = None,
    reservations: Reservations,
    now: datetime,
    cache: SchedulerCache | None = None,
) -> tuple[BindingRequest, ScheduleResult] | None:
    """Re-decide with ``moves`` (cluster -> pods its member cannot place) taken off those clusters.

    Those clusters keep what they run and take nothing new (``BindingRequest.keep_only``, with
    ``reasons`` per cluster, or a default one, as their explanation). None when the move would
    place fewer replicas than the binding has now (the pods then wait where they are).
    """
    if request.gang:
        previous = {k: v for k, v in request.previous.items() if k not in moves}
    else:
        previous = {k: v - min(v, moves.get(k, 0)) for k, v in request.previous.items()}
        previous = {k: v for k, v in previous.items() if v}
    why = {
        name: (reasons or {}).get(name) or f"the member reported {pods} replica(s) unschedulable: moved elsewhere"
        for name, pods in moves.items()
    }
    moved = replace(request, previous=previous, keep_only={**request.keep_only, **why})
    result = schedule(moved, snapshots, reservations=reservations, now=now, cache=cache)
    if result.placed < min(request.replicas, sum(request.previous.values())) or not result.condition.status:
        return None
    return moved, result
