"""Kueue's conversion of its quota kinds between ``kueue.x-k8s.io/v1beta2`` and the v1beta1 form
the hub stores (Kueue's ``apis/kueue/v1beta1/*_conversion.go``), over plain dicts. Pure: no I/O.

Each function takes an object and returns a new one (the input is not changed) with the other
version's apiVersion; the fields the two versions share are carried over as they are.

* ClusterQueue: ``cohort`` ↔ ``cohortName``; v1beta1's ``admissionChecks`` become v2's
  ``admissionChecksStrategy`` rules (one per check, for every flavor), as Kueue converts them;
  ``flavorFungibility``'s ``Borrow`` and ``Preempt`` are v1beta2's ``MayStopSearch`` (Kueue's
  v1beta1 documents them as its old names; the hub stores the old ones, which its admission reads).
  The fields v1beta1 has no place for (``concurrentAdmissionPolicy``,
  ``flavorFungibility.preference``) travel in the annotation :data:`V1BETA2_FIELDS_ANNOTATION` of
  the stored object, as kube carries an autoscaling/v2 HPA's fields in v1's annotations, and are
  taken out of it again on the way back.
* LocalQueue: ``status.flavorUsage`` ↔ ``status.flavorsUsage``; v1beta1's ``status.flavors`` has no
  v1beta2 form and is dropped, as Kueue drops it.
* AdmissionCheck: v1beta1's ``retryDelayMinutes`` (deprecated) has no v1beta2 form and is dropped.
* Cohort (stored at v1beta1, whose fields v1beta2 shares): v1alpha1's ``spec.parent`` ↔
  ``spec.parentName``, as Kueue renamed it when it moved the kind to v1beta1.
* Workload: ``priorityClassSource`` + ``priorityClassName`` ↔ ``priorityClassRef``; a name without
  a source has no v1beta2 form and is dropped, as Kueue drops it; ``status``'s
  ``accumulatedPastExexcutionTimeSeconds`` (v1beta1's spelling) ↔ ``accumulatedPastExecutionTimeSeconds``.
  A pod set's topology assignment: v1beta1's ``domains`` ↔ v1beta2's ``slices``
  (:mod:`controlplane.apis.kueue_topology_assignment`).
* ResourceFlavor, WorkloadPriorityClass and Cohort: the apiVersion alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from controlplane.apis import kueue_v1alpha1, kueue_v1beta1, kueue_v1beta2
from controlplane.apis.kube.objects import child
from controlplane.apis.kueue_topology_assignment import domains_from_slices, fit, slices_from_domains
from controlplane.apis.untyped import Obj

#: The v1beta2 fields of a ClusterQueue that v1beta1 cannot hold, as the JSON of a partial spec.
V1BETA2_FIELDS_ANNOTATION: Final = "kueue.gpufed.io/v1beta2-fields"

#: v1beta1's ``priorityClassSource`` values and the ``priorityClassRef`` (group, kind) of each.
_PRIORITY_SOURCES: Final = {
    "kueue.x-k8s.io/workloadpriorityclass": ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}
#: v1beta1's old names of v1beta2's ``MayStopSearch``, per fungibility field.
_STOP_SEARCH_NAMES: Final = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
_MAY_STOP_SEARCH: Final = "MayStopSearch"
#: A Workload's ``status`` field of the time admitted before, as v1beta1 spells it and as v1beta2 does.
_ACCUMULATED_V1BETA1: Final = "accumulatedPastExexcutionTimeSeconds"
_ACCUMULATED_V1BETA2: Final = "accumulatedPastExecutionTimeSeconds"


def _copy(obj: Obj, api_version: str) -> Obj:
    out = copy.deepcopy(obj)
    out["apiVersion"] = api_version
    return out


def _annotations(obj: Obj) -> Obj | None:
    return child(child(obj, "metadata"), "annotations")


def _rename(parent: Obj | None, old: str, new: str) -> None:
    if parent is not None and old in parent:
        parent[new] = parent.pop(old)


def _drop(parent: Obj | None, field: str) -> None:
    """``field`` left out of ``parent``: the other version has no place for it."""
    if parent is not None:
        parent.pop(field, None)


# --- ClusterQueue ----------------------------------------------------------------------------


def cluster_queue_to_v1beta1(obj: Obj) -> Obj:
    """A v1beta2 ClusterQueue as the hub stores it (v1beta1)."""
    out = _copy(obj, kueue_v1beta1.API_VERSION)
    spec = child(out, "spec")
    kept: Obj = {}
    if spec is not None:
        _rename(spec, "cohortName", "cohort")
        if "concurrentAdmissionPolicy" in spec:
            kept["concurrentAdmissionPolicy"] = spec.pop("concurrentAdmissionPolicy")
        fungibility = spec.get("flavorFungibility")
        if isinstance(fungibility, dict):
            for field, old_name in _STOP_SEARCH_NAMES.items():
                if fungibility.get(field) == _MAY_STOP_SEARCH:
                    fungibility[field] = old_name
            if "preference" in fungibility:
                kept["flavorFungibility"] = {"preference": fungibility.pop("preference")}
    annotations = _annotations(out)
    if annotations is not None:
        annotations.pop(V1BETA2_FIELDS_ANNOTATION, None)
    if kept:
        meta = out.setdefault("metadata", {})
        if isinstance(meta, dict):
            if not isinstance(meta.get("annotations"), dict):
                meta["annotations"] = {}
            meta["annotations"][V1BETA2_FIELDS_ANNOTATION] = json.dumps(kept, separators=(",", ":"), sort_keys=True)
    elif annotations is not None and not annotations:
        out["metadata"].pop("annotations")
    return out


def _parsed_fields(text: object) -> Obj:
    try:
        kept = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return kept if isinstance(kept, dict) else {}


def _kept_fields(obj: Obj) -> Obj:
    """The v1beta2-only fields the stored ClusterQueue carries (its annotation taken out); an
    annotation that is not a JSON object of them is ignored."""
    annotations = _annotations(obj)
    text = annotations.pop(V1BETA2_FIELDS_ANNOTATION, None) if annotations is not None else None
    if annotations is not None and not annotations:
        obj["metadata"].pop("annotations")
    return _parsed_fields(text)


def v1beta2_fields(obj: Mapping[str, Any]) -> Obj:
    """The v1beta2-only fields a stored ClusterQueue carries in its annotation, as a partial
    spec (``{"flavorFungibility": {"preference": ...}}``); {} when it has none. Reads only."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return _parsed_fields(annotations.get(V1BETA2_FIELDS_ANNOTATION) if isinstance(annotations, Mapping) else None)


