"""Pending GPU demand and placement constraints, extracted from bindings and Works.

Why this module exists: the waste report tells free GPUs that pending work could use from
free GPUs nobody can use, so it needs, per waiting workload, how many replicas wait, what each
requests and where it may run. In: the hub's ``ResourceBinding`` and ``Work`` objects (plain
dicts as stored) and the clusters' :class:`~policies.affinity.ClusterView`. Out:
:class:`~controlplane.reports.fleet.PendingDemand` and
:class:`~controlplane.reports.fleet.WorkloadConstraints` values.

* ``ResourceBinding`` objects (:func:`binding_demand`): replicas the scheduler has not placed
  (``spec.replicas`` minus the sum of ``spec.clusters[].replicas``) are pending demand. A
  binding whose ``Scheduled`` condition has reason ``NeverFits`` (no node of the fleet could
  hold one of its pods, even empty) is pending demand with reason
  :attr:`~controlplane.reports.fleet.PendingReason.NEVER_FITS` and the condition's message: the
  classifier leaves it out of free-needed and free-fragmented, and the report lists it apart.
* ``Work`` objects (:func:`work_demand`): ``status.manifestStatuses[].unschedulable.pods`` are
  pending demand too (pods the member's scheduler could not place; they may run anywhere
  else). A member's unschedulable pods exclude that member. A TrainJob's pods ask what its
  runtime's trainer step asks (``resourcesPerNode`` written in), read with the runtime the
  caller gives (:func:`~controlplane.apis.trainer_runtime.resolved`), as placement reads it.
* DRA claims count in both as placement counts them: a binding's requirements carry them (the
  detector's), a Work's pods are read with the hub's claim templates, claims and DeviceClasses the
  caller gives (:class:`~controlplane.apis.drareading.ClaimReader`). The devices of the claims a
  workload's pods share (``sharedResourceRequest``) come once, with its first waiting replica: a
  demand of one replica asking them beside its own request, then the rest.

Pending demand carries only GPU placement facts: the per-replica requests, the allowed GPU
products (``nodeSelector``/required node affinity on ``nvidia.com/gpu.product``,
:func:`product_constraint`) and the allowed clusters (the placement's cluster affinity and
cluster tolerations, judged by the scheduler's own filters:
:func:`~controlplane.scheduler.core.plugins.filters.admitted_clusters`, so the report and the
scheduler cannot disagree about where a workload may run). No I/O happens here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from controlplane.apis import constants as c
from controlplane.apis.drareading import ClaimReader, ListedClaims
from controlplane.apis.pods import SelectorOperator
from controlplane.apis.quantity import QuantityError
from controlplane.apis.trainer import RuntimeLookup
from controlplane.apis.trainer_runtime import resolved
from controlplane.apis.untyped import as_int, as_list, as_mapping
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.reports.fleet import PendingDemand, PendingReason, WorkloadConstraints
from controlplane.scheduler.core.plugins.filters import admitted_clusters
from policies.affinity import ClusterView
from policies.models import Placement

logger = logging.getLogger(__name__)


def product_constraint(requirements: ReplicaRequirements) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(allowed products or None for any, excluded products) from the nodeSelector and the
    required node affinity on ``nvidia.com/gpu.product``.

    Terms are ORed: a term without an ``In`` on the product allows any product. A ``NotIn``
    excludes its products only when every term has it.
    """
    allowed: frozenset[str] | None = None
    selected = requirements.node_selector_map.get(c.LABEL_GPU_PRODUCT)
    if selected is not None:
        allowed = frozenset({selected})
    excluded: frozenset[str] = frozenset()
    if requirements.node_affinity:
        term_allowed: set[str] = set()
        any_product = False
        term_excluded: list[set[str]] = []
        for term in requirements.node_affinity:
            ins = [
                e
                for e in term.expressions
                if e.key == c.LABEL_GPU_PRODUCT and e.operator == SelectorOperator.IN
            ]
            notins = [
                e
                for e in term.expressions
                if e.key == c.LABEL_GPU_PRODUCT and e.operator == SelectorOperator.NOT_IN
            ]
            if ins:
                values = set(ins[0].values)
                for extra in ins[1:]:
                    values &= set(extra.values)
                term_allowed |= values
            else:
                any_product = True
            term_excluded.append({v for e in notins for v in e.values})
        if not any_product:
            allowed = frozenset(term_allowed) if allowed is None else allowed & term_allowed
        excluded = frozenset(set.intersection(*term_excluded)) if term_excluded else frozenset()
    return allowed, excluded


