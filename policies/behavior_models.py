"""The blocks of a PropagationSpec that say what happens after placement: failover (application
and cluster), suspension, schedule priority, and the gpufed extensions for alternative GPU shapes
(``spec.gpuShapes``), spot reclaims (``spec.spotReclaims``) and moves back to cheaper tiers
(``tieredOverflow.rebalance``).

In: the wire form of those blocks. Out: validated models, with the same conventions as
:mod:`policies.models` (which composes them into :class:`~policies.models.PropagationSpec` and
re-exports the names other packages use).
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from pydantic import Field, ValidationInfo, field_validator

from controlplane.apis.meta import INT32, SpecModel, served_default
from controlplane.apis.quantity import QuantityError, parse_quantity

# ---------------------------------------------------------------------------------------------
# Failover, suspension, priority
# ---------------------------------------------------------------------------------------------


DEFAULT_FAILOVER_TOLERATION_SECONDS: Final = 300


class DecisionConditions(SpecModel):
    toleration_seconds: int | None = Field(
        default=None, json_schema_extra={**served_default(DEFAULT_FAILOVER_TOLERATION_SECONDS), **INT32})
    """How long the application may stay unhealthy before it is moved. Defaults to 300."""


class StatePreservationRule(SpecModel):
    alias_label_name: str = Field(min_length=1)
    """The label under which the preserved value is given to the new copy."""
    json_path: str = Field(alias="jsonPath")
    """A JSONPath into the old copy's status that selects the value to preserve."""


class StatePreservation(SpecModel):
    rules: list[StatePreservationRule]
    """What to carry from the failed copy to its replacement, one rule per value. Accepted, not acted
    on yet: nothing is carried over."""


PurgeMode: TypeAlias = Literal["Immediately", "Graciously", "Never", "Directly", "Gracefully"]
#: The CRDs' defaults of ``failover.application``.
DEFAULT_PURGE_MODE: Final = "Graciously"
DEFAULT_GRACE_PERIOD_SECONDS: Final = 600


#: The purge modes that do not wait for a replacement, so take no ``gracePeriodSeconds``.
UNGRACIOUS_PURGE_MODES: Final = ("Immediately", "Directly", "Never")


def _grace_only_when_gracious(seconds: int | None, info: ValidationInfo) -> int | None:
    """``gracePeriodSeconds`` of ``failover.cluster`` (gpufed's extension): only with a gracious
    ``purgeMode`` (karmada-webhook refuses the same of ``failover.application``:
    :mod:`policies.admission`)."""
    mode = info.data.get("purge_mode")
    if seconds is not None and mode in UNGRACIOUS_PURGE_MODES:
        raise ValueError("only takes effect when purgeMode is graciously")
    return seconds


class ApplicationFailoverBehavior(SpecModel):
    """``failover.application``: move replicas off a cluster where the application is unhealthy.

    ``purgeMode`` accepts both Karmada spellings (``Immediately|Graciously|Never`` and the newer
    ``Directly|Gracefully|Never``).
    """

    decision_conditions: DecisionConditions
    """When the application counts as failed in a cluster (required, as in Karmada's CRD; its
    tolerationSeconds defaults to 300)."""
    purge_mode: PurgeMode | None = Field(default=None, json_schema_extra=served_default(DEFAULT_PURGE_MODE))
    """How the copy in the failed cluster is removed: Immediately or Directly (at once), Graciously or
    Gracefully (once the replacement is healthy, or after gracePeriodSeconds), Never (left to the user)."""
    grace_period_seconds: int | None = Field(default=None, json_schema_extra=INT32)
    """How long a gracious removal waits for the replacement to become healthy. Only with Graciously or
    Gracefully. Defaults to 600."""
    state_preservation: StatePreservation | None = None
    """State to carry from the failed copy to the replacement."""

    @property
    def effective_toleration_seconds(self) -> int:
        seconds = self.decision_conditions.toleration_seconds
        return DEFAULT_FAILOVER_TOLERATION_SECONDS if seconds is None else seconds

    @property
    def effective_grace_period_seconds(self) -> int:
        return self.grace_period_seconds or DEFAULT_GRACE_PERIOD_SECONDS


class ClusterFailoverBehavior(SpecModel):
    """``failover.cluster`` (newer Karmada): what to do with replicas on a failed cluster.

    ``gracePeriodSeconds`` is a gpufed extension (Karmada takes it from a controller flag):
    how long a Gracefully evicted copy may wait for its replacement to be Healthy; unset,
    the hub's ``--graceful-eviction-timeout`` applies.
    """

    purge_mode: PurgeMode | None = None
    """How the copy in a failed cluster is removed: Immediately or Directly, Graciously or Gracefully, or
    Never."""
    grace_period_seconds: int | None = Field(default=None, gt=0)
    """How long a gracious removal waits for the replacement to become healthy. Only with Graciously or
    Gracefully. Defaults to the hub's graceful eviction timeout."""
    state_preservation: StatePreservation | None = None
    """State to carry from the failed copy to the replacement."""

    _grace_only_when_gracious = field_validator("grace_period_seconds")(_grace_only_when_gracious)


class FailoverBehavior(SpecModel):
    application: ApplicationFailoverBehavior | None = None
    """Moves replicas off a cluster where the application stays unhealthy (with propagateDeps, the objects it
    needs move with it)."""
    cluster: ClusterFailoverBehavior | None = None
    """What happens to replicas on a cluster that fails."""


class SuspendClusters(SpecModel):
    cluster_names: list[str] | None = None
    """The clusters to which changes are not delivered."""


