"""The simulated member's ReplicaSet controller (apps/v1), as one pure reconcile function.

In: a ReplicaSet (a Deployment's, :mod:`.deployment`) and the pods it owns; out:
:class:`~simulator.controllers.base.Changes` over those pods. Pods are named
``<name>-<5 chars>``; scale-down removes unscheduled, pending, not-ready and then the
newest pods first, as kube ranks them. Pod creates the API refuses set condition
``ReplicaFailure`` (:func:`with_replica_failure`, applied by :mod:`simulator.controlling`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from simulator.controllers.base import (
    Changes,
    ConditionType,
    Reason,
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
    selector. The status keeps its conditions: ``ReplicaFailure`` is the creating loop's
    (:func:`with_replica_failure`).
    """
    name = replicaset["metadata"]["name"]
    replicas = spec_replicas(replicaset)
    template = (replicaset.get("spec") or {}).get("template") or {}
    active = [p for p in pods if is_active(p)]
    changes = Changes()
    missing = replicas - len(active)
    if missing > 0:
        for _ in range(missing):
            changes.create.append(
                new_pod(replicaset, template, name=f"{name}-{random_suffix(rng)}", generate_name=f"{name}-")
            )
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
    old_conditions = (replicaset.get("status") or {}).get("conditions")
    if old_conditions:
        # Set and cleared by the loop that creates the pods (with_replica_failure).
        status["conditions"] = old_conditions
    changes.status = changed(replicaset.get("status") or {}, status)
    return changes


def with_replica_failure(status: Mapping[str, Any], error: str | None, *, now: str) -> dict[str, Any]:
    """``status`` with condition ``ReplicaFailure`` as kube's ReplicaSet controller keeps it: True,
    reason ``FailedCreate``, the API's refusal as message, after a sync whose pod create failed
    (set once: a later failure does not rewrite it); removed after a sync without one."""
    out = dict(status)
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != ConditionType.REPLICA_FAILURE]
    present = len(conditions) != len(status.get("conditions") or [])
    if error is None:
        if present:
            if conditions:
                out["conditions"] = conditions
            else:
                out.pop("conditions", None)
        return out
    if not present:
        out["conditions"] = [
            *conditions,
            {
                "type": str(ConditionType.REPLICA_FAILURE),
                "status": "True",
                "lastTransitionTime": now,
                "reason": str(Reason.FAILED_CREATE),
                "message": error,
            },
        ]
    return out
