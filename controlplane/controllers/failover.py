"""Failover decisions: when replicas must leave a cluster, and when the copy they leave behind goes.

Two causes evict a binding's replicas from a cluster it runs in:

* **cluster failover** — a ``NoExecute`` taint the placement does not tolerate for ever.
  ``placement.clusterTolerations[].tolerationSeconds`` counts from the taint's ``timeAdded``;
  a placement with no toleration for the hub's own health taints
  (``cluster.gpufed.io/unreachable`` and ``cluster.gpufed.io/not-ready``) gets one with a
  default duration (``gpufed controlplane --default-unreachable-toleration-seconds``, 300 s),
  as Kubernetes' DefaultTolerationSeconds admission does for pods and Karmada for policies,
  so a short network blip does not move anything. Any other untolerated ``NoExecute`` taint
  evicts at once;
* **application failover** (``failover.application``) — the workload reports health
  ``Unhealthy`` in a member for ``decisionConditions.tolerationSeconds``.

An eviction becomes a ``spec.gracefulEvictionTasks`` entry ``{fromCluster, replicas, reason,
message, creationTimestamp, purgeMode, gracePeriodSeconds}`` and the replicas are scheduled
elsewhere. The cluster's Work stays (and keeps running) until :func:`assess_task` says the
task is over:

* ``Directly`` (``Immediately``): at once;
* ``Gracefully`` (``Graciously``, the default): when every cluster of the new placement has
  applied its Work and reports the workload Healthy, or when ``gracePeriodSeconds`` have
  passed since the eviction, whichever comes first;
* ``Never``: not by the hub; the copy keeps running until someone removes the task.

Pure functions over plain values and wire dicts; no I/O. The scheduler controller decides
evictions with them, the graceful eviction controller ends tasks with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.meta import Taint, Toleration
from controlplane.apis.timestamps import format_time, parse_time
from controlplane.apis.views import WorkView
from controlplane.apis.work_v1alpha1 import EvictionReason
from policies.affinity import ClusterView, no_execute_eviction


class PurgeMode(StrEnum):
    """When the evicted cluster's copy goes (the newer Karmada spellings)."""

    DIRECTLY = "Directly"
    GRACEFULLY = "Gracefully"
    NEVER = "Never"


_PURGE_SPELLINGS = {
    "Directly": PurgeMode.DIRECTLY,
    "Immediately": PurgeMode.DIRECTLY,
    "Gracefully": PurgeMode.GRACEFULLY,
    "Graciously": PurgeMode.GRACEFULLY,
    "Never": PurgeMode.NEVER,
}


def purge_mode_of(value: str | None) -> PurgeMode:
    """A policy's or task's ``purgeMode`` in either spelling; unset or unknown: ``Gracefully``."""
    return _PURGE_SPELLINGS.get(value or "", PurgeMode.GRACEFULLY)


def effective_tolerations(
    tolerations: Sequence[Toleration] | None, *, unreachable_seconds: int, not_ready_seconds: int
) -> list[Toleration]:
    """The placement's tolerations plus a default one for each health taint none of them tolerates.

    The default tolerates ``<key>:NoExecute`` for ``unreachable_seconds`` (resp.
    ``not_ready_seconds``); it never tolerates the ``NoSchedule`` half, so an unhealthy
    cluster still takes no new replicas.
    """
    out = list(tolerations or ())
    for key, seconds in ((c.TAINT_UNREACHABLE, unreachable_seconds), (c.TAINT_NOT_READY, not_ready_seconds)):
        probe = Taint(key=key, effect="NoExecute")
        if not any(t.tolerates(probe) for t in out):
            out.append(
                Toleration(key=key, operator="Exists", effect="NoExecute", toleration_seconds=max(int(seconds), 0))
            )
    return out


@dataclass(frozen=True)
class EvictionCause:
    """Why replicas must leave one cluster, and how its copy is to be purged."""

    cluster: str
    reason: EvictionReason
    message: str
    purge_mode: PurgeMode = PurgeMode.GRACEFULLY
    grace_period_seconds: int | None = None


@dataclass(frozen=True)
class EvictionCheck:
    """The clusters whose replicas must leave now, and when the next one will have to."""

    due: Mapping[str, EvictionCause] = field(default_factory=dict)
    next_at: datetime | None = None

    def seconds_until_next(self, now: datetime) -> float | None:
        return None if self.next_at is None else max((self.next_at - now).total_seconds(), 0.0)


