"""The Multi-Cluster Services kinds Karmada users apply: ``multicluster.x-k8s.io/v1alpha1``
ServiceExport and ServiceImport (the CRDs Karmada ships, from kubernetes-sigs/mcs-api) and
Karmada's ``networking.karmada.io/v1alpha1`` MultiClusterService and MultiClusterIngress.

Field-compatible with those CRDs, so a Karmada user's YAML applies unchanged; MultiClusterService
is also checked and labelled as karmada-webhook checks and labels it (:func:`mcs_denial`,
:func:`mcs_update_denial`, :func:`default_mcs`). In: wire objects. Out: the models the hub
validates with and the webhook's refusals. The hub stores these objects and propagates them as any
namespaced kind a policy selects; a MultiClusterService's Service and EndpointSlices are moved by
:mod:`controlplane.controllers.multiclusterservices` (the slices' rules:
:mod:`controlplane.apis.mcs_endpointslices`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import Field

from controlplane.apis.cluster_v1alpha1 import karmada_cluster_name_errors
from controlplane.apis.events import EventType
from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import dns_1035_errors, dns_label_errors, port_number_errors
from controlplane.apis.kube.validate_networking import ingress_spec_errors
from controlplane.apis.meta import INT32, Condition, ObjectMeta, SpecModel, WireModel, published_as

MCS_API_GROUP: Final = "multicluster.x-k8s.io"
KARMADA_NETWORKING_GROUP: Final = "networking.karmada.io"
SERVICE_EXPORT_KIND: Final = "ServiceExport"
SERVICE_IMPORT_KIND: Final = "ServiceImport"
MULTI_CLUSTER_SERVICE_KIND: Final = "MultiClusterService"
MULTI_CLUSTER_INGRESS_KIND: Final = "MultiClusterIngress"
MCI_WEBHOOK: Final = "multiclusteringress.karmada.io"
#: karmada-webhook's name for its MultiClusterService webhooks.
MCS_WEBHOOK: Final = "multiclusterservice.karmada.io"
#: The label karmada-webhook gives every MultiClusterService (a new UUID when absent).
PERMANENT_ID_LABEL: Final = "multiclusterservice.karmada.io/permanent-id"
EXPOSURE_TYPES: Final = ("CrossCluster", "LoadBalancer")


class ExportStatus(WireModel):
    conditions: list[Condition] | None = None
    """The export's state, written by the multi-cluster service implementation's controller."""


class ServiceExport(SpecModel):
    """ServiceExport declares that the Service with the same name and namespace as this export
    should be consumable from other clusters."""

    api_version: Literal["multicluster.x-k8s.io/v1alpha1"] = "multicluster.x-k8s.io/v1alpha1"
    kind: Literal["ServiceExport"] = SERVICE_EXPORT_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: ExportStatus | None = None
    """The current state of the exported service."""


class ServiceImportPort(SpecModel):
    name: str | None = None
    """The name of this port within the service (a DNS label; unique within the service)."""
    protocol: str | None = None
    """The IP protocol for this port: TCP, UDP or SCTP (default TCP)."""
    app_protocol: str | None = None
    """The application protocol for this port (a label-syntax name)."""
    port: int = Field(ge=-(2**31), lt=2**31)
    """The port that will be exposed by this service."""


class ClientIPConfig(SpecModel):
    timeout_seconds: int | None = Field(default=None, ge=-(2**31), lt=2**31)
    """Seconds of ClientIP session stickiness (default 10800)."""


class SessionAffinityConfig(SpecModel):
    client_ip: ClientIPConfig | None = Field(default=None, alias="clientIP")
    """The configuration of ClientIP-based session affinity."""


class ServiceImportSpec(SpecModel):
    ports: list[ServiceImportPort]
    """The ports the imported service exposes."""
    ips: list[str] | None = Field(default=None, max_length=1)
    """The VIP of this service when its type is ClusterSetIP."""
    type: Literal["ClusterSetIP", "Headless"]
    """The type of this service: ClusterSetIP or Headless."""
    session_affinity: str | None = None
    """ClientIP or None (default None); ignored when the type is Headless."""
    session_affinity_config: SessionAffinityConfig | None = None
    """The session affinity's configuration."""


