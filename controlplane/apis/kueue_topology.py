"""Kueue's Topology (``kueue.x-k8s.io``, cluster-scoped, v1beta2, v1beta1 and v1alpha1 with the same
fields): the node label levels of topology-aware scheduling, which a ResourceFlavor names in its
``topologyName``.

Served so that Kueue's topology-aware setups apply unchanged, with the schema of Kueue's
``topology_types.go``: 1 to 16 levels, each a node label key, and its CEL rules
(:func:`levels_errors`), reported as kube reports a failed rule. The hub stores it: pods are placed
on nodes by the members, so no topology domain is assigned at the hub.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from controlplane.apis.kube.field import CauseType, FieldError
from controlplane.apis.meta import LISTED_ATOMIC, ObjectMeta, SpecModel

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
_LABEL_KEY: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


class TopologyLevel(SpecModel):
    node_label: str = Field(min_length=1, max_length=316, pattern=_LABEL_KEY)
    """The node label of this level, e.g. cloud.provider.com/topology-rack."""


class TopologySpec(SpecModel):
    levels: list[TopologyLevel] = Field(min_length=1, max_length=16, json_schema_extra=LISTED_ATOMIC)
    """The levels, from the widest (a block) to the narrowest (a host); immutable."""


class Topology(SpecModel):
    """The levels of a topology (Kueue's Topology), named by ResourceFlavors' topologyName."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = "kueue.x-k8s.io/v1beta1"
    kind: Literal["Topology"] = "Topology"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TopologySpec | None = None
    """The topology's levels."""


class TopologyV1beta2(Topology):
    """The levels of a topology (Kueue's Topology), named by ResourceFlavors' topologyName."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"  # type: ignore[assignment]


class TopologyV1alpha1(Topology):
    """The levels of a topology (Kueue's Topology), named by ResourceFlavors' topologyName."""

    api_version: Literal["kueue.x-k8s.io/v1alpha1"] = "kueue.x-k8s.io/v1alpha1"  # type: ignore[assignment]


def _failed_rule(message: str) -> FieldError:
    return FieldError(CauseType.FIELD_VALUE_INVALID, "spec.levels", f'Invalid value: "array": {message}')


def levels_errors(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """Kueue's CEL rules on ``spec.levels``: unchanged on update, each level once, and the host
    name label only as the last level."""
    levels = (obj.get("spec") or {}).get("levels")
    if not isinstance(levels, list):
        return []
    errors = []
    if old is not None and levels != (old.get("spec") or {}).get("levels"):
        errors.append(_failed_rule("field is immutable"))
    if any(levels.count(level) > 1 for level in levels):
        errors.append(_failed_rule("must be unique"))
    labels = [level.get("nodeLabel") if isinstance(level, dict) else None for level in levels]
    if HOSTNAME_LABEL in labels and labels[-1] != HOSTNAME_LABEL:
        errors.append(_failed_rule(f"the {HOSTNAME_LABEL} label can only be used at the lowest level of topology"))
    return errors