def _describe(taint: Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def taint_evictions(
    clusters: Iterable[str],
    views: Mapping[str, ClusterView],
    tolerations: Sequence[Toleration],
    *,
    now: datetime,
    purge_mode: PurgeMode,
    grace_period_seconds: int | None,
) -> EvictionCheck:
    """Which of ``clusters`` (those a binding runs in) its ``NoExecute`` taints evict by ``now``.

    ``tolerations`` are the effective ones (:func:`effective_tolerations`). A cluster without
    a view (gone) is not an eviction: the scheduler replaces a vanished cluster anyway.
    """
    due: dict[str, EvictionCause] = {}
    next_at: datetime | None = None
    for name in sorted(clusters):
        view = views.get(name)
        if view is None:
            continue
        eviction = no_execute_eviction(view, tolerations, now=now)
        if eviction is None:
            continue
        if eviction.at > now:
            next_at = eviction.at if next_at is None else min(next_at, eviction.at)
            continue
        taint = eviction.taint
        tolerated = [t for t in tolerations if t.tolerates(taint)]
        if tolerated:
            seconds = min(t.toleration_seconds or 0 for t in tolerated)
            since = taint.time_added or "an unknown time"
            message = (
                f"cluster {name} has taint {_describe(taint)} since {since}, "
                f"tolerated for {seconds}s only: replicas evicted"
            )
        else:
            message = f"cluster {name} has taint {_describe(taint)} that the placement does not tolerate: replicas evicted"
        due[name] = EvictionCause(
            cluster=name,
            reason=EvictionReason.TAINT_UNTOLERATED,
            message=message,
            purge_mode=purge_mode,
            grace_period_seconds=grace_period_seconds,
        )
    return EvictionCheck(due, next_at)


def application_evictions(
    unhealthy_since: Mapping[str, datetime],
    *,
    toleration_seconds: int,
    now: datetime,
    purge_mode: PurgeMode,
    grace_period_seconds: int | None,
) -> EvictionCheck:
    """Clusters where the application has been Unhealthy for ``toleration_seconds`` (by ``now``)."""
    tolerance = timedelta(seconds=max(toleration_seconds, 0))
    due: dict[str, EvictionCause] = {}
    next_at: datetime | None = None
    for name in sorted(unhealthy_since):
        at = unhealthy_since[name] + tolerance
        if at > now:
            next_at = at if next_at is None else min(next_at, at)
            continue
        due[name] = EvictionCause(
            cluster=name,
            reason=EvictionReason.APPLICATION_FAILURE,
            message=(
                f"the workload has been Unhealthy in cluster {name} since {format_time(unhealthy_since[name])}, "
                f"longer than failover.application tolerates ({toleration_seconds}s): replicas evicted"
            ),
            purge_mode=purge_mode,
            grace_period_seconds=grace_period_seconds,
        )
    return EvictionCheck(due, next_at)


def merge_checks(*checks: EvictionCheck) -> EvictionCheck:
    """One check from several; for a cluster due for more than one cause, the first one given wins."""
    due: dict[str, EvictionCause] = {}
    times = [check.next_at for check in checks if check.next_at is not None]
    for check in checks:
        for name, cause in check.due.items():
            due.setdefault(name, cause)
    return EvictionCheck(due, min(times, default=None))


def eviction_task(cause: EvictionCause, *, replicas: int, now: datetime) -> dict[str, Any]:
    """The ``gracefulEvictionTasks`` entry for ``cause`` (wire form)."""
    task: dict[str, Any] = {
        "fromCluster": cause.cluster,
        "replicas": replicas,
        "reason": str(cause.reason),
        "message": cause.message,
        "creationTimestamp": format_time(now),
        "purgeMode": str(cause.purge_mode),
    }
    if cause.purge_mode is PurgeMode.GRACEFULLY and cause.grace_period_seconds is not None:
        task["gracePeriodSeconds"] = int(cause.grace_period_seconds)
    return task


def with_tasks(existing: Sequence[Mapping[str, Any]] | None, added: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``existing`` tasks with ``added`` ones; a new task replaces an older one for the same cluster."""
    replaced = {str(task.get("fromCluster")) for task in added}
    kept = [dict(task) for task in existing or () if str(task.get("fromCluster")) not in replaced]
    return kept + [dict(task) for task in added]


def evicting_clusters(spec: Mapping[str, Any]) -> set[str]:
    """Clusters a binding spec has graceful eviction tasks for (their Works stay while they last)."""
    return {str(task.get("fromCluster")) for task in spec.get("gracefulEvictionTasks") or () if task.get("fromCluster")}


def new_placement_ready(aggregated: Sequence[Mapping[str, Any]], targets: Iterable[str]) -> bool:
    """Whether every target cluster applied its Work and reports the workload Healthy.

    ``aggregated`` is the status controller's ``aggregatedStatus`` form (one item per target).
    No targets means nothing to wait for.
    """
    by_cluster = {str(item.get("clusterName")): item for item in aggregated}
    for name in targets:
        item = by_cluster.get(name)
        if item is None or not item.get("applied") or item.get("health") != "Healthy":
            return False
    return True


def reported_health(work: Mapping[str, Any], resource: Mapping[str, Any]) -> str | None:
    """The health the member reports for the workload in ``work``, when it is about the Work's
    current generation (an older report says nothing about what the Work asks for now)."""
    view = WorkView(work)
    applied = view.condition("Applied")
    if applied is None or applied.get("status") != "True" or applied.get("observedGeneration") not in (None, view.generation):
        return None
    for entry in view.manifest_statuses:
        ident = entry.get("identifier") or {}
        if ident.get("kind") == resource.get("kind") and ident.get("name") == resource.get("name"):
            return str(entry.get("health")) if entry.get("health") else None
    return None


@dataclass(frozen=True)
class TaskAssessment:
    """Whether a graceful eviction task is over, why, and when to look again if it is not."""

    done: bool
    why: str
    recheck_at: datetime | None = None


def _created(task: Mapping[str, Any], now: datetime) -> datetime:
    raw = task.get("creationTimestamp")
    if isinstance(raw, str) and raw:
        try:
            return parse_time(raw)
        except ValueError:
            pass
    return now


def assess_task(
    task: Mapping[str, Any],
    *,
    targets: Sequence[str],
    ready: bool,
    cluster_exists: bool,
    now: datetime,
    default_grace_seconds: int,
) -> TaskAssessment:
    """Whether the copy ``task`` keeps in its cluster can go now (see the module docstring).

    ``targets`` are the binding's current clusters and ``ready`` whether they all run the
    workload Healthy (:func:`new_placement_ready`). A task for a cluster that is a target
    again, or that no longer exists, is over: its Work is either wanted or cannot run.
    """
    cluster = str(task.get("fromCluster"))
    if cluster in targets:
        return TaskAssessment(True, f"cluster {cluster} is part of the placement again")
    if not cluster_exists:
        return TaskAssessment(True, f"cluster {cluster} no longer exists")
    mode = purge_mode_of(task.get("purgeMode"))
    if mode is PurgeMode.DIRECTLY:
        return TaskAssessment(True, f"purgeMode {mode}: the copy in {cluster} goes at once")
    if mode is PurgeMode.NEVER:
        return TaskAssessment(False, f"purgeMode {mode}: the copy in {cluster} stays until the task is removed")
    if ready:
        where = ", ".join(targets) or "no cluster"
        return TaskAssessment(True, f"the new replicas are Healthy ({where})")
    seconds = task.get("gracePeriodSeconds")
    grace = int(seconds) if isinstance(seconds, int) and seconds >= 0 else default_grace_seconds
    deadline = _created(task, now) + timedelta(seconds=grace)
    if deadline <= now:
        return TaskAssessment(True, f"the grace period of {grace}s passed before the new replicas were Healthy")
    return TaskAssessment(False, f"waiting up to {grace}s for the new replicas to be Healthy", deadline)


__all__ = [
    "EvictionCause",
    "EvictionCheck",
    "PurgeMode",
    "TaskAssessment",
    "application_evictions",
    "assess_task",
    "effective_tolerations",
    "evicting_clusters",
    "eviction_task",
    "merge_checks",
    "new_placement_ready",
    "purge_mode_of",
    "reported_health",
    "taint_evictions",
    "with_tasks",
]