def cluster_queue_to_v1beta2(obj: Obj) -> Obj:
    """A stored (v1beta1) ClusterQueue as v1beta2 serves it."""
    out = _copy(obj, kueue_v1beta2.API_VERSION)
    kept = _kept_fields(out)
    spec = child(out, "spec")
    if spec is None:
        return out
    _rename(spec, "cohort", "cohortName")
    checks = spec.pop("admissionChecks", None)
    if isinstance(checks, list) and checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in checks]}
    fungibility = spec.get("flavorFungibility")
    if isinstance(fungibility, dict):
        for field, old_name in _STOP_SEARCH_NAMES.items():
            if fungibility.get(field) == old_name:
                fungibility[field] = _MAY_STOP_SEARCH
        kept_fungibility = kept.get("flavorFungibility")
        if isinstance(kept_fungibility, dict) and kept_fungibility.get("preference") is not None:
            fungibility["preference"] = kept_fungibility["preference"]
    if kept.get("concurrentAdmissionPolicy") is not None:
        spec["concurrentAdmissionPolicy"] = kept["concurrentAdmissionPolicy"]
    return out


# --- LocalQueue ------------------------------------------------------------------------------


def local_queue_to_v1beta1(obj: Obj) -> Obj:
    out = _copy(obj, kueue_v1beta1.API_VERSION)
    status = out.get("status")
    _rename(status if isinstance(status, dict) else None, "flavorsUsage", "flavorUsage")
    return out


def local_queue_to_v1beta2(obj: Obj) -> Obj:
    out = _copy(obj, kueue_v1beta2.API_VERSION)
    status = child(out, "status")
    _rename(status, "flavorUsage", "flavorsUsage")
    _drop(status, "flavors")
    return out


# --- AdmissionCheck --------------------------------------------------------------------------


def admission_check_to_v1beta2(obj: Obj) -> Obj:
    """A stored (v1beta1) AdmissionCheck at v1beta2: without ``retryDelayMinutes``, which v1beta2 lacks."""
    out = _copy(obj, kueue_v1beta2.API_VERSION)
    _drop(child(out, "spec"), "retryDelayMinutes")
    return out


