"""Schemas of Karmada's ``config.karmada.io/v1alpha1`` kinds, which the hub stores without a
model: ResourceInterpreterCustomization and ResourceInterpreterWebhookConfiguration.

Every field of Karmada's CRDs is declared with its type and requirements (a hook's
``luaScript``, a customization's ``target`` and ``customizations``, a webhook's ``name``,
``clientConfig`` and ``interpreterContextVersions``, a rule's four lists); nothing is kept open,
as the CRDs keep nothing open. So :mod:`.structural` drops (or, under ``fieldValidation=Strict``,
refuses) a misspelt field, as a cluster with the CRDs does. Beyond the CRDs: the
``componentResource`` hook (``GetComponents``, newer Karmada's) and a customization's
``status.conditions``, where the hub reports whether the scripts are in force. A rule's
``operations`` take any string, as the CRD's do: the admission check names the unknown ones
(:mod:`controlplane.interpreter.webhook_validation`).

In kube's OpenAPI v2 dialect, keyed by definition name. Pure: constants and a lookup.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.openapi.extra_kinds import (
    CONDITION,
    array_of,
    int32,
    kind_definition,
    ref,
    scalar,
    struct,
)
from controlplane.apiserver.openapi.models import type_meta_properties
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, reachable

_GROUP = "config.karmada.io"
_VERSION = "v1alpha1"
_PREFIX = "io.karmada.config.v1alpha1."
_CUSTOMIZATION = "ResourceInterpreterCustomization"
_WEBHOOK_CONFIGURATION = "ResourceInterpreterWebhookConfiguration"

#: Each hook of a customization and what its Lua script defines.
_HOOKS = {
    "retention": "Retain(desiredObj, observedObj), returning the desired object with the member's runtime values kept",
    "replicaResource": "GetReplicas(desiredObj), returning the replica count and each replica's requirements",
    "componentResource": "GetComponents(desiredObj), returning the components of a multi-template workload",
    "replicaRevision": "ReviseReplica(desiredObj, desiredReplica), returning the object with its replicas revised",
    "statusReflection": "ReflectStatus(observedObj), returning the status to collect from a member",
    "statusAggregation": "AggregateStatus(desiredObj, statusItems), returning the template with the members' statuses folded in",
    "healthInterpretation": "InterpretHealth(observedObj), returning whether the member's object is healthy",
    "dependencyInterpretation": "GetDependencies(desiredObj), returning the objects it depends on",
}


def _hook(name: str, function: str) -> dict[str, Any]:
    script = scalar(f"The Lua script, a whole function definition: {function}.")
    return {**struct(f"The {name} rule: a Lua script.", {"luaScript": script}), "required": ["luaScript"]}


def _strings(description: str) -> dict[str, Any]:
    return array_of(description, {"type": "string"})


_DEFINITIONS: dict[str, Any] = {
    _PREFIX + "ResourceInterpreterCustomizationSpec": {
        **struct("The kind customized and the Lua scripts that interpret it.", {
            "target": {**struct("The kind the customization applies to.", {
                "apiVersion": scalar("The API version of the target kind."),
                "kind": scalar("The target kind."),
            }), "required": ["apiVersion", "kind"]},
            "customizations": struct(
                "The interpretation rules; each set hook replaces the built-in rule for the kind.",
                {name: _hook(name, function) for name, function in _HOOKS.items()},
            ),
        }),
        "required": ["customizations", "target"],
    },
    _PREFIX + "ResourceInterpreterCustomizationStatus": struct(
        "Whether the customization's scripts are in force (the hub's addition; Karmada's kind has no status).", {
            "conditions": array_of("Ready: the scripts are loaded, or why not (a script that fails, a conflict).",
                                   {"$ref": DEFINITIONS_PREFIX + CONDITION}),
        }),
    _PREFIX + "ResourceInterpreterWebhook": {
        **struct("A webhook, and the kinds and operations it interprets.", {
            "name": scalar("The webhook's fully qualified name."),
            "clientConfig": struct("How to reach the webhook: a URL, or a Service (which wins when both are set).", {
                "url": scalar("The webhook's https URL (no user info, fragment or query)."),
                "service": {**struct("The Service in front of the webhook.", {
                    "namespace": scalar("The Service's namespace."),
                    "name": scalar("The Service's name."),
                    "path": scalar("The URL path sent in every request to the Service."),
                    "port": int32("The Service's port (1-65535); 443 when unset."),
                }), "required": ["name", "namespace"]},
                "caBundle": scalar("The PEM CA bundle that validates the webhook's serving certificate; "
                                   "the system's roots when unset.", format="byte"),
            }),
            "rules": array_of("The operations on the kinds the webhook interprets; it is called when any rule matches.", {
                **struct("Operations and the kinds they apply to; '*' alone matches all.", {
                    "operations": _strings("The interpreter operations (InterpretReplica, ReviseReplica, Retain, "
                                           "AggregateStatus, InterpretStatus, InterpretHealth, InterpretDependency) or '*'."),
                    "apiGroups": _strings("The API groups of the kinds ('' is the core group) or '*'."),
                    "apiVersions": _strings("The API versions of the kinds or '*'."),
                    "kinds": _strings("The kinds or '*'."),
                }),
                "required": ["apiGroups", "apiVersions", "kinds", "operations"],
            }),
            "interpreterContextVersions": _strings(
                "The ResourceInterpreterContext versions the webhook accepts, preferred first (v1alpha1)."
            ),
            "timeoutSeconds": int32("Seconds before a call is given up (1-30); 10 when unset."),
        }),
        "required": ["clientConfig", "interpreterContextVersions", "name"],
    },
}


def _customization() -> dict[str, Any]:
    schema = kind_definition(
        _CUSTOMIZATION, _PREFIX,
        "ResourceInterpreterCustomization tells how to read a kind (its replicas, status, health, "
        "dependencies) with Lua scripts; it wins over the built-in interpreter and the webhooks.",
    )
    return {**schema, "required": ["spec"]}


def _webhook_configuration() -> dict[str, Any]:
    return {
        "description": "ResourceInterpreterWebhookConfiguration names the webhooks that interpret kinds for the hub.",
        "type": "object",
        "properties": {
            **type_meta_properties(),
            "webhooks": array_of("The webhooks, with the kinds and operations each interprets.",
                                 ref(_PREFIX + "ResourceInterpreterWebhook", "A webhook.")),
        },
        "required": ["webhooks"],
    }


def karmada_config_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions (the kind's and its parts') of a kind listed here."""
    if (group, version) != (_GROUP, _VERSION) or kind not in (_CUSTOMIZATION, _WEBHOOK_CONFIGURATION):
        return None
    schema = _customization() if kind == _CUSTOMIZATION else _webhook_configuration()
    return _PREFIX + kind, {_PREFIX + kind: schema, **reachable([schema], _DEFINITIONS)}
