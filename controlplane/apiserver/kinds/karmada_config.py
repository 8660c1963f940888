"""Karmada's ``config.karmada.io/v1alpha1`` ResourceInterpreterCustomization and
ResourceInterpreterWebhookConfiguration, served by the hub.

Cluster-scoped, with a status subresource (the hub reports failing scripts there), validated
by :func:`~controlplane.interpreter.customization_validation.validate_customization` (the target
is required, each hook's script not empty) and refused as karmada-webhook refuses it by
:func:`~controlplane.interpreter.customization_validation.customization_denial` (no other
customization of the same target sets the same hook; every hook's Lua script loads and defines
its function). A webhook configuration is cluster-scoped
without status, validated by
:func:`~controlplane.interpreter.webhook_validation.validate_webhook_configuration`. Both are
typed as Karmada's CRDs type them (:mod:`controlplane.apiserver.openapi.karmada_config_kinds`):
a misspelt field is dropped with a warning, or refused under ``fieldValidation=Strict``.
"""

from __future__ import annotations

from controlplane.apiserver.kinds import cells
from controlplane.apiserver.openapi.structural import schema_of
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn, with_kube_rules
from controlplane.interpreter.customization_validation import customization_denial, validate_customization
from controlplane.interpreter.webhook_validation import validate_webhook_configuration

CONFIG_GROUP = "config.karmada.io"

RESOURCE_INTERPRETER_CUSTOMIZATION = ResourceType(
    CONFIG_GROUP, "v1alpha1", "ResourceInterpreterCustomization", "resourceinterpretercustomizations",
    "resourceinterpretercustomization", namespaced=False, short_names=("ric",), has_status=True,
    validate=validate_customization,
    webhook_against_stored=customization_denial,
    crd_schema=schema_of(CONFIG_GROUP, "v1alpha1", "ResourceInterpreterCustomization"),
    columns=(
        TableColumn("Target-API-Version", cells.text_at("spec", "target", "apiVersion", none="")),
        TableColumn("Target-Kind", cells.text_at("spec", "target", "kind", none="")),
        AGE,
    ),
)

RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATION = ResourceType(
    CONFIG_GROUP, "v1alpha1", "ResourceInterpreterWebhookConfiguration", "resourceinterpreterwebhookconfigurations",
    "resourceinterpreterwebhookconfiguration", namespaced=False,
    validate=validate_webhook_configuration,
    crd_schema=schema_of(CONFIG_GROUP, "v1alpha1", "ResourceInterpreterWebhookConfiguration"),
)


def interpreter_customization_resources() -> list[ResourceType]:
    """The kinds of ``config.karmada.io`` the hub serves, their undeclared fields found by their schemas."""
    return with_kube_rules([RESOURCE_INTERPRETER_CUSTOMIZATION, RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATION])