# --- Workload --------------------------------------------------------------------------------


def _topology_assignments(obj: Obj) -> list[Obj]:
    """Each pod set's topology assignment of ``status.admission`` (the dicts themselves)."""
    status = obj.get("status")
    admission = status.get("admission") if isinstance(status, dict) else None
    assignments = admission.get("podSetAssignments") if isinstance(admission, dict) else None
    return [
        assignment["topologyAssignment"]
        for assignment in (assignments if isinstance(assignments, list) else ())
        if isinstance(assignment, dict) and isinstance(assignment.get("topologyAssignment"), dict)
    ]


def _workload_copy(obj: Obj, api_version: str, convert: Callable[[Obj], Obj]) -> Obj:
    """A copy of a Workload whose topology assignments are ``convert``'s of the originals: they
    are converted, not deep-copied first (a copy of v1beta1's domains would be thrown away). The
    converted ones are given to ``deepcopy`` as the copies of the originals."""
    memo: dict[int, Any] = {id(topology): convert(topology) for topology in _topology_assignments(obj)}
    out = copy.deepcopy(obj, memo)
    out["apiVersion"] = api_version
    return out


def workload_to_v1beta1(obj: Obj) -> Obj:
    """A v1beta2 Workload as the hub stores it. Its topology assignments list their domains only
    when the rules take their shape and all together they are no more than a v1beta1 write
    carries (:func:`~controlplane.apis.kueue_topology_assignment.fit`): otherwise none, which
    validation refuses, so an unchecked body costs no more than a v1beta1 write."""
    expand = fit(_topology_assignments(obj))
    out = _workload_copy(
        obj, kueue_v1beta1.API_VERSION, lambda topology: domains_from_slices(topology, expand)
    )
    spec = child(out, "spec")
    ref = spec.pop("priorityClassRef", None) if spec is not None else None
    if spec is not None and isinstance(ref, dict):
        for source, (group, kind) in _PRIORITY_SOURCES.items():
            if (ref.get("group"), ref.get("kind")) == (group, kind):
                spec["priorityClassSource"] = source
                spec["priorityClassName"] = ref.get("name")
    _rename(child(out, "status"), _ACCUMULATED_V1BETA2, _ACCUMULATED_V1BETA1)
    return out


def workload_to_v1beta2(obj: Obj) -> Obj:
    out = _workload_copy(obj, kueue_v1beta2.API_VERSION, slices_from_domains)
    _rename(child(out, "status"), _ACCUMULATED_V1BETA1, _ACCUMULATED_V1BETA2)
    spec = child(out, "spec")
    if spec is None:
        return out
    source = spec.pop("priorityClassSource", None)
    name = spec.pop("priorityClassName", None)
    if source in _PRIORITY_SOURCES:
        group, kind = _PRIORITY_SOURCES[source]
        spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    return out


# --- the kinds whose fields are the same ------------------------------------------------------


# --- Cohort ----------------------------------------------------------------------------------


def cohort_to_v1alpha1(obj: Obj) -> Obj:
    """A stored (v1beta1) Cohort at v1alpha1: ``spec.parentName`` is ``spec.parent``."""
    out = _copy(obj, kueue_v1alpha1.API_VERSION)
    _rename(child(out, "spec"), "parentName", "parent")
    return out


def cohort_v1alpha1_to_v1beta1(obj: Obj) -> Obj:
    """A v1alpha1 Cohort as the hub stores it (v1beta1)."""
    out = _copy(obj, kueue_v1beta1.API_VERSION)
    _rename(child(out, "spec"), "parent", "parentName")
    return out


def to_version(api_version: str) -> Callable[[Obj], Obj]:
    """The conversion of a kind whose versions differ in their apiVersion alone."""
    return lambda obj: _copy(obj, api_version)


__all__ = [
    "V1BETA2_FIELDS_ANNOTATION",
    "admission_check_to_v1beta2",
    "cluster_queue_to_v1beta1",
    "cluster_queue_to_v1beta2",
    "cohort_to_v1alpha1",
    "cohort_v1alpha1_to_v1beta1",
    "local_queue_to_v1beta1",
    "local_queue_to_v1beta2",
    "to_version",
    "workload_to_v1beta1",
    "workload_to_v1beta2",
]
