"""OpenAPI v3 documents: what lets ``kubectl apply`` and ``kubectl explain`` work.

``/openapi/v3`` lists one document per group-version; each document has, per kind,
its paths (list/create/get/replace/patch/delete, and ``/status`` where served) and a
schema. kubectl decides that the server validates fields itself (and then sends
``fieldValidation=Strict`` instead of validating client-side) when the kind's
``patch`` operation carries ``x-kubernetes-group-version-kind`` and a
``fieldValidation`` query parameter. The patch request body lists the patch content
types the kind accepts; kubectl sends strategic merge patches only to kinds that list
it (built-in kinds) and JSON merge patches otherwise.

Typed kinds get their pydantic model's JSON schema (rewritten to the OpenAPI 3.0
dialect kube-openapi parses); other kinds get a permissive
``x-kubernetes-preserve-unknown-fields`` object. Built-in kinds' schemas carry no
group-version-kind, so kubectl computes their strategic merge patches from its own
compiled-in types (with list merge keys) rather than from a schema that has none.
Pure: in a registry, out JSON-ready dicts.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from controlplane.apiserver.resources import Registry, ResourceType

PATCH_SCHEMA = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
STATUS_SCHEMA = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
DELETE_OPTIONS_SCHEMA = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
_KUBE_GROUPS = {"": "core", "apps": "apps", "batch": "batch", "coordination.k8s.io": "coordination"}

#: JSON-schema keywords kube-openapi's OpenAPI 3.0 parser accepts as pydantic emits them.
_KEEP = {
    "type", "format", "title", "description", "properties", "items", "additionalProperties", "required",
    "enum", "default", "anyOf", "oneOf", "allOf", "not", "$ref", "nullable", "minimum", "maximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
    "maxProperties", "multipleOf", "example",
}


def schema_name(rt: ResourceType) -> str:
    """``io.k8s.api.apps.v1.Deployment`` for kube's groups, reversed-DNS otherwise."""
    if rt.group in _KUBE_GROUPS:
        return f"io.k8s.api.{_KUBE_GROUPS[rt.group]}.{rt.version}.{rt.kind}"
    reversed_group = ".".join(reversed(rt.group.split(".")))
    return f"{reversed_group}.{rt.version}.{rt.kind}"


def document_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the key in the /openapi/v3 index."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _sanitize(node: Any, ref_prefix: str) -> Any:
    """Rewrite a pydantic (JSON Schema 2020-12) schema into OpenAPI 3.0 as kube reads it."""
    if isinstance(node, list):
        return [_sanitize(item, ref_prefix) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = "#/components/schemas/" + ref_prefix + value.rsplit("/", 1)[-1]
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key in ("properties",) and isinstance(value, dict):
            out[key] = {name: _sanitize(sub, ref_prefix) for name, sub in value.items()}
        elif key in ("default", "enum", "example") or (key == "additionalProperties" and isinstance(value, bool)):
            out[key] = value
        elif key in _KEEP or key.startswith("x-kubernetes-"):
            out[key] = _sanitize(value, ref_prefix)
    # "anyOf: [X, {type: null}]" is how pydantic spells Optional[X]; OpenAPI 3.0 says nullable.
    any_of = out.get("anyOf")
    if isinstance(any_of, list):
        non_null = [s for s in any_of if s != {"type": "null"}]
        if len(non_null) < len(any_of):
            out["nullable"] = True
            if len(non_null) == 1:
                del out["anyOf"]
                only = non_null[0]
                if "$ref" in only:
                    out["allOf"] = [only]
                else:
                    out.update(only)
            else:
                out["anyOf"] = non_null
    if out.get("type") == "null":
        out.pop("type")
        out["nullable"] = True
    return out


def _model_schemas(rt: ResourceType) -> dict[str, Any]:
    """The kind's schema and its sub-schemas, keyed by component name."""
    name = schema_name(rt)
    gvk = [{"group": rt.group, "version": rt.version, "kind": rt.kind}]
    if rt.model is None:
        schema: dict[str, Any] = {
            "type": "object",
            "description": f"{rt.kind} ({rt.api_version}); fields are not validated by this server.",
            "x-kubernetes-preserve-unknown-fields": True,
        }
        if not rt.strategic_merge:
            schema["x-kubernetes-group-version-kind"] = gvk
        return {name: schema}
    prefix = name.rsplit(".", 1)[0] + "."
    raw = rt.model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    out = {prefix + def_name: _sanitize(def_schema, prefix) for def_name, def_schema in definitions.items()}
    main = _sanitize(raw, prefix)
    main["x-kubernetes-group-version-kind"] = gvk
    out[name] = main
    return out


def _param(name: str, where: str, description: str, *, required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "description": description,
        "required": required,
        "schema": {"type": "string", "uniqueItems": True},
    }


_FIELD_VALIDATION = _param(
    "fieldValidation", "query",
    "How the server treats unknown or duplicate fields: Ignore, Warn (default) or Strict.",
)
_DRY_RUN = _param("dryRun", "query", "When present (All), the request is processed but not persisted.")
_FIELD_MANAGER = _param("fieldManager", "query", "The name of the actor making the change.")
_FORCE = {
    "name": "force", "in": "query", "description": "Force an apply over conflicting fields.",
    "schema": {"type": "boolean", "uniqueItems": True},
}
_LIST_PARAMS = [
    _param(name, "query", description)
    for name, description in (
        ("labelSelector", "A selector to restrict the list of returned objects by their labels."),
        ("fieldSelector", "A selector to restrict the list of returned objects by their fields."),
        ("continue", "The continue token of a previous page."),
        ("resourceVersion", "The revision to list at or watch from."),
        ("resourceVersionMatch", "How resourceVersion applies to a list: Exact or NotOlderThan."),
    )
] + [
    {"name": "limit", "in": "query", "description": "The maximum number of items.", "schema": {"type": "integer"}},
    {"name": "watch", "in": "query", "description": "Watch for changes.", "schema": {"type": "boolean"}},
    {"name": "allowWatchBookmarks", "in": "query", "description": "Request BOOKMARK events.", "schema": {"type": "boolean"}},
    {"name": "timeoutSeconds", "in": "query", "description": "Timeout of a watch.", "schema": {"type": "integer"}},
]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json_body(name: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": _ref(name)}, "application/yaml": {"schema": _ref(name)}}}


def _responses(name: str, *codes: str) -> dict[str, Any]:
    return {
        code: {"description": "OK" if code == "200" else "Created", "content": {"application/json": {"schema": _ref(name)}}}
        for code in codes
    }


def _operations(rt: ResourceType, *, status: bool) -> dict[str, Any]:
    """get/put/patch (and delete unless ``status``) on one object's path."""
    name = schema_name(rt)
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    suffix = "Status" if status else ""
    kind_id = f"{rt.kind}{suffix}"
    patch_types = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
    if rt.strategic_merge:
        patch_types.append("application/strategic-merge-patch+json")
    ops: dict[str, Any] = {
        "get": {
            "operationId": f"read{kind_id}",
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": gvk,
            "responses": _responses(name, "200"),
        },
        "put": {
            "operationId": f"replace{kind_id}",
            "x-kubernetes-action": "put",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION],
            "requestBody": _json_body(name),
            "responses": _responses(name, "200", "201"),
        },
        "patch": {
            "operationId": f"patch{kind_id}",
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION, _FORCE],
            "requestBody": {"content": {t: {"schema": _ref(PATCH_SCHEMA)} for t in patch_types}, "required": True},
            "responses": _responses(name, "200", "201"),
        },
    }
    if not status:
        ops["delete"] = {
            "operationId": f"delete{kind_id}",
            "x-kubernetes-action": "delete",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [_DRY_RUN],
            "requestBody": _json_body(DELETE_OPTIONS_SCHEMA),
            "responses": _responses(STATUS_SCHEMA, "200"),
        }
    return ops


