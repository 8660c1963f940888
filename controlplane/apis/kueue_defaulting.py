"""Kueue's CRD defaults (``+kubebuilder:default``) of its quota kinds, as its API server stores them.

Structural defaults apply on every create and update and to objects read back from storage, and
only where the parent object exists. A ClusterQueue (v1beta1 and v1beta2 alike) gets
``queueingStrategy: BestEffortFIFO``, ``stopPolicy: None``, ``flavorFungibility`` (see
:func:`cluster_queue`), ``preemption`` with ``reclaimWithinCohort``, ``withinClusterQueue`` and
``borrowWithinCohort.policy`` all ``Never``, and a given ``fairSharing`` a ``weight`` of 1; a
LocalQueue ``stopPolicy: None`` and a given ``fairSharing`` a ``weight`` of 1; a Cohort a given
``fairSharing`` a ``weight`` of 1; an AdmissionCheck ``retryDelayMinutes: 15``. A Workload (:func:`workload`) is ``active: true``, each of its
pod sets named ``main`` and of ``count`` 1 when unset, each pod set assignment of its status named
``main`` when unset, and at v1beta1 its ``priorityClassSource`` is ``""`` and each resource
request of its status named ``main`` when unset (v1beta2 has neither default); Kueue's webhook adds nothing to these (its pod set name
is the same ``main``, and it keeps ``minCount``: partial admission is on by default). Each is
what the hub's admission already reads from the unset field (:mod:`controlplane.admission.objects`,
``spec.active`` in :mod:`controlplane.admission.requeuing`), so no admission decision changes.

In: an object's wire dict, changed in place. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controlplane.apis.kube.objects import child, ensure, set_nil_default

#: Fills unset fields of one object in place.
KueueDefaulter = Callable[[dict[str, Any]], None]


def _fair_sharing_weight(spec: dict[str, Any]) -> None:
    fair_sharing = spec.get("fairSharing")
    if isinstance(fair_sharing, dict):
        set_nil_default(fair_sharing, "weight", 1)


def cluster_queue(when_can_borrow: str) -> KueueDefaulter:
    """A ClusterQueue's defaults; ``flavorFungibility.whenCanBorrow`` is ``when_can_borrow``
    (v1beta1's ``Borrow``, v1beta2's ``MayStopSearch``), ``whenCanPreempt`` TryNextFlavor."""

    def defaults(obj: dict[str, Any]) -> None:
        spec = child(obj, "spec")
        if spec is None:
            return
        set_nil_default(spec, "queueingStrategy", "BestEffortFIFO")
        set_nil_default(spec, "stopPolicy", "None")
        fungibility = ensure(spec, "flavorFungibility")
        if fungibility is not None:
            fungibility.setdefault("whenCanBorrow", when_can_borrow)
            fungibility.setdefault("whenCanPreempt", "TryNextFlavor")
        preemption = ensure(spec, "preemption")
        if preemption is not None:
            set_nil_default(preemption, "reclaimWithinCohort", "Never")
            set_nil_default(preemption, "withinClusterQueue", "Never")
            borrow = ensure(preemption, "borrowWithinCohort")
            if borrow is not None:
                set_nil_default(borrow, "policy", "Never")
        _fair_sharing_weight(spec)

    return defaults


def local_queue(obj: dict[str, Any]) -> None:
    """A LocalQueue's defaults."""
    spec = child(obj, "spec")
    if spec is None:
        return
    set_nil_default(spec, "stopPolicy", "None")
    _fair_sharing_weight(spec)


def cohort(obj: dict[str, Any]) -> None:
    """A Cohort's defaults."""
    spec = child(obj, "spec")
    if spec is not None:
        _fair_sharing_weight(spec)


def admission_check(obj: dict[str, Any]) -> None:
    """An AdmissionCheck's defaults (v1beta1 and v1beta2 alike)."""
    spec = child(obj, "spec")
    if spec is not None:
        set_nil_default(spec, "retryDelayMinutes", 15)


def workload(*, v1beta1: bool) -> KueueDefaulter:
    """A Workload's defaults at v1beta1 (``priorityClassSource: ""`` too) or v1beta2."""

    def defaults(obj: dict[str, Any]) -> None:
        spec = child(obj, "spec")
        if spec is None:
            return
        set_nil_default(spec, "active", True)
        if v1beta1:
            set_nil_default(spec, "priorityClassSource", "")
        pod_sets = spec.get("podSets")
        for pod_set in pod_sets if isinstance(pod_sets, list) else ():
            if not isinstance(pod_set, dict):
                continue
            set_nil_default(pod_set, "name", "main")
            set_nil_default(pod_set, "count", 1)
        status = child(obj, "status")
        admission = child(status, "admission") if status is not None else None
        # v1beta2's CRD defaults no resource request's name (it is required there).
        requests = (status or {}).get("resourceRequests") if v1beta1 else None
        for listed in (admission or {}).get("podSetAssignments"), requests:
            for entry in listed if isinstance(listed, list) else ():
                if isinstance(entry, dict):
                    set_nil_default(entry, "name", "main")

    return defaults
