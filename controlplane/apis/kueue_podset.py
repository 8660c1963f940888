"""Kueue's ``PodSetUpdate`` (a Workload's ``status.admissionChecks[].podSetUpdates``): what an
admission check adds to a pod set's pod template as its job starts, with the rules of Kueue's CRD.
The merge itself is :func:`controlplane.admission.checks.start_pod_template`.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from controlplane.apis.meta import LISTED_ATOMIC, Toleration, WireModel


class PodSetUpdate(WireModel):
    """What an admission check adds to a pod set's pod template as its job starts."""

    name: str = Field(min_length=1)
    """The pod set."""
    labels: dict[str, str] | None = Field(default=None, max_length=8)
    """Merged into the pod template's labels (a key it sets otherwise: the job fails to start)."""
    annotations: dict[str, str] | None = Field(default=None, max_length=8)
    """Merged into the pod template's annotations."""
    node_selector: dict[str, str] | None = Field(default=None, max_length=8)
    """Merged into the pod template's nodeSelector, with the flavor's node labels."""
    tolerations: list[Toleration] | None = Field(default=None, max_length=8, json_schema_extra=LISTED_ATOMIC)
    """Appended to the pod template's tolerations."""

    @field_validator("tolerations")
    @classmethod
    def _tolerations(cls, tolerations: list[Toleration] | None) -> list[Toleration] | None:
        for t in tolerations or ():  # the rules of Kueue's CRD, with its messages
            if not t.key and t.operator != "Exists":
                raise ValueError("operator must be Exists when 'key' is empty, which means 'match all values and all keys'")
            if t.toleration_seconds is not None and t.effect != "NoExecute":
                raise ValueError("effect must be 'NoExecute' when 'tolerationSeconds' is set")
            if t.operator == "Exists" and t.value is not None:
                raise ValueError("a value must be empty when 'operator' is 'Exists'")
        return tolerations
