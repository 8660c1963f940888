"""The simulated member's Deployment controller (apps/v1), as one pure reconcile function.

In: a Deployment and the ReplicaSets it owns; out: :class:`~simulator.controllers.base.Changes`
over those ReplicaSets (their pods are the ReplicaSet controller's, :mod:`.replicaset`).

A Deployment owns ReplicaSets ``<name>-<pod-template-hash>`` (the hash of its pod
template, kube's FNV-32a encoded in kube's safe alphabet), one per template; a template
change creates a new one and scales the old ones down, RollingUpdate within
maxSurge/maxUnavailable (default 25% each) or Recreate. Status aggregates the
ReplicaSets: replicas/updatedReplicas/readyReplicas/availableReplicas/
unavailableReplicas, observedGeneration, conditions Available and Progressing, and
ReplicaFailure copied from a ReplicaSet whose pods the API refuses.

Left out of kube's Deployment controller, knowingly: proportional scaling of several
active ReplicaSets when replicas change mid-rollout (the rolling steps converge to
the same end; a paused Deployment with several active ones is not scaled), ``progressDeadlineSeconds`` (Progressing never turns
False), ``minReadySeconds`` (available = ready), rollback annotations on the
Deployment itself, and adoption/orphaning by selector (ownership is by
ownerReferences only). Recreate waits for the old ReplicaSets' ``status.replicas``
to reach 0 rather than listing their pods.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.constants import LABEL_POD_TEMPLATE_HASH
from controlplane.apis.revisions import without_hash_label
from controlplane.apis.templatehash import template_hash
from simulator.controllers.base import (
    Changes,
    ConditionType,
    Reason,
    changed,
    compact,
    condition,
    generation,
    is_terminating,
    oldest_first,
    owner_reference,
    spec_replicas,
)

ANNOTATION_REVISION: Final = "deployment.kubernetes.io/revision"
ANNOTATION_DESIRED_REPLICAS: Final = "deployment.kubernetes.io/desired-replicas"
ANNOTATION_MAX_REPLICAS: Final = "deployment.kubernetes.io/max-replicas"


def _status_int(obj: Mapping[str, Any], name: str) -> int:
    return int((obj.get("status") or {}).get(name) or 0)


def _revision(rs: Mapping[str, Any]) -> int:
    try:
        return int(((rs.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_REVISION) or 0)
    except ValueError:
        return 0


def scaled_value(value: int | str | None, total: int, *, round_up: bool, default: str = "25%") -> int:
    """An IntOrString of ``total`` (``"25%"`` or ``2``), rounded as kube's
    ``GetScaledValueFromIntOrPercent``. ValueError for a malformed percentage."""
    raw = default if value is None else value
    if isinstance(raw, int):
        return raw
    text = str(raw).strip()
    if not text.endswith("%"):
        return int(text)
    percent = int(text[:-1])
    scaled = percent * total
    return -(-scaled // 100) if round_up else scaled // 100


def rolling_fenceposts(deployment: Mapping[str, Any]) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of a RollingUpdate Deployment, as kube's ``ResolveFenceposts``:
    surge rounds up, unavailability rounds down, and both 0 means 1 unavailable."""
    spec = deployment.get("spec") or {}
    rolling = ((spec.get("strategy") or {}).get("rollingUpdate")) or {}
    replicas = spec_replicas(deployment)
    surge = scaled_value(rolling.get("maxSurge"), replicas, round_up=True)
    unavailable = scaled_value(rolling.get("maxUnavailable"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _max_unavailable(deployment: Mapping[str, Any]) -> int:
    """Unavailable pods the Deployment tolerates before it is not Available (0 for Recreate)."""
    replicas = spec_replicas(deployment)
    if _strategy(deployment) != DeploymentStrategy.ROLLING_UPDATE or replicas == 0:
        return 0
    return min(rolling_fenceposts(deployment)[1], replicas)


class DeploymentStrategy(StrEnum):
    ROLLING_UPDATE = "RollingUpdate"
    RECREATE = "Recreate"


def _strategy(deployment: Mapping[str, Any]) -> DeploymentStrategy:
    kind = ((deployment.get("spec") or {}).get("strategy") or {}).get("type")
    return DeploymentStrategy.RECREATE if kind == DeploymentStrategy.RECREATE else DeploymentStrategy.ROLLING_UPDATE


def _new_replicaset(
    deployment: Mapping[str, Any], template: Mapping[str, Any], pod_hash: str, *, replicas: int, revision: int
) -> dict[str, Any]:
    meta = deployment["metadata"]
    spec = deployment.get("spec") or {}
    rs_template = copy.deepcopy(dict(template))
    rs_template.setdefault("metadata", {})
    rs_template["metadata"]["labels"] = {**(rs_template["metadata"].get("labels") or {}), LABEL_POD_TEMPLATE_HASH: pod_hash}
    selector = copy.deepcopy(dict(spec.get("selector") or {}))
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), LABEL_POD_TEMPLATE_HASH: pod_hash}
    rs_spec: dict[str, Any] = {"replicas": replicas, "selector": selector, "template": rs_template}
    if spec.get("minReadySeconds"):
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{pod_hash}",
            "namespace": meta.get("namespace") or "default",
            "labels": dict(rs_template["metadata"]["labels"]),
            "annotations": _replica_annotations(deployment, revision=revision),
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": rs_spec,
    }


