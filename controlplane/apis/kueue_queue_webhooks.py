"""Kueue's ClusterQueue, Cohort and ResourceFlavor webhooks (``pkg/webhooks/``
``clusterqueue_webhook.go``, ``cohort_webhook.go``, ``resourceflavor_webhook.go``), which kube
calls once the CRD's schema and rules (:mod:`.kueue_rules`) took a write; each reads the object
in the version it was written in. Pure.

* Resource groups (``validateResourceGroups``), group by group: each covered resource a qualified
  name, and none twice across the groups (``spec.resourceGroups[1].coveredResources[0]: Duplicate
  value: "cpu"``); each flavor's quotas named as the covered resources, in order (``…resources[0].name:
  Invalid value: "memory": must match the name in coveredResources``), no quota nor limit below 0
  (``…nominalQuota: Invalid value: "-1": must be greater than or equal to 0``), limits only with a
  parent (``must be nil when cohort is empty``; a Cohort's ``… when parent is empty``; a
  ClusterQueue's borrowing limit is its CRD's rule, :mod:`.kueue_rules`) and, for a ClusterQueue, a
  ``lendingLimit`` at most the ``nominalQuota`` (``must be less than or equal to the
  nominalQuota``); and no flavor twice
  across the groups (``spec.resourceGroups[1].flavors[0].name: Duplicate value: "a"``).
* A ResourceFlavor's ``nodeLabels`` as kube's labels, and its ``nodeTaints`` as a node's.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from controlplane.apis.kube.field import CauseType, FieldError, duplicate, invalid, items, mapping
from controlplane.apis.kube.names import label_value_errors, qualified_name_errors
from controlplane.apis.kube.validate_pod import labels_errors
from controlplane.apis.quantity import canonical_quantity, parse_quantity
from controlplane.gojson import go_quote

Obj = dict[str, Any]
#: What Kueue's webhook says of a limit of a queue without a cohort, and of a Cohort without a parent.
LIMIT_NEEDS_COHORT = "must be nil when cohort is empty"
LIMIT_NEEDS_PARENT = "must be nil when parent is empty"
#: What Kueue's webhook (apimachinery's ``IsNegativeErrorMsg``) says of a quota below 0.
NEGATIVE = "must be greater than or equal to 0"
#: What Kueue's webhook says of a lending limit above the nominal quota.
LENDING_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"


#: What Kueue's webhook says of a fair-sharing weight so small it would collapse to 0.
WEIGHT_COLLAPSES = "When not 0, weight must be > 10e-9"
_NANO = Decimal("1e-9")


def cluster_queue(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = mapping(obj.get("spec"))
    has_parent = bool(spec.get("cohort") or spec.get("cohortName"))  # v1beta1's name, v1beta2's
    return resource_groups(spec, has_parent=has_parent, cluster_queue=True) + _fair_sharing(spec)


def cohort(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = mapping(obj.get("spec"))
    has_parent = bool(spec.get("parentName") or spec.get("parent"))  # v1beta1's and v1beta2's, v1alpha1's
    return resource_groups(spec, has_parent=has_parent, cluster_queue=False) + _fair_sharing(spec)


def _fair_sharing(spec: Obj) -> list[FieldError]:
    """Kueue's ``validateFairSharing``: a weight not below 0, and not so small it collapses to 0,
    refused at ``spec.fairSharing``, the weight shown as Kueue's ``Quantity.String()`` prints it."""
    weight = mapping(spec.get("fairSharing")).get("weight")
    if weight is None:
        return []
    value = parse_quantity(weight)  # the CRD's schema refused one that does not parse
    if value < 0:
        return [invalid("spec.fairSharing", canonical_quantity(weight), NEGATIVE)]
    if 0 < value <= _NANO:
        return [invalid("spec.fairSharing", canonical_quantity(weight), WEIGHT_COLLAPSES)]
    return []


