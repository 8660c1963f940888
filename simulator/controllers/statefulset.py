"""The simulated member's StatefulSet controller (apps/v1), as one pure reconcile function.

In: a StatefulSet and the pods it owns; out: :class:`~simulator.controllers.base.Changes`
over those pods. Pods are ``<name>-0..n-1`` (OrderedReady: one at a time, each after the
previous is Ready; Parallel: all at once); scale-down removes the highest ordinal first.
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
    phase,
    spec_replicas,
    template_hash,
)


def reconcile_statefulset(
    statefulset: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    meta = statefulset["metadata"]
    spec = statefulset.get("spec") or {}
    name = meta["name"]
    replicas = spec_replicas(statefulset)
    template = spec.get("template") or {}
    revision = f"{name}-{template_hash(template)}"
    parallel = spec.get("podManagementPolicy") == "Parallel"
    by_ordinal: dict[int, Mapping[str, Any]] = {}
    for pod in pods:
        suffix = pod["metadata"]["name"].rsplit("-", 1)[-1]
        if suffix.isdigit() and not is_terminating(pod):
            by_ordinal[int(suffix)] = pod
    changes = Changes()
    for ordinal in range(replicas):
        member = by_ordinal.get(ordinal)
        if member is not None and phase(member) in ("Succeeded", "Failed"):
            changes.delete.append(member["metadata"]["name"])  # recreated on the next pass
            break
        if member is None:
            changes.create.append(
                new_pod(
                    statefulset,
                    template,
                    name=f"{name}-{ordinal}",
                    labels={
                        "controller-revision-hash": revision,
                        "statefulset.kubernetes.io/pod-name": f"{name}-{ordinal}",
                        "apps.kubernetes.io/pod-index": str(ordinal),
                    },
                    hostname=f"{name}-{ordinal}",
                )
            )
            if not parallel:
                break
        elif not parallel and not is_ready(member):
            break
    surplus = sorted((o for o in by_ordinal if o >= replicas), reverse=True)
    for ordinal in surplus if parallel else surplus[:1]:
        changes.delete.append(by_ordinal[ordinal]["metadata"]["name"])
    live = [p for o, p in by_ordinal.items() if is_active(p)]
    ready = sum(1 for p in live if is_ready(p))
    status_old = statefulset.get("status") or {}
    status = compact(
        {
            "observedGeneration": generation(statefulset),
            "replicas": len(live),
            "readyReplicas": ready,
            "currentReplicas": len(live),
            "updatedReplicas": len(live),
            "availableReplicas": ready,
        }
    )
    status["currentRevision"] = revision
    status["updateRevision"] = revision
    status["collisionCount"] = 0
    changes.status = changed(status_old, status)
    return changes
