"""ValidatingWebhookConfiguration, MutatingWebhookConfiguration, ValidatingAdmissionPolicy and
ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1), cluster-scoped, with kube's
tables (printers.go). Their defaults and validation are kube's
(:mod:`controlplane.apis.kube.admissionregistration`, :mod:`controlplane.apis.kube.admissionpolicy`);
the hub calls the webhooks and runs the policies they configure (:mod:`controlplane.apiserver.webhooks`)."""

from __future__ import annotations

from datetime import datetime

from controlplane.apis.kube import field
from controlplane.apis.untyped import Obj, dig
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


def _param_kind(obj: Obj, _now: datetime) -> str:
    """kube's ParamKind cell: ``<apiVersion>/<kind>``, or ``<unset>``."""
    kind = field.mapping(dig(obj, "spec", "paramKind"))
    return f"{kind.get('apiVersion') or ''}/{kind.get('kind') or ''}" if kind else "<unset>"


def _param_ref(obj: Obj, _now: datetime) -> str:
    """kube's ParamRef cell: ``<namespace>/<name>`` (``*`` for no namespace), the selector, or ``<unset>``."""
    ref = field.mapping(dig(obj, "spec", "paramRef"))
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if ref.get("selector") is not None:
        return cells.format_label_selector(ref["selector"])
    return "<unset>"


VALIDATING_ADMISSION_POLICY = ResourceType(
    GROUP, "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
    "validatingadmissionpolicy", namespaced=False, strategic_merge=True, has_status=True,
    categories=("api-extensions",), columns=(
        TableColumn(
            "Validations", cells.count_at("spec", "validations"), type="integer",
            description="Validations indicates the number of validation rules defined in this configuration",
        ),
        TableColumn(
            "ParamKind", _param_kind,
            description="ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ),
)

VALIDATING_ADMISSION_POLICY_BINDING = ResourceType(
    GROUP, "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings",
    "validatingadmissionpolicybinding", namespaced=False, strategic_merge=True,
    categories=("api-extensions",), columns=(
        TableColumn(
            "PolicyName", cells.text_at("spec", "policyName", none=""),
            description="PolicyName indicates the policy definition which the policy binding binded to",
        ),
        TableColumn(
            "ParamRef", _param_ref,
            description="ParamRef indicates the param resource which sets the configration param",
        ),
        AGE,
    ),
)
