"""The simulated member's StatefulSet controller (apps/v1), as one pure reconcile function.

In: a StatefulSet and the pods it owns; out: :class:`~simulator.controllers.base.Changes`
over those pods. Pods are ``<name>-0..n-1`` (OrderedReady: one at a time, each after the
previous is Ready; Parallel: all at once); scale-down removes the highest ordinal first.

Updates follow kube's StatefulSet controller: each pod carries the revision it was made from
(``controller-revision-hash``, ``<name>-<template hash>``); with the RollingUpdate strategy, once
every pod runs and is Ready, the highest-ordinal pod at or above ``rollingUpdate.partition``
that is not at the update revision is deleted, one at a time, and made again from the new
template. A pod below the partition that is missing is made again at the current revision.
Kube keeps every revision's template in a ControllerRevision; the simulator keeps none, so it
makes such a pod from a sibling that still runs the current revision (from the new template
when no sibling does). OnDelete updates a pod only when someone deletes it. The status counts
the pods at ``currentRevision`` and at ``updateRevision``; ``currentRevision`` becomes the
update revision once every pod is updated and Ready, as kube's ``completeRollingUpdate`` does.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.apis.templatehash import template_hash
from controlplane.interpreter.statefulset import partition_of
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
)

LABEL_REVISION: Final = "controller-revision-hash"
LABEL_POD_NAME: Final = "statefulset.kubernetes.io/pod-name"
LABEL_POD_INDEX: Final = "apps.kubernetes.io/pod-index"
#: Fields of a running pod that are its own, not its template's.
_POD_OWN_FIELDS: Final = ("nodeName", "hostname")


def revision_of(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION) or "")


def _template_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template ``pod`` was made from, as far as the pod tells it."""
    meta = pod.get("metadata") or {}
    own = (LABEL_REVISION, LABEL_POD_NAME, LABEL_POD_INDEX)
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in own}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in _POD_OWN_FIELDS}
    return {"metadata": {"labels": labels, "annotations": dict(meta.get("annotations") or {})}, "spec": spec}


def reconcile_statefulset(
    statefulset: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: str, rng: random.Random
) -> Changes:
    meta = statefulset["metadata"]
    spec = statefulset.get("spec") or {}
    name = meta["name"]
    replicas = spec_replicas(statefulset)
    template = spec.get("template") or {}
    update_revision = f"{name}-{template_hash(template)}"
    status_old = statefulset.get("status") or {}
    current_revision = str(status_old.get("currentRevision") or update_revision)
    rolling = (spec.get("updateStrategy") or {}).get("type") != "OnDelete"
    partition = partition_of(spec) or 0
    parallel = spec.get("podManagementPolicy") == "Parallel"
    by_ordinal: dict[int, Mapping[str, Any]] = {}
    leaving: set[int] = set()
    for pod in pods:
        suffix = pod["metadata"]["name"].rsplit("-", 1)[-1]
        if not suffix.isdigit():
            continue
        if is_terminating(pod):
            leaving.add(int(suffix))
        else:
            by_ordinal[int(suffix)] = pod
    at_current = next((p for p in by_ordinal.values() if revision_of(p) == current_revision), None)

    def make(ordinal: int) -> dict[str, Any]:
        revision, source = update_revision, template
        if ordinal < partition and current_revision != update_revision and at_current is not None:
            revision, source = current_revision, _template_of(at_current)
        pod_name = f"{name}-{ordinal}"
        labels = {LABEL_REVISION: revision, LABEL_POD_NAME: pod_name, LABEL_POD_INDEX: str(ordinal)}
        return new_pod(statefulset, source, name=pod_name, labels=labels, hostname=pod_name)

    changes = Changes()
    settled = True  # every ordinal runs and is Ready: the rolling update may go on
    for ordinal in range(replicas):
        member = by_ordinal.get(ordinal)
        if member is not None and phase(member) in ("Succeeded", "Failed"):
            changes.delete.append(member["metadata"]["name"])  # recreated on the next pass
            settled = False
            break
        if member is None:
            settled = False
            if ordinal not in leaving:  # the old pod's name is free once it is gone
                changes.create.append(make(ordinal))
            if not parallel:
                break
        elif not is_ready(member):
            settled = False
            if not parallel:
                break
    surplus = sorted((o for o in by_ordinal if o >= replicas), reverse=True)
    for ordinal in surplus if parallel else surplus[:1]:
        changes.delete.append(by_ordinal[ordinal]["metadata"]["name"])
    if rolling and settled and not surplus and not leaving:
        for ordinal in range(replicas - 1, partition - 1, -1):
            if revision_of(by_ordinal[ordinal]) != update_revision:
                changes.delete.append(by_ordinal[ordinal]["metadata"]["name"])
                break
    live = [p for p in by_ordinal.values() if is_active(p)]
    ready = sum(1 for p in live if is_ready(p))
    updated = sum(1 for p in live if revision_of(p) == update_revision)
    if rolling and updated == len(live) and ready == len(live):
        current_revision = update_revision
    status = compact(
        {
            "observedGeneration": generation(statefulset),
            "replicas": len(live),
            "readyReplicas": ready,
            "currentReplicas": sum(1 for p in live if revision_of(p) == current_revision),
            "updatedReplicas": updated,
            "availableReplicas": ready,
        }
    )
    status["currentRevision"] = current_revision
    status["updateRevision"] = update_revision
    status["collisionCount"] = 0
    changes.status = changed(status_old, status)
    return changes
