"""Kueue's pod groups: Pods that share one Workload (``pkg/controller/jobs/pod``).

A Pod with the label ``kueue.x-k8s.io/pod-group-name`` belongs to that group, and says in the
annotation ``kueue.x-k8s.io/pod-group-total-count`` how many Pods the group has. Kueue's pod
webhook refuses one without the other, or a count that is not a positive integer, and gives each
Pod of a group the annotation ``kueue.x-k8s.io/role-hash``: a hash of what its admission depends
on (requests, ports, nodeSelector, affinity, tolerations ...), so Pods of the same shape share a
role. Once the group's runnable Pods reach the total count, Kueue makes one Workload named for the
group, one pod set per role (named by its hash, in name order, counting its Pods); it is admitted
whole, each Pod is ungated with its role's admission, and it finishes once the total count of
Pods has succeeded. The annotations ``kueue.x-k8s.io/pod-group-serving``,
``kueue.x-k8s.io/pod-group-fast-admission`` and ``kueue.x-k8s.io/retriable-in-group`` change that
as Kueue's pod controller reads them.

In: Pods (wire dicts). Out: the group's name and count, the role hash, the webhook's field errors,
the Pods that count (runnable or succeeded), the group's pod sets, why a Workload cannot be made
yet (Kueue's words), whether it has finished, its reclaimable Pods, its
``WaitingForReplacementPods`` condition and the excess Pods Kueue deletes. Pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from controlplane.admission import objects as adm
from controlplane.admission.pods import finished, gated, has_finalizer
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kube.field import FieldError, immutable, invalid, required
from controlplane.apis.kube.names import dns_subdomain_errors
from controlplane.apis.quantity import QuantityError, parse_kube_quantity
from controlplane.apis.views import ObjectView

GROUP_LABEL: Final = kueue.LABEL_POD_GROUP_NAME
TOTAL_COUNT: Final = kueue.ANNOTATION_POD_GROUP_TOTAL_COUNT
MAX_ROLES: Final = 8
"""Kueue's most pod sets of a Workload, so a group's most roles."""
TOO_MANY_ROLES: Final = "pod group can't include more than 8 roles"

_LABEL_PATH: Final = f"metadata.labels[{GROUP_LABEL}]"
_COUNT_PATH: Final = f"metadata.annotations[{TOTAL_COUNT}]"
_BOTH: Final = f"both the '{TOTAL_COUNT}' annotation and the '{GROUP_LABEL}' label should be set"
_ATOI: Final = re.compile(r"[+-]?[0-9]+")
_INT64: Final = 2**63
_Pod = TypeVar("_Pod", bound=Mapping[str, Any])


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(pod: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = _meta(pod).get(key)
    return value if isinstance(value, Mapping) else {}


def group_name(pod: Mapping[str, Any]) -> str | None:
    """The group a Pod belongs to (its label ``kueue.x-k8s.io/pod-group-name``), None when none."""
    value = _strings(pod, "labels").get(GROUP_LABEL)
    return value if isinstance(value, str) and value else None


def _atoi(text: str) -> int | str:
    """Go's ``strconv.Atoi``: the integer, or its error's text."""
    if _ATOI.fullmatch(text) is None:
        return f'strconv.Atoi: parsing "{text}": invalid syntax'
    value = int(text)
    return value if -_INT64 <= value < _INT64 else f'strconv.Atoi: parsing "{text}": value out of range'


def total_count(pod: Mapping[str, Any]) -> int | str:
    """Kueue's ``groupTotalCount``: the Pod's total count, or why it has none (Kueue's words)."""
    if group_name(pod) is None:
        return f"pod doesn't have a '{GROUP_LABEL}' label"
    raw = _strings(pod, "annotations").get(TOTAL_COUNT)
    if not isinstance(raw, str):
        return f"failed to extract '{TOTAL_COUNT}' annotation"
    count = _atoi(raw)
    if isinstance(count, int) and count < 1:
        return f"incorrect annotation value '{TOTAL_COUNT}={raw}': group total count should be greater than zero"
    return count


def _group_metadata_errors(pod: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's pod webhook's ``validatePodGroupMetadata``."""
    name, raw = group_name(pod), _strings(pod, "annotations").get(TOTAL_COUNT)
    has_count = TOTAL_COUNT in _strings(pod, "annotations")
    out: list[FieldError] = []
    if name is None:
        if has_count:
            return [required(_LABEL_PATH, _BOTH)]
    else:
        out += [invalid(_LABEL_PATH, name, ",".join(errs))] if (errs := dns_subdomain_errors(name)) else []
        if not has_count:
            return [*out, required(_COUNT_PATH, _BOTH)]
    if has_count and isinstance(count := total_count(pod), str):
        out.append(invalid(_COUNT_PATH, raw, count))
    return out


def metadata_errors(pod: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """Kueue's pod webhook's group rules, on create and update: the group name label and the total
    count annotation go together, the name is a DNS subdomain and the count a positive integer;
    on update, a Pod's group name is immutable."""
    out = _group_metadata_errors(pod)
    if old is not None and (before := group_name(old)) is not None:
        out += immutable(group_name(pod) or "", before, _LABEL_PATH)
    return out


def is_group_workload(workload: Mapping[str, Any]) -> bool:
    """Whether a Workload is a pod group's (Kueue's annotation ``kueue.x-k8s.io/is-group-workload``)."""
    return _strings(workload, "annotations").get(kueue.ANNOTATION_IS_GROUP_WORKLOAD) == "true"


def _go_json(value: Any) -> str:
    """``json.Marshal``'s text: no spaces, ``<``, ``>`` and ``&`` escaped as Go escapes them."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _resource_list(value: Any) -> Any:
    """A ResourceList as Go encodes it: keys in order, each quantity in its canonical form."""
    if not isinstance(value, Mapping):
        return None
    out = {}
    for name in sorted(value):
        try:
            out[str(name)] = str(parse_kube_quantity(value[name]))
        except (QuantityError, TypeError, ValueError):
            out[str(name)] = str(value[name])
    return out


def _fields(value: Any, order: Sequence[str], *, always: Sequence[str] = (), pointers: Sequence[str] = (),
            nested: Mapping[str, Any] | None = None) -> Any:
    """A struct as Go encodes it: its fields in declaration order, the empty ``omitempty`` ones
    left out (``always``: fields without ``omitempty``, null when absent; ``pointers``: kept
    whenever set, even to a zero value); ``nested`` encodes a field's own struct or list."""
    if not isinstance(value, Mapping):
        return None
    out = {}
    for k in order:
        v = value.get(k)
        if nested and k in nested and v is not None:
            v = nested[k](v)
        if k in always or (k in pointers and v is not None) or v not in (None, "", 0, False, [], {}):
            out[k] = v
    return out


def _each(encode: Any) -> Any:
    return lambda items: [encode(i) for i in items] if isinstance(items, list) else None


def _requirement(value: Any) -> Any:
    """``NodeSelectorRequirement`` / ``LabelSelectorRequirement``."""
    return _fields(value, ("key", "operator", "values"), always=("key", "operator"))


def _label_selector(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return None
    labels = value.get("matchLabels")
    return _fields({**value, "matchLabels": dict(sorted(labels.items())) if isinstance(labels, Mapping) else labels},
                   ("matchLabels", "matchExpressions"), nested={"matchExpressions": _each(_requirement)})


def _node_term(value: Any) -> Any:
    """``NodeSelectorTerm``: ``{}`` when empty (it is a struct value where it is nested)."""
    return _fields(value if isinstance(value, Mapping) else {}, ("matchExpressions", "matchFields"),
                   nested={"matchExpressions": _each(_requirement), "matchFields": _each(_requirement)})


def _pod_term(value: Any) -> Any:
    """``PodAffinityTerm``."""
    return _fields(value if isinstance(value, Mapping) else {},
                   ("labelSelector", "namespaces", "topologyKey", "namespaceSelector", "matchLabelKeys", "mismatchLabelKeys"),
                   always=("topologyKey",), pointers=("labelSelector", "namespaceSelector"), nested={"labelSelector": _label_selector, "namespaceSelector": _label_selector})


def _weighted(term: str, encode: Any) -> Any:
    """``PreferredSchedulingTerm`` / ``WeightedPodAffinityTerm``: a weight and a struct term."""
    return lambda v: _fields({**v, term: encode(v.get(term))}, ("weight", term), always=("weight", term))


_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


def _pod_affinity(value: Any) -> Any:
    return _fields(value, (_REQUIRED, _PREFERRED),
                   nested={_REQUIRED: _each(_pod_term), _PREFERRED: _each(_weighted("podAffinityTerm", _pod_term))})


def _affinity(value: Any) -> Any:
    """``corev1.Affinity`` in Go's field order, with each nested struct's."""
    def node_selector(v: Any) -> Any:
        return _fields(v, ("nodeSelectorTerms",), always=("nodeSelectorTerms",), nested={"nodeSelectorTerms": _each(_node_term)})

    def node(v: Any) -> Any:
        return _fields(v, (_REQUIRED, _PREFERRED), pointers=(_REQUIRED,),
                       nested={_REQUIRED: node_selector, _PREFERRED: _each(_weighted("preference", _node_term))})

    return _fields(value, ("nodeAffinity", "podAffinity", "podAntiAffinity"), pointers=("nodeAffinity", "podAffinity", "podAntiAffinity"),
                   nested={"nodeAffinity": node, "podAffinity": _pod_affinity, "podAntiAffinity": _pod_affinity})


def _spread(value: Any) -> Any:
    """``TopologySpreadConstraint``."""
    return _fields(value, ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                           "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys"),
                   always=("maxSkew", "topologyKey", "whenUnsatisfiable"),
                   pointers=("labelSelector", "minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy"), nested={"labelSelector": _label_selector})


def _toleration(value: Any) -> Any:
    return _fields(value, ("key", "operator", "value", "effect", "tolerationSeconds"), pointers=("tolerationSeconds",))


def _claim(value: Any) -> Any:
    """``PodResourceClaim``."""
    return _fields(value, ("name", "resourceClaimName", "resourceClaimTemplateName"), always=("name",),
                   pointers=("resourceClaimName", "resourceClaimTemplateName"))


def _containers(value: Any) -> Any:
    """Kueue's ``ContainersShape``: each container's requests and ports."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    for c in value:
        c = c if isinstance(c, Mapping) else {}
        ports = c.get("ports")
        shaped = [_fields(p, ("name", "hostPort", "containerPort", "protocol", "hostIP"), always=("containerPort",))
                  for p in ports] if isinstance(ports, list) and ports else None
        out.append({"ports": shaped, "resources": {"requests": _resource_list((c.get("resources") or {}).get("requests"))}})
    return out


def _list(value: Any, encode: Any) -> Any:
    """A slice with ``omitempty``: null when empty, else each item encoded."""
    return [encode(v) for v in value] if isinstance(value, list) and value else None


def role_hash(pod: Mapping[str, Any]) -> str:
    """Kueue's ``getRoleHash``: the Pod's ``kueue.x-k8s.io/role-hash`` annotation, else the first 8
    hex digits of the SHA-256 of its shape as Go's JSON encodes it (``SpecShape``: a map, so its
    keys sorted; each field a ``corev1`` struct, so its fields in declaration order, the empty
    ``omitempty`` ones left out)."""
    given = _strings(pod, "annotations").get(kueue.ANNOTATION_ROLE_HASH)
    if isinstance(given, str):
        return given
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    tolerations = spec.get("tolerations")
    shape = {"spec": {
        "affinity": _affinity(spec.get("affinity")),
        "containers": _containers(spec.get("containers")),
        "initContainers": _containers(spec.get("initContainers")),
        "nodeSelector": dict(sorted(spec["nodeSelector"].items())) if isinstance(spec.get("nodeSelector"), Mapping) else None,
        "overhead": _resource_list(spec.get("overhead")),
        "priority": spec.get("priority"),
        "resourceClaims": _list(spec.get("resourceClaims"), _claim),
        "runtimeClassName": spec.get("runtimeClassName"),
        "tolerations": _list(tolerations, _toleration),
        "topologySpreadConstraints": _list(spec.get("topologySpreadConstraints"), _spread),
    }}
    return hashlib.sha256(_go_json(shape).encode()).hexdigest()[:8]


def runnable_or_succeeded(pod: Mapping[str, Any]) -> bool:
    """Kueue's ``isPodRunnableOrSucceeded``: not failed, and not deleted before it was bound."""
    if _meta(pod).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
        return False
    return (pod.get("status") or {}).get("phase") != "Failed"


def pod_sets(members: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Kueue's ``constructGroupPodSets``: per role of the runnable or succeeded Pods, one pod set
    named by its hash, counting its Pods (the template: the first one's), in name order."""
    roles: dict[str, dict[str, Any]] = {}
    for pod in members:
        if not runnable_or_succeeded(pod):
            continue
        name = role_hash(pod)
        if name in roles:
            roles[name]["count"] += 1
            continue
        (main,) = adm.pod_sets(pod) or [{"template": {}}]
        roles[name] = {**main, "name": name, "count": 1}
    return [roles[name] for name in sorted(roles)]


def pod_sets_fast(members: Iterable[Mapping[str, Any]], count: int) -> list[dict[str, Any]]:
    """Kueue's ``constructGroupPodSetsFast``: one pod set, the first runnable Pod's role, for
    the group's total count (a later Pod of another role is not one of its Pods)."""
    for pod in members:
        if runnable_or_succeeded(pod):
            (main,) = adm.pod_sets(pod) or [{"template": {}}]
            return [{**main, "name": role_hash(pod), "count": count}]
    return []


def not_composable(group: str, members: Sequence[Mapping[str, Any]]) -> str | None:
    """Why Kueue cannot make the group's Workload yet (``validatePodGroupMetadata``; the first
    Pod stands for the group), None when it can: fewer runnable Pods than the total count, or
    members that disagree on the queue or the total count (a failed Pod is not asked)."""
    first = members[0]
    count = total_count(first)
    if isinstance(count, str):
        return count
    if not fast_admission(first) and sum(1 for p in members if runnable_or_succeeded(p)) < count:
        return f"'{group}' group has fewer runnable pods than expected"
    name, queue = _meta(first).get("name"), adm.queue_name(first) or ""
    for pod in members:
        if (pod.get("status") or {}).get("phase") == "Failed":
            continue
        if (other := adm.queue_name(pod) or "") != queue:
            return f"pods '{name}' and '{_meta(pod).get('name')}' has different queue names: {queue}!={other}"
        theirs = _atoi(str(_strings(pod, "annotations").get(TOTAL_COUNT, "")))
        if isinstance(theirs, str):
            return f"failed to extract '{TOTAL_COUNT}' annotation from the pod '{_meta(pod).get('name')}': {theirs}"
        if theirs != count:
            return f"pods '{name}' and '{_meta(pod).get('name')}' has different '{TOTAL_COUNT}' values: {count}!={theirs}"
    return None


def _annotation(pod: Mapping[str, Any], key: str) -> Any:
    return _strings(pod, "annotations").get(key)


def serving(members: Sequence[Mapping[str, Any]]) -> bool:
    """Kueue's ``isServing``: the group's Pod says ``kueue.x-k8s.io/pod-group-serving: "true"``;
    such a group never finishes and reclaims no quota."""
    return bool(members) and _annotation(first(members), kueue.ANNOTATION_POD_GROUP_SERVING) == "true"


def fast_admission(pod: Mapping[str, Any]) -> bool:
    """Whether the group's Pod carries ``kueue.x-k8s.io/pod-group-fast-admission`` (any value,
    as Kueue reads it): its Workload is made from the first runnable Pod, for the total count."""
    return kueue.ANNOTATION_POD_GROUP_FAST_ADMISSION in _strings(pod, "annotations")


def _unretriable(members: Iterable[Mapping[str, Any]]) -> bool:
    """Kueue's ``isUnretriableGroup``: a Pod of it says ``kueue.x-k8s.io/retriable-in-group: "false"``."""
    return any(_annotation(p, kueue.ANNOTATION_RETRIABLE_IN_GROUP) == "false" for p in members)


def finished_message(members: Sequence[Mapping[str, Any]]) -> str | None:
    """Kueue's ``Finished`` of a group: once as many Pods as the total count have succeeded, or
    once none runs in a group a Pod of which is not retriable, ``Pods succeeded: <n>/<total>.``;
    None while it runs, and always for a serving group."""
    if not members or serving(members):
        return None
    count = total_count(first(members))
    succeeded = sum(1 for p in members if (p.get("status") or {}).get("phase") == "Succeeded")
    if isinstance(count, str):
        return None
    if succeeded != count and (any(not finished(p) for p in members) or not _unretriable(members)):
        return None
    return f"Pods succeeded: {succeeded}/{count}."


def reclaimable_pods(members: Iterable[Mapping[str, Any]], *, is_serving: bool) -> list[dict[str, Any]]:
    """Kueue's ``ReclaimablePods`` of a group: per role, how many of its Pods have succeeded
    (none for a serving group), in role order."""
    counts: dict[str, int] = {}
    for pod in members:
        if not is_serving and (pod.get("status") or {}).get("phase") == "Succeeded":
            counts[role_hash(pod)] = counts.get(role_hash(pod), 0) + 1
    return [{"name": name, "count": counts[name]} for name in sorted(counts)]


def replacement_condition(workload: Mapping[str, Any], absent: int) -> dict[str, Any] | None:
    """Kueue's ``WaitingForReplacementPods`` condition of a group's Workload given how many of
    its Pods are missing (failed and not replaced): True, reason ``PodsFailed`` (or the Evicted
    condition's reason and message while evicted), False ``PodsReady`` once none is missing;
    None when there is nothing to change."""
    view = ObjectView(workload)
    conds = view.conditions
    old = next((c for c in conds if c.get("type") == kueue.COND_WAITING_FOR_REPLACEMENT_PODS), None)
    if old is None and absent <= 0:
        return None
    new = {"type": kueue.COND_WAITING_FOR_REPLACEMENT_PODS, "status": (old or {}).get("status"),
           "reason": (old or {}).get("reason"), "message": (old or {}).get("message")}
    if absent > 0:
        evicted = next((c for c in conds if c.get("type") == kueue.COND_EVICTED and c.get("status") == "True"), None)
        if evicted is not None:
            new |= {"reason": evicted.get("reason"), "message": evicted.get("message")}
        elif new["status"] != "True":
            new |= {"reason": "PodsFailed", "message": "Some Failed pods need replacement"}
        new["status"] = "True"
    elif new["status"] != "False":
        new |= {"status": "False", "reason": "PodsReady", "message": "No pods need replacement"}
    if old is not None and all(old.get(k) == new[k] for k in ("status", "reason", "message")):
        return None
    generation = view.generation
    return new | ({"observedGeneration": generation} if isinstance(generation, int) else {})


def _created(pod: Mapping[str, Any]) -> tuple[str, str]:
    return str(_meta(pod).get("creationTimestamp") or ""), str(_meta(pod).get("name") or "")


def excess(members: Sequence[_Pod], count: int) -> list[_Pod]:
    """The runnable Pods beyond ``count`` that Kueue deletes (``sortActivePods``: it keeps those
    with its finalizer, then the ungated ones, then the older ones)."""
    active = sorted((p for p in members if runnable_or_succeeded(p)),
                    key=lambda p: (not has_finalizer(p), gated(p), _created(p)))
    return active[count:]


def first(members: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The Pod that stands for the group (its Events, its queue): the oldest."""
    return min(members, key=_created)


def active(members: Iterable[Mapping[str, Any]]) -> bool:
    """Kueue's ``IsActive`` of a group: a Pod of it is running."""
    return any((p.get("status") or {}).get("phase") == "Running" for p in members)


def suspended(members: Iterable[Mapping[str, Any]]) -> bool:
    """Kueue's ``IsSuspended`` of a group: a Pod of it is gated or has finished."""
    return any(gated(p) or finished(p) for p in members)


__all__ = [
    "GROUP_LABEL", "MAX_ROLES", "TOO_MANY_ROLES", "TOTAL_COUNT", "active", "excess", "fast_admission", "finished_message",
    "first", "group_name", "is_group_workload", "metadata_errors", "not_composable", "pod_sets", "pod_sets_fast",
    "reclaimable_pods", "replacement_condition", "role_hash", "runnable_or_succeeded", "serving", "suspended", "total_count",
]
