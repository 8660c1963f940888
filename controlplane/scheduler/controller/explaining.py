"""The scheduler controller's additions to a binding's per-cluster explanation.

A binding's ``status.explanation`` is the decision's per-cluster verdicts
(:class:`~controlplane.scheduler.core.explanation.ClusterExplanation`, on the wire). The
controller adds what the pure decision cannot know, and keeps it current:

* per cluster whose unschedulable replicas are due to move but find no room elsewhere, that
  they wait there (:func:`explain_waiting`);
* per cluster that lost replicas to a failover eviction, or takes none while a graceful
  eviction lasts, why (:func:`explain_evictions`);
* for a placed binding, the fleet's verdicts as they are now (:func:`refreshed_explanation`).
  Placed work does not move because a cluster's labels, taints or readiness changed (see
  :mod:`controlplane.scheduler.controller.controller`), so without this the explanation would
  go on quoting a rejection that is no longer true ("cluster affinity: label … not matched"
  after the label was added). When such a change happens the scheduler judges the fleet again
  for the binding, without acting on it, and this merges that fresh verdict into the stored
  explanation: clusters that run replicas keep the entries of the decision that put them there;
  every other cluster gets today's verdict, and one the fresh decision would now use says so,
  and that its running replicas stay where they are.

What is stored stays small at any fleet size: past 16 clusters, those not chosen for the same
reasons share one entry (:mod:`controlplane.apis.explanations`); every function here works on
one entry per cluster and stores the compacted form.

Pure: wire dicts in (the stored explanation, the fresh one, the evictions and waits), wire
dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.apis.explanations import compacted, expanded
from controlplane.controllers.failover import EvictionCause, PurgeMode

ELIGIBLE_NOW = (
    "eligible now: it passes every filter since its labels, taints or readiness changed after this "
    "decision; running replicas do not move for that (the workload's next change divides again)"
)


def refreshed_explanation(
    stored: Sequence[Mapping[str, Any]], fresh: Sequence[Mapping[str, Any]], *, placed: Mapping[str, int]
) -> list[dict[str, Any]]:
    """The explanation to store: ``stored`` entries for clusters in ``placed`` (they run the
    binding's replicas), ``fresh`` verdicts for the others; sorted by cluster, :func:`compacted`."""
    kept = {str(entry.get("cluster")): entry for entry in expanded(stored) if entry.get("cluster") in placed}
    out: dict[str, dict[str, Any]] = dict(kept)
    for entry in fresh:
        name = str(entry.get("cluster"))
        if name in kept:
            continue
        judged = dict(entry)
        if judged.get("chosen"):
            judged.update(chosen=False, replicas=0, reasons=[ELIGIBLE_NOW])
        out[name] = judged
    return compacted([out[name] for name in sorted(out)])


WAITING_PREFIX = "waiting for room elsewhere: "


def explain_evictions(
    explanation: list[dict[str, Any]],
    *,
    evicted: Mapping[str, EvictionCause],
    tasks: Sequence[Mapping[str, Any]],
) -> None:
    """Add, per cluster, why it lost or takes none of the replicas because of an eviction."""
    by_cluster = {entry["cluster"]: entry for entry in explanation}

    def note(cluster: str, reason: str) -> None:
        entry = by_cluster.get(cluster)
        if entry is None:
            entry = by_cluster[cluster] = {"cluster": cluster, "chosen": False, "replicas": 0}
            explanation.append(entry)
        entry.setdefault("reasons", []).append(reason)

    for name, cause in sorted(evicted.items()):
        how = {
            PurgeMode.DIRECTLY: "its Work is removed now",
            PurgeMode.GRACEFULLY: "its Work stays until the new replicas are Healthy"
            + (f" or {cause.grace_period_seconds}s pass" if cause.grace_period_seconds is not None else ""),
            PurgeMode.NEVER: "its Work stays until the eviction task is removed (purgeMode Never)",
        }[cause.purge_mode]
        note(name, f"{cause.reason}: {cause.message}; {how}")
    for task in tasks:
        name = str(task.get("fromCluster"))
        if name in evicted:
            continue
        note(
            name,
            f"replicas evicted at {task.get('creationTimestamp')} ({task.get('reason')}); "
            "the cluster takes none of them while the graceful eviction lasts",
        )
    explanation.sort(key=lambda entry: str(entry["cluster"]))


def explain_waiting(explanation: list[dict[str, Any]], waiting: Mapping[str, int], *, grace: float) -> None:
    """Add, per cluster whose unschedulable replicas are due to move but find no room elsewhere,
    that they wait there."""
    by_cluster = {entry["cluster"]: entry for entry in explanation}
    for name, pods in sorted(waiting.items()):
        entry = by_cluster.get(name)
        if entry is None:
            entry = by_cluster[name] = {"cluster": name, "chosen": False, "replicas": 0}
            explanation.append(entry)
        reasons = [r for r in entry.get("reasons") or () if not r.startswith(WAITING_PREFIX)]
        reasons.append(
            f"{WAITING_PREFIX}the member reported {pods} replica(s) unschedulable for more than {grace:g}s "
            "and no other cluster can take them now; they move when capacity appears"
        )
        entry["reasons"] = reasons
    explanation.sort(key=lambda entry: str(entry["cluster"]))
