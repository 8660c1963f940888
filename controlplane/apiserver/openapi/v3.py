"""OpenAPI v3 documents, one per group-version, as ``/openapi/v3/apis/<group>/<version>`` serves them.

Each document holds the paths of its group-version's kinds and every schema they need
(kube's v3 documents are self-contained). Definitions are converted from kube's v2 dialect
the way kube-openapi does it: references point into ``#/components/schemas/``, a reference
with a description of its own is wrapped as ``allOf: [{$ref}]`` beside it, IntOrString and
Quantity are ``oneOf`` their wire types, and an inline int-or-string field is
``x-kubernetes-int-or-string``. ``kubectl explain`` walks these references to print nested
fields.
Pure: in a catalog, out JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controlplane.apiserver.computed import ComputedResource
from controlplane.apiserver.discovery import openapi_version
from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.paths import PARAMETERS, Operation, PathItem, all_paths
from controlplane.apiserver.openapi.upstream import (
    DEFINITIONS_PREFIX,
    INT_OR_STRING,
    QUANTITY,
    rewrite_schema,
)
from controlplane.apiserver.resources import Registry

COMPONENTS_PREFIX = "#/components/schemas/"
#: The wire types of kube's two scalar unions, as kube-openapi publishes them in v3.
_ONE_OF = {INT_OR_STRING: ("integer", "string"), QUANTITY: ("string", "number")}


def document_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the key in the /openapi/v3 index."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def to_v3(node: Any) -> Any:
    """One schema of kube's v2 dialect in OpenAPI 3.0, as kube-apiserver serves it."""
    return rewrite_schema(
        node, ref=lambda ref: COMPONENTS_PREFIX + ref.removeprefix(DEFINITIONS_PREFIX), finish=_v3_node
    )


def _v3_node(out: dict[str, Any]) -> dict[str, Any]:
    """A reference with a description of its own as ``allOf: [{$ref}]`` beside it; an inline
    int-or-string field as kube-openapi spells it."""
    if "$ref" in out and len(out) > 1:
        return {"allOf": [{"$ref": out.pop("$ref")}], **out}
    if out.get("format") == "int-or-string" and out.get("type") == "string":
        del out["type"]
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        out["x-kubernetes-int-or-string"] = True
    return out


def _definition(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    if name in _ONE_OF:
        rest = {k: v for k, v in schema.items() if k != "type"}
        return {**rest, "oneOf": [{"type": t} for t in _ONE_OF[name]]}
    return to_v3(schema)  # type: ignore[no-any-return]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": COMPONENTS_PREFIX + name}


def _content(name: str | None, *types: str) -> dict[str, Any]:
    schema = _ref(name) if name else {"type": "object"}
    return {t: {"schema": schema} for t in types}


def _parameter(name: str, where: str, *, required: bool = False) -> dict[str, Any]:
    type_, description = PARAMETERS.get(name, ("string", f"the {name} of the object"))
    return {"name": name, "in": where, "description": description, "required": required,
            "schema": {"type": type_, "uniqueItems": True}}


def _operation(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": op.operation_id,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": {"group": op.group, "version": op.version, "kind": op.kind},
    }
    if op.query:
        out["parameters"] = [_parameter(name, "query") for name in op.query]
    if op.body:
        types = op.consumes or ("application/json", "application/yaml")
        out["requestBody"] = {"content": _content(op.body, *types), "required": op.method != "delete"}
    responses = {"200": {"description": "OK", "content": _content(op.response, "application/json", "application/yaml")}}
    if op.created:
        responses["201"] = {"description": "Created", "content": _content(op.response, "application/json")}
    out["responses"] = responses
    return out


def _path_item(item: PathItem) -> dict[str, Any]:
    out: dict[str, Any] = {"parameters": [_parameter(p, "path", required=True) for p in item.parameters]}
    out.update({op.method: _operation(op) for op in item.operations})
    return out


def group_version_document(
    registry: Registry, catalog: SchemaCatalog, group: str, version: str, computed: Sequence[ComputedResource] = ()
) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    served = [r for r in computed if (r.group, r.version) == (group, version)]
    if not types and not served:
        return None
    paths = {item.path: _path_item(item) for item in all_paths(catalog, types, served)}
    schemas = {name: _definition(name, schema) for name, schema in catalog.definitions(types, served).items()}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": openapi_version()},
        "paths": paths,
        "components": {"schemas": schemas},
    }
