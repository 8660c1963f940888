"""The Multi-Cluster Services kinds served by the hub: ``multicluster.x-k8s.io/v1alpha1``
ServiceExport and ServiceImport, and Karmada's ``networking.karmada.io/v1alpha1``
MultiClusterService and MultiClusterIngress.

Namespaced, with status subresources, the short names, category and printer columns of the CRDs
Karmada ships (shown as kube shows a CRD's ``additionalPrinterColumns``); validated by their models
and, for Karmada's kinds, as karmada-webhook validates (and labels) them
(:mod:`controlplane.apis.multicluster_services`).
"""

from __future__ import annotations

from controlplane.apis import multicluster_services as api
from controlplane.apiserver.crd.types import printer_column
from controlplane.apiserver.resources import AGE, ResourceType

SERVICE_EXPORT = ResourceType(
    api.MCS_API_GROUP, "v1alpha1", api.SERVICE_EXPORT_KIND, "serviceexports", "serviceexport", namespaced=True,
    short_names=("svcex",), has_status=True, model=api.ServiceExport,
    columns=(printer_column({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),),
)

SERVICE_IMPORT = ResourceType(
    api.MCS_API_GROUP, "v1alpha1", api.SERVICE_IMPORT_KIND, "serviceimports", "serviceimport", namespaced=True,
    short_names=("svcim",), has_status=True, model=api.ServiceImport,
    columns=(
        printer_column({"name": "Type", "type": "string", "jsonPath": ".spec.type",
                        "description": "The type of this ServiceImport"}),
        printer_column({"name": "IP", "type": "string", "jsonPath": ".spec.ips",
                        "description": "The VIP for this ServiceImport"}),
        printer_column({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
    ),
)

MULTI_CLUSTER_SERVICE = ResourceType(
    api.KARMADA_NETWORKING_GROUP, "v1alpha1", api.MULTI_CLUSTER_SERVICE_KIND, "multiclusterservices",
    "multiclusterservice", namespaced=True, short_names=("mcs",), categories=("karmada-io",), has_status=True,
    model=api.MultiClusterService, defaults=api.default_mcs,
    webhook_denial=api.mcs_denial, webhook_update_denial=api.mcs_update_denial,
    columns=(AGE,),
)

MULTI_CLUSTER_INGRESS = ResourceType(
    api.KARMADA_NETWORKING_GROUP, "v1alpha1", api.MULTI_CLUSTER_INGRESS_KIND, "multiclusteringresses",
    "multiclusteringress", namespaced=True, short_names=("mci",), categories=("karmada-io",), has_status=True,
    model=api.MultiClusterIngress, webhook_denial=api.mci_denial, columns=(AGE,),
)


def multicluster_service_resources() -> list[ResourceType]:
    """ServiceExport, ServiceImport, MultiClusterService and MultiClusterIngress."""
    return [SERVICE_EXPORT, SERVICE_IMPORT, MULTI_CLUSTER_SERVICE, MULTI_CLUSTER_INGRESS]