class ImportClusterStatus(WireModel):
    cluster: str
    """The name of an exporting cluster."""


class ImportStatus(WireModel):
    clusters: list[ImportClusterStatus] | None = None
    """The exporting clusters this service was derived from."""


class ServiceImport(SpecModel):
    """ServiceImport describes a service imported from clusters in a ClusterSet."""

    api_version: Literal["multicluster.x-k8s.io/v1alpha1"] = "multicluster.x-k8s.io/v1alpha1"
    kind: Literal["ServiceImport"] = SERVICE_IMPORT_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ServiceImportSpec | None = None
    """The behaviour of the ServiceImport."""
    status: ImportStatus | None = None
    """The exported services that form the multi-cluster service this ServiceImport refers to."""


class ExposurePort(SpecModel):
    name: str | None = None
    """The name of the Service's port to expose (as the Service names it)."""
    port: int = Field(ge=-(2**31), lt=2**31, json_schema_extra=INT32)
    """The exposed service port."""


class ExposureRange(SpecModel):
    cluster_names: list[str] | None = None
    """The clusters selected."""


class ClusterSelector(SpecModel):
    name: str | None = None
    """The name of the cluster selected."""


class MultiClusterServiceSpec(SpecModel):
    types: list[str]
    """How to expose the Service of this name: CrossCluster or LoadBalancer (one of them)."""
    ports: list[ExposurePort] | None = None
    """The ports exposed (absent: all of the Service's)."""
    range: ExposureRange | None = None
    """Deprecated, in favor of providerClusters/consumerClusters: the clusters the Service is exposed in."""
    service_provision_clusters: list[str] | None = None
    """Deprecated, in favor of providerClusters: the clusters providing the Service's backends."""
    service_consumption_clusters: list[str] | None = None
    """Deprecated, in favor of consumerClusters: the clusters the Service is exposed in, for clients."""
    provider_clusters: list[ClusterSelector] | None = None
    """The clusters providing the Service's backends (absent: all clusters)."""
    consumer_clusters: list[ClusterSelector] | None = None
    """The clusters the Service is exposed in, for clients (absent: all clusters)."""


class MultiClusterServiceStatus(WireModel):
    conditions: list[Condition] | None = None
    """The state of the multi-cluster service (ServiceApplied)."""
    load_balancer: dict[str, Any] | None = None
    """The load balancer's ingress points, if one is present."""


class MultiClusterService(SpecModel):
    """MultiClusterService exposes the Service of its name across clusters (CrossCluster) or
    through an external load balancer (LoadBalancer) (Karmada's kind)."""

    api_version: Literal["networking.karmada.io/v1alpha1"] = "networking.karmada.io/v1alpha1"
    kind: Literal["MultiClusterService"] = MULTI_CLUSTER_SERVICE_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MultiClusterServiceSpec
    """The desired state of the MultiClusterService."""
    status: MultiClusterServiceStatus | None = None
    """The current state of the MultiClusterService."""


class ServiceLocation(WireModel):
    name: str
    """The referenced Service, in the MultiClusterIngress's namespace."""
    clusters: list[str] | None = None
    """The clusters the Service is in."""


class MultiClusterIngressStatus(WireModel):
    load_balancer: dict[str, Any] | None = Field(
        default=None, json_schema_extra=published_as("IngressLoadBalancerStatus")
    )
    """The current status of the load-balancer (an Ingress's)."""
    service_locations: list[ServiceLocation] | None = None
    """Where the backend Services are, set by Karmada's controller (stored, not set by the hub)."""
    traffic_block_clusters: list[str] | None = None
    """The clusters whose backend addresses a multi-cluster cloud provider leaves out of the load
    balancer (stored, not acted on by the hub)."""


class MultiClusterIngress(SpecModel):
    """A collection of rules that let inbound connections reach backends across clusters (Karmada's
    kind: an Ingress's spec; an Ingress's status with Karmada's serviceLocations and
    trafficBlockClusters)."""

    api_version: Literal["networking.karmada.io/v1alpha1"] = "networking.karmada.io/v1alpha1"
    kind: Literal["MultiClusterIngress"] = MULTI_CLUSTER_INGRESS_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: dict[str, Any] = Field(default_factory=dict, json_schema_extra=published_as("IngressSpec"))
    """The desired state of the MultiClusterIngress (an Ingress's spec)."""
    status: MultiClusterIngressStatus | None = None
    """The current state of the MultiClusterIngress: an Ingress's status and where its backends are."""


