"""The OpenAPI v2 (Swagger 2.0) document of ``/openapi/v2``: every served kind in one document.

kubectl reads it (as protobuf, :mod:`.gnostic`) only for a kind the v3 documents do not
have, i.e. a typo'd one (``kind: Deploymnt``): it then validates the object client-side,
finds no schema to check, and goes on to report kube's ``no matches for kind``; without a
v2 document it failed with "failed to download openapi". Unlike kube's, the operations here
list no ``fieldValidation`` parameter: given one on Namespace, kubectl asks the
``apiextensions.k8s.io`` CustomResourceDefinitions (which the hub does not serve) whether the
unknown kind is a CRD, and fails on the 404 instead. kubectl learns that the server validates
fields from the v3 documents, which do list it. kube-openapi's v2 parser is strict (one type
per schema, arrays with items), which the definitions here satisfy.
Pure: in a catalog, out a JSON-ready dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controlplane.apiserver.computed import ComputedResource
from controlplane.apiserver.discovery import openapi_version
from controlplane.apiserver.openapi.catalog import SchemaCatalog
from controlplane.apiserver.openapi.paths import PARAMETERS, Operation, PathItem, all_paths
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX
from controlplane.apiserver.resources import Registry


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": DEFINITIONS_PREFIX + name}


def _parameter(name: str, where: str, *, required: bool = False) -> dict[str, Any]:
    type_, description = PARAMETERS.get(name, ("string", f"the {name} of the object"))
    return {"name": name, "in": where, "description": description, "required": required, "type": type_,
            "uniqueItems": True}


def _operation(op: Operation) -> dict[str, Any]:
    parameters = [_parameter(name, "query") for name in op.query if name != "fieldValidation"]
    if op.body:
        parameters.insert(0, {"name": "body", "in": "body", "required": op.method != "delete", "schema": _ref(op.body)})
    response: dict[str, Any] = {"description": "OK"}
    if op.response:
        response["schema"] = _ref(op.response)
    responses = {"200": response}
    if op.created:
        responses["201"] = {**response, "description": "Created"}
    out: dict[str, Any] = {
        "operationId": op.operation_id,
        "consumes": list(op.consumes or ("*/*",)),
        "produces": ["application/json", "application/yaml"],
        "schemes": ["https"],
        "parameters": parameters,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": {"group": op.group, "version": op.version, "kind": op.kind},
    }
    return out


def _path_item(item: PathItem) -> dict[str, Any]:
    out: dict[str, Any] = {op.method: _operation(op) for op in item.operations}
    out["parameters"] = [_parameter(p, "path", required=True) for p in item.parameters]
    return out


def swagger_document(
    registry: Registry, catalog: SchemaCatalog, computed: Sequence[ComputedResource] = ()
) -> dict[str, Any]:
    types = list(registry)
    paths = {item.path: _path_item(item) for item in all_paths(catalog, types, computed)}
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": openapi_version()},
        "paths": dict(sorted(paths.items())),
        "definitions": catalog.definitions(types, computed, v2=True),
    }
