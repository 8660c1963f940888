"""Karmada's FederatedResourceQuota (``policy.karmada.io/v1alpha1``): a namespace's quota across
the fleet, ``spec.overall``, and the part of it each listed cluster enforces itself,
``spec.staticAssignments[].hard``.

Field-compatible with Karmada's ``pkg/apis/policy/v1alpha1`` type, so Karmada's own YAML applies
unchanged. In: a FederatedResourceQuota as a dict. Out: its model (:class:`FederatedResourceQuota`),
Karmada's validating webhook (:func:`quota_denial`, with its messages), the quantities as kube
stores them (:func:`canonical_quantities`), the member ResourceQuota each listed cluster gets
(:func:`member_quotas`) and the status Karmada's status controller computes from what the members
report (:func:`quota_status`), and, for Karmada's ``FederatedQuotaEnforcement``, what bindings take
of a namespace's quota and the refusal of one that would take it past ``spec.overall``
(:func:`binding_usage`, :func:`quota_refusal`). Pure: the sync and status controller is
:mod:`controlplane.controllers.federatedquotas`, the check runs in the scheduler
(:mod:`controlplane.scheduler.controller.quotas`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from controlplane.apis.cluster_v1alpha1 import karmada_cluster_name_errors
from controlplane.apis.kube import field, quota
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.validate_admin import quota_list_errors
from controlplane.apis.meta import ObjectMeta, SpecModel, WireModel
from controlplane.apis.quantity import (
    CRD_PATTERN,
    KubeQuantity,
    QuantityError,
    canonical_quantity,
    parse_kube_quantity,
)

API_VERSION: Final = "policy.karmada.io/v1alpha1"
KIND: Final = "FederatedResourceQuota"
#: The validating webhook Karmada registers for the kind (its name in kube's denial message).
WEBHOOK: Final = "federatedresourcequota.karmada.io"
_CRD_QUANTITY: Final = re.compile(CRD_PATTERN)
#: Karmada's ``LabelValueMaxLength``: the quota's name labels its Works.
NAME_MAX_LENGTH: Final = 63
#: Karmada's ``clusterNameMaxLength``.


def _parses(value: str | int) -> str | int:
    """A quantity of the CRD: a string must match its pattern (kube's schema error, worded as a
    CRD's by the hub), then parse as kube parses it (resource.ParseQuantity's error, once)."""
    if isinstance(value, str) and not _CRD_QUANTITY.match(value):
        raise PydanticCustomError("string_pattern_mismatch", "", {"pattern": CRD_PATTERN})
    try:
        parse_kube_quantity(value)
    except (QuantityError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    return value


Quantity = Annotated[str | int, AfterValidator(_parses)]
"""A kube quantity as the CRD's schema takes it (an integer or a string like 500m, 1Gi); its sign
and whether it suits its resource are the webhook's to check."""
ResourceList = dict[str, Quantity]


class StaticClusterAssignment(SpecModel):
    """The hard limits of one cluster."""

    cluster_name: str
    """ClusterName is the name of the cluster the limits enforce to."""
    hard: ResourceList
    """Hard is the set of desired hard limits for each named resource."""


class FederatedResourceQuotaSpec(SpecModel):
    overall: ResourceList
    """Overall is the set of desired hard limits for each named resource."""
    static_assignments: list[StaticClusterAssignment] | None = None
    """StaticAssignments represents the subset of desired hard limits for each cluster. A listed
    cluster gets a ResourceQuota with these limits in the namespace; clusters not listed get none."""


class ClusterQuotaStatus(WireModel):
    cluster_name: str
    """ClusterName is the name of the cluster the limits enforce to."""
    hard: ResourceList | None = None
    """Hard is the set of enforced hard limits for each named resource."""
    used: ResourceList | None = None
    """Used is the current observed total usage of the resource in the namespace."""


class FederatedResourceQuotaStatus(WireModel):
    overall: ResourceList | None = None
    """Overall is the set of enforced hard limits for each named resource."""
    overall_used: ResourceList | None = None
    """OverallUsed is the current observed total usage of the resource in the namespace."""
    aggregated_status: list[ClusterQuotaStatus] | None = None
    """AggregatedStatus is the observed quota usage of each cluster."""


