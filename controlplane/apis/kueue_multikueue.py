"""Kueue's MultiKueueConfig and MultiKueueCluster (``kueue.x-k8s.io``, cluster-scoped, v1beta2 and
v1beta1): the clusters an AdmissionCheck of the ``kueue.x-k8s.io/multikueue`` controller dispatches
workloads to, and how each is reached.

Served so that Kueue's MultiKueue setups apply unchanged, with the schema of Kueue's
``multikueue_types.go`` (its kubebuilder markers), its default (``locationType: Secret``) and its
CEL rule (v1beta2's ``clusterSource`` holds exactly one of ``kubeConfig`` and
``clusterProfileRef``). The versions differ in one place: v1beta1's ``spec.kubeConfig`` is
v1beta2's ``spec.clusterSource.kubeConfig`` (:func:`cluster_to_v1beta1`, :func:`cluster_to_v1beta2`);
the hub stores v1beta1's form.
"""

from __future__ import annotations

import copy
from typing import Annotated, Final, Literal

from pydantic import Field

from controlplane.apis.kube.field import CauseType, FieldError
from controlplane.apis.kube.objects import child, set_nil_default
from controlplane.apis.kueue_names import MULTIKUEUE_CONTROLLER_NAME
from controlplane.apis.kueue_v1beta1 import API_VERSION as _V1BETA1
from controlplane.apis.kueue_v1beta2 import API_VERSION as _V1BETA2
from controlplane.apis.meta import (
    CONDITIONS_BY_TYPE,
    LISTED_AS_SET,
    Condition,
    ObjectMeta,
    SpecModel,
    WireModel,
    served_default,
)
from controlplane.apis.untyped import Obj

#: The controller name of Kueue's MultiKueue admission checks.
CONTROLLER_NAME: Final = MULTIKUEUE_CONTROLLER_NAME
#: The condition of a MultiKueueCluster that says it is connected.
COND_ACTIVE: Final = "Active"
_SOURCES: Final = ("kubeConfig", "clusterProfileRef")


class KubeConfig(SpecModel):
    location: str
    """Where the kubeconfig is: a Secret's name in Kueue's namespace (key "kubeconfig"), or a path
    on the disk of Kueue's controller manager."""
    location_type: Literal["Secret", "Path"] = Field(json_schema_extra=served_default("Secret"))
    """Secret (default, which the kind's defaulting stores) or Path: required at v1beta1."""


class KubeConfigV1beta2(SpecModel):
    location: str = Field(min_length=1, max_length=256)
    """Where the kubeconfig is: a Secret's name in Kueue's namespace (key "kubeconfig"), or a path
    on the disk of Kueue's controller manager."""
    location_type: Literal["Secret", "Path"] | None = Field(
        default=None, json_schema_extra=served_default("Secret")
    )
    """Secret (default, which the kind's defaulting stores) or Path."""


class ClusterProfileReference(SpecModel):
    name: str = Field(min_length=1, max_length=256)
    """The name of the ClusterProfile used to connect to the cluster."""


class MultiKueueClusterSpec(SpecModel):
    kube_config: KubeConfig
    """How to connect to the cluster."""
    cluster_profile_ref: ClusterProfileReference | None = None
    """Kept from a v1beta2 object's clusterSource; no effect in v1beta1."""


class ClusterSource(SpecModel):
    kube_config: KubeConfigV1beta2 | None = None
    """How to connect to the cluster (exactly one of kubeConfig and clusterProfileRef)."""
    cluster_profile_ref: ClusterProfileReference | None = None
    """The ClusterProfile used to connect to the cluster (exactly one of kubeConfig and clusterProfileRef)."""


class MultiKueueClusterSpecV1beta2(SpecModel):
    cluster_source: ClusterSource
    """The source to connect to the cluster."""


class MultiKueueClusterStatus(WireModel):
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_BY_TYPE)
    """Active: whether the cluster is connected."""


class MultiKueueClusterStatusV1beta2(WireModel):
    conditions: list[Condition] | None = Field(default=None, max_length=16, json_schema_extra=CONDITIONS_BY_TYPE)
    """Active: whether the cluster is connected (at most 16 conditions)."""