class Suspension(SpecModel):
    dispatching: bool | None = None
    """When true, changes to the selected resources are delivered to no cluster until it is false again."""
    dispatching_on_clusters: SuspendClusters | None = None
    """Stops delivering changes to the listed clusters only. Cannot name clusters when dispatching is true."""


class SchedulePriority(SpecModel):
    priority_class_source: Literal["KubePriorityClass", "PodPriorityClass", "FederatedPriorityClass"]
    """Where the priority comes from: KubePriorityClass (a PriorityClass on the hub, named by
    priorityClassName), PodPriorityClass or FederatedPriorityClass."""
    priority_class_name: str | None = None
    """The PriorityClass whose value is the scheduling priority."""


# ---------------------------------------------------------------------------------------------
# gpufed extension: alternative GPU shapes
# ---------------------------------------------------------------------------------------------


class GpuShapeAlternative(SpecModel):
    """One acceptable per-replica GPU request (replaces the GPU requests of the pod template)."""

    name: str | None = None
    """A name for the shape, shown in the scheduling explanation."""
    resources: dict[str, str | int]
    """The per-replica GPU requests of this shape (for example nvidia.com/gpu: 1 or nvidia.com/mig-3g.40gb:
    1); they replace the GPU requests of the pod template. Whole numbers for extended resources."""
    node_selector: dict[str, str] | None = None
    """Node labels this shape needs in addition to the pod template's, for example nvidia.com/gpu.product:
    NVIDIA-A100-SXM4-80GB."""

    @field_validator("resources")
    @classmethod
    def _quantities(cls, resources: dict[str, str | int]) -> dict[str, str | int]:
        if not resources:
            raise ValueError("must request at least one resource, e.g. {nvidia.com/gpu: 1}")
        for name, quantity in resources.items():
            try:
                amount = parse_quantity(quantity)
            except QuantityError as exc:
                raise ValueError(f"{name}: {exc}") from exc
            if amount <= 0:
                raise ValueError(f"{name}: must be a positive quantity, got {quantity!r}")
            if name != "cpu" and "/" in name and amount != amount.to_integral_value():
                raise ValueError(f"{name}: extended resources must be whole numbers, got {quantity!r}")
        return resources


class GpuShapes(SpecModel):
    """gpufed extension ``spec.gpuShapes``: per-replica GPU requests the workload accepts.

    The hub picks, per cluster, the first alternative (in listed order) that the cluster can
    hold, and rewrites the pod template's GPU requests in that cluster's Work::

        gpuShapes:
          alternatives:
            - resources: {nvidia.com/mig-3g.40gb: 1}
            - resources: {nvidia.com/gpu: 1}
    """

    alternatives: list[GpuShapeAlternative] = Field(min_length=1)
    """The acceptable shapes, most preferred first: in each cluster the first one the cluster can hold is
    used, and its Work gets that shape's requests."""


class SpotReclaims(SpecModel):
    """What the hub does with replicas that spot reclaims take away (gpufed extension)."""

    prefer_non_spot_after: int = Field(default=2, ge=1, le=100)
    """After this many reclaims of the workload's replicas within windowSeconds, the replicas a reclaim takes
    are replaced on non-spot capacity when it has room (spot clusters when it has none). Defaults to 2."""
    window_seconds: int = Field(default=3600, ge=1, le=30 * 86400)
    """The window, in seconds, reclaims are counted over. Defaults to 3600."""


DEFAULT_SPOT_RECLAIMS = SpotReclaims()


class TierRebalance(SpecModel):
    """gpufed extension: moving burst replicas back to a cheaper tier once it has room.

    When a capacity report shows room in a cheaper tier (or a cheaper cluster of the same
    tier) for replicas that run in a more expensive one, the scheduler first adds them in the
    cheaper cluster, waits until the member reports them ready, and only then removes as
    many from the expensive one: the workload never has fewer ready replicas than before.
    The same settings, as ``replicaScheduling.rebalance``, govern moves toward other policies'
    preferences (an earlier clusterAffinities term, the static weights). A gang moves whole and
    only between runs; finished work never moves. Every field is optional::

            tieredOverflow:
              rebalance:
                minSavingPerHour: 1
                minMoveIntervalSeconds: 300
                maxSurge: 25%
                surgeTimeoutSeconds: 600
    """

    enabled: bool | None = None
    """Whether replicas move back to cheaper tiers on their own. Default true."""
    min_saving_per_hour: float | None = Field(default=None, ge=0)
    """The smallest saving, in dollars per hour, worth a move. Default 1."""
    min_move_interval_seconds: int | None = Field(default=None, ge=0, le=86400 * 7)
    """The least time between two moves of the workload, in seconds. Default 300."""
    max_surge: int | str | None = None
    """How many replicas one move adds before it removes as many (an absolute number or a percentage of the
    replicas, rounded up; at least 1). Default 25%."""
    surge_timeout_seconds: int | None = Field(default=None, ge=1, le=86400)
    """How long a move waits for the replicas it added to be ready, in seconds; past it the move is abandoned
    (the added replicas are removed, the others stay where they run) with a MoveAbandoned Event. Default 600."""

    @field_validator("max_surge")
    @classmethod
    def _surge_is_count_or_percent(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"must be at least 1 (got {value})")
        if isinstance(value, str):
            number = value[:-1] if value.endswith("%") else ""
            if not number.isdigit() or not 1 <= int(number) <= 100:
                raise ValueError(f"must be a number of replicas or a percentage from 1% to 100% (got {value!r})")
        return value