def _replica_annotations(deployment: Mapping[str, Any], *, revision: int) -> dict[str, str]:
    replicas = spec_replicas(deployment)
    surge = rolling_fenceposts(deployment)[0] if _strategy(deployment) == DeploymentStrategy.ROLLING_UPDATE else 0
    return {
        ANNOTATION_REVISION: str(revision),
        ANNOTATION_DESIRED_REPLICAS: str(replicas),
        ANNOTATION_MAX_REPLICAS: str(replicas + surge),
    }


class _Rollout:
    """The ReplicaSets of one Deployment as one sync sees them, and the writes it decides."""

    def __init__(self, deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]]) -> None:
        self.deployment = deployment
        self.sets = {rs["metadata"]["name"]: copy.deepcopy(dict(rs)) for rs in replicasets if not is_terminating(rs)}
        self.changed: set[str] = set()
        self.created: set[str] = set()
        self.deleted: list[str] = []

    def replicas(self, name: str) -> int:
        return spec_replicas(self.sets[name])

    def scale(self, name: str, replicas: int, *, revision: int | None = None) -> bool:
        rs = self.sets[name]
        annotations = _replica_annotations(self.deployment, revision=revision if revision is not None else _revision(rs))
        current = (rs["metadata"].get("annotations") or {})
        if spec_replicas(rs) == replicas and all(current.get(k) == v for k, v in annotations.items()):
            return False
        scaled = spec_replicas(rs) != replicas
        rs["spec"]["replicas"] = replicas
        rs["metadata"]["annotations"] = {**current, **annotations}
        self.changed.add(name)
        return scaled

    def add(self, rs: dict[str, Any]) -> None:
        self.sets[rs["metadata"]["name"]] = rs
        self.created.add(rs["metadata"]["name"])

    def total(self, names: Iterable[str]) -> int:
        return sum(self.replicas(n) for n in names)


