"""Karmada's ``apps.karmada.io/v1alpha1`` WorkloadRebalancer: a fresh placement on request.

Field-compatible with Karmada's ``pkg/apis/apps/v1alpha1`` types, so a Karmada user's YAML
applies unchanged. Cluster-scoped. The rebalancer controller
(:mod:`controlplane.controllers.rebalancers`) sets ``spec.rescheduleTriggeredAt`` on each listed
workload's ResourceBinding (the scheduler then places it afresh, ignoring where it runs),
reports a result per workload and deletes the object ``ttlSecondsAfterFinished`` after it
finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import Field, field_validator

from controlplane.apis.meta import INT32, INT64, ObjectMeta, SpecModel, WireModel
from controlplane.apis.views import ObjectView

API_GROUP: Final = "apps.karmada.io"
API_VERSION: Final = "apps.karmada.io/v1alpha1"
KIND: Final = "WorkloadRebalancer"


def requested_after_last_decision(spec: Mapping[str, object], status: Mapping[str, object]) -> bool:
    """Whether a binding's ``spec.rescheduleTriggeredAt`` is later than its ``status.lastScheduledTime``
    (no decision yet counts as earlier)."""
    triggered, last = spec.get("rescheduleTriggeredAt"), status.get("lastScheduledTime")
    if not isinstance(triggered, str) or not triggered:
        return False
    try:
        return not isinstance(last, str) or datetime.fromisoformat(triggered) > datetime.fromisoformat(last)
    except ValueError:
        return False


class RebalanceResult(StrEnum):
    SUCCESSFUL = "Successful"
    FAILED = "Failed"


class RebalanceFailedReason(StrEnum):
    REFERENCED_BINDING_NOT_FOUND = "ReferencedBindingNotFound"


class ObjectReference(SpecModel):
    """A workload to place afresh."""

    api_version: str
    """API version of the workload, e.g. apps/v1."""
    kind: str
    """Kind of the workload, e.g. Deployment."""
    name: str
    """Name of the workload (one that names no workload's binding fails: ReferencedBindingNotFound)."""
    namespace: str | None = None
    """Namespace of the workload; empty for a cluster-scoped one."""


class WorkloadRebalancerSpec(SpecModel):
    workloads: list[ObjectReference] = Field(min_length=1)
    """The workloads to place afresh (at least one)."""
    ttl_seconds_after_finished: int | None = Field(default=None, json_schema_extra=INT32)
    """Seconds after the rebalancer finished (status.finishTime) until it is deleted (0 or less: at
    once). Absent: kept."""

    @field_validator("workloads")
    @classmethod
    def _unique(cls, workloads: list[ObjectReference]) -> list[ObjectReference]:
        seen: set[tuple[str, str, str, str | None]] = set()
        for workload in workloads:
            key = (workload.api_version, workload.kind, workload.name, workload.namespace)
            if key in seen:
                raise ValueError(f"{workload.kind} {workload.namespace or ''}/{workload.name} is listed twice")
            seen.add(key)
        return workloads


class ObservedWorkload(WireModel):
    workload: ObjectReference
    """The workload."""
    result: Literal["Successful", "Failed"] | None = None
    """Successful: a fresh placement was requested; Failed: it could not be (see reason)."""
    reason: str | None = None
    """Why it failed, e.g. ReferencedBindingNotFound."""


class WorkloadRebalancerStatus(WireModel):
    observed_workloads: list[ObservedWorkload] | None = None
    """The result of each workload."""
    observed_generation: int | None = Field(default=None, json_schema_extra=INT64)
    """The generation of the rebalancer the status describes."""
    finish_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When every workload had a result."""


class WorkloadRebalancer(SpecModel):
    """Asks for a fresh placement of the listed workloads (Karmada's WorkloadRebalancer)."""

    api_version: Literal["apps.karmada.io/v1alpha1"] = API_VERSION
    kind: Literal["WorkloadRebalancer"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadRebalancerSpec
    """The workloads to place afresh."""
    status: WorkloadRebalancerStatus | None = None
    """The result per workload."""


class WorkloadRebalancerView(ObjectView):
    """A stored WorkloadRebalancer as the rebalancer controller reads it (see :mod:`controlplane.apis.views`)."""

    __slots__ = ()

    @property
    def workloads(self) -> Sequence[Mapping[str, Any]]:
        """``spec.workloads``: the references to place afresh."""
        return self.spec.get("workloads") or ()

    @property
    def ttl_seconds_after_finished(self) -> Any:
        """``spec.ttlSecondsAfterFinished`` as stored (None: the rebalancer is kept)."""
        return self.spec.get("ttlSecondsAfterFinished")

    @property
    def observed_workloads(self) -> Sequence[Mapping[str, Any]]:
        """``status.observedWorkloads``: the result of each workload so far."""
        return self.status.get("observedWorkloads") or ()

    @property
    def observed_generation(self) -> Any:
        """``status.observedGeneration`` as stored (compared with ``metadata.generation``)."""
        return self.status.get("observedGeneration")

    @property
    def finish_time(self) -> str | None:
        """``status.finishTime``: when every workload had a result (None: not finished)."""
        finished = self.status.get("finishTime")
        return str(finished) if finished else None