class MultiKueueCluster(SpecModel):
    """A cluster MultiKueue dispatches workloads to (Kueue's MultiKueueCluster)."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = _V1BETA1
    kind: Literal["MultiKueueCluster"] = "MultiKueueCluster"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MultiKueueClusterSpec | None = None
    """How to connect to the cluster."""
    status: MultiKueueClusterStatus | None = None
    """Whether the cluster is connected."""


class MultiKueueClusterV1beta2(MultiKueueCluster):
    """A cluster MultiKueue dispatches workloads to (Kueue's MultiKueueCluster)."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = _V1BETA2  # type: ignore[assignment]
    spec: MultiKueueClusterSpecV1beta2 | None = None  # type: ignore[assignment]
    """How to connect to the cluster."""
    status: MultiKueueClusterStatusV1beta2 | None = None  # type: ignore[assignment]
    """Whether the cluster is connected."""


class MultiKueueConfigSpec(SpecModel):
    clusters: list[str] = Field(min_length=1, max_length=20, json_schema_extra=LISTED_AS_SET)
    """The MultiKueueClusters the workloads of a ClusterQueue are dispatched to (each once)."""


class MultiKueueConfigSpecV1beta2(SpecModel):
    clusters: list[Annotated[str, Field(max_length=256)]] = Field(min_length=1, max_length=20, json_schema_extra=LISTED_AS_SET)
    """The MultiKueueClusters the workloads of a ClusterQueue are dispatched to (each once, names
    of at most 256 characters)."""


class MultiKueueConfig(SpecModel):
    """The clusters of a MultiKueue admission check (Kueue's MultiKueueConfig)."""

    api_version: Literal["kueue.x-k8s.io/v1beta1"] = _V1BETA1
    kind: Literal["MultiKueueConfig"] = "MultiKueueConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MultiKueueConfigSpec | None = None
    """The clusters."""


class MultiKueueConfigV1beta2(MultiKueueConfig):
    """The clusters of a MultiKueue admission check (Kueue's MultiKueueConfig)."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = _V1BETA2  # type: ignore[assignment]
    spec: MultiKueueConfigSpecV1beta2 | None = None  # type: ignore[assignment]
    """The clusters."""


# --- defaults, rules and conversion -----------------------------------------------------------


def _kube_config(obj: Obj) -> Obj | None:
    spec = child(obj, "spec")
    return child(child(spec, "clusterSource"), "kubeConfig") or child(spec, "kubeConfig")


def cluster_defaults(obj: Obj) -> None:
    """Kueue's CRD default: a kubeConfig's ``locationType`` is Secret when unset (either version)."""
    kube_config = _kube_config(obj)
    if kube_config is not None:
        set_nil_default(kube_config, "locationType", "Secret")


def cluster_source_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """Kueue's CEL rule on v1beta2's ``spec.clusterSource``: exactly one of its sources is set."""
    source = child(child(obj, "spec"), "clusterSource")
    if source is None or sum(field in source for field in _SOURCES) == 1:
        return []
    message = f"exactly one of the fields in [{' '.join(_SOURCES)}] must be set"
    return [FieldError(CauseType.FIELD_VALUE_INVALID, "spec.clusterSource", f'Invalid value: "object": {message}')]


def cluster_to_v1beta1(obj: Obj) -> Obj:
    """A v1beta2 MultiKueueCluster as the hub stores it: ``clusterSource``'s fields in the spec."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = _V1BETA1
    spec = child(out, "spec")
    if spec is not None:
        source = spec.pop("clusterSource", None)
        if isinstance(source, dict):
            spec.update({field: source[field] for field in _SOURCES if field in source})
    return out


def cluster_to_v1beta2(obj: Obj) -> Obj:
    """A stored (v1beta1) MultiKueueCluster at v1beta2: its sources under ``clusterSource``."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = _V1BETA2
    spec = child(out, "spec")
    if spec is not None:
        source = {field: spec.pop(field) for field in _SOURCES if field in spec}
        if source:
            spec["clusterSource"] = source
    return out
