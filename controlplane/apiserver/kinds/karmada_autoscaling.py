"""Karmada's ``autoscaling.karmada.io/v1alpha1`` FederatedHPA and CronFederatedHPA, served by the hub.

Namespaced, with status subresources, the short names, category and printer columns of Karmada's
CRDs (shown as kube shows a CRD's ``additionalPrinterColumns``), defaulted and validated as Karmada's webhooks do
(:mod:`controlplane.apis.autoscaling_karmada_v1alpha1`). The controllers are
:mod:`controlplane.controllers.federatedhpa`.
"""

from __future__ import annotations

from controlplane.apis import autoscaling_karmada_v1alpha1 as api
from controlplane.apiserver.crd.types import printer_column
from controlplane.apiserver.openapi.structural import schema_of
from controlplane.apiserver.resources import ResourceType, TableColumn, with_kube_rules


def _columns(*columns: tuple[str, str, str]) -> tuple[TableColumn, ...]:
    """Columns of Karmada's CRDs (name, JSONPath, type), served as kube serves a CRD's, AGE last."""
    return tuple(printer_column({"name": name, "jsonPath": json_path, "type": kind})
                 for name, json_path, kind in (*columns, ("AGE", ".metadata.creationTimestamp", "date")))


_REFERENCE = (("REFERENCE-KIND", ".spec.scaleTargetRef.kind", "string"),
              ("REFERENCE-NAME", ".spec.scaleTargetRef.name", "string"))

FEDERATED_HPA = ResourceType(
    api.API_GROUP, "v1alpha1", api.FEDERATED_HPA_KIND, "federatedhpas", "federatedhpa", namespaced=True,
    short_names=("fhpa",), categories=("karmada-io",), has_status=True,
    defaults=api.default_federated_hpa, webhook_denial=api.federated_hpa_denial,
    crd_schema=schema_of(api.API_GROUP, "v1alpha1", api.FEDERATED_HPA_KIND),
    columns=_columns(*_REFERENCE, ("MINPODS", ".spec.minReplicas", "integer"),
                     ("MAXPODS", ".spec.maxReplicas", "integer"), ("REPLICAS", ".status.currentReplicas", "integer")),
)

CRON_FEDERATED_HPA = ResourceType(
    api.API_GROUP, "v1alpha1", api.CRON_FEDERATED_HPA_KIND, "cronfederatedhpas", "cronfederatedhpa",
    namespaced=True, short_names=("cronfhpa",), categories=("karmada-io",), has_status=True,
    defaults=api.default_cron_federated_hpa, defaults_on_read=api.default_cron_federated_hpa,
    webhook_denial=api.cron_federated_hpa_denial,
    crd_schema=schema_of(api.API_GROUP, "v1alpha1", api.CRON_FEDERATED_HPA_KIND),
    columns=_columns(*_REFERENCE),
)


def karmada_autoscaling_resources() -> list[ResourceType]:
    """The kinds of ``autoscaling.karmada.io`` the hub serves, decoded as kube decodes a CRD's
    objects (``with_kube_rules``): a field their CRDs' schemas do not declare is refused under
    ``fieldValidation=Strict`` and dropped with a warning under ``Warn``."""
    return with_kube_rules([FEDERATED_HPA, CRON_FEDERATED_HPA])
