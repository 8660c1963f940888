"""Read-only typed views of Kueue's objects (``kueue.x-k8s.io``), for code that reads one more than once.

Built on :class:`controlplane.apis.views.ObjectView` (metadata, spec, status, conditions), with
the same rules: a view wraps the stored dict without copying it, never writes, and a field that is
absent or null reads as an empty mapping, an empty tuple, ``""`` or ``None``, as the
``.get(...) or {}`` chains it replaces did.

* :class:`WorkloadView` — a Workload: its LocalQueue, pod sets, priority and ``active`` switch;
  the admission it holds, its admission checks' states, its requeue state and reclaimable Pods.
* :class:`ClusterQueueView` — a ClusterQueue: quota (resource groups), cohort, stop policy,
  queueing and preemption policies, flavor fungibility, namespace selector, admission checks.
* :class:`CohortView` — a Cohort: its parent, quota and fair-sharing weight.
* :class:`LocalQueueView` — a LocalQueue: its ClusterQueue, stop policy and fair sharing.

The admission core never sees these: :mod:`controlplane.admission.objects` turns them into its
own typed values. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.apis.views import ObjectView


class WorkloadView(ObjectView):
    """A Workload (``kueue.x-k8s.io``)."""

    __slots__ = ()

    @property
    def queue_name(self) -> str:
        """``spec.queueName``: the LocalQueue it is submitted to ("" when unset)."""
        return str(self.spec.get("queueName") or "")

    @property
    def pod_sets(self) -> Sequence[Mapping[str, Any]]:
        """``spec.podSets``: name, count, minCount and pod template of each."""
        return self.spec.get("podSets") or ()

    @property
    def priority(self) -> int:
        """``spec.priority`` (0 when unset or not an integer)."""
        priority = self.spec.get("priority")
        return priority if isinstance(priority, int) else 0

    @property
    def is_active(self) -> bool:
        """``spec.active``: whether it takes part in admission (true unless set to false)."""
        return self.spec.get("active") is not False

    @property
    def admission(self) -> Mapping[str, Any] | None:
        """``status.admission`` as stored, whatever its conditions say (None when it has none)."""
        admission = self.status.get("admission")
        return admission if isinstance(admission, Mapping) else None

    @property
    def admission_checks(self) -> Sequence[Mapping[str, Any]]:
        """``status.admissionChecks``: the state of each admission check."""
        return self.status.get("admissionChecks") or ()

    @property
    def requeue_state(self) -> Mapping[str, Any]:
        """``status.requeueState``: the count of requeues and when it may be queued again."""
        return self.status.get("requeueState") or {}

    @property
    def reclaimable_pods(self) -> Sequence[Mapping[str, Any]]:
        """``status.reclaimablePods``: per pod set, the Pods that need their quota no more."""
        return self.status.get("reclaimablePods") or ()


def pod_set_assignments(admission: Mapping[str, Any] | None) -> Sequence[Mapping[str, Any]]:
    """``podSetAssignments`` of a Workload's ``status.admission`` (:attr:`WorkloadView.admission`)."""
    return (admission or {}).get("podSetAssignments") or ()


class _FairSharingView(ObjectView):
    """A ClusterQueue, Cohort or LocalQueue: the kinds with a fair-sharing weight."""

    __slots__ = ()

    @property
    def fair_sharing_weight(self) -> Any:
        """``spec.fairSharing.weight`` as stored, a quantity (None when unset)."""
        return (self.spec.get("fairSharing") or {}).get("weight")

    @property
    def stop_policy(self) -> str | None:
        """``spec.stopPolicy`` of a ClusterQueue or LocalQueue (None when unset or empty)."""
        value = self.spec.get("stopPolicy")
        return str(value) if value else None


class _QuotaView(_FairSharingView):
    """A ClusterQueue or a Cohort: the two kinds that hold quota."""

    __slots__ = ()

    @property
    def resource_groups(self) -> Sequence[Mapping[str, Any]]:
        """``spec.resourceGroups``: covered resources and each flavor's quotas."""
        return self.spec.get("resourceGroups") or ()


class ClusterQueueView(_QuotaView):
    """A ClusterQueue (``kueue.x-k8s.io``)."""

    __slots__ = ()

    @property
    def cohort(self) -> str | None:
        """``spec.cohort``: the cohort it borrows and lends in (None when unset or empty)."""
        return self.spec.get("cohort") or None

    @property
    def queueing_strategy(self) -> str | None:
        """``spec.queueingStrategy`` (None when unset or empty)."""
        return self.spec.get("queueingStrategy") or None

    @property
    def flavor_fungibility(self) -> Mapping[str, Any]:
        """``spec.flavorFungibility``: whenCanBorrow, whenCanPreempt (and v1beta2's preference)."""
        return self.spec.get("flavorFungibility") or {}

    @property
    def preemption(self) -> Mapping[str, Any]:
        """``spec.preemption``: withinClusterQueue, reclaimWithinCohort, borrowWithinCohort."""
        return self.spec.get("preemption") or {}

    @property
    def namespace_selector(self) -> Mapping[str, Any] | None:
        """``spec.namespaceSelector`` as stored: None (unset: no namespace) is not ``{}`` (every one)."""
        return self.spec.get("namespaceSelector")

    @property
    def admission_check_names(self) -> Sequence[Any]:
        """``spec.admissionChecks``: checks for every flavor."""
        return self.spec.get("admissionChecks") or ()

    @property
    def admission_check_rules(self) -> Sequence[Any]:
        """``spec.admissionChecksStrategy.admissionChecks``: checks with the flavors they apply to."""
        return (self.spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()

    @property
    def admission_scope(self) -> Any:
        """``spec.admissionScope`` as stored (admission fair sharing's mode; None when unset)."""
        return self.spec.get("admissionScope")


class CohortView(_QuotaView):
    """A Cohort (as stored: ``kueue.x-k8s.io/v1beta1``, its parent ``spec.parentName``)."""

    __slots__ = ()

    @property
    def parent_name(self) -> str | None:
        """``spec.parentName``: the cohort above it (None when unset or empty)."""
        return self.spec.get("parentName") or None


class LocalQueueView(_FairSharingView):
    """A LocalQueue (``kueue.x-k8s.io``)."""

    __slots__ = ()

    @property
    def cluster_queue(self) -> str:
        """``spec.clusterQueue``: the ClusterQueue it submits to ("" when unset)."""
        return str(self.spec.get("clusterQueue") or "")

    @property
    def fair_sharing_status(self) -> Mapping[str, Any]:
        """``status.fairSharing``: weighted share and admission fair sharing's usage."""
        return self.status.get("fairSharing") or {}

    @property
    def admission_fair_sharing_status(self) -> Mapping[str, Any] | None:
        """``status.fairSharing.admissionFairSharingStatus``: its sampled usage (None when it has none)."""
        block = self.fair_sharing_status.get("admissionFairSharingStatus")
        return block if isinstance(block, Mapping) else None
