"""Kueue's Workload webhook (``pkg/webhooks/workload_webhook.go``), after the CRD's rules pass, as
kube-apiserver calls a validating webhook only for a write its own validation took. Pure.

On every write (create, update, status):

* ``spec.podSets``: at most one pod set with a ``minCount`` (``Invalid value: 2: at most one
  podSet can use minCount``, the count of such pod sets); no container (nor init container)
  requesting ``pods``, which Kueue keeps for itself (``…resources.requests[pods]: Invalid value:
  "pods": the key is reserved for internal kueue use``);
* while quota is reserved (``QuotaReserved`` True), each pod set assignment names a pod set
  (``status.admission.podSetAssignments[0].name: Not found: "x"``) and, with a ``count``, each
  ``resourceUsage`` is a multiple of it (cpu in thousandths, as Kueue's ``ResourceValue``:
  ``…resourceUsage[cpu]: Invalid value: "3": is not a multiple of 2``, the count shown where Go
  prints the pointer's address);
* ``status.reclaimablePods``, keyed by name: a pod set's (``Unsupported value``), at most its
  count (``status.reclaimablePods[main].count: Invalid value: 3: should be less or equal to 2``);
* an admission check's ``podSetUpdates``: each of a pod set (``Unsupported value``), its
  tolerations' keys label names, its labels and nodeSelector kube's labels.

On an update: a Workload that held quota keeps its ``spec.podSets`` (``field is immutable``; the
value shown as JSON where Go prints its structs); ``status.admission``, set before and after, is
kept; while quota stays reserved a pod set's reclaimable count never goes down (``cannot be less
then 2``, Kueue's spelling) nor is removed (``Required value: cannot be removed``); an admission
check Ready before and after keeps its ``podSetUpdates``. These compare as kube's
``apiequality.Semantic.DeepEqual``: quantities (requests, limits, overhead, ``resourceUsage``…) by
value (``1000m`` is ``1``), an empty list or map as an absent one.
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
from controlplane.apis.kube.validate_pod import annotations_errors, labels_errors
from controlplane.apis.quantity import QuantityError, parse_quantity, to_int

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
            at = f"status.admission.podSetAssignments[{index}]"
            if (name := str(assignment.get("name") or "")) not in names:
                out.append(not_found(f"{at}.name", name))
            out += _usage_per_pod(assignment, f"{at}.resourceUsage")
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


def _usage_per_pod(assignment: Obj, path: str) -> list[FieldError]:
    """``validateAdmission``: with a count, each resource's usage divides by it."""
    count = assignment.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return []
    out = []
    for resource, amount in sorted(mapping(assignment.get("resourceUsage")).items()):
        try:
            whole = to_int(resource, amount)
        except QuantityError:
            continue  # the CRD's schema refuses it first
        if whole % count:
            out.append(invalid(f"{path}[{resource}]", str(amount), f"is not a multiple of {count}"))
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
        out += annotations_errors(
            dict(sorted(mapping(update.get("annotations")).items())), f"{at}.annotations"
        )
        out += labels_errors(dict(sorted(mapping(update.get("nodeSelector")).items())), f"{at}.nodeSelector")
        out += labels_errors(dict(sorted(mapping(update.get("labels")).items())), f"{at}.labels")
    return out


def _update(obj: Obj, old: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    if _quota_reserved(old):
        pod_sets = mapping(obj.get("spec")).get("podSets")
        out += _semantic_immutable(
            pod_sets, mapping(old.get("spec")).get("podSets"), "spec.podSets", _POD_SETS
        )
    status, old_status = mapping(obj.get("status")), mapping(old.get("status"))
    if _quota_reserved(obj) and _quota_reserved(old):
        out += _reclaimable_kept(status, old_status)
    admission, old_admission = status.get("admission"), old_status.get("admission")
    if admission is not None and old_admission is not None:
        out += _semantic_immutable(admission, old_admission, "status.admission", _ADMISSION)
    out += _ready_updates_kept(status, old_status)
    return out


def _ready_updates_kept(status: Obj, old_status: Obj) -> list[FieldError]:
    """``validateImmutablePodSetUpdates``: a check Ready before and after keeps its pod set
    updates (the path indexes the old status's checks, as Kueue's)."""
    now = {mapping(c).get("name"): mapping(c) for c in items(status.get("admissionChecks"))}
    out = []
    for index, before in enumerate(map(mapping, items(old_status.get("admissionChecks")))):
        after = now.get(before.get("name"))
        if after is None or before.get("state") != "Ready" or after.get("state") != "Ready":
            continue
        path = f"status.admissionChecks[{index}].podSetUpdates"
        out += _semantic_immutable(after.get("podSetUpdates"), before.get("podSetUpdates"), path, ())
    return out


# Where a Workload's Go types hold a ``resource.Quantity``, which kube's semantic equality compares
# by value: a pod template's (``*`` any list item or map value), a pod set's, an admission's.
_RESOURCES = (("requests", "*"), ("limits", "*"))
_POD_SPEC = (
    *(
        (containers, "*", "resources", *r)
        for containers in ("initContainers", "containers", "ephemeralContainers")
        for r in _RESOURCES
    ),
    *(("resources", *r) for r in _RESOURCES),
    ("overhead", "*"),
    ("volumes", "*", "emptyDir", "sizeLimit"),
    *(("volumes", "*", "ephemeral", "volumeClaimTemplate", "spec", "resources", *r) for r in _RESOURCES),
)
_POD_SETS = tuple(("*", "template", "spec", *path) for path in _POD_SPEC)
_ADMISSION = (("podSetAssignments", "*", "resourceUsage", "*"),)


def _semantic_immutable(
    new: Any, old: Any, path: str, quantities: tuple[tuple[str, ...], ...]
) -> list[FieldError]:
    """``ValidateImmutableField`` with ``Semantic.DeepEqual`` (``quantities``: the paths of Quantities)."""
    if new == old or _semantic(new, quantities) == _semantic(old, quantities):
        return []
    return immutable(new, old, path)


def _semantic(value: Any, quantities: tuple[tuple[str, ...], ...]) -> Any:
    """``value`` as kube's semantic equality sees it: empty lists and maps as absent, and each
    quantity at ``quantities`` as its value."""
    for path in quantities:
        value = _valued_at(value, path)
    return _without_empties(value)


def _valued_at(value: Any, path: tuple[str, ...]) -> Any:
    if not path:
        try:
            return parse_quantity(value) if isinstance(value, str | int | float) else value
        except QuantityError:
            return value
    key, rest = path[0], path[1:]
    if key == "*" and isinstance(value, list):
        return [_valued_at(v, rest) for v in value]
    if key == "*" and isinstance(value, dict):
        return {k: _valued_at(v, rest) for k, v in value.items()}
    if isinstance(value, dict) and key in value:
        return {**value, key: _valued_at(value[key], rest)}
    return value


def _without_empties(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _without_empties(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_without_empties(v) for v in value]
    return value


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
