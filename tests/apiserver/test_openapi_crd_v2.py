"""A CRD's schema in OpenAPI v2 as kube publishes it (apiextensions-apiserver's
``BuildOpenAPIV2``, ``ToStructuralOpenAPIV2`` and the defaults kube prunes from v2), while v3
keeps it as written: kubectl falls back to v2, where a nullable field with a type refuses null."""

from __future__ import annotations

import copy
import json
from typing import Any

from controlplane.apiserver.crd.types import custom_types
from controlplane.apiserver.openapi.documents import OpenApiDocuments
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META
from controlplane.apiserver.resources import Registry

NAME = "com.example.ml.v1.Trainer"
GVK = [{"group": "ml.example.com", "version": "v1", "kind": "Trainer"}]
SPEC: dict[str, Any] = {
    "type": "object",
    "required": ["model", "note", "size"],
    "properties": {
        "model": {"type": "string", "default": "llama", "description": "The model."},
        "note": {"type": "string", "nullable": True},
        "size": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "tags": {"type": "array", "nullable": True, "items": {"type": "string"}},
        "extra": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"known": {"type": "string"}},
        },
        "raw": {"type": "array", "x-kubernetes-preserve-unknown-fields": True, "items": {"type": "string"}},
        "labels": {
            "type": "object",
            "required": ["a"],
            "additionalProperties": {"type": "string", "nullable": True},
        },
        "plain": {
            "type": "object",
            "nullable": False,
            "x-kubernetes-embedded-resource": False,
            "properties": {"n": {"type": "integer", "minimum": 1, "oneOf": [{"minimum": 2}]}},
        },
        "template": {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "required": ["spec"],
            "properties": {"spec": {"type": "object"}},
        },
        "open": {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"x": {"type": "string"}},
        },
    },
}
#: kube's addEmbeddedProperties: an embedded resource's apiVersion, kind and metadata.
EMBEDDED: dict[str, Any] = {
    "apiVersion": {
        "type": "string",
        "description": "apiVersion defines the versioned schema of this representation of an object. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
    },
    "kind": {
        "type": "string",
        "description": "kind is a string value representing the type of this object. In CamelCase. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    },
    "metadata": {
        "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "description": "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    },
}
#: SPEC as kube's ToStructuralOpenAPIV2 and addEmbeddedProperties leave it, defaults pruned.
SPEC_V2: dict[str, Any] = {
    "type": "object",
    "required": ["model", "size"],
    "properties": {
        "model": {"type": "string", "description": "The model."},
        "note": {},
        "size": {"x-kubernetes-int-or-string": True},
        "tags": {},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "raw": {"x-kubernetes-preserve-unknown-fields": True},
        "labels": {"type": "object", "additionalProperties": {}},
        "plain": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        "template": {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "required": ["spec", "kind", "apiVersion"],
            "properties": {"spec": {"type": "object"}, **EMBEDDED},
        },
        "open": {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        },
    },
}


def _crd(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "trainers.ml.example.com"},
        "spec": {
            "group": "ml.example.com",
            "scope": "Namespaced",
            "names": {"plural": "trainers", "singular": "trainer", "kind": "Trainer"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


def _documents(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kind's definition in /openapi/v2 and its schema in /openapi/v3/apis/ml.example.com/v1."""
    documents = OpenApiDocuments(Registry(custom_types(_crd(schema))))
    swagger = json.loads(documents.swagger(protobuf=False).body)
    documents.swagger(protobuf=True)  # kube-openapi's strict v2 reader takes it too
    v3 = documents.document("apis/ml.example.com/v1")
    assert v3 is not None
    return swagger["definitions"][NAME], json.loads(v3.body)["components"]["schemas"][NAME]


def test_v2_drops_what_swagger_and_kubectl_cannot_read_and_v3_keeps_it() -> None:
    schema = {"type": "object", "properties": {"spec": copy.deepcopy(SPEC)}}
    v2, v3 = _documents(schema)
    assert v2["properties"]["spec"] == SPEC_V2
    assert v2["properties"]["metadata"] == {"$ref": DEFINITIONS_PREFIX + OBJECT_META}
    assert {"apiVersion", "kind"} <= set(v2["properties"]) and v2["x-kubernetes-group-version-kind"] == GVK
    # v3 serves the schema as written: the nullable field keeps its type, the defaults stay.
    assert v3["properties"]["spec"]["properties"]["note"] == {"type": "string", "nullable": True}
    assert v3["properties"]["spec"]["properties"]["model"]["default"] == "llama"
    assert schema == {"type": "object", "properties": {"spec": SPEC}}


def test_a_root_that_keeps_unknown_fields_is_a_bare_object_in_v2() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"spec": {"type": "object"}},
    }
    v2, v3 = _documents(schema)
    assert v2 == {"type": "object", "x-kubernetes-group-version-kind": GVK}
    assert set(v3["properties"]) == {"apiVersion", "kind", "metadata", "spec"}


def test_v3_gives_every_embedded_resource_its_type_and_object_meta() -> None:
    """kube's addEmbeddedProperties in v3: an embedded resource has apiVersion, kind (both
    required) and metadata, also one that keeps unknown fields, in a list's items and a map's values."""
    spec = copy.deepcopy(SPEC)
    spec["properties"]["pods"] = {"type": "array", "items": copy.deepcopy(SPEC["properties"]["template"])}
    _, v3 = _documents({"type": "object", "properties": {"spec": spec}})
    metadata = {
        "allOf": [{"$ref": "#/components/schemas/" + OBJECT_META}],
        "description": EMBEDDED["metadata"]["description"],
    }
    embedded = {**EMBEDDED, "metadata": metadata}
    fields = v3["properties"]["spec"]["properties"]
    for template in (fields["template"], fields["pods"]["items"]):
        assert template["required"] == ["spec", "kind", "apiVersion"]
        assert template["properties"] == {"spec": {"type": "object"}, **embedded}
    assert fields["open"]["required"] == ["kind", "apiVersion"]
    assert fields["open"]["properties"] == {"x": {"type": "string"}, **embedded}
    assert "required" not in fields["plain"] and set(fields["plain"]["properties"]) == {"n"}