class AllowedClusters:
    """Where bindings may run, as the scheduler judges it, worked out once per distinct placement.

    The bindings of one policy carry the same placement, so a fleet of 20,000 bindings from a
    handful of policies is judged a handful of times over the clusters, not 20,000 times (at
    100 clusters, that was seconds of one sample pass with the event loop held).
    """

    def __init__(self, views: Sequence[ClusterView]) -> None:
        self._views = views
        self._memo: dict[str, frozenset[str] | None] = {}

    def __call__(self, placement_raw: Any) -> frozenset[str] | None:
        """The clusters ``placement_raw`` admits; None (anywhere) when it does not read. A
        binding without a placement is judged as the scheduler judges it: by the default
        placement, which still keeps it off clusters with taints it does not tolerate."""
        key = json.dumps(placement_raw or {}, sort_keys=True, separators=(",", ":"), default=str)
        if key not in self._memo:
            self._memo[key] = self._judge(placement_raw)
        return self._memo[key]

    def _judge(self, placement_raw: Any) -> frozenset[str] | None:
        try:
            placement = Placement.model_validate(placement_raw or {})
        except ValidationError:
            logger.warning("ignoring a binding placement that does not validate")
            return None
        return admitted_clusters(self._views, placement)


def _workload_name(kind: Any, name: Any) -> str:
    return f"{kind}/{name}"


def binding_demand(
    raw: Mapping[str, Any], allowed: AllowedClusters
) -> tuple[WorkloadConstraints, list[PendingDemand]] | None:
    """The binding's workload constraints and its unplaced replicas as demand; None when its
    requirements do not read. ``allowed`` judges where its placement lets it run."""
    spec = as_mapping(raw.get("spec"))
    resource = as_mapping(spec.get("resource"))
    namespace = str(resource.get("namespace") or as_mapping(raw.get("metadata")).get("namespace") or "")
    workload = _workload_name(resource.get("kind"), resource.get("name"))
    try:
        main = ReplicaRequirements.from_spec(as_mapping(spec.get("replicaRequirements")))
        components = [
            (
                max(as_int(as_mapping(comp).get("replicas")), 0),
                ReplicaRequirements.from_spec(as_mapping(as_mapping(comp).get("replicaRequirements"))),
            )
            for comp in as_list(spec.get("components"))
        ]
    except (QuantityError, ValueError, KeyError) as exc:
        logger.warning(
            "binding %s/%s: unreadable requirements, not counted as demand: %s", namespace, workload, exc
        )
        return None
    clusters = allowed(spec.get("placement"))
    products, excluded_products = product_constraint(main)
    constraints = WorkloadConstraints(namespace, workload, products, clusters, excluded_products)
    placed = sum(max(as_int(as_mapping(t).get("replicas")), 0) for t in as_list(spec.get("clusters")))
    unplaced = max(as_int(spec.get("replicas")), 0) - placed
    if unplaced <= 0:
        return constraints, []
    # A multi-role job that has nothing placed waits with all its roles; partial placement
    # only happens to divisible (single-template) workloads, so the rest use the main template.
    # The devices of the DRA claims its pods share come once, with its first waiting replica.
    groups = _sharing(components if components and placed == 0 else [(unplaced, main)], main.shared)
    reason, message = PendingReason.UNPLACED, ""
    for cond in as_list(as_mapping(raw.get("status")).get("conditions")):
        cond = as_mapping(cond)
        if cond.get("type") == "Scheduled" and cond.get("reason") == PendingReason.NEVER_FITS:
            reason, message = PendingReason.NEVER_FITS, str(cond.get("message") or "")
    demands = [
        _demand(namespace, workload, replicas, requirements, requests, clusters=clusters, reason=reason, message=message)
        for replicas, requirements, requests in groups
    ]
    return constraints, demands


def _sharing(
    groups: Sequence[tuple[int, ReplicaRequirements]], shared: Sequence[tuple[str, int]]
) -> list[tuple[int, ReplicaRequirements, dict[str, int]]]:
    """``groups`` (replicas, requirements) with each one's per-replica requests, the first replica
    of the first group apart when there are ``shared`` devices: it asks them too (one copy of the
    claims in the cluster it lands in, as placement counts it)."""
    out = [(replicas, requirements, requirements.resource_map) for replicas, requirements in groups]
    at = next((index for index, group in enumerate(out) if group[0] > 0), None)
    if not shared or at is None:
        return out
    replicas, requirements, requests = out[at]
    first = dict(requests)
    for name, amount in shared:
        first[name] = first.get(name, 0) + amount
    rest = [(replicas - 1, requirements, requests)] if replicas > 1 else []
    return [*out[:at], (1, requirements, first), *rest, *out[at + 1:]]


