"""Kueue's ``kueue.x-k8s.io/v1alpha1`` Cohort: a node of the tree of cohorts (hierarchical cohorts).

Field-compatible with Kueue's ``apis/kueue/v1alpha1`` Cohort: ``spec.parent`` (v1beta1's and
v1beta2's ``spec.parentName``, the form the hub stores) puts the cohort under another one (absent: a root), ``spec.resourceGroups`` gives it quota of its own (lent to
its subtree; borrowing and lending limits only under a parent), and ``spec.fairSharing.weight``
its weight among its siblings. A cohort named only by ClusterQueues (``spec.cohort``) exists
implicitly, without quota, parent or weight. The pure maths lives in
:mod:`controlplane.admission.core`.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from controlplane.apis.kueue_queue_policy import CohortReference, FairSharing, FairSharingStatus
from controlplane.apis.kueue_v1beta1 import MAX_ITEMS, ResourceGroup
from controlplane.apis.meta import (
    CONDITIONS_BY_TYPE,
    LISTED_ATOMIC,
    Condition,
    ObjectMeta,
    SpecModel,
    WireModel,
)

VERSION: Final = "v1alpha1"
API_VERSION: Final = "kueue.x-k8s.io/v1alpha1"


class CohortSpecFields(SpecModel):
    """A Cohort's spec less its parent, whose field's name differs between versions."""

    resource_groups: list[ResourceGroup] | None = Field(
        default=None, max_length=MAX_ITEMS, json_schema_extra=LISTED_ATOMIC
    )
    """Quota of the cohort itself, lent to the queues and cohorts under it; borrowingLimit and
    lendingLimit bound what its subtree borrows from and lends to the parent."""
    fair_sharing: FairSharing | None = None
    """The cohort's weight among its siblings (default 1)."""


class CohortSpec(CohortSpecFields):
    """A Cohort's spec at v1beta1 and v1beta2 (and as the hub stores it)."""

    parent_name: CohortReference | None = None
    """The parent cohort (absent: this cohort is the root of its tree)."""


class CohortSpecV1alpha1(CohortSpecFields):
    """A Cohort's spec at v1alpha1, whose parent is ``parent``."""

    parent: CohortReference | None = None
    """The parent cohort (absent: this cohort is the root of its tree)."""


class CohortStatus(WireModel):
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_BY_TYPE)
    """The cohort's conditions."""
    fair_sharing: FairSharingStatus | None = None
    """The cohort's weighted share among its siblings (with --kueue-fair-sharing)."""


class Cohort(SpecModel):
    """A cohort of ClusterQueues and cohorts (Kueue's Cohort): quota they share, a parent, a weight."""

    api_version: Literal["kueue.x-k8s.io/v1alpha1"] = API_VERSION
    kind: Literal["Cohort"] = "Cohort"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CohortSpecV1alpha1 = Field(default_factory=CohortSpecV1alpha1)
    """Parent, quota and weight."""
    status: CohortStatus | None = None
    """The weighted share."""