def resource_groups(spec: Obj, *, has_parent: bool, cluster_queue: bool) -> list[FieldError]:
    """``validateResourceGroups`` of a ClusterQueue (``cluster_queue``) or a Cohort (whose other
    limit rules are its model's); ``has_parent``: a cohort (a parent) is named."""
    out: list[FieldError] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g, group in enumerate(map(mapping, items(spec.get("resourceGroups")))):
        path = f"spec.resourceGroups[{g}]"
        covered = [str(name) for name in items(group.get("coveredResources"))]
        for r, name in enumerate(covered):
            at = f"{path}.coveredResources[{r}]"
            out += [invalid(at, name, message) for message in qualified_name_errors(name)]
            if name in seen_resources:
                out.append(duplicate(at, name))
            seen_resources.add(name)
        for f, flavor in enumerate(map(mapping, items(group.get("flavors")))):
            at = f"{path}.flavors[{f}]"
            out += _flavor_quotas(flavor, covered, at, has_parent=has_parent, cluster_queue=cluster_queue)
            name = str(flavor.get("name") or "")
            if name in seen_flavors:
                out.append(duplicate(f"{at}.name", name))
            seen_flavors.add(name)
    return out


def _flavor_quotas(
    flavor: Obj, covered: list[str], path: str, *, has_parent: bool, cluster_queue: bool
) -> list[FieldError]:
    out = []
    for r, quota in enumerate(map(mapping, items(flavor.get("resources"))[: len(covered)])):
        at = f"{path}.resources[{r}]"
        if (name := str(quota.get("name") or "")) != covered[r]:
            out.append(invalid(f"{at}.name", name, "must match the name in coveredResources"))
        # validateFlavorQuotas' order: the quota; the borrowing limit's parent, then its sign; the
        # lending limit's sign, its parent, then its bound.
        needs_parent = [] if has_parent else [LIMIT_NEEDS_COHORT if cluster_queue else LIMIT_NEEDS_PARENT]
        out += _quota_errors(quota, "nominalQuota", at, [NEGATIVE])
        out += _quota_errors(quota, "borrowingLimit", at, [*needs_parent, NEGATIVE])
        limit = quota.get("lendingLimit")
        above = (
            limit is not None
            and cluster_queue
            and parse_quantity(limit) > parse_quantity(quota.get("nominalQuota", 0))
        )
        out += _quota_errors(
            quota, "lendingLimit", at, [NEGATIVE, *needs_parent, *([LENDING_ABOVE_NOMINAL] if above else [])]
        )
    return out


def _quota_errors(quota: Obj, name: str, path: str, checks: list[str]) -> list[FieldError]:
    """The ``checks`` that ``quota[name]`` fails (a negative one only when below 0), shown as
    Kueue's ``Quantity.String()`` prints it."""
    value = quota.get(name)
    if value is None:
        return []
    shown = canonical_quantity(value)
    return [
        invalid(f"{path}.{name}", shown, check)
        for check in checks
        if check != NEGATIVE or parse_quantity(value) < 0
    ]


def resource_flavor(obj: Obj, old: Obj | None) -> list[FieldError]:
    """Kueue's ResourceFlavor webhook: ``nodeLabels`` as kube's ``ValidateLabels`` (keys sorted,
    where Go's map order varies) and each node taint as kube's node validation checks one: its key
    a label name, its value a label value, and no two taints with one key and effect."""
    spec = mapping(obj.get("spec"))
    out = labels_errors(dict(sorted(mapping(spec.get("nodeLabels")).items())), "spec.nodeLabels")
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(map(mapping, items(spec.get("nodeTaints")))):
        path = f"spec.nodeTaints[{index}]"
        key, value, effect = (str(taint.get(name) or "") for name in ("key", "value", "effect"))
        out += [invalid(f"{path}.key", key, message) for message in qualified_name_errors(key)]
        if problems := label_value_errors(value):
            out.append(invalid(f"{path}.value", value, ";".join(problems)))
        if (key, effect) in seen:
            # Go's %#v of the taint (a set timeAdded is a pointer Go prints as an address).
            shown = f"v1.Taint{{Key:{go_quote(key)}, Value:{go_quote(value)}, Effect:{go_quote(effect)}, TimeAdded:"
            message = (
                f"Duplicate value: {shown}(*v1.Time)(nil)}}: taints must be unique by key and effect pair"
            )
            out.append(FieldError(CauseType.FIELD_VALUE_DUPLICATE, path, message))
            continue
        seen.add((key, effect))
    return out