class FederatedResourceQuota(SpecModel):
    """FederatedResourceQuota sets aggregate quota restrictions enforced per namespace across all clusters."""

    api_version: Literal["policy.karmada.io/v1alpha1"] = API_VERSION
    kind: Literal["FederatedResourceQuota"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: FederatedResourceQuotaSpec
    """Spec defines the desired quota."""
    status: FederatedResourceQuotaStatus | None = None
    """Status defines the actual enforced quota and its current usage."""


# --- Karmada's validating webhook ----------------------------------------------------------


def _list_errors(resources: Any, path: str) -> list[FieldError]:
    """``validateResourceList``: quota resource names and values, as kube's ResourceQuota."""
    return quota_list_errors(field.mapping(resources), path)


def _summed(lists: Iterable[Any]) -> quota.Usage:
    """``quota.Add`` over ``lists`` (unreadable quantities left out)."""
    total: quota.Usage = {}
    for resources in lists:
        total = quota.add(total, quota.read_list(resources))
    return total


def validation_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Karmada's ``validateFederatedResourceQuota``: the name (a label value), ``spec.overall`` and
    each assignment's cluster name and limits, each cluster listed once, every assigned resource
    named in ``overall`` and the assignments of each resource together within it; the status' lists."""
    errors: list[FieldError] = []
    name = str(field.mapping(obj.get("metadata")).get("name") or "")
    if len(name.encode()) > NAME_MAX_LENGTH:
        errors.append(field.invalid("metadata.name", name, f"must be no more than {NAME_MAX_LENGTH} characters"))
    spec = field.mapping(obj.get("spec"))
    overall = field.mapping(spec.get("overall"))
    errors += _list_errors(overall, "spec.overall")
    assignments = [field.mapping(a) for a in field.items(spec.get("staticAssignments"))]
    seen: set[str] = set()
    for index, assignment in enumerate(assignments):
        path = f"spec.staticAssignments[{index}]"
        cluster = assignment.get("clusterName")
        errors += karmada_cluster_name_errors(cluster, f"{path}.clusterName")
        if isinstance(cluster, str) and cluster:
            if cluster in seen:
                errors.append(field.duplicate(f"{path}.clusterName", cluster))
            seen.add(cluster)
        errors += _list_errors(assignment.get("hard"), f"{path}.hard")
    assigned = _summed(a.get("hard") for a in assignments)
    for resource, limit in quota.read_list(overall).items():
        if limit.value < (assigned[resource].value if resource in assigned else 0):
            errors.append(field.invalid(f"spec.overall[{resource}]", str(limit), "overall is less than assignments"))
    for index, assignment in enumerate(assignments):
        for resource in field.mapping(assignment.get("hard")):
            if resource not in overall:
                errors.append(field.invalid(
                    f"spec.staticAssignments[{index}].hard[{resource}]", resource,
                    "assignment resourceName is not exist in overall",
                ))
    status = field.mapping(obj.get("status"))
    errors += _list_errors(status.get("overall"), "status.overall")
    errors += _list_errors(status.get("overallUsed"), "status.overallUsed")
    for index, item in enumerate(field.items(status.get("aggregatedStatus"))):
        item = field.mapping(item)
        path = f"status.aggregatedStatus[{index}]"
        errors += karmada_cluster_name_errors(item.get("clusterName"), f"{path}.clusterName")
        errors += _list_errors(item.get("hard"), f"{path}.hard")
        errors += _list_errors(item.get("used"), f"{path}.used")
    return errors


def quota_denial(obj: dict[str, Any]) -> tuple[str, str] | None:
    """Karmada's webhook refusing ``obj`` (its name, its aggregated message), or None. An object
    its schema refuses is left to the schema's 422: in kube the webhook never sees it. Unknown
    fields are not the schema's: kube's decoding drops them (``fieldValidation`` Warn or Ignore)
    or refuses them (Strict) before the webhook, which then judges what is left."""
    try:
        FederatedResourceQuota.model_validate(obj)
    except ValidationError as exc:
        if any(error["type"] != "extra_forbidden" for error in exc.errors()):
            return None
    errors = validation_errors(obj)
    if not errors:
        return None
    parts = [f"{e.field}: {e.message}" for e in errors]
    return WEBHOOK, parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"


# --- Stored form ---------------------------------------------------------------------------


def _canonical_list(resources: Any) -> Any:
    if not isinstance(resources, dict):
        return resources
    out: dict[str, Any] = {}
    for name, raw in resources.items():
        try:
            out[name] = canonical_quantity(raw) if not isinstance(raw, bool) else raw
        except (QuantityError, ValueError, TypeError):
            out[name] = raw
    return out


def canonical_quantities(obj: dict[str, Any]) -> None:
    """Every quantity of ``obj`` as kube stores a ``ResourceList`` entry (``cpu: 100`` -> ``"100"``)."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        if "overall" in spec:
            spec["overall"] = _canonical_list(spec["overall"])
        for assignment in spec.get("staticAssignments") or ():
            if isinstance(assignment, dict) and "hard" in assignment:
                assignment["hard"] = _canonical_list(assignment["hard"])
    status = obj.get("status")
    if isinstance(status, dict):
        for key in ("overall", "overallUsed"):
            if key in status:
                status[key] = _canonical_list(status[key])
        for item in status.get("aggregatedStatus") or ():
            if isinstance(item, dict):
                for key in ("hard", "used"):
                    if key in item:
                        item[key] = _canonical_list(item[key])


# --- Sync and status (Karmada's sync and status controllers) ------------------------------


def member_quotas(frq: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """cluster name -> the ``v1`` ResourceQuota that cluster enforces: named as the
    FederatedResourceQuota, in its namespace, with the cluster's ``hard``. Only the clusters
    ``spec.staticAssignments`` lists get one (Karmada 1.14)."""
    meta = field.mapping(frq.get("metadata"))
    out: dict[str, dict[str, Any]] = {}
    for assignment in field.items(field.mapping(frq.get("spec")).get("staticAssignments")):
        assignment = field.mapping(assignment)
        cluster = assignment.get("clusterName")
        if not isinstance(cluster, str) or not cluster or cluster in out:
            continue
        out[cluster] = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "spec": {"hard": dict(field.mapping(assignment.get("hard")))},
        }
    return out


def quota_status(
    frq: Mapping[str, Any], reported: Mapping[str, Mapping[str, Any]], *, bindings_use: quota.Usage | None = None
) -> dict[str, Any]:
    """The status Karmada's status controller writes: ``overall`` (= ``spec.overall``),
    ``aggregatedStatus`` (each cluster's ResourceQuota status as its member reports it, by
    cluster name) and ``overallUsed`` (their ``used`` summed). ``reported``: cluster -> the
    member ResourceQuota's status, for the clusters whose Work is applied. With
    ``FederatedQuotaEnforcement``, ``overallUsed`` is what the namespace's bindings take
    (``bindings_use``, :func:`namespace_usage`), as Karmada's enforcement controller writes it."""
    aggregated = []
    for cluster in sorted(reported):
        status = field.mapping(reported[cluster])
        item: dict[str, Any] = {"clusterName": cluster}
        for key in ("hard", "used"):
            if field.mapping(status.get(key)):
                item[key] = _canonical_list(dict(field.mapping(status.get(key))))
        aggregated.append(item)
    out: dict[str, Any] = {}
    overall = field.mapping(field.mapping(frq.get("spec")).get("overall"))
    if overall:
        out["overall"] = dict(overall)
    used = quota.written_list(
        _summed(item.get("used") for item in aggregated) if bindings_use is None else bindings_use
    )
    if used:
        out["overallUsed"] = used
    if aggregated:
        out["aggregatedStatus"] = aggregated
    return out


# --- FederatedQuotaEnforcement (Karmada's alpha gate) ---------------------------------------


def binding_usage(spec: Mapping[str, Any], clusters: Mapping[str, int] | None = None) -> quota.Usage:
    """What a ResourceBinding takes of a namespace's quota, as Karmada's ResourceBinding webhook
    counts it: its per-replica ``replicaRequirements.resourceRequest`` times the replicas its
    ``spec.clusters`` (or ``clusters``, a decision not written yet) place; and, beyond Karmada (whose
    requirements have no such part), its ``sharedResourceRequest`` (the devices of the DRA claims its
    pods share, one copy of the claim per cluster) once per cluster holding a replica."""
    if clusters is None:
        clusters = {
            str(target.get("name")): int(target.get("replicas") or 0)
            for target in field.items(spec.get("clusters")) if isinstance(target, Mapping)
        }
    requirements = field.mapping(spec.get("replicaRequirements"))
    used: quota.Usage = {}
    for key, times in (("resourceRequest", sum(clusters.values())), ("sharedResourceRequest", sum(1 for n in clusters.values() if n > 0))):
        request = quota.read_list(field.mapping(requirements.get(key))) if times > 0 else {}
        used = quota.add(used, {name: KubeQuantity(amount.value * times, amount.format)
                                for name, amount in request.items() if amount.value > 0})
    return used


def usage_growth(new: Mapping[str, KubeQuantity], old: Mapping[str, KubeQuantity]) -> quota.Usage:
    """What ``new`` takes beyond ``old``, per resource (only what grows)."""
    out: quota.Usage = {}
    for name, amount in new.items():
        before = old[name].value if name in old else 0
        if amount.value > before:
            out[name] = KubeQuantity(amount.value - before, amount.format)
    return out


def namespace_usage(specs: Iterable[Mapping[str, Any]]) -> quota.Usage:
    """The bindings' usage summed (Karmada's enforcement controller's ``overallUsed``)."""
    total: quota.Usage = {}
    for spec in specs:
        total = quota.add(total, binding_usage(spec))
    return total


def quota_refusal(
    frq: Mapping[str, Any], used: Mapping[str, KubeQuantity], added: Mapping[str, KubeQuantity]
) -> str | None:
    """Karmada's refusal of a binding that adds ``added`` to a namespace using ``used``, when that
    takes a resource ``spec.overall`` names past it; None when it fits. Resources ``overall`` does
    not name, and those the binding does not grow, are not checked."""
    meta = field.mapping(frq.get("metadata"))
    overall = quota.read_list(field.mapping(field.mapping(frq.get("spec")).get("overall")))
    for name, limit in overall.items():
        grows = added.get(name)
        if grows is None or grows.value <= 0:
            continue
        total = quota.add({name: used[name]} if name in used else {}, {name: grows})[name]
        if total.value > limit.value:
            return (
                f"FederatedResourceQuota({meta.get('namespace')}/{meta.get('name')}) exceeded for resource {name}: "
                f"requested sum {total}, limit {limit}."
            )
    return None
