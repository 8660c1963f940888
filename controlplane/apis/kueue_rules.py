"""The ``x-kubernetes-validations`` (CEL) rules of Kueue's CRDs, and the checks of Kueue's
webhooks that go with them, as kube reports them: a failed rule is ``<field>: Invalid value:
"<its type>": <the rule's message>``.

* ClusterQueue ``spec``: ``borrowingLimit must be nil when cohort is empty`` (no ``cohort``,
  v1beta2's ``cohortName``, and a borrowing limit). (Kueue's webhooks, which kube calls once the
  schema and these rules took a write, are :mod:`.kueue_queue_webhooks` and
  :mod:`.kueue_workload_webhook`.)
* ClusterQueue ``spec.preemption``: ``reclaimWithinCohort=Never and
  borrowWithinCohort.Policy!=Never`` (with the CRD's defaults, Never, for what is unset).
* ClusterQueue and Cohort ``spec.resourceGroups[i]``: ``flavors must have the same number of
  resources as the coveredResources``.
* LocalQueue ``spec.clusterQueue`` and AdmissionCheck ``spec.controllerName``: ``field is
  immutable`` (``self == oldSelf``: checked when the old and the new object both have it).
* ResourceFlavor ``spec``: ``at least one nodeLabel is required when topology is set`` and
  ``resourceFlavorSpec are immutable when topologyName is set``; ``spec.nodeTaints``: each
  effect NoSchedule, PreferNoSchedule or NoExecute; ``spec.tolerations``: kube's rules of a pod's
  tolerations, one message each (an empty key needs Exists, tolerationSeconds needs NoExecute,
  the operator Equal or Exists, no value with Exists, a known effect).
* Workload v1beta1: the object's own rules, at no field (kube's ``<nil>``), as many pod set
  assignments as pod sets while quota is reserved, ``field is immutable`` (``priorityClassSource``,
  ``priorityClassName``, ``queueName`` while quota is reserved), ``maximumExecutionTimeSeconds is
  immutable while admitted``; ``spec``: a priority with a priority class; ``spec.podSets[i]``:
  ``minCount`` at most ``count``; a check's ``podSetUpdates[j].tolerations`` as a flavor's.
* Workload v1beta2, on its own form: the same pod set, assignment and toleration rules; while quota
  is reserved ``priorityClassRef is immutable while workload quota reserved`` (set or unset as
  before), and so its ``.group``, its ``.kind`` and, for a pod PriorityClass, its ``.name``;
  ``queueName`` and ``maximumExecutionTimeSeconds`` (while admitted) likewise, in those words;
  ``spec``: ``priority should not be nil when priorityClassRef is set``; ``spec.priorityClassRef``:
  ``only the PriorityClass kind is allowed for the scheduling.k8s.io group`` (and the
  WorkloadPriorityClass kind for kueue.x-k8s.io); ``status``: ``clusterName is immutable once
  set``, ``clusterName and nominatedClusterNames are mutually exclusive``.
* Workload v1beta2, a pod set's ``topologyAssignment`` (:func:`topology_assignments`): ``valuesPerLevel
  must have the same length as the number of levels in this TopologyAssignment``; each
  ``slices[i]``: ``podCounts.individual must have length equal to domainCount``,
  ``valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this
  TopologyAssignmentSlice``; its ``podCounts`` and each ``valuesPerLevel[j]``: ``exactly one of the
  fields in [universal individual] must be set``. Then the hub's own bound: as v1beta1's domains
  (the form it stores, which lists them) the assignments take at most 1 MiB, those an update keeps
  as stored not counted (ratcheted as kube ratchets an unchanged value).
* Workload v1beta1, a topology domain's ``values``: one for each of the assignment's levels (Kueue's
  conversion to v1beta2 fails on fewer, an internal error; the hub refuses it, ratcheted alike).
* A rule that reads a field the object lacks does not evaluate, and kube says so: ``spec: Invalid
  value: "object": no such key: nodeLabels evaluating rule: at least one nodeLabel is required when
  topology is set`` (a flavor with a ``topologyName`` and no ``nodeLabels``).

In: an object's wire dict (and the stored one, on an update). Out: kube field errors. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controlplane.apis.kube.field import CauseType, FieldError, items, mapping
from controlplane.apis.kueue_topology_assignment import MAX_DOMAIN_BYTES, v1beta1_bytes
from controlplane.gojson import deep_equal, go_quote

Obj = dict[str, Any]
Rules = Callable[[Obj, Obj | None], list[FieldError]]


def failed_rule(path: str, value: Any, message: str, missing: str | None = None) -> FieldError:
    """A failed CEL rule on ``path`` holding ``value``: kube shows the value's type, not the value.
    A rule that reads a field the object lacks (``missing``) does not evaluate; kube reports the
    error of its evaluation: ``no such key: <field> evaluating rule: <message>``."""
    kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "string"
    if missing is not None:
        message = f"no such key: {missing} evaluating rule: {message}"
    return FieldError(CauseType.FIELD_VALUE_INVALID, path, f'Invalid value: "{kind}": {message}')


def _quotas(spec: Obj) -> list[tuple[str, Obj]]:
    return [
        (f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}]", mapping(quota))
        for g, group in enumerate(items(spec.get("resourceGroups")))
        for f, flavor in enumerate(items(mapping(group).get("flavors")))
        for r, quota in enumerate(items(mapping(flavor).get("resources")))
    ]


def _borrowing_needs_cohort(spec: Obj, cohort: str) -> list[FieldError]:
    if cohort not in spec and any("borrowingLimit" in quota for _, quota in _quotas(spec)):
        return [failed_rule("spec", spec, "borrowingLimit must be nil when cohort is empty")]
    return []


def _preemption(spec: Obj) -> list[FieldError]:
    preemption = spec.get("preemption")
    if not isinstance(preemption, dict):
        return []
    borrow = preemption.get("borrowWithinCohort")
    if (
        preemption.get("reclaimWithinCohort", "Never") == "Never"
        and isinstance(borrow, dict)
        and borrow.get("policy", "Never") != "Never"
    ):
        return [
            failed_rule(
                "spec.preemption",
                preemption,
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            )
        ]
    return []


def _resource_counts(spec: Obj) -> list[FieldError]:
    out = []
    for g, group in enumerate(items(spec.get("resourceGroups"))):
        covered = len(items(mapping(group).get("coveredResources")))
        if any(
            len(items(mapping(flavor).get("resources"))) != covered
            for flavor in items(mapping(group).get("flavors"))
        ):
            message = "flavors must have the same number of resources as the coveredResources"
            out.append(failed_rule(f"spec.resourceGroups[{g}]", group, message))
    return out


def cluster_queue(cohort: str) -> Rules:
    """A ClusterQueue's rules; ``cohort`` is its cohort field (v1beta1's ``cohort``, v1beta2's ``cohortName``)."""

    def errors(obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = mapping(obj.get("spec"))
        return [*_borrowing_needs_cohort(spec, cohort), *_preemption(spec), *_resource_counts(spec)]

    return errors


def cohort(obj: Obj, old: Obj | None) -> list[FieldError]:
    """A Cohort's rule, its ResourceGroups' (as a ClusterQueue's): each flavor has a quota of
    each covered resource."""
    return _resource_counts(mapping(obj.get("spec")))


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TAINT_EFFECTS = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
#: What a rule says of one item: it holds (True), fails (False), or reads a field the item lacks
#: (that field's name).
Verdict = bool | str
#: kube's rules of a pod's tolerations, as Kueue's CRDs carry them (a ResourceFlavor's
#: ``spec.tolerations``, a Workload's admission check ``podSetUpdates[].tolerations``), in the
#: CRDs' order: each is ``self.all(x, ...)`` over the list.
_TOLERATION_RULES: tuple[tuple[str, Callable[[Obj], Verdict]], ...] = (
    (
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        lambda t: "key" in t or ("operator" if "operator" not in t else t["operator"] == "Exists"),
    ),
    (
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        lambda t: (
            "tolerationSeconds" not in t or ("effect" if "effect" not in t else t["effect"] == "NoExecute")
        ),
    ),
    (
        "supported toleration values: 'Equal'(default), 'Exists'",
        lambda t: "operator" not in t or t["operator"] in ("Equal", "Exists"),
    ),
    (
        "a value must be empty when 'operator' is 'Exists'",
        lambda t: t.get("operator") != "Exists" or "value" not in t,
    ),
    (_TAINT_EFFECTS, lambda t: "effect" not in t or t["effect"] in _EFFECTS),
)


def all_items(
    path: str, listed: list[Any], message: str, holds: Callable[[Obj], Verdict]
) -> list[FieldError]:
    """``self.all(x, ...)`` on the list at ``path``: an item for which the rule is false fails it
    (CEL's ``all`` is false then, whatever the others are); else an item lacking a field the rule
    reads makes it an evaluation error."""
    verdicts = [holds(mapping(item)) for item in listed]
    if False in verdicts:
        return [failed_rule(path, listed, message)]
    missing = next((v for v in verdicts if isinstance(v, str)), None)
    return [failed_rule(path, listed, message, missing)] if missing is not None else []


def tolerations(path: str, listed: list[Any]) -> list[FieldError]:
    """The five toleration rules on the list at ``path``, each failing once."""
    return [
        error for message, holds in _TOLERATION_RULES for error in all_items(path, listed, message, holds)
    ]


def resource_flavor(obj: Obj, old: Obj | None) -> list[FieldError]:
    """A ResourceFlavor's rules: a topology needs node labels (``self.nodeLabels.size() >= 1``,
    which does not evaluate without ``nodeLabels``) and keeps the spec as it is; its taints'
    effects and tolerations as kube's pod tolerations are."""
    spec = mapping(obj.get("spec"))
    out = []
    if "topologyName" in spec and len(mapping(spec.get("nodeLabels"))) < 1:
        missing = None if "nodeLabels" in spec else "nodeLabels"
        out.append(
            failed_rule("spec", spec, "at least one nodeLabel is required when topology is set", missing)
        )
    old_spec = mapping((old or {}).get("spec"))
    if old is not None and "topologyName" in old_spec and spec != old_spec:
        out.append(failed_rule("spec", spec, "resourceFlavorSpec are immutable when topologyName is set"))
    taints = items(spec.get("nodeTaints"))
    if any(mapping(taint).get("effect") not in _EFFECTS for taint in taints):
        out.append(failed_rule("spec.nodeTaints", taints, _TAINT_EFFECTS))
    out.extend(tolerations("spec.tolerations", items(spec.get("tolerations"))))
    return out


def kept(field: str) -> Rules:
    """``self == oldSelf`` on ``spec.<field>``."""

    def errors(obj: Obj, old: Obj | None) -> list[FieldError]:
        if old is None:
            return []
        new_spec, old_spec = mapping(obj.get("spec")), mapping(old.get("spec"))
        if field in new_spec and field in old_spec and new_spec[field] != old_spec[field]:
            return [failed_rule(f"spec.{field}", new_spec[field], "field is immutable")]
        return []

    return errors


def both(first: Rules, second: Rules) -> Rules:
    """The errors of ``first`` and then of ``second``."""
    return lambda obj, old: [*first(obj, old), *second(obj, old)]


# --- Workload ----------------------------------------------------------------------------------

#: Where a rule of the object itself fails: kube names no field (its path is nil).
ROOT = "<nil>"


def _condition_true(obj: Obj, kind: str) -> bool:
    """``has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c,
    c.type == kind && c.status == 'True')``."""
    conditions = items(mapping(obj.get("status")).get("conditions"))
    return any(mapping(c).get("type") == kind and mapping(c).get("status") == "True" for c in conditions)


def _kept_while(obj: Obj, old: Obj, field: str) -> FieldError | None:
    """``oldSelf.spec.<field> == self.spec.<field>`` (either missing: the rule does not evaluate)."""
    new_spec, old_spec = mapping(obj.get("spec")), mapping(old.get("spec"))
    missing = next((field for spec in (old_spec, new_spec) if field not in spec), None)
    if missing is not None or new_spec[field] != old_spec[field]:
        return failed_rule(ROOT, obj, "field is immutable", missing)
    return None


def _workload_transitions(obj: Obj, old: Obj) -> list[FieldError]:
    """The rules of a Workload's update: what its spec keeps while it holds quota or is admitted."""
    out: list[FieldError | None] = []
    new_spec, old_spec = mapping(obj.get("spec")), mapping(old.get("spec"))
    reserved, was_reserved = _condition_true(obj, "QuotaReserved"), _condition_true(old, "QuotaReserved")
    if was_reserved:
        # On a field the CRD defaults, so always there.
        out.append(_kept_while(obj, old, "priorityClassSource"))
    if was_reserved:
        if "priorityClassName" in old_spec and "priorityClassName" in new_spec:
            out.append(_kept_while(obj, old, "priorityClassName"))
        if reserved and "queueName" in old_spec and "queueName" in new_spec:
            out.append(_kept_while(obj, old, "queueName"))
    if _condition_true(old, "Admitted") and _condition_true(obj, "Admitted"):
        field = "maximumExecutionTimeSeconds"
        if old_spec.get(field, 0) != new_spec.get(field, 0):
            out.append(failed_rule(ROOT, obj, "maximumExecutionTimeSeconds is immutable while admitted"))
    return [error for error in out if error is not None]


def workload(obj: Obj, old: Obj | None) -> list[FieldError]:
    """A Workload's rules at v1beta1: a pod set's ``minCount`` at most its ``count``; a priority
    with a priority class; as many pod set assignments as pod sets while quota is reserved; what an
    update keeps while the workload holds quota or is admitted; its checks' tolerations as a pod's."""
    return [
        *_object_and_priority(obj, old, _workload_transitions, "priorityClassName"),
        *_pod_sets_and_checks(obj),
        *_domain_values(obj, old),
    ]


def _topologies(obj: Obj) -> list[tuple[str, str, Obj]]:
    """Each pod set assignment's ``topologyAssignment``: its path, its pod set's name, itself."""
    assignments = items(mapping(mapping(obj.get("status")).get("admission")).get("podSetAssignments"))
    return [
        (f"status.admission.podSetAssignments[{i}].topologyAssignment", str(assignment.get("name")), topology)
        for i, assignment in enumerate(map(mapping, assignments))
        if isinstance(topology := assignment.get("topologyAssignment"), dict)
    ]


def _as_stored(name: str, topology: Obj, old: Obj | None) -> bool:
    """Whether an update leaves pod set ``name``'s topology assignment as stored (kube's ratcheting
    of an unchanged value, the assignments correlated by name as their list's map key)."""
    stored = next((t for _, n, t in _topologies(old) if n == name), None) if old is not None else None
    return stored is not None and deep_equal(topology, stored)


def _domain_values(obj: Obj, old: Obj | None) -> list[FieldError]:
    """A v1beta1 topology domain with a value for each level. Kueue's CRD and webhook do not check
    it, but its conversion to v1beta2 (which its webhooks and, since 0.16, its storage read) takes
    one value per level and fails on a domain with fewer: Kueue refuses the write with an internal
    error; the hub refuses it here, at the domain. An assignment kept as stored is not refused
    again (one the hub took before reads its missing values as "" at v1beta2)."""
    out = []
    for path, name, topology in _topologies(obj):
        levels = len(items(topology.get("levels")))
        short = [
            (j, values)
            for j, values in enumerate(
                items(mapping(d).get("values")) for d in items(topology.get("domains"))
            )
            if len(values) < levels
        ]
        if not short or _as_stored(name, topology, old):
            continue
        for j, values in short:
            shown = "[]string{" + ", ".join(go_quote(str(v)) for v in values) + "}"
            message = (
                f"Invalid value: {shown}: must have a value for each of the assignment's {levels} levels"
            )
            out.append(FieldError(CauseType.FIELD_VALUE_INVALID, f"{path}.domains[{j}].values", message))
    return out


def _object_and_priority(
    obj: Obj, old: Obj | None, transitions: Callable[[Obj, Obj], list[FieldError]], class_field: str
) -> list[FieldError]:
    """Both versions' first rules, the object's own (its ``transitions`` on an update) and then a
    priority with the priority class (``class_field``): kube checks an object's rules, then its fields'."""
    spec = mapping(obj.get("spec"))
    out = _assignments_per_pod_set(obj)
    if old is not None:
        out.extend(transitions(obj, old))
    if class_field in spec and "priority" not in spec:
        out.append(failed_rule("spec", spec, f"priority should not be nil when {class_field} is set"))
    return out


def _assignments_per_pod_set(obj: Obj) -> list[FieldError]:
    """Both versions' first rule: as many pod set assignments as pod sets while quota is reserved."""
    spec, status = mapping(obj.get("spec")), mapping(obj.get("status"))
    admission = status.get("admission")
    if _condition_true(obj, "QuotaReserved") and isinstance(admission, dict):
        assignments = admission.get("podSetAssignments")
        if not isinstance(assignments, list) or len(items(spec.get("podSets"))) != len(assignments):
            missing = None if isinstance(assignments, list) else "podSetAssignments"
            message = "podSetAssignments must have the same number of podSets as the spec"
            return [failed_rule(ROOT, obj, message, missing)]
    return []


def _pod_sets_and_checks(obj: Obj) -> list[FieldError]:
    """Both versions' rules of a pod set's ``minCount`` and of a check's tolerations."""
    spec, status = mapping(obj.get("spec")), mapping(obj.get("status"))
    out = []
    for i, pod_set in enumerate(map(mapping, items(spec.get("podSets")))):
        low, count = pod_set.get("minCount"), pod_set.get("count")
        if isinstance(low, int) and (count is None or (isinstance(count, int) and low > count)):
            missing = None if "count" in pod_set else "count"
            message = "minCount should be positive and less or equal to count"
            out.append(failed_rule(f"spec.podSets[{i}]", pod_set, message, missing))
    for c, check in enumerate(map(mapping, items(status.get("admissionChecks")))):
        for u, update in enumerate(map(mapping, items(check.get("podSetUpdates")))):
            path = f"status.admissionChecks[{c}].podSetUpdates[{u}].tolerations"
            out.extend(tolerations(path, items(update.get("tolerations"))))
    return out


#: What v1beta2's rules say of a field an update keeps while quota is reserved (or, for
#: ``maximumExecutionTimeSeconds``, while admitted: Kueue's message says "quota reserved" too).
_KEPT_WHILE_RESERVED = "{} is immutable while workload quota reserved"
#: v1beta2's rules on a priority class reference's group and kind: ``(self.group == g) ? self.kind
#: == k : true``.
_REF_KINDS = (("scheduling.k8s.io", "PriorityClass"), ("kueue.x-k8s.io", "WorkloadPriorityClass"))


def _priority_class_ref_kept(obj: Obj, old: Obj) -> list[FieldError]:
    """v1beta2's rules on ``spec.priorityClassRef`` while the old object holds quota: set or unset
    as before; its group and kind as before; its name as before for a pod PriorityClass."""
    new_ref, old_ref = (
        mapping(obj.get("spec")).get("priorityClassRef"),
        mapping(old.get("spec")).get("priorityClassRef"),
    )
    if (new_ref is None) != (old_ref is None):
        return [failed_rule(ROOT, obj, _KEPT_WHILE_RESERVED.format("priorityClassRef"))]
    new, was = mapping(new_ref), mapping(old_ref)
    if new_ref is None:
        return []
    out = [
        failed_rule(ROOT, obj, _KEPT_WHILE_RESERVED.format(f"priorityClassRef.{field}"))
        for field in ("group", "kind")
        if new.get(field) != was.get(field)
    ]
    if (new.get("group"), new.get("kind")) == _REF_KINDS[0] and new.get("name") != was.get("name"):
        message = "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved"
        out.append(failed_rule(ROOT, obj, message))
    return out


def _workload_v1beta2_transitions(obj: Obj, old: Obj) -> list[FieldError]:
    """v1beta2's rules of an update, in its CRD's order."""
    out = []
    new_spec, old_spec = mapping(obj.get("spec")), mapping(old.get("spec"))
    if _condition_true(old, "QuotaReserved"):
        out.extend(_priority_class_ref_kept(obj, old))
        field = "queueName"
        kept = field not in old_spec or field not in new_spec or old_spec[field] == new_spec[field]
        if _condition_true(obj, "QuotaReserved") and not kept:
            out.append(failed_rule(ROOT, obj, _KEPT_WHILE_RESERVED.format(field)))
    if _condition_true(old, "Admitted") and _condition_true(obj, "Admitted"):
        field = "maximumExecutionTimeSeconds"
        if old_spec.get(field, 0) != new_spec.get(field, 0):
            out.append(failed_rule(ROOT, obj, _KEPT_WHILE_RESERVED.format(field)))
    return out


def _cluster_name_rules(obj: Obj, old: Obj | None) -> list[FieldError]:
    """v1beta2's rules of ``status``: a cluster name kept once set (when the old object has a
    status: a transition rule is checked where both objects have the field), and no nominated
    clusters beside it."""
    if "status" not in obj:
        return []
    status, out = mapping(obj.get("status")), []
    if old is not None and "status" in old:
        was = mapping(old.get("status"))
        if "clusterName" in was and "clusterName" in status and was["clusterName"] != status["clusterName"]:
            out.append(failed_rule("status", status, "clusterName is immutable once set"))
    if "clusterName" in status and items(status.get("nominatedClusterNames")):
        out.append(
            failed_rule("status", status, "clusterName and nominatedClusterNames are mutually exclusive")
        )
    return out


_EXACTLY_ONE = "exactly one of the fields in [universal individual] must be set"


def _exactly_one(path: str, value: Any) -> list[FieldError]:
    """``[has(self.universal),has(self.individual)].filter(x,x==true).size() == 1``."""
    fields = mapping(value)
    if sum(fields.get(field) is not None for field in ("universal", "individual")) != 1:
        return [failed_rule(path, fields, _EXACTLY_ONE)]
    return []


def _slice_rules(path: str, slice_: Obj) -> list[FieldError]:
    """A topology assignment slice's rules, then its pod counts' and each level's values'."""
    out = []
    count, pods = slice_.get("domainCount"), mapping(slice_.get("podCounts"))
    per_level = [mapping(values) for values in items(slice_.get("valuesPerLevel"))]
    if pods.get("individual") is not None and len(items(pods["individual"])) != count:
        out.append(failed_rule(path, slice_, "podCounts.individual must have length equal to domainCount"))
    if any(
        v.get("individual") is not None and len(items(mapping(v["individual"]).get("roots"))) != count
        for v in per_level
    ):
        message = "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this TopologyAssignmentSlice"
        out.append(failed_rule(path, slice_, message))
    if "podCounts" in slice_:
        out.extend(_exactly_one(f"{path}.podCounts", pods))
    for j, values in enumerate(per_level):
        out.extend(_exactly_one(f"{path}.valuesPerLevel[{j}]", values))
    return out


def topology_assignments(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """The CEL rules of each pod set's v1beta2 ``topologyAssignment`` (``levels`` and
    ``slices``), each at its node; then, all together, at most :data:`MAX_DOMAIN_BYTES` as
    v1beta1's domains (the form the hub stores: a v1beta1 write carries at most that much in its
    1.5 MiB etcd request, and so a v1beta2 write may stand for no more), counted from the slices
    (:func:`~controlplane.apis.kueue_topology_assignment.v1beta1_bytes`), refused at the
    ``slices`` of the assignment that crosses the bound. On an update, an assignment kept as
    stored is not counted (kube's ratcheting of an unchanged value): a Workload stored through
    v1beta1 with more than the bound can still be written at v1beta2, and the bound holds for the
    assignments the write changes."""
    out = []
    topologies = _topologies(obj)
    sizes = [v1beta1_bytes(topology) or 0 for _, _, topology in topologies]
    # Kept assignments are looked for (compared with the stored ones) only when all are over.
    ratchet = old is not None and sum(sizes) > MAX_DOMAIN_BYTES
    total = 0
    for (path, name, topology), size in zip(topologies, sizes, strict=True):
        slices = [mapping(slice_) for slice_ in items(topology.get("slices"))]
        levels = len(items(topology.get("levels")))
        if any(len(items(slice_.get("valuesPerLevel"))) != levels for slice_ in slices):
            message = (
                "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment"
            )
            out.append(failed_rule(path, topology, message))
        for j, slice_ in enumerate(slices):
            out.extend(_slice_rules(f"{path}.slices[{j}]", slice_))
        if total > MAX_DOMAIN_BYTES or (ratchet and _as_stored(name, topology, old)):
            continue
        if (total := total + size) > MAX_DOMAIN_BYTES:
            message = (
                f"Invalid value: {total}: as v1beta1's domains (the form the hub stores) the Workload's "
                f"topology assignments would take about {total} bytes, more than the {MAX_DOMAIN_BYTES} "
                "bytes (1 MiB) a Workload may hold; assign the pods to fewer domains"
            )
            out.append(FieldError(CauseType.FIELD_VALUE_INVALID, f"{path}.slices", message))
    return out


def workload_v1beta2(obj: Obj, old: Obj | None) -> list[FieldError]:
    """A Workload's rules at v1beta2, on its v1beta2 form (so at v1beta2's field paths): v1beta1's
    on pod set assignments, ``minCount`` and a check's tolerations; ``spec.priorityClassRef`` kept
    while quota is reserved, its kind the one of its group, and a priority with it;
    ``queueName`` and ``maximumExecutionTimeSeconds`` kept as at v1beta1 (in v1beta2's words); a
    ``status.clusterName`` kept once set and not beside ``nominatedClusterNames``; its topology
    assignments' rules."""
    out = _object_and_priority(obj, old, _workload_v1beta2_transitions, "priorityClassRef")
    ref = mapping(obj.get("spec")).get("priorityClassRef")
    if isinstance(ref, dict):
        for group, kind in _REF_KINDS:
            if ref.get("group") == group and ref.get("kind") != kind:
                message = f"only the {kind} kind is allowed for the {group} group"
                out.append(failed_rule("spec.priorityClassRef", ref, message))
    return [*out, *_pod_sets_and_checks(obj), *_cluster_name_rules(obj, old), *topology_assignments(obj, old)]
