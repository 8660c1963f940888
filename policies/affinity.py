"""Which clusters a placement may use: affinity, taints, cordon and spread constraints.

Pure functions over :class:`ClusterView`, a small frozen snapshot of a Cluster (no I/O). Each
check returns a :class:`Verdict` ``(fits, reason)``; the reason is a sentence for the binding's
explanation ("excluded by clusterAffinity.exclude"). Semantics follow Karmada's
``util.ClusterMatches`` and ``TaintToleration`` filter:

* ``exclude`` wins; then ``labelSelector``, ``fieldSelector`` (provider/region/zone, In/NotIn
  with Kubernetes set semantics: NotIn matches a cluster without the field) and
  ``clusterNames`` (an allow-list when not empty) must all hold;
* cluster taints with effect NoSchedule or NoExecute must be tolerated (PreferNoSchedule only
  lowers a score and is not checked here); a cordoned (``unschedulable``) cluster takes no new
  replicas;
* spread constraints group clusters by ``cluster|region|zone|provider`` or by a label and pick
  between ``minGroups`` and ``maxGroups`` groups, best groups first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import NamedTuple

from controlplane.apis.cluster_v1alpha1 import Cluster
from controlplane.apis.meta import Taint, Toleration
from controlplane.apis.timestamps import parse_time
from policies.models import CLUSTER_FIELDS, ClusterAffinity, SpreadConstraint


class Verdict(NamedTuple):
    """The outcome of one check: whether the cluster fits, and why not (empty when it fits)."""

    fits: bool
    reason: str = ""


FITS = Verdict(True, "")


@dataclass(frozen=True)
class ClusterView:
    """What placement needs to know about one cluster, frozen.

    ``tier`` is the effective overflow tier (``spec.tier`` or its default); ``pricing`` maps GPU
    product to dollars per GPU-hour. Equality compares every field; the hash is the name.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    provider: str | None = None
    region: str | None = None
    zone: str | None = None
    tier: int = 0
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    pricing: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "pricing", MappingProxyType(dict(self.pricing)))

    def __hash__(self) -> int:
        return hash(self.name)

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> ClusterView:
        spec = cluster.spec
        return cls(
            name=cluster.metadata.name or "",
            labels=dict(cluster.metadata.labels or {}),
            provider=spec.provider,
            region=spec.region,
            zone=spec.zone,
            tier=spec.effective_tier,
            taints=tuple(spec.taints or ()),
            unschedulable=bool(spec.unschedulable),
            pricing=dict(spec.pricing or {}),
        )

    def field_value(self, name: str) -> str | None:
        """The value of a placement field: ``cluster`` (the name), ``provider``, ``region``, ``zone``."""
        if name == "cluster":
            return self.name
        value: str | None = getattr(self, name) if name in ("provider", "region", "zone") else None
        return value or None

    def price_per_gpu_hour(self, product: str | None = None) -> float:
        """Price of one GPU-hour of ``product``; without a product (or an unlisted one) the cheapest
        listed price; 0.0 when the cluster lists no prices (owned hardware is a sunk cost)."""
        if product is not None and product in self.pricing:
            return self.pricing[product]
        return min(self.pricing.values(), default=0.0)


# ---------------------------------------------------------------------------------------------
# Affinity
# ---------------------------------------------------------------------------------------------


def _other_operator_holds(operator: str, value: str | None) -> bool:
    """A requirement with neither In nor NotIn, which only a static weight's selector can hold, as
    a label selector reads it over the cluster's fields: Exists, DoesNotExist; Gt and Lt compare
    integers, which no field is."""
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    return False


