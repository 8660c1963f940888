"""Kueue's ``PodSetUpdate`` (a Workload's ``status.admissionChecks[].podSetUpdates``): what an
admission check adds to a pod set's pod template as its job starts, with the rules of Kueue's CRD.
The merge itself is :func:`controlplane.admission.checks.start_pod_template`.
"""

from __future__ import annotations

from pydantic import Field

from controlplane.apis.meta import LISTED_ATOMIC, SpecModel, WireModel


class CrdToleration(SpecModel):
    """kube's Toleration as Kueue's CRDs type it (a ResourceFlavor's ``spec.tolerations``, a check's
    ``podSetUpdates[].tolerations``): strings, checked by the CRDs' CEL rules (:mod:`.kueue_rules`)."""

    key: str | None = None
    """The taint key the toleration matches; empty with operator Exists matches every taint."""
    operator: str | None = None
    """How the key relates to the value: Exists or Equal (the default)."""
    value: str | None = None
    """The taint value matched with operator Equal; empty with Exists."""
    effect: str | None = None
    """The taint effect matched (NoSchedule, PreferNoSchedule or NoExecute); empty matches all."""
    toleration_seconds: int | None = None
    """How long a NoExecute taint is tolerated before eviction; unset: forever."""


class PodSetUpdate(WireModel):
    """What an admission check adds to a pod set's pod template as its job starts."""

    name: str
    """The pod set."""
    labels: dict[str, str] | None = None
    """Merged into the pod template's labels (a key it sets otherwise: the job fails to start)."""
    annotations: dict[str, str] | None = None
    """Merged into the pod template's annotations."""
    node_selector: dict[str, str] | None = None
    """Merged into the pod template's nodeSelector, with the flavor's node labels."""
    tolerations: list[CrdToleration] | None = Field(default=None, max_length=8, json_schema_extra=LISTED_ATOMIC)
    """Appended to the pod template's tolerations; each is checked as a pod's toleration is."""
