"""Karmada's ``config.karmada.io/v1alpha1`` ResourceInterpreterCustomization, served by the hub.

Cluster-scoped, with a status subresource (the hub reports failing scripts there), validated
by :func:`~controlplane.interpreter.customization_validation.validate_customization`: the target
is required, every hook's Lua script compiles and defines its function, and no other
customization of the same target sets the same hook.
"""

from __future__ import annotations

from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn
from controlplane.interpreter.customization_validation import validate_against_others, validate_customization

CONFIG_GROUP = "config.karmada.io"

RESOURCE_INTERPRETER_CUSTOMIZATION = ResourceType(
    CONFIG_GROUP, "v1alpha1", "ResourceInterpreterCustomization", "resourceinterpretercustomizations",
    "resourceinterpretercustomization", namespaced=False, short_names=("ric",), has_status=True,
    validate=validate_customization,
    validate_against_stored=validate_against_others,
    columns=(
        TableColumn("Target-API-Version", cells.text_at("spec", "target", "apiVersion", none="")),
        TableColumn("Target-Kind", cells.text_at("spec", "target", "kind", none="")),
        AGE,
    ),
)


def interpreter_customization_resources() -> list[ResourceType]:
    """The kinds of ``config.karmada.io`` the hub serves."""
    return [RESOURCE_INTERPRETER_CUSTOMIZATION]
