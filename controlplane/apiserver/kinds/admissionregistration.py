"""ValidatingWebhookConfiguration and MutatingWebhookConfiguration (admissionregistration.k8s.io/v1),
cluster-scoped, with kube's table (printers.go: the number of webhooks). Their defaults and
validation are kube's (:mod:`controlplane.apis.kube.admissionregistration`); the hub calls the
webhooks they configure (:mod:`controlplane.apiserver.webhooks`)."""

from __future__ import annotations

from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn

GROUP = "admissionregistration.k8s.io"

_WEBHOOKS = TableColumn(
    "Webhooks", cells.count_at("webhooks"), type="integer",
    description="Webhooks indicates the number of webhooks in this configuration.",
)

VALIDATING_WEBHOOK_CONFIGURATION = ResourceType(
    GROUP, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
    "validatingwebhookconfiguration", namespaced=False, strategic_merge=True,
    categories=("api-extensions",), columns=(_WEBHOOKS, AGE),
)

MUTATING_WEBHOOK_CONFIGURATION = ResourceType(
    GROUP, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
    "mutatingwebhookconfiguration", namespaced=False, strategic_merge=True,
    categories=("api-extensions",), columns=(_WEBHOOKS, AGE),
)
