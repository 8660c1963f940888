"""The simulated member's RayCluster controller (ray.io/v1, minimal), as one pure reconcile function.

In: a RayCluster and the pods it owns; out: :class:`~simulator.controllers.base.Changes`
over those pods: a head pod and worker pods per group. :func:`ray_pods` builds those pods
for the RayJob controller (:mod:`.rayjob`) too.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from simulator.controllers.base import (
    Changes,
    changed,
    compact,
    generation,
    is_active,
    is_ready,
    is_terminating,
    new_pod,
    newest_first,
    phase,
    random_suffix,
)


def _ray_groups(spec: Mapping[str, Any]) -> list[tuple[str, int, Mapping[str, Any]]]:
    groups = []
    for group in spec.get("workerGroupSpecs") or []:
        replicas = group.get("replicas", group.get("minReplicas", 1))
        groups.append(
            (str(group.get("groupName") or "workers"), int(replicas or 0), group.get("template") or {})
        )
    return groups


def ray_pods(
    owner: Mapping[str, Any],
    cluster_name: str,
    spec: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    rng: random.Random,
    *,
    head_annotations: Mapping[str, str] | None = None,
    workers_wanted: bool = True,
) -> tuple[Changes, dict[str, int]]:
    changes = Changes()
    live = [p for p in pods if not is_terminating(p)]
    heads = [p for p in live if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "head"]
    if not heads:
        head_template = (spec.get("headGroupSpec") or {}).get("template") or {}
        pod = new_pod(
            owner,
            head_template,
            name=f"{cluster_name}-head-{random_suffix(rng)}",
            labels={"ray.io/cluster": cluster_name, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
            annotations=head_annotations,
        )
        changes.create.append(pod)
    counts = {"desired": 0, "ready": 0, "available": 0}
    for group, replicas, template in _ray_groups(spec):
        members = [
            p
            for p in live
            if (p["metadata"].get("labels") or {}).get("ray.io/group") == group
            and (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
        ]
        want = replicas if workers_wanted else 0
        counts["desired"] += want
        active = [p for p in members if is_active(p)]
        counts["ready"] += sum(1 for p in active if is_ready(p))
        counts["available"] += sum(1 for p in active if is_ready(p))
        for _ in range(max(0, want - len(active))):
            changes.create.append(
                new_pod(
                    owner,
                    template,
                    name=f"{cluster_name}-{group}-worker-{random_suffix(rng)}",
                    labels={
                        "ray.io/cluster": cluster_name,
                        "ray.io/node-type": "worker",
                        "ray.io/group": group,
                    },
                )
            )
        if len(active) > want:
            changes.delete.extend(p["metadata"]["name"] for p in newest_first(active)[: len(active) - want])
    return changes, counts


def reconcile_raycluster(
    cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    spec = cluster.get("spec") or {}
    name = cluster["metadata"]["name"]
    changes, counts = ray_pods(cluster, name, spec, pods, rng)
    live = [p for p in pods if is_active(p)]
    all_ready = bool(live) and all(is_ready(p) for p in live) and not changes.create
    status_old = cluster.get("status") or {}
    status = compact(
        {
            "desiredWorkerReplicas": counts["desired"],
            "readyWorkerReplicas": counts["ready"],
            "availableWorkerReplicas": counts["available"],
            "observedGeneration": generation(cluster),
        }
    )
    status["state"] = "ready" if all_ready else "unhealthy" if any(phase(p) == "Failed" for p in pods) else ""
    if not status["state"]:
        del status["state"]
    changes.status = changed(status_old, status)
    return changes