def cluster_matches_affinity(cluster: ClusterView, affinity: ClusterAffinity | None) -> Verdict:
    """Whether ``cluster`` is allowed by ``affinity`` (``None`` allows every cluster)."""
    if affinity is None:
        return FITS
    if cluster.name in (affinity.exclude or ()):
        return Verdict(False, "excluded by clusterAffinity.exclude")
    if affinity.label_selector is not None and not affinity.label_selector.matches(cluster.labels):
        return Verdict(False, "cluster labels do not match clusterAffinity.labelSelector")
    if affinity.field_selector is not None:
        for requirement in affinity.field_selector.match_expressions or ():
            # Karmada's field selector reads only these fields (``extractClusterFields``): any
            # other key, ``cluster`` among them, has no value.
            value = cluster.field_value(requirement.key) if requirement.key in CLUSTER_FIELDS else None
            values = requirement.values or []
            if requirement.operator == "In" and value not in values:
                return Verdict(
                    False, f"{requirement.key} {value or '(unset)'!r} is not in {values} (clusterAffinity.fieldSelector)"
                )
            if requirement.operator == "NotIn" and value is not None and value in values:
                return Verdict(False, f"{requirement.key} {value!r} is excluded by clusterAffinity.fieldSelector")
            if requirement.operator not in ("In", "NotIn") and not _other_operator_holds(requirement.operator, value):
                return Verdict(
                    False, f"{requirement.key} does not satisfy {requirement.operator} (clusterAffinity.fieldSelector)"
                )
    if affinity.cluster_names and cluster.name not in affinity.cluster_names:
        return Verdict(False, "not listed in clusterAffinity.clusterNames")
    return FITS


def select_clusters(clusters: Iterable[ClusterView], affinity: ClusterAffinity | None) -> list[ClusterView]:
    """The clusters that ``affinity`` allows, in the given order."""
    return [cluster for cluster in clusters if cluster_matches_affinity(cluster, affinity).fits]


# ---------------------------------------------------------------------------------------------
# Taints and cordon
# ---------------------------------------------------------------------------------------------

_FILTER_EFFECTS = ("NoSchedule", "NoExecute")


def _describe(taint: Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def tolerates_cluster_taints(cluster: ClusterView, tolerations: Sequence[Toleration] | None) -> Verdict:
    """Whether every NoSchedule/NoExecute taint of the cluster is tolerated (Karmada's filter)."""
    tolerations = tolerations or ()
    for taint in cluster.taints:
        if taint.effect not in _FILTER_EFFECTS:
            continue
        if not any(toleration.tolerates(taint) for toleration in tolerations):
            return Verdict(False, f"cluster has taint {_describe(taint)} that the placement does not tolerate")
    return FITS


def cluster_is_schedulable(cluster: ClusterView) -> Verdict:
    """A cordoned cluster (``spec.unschedulable``) takes no new replicas."""
    if cluster.unschedulable:
        return Verdict(False, "cluster is cordoned (spec.unschedulable)")
    return FITS


def prefer_no_schedule_count(cluster: ClusterView, tolerations: Sequence[Toleration] | None) -> int:
    """How many PreferNoSchedule taints are not tolerated (a scorer subtracts for each)."""
    tolerations = tolerations or ()
    return sum(
        1
        for taint in cluster.taints
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in tolerations)
    )


@dataclass(frozen=True)
class Eviction:
    """When replicas must leave a cluster because of a NoExecute taint, and which taint."""

    at: datetime
    taint: Taint


def no_execute_eviction(
    cluster: ClusterView, tolerations: Sequence[Toleration] | None, *, now: datetime
) -> Eviction | None:
    """The earliest eviction a cluster's NoExecute taints demand, or ``None``.

    An untolerated NoExecute taint evicts at ``now``; a toleration with ``tolerationSeconds``
    evicts that long after the taint's ``timeAdded`` (or ``now`` when unknown); a toleration
    without ``tolerationSeconds`` never evicts.
    """
    tolerations = tolerations or ()
    earliest: Eviction | None = None
    for taint in cluster.taints:
        if taint.effect != "NoExecute":
            continue
        matching = [t for t in tolerations if t.tolerates(taint)]
        if not matching:
            at = now
        elif any(t.toleration_seconds is None for t in matching):
            continue
        else:
            seconds = min(max(t.toleration_seconds or 0, 0) for t in matching)
            added = parse_time(taint.time_added) if taint.time_added else now
            at = added + timedelta(seconds=seconds)
        if earliest is None or at < earliest.at:
            earliest = Eviction(at=at, taint=taint)
    return earliest


