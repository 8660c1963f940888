"""The simulated member's ReplicaSet controller (apps/v1), as one pure reconcile function.

In: a ReplicaSet (a Deployment's, :mod:`.deployment`) and the pods it owns; out:
:class:`~simulator.controllers.base.Changes` over those pods. Pods are named
``<name>-<5 chars>``; scale-down removes unscheduled, pending, not-ready and then the
newest pods first, as kube ranks them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from simulator.controllers.base import (
    Changes,
    changed,
    compact,
    generation,
    is_active,
    is_ready,
    new_pod,
    newest_first,
    phase,
    random_suffix,
    spec_replicas,
)

_PHASE_RANK: Final = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_order(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods in the order kube's ReplicaSet controller deletes them: unscheduled before
    scheduled, Pending before Running, not ready before ready, then the newest first."""
    return sorted(
        newest_first(pods),
        key=lambda p: (
            1 if (p.get("spec") or {}).get("nodeName") else 0,
            _PHASE_RANK.get(phase(p), 1),
            1 if is_ready(p) else 0,
        ),
    )


def reconcile_replicaset(
    replicaset: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    """Keep ``spec.replicas`` active pods named ``<replicaset>-<5 chars>``; status counts them.

    Pods that finished (Succeeded/Failed) do not count and are replaced, as kube's
    controller filters active pods. ``availableReplicas`` equals ``readyReplicas`` (no
    ``minReadySeconds`` wait). Pods are owned through ownerReferences only: no adoption by
    selector.
    """
    name = replicaset["metadata"]["name"]
    replicas = spec_replicas(replicaset)
    template = (replicaset.get("spec") or {}).get("template") or {}
    active = [p for p in pods if is_active(p)]
    changes = Changes()
    missing = replicas - len(active)
    if missing > 0:
        for _ in range(missing):
            changes.create.append(new_pod(replicaset, template, name=f"{name}-{random_suffix(rng)}"))
    elif missing < 0:
        changes.delete.extend(p["metadata"]["name"] for p in _deletion_order(active)[:-missing])
    ready = sum(1 for p in active if is_ready(p))
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    labelled = sum(
        1
        for p in active
        if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in template_labels.items())
    )
    status = compact(
        {
            "replicas": len(active),
            "fullyLabeledReplicas": labelled,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": generation(replicaset),
        }
    )
    status["replicas"] = len(active)  # kube always writes it, 0 included
    changes.status = changed(replicaset.get("status") or {}, status)
    return changes