def mci_denial(obj: dict[str, Any]) -> tuple[str, str] | None:
    """karmada-webhook's refusal of a MultiClusterIngress (create and update): kube's
    ``ValidateIngressSpec`` of its spec, as Karmada lifts it."""
    errors = ingress_spec_errors(field.mapping(obj.get("spec")), rules_type="v1.IngressRule")
    return (MCI_WEBHOOK, field.error_list_text(errors)) if errors else None


# --- karmada-webhook ------------------------------------------------------------------------


def default_mcs(obj: dict[str, Any]) -> None:
    """karmada-webhook's mutation: a permanent id label (a new UUID) when the object has none."""
    metadata = obj.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        labels = metadata["labels"] = {}
    if not labels.get(PERMANENT_ID_LABEL):
        labels[PERMANENT_ID_LABEL] = str(uuid.uuid4())


def _spec_errors(obj: dict[str, Any]) -> list[FieldError]:
    """karmada-webhook's ``validateMCS``: the name a DNS-1035 label, ports, one known type,
    the provider and consumer clusters' names."""
    errors: list[FieldError] = []
    name = field.mapping(obj.get("metadata")).get("name")
    if isinstance(name, str) and name:
        errors.extend(field.invalid("metadata.name", name, message) for message in dns_1035_errors(name))
    spec = field.mapping(obj.get("spec"))
    names: set[str] = set()
    for path, port in field.indexed(spec.get("ports"), "spec.ports"):
        port_name = port.get("name")
        if isinstance(port_name, str) and port_name:
            errors.extend(field.invalid(f"{path}.name", port_name, m) for m in dns_label_errors(port_name))
            if port_name in names:
                errors.append(field.duplicate(f"{path}.name", port_name))
            names.add(port_name)
        number = port.get("port")
        if isinstance(number, int):
            errors.extend(field.invalid(f"{path}.port", number, m) for m in port_number_errors(number))
    types = field.items(spec.get("types"))
    for index, exposure in enumerate(types):
        if exposure not in EXPOSURE_TYPES:
            errors.append(field.invalid(f"spec.types[{index}]", exposure, "ExposureType Error"))
    if len({str(t) for t in types}) > 1:
        errors.append(
            field.invalid(
                "spec.types", types, "MultiClusterService types should not contain more than one type"
            )
        )
    # Karmada's webhook names these paths under spec.range, as written here.
    for key in ("providerClusters", "consumerClusters"):
        for path, selector in field.indexed(spec.get(key), f"spec.range.{key}"):
            errors.extend(karmada_cluster_name_errors(selector.get("name"), path))
    return errors


def mcs_denial(obj: dict[str, Any]) -> tuple[str, str] | None:
    """karmada-webhook's refusal of a MultiClusterService on create, or None."""
    errors = _spec_errors(obj)
    return (MCS_WEBHOOK, field.error_list_text(errors)) if errors else None


def mcs_update_denial(obj: dict[str, Any], old: dict[str, Any]) -> tuple[str, str] | None:
    """karmada-webhook's refusal of an update: ``spec.types`` changed (immutable), then the
    create's checks."""
    errors: list[FieldError] = []
    old_types = field.mapping(old.get("spec")).get("types")
    if field.mapping(obj.get("spec")).get("types") != old_types:
        errors.append(field.invalid("spec.types", old_types, "MultiClusterService types are immutable"))
    errors.extend(_spec_errors(obj))
    return (MCS_WEBHOOK, field.error_list_text(errors)) if errors else None