# ---------------------------------------------------------------------------------------------
# Spread constraints
# ---------------------------------------------------------------------------------------------


def spread_group(cluster: ClusterView, constraint: SpreadConstraint) -> str | None:
    """The group a cluster belongs to under ``constraint`` (``None``: the cluster lacks the field/label)."""
    if constraint.spread_by_label:
        return cluster.labels.get(constraint.spread_by_label) or None
    return cluster.field_value(constraint.effective_field or "cluster")


@dataclass(frozen=True)
class SpreadSelection:
    """The clusters spread constraints allow, or why none are allowed."""

    clusters: tuple[str, ...]
    fits: bool = True
    reason: str = ""
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """For the last non-cluster constraint: chosen group -> its chosen clusters."""


def _too_few(needed: str, found: str) -> SpreadSelection:
    return SpreadSelection((), fits=False, reason=f"spreadConstraints need at least {needed}, only {found}")


def _constraint_name(constraint: SpreadConstraint) -> str:
    if constraint.spread_by_label:
        return f"label {constraint.spread_by_label}"
    return constraint.effective_field or "cluster"


def select_by_spread_constraints(
    clusters: Sequence[ClusterView],
    constraints: Sequence[SpreadConstraint] | None,
    *,
    available: Mapping[str, int] | None = None,
) -> SpreadSelection:
    """Pick clusters that satisfy every spread constraint, best first.

    Groups (and clusters within them) rank by total ``available`` replicas, highest first, then
    by name; without ``available`` every cluster counts 1. Non-cluster constraints
    (region/zone/provider/label) run first, each keeping between ``minGroups`` and ``maxGroups``
    of the best groups and dropping clusters that lack the field; the ``cluster`` constraint then
    keeps between ``minGroups`` and ``maxGroups`` clusters, taking the best cluster of every
    chosen group before filling up by rank, so each chosen group stays represented.
    """
    def capacity(name: str) -> int:
        return available.get(name, 0) if available is not None else 1

    remaining = sorted(clusters, key=lambda c: (-capacity(c.name), c.name))
    if not constraints:
        return SpreadSelection(tuple(c.name for c in remaining))

    group_constraints = [c for c in constraints if (c.spread_by_label or c.effective_field) != "cluster"]
    cluster_constraints = [c for c in constraints if c not in group_constraints]
    chosen_groups: dict[str, tuple[str, ...]] = {}
    for constraint in group_constraints:
        groups: dict[str, list[ClusterView]] = {}
        for cluster in remaining:
            key = spread_group(cluster, constraint)
            if key is not None:
                groups.setdefault(key, []).append(cluster)
        ranked = sorted(groups, key=lambda g: (-sum(capacity(c.name) for c in groups[g]), g))
        name = _constraint_name(constraint)
        if len(ranked) < constraint.effective_min_groups:
            return _too_few(f"{constraint.effective_min_groups} {name} groups", f"{len(ranked)} have eligible clusters")
        if constraint.max_groups:
            ranked = ranked[: constraint.max_groups]
        chosen_groups = {group: tuple(c.name for c in groups[group]) for group in ranked}
        keep = {c.name for group in ranked for c in groups[group]}
        remaining = [c for c in remaining if c.name in keep]

    for constraint in cluster_constraints:
        if len(remaining) < constraint.effective_min_groups:
            return _too_few(f"{constraint.effective_min_groups} clusters", f"{len(remaining)} are eligible")
        if constraint.max_groups and len(remaining) > constraint.max_groups:
            firsts = [names[0] for names in chosen_groups.values() if names]
            picked = [c for c in remaining if c.name in firsts][: constraint.max_groups]
            picked += [c for c in remaining if c not in picked][: constraint.max_groups - len(picked)]
            keep = {c.name for c in picked}
            remaining = [c for c in remaining if c.name in keep]
    kept = {c.name for c in remaining}
    groups_out = {g: tuple(n for n in names if n in kept) for g, names in chosen_groups.items()}
    return SpreadSelection(tuple(c.name for c in remaining), groups={g: n for g, n in groups_out.items() if n})
