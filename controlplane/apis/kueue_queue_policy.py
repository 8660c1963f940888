"""The policies of Kueue's ClusterQueue (v1beta1 and v1beta2 alike): preemption, flavor
fungibility, fair sharing, admission scope and admission checks strategy, with the name types
Kueue's CRDs bound (``ResourceFlavorReference``, ``CohortReference``, ``AdmissionCheckReference``)
and a non-negative quantity. Their enums, defaults and bounds are those of Kueue's CRD
(``tests/data/kueue_crd_fields.txt``); the defaults are written by
:mod:`controlplane.apis.kueue_defaulting` and published by the served schema (:func:`served_default`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field

from controlplane.apis.meta import LISTED_AS_SET, SpecModel, Timestamp, WireModel, listed_by, served_default
from controlplane.apis.quantity import QuantityError, parse_quantity

#: A DNS subdomain (RFC 1123), the pattern of Kueue's object references.
DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ResourceFlavorReference = Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN)]
"""A ResourceFlavor's name (Kueue's ``ResourceFlavorReference``)."""
CohortReference = Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN)]
"""A cohort's name (Kueue's ``CohortReference``)."""
ClusterQueueReference = Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN)]
"""A ClusterQueue's name (Kueue's ``ClusterQueueReference``)."""
TopologyReference = Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN)]
"""A Topology's name (Kueue's ``TopologyReference``)."""
LocalQueueName = Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN)]
"""A LocalQueue's name (Kueue's ``LocalQueueName``); a Workload's priority class is named alike."""
AdmissionCheckReference = Annotated[str, Field(max_length=316)]
"""An AdmissionCheck's name (Kueue's ``AdmissionCheckReference``)."""


def _signed_quantity(value: str | int) -> str | int:
    try:
        parse_quantity(value)
    except QuantityError as err:
        raise ValueError(str(err)) from None
    return value


def _quantity(value: str | int) -> str | int:
    if parse_quantity(_signed_quantity(value)) < 0:
        raise ValueError(f"must be greater than or equal to 0, not {value}")
    return value


Quantity = Annotated[str | int, AfterValidator(_quantity)]
"""A non-negative kube quantity ("8", "500m", "36Gi")."""
SignedQuantity = Annotated[str | int, AfterValidator(_signed_quantity)]
"""A kube quantity of either sign, as Kueue's CRD takes a queue's quotas (its webhook refuses a
negative one: :mod:`controlplane.apis.kueue_queue_webhooks`)."""


class BorrowWithinCohort(SpecModel):
    policy: Literal["Never", "LowerPriority"] | None = Field(
        default=None, json_schema_extra=served_default("Never")
    )
    """Whether a borrowing workload may preempt lower-priority workloads of the cohort."""
    max_priority_threshold: int | None = None
    """Only workloads at or below this priority are preempted."""


class ClusterQueuePreemption(SpecModel):
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] | None = Field(
        default=None, json_schema_extra=served_default("Never")
    )
    """Which workloads of other queues in the cohort may be preempted to reclaim nominal quota."""
    borrow_within_cohort: BorrowWithinCohort | None = Field(
        default=None, json_schema_extra=served_default({})
    )
    """Preemption while borrowing."""
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = Field(
        default=None, json_schema_extra=served_default("Never")
    )
    """Which workloads of this queue may be preempted for a pending one."""


class FlavorFungibility(SpecModel):
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor", "Borrow"] | None = Field(
        default=None, json_schema_extra=served_default("Borrow")
    )
    """Borrow (default; MayStopSearch is Kueue's newer name of it): take a flavor that fits by
    borrowing; TryNextFlavor: try the next flavors first, and take the one that borrows least
    (from the closest cohort)."""
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor", "Preempt"] | None = Field(
        default=None, json_schema_extra=served_default("TryNextFlavor")
    )
    """TryNextFlavor (default): try the next flavors before preempting, and prefer fitting, then
    reclaiming from borrowers, then preempting in the own queue; Preempt (MayStopSearch is Kueue's
    newer name of it): preempt in the first flavor where preemption makes room."""


class FairSharing(SpecModel):
    weight: SignedQuantity | None = Field(default=None, json_schema_extra=served_default(1))
    """The share weight among its siblings in the cohort tree (default 1; 0: it borrows only what
    no other queue wants). Used when the hub runs with --kueue-fair-sharing."""


class AdmissionScope(SpecModel):
    admission_mode: str
    """UsageBasedAdmissionFairSharing: the queue admits the workloads of the LocalQueue that
    consumed least lately first (with --kueue-admission-fair-sharing); NoAdmissionFairSharing (and
    any other value, which Kueue's CRD does not refuse either): by priority, then age."""


class AdmissionFairSharingStatus(WireModel):
    consumed_resources: dict[str, Quantity]
    """The LocalQueue's usage over time, per resource with its flavors summed: each sample decays
    the old value by the half-life and adds what the queue's admitted workloads hold then; an
    admission adds its entry penalty at once."""
    last_update: Timestamp
    """When consumedResources was last sampled."""


class FairSharingStatus(WireModel):
    weighted_share: int
    """The dominant resource share (per thousand of what the cohort could lend) divided by the
    weight; 0 when not borrowing. Written when the hub runs with --kueue-fair-sharing (0 on a
    LocalQueue)."""
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = None
    """A LocalQueue's usage history, which admission fair sharing orders its ClusterQueue's
    workloads by (with --kueue-admission-fair-sharing, when the ClusterQueue's admissionScope is
    UsageBasedAdmissionFairSharing)."""


class AdmissionCheckStrategyRule(SpecModel):
    name: AdmissionCheckReference
    """The AdmissionCheck's name."""
    on_flavors: list[ResourceFlavorReference] | None = Field(default=None, json_schema_extra=LISTED_AS_SET)
    """The flavors the check applies to (absent: all)."""


class AdmissionChecksStrategy(SpecModel):
    admission_checks: list[AdmissionCheckStrategyRule] | None = Field(
        default=None, json_schema_extra=listed_by("name")
    )
    """The checks and the flavors each applies to."""