def _demand(
    namespace: str,
    workload: str,
    replicas: int,
    requirements: ReplicaRequirements,
    requests: Mapping[str, int],
    *,
    clusters: frozenset[str] | None,
    reason: PendingReason,
    message: str = "",
    excluded_clusters: frozenset[str] = frozenset(),
) -> PendingDemand:
    """``replicas`` pending pods of ``workload``, each asking ``requests`` where ``requirements`` let it."""
    allowed, excluded = product_constraint(requirements)
    return PendingDemand(
        namespace=namespace,
        workload=workload,
        replicas=replicas,
        requests=MappingProxyType(dict(requests)),
        products=allowed,
        clusters=clusters,
        reason=reason,
        excluded_products=excluded,
        excluded_clusters=excluded_clusters,
        message=message,
    )


def _manifest_for(
    identifier: Mapping[str, Any], manifests: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    def matches(manifest: Mapping[str, Any]) -> bool:
        metadata = as_mapping(manifest.get("metadata"))
        return manifest.get("kind") == identifier.get("kind") and metadata.get("name") == identifier.get(
            "name"
        )

    ordinal = as_int(identifier.get("ordinal"), -1)
    if 0 <= ordinal < len(manifests) and matches(manifests[ordinal]):
        return manifests[ordinal]
    return next((m for m in manifests if matches(m)), None)


def _no_runtimes(kind: str, namespace: str | None, name: str) -> Mapping[str, Any] | None:
    return None


def work_demand(
    raw: Mapping[str, Any], constraints: Mapping[tuple[str, str], WorkloadConstraints],
    runtimes: RuntimeLookup = _no_runtimes, claims: ClaimReader | None = None,
) -> list[PendingDemand]:
    """The pods of the Work's manifests that the member could not schedule, as demand; a
    TrainJob's read with its runtime as ``runtimes`` finds it, DRA claims with ``claims`` (the
    hub's templates, claims and DeviceClasses: the GPUs its pods ask through them, a claim they
    share once with the first pod, as placement reads them)."""
    claims = claims if claims is not None else ListedClaims()
    metadata = as_mapping(raw.get("metadata"))
    member = str(metadata.get("namespace") or "").removeprefix(c.EXECUTION_NAMESPACE_PREFIX)
    manifests = [
        as_mapping(m)
        for m in as_list(as_mapping(as_mapping(raw.get("spec")).get("workload")).get("manifests"))
    ]
    demands: list[PendingDemand] = []
    for status in as_list(as_mapping(raw.get("status")).get("manifestStatuses")):
        status = as_mapping(status)
        pods = as_int(as_mapping(status.get("unschedulable")).get("pods"))
        if pods <= 0:
            continue
        identifier = as_mapping(status.get("identifier"))
        manifest = _manifest_for(identifier, manifests)
        if manifest is None:
            continue
        interpreter = interpreter_for(str(manifest.get("apiVersion") or ""), str(manifest.get("kind") or ""))
        if interpreter is None:
            continue
        try:
            requirements = interpreter.replica_requirements(resolved(claims.resolved(dict(manifest)), runtimes))
            shared = tuple(sorted(claims.shared(dict(manifest)).items()))
        except (QuantityError, ValueError, KeyError, TypeError) as exc:
            logger.warning(
                "work %s: unreadable requirements of %s: %s",
                metadata.get("name"),
                identifier.get("name"),
                exc,
            )
            continue
        namespace = str(
            identifier.get("namespace") or as_mapping(manifest.get("metadata")).get("namespace") or ""
        )
        workload = _workload_name(identifier.get("kind"), identifier.get("name"))
        known = constraints.get((namespace, workload))
        demands.extend(
            _demand(
                namespace,
                workload,
                replicas,
                requirements,
                requests,
                clusters=known.clusters if known else None,
                reason=PendingReason.MEMBER_UNSCHEDULABLE,
                excluded_clusters=frozenset({member}),
            )
            for replicas, requirements, requests in _sharing([(pods, requirements)], shared)
        )
    return demands
