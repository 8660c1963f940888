"""Karmada's ``autoscaling.karmada.io/v1alpha1`` FederatedHPA and CronFederatedHPA, served by the hub.

Namespaced, with status subresources, the short names, category and printer columns of Karmada's
CRDs, defaulted and validated as Karmada's webhooks do
(:mod:`controlplane.apis.autoscaling_karmada_v1alpha1`). The controllers are
:mod:`controlplane.controllers.federatedhpa`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controlplane.apis import autoscaling_karmada_v1alpha1 as api
from controlplane.apis.untyped import dig
from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn


def _int_or_none(*keys: str) -> cells.Cell:
    """A CRD's integer column: the value, or none (``<none>``) when unset."""

    def get(obj: dict[str, Any], _now: datetime) -> Any:
        value = dig(obj, *keys)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return get


_REFERENCE = (
    TableColumn("REFERENCE-KIND", cells.text_at("spec", "scaleTargetRef", "kind")),
    TableColumn("REFERENCE-NAME", cells.text_at("spec", "scaleTargetRef", "name")),
)

FEDERATED_HPA = ResourceType(
    api.API_GROUP, "v1alpha1", api.FEDERATED_HPA_KIND, "federatedhpas", "federatedhpa", namespaced=True,
    short_names=("fhpa",), categories=("karmada-io",), has_status=True,
    defaults=api.default_federated_hpa, webhook_denial=api.federated_hpa_denial,
    columns=(
        *_REFERENCE,
        TableColumn("MINPODS", _int_or_none("spec", "minReplicas"), type="integer"),
        TableColumn("MAXPODS", _int_or_none("spec", "maxReplicas"), type="integer"),
        TableColumn("REPLICAS", _int_or_none("status", "currentReplicas"), type="integer"),
        AGE,
    ),
)

CRON_FEDERATED_HPA = ResourceType(
    api.API_GROUP, "v1alpha1", api.CRON_FEDERATED_HPA_KIND, "cronfederatedhpas", "cronfederatedhpa",
    namespaced=True, short_names=("cronfhpa",), categories=("karmada-io",), has_status=True,
    defaults=api.default_cron_federated_hpa, webhook_denial=api.cron_federated_hpa_denial,
    columns=(*_REFERENCE, AGE),
)


def karmada_autoscaling_resources() -> list[ResourceType]:
    """The kinds of ``autoscaling.karmada.io`` the hub serves."""
    return [FEDERATED_HPA, CRON_FEDERATED_HPA]