def exposure_clusters(obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The provider and consumer clusters a MultiClusterService names (``providerClusters`` and
    ``consumerClusters``, else the deprecated ``serviceProvisionClusters`` and
    ``serviceConsumptionClusters``); an empty list means every cluster."""
    spec = field.mapping(obj.get("spec"))

    def names(key: str, deprecated: str) -> list[str]:
        selectors = [s.get("name") for s in field.items(spec.get(key)) if isinstance(s, dict)]
        chosen = selectors or field.items(spec.get(deprecated))
        return sorted({n for n in chosen if isinstance(n, str) and n})

    return names("providerClusters", "serviceProvisionClusters"), names(
        "consumerClusters", "serviceConsumptionClusters"
    )


# --- what the hub reports -------------------------------------------------------------------

#: Karmada's condition types of the Service's propagation and of the EndpointSlices' dispatch.
SERVICE_APPLIED: Final = "ServiceApplied"
ENDPOINT_SLICE_DISPATCHED: Final = "EndpointSliceDispatched"
#: Karmada's reason of ``ServiceApplied=True``, and of ``EndpointSliceDispatched=True``.
SERVICE_APPLIED_SUCCEED: Final = "ServiceAppliedSucceed"
ENDPOINT_SLICE_DISPATCHED_SUCCEED: Final = "EndpointSliceDispatchedSucceed"
#: Karmada's labels on the Works made for a MultiClusterService (``util.MultiClusterServiceNameLabel``,
#: ``...NamespaceLabel``; the permanent id is :data:`PERMANENT_ID_LABEL`).
LABEL_MCS_NAME: Final = "multiclusterservice.karmada.io/name"
LABEL_MCS_NAMESPACE: Final = "multiclusterservice.karmada.io/namespace"


#: Karmada's Event reasons on a MultiClusterService (``pkg/events``), recorded by its
#: multiclusterservice and endpointslice-dispatch controllers.
SYNC_SERVICE_SUCCEED: Final = "SyncServiceSucceed"
SYNC_SERVICE_FAILED: Final = "SyncServiceFailed"
DISPATCH_ENDPOINT_SLICE_SUCCEED: Final = "DispatchEndpointSliceSucceed"
CLUSTER_NOT_FOUND: Final = "ClusterNotFound"
API_INCOMPATIBLE: Final = "APIIncompatible"


@dataclass(frozen=True, slots=True)
class Skipped:
    """The clusters a MultiClusterService names that the hub skips: those it does not have, and
    those it has that are not Ready."""

    missing_providers: tuple[str, ...] = ()
    missing_consumers: tuple[str, ...] = ()
    unready_providers: tuple[str, ...] = ()
    unready_consumers: tuple[str, ...] = ()
    #: Providers and consumers that do not serve the EndpointSlice API (their Cluster's
    #: ``apiEnablements`` does not list it; for a consumer whose Cluster lists no APIs, its agent
    #: said so of a slice's Work).
    incompatible_providers: tuple[str, ...] = ()
    incompatible_consumers: tuple[str, ...] = ()


def _skip_events(
    role: str, missing: tuple[str, ...], unready: tuple[str, ...], what: str
) -> list[tuple[EventType, str, str]]:
    """Karmada's Warnings for the ``role`` (Provider, Consumer) clusters it skips: not found, or
    not Ready (``what``: what it skips propagating to them)."""
    out = [(EventType.WARNING, CLUSTER_NOT_FOUND, f"{role} cluster {c} is not found") for c in missing]
    out += [
        (EventType.WARNING, SYNC_SERVICE_FAILED, f"{role} cluster {c} is not ready, skip to propagate {what}")
        for c in unready
    ]
    return out


def mcs_events(
    obj: dict[str, Any],
    *,
    service_found: bool,
    bound_by: str | None,
    collected_from: list[str],
    skipped: Skipped,
) -> list[tuple[EventType, str, str]]:
    """The Events (type, reason, message) Karmada's controllers record on a ``CrossCluster``
    MultiClusterService for what the hub did: the multiclusterservice controller's (a provider
    not found, not Ready or without the EndpointSlice API, then the Service propagated or not), and, once some provider's slices
    are collected, the endpointslice-dispatch controller's (a consumer not found, not Ready or
    without the EndpointSlice API, then the slices dispatched). Nothing for another type, which Karmada's controllers ignore."""
    if "CrossCluster" not in field.items(field.mapping(obj.get("spec")).get("types")):
        return []
    name = field.mapping(obj.get("metadata")).get("name")
    out = _skip_events(
        "Provider", skipped.missing_providers, skipped.unready_providers, "MultiClusterService"
    )
    out += [
        (EventType.WARNING, API_INCOMPATIBLE, f"Provider cluster {c} does not support EndpointSlice")
        for c in skipped.incompatible_providers
    ]
    if not service_found:
        out.append((EventType.WARNING, SYNC_SERVICE_FAILED, f'services "{name}" not found'))
    elif bound_by is not None:
        [applied, _] = mcs_conditions(obj, service_found=True, bound_by=bound_by)
        out.append((EventType.WARNING, SYNC_SERVICE_FAILED, applied["message"]))
    else:
        out.append((EventType.NORMAL, SYNC_SERVICE_SUCCEED, "Service is propagated to target clusters."))
    if collected_from:
        out += _skip_events("Consumer", skipped.missing_consumers, skipped.unready_consumers, "EndpointSlice")
        out += [
            (EventType.WARNING, API_INCOMPATIBLE, f"Consumer cluster {c} does not support EndpointSlice")
            for c in skipped.incompatible_consumers
        ]
        out.append(
            (EventType.NORMAL, DISPATCH_ENDPOINT_SLICE_SUCCEED, "EndpointSlice are dispatched successfully")
        )
    return out


