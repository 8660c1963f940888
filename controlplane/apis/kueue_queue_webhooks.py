"""Kueue's ClusterQueue, Cohort and ResourceFlavor webhooks (``pkg/webhooks/``
``clusterqueue_webhook.go``, ``cohort_webhook.go``, ``resourceflavor_webhook.go``), which kube
calls once the CRD's schema and rules (:mod:`.kueue_rules`) took a write; each reads the object
in the version it was written in. Pure.

* Resource groups (``validateResourceGroups``), group by group: each covered resource a qualified
  name, and none twice across the groups (``spec.resourceGroups[1].coveredResources[0]: Duplicate
  value: "cpu"``); each flavor's quotas named as the covered resources, in order (``…resources[0].name:
  Invalid value: "memory": must match the name in coveredResources``), a ``lendingLimit`` only with
  a cohort (``must be nil when cohort is empty``) and, for a ClusterQueue, at most the
  ``nominalQuota`` (``must be less than or equal to the nominalQuota``); and no flavor twice
  across the groups (``spec.resourceGroups[1].flavors[0].name: Duplicate value: "a"``).
* A ResourceFlavor's ``nodeLabels`` as kube's labels, and its ``nodeTaints`` as a node's.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube.field import CauseType, FieldError, duplicate, invalid, items, mapping
from controlplane.apis.kube.names import label_value_errors, qualified_name_errors
from controlplane.apis.kube.validate_pod import labels_errors
from controlplane.apis.quantity import canonical_quantity, parse_quantity
from controlplane.gojson import go_quote

Obj = dict[str, Any]
#: What Kueue's webhook says of a limit of a queue without a cohort.
LIMIT_NEEDS_COHORT = "must be nil when cohort is empty"
#: What Kueue's webhook says of a lending limit above the nominal quota.
LENDING_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"


def cluster_queue(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = mapping(obj.get("spec"))
    has_parent = bool(spec.get("cohort") or spec.get("cohortName"))  # v1beta1's name, v1beta2's
    return resource_groups(spec, has_parent=has_parent, cluster_queue=True)


def cohort(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = mapping(obj.get("spec"))
    has_parent = bool(spec.get("parentName") or spec.get("parent"))  # v1beta1's and v1beta2's, v1alpha1's
    return resource_groups(spec, has_parent=has_parent, cluster_queue=False)


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
        limit = quota.get("lendingLimit")
        if limit is None:
            continue
        shown = canonical_quantity(limit)  # as Kueue's Quantity.String() prints it
        if not has_parent:
            out.append(invalid(f"{at}.lendingLimit", shown, LIMIT_NEEDS_COHORT))
        if cluster_queue and parse_quantity(limit) > parse_quantity(quota.get("nominalQuota", 0)):
            out.append(invalid(f"{at}.lendingLimit", shown, LENDING_ABOVE_NOMINAL))
    return out


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
