"""The policy language: PropagationPolicy and ClusterPropagationPolicy (the override kinds are
:mod:`policies.override_models`).

Field-compatible with Karmada's ``policy.karmada.io/v1alpha1`` schema, so a Karmada user's YAML
parses unchanged (under either ``policy.gpufed.io/v1alpha1`` or ``policy.karmada.io/v1alpha1``),
plus three optional gpufed extensions, each documented on its model:

* ``placement.replicaScheduling.replicaDivisionPreference: TieredOverflow`` (and the optional
  ``tieredOverflow`` block): fill cheap tiers first, overflow to the next, shrink the most
  expensive first (:class:`TieredOverflow`);
* ``spec.gang``: the workload lands whole in one cluster or waits (:class:`PropagationSpec`);
* ``spec.gpuShapes.alternatives``: acceptable per-replica GPU requests, the hub picks one per
  cluster (:class:`GpuShapes`).

In: the wire form (dicts parsed from YAML/JSON). Out: validated models whose
``model_dump(by_alias=True, exclude_none=True)`` equals the input. Validation that involves
several fields is attached to the last field involved, so errors carry a precise field path
(``spec.placement.replicaScheduling.weightPreference``) and a message a person can act on.
The hub stores a policy with Karmada's defaults (:mod:`policies.defaulting`); the
``effective_*``/``division_strategy`` helpers give the same values for a policy without them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal, TypeAlias

from pydantic import Field, ValidationInfo, field_validator

from controlplane.apis.conflictresolution import DEFAULT_CONFLICT_RESOLUTION, ConflictResolution
from controlplane.apis.meta import (
    INT32,
    INT64,
    Condition,
    LabelSelector,
    ObjectMeta,
    SpecModel,
    Toleration,
    WireModel,
    repeated,
    served_default,
)
from policies.behavior_models import DEFAULT_SPOT_RECLAIMS as DEFAULT_SPOT_RECLAIMS
from policies.behavior_models import FailoverBehavior, Suspension
from policies.behavior_models import GpuShapeAlternative as GpuShapeAlternative
from policies.behavior_models import GpuShapes as GpuShapes
from policies.behavior_models import PurgeMode as PurgeMode
from policies.behavior_models import SchedulePriority as SchedulePriority
from policies.behavior_models import SpotReclaims as SpotReclaims
from policies.behavior_models import TierRebalance as TierRebalance

GPUFED_API_VERSION: Final = "policy.gpufed.io/v1alpha1"
KARMADA_API_VERSION: Final = "policy.karmada.io/v1alpha1"
PolicyApiVersion: TypeAlias = Literal["policy.gpufed.io/v1alpha1", "policy.karmada.io/v1alpha1"]

CLUSTER_FIELDS: Final = ("provider", "region", "zone")
DEFAULT_AFFINITY_NAME: Final = "default"
"""Name of the single term :meth:`Placement.affinity_terms` makes from ``clusterAffinity``."""
#: The propagation policy CRDs' defaults (``+kubebuilder:default``) of the spec's unset fields.
DEFAULT_PRIORITY: Final = 0
DEFAULT_PREEMPTION: Final = "Never"
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
DEFAULT_REPLICA_SCHEDULING_TYPE: Final = "Divided"

# ---------------------------------------------------------------------------------------------
# Selecting resources
# ---------------------------------------------------------------------------------------------


class ResourceSelector(SpecModel):
    """Which resource templates a policy applies to.

    ``name`` and ``labelSelector`` may both be given; as in Karmada, ``labelSelector`` is then
    ignored (``policies.validation.policy_warnings`` reports it).
    """

    api_version: str
    """APIVersion of the target resources."""
    kind: str
    """Kind of the target resources (as in Karmada, an empty one selects nothing)."""
    namespace: str | None = None
    """Namespace of the target resources. Defaults to the policy's own namespace for a PropagationPolicy or
    OverridePolicy."""
    name: str | None = None
    """Name of the target resource. Empty selects every resource of the kind (that the label selector
    matches)."""
    label_selector: LabelSelector | None = None
    """A label query over the resources of the kind. Ignored when name is set."""


# ---------------------------------------------------------------------------------------------
# Selecting clusters
# ---------------------------------------------------------------------------------------------


class FieldSelectorRequirement(SpecModel):
    """A ``fieldSelector.matchExpressions`` entry: ``provider``/``region``/``zone`` with In/NotIn.

    As in Karmada, ``values`` may be empty: ``In`` then matches no cluster, ``NotIn`` every one.
    karmada-webhook refuses another key or operator in a placement's and an override rule's
    affinities (:mod:`policies.admission`); a static weight's is read as a label selector reads it.
    """

    key: str
    """The cluster field to match: provider, region or zone."""
    operator: str
    """How the key relates to the values: In or NotIn."""
    values: list[str] | None = None
    """The values the field is compared with."""


class FieldSelector(SpecModel):
    match_expressions: list[FieldSelectorRequirement] | None = None
    """Requirements on cluster fields (provider, region, zone); all must hold."""


class ClusterAffinity(SpecModel):
    """Clusters a placement may use: all conditions given must hold.

    ``exclude`` wins over everything; ``clusterNames``, when not empty, is an allow-list.
    """

    label_selector: LabelSelector | None = None
    """A label query over clusters: only clusters whose labels match are candidates."""
    field_selector: FieldSelector | None = None
    """A query over cluster fields (provider, region, zone): only matching clusters are candidates."""
    cluster_names: list[str] | None = None
    """The clusters that may be used. Empty means any cluster the other conditions allow."""
    exclude: list[str] | None = None
    """Clusters that must not be used, whatever else matches."""


class ClusterAffinityTerm(ClusterAffinity):
    """One named term of ``placement.clusterAffinities``, tried in order."""

    affinity_name: str = Field(min_length=1, max_length=32)
    """The name of the term (at most 32 characters), unique among the terms."""


class SpreadConstraint(SpecModel):
    spread_by_field: Literal["cluster", "region", "zone", "provider"] | None = None
    """The cluster field to spread by: cluster, region, zone or provider. Cannot be set together with
    spreadByLabel."""
    spread_by_label: str | None = None
    """A cluster label to spread by: clusters with the same value form a group. Cannot be set together with
    spreadByField."""
    max_groups: int | None = None
    """The most groups (clusters, regions, ...) the replicas may be spread over."""
    min_groups: int | None = None
    """The fewest groups the replicas must be spread over; scheduling fails when fewer are available."""

    @property
    def effective_field(self) -> str | None:
        """``spreadByField``, or ``cluster`` when neither field nor label is set (Karmada's default)."""
        if self.spread_by_field:
            return self.spread_by_field
        return None if self.spread_by_label else "cluster"

    @property
    def effective_min_groups(self) -> int:
        return self.min_groups if self.min_groups else 1


# ---------------------------------------------------------------------------------------------
# Dividing replicas
# ---------------------------------------------------------------------------------------------


class StaticClusterWeight(SpecModel):
    target_cluster: ClusterAffinity
    """The clusters this weight applies to."""
    weight: int = Field(ge=1, json_schema_extra=INT64)
    """The weight of those clusters (at least 1): replicas are divided in proportion to the weights."""


class ClusterPreferences(SpecModel):
    """``weightPreference``: static weights, or ``dynamicWeight: AvailableReplicas`` (wins if both)."""

    static_weight_list: list[StaticClusterWeight] | None = None
    """Fixed weights per group of clusters. Clusters not listed get no replicas."""
    dynamic_weight: Literal["AvailableReplicas"] | None = None
    """AvailableReplicas divides replicas in proportion to how many each cluster can hold now. Takes
    precedence over staticWeightList."""


class Tier(SpecModel):
    """A named overflow tier: the clusters matching ``clusterAffinity``."""

    name: str = Field(min_length=1, max_length=63)
    """The name of the tier, unique among the tiers."""
    cluster_affinity: ClusterAffinity
    """The clusters of this tier. A cluster belongs to the first tier it matches."""


class TieredOverflow(SpecModel):
    """gpufed extension: how ``replicaDivisionPreference: TieredOverflow`` orders clusters.

    Replicas fill clusters in order of (tier, price per GPU-hour), each up to the replicas it
    can hold (clusters of equal tier and price by fragmentation and scarcity, docs/policies.md);
    the remainder spills to the next. On scale-down the most expensive
    replicas go first; the others stay where they are. By default a cluster's tier is its
    ``spec.tier`` (0 for ``provider: onprem``, 1 otherwise) and its price comes from
    ``spec.pricing``, so "fill on-prem first, overflow to cloud, shrink the most expensive
    first" needs no block at all::

        placement:
          replicaScheduling:
            replicaSchedulingType: Divided
            replicaDivisionPreference: TieredOverflow

    ``tiers`` overrides the clusters' own tiers: a cluster belongs to the first tier whose
    affinity it matches, and a cluster that matches no listed tier is not used::

            tieredOverflow:
              order: TierThenPrice
              tiers:
                - name: datacenter
                  clusterAffinity: {fieldSelector: {matchExpressions: [{key: provider, operator: In, values: [onprem]}]}}
                - name: burst
                  clusterAffinity: {labelSelector: {matchLabels: {gpufed.io/pool: burst}}}
    """

    tiers: list[Tier] | None = None
    """The tiers in fill order, overriding the clusters' own spec.tier. A cluster that matches no tier is not
    used. Absent: every cluster's spec.tier applies (0 for on-prem, 1 otherwise)."""
    order: Literal["TierThenPrice"] | None = None
    """How clusters are ordered: TierThenPrice (the only value, and the default) fills lower tiers first and,
    within a tier, the cheaper clusters per GPU-hour first."""
    rebalance: TierRebalance | None = None
    """When replicas move back to cheaper tiers that have room again (see TierRebalance). Absent: the
    defaults (on, $1/h minimum saving, 300 s between moves, 25% surge)."""
    scarcity_aware: bool | None = None
    """Among clusters tied on tier and price, whether a replica that accepts several GPU models avoids
    the capacity recent replicas accepting only some models need (default true). Ties are otherwise
    broken by the expected growth of GPU fragmentation, then by the fewest free GPUs."""
    node_shape_scarcity: bool | None = None
    """Among clusters tied on tier and price, whether a replica the nodes of every tied cluster could hold
    avoids the nodes that recent replicas only some of those clusters' nodes can hold (by CPU, memory and
    GPUs) need (default true; false turns it off; off whenever scarcityAware is false)."""
    node_shapes_by_member_scoring: bool | None = None
    """Where node-shape scarcity (nodeShapeScarcity) counts a replica's cost in a cluster whose agent
    reports status.nodeScoring LeastAllocated (kube's default, which puts a replica on the emptiest node
    that holds it): true (the default), at the node that scoring picks; false, at the node where the
    replica would take least, as for every other member."""
    scarcity_steering: bool | None = None
    """Whether a replica that accepts several GPU models is steered, inside the cluster it goes to, away
    from the models recent replicas accepting only some models need: the Work gets a preferred node
    affinity term against those models (default true; false turns it off; off whenever scarcityAware is
    false)."""
    packing_hints: bool | None = None
    """Whether a replica that asks for fewer GPUs than a node of its cluster holds is packed, inside the
    cluster, toward the nodes whose GPUs are already partly in use: the Work gets a preferred node
    affinity term on kubernetes.io/hostname naming them, fewest free GPUs first, at most 32 (default true,
    within packingHintsScope and while packingHintsMultiGPUPercent is met; false turns it off)."""
    packing_hints_scope: Literal["AllMembers", "SpreadingMembers"] | None = None
    """Which clusters get packing hints: SpreadingMembers (the default), those whose agent reports
    status.nodeScoring LeastAllocated (kube's default, which spreads replicas over empty nodes), so that
    members that pack by themselves keep their own node choice; or AllMembers. With packingHints: false
    there are no hints, whatever the scope."""
    packing_hints_multi_gpu_percent: float | None = Field(default=None, ge=0, le=100, alias="packingHintsMultiGPUPercent")
    """Packing hints only while replicas asking for two GPUs or more asked for at least this percent of the
    GPUs of the hub's recent arrivals (the last 4096 bindings), and at least four such replicas are among
    them: whole free nodes are worth keeping only while such replicas keep coming (default 20; 0: always)."""
    share_remainder_hints: bool | None = None
    """While packing hints wait for multi-GPU demand (packingHintsMultiGPUPercent not met), whether a replica
    asking for a share of one GPU in thousandths (nvidia.com/gpu-milli under 1000) in a cluster whose agent
    reports status.nodeScoring LeastAllocated is packed toward the nodes whose shared GPUs have the tightest
    free remainder that holds it: the Work gets a preferred node affinity term on kubernetes.io/hostname
    naming them, at most 32, where the recent demand's GPU fragmentation grows less there than on the node
    the member's own scoring would pick (default true; false turns it off; off whenever packingHints is
    false)."""
    rare_node_steering: bool | None = None
    """While packing hints are given, whether a replica in a cluster whose agent reports status.nodeScoring
    LeastAllocated is steered away from the GPU models whose nodes alone hold recent replicas of more GPUs
    than it asks for (at least four such replicas in the hub's recent arrivals): the Work gets a preferred
    node affinity term against those models (default true; false turns it off; off whenever packingHints
    is false)."""
    share_fit_ties: bool | None = None
    """While replicas asking for a share of one GPU in thousandths (nvidia.com/gpu-milli under 1000) ask for
    at least half the GPUs of the hub's recent arrivals, whether such a replica tied on tier, price and cost
    between clusters whose agents all report status.nodeScoring MostAllocated goes to the cluster with the
    node that keeps the fewest free GPU thousandths once it hosts the share, before the fewest free GPUs
    (default true; false turns it off)."""
    price_band_percent: float | None = Field(default=None, ge=0, le=1000)
    """Prices per GPU-hour within this many percent of each other tie (default 0: only equal prices). The
    fleet's listed prices, lowest first, are cut into bands: the lowest starts the first band, which holds
    every price up to this percentage above it; the next price starts the next band. Clusters of one tier
    whose prices share a band are ordered as clusters of equal price (fragmentation, scarcity)."""

    @field_validator("tiers")
    @classmethod
    def _unique_tier_names(cls, tiers: list[Tier] | None) -> list[Tier] | None:
        twice = repeated(tier.name for tier in tiers or ())
        if twice is not None:
            raise ValueError(f"tier name {twice!r} is used twice; each tier needs a unique name")
        if tiers is not None and not tiers:
            raise ValueError("must list at least one tier, or leave tieredOverflow.tiers out to use cluster tiers")
        return tiers


class DivisionStrategy(StrEnum):
    """How the scheduler divides replicas, after Karmada's defaults have been applied."""

    DUPLICATED = "Duplicated"
    AGGREGATED = "Aggregated"
    STATIC_WEIGHT = "StaticWeight"
    DYNAMIC_WEIGHT = "DynamicWeight"
    TIERED_OVERFLOW = "TieredOverflow"


class ReplicaSchedulingStrategy(SpecModel):
    """``placement.replicaScheduling``.

    ``replicaDivisionPreference`` accepts Karmada's ``Aggregated`` and ``Weighted`` and
    gpufed's ``TieredOverflow`` (see :class:`TieredOverflow`).
    """

    replica_scheduling_type: Literal["Duplicated", "Divided"] | None = Field(
        default=None, json_schema_extra=served_default(DEFAULT_REPLICA_SCHEDULING_TYPE))
    """Duplicated runs all replicas in every chosen cluster; Divided (the default when replicaScheduling is
    set) divides them among the clusters."""
    replica_division_preference: Literal["Aggregated", "Weighted", "TieredOverflow"] | None = None
    """How Divided replicas are split: Aggregated (as few clusters as possible), Weighted (by
    weightPreference; the default) or TieredOverflow (fill cheap tiers first, overflow to the next, shrink the
    most expensive first)."""
    weight_preference: ClusterPreferences | None = None
    """The weights for Weighted division. Absent: equal weights."""
    tiered_overflow: TieredOverflow | None = None
    """Options of TieredOverflow division: which clusters form each tier."""
    rebalance: TierRebalance | None = None
    """gpufed extension: when replicas move toward the policy's preference once there is room (a later
    clusterAffinities term back to the first, a static-weight division a full cluster cut short), with the
    fields of tieredOverflow.rebalance (minSavingPerHour applies to returns to a cheaper tier only). Absent:
    the defaults (on, 300 s between moves, 25% surge)."""

    @field_validator("rebalance")
    @classmethod
    def _rebalance_once(cls, rebalance: TierRebalance | None, info: ValidationInfo) -> TierRebalance | None:
        tiered = info.data.get("tiered_overflow")
        if rebalance is not None and tiered is not None and tiered.rebalance is not None:
            raise ValueError("set rebalance in one place: tieredOverflow.rebalance or replicaScheduling.rebalance")
        return rebalance

    @field_validator("tiered_overflow")
    @classmethod
    def _tiers_need_tiered(cls, tiered: TieredOverflow | None, info: ValidationInfo) -> TieredOverflow | None:
        preference = info.data.get("replica_division_preference")
        if tiered is not None and preference not in (None, "TieredOverflow"):
            raise ValueError(
                f"tieredOverflow requires replicaDivisionPreference 'TieredOverflow' (got {preference!r})"
            )
        if tiered is not None and info.data.get("replica_scheduling_type") == "Duplicated":
            raise ValueError("tieredOverflow requires replicaSchedulingType 'Divided'")
        return tiered

    @property
    def effective_type(self) -> Literal["Duplicated", "Divided"]:
        """Karmada's default when the block is present is ``Divided``."""
        return self.replica_scheduling_type or DEFAULT_REPLICA_SCHEDULING_TYPE

    @property
    def division_strategy(self) -> DivisionStrategy:
        """The strategy with Karmada's defaults applied.

        Divided without a preference is Weighted (Karmada's webhook); Weighted without
        ``weightPreference`` or with an empty static list is equal static weights;
        ``dynamicWeight`` wins over ``staticWeightList``; a ``tieredOverflow`` block implies
        TieredOverflow.
        """
        if self.effective_type == "Duplicated":
            return DivisionStrategy.DUPLICATED
        preference = self.replica_division_preference
        if preference == "TieredOverflow" or (preference is None and self.tiered_overflow is not None):
            return DivisionStrategy.TIERED_OVERFLOW
        if preference == "Aggregated":
            return DivisionStrategy.AGGREGATED
        if self.weight_preference is not None and self.weight_preference.dynamic_weight:
            return DivisionStrategy.DYNAMIC_WEIGHT
        return DivisionStrategy.STATIC_WEIGHT


class Placement(SpecModel):
    """``spec.placement``: where a workload may go and how its replicas divide."""

    cluster_affinity: ClusterAffinity | None = None
    """The clusters the resources may be propagated to. Absent: every cluster."""
    cluster_affinities: list[ClusterAffinityTerm] | None = None
    """Alternative cluster affinities, tried in order: the first term whose clusters can hold the workload is
    used. Cannot be set together with clusterAffinity."""
    cluster_tolerations: list[Toleration] | None = None
    """Tolerations of cluster taints: a cluster with a NoSchedule or NoExecute taint is used only when
    tolerated."""
    spread_constraints: list[SpreadConstraint] | None = None
    """How the replicas must be spread over clusters, regions, zones or providers."""
    replica_scheduling: ReplicaSchedulingStrategy | None = None
    """How replicas are scheduled: duplicated in every cluster, or divided among them. Absent: Duplicated."""

    @property
    def division_strategy(self) -> DivisionStrategy:
        """Duplicated when ``replicaScheduling`` is absent (Karmada's default)."""
        if self.replica_scheduling is None:
            return DivisionStrategy.DUPLICATED
        return self.replica_scheduling.division_strategy

    def affinity_terms(self) -> list[ClusterAffinityTerm]:
        """The affinity terms to try in order: ``clusterAffinities``, else one unnamed term.

        With neither set every cluster is a candidate (a term with no conditions).
        """
        if self.cluster_affinities:
            return list(self.cluster_affinities)
        affinity = self.cluster_affinity or ClusterAffinity()
        wire = affinity.model_dump(by_alias=True, exclude_none=True)
        return [ClusterAffinityTerm.model_validate({"affinityName": DEFAULT_AFFINITY_NAME, **wire})]


# ---------------------------------------------------------------------------------------------
# PropagationPolicy / ClusterPropagationPolicy
# ---------------------------------------------------------------------------------------------


class PropagationSpec(SpecModel):
    """``spec`` of PropagationPolicy and ClusterPropagationPolicy.

    gpufed extensions: ``gang`` (the workload's replicas land in one cluster together or not at
    all; the Kubeflow training jobs and RayJob are gangs unless ``gang: false``) and ``gpuShapes``
    (:class:`GpuShapes`)::

        spec:
          resourceSelectors: [{apiVersion: batch/v1, kind: Job, name: train}]
          gang: true
          gpuShapes:
            alternatives:
              - resources: {nvidia.com/mig-3g.40gb: 1}
              - resources: {nvidia.com/gpu: 1}
    """

    resource_selectors: list[ResourceSelector] = Field(min_length=1)
    """The resource templates this policy propagates. At least one; an empty list does not select everything."""
    association: bool | None = None
    """Deprecated in Karmada in favour of propagateDeps; accepted with a warning, no effect."""
    propagate_deps: bool | None = None
    """When true, what the workload's pods reference (ConfigMaps, Secrets, ServiceAccounts,
    PersistentVolumeClaims) is propagated with it, to the same clusters."""
    placement: Placement | None = None
    """Where the resources may go and how their replicas are divided. Absent: every cluster, replicas
    duplicated."""
    priority: int | None = Field(default=None, json_schema_extra={**served_default(DEFAULT_PRIORITY), **INT32})
    """When several policies select a resource, the one with the highest priority claims it (then the most
    specific selector, then the name). Defaults to 0."""
    preemption: Literal["Always", "Never"] | None = Field(default=None, json_schema_extra=served_default(DEFAULT_PREEMPTION))
    """Always lets this policy take over resources claimed by a policy of lower priority; Never (the default)
    leaves claimed resources alone."""
    dependent_overrides: list[str] | None = None
    """In Karmada, OverridePolicies that must exist before the resources are propagated. Accepted, not
    acted on yet: override policies apply as soon as they exist."""
    scheduler_name: str | None = Field(default=None, json_schema_extra=served_default(DEFAULT_SCHEDULER_NAME))
    """In Karmada, the scheduler that places the resources. Accepted, not acted on yet: the hub's one
    scheduler places every workload."""
    failover: FailoverBehavior | None = None
    """What happens when the application or a cluster fails."""
    conflict_resolution: ConflictResolution | None = Field(
        default=None, json_schema_extra=served_default(DEFAULT_CONFLICT_RESOLUTION.value))
    """What happens when a resource of the same name already exists in a member cluster: Abort (the default:
    report the conflict) or Overwrite (take it over)."""
    activation_preference: Literal["Lazy"] | None = None
    """In Karmada, Lazy applies changes to the policy only when a selected resource next changes.
    Accepted, not acted on yet: policy changes take effect at once."""
    suspension: Suspension | None = None
    """Stops delivering changes to member clusters while set."""
    preserve_resources_on_deletion: bool | None = None
    """When true, deleting a resource on the hub leaves its copies running in the member clusters, no longer
    managed."""
    schedule_priority: SchedulePriority | None = None
    """The scheduling priority of the resources: higher priorities are scheduled first. Nothing already placed
    is preempted for it."""
    gang: bool | None = None
    """When true, all replicas of a selected workload land in one cluster together or not at all. The Kubeflow
    training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob), RayJob and RayCluster are
    gangs unless this is false."""
    gpu_shapes: GpuShapes | None = None
    """Per-replica GPU requests the workloads accept instead of the pod template's: in each cluster the first
    shape the cluster can hold is used (for example a MIG slice on-prem, a whole GPU in the cloud)."""
    spot_reclaims: SpotReclaims | None = None
    """Where replicas taken by spot reclaims are replaced: after preferNonSpotAfter reclaims within
    windowSeconds (2 within an hour by default), on non-spot capacity first."""

    @field_validator("resource_selectors", mode="before")
    @classmethod
    def _selectors_not_empty(cls, selectors: Any) -> Any:
        if isinstance(selectors, list) and not selectors:
            raise ValueError(
                "must select at least one resource; an empty list does not mean 'everything', "
                "so that Secrets are never propagated by accident"
            )
        return selectors

    @property
    def effective_priority(self) -> int:
        return self.priority or 0

    @property
    def effective_placement(self) -> Placement:
        return self.placement or Placement()


class PolicyStatus(WireModel):
    """What the hub observed of the policy (an addition to Karmada's policies, which clients ignore)."""

    conditions: list[Condition] | None = None
    """The hub's observations. ResourceSelectorsServed is False while a resource selector names a
    kind the hub cannot propagate (not served yet, cluster-scoped, or one of the hub's own)."""


class PolicyObject(SpecModel):
    """What the four policy kinds share: either API version, kind, metadata, spec and status. Each
    kind narrows ``kind`` and ``spec``; the fields keep this order on the wire."""

    api_version: PolicyApiVersion = GPUFED_API_VERSION
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: Any
    status: PolicyStatus | None = None
    """What the hub observed of the policy: its ResourceSelectorsServed condition."""


class PropagationPolicy(PolicyObject):
    """Namespaced (short name ``pp``): propagates resource templates of its own namespace."""

    kind: Literal["PropagationPolicy"] = "PropagationPolicy"
    spec: PropagationSpec
    """Spec is the desired behavior of the PropagationPolicy."""


class ClusterPropagationPolicy(PolicyObject):
    """Cluster-scoped (short name ``cpp``): propagates cluster-scoped resources and any namespace's."""

    kind: Literal["ClusterPropagationPolicy"] = "ClusterPropagationPolicy"
    spec: PropagationSpec
    """Spec is the desired behavior of the ClusterPropagationPolicy."""


AnyPropagationPolicy: TypeAlias = PropagationPolicy | ClusterPropagationPolicy