def _named(clusters: list[str]) -> str:
    return ", ".join(clusters) if clusters else "every cluster"


def mcs_conditions(
    obj: dict[str, Any],
    *,
    service_found: bool,
    bound_by: str | None = None,
    collected_from: list[str] | None = None,
) -> list[dict[str, str]]:
    """The conditions the hub writes on a MultiClusterService (without their times). ``service_found``:
    the hub has the Service of the MultiClusterService's name; ``bound_by``: the ResourceBinding
    (``namespace/name``) a PropagationPolicy made for that Service, which the hub leaves it to.
    Otherwise the hub propagates the Service (Karmada's ``ServiceAppliedSucceed``). ``collected_from``:
    the provider clusters whose agents reported EndpointSlices of the Service, which the hub
    dispatched to the consumer clusters (Karmada's ``EndpointSliceDispatchedSucceed``); with none,
    ``EndpointSliceDispatched`` is False, ``EndpointSlicesNotCollected``."""
    spec = field.mapping(obj.get("spec"))
    meta = field.mapping(obj.get("metadata"))
    service = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    providers, consumers = exposure_clusters(obj)
    if "CrossCluster" not in field.items(spec.get("types")):
        return [
            {
                "type": SERVICE_APPLIED,
                "status": "False",
                "reason": "LoadBalancerNotProvided",
                "message": f"no multi-cluster load balancer serves the hub: Service {service} is not exposed through one",
            }
        ]
    if not service_found:
        applied = {
            "type": SERVICE_APPLIED,
            "status": "False",
            "reason": "ServiceNotFound",
            "message": f"Service {service} does not exist on the hub",
        }
    elif bound_by is not None:
        applied = {
            "type": SERVICE_APPLIED,
            "status": "False",
            "reason": "ServicePropagatedByPolicy",
            "message": f"Service {service} is propagated by a PropagationPolicy (ResourceBinding {bound_by}): the hub "
            f"leaves it there and writes no Work for the MultiClusterService; stop selecting the Service "
            f"with the policy for it to go to the provider clusters ({_named(providers)}) and consumer "
            f"clusters ({_named(consumers)})",
        }
    else:
        applied = {
            "type": SERVICE_APPLIED,
            "status": "True",
            "reason": SERVICE_APPLIED_SUCCEED,
            "message": "Service is propagated to target clusters.",
        }
    if collected_from:
        return [
            applied,
            {
                "type": ENDPOINT_SLICE_DISPATCHED,
                "status": "True",
                "reason": ENDPOINT_SLICE_DISPATCHED_SUCCEED,
                "message": "EndpointSlice are dispatched successfully",
            },
        ]
    dispatched = {
        "type": ENDPOINT_SLICE_DISPATCHED,
        "status": "False",
        "reason": "EndpointSlicesNotCollected",
        "message": f"no provider cluster ({_named(providers)}) has reported EndpointSlices of Service {service}, so "
        f"none are dispatched to the consumer clusters ({_named(consumers)})",
    }
    return [applied, dispatched]