def reconcile_deployment(
    deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    """One sync of kube's Deployment controller over the ReplicaSets the Deployment owns.

    The new ReplicaSet is the one whose template (without ``pod-template-hash``) equals the
    Deployment's; it is created as ``<name>-<hash>`` when missing. RollingUpdate scales it up
    within ``replicas + maxSurge`` and the old ones down keeping ``replicas - maxUnavailable``
    available (kube's ``reconcileNewReplicaSet`` / ``reconcileOldReplicaSets``); Recreate
    scales the old ones to 0 and waits for their pods to go before the new one starts.
    Old ReplicaSets at 0 beyond ``revisionHistoryLimit`` (default 10) are deleted.
    """
    meta = deployment["metadata"]
    spec = deployment.get("spec") or {}
    name = meta["name"]
    replicas = spec_replicas(deployment)
    template = dict(spec.get("template") or {})
    status_old = deployment.get("status") or {}
    rollout = _Rollout(deployment, replicasets)
    changes = Changes()

    matching = [
        rs for rs in oldest_first(rollout.sets.values())
        if without_hash_label((rs.get("spec") or {}).get("template") or {}) == without_hash_label(template)
    ]
    new_name: str | None = matching[0]["metadata"]["name"] if matching else None
    collisions = int(status_old.get("collisionCount") or 0)
    max_revision = max((_revision(rs) for n, rs in rollout.sets.items() if n != new_name), default=0)
    if new_name is not None and _revision(rollout.sets[new_name]) <= max_revision:
        rollout.scale(new_name, rollout.replicas(new_name), revision=max_revision + 1)
    old_names = [rs["metadata"]["name"] for rs in oldest_first(rollout.sets.values()) if rs["metadata"]["name"] != new_name]

    def create_new(count: int) -> str:
        nonlocal collisions
        pod_hash = template_hash(template, collision_count=collisions or None)
        while f"{name}-{pod_hash}" in rollout.sets:  # a different template under this name: a collision
            collisions += 1
            pod_hash = template_hash(template, collision_count=collisions)
        rs = _new_replicaset(deployment, template, pod_hash, replicas=count, revision=max_revision + 1)
        rollout.add(rs)
        return str(rs["metadata"]["name"])

    paused = bool(spec.get("paused"))
    if paused:
        # kube's sync of a paused Deployment: no new ReplicaSet and no rollout step, only the
        # one active (else the newest) ReplicaSet scaled to the Deployment's replicas.
        only = _active_or_latest(rollout, new_name, old_names)
        if only is not None:
            rollout.scale(only, replicas)
    elif _strategy(deployment) == DeploymentStrategy.RECREATE:
        active_old = [n for n in old_names if rollout.replicas(n) > 0]
        for old in active_old:
            rollout.scale(old, 0)
        old_pods = sum(_status_int(rollout.sets[n], "replicas") for n in old_names)
        if not active_old and not old_pods:
            if new_name is None:
                new_name = create_new(replicas)
            else:
                rollout.scale(new_name, replicas)
    else:
        surge, unavailable = rolling_fenceposts(deployment)
        if new_name is None:
            current = rollout.total(old_names)
            new_name = create_new(min(max(0, replicas + surge - current), replicas))
        elif not _reconcile_new(rollout, new_name, replicas, surge, old_names):
            _reconcile_old(rollout, new_name, old_names, replicas - unavailable)

    # Only old ReplicaSets at rest count against the history limit.
    limit = spec.get("revisionHistoryLimit")
    limit = 10 if limit is None else int(limit)
    idle = [
        n for n in old_names
        if rollout.replicas(n) == 0 and _status_int(rollout.sets[n], "replicas") == 0 and n not in rollout.changed
    ]
    for doomed in idle[: max(0, len(idle) - limit)]:
        changes.delete.append(doomed)
        rollout.deleted.append(doomed)

    for rs_name in sorted(rollout.created):
        changes.create.append(rollout.sets[rs_name])
    for rs_name in sorted(rollout.changed - rollout.created):
        changes.update.append(rollout.sets[rs_name])

    live = [rs for n, rs in rollout.sets.items() if n not in rollout.deleted]
    new_rs = rollout.sets.get(new_name) if new_name is not None else None
    available = sum(_status_int(rs, "availableReplicas") for rs in live)
    total = sum(spec_replicas(rs) for rs in live)
    actual = sum(_status_int(rs, "replicas") for rs in live)
    updated = _status_int(new_rs, "replicas") if new_rs is not None else 0
    old_conditions = status_old.get("conditions") or []
    has_min = available >= replicas - _max_unavailable(deployment)
    complete = (
        new_rs is not None
        and updated == replicas
        and actual == replicas
        and available == replicas
        and new_name not in rollout.created
    )
    rs_name_text = new_name or f"{name}-{template_hash(template)}"
    status = compact(
        {
            "observedGeneration": generation(deployment),
            "replicas": actual,
            "updatedReplicas": updated,
            "readyReplicas": sum(_status_int(rs, "readyReplicas") for rs in live),
            "availableReplicas": available,
            "unavailableReplicas": max(0, total - available),
            "collisionCount": collisions,
        }
    )
    progressing = (
        condition(
            ConditionType.PROGRESSING,
            "Unknown",
            Reason.DEPLOYMENT_PAUSED,
            "Deployment is paused",
            now,
            old_conditions,
        )
        if paused
        else condition(
            ConditionType.PROGRESSING,
            True,
            Reason.NEW_REPLICA_SET_AVAILABLE if complete else Reason.REPLICA_SET_UPDATED,
            f'ReplicaSet "{rs_name_text}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{rs_name_text}" is progressing.',
            now,
            old_conditions,
        )
    )
    status["conditions"] = [
        condition(
            ConditionType.AVAILABLE,
            has_min,
            Reason.MINIMUM_REPLICAS_AVAILABLE if has_min else Reason.MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment has minimum availability." if has_min else "Deployment does not have minimum availability.",
            now,
            old_conditions,
        ),
        progressing,
    ]
    failure = _replica_failure([new_rs, *live] if new_rs is not None else live)
    if failure is not None:
        status["conditions"].append(failure)
    changes.status = changed(status_old, status)
    return changes


def _replica_failure(replicasets: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The first ReplicaSet's ``ReplicaFailure`` condition that is True (the new one's first), as a
    Deployment condition: kube copies it so (``getReplicaFailures``), and drops it when none has one."""
    for rs in replicasets:
        for cond in (rs.get("status") or {}).get("conditions") or []:
            if cond.get("type") == ConditionType.REPLICA_FAILURE and cond.get("status") == "True":
                since = cond.get("lastTransitionTime")
                return {
                    "type": str(ConditionType.REPLICA_FAILURE),
                    "status": "True",
                    "lastUpdateTime": since,
                    "lastTransitionTime": since,
                    "reason": cond.get("reason"),
                    "message": cond.get("message"),
                }
    return None


def _active_or_latest(rollout: _Rollout, new_name: str | None, old_names: Sequence[str]) -> str | None:
    """kube's ``FindActiveOrLatest``: the one ReplicaSet with replicas, else (none has) the new one
    or the newest old one; None when several have replicas."""
    names = [*old_names, *([new_name] if new_name is not None else [])]
    active = [n for n in names if rollout.replicas(n) > 0]
    if len(active) == 1:
        return active[0]
    if active or not names:
        return None
    return new_name if new_name is not None else old_names[-1]


def _reconcile_new(rollout: _Rollout, new_name: str, replicas: int, surge: int, old_names: Sequence[str]) -> bool:
    """Scale the new ReplicaSet toward ``replicas`` within the surge; True when it was scaled."""
    current = rollout.replicas(new_name)
    if current == replicas:
        rollout.scale(new_name, current)  # keeps the replica annotations current
        return False
    if current > replicas:
        return rollout.scale(new_name, replicas)
    all_pods = rollout.total([new_name, *old_names])
    room = replicas + surge - all_pods
    if room <= 0:
        return False
    return rollout.scale(new_name, current + min(room, replicas - current))


def _reconcile_old(rollout: _Rollout, new_name: str, old_names: Sequence[str], min_available: int) -> None:
    """Scale old ReplicaSets down while ``min_available`` pods stay available (unhealthy ones first)."""
    active = [n for n in old_names if rollout.replicas(n) > 0]
    if not active:
        return
    new_rs = rollout.sets[new_name]
    all_pods = rollout.total([new_name, *old_names])
    new_unavailable = spec_replicas(new_rs) - _status_int(new_rs, "availableReplicas")
    budget = all_pods - min_available - new_unavailable
    if budget <= 0:
        return
    cleaned = 0
    for old in active:  # oldest first
        if cleaned >= budget:
            break
        unhealthy = rollout.replicas(old) - _status_int(rollout.sets[old], "availableReplicas")
        if unhealthy <= 0:
            continue
        step = min(budget - cleaned, unhealthy)
        rollout.scale(old, rollout.replicas(old) - step)
        cleaned += step
    available = sum(_status_int(rollout.sets[n], "availableReplicas") for n in [new_name, *old_names])
    allowed = available - min_available
    scaled = 0
    for old in active:
        if scaled >= allowed:
            break
        if rollout.replicas(old) == 0:
            continue
        step = min(rollout.replicas(old), allowed - scaled)
        rollout.scale(old, rollout.replicas(old) - step)
        scaled += step