def _collection_operations(rt: ResourceType) -> dict[str, Any]:
    name = schema_name(rt)
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    return {
        "get": {
            "operationId": f"list{rt.kind}",
            "x-kubernetes-action": "list",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": _LIST_PARAMS,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}},
        },
        "post": {
            "operationId": f"create{rt.kind}",
            "x-kubernetes-action": "post",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION],
            "requestBody": _json_body(name),
            "responses": _responses(name, "200", "201"),
        },
        "delete": {
            "operationId": f"deletecollection{rt.kind}",
            "x-kubernetes-action": "deletecollection",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [_DRY_RUN, *_LIST_PARAMS[:2]],
            "responses": _responses(STATUS_SCHEMA, "200"),
        },
    }


_NAME = {"name": "name", "in": "path", "required": True, "description": "name of the object", "schema": {"type": "string"}}
_NAMESPACE = {
    "name": "namespace", "in": "path", "required": True, "description": "object name and auth scope",
    "schema": {"type": "string"},
}

_COMMON_SCHEMAS: dict[str, Any] = {
    PATCH_SCHEMA: {
        "type": "object",
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
    },
    STATUS_SCHEMA: {"type": "object", "description": "Status is a return value for calls that do not return other objects.",
                    "x-kubernetes-preserve-unknown-fields": True},
    DELETE_OPTIONS_SCHEMA: {"type": "object", "description": "DeleteOptions may be provided when deleting an API object.",
                            "x-kubernetes-preserve-unknown-fields": True},
}


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = dict(_COMMON_SCHEMAS)
    for rt in types:
        schemas.update(_model_schemas(rt))
        scope = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
        scope_params = [_NAMESPACE] if rt.namespaced else []
        paths[scope] = {"parameters": scope_params, **_collection_operations(rt)}
        paths[f"{scope}/{{name}}"] = {"parameters": [*scope_params, _NAME], **_operations(rt, status=False)}
        if rt.has_status:
            paths[f"{scope}/{{name}}/status"] = {"parameters": [*scope_params, _NAME], **_operations(rt, status=True)}
        if rt.namespaced:
            all_namespaces = _collection_operations(rt)["get"]
            paths[f"{base}/{rt.plural}"] = {"get": {**all_namespaces, "operationId": f"list{rt.kind}ForAllNamespaces"}}
    return {
        "openapi": "3.0.0",
        "info": {"title": "gpufed", "version": f"{group or 'core'}/{version}"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


class OpenApiDocuments:
    """The rendered documents of one registry, built once and served by hash."""

    def __init__(self, registry: Registry) -> None:
        self._documents: dict[str, bytes] = {}
        self._hashes: dict[str, str] = {}
        for group, versions in registry.group_versions().items():
            for version in versions:
                document = group_version_document(registry, group, version)
                if document is None:
                    continue
                key = document_path(group, version)
                body = orjson.dumps(document)
                self._documents[key] = body
                self._hashes[key] = hashlib.sha512(body).hexdigest()[:64].upper()

    def index(self) -> dict[str, Any]:
        return {
            "paths": {
                key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
                for key, digest in self._hashes.items()
            }
        }

    def document(self, key: str) -> bytes | None:
        return self._documents.get(key.strip("/"))
