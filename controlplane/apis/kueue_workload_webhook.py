"""Kueue's Workload webhook (``pkg/webhooks/workload_webhook.go``), after the CRD's rules pass, as
kube-apiserver calls a validating webhook only for a write its own validation took. Pure.

On every write (create, update, status):

* ``spec.podSets``: at most one pod set with a ``minCount`` (``Invalid value: 2: at most one
  podSet can use minCount``, the count of such pod sets); no container (nor init container)
  requesting ``pods``, which Kueue keeps for itself (``…resources.requests[pods]: Invalid value:
  "pods": the key is reserved for internal kueue use``);
* while quota is reserved (``QuotaReserved`` True), each pod set assignment names a pod set
  (``status.admission.podSetAssignments[0].name: Not found: "x"``);
* ``status.reclaimablePods``, keyed by name: a pod set's (``Unsupported value``), at most its
  count (``status.reclaimablePods[main].count: Invalid value: 3: should be less or equal to 2``);
* an admission check's ``podSetUpdates``: each of a pod set (``Unsupported value``), its
  tolerations' keys label names, its labels and nodeSelector kube's labels.

On an update: a Workload that held quota keeps its ``spec.podSets`` (``field is immutable``; the
value shown as JSON where Go prints its structs); ``status.admission``, set before and after, is
kept; while quota stays reserved a pod set's reclaimable count never goes down (``cannot be less
then 2``, Kueue's spelling) nor is removed (``Required value: cannot be removed``).
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube.field import (
    FieldError,
    immutable,
    invalid,
    items,
    mapping,
    not_found,
    not_supported,
    required,
)
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.apis.kube.validate_pod import labels_errors

Obj = dict[str, Any]


def _quota_reserved(obj: Obj | None) -> bool:
    conditions = items(mapping((obj or {}).get("status")).get("conditions"))
    return any(
        mapping(c).get("type") == "QuotaReserved" and mapping(c).get("status") == "True" for c in conditions
    )


def workload(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateWorkload`` and, on an update, ``ValidateWorkloadUpdate``."""
    spec, status = mapping(obj.get("spec")), mapping(obj.get("status"))
    pod_sets = [mapping(ps) for ps in items(spec.get("podSets"))]
    out: list[FieldError] = []
    for index, pod_set in enumerate(pod_sets):
        out += _reserved_requests(pod_set, f"spec.podSets[{index}]")
    with_min_count = sum(1 for ps in pod_sets if ps.get("minCount") is not None)
    if with_min_count > 1:
        out.append(invalid("spec.podSets", with_min_count, "at most one podSet can use minCount"))
    names = [str(ps.get("name") or "") for ps in pod_sets]
    if _quota_reserved(obj):
        assignments = items(mapping(status.get("admission")).get("podSetAssignments"))
        for index, assignment in enumerate(map(mapping, assignments)):
            if (name := str(assignment.get("name") or "")) not in names:
                out.append(not_found(f"status.admission.podSetAssignments[{index}].name", name))
    out += _reclaimable_pods(status, pod_sets, names)
    for index, check in enumerate(map(mapping, items(status.get("admissionChecks")))):
        out += _pod_set_updates(check, sorted(set(names)), f"status.admissionChecks[{index}].podSetUpdates")
    if old is not None:
        out += _update(obj, old)
    return out


def _reserved_requests(pod_set: Obj, path: str) -> list[FieldError]:
    pod = mapping(mapping(pod_set.get("template")).get("spec"))
    out = []
    for containers in ("initContainers", "containers"):
        for index, container in enumerate(map(mapping, items(pod.get(containers)))):
            if "pods" in mapping(mapping(container.get("resources")).get("requests")):
                at = f"{path}.template.spec.{containers}[{index}].resources.requests[pods]"
                out.append(invalid(at, "pods", "the key is reserved for internal kueue use"))
    return out


def _reclaimable_pods(status: Obj, pod_sets: list[Obj], names: list[str]) -> list[FieldError]:
    counts = {str(ps.get("name") or ""): ps.get("count", 1) for ps in pod_sets}
    out = []
    for reclaimable in map(mapping, items(status.get("reclaimablePods"))):
        name = str(reclaimable.get("name") or "")
        path = f"status.reclaimablePods[{name}]"
        if name not in counts:
            out.append(not_supported(f"{path}.name", name, names))
        elif isinstance(count := reclaimable.get("count"), int) and count > counts[name]:
            out.append(invalid(f"{path}.count", count, f"should be less or equal to {counts[name]}"))
    return out


def _pod_set_updates(check: Obj, names: list[str], path: str) -> list[FieldError]:
    out = []
    for index, update in enumerate(map(mapping, items(check.get("podSetUpdates")))):
        at = f"{path}[{index}]"
        if (name := str(update.get("name") or "")) not in names:
            out.append(not_supported(f"{at}.name", name, names))
        for t, toleration in enumerate(map(mapping, items(update.get("tolerations")))):
            if key := str(toleration.get("key") or ""):
                out += [invalid(f"{at}.tolerations[{t}].key", key, m) for m in qualified_name_errors(key)]
        out += labels_errors(dict(sorted(mapping(update.get("nodeSelector")).items())), f"{at}.nodeSelector")
        out += labels_errors(dict(sorted(mapping(update.get("labels")).items())), f"{at}.labels")
    return out


def _update(obj: Obj, old: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    if _quota_reserved(old):
        out += immutable(
            mapping(obj.get("spec")).get("podSets"), mapping(old.get("spec")).get("podSets"), "spec.podSets"
        )
    status, old_status = mapping(obj.get("status")), mapping(old.get("status"))
    if _quota_reserved(obj) and _quota_reserved(old):
        out += _reclaimable_kept(status, old_status)
    admission, old_admission = status.get("admission"), old_status.get("admission")
    if admission is not None and old_admission is not None:
        out += immutable(admission, old_admission, "status.admission")
    return out


def _reclaimable_kept(status: Obj, old_status: Obj) -> list[FieldError]:
    """``validateReclaimablePodsUpdate``: while quota is reserved, no count goes down nor goes away."""
    before = {
        str(mapping(r).get("name") or ""): mapping(r).get("count", 0)
        for r in items(old_status.get("reclaimablePods"))
    }
    now = {
        str(mapping(r).get("name") or ""): mapping(r).get("count", 0)
        for r in items(status.get("reclaimablePods"))
    }
    if not before or before == now:
        return []
    out = []
    for name, count in now.items():
        if name in before and isinstance(count, int) and count < before[name]:
            out.append(
                invalid(f"status.reclaimablePods[{name}].count", count, f"cannot be less then {before[name]}")
            )
    out += [
        required(f"status.reclaimablePods[{name}]", "cannot be removed") for name in before if name not in now
    ]
    return out
