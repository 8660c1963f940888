"""A CRD version's schema as kube publishes it in OpenAPI v2 (``/openapi/v2``).

Swagger 2.0 has no ``nullable`` and kubectl's v2 reader (``kubectl explain``, client-side
validation) breaks on an untyped array or on properties beside unknown fields, so kube's CRD
OpenAPI builder (apiextensions-apiserver ``pkg/controller/openapi/builder``, ``BuildOpenAPIV2``
with ``ToStructuralOpenAPIV2`` of ``pkg/controller/openapi/v2``) rewrites the schema it serves
at v3 as written:

* a root with ``x-kubernetes-preserve-unknown-fields`` is a bare ``type: object``;
* ``allOf``, ``anyOf``, ``oneOf`` and ``not`` are dropped (an int-or-string keeps no type);
* a ``nullable`` field loses ``nullable``, its type, items and properties, and leaves its parent's
  ``required`` (a nullable ``additionalProperties`` empties it);
* a field with ``x-kubernetes-preserve-unknown-fields`` loses its items and properties, and an
  array left without items loses its type;
* ``default`` is dropped (kube prunes defaults from every v2 definition);
* an ``x-kubernetes-embedded-resource`` that does not keep unknown fields gets ``apiVersion``,
  ``kind`` (both required) and ``metadata`` (ObjectMeta) properties (kube's ``addEmbeddedProperties``);
* an extension set to ``false`` is left out, as kube's structural schema writes it.

:func:`v3_schema` is the same schema as kube's v3 publishes it (as written, embedded resources with
their ``apiVersion``, ``kind`` and ``metadata``). Pure: in a CRD version's ``openAPIV3Schema``, out
the definition; run once per kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apiserver.openapi.models import METADATA_DESCRIPTION
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, OBJECT_META

#: The junctors ``ToStructuralOpenAPIV2`` drops.
_JUNCTORS = frozenset({"allOf", "anyOf", "oneOf", "not"})
#: The flags kube's structural schema writes only when true.
_FLAGS = (
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
)
_API_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
#: What kube's ``addEmbeddedProperties`` sets on an embedded resource.
_EMBEDDED = {
    "apiVersion": {
        "type": "string",
        "description": "apiVersion defines the versioned schema of this representation of an object. "
        f"More info: {_API_CONVENTIONS}#resources",
    },
    "kind": {
        "type": "string",
        "description": "kind is a string value representing the type of this object. In CamelCase. "
        f"More info: {_API_CONVENTIONS}#types-kinds",
    },
    "metadata": {"$ref": DEFINITIONS_PREFIX + OBJECT_META, "description": METADATA_DESCRIPTION},
}


def preserves_unknown_fields(schema: Mapping[str, Any]) -> bool:
    """Whether the root keeps unknown fields: kube publishes it in v2 as a bare object."""
    return schema.get("x-kubernetes-preserve-unknown-fields") is True


def v2_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` (a node of a CRD version's ``openAPIV3Schema``) as kube's v2 publishes it."""
    out = {key: value for key, value in schema.items() if key not in _JUNCTORS and key != "default"}
    for flag in _FLAGS:
        if out.get(flag) is False:
            del out[flag]
    if out.pop("nullable", False):
        for key in ("type", "items", "properties"):
            out.pop(key, None)
    if out.get("x-kubernetes-preserve-unknown-fields") is True:
        out.pop("items", None)
        out.pop("properties", None)
    if out.get("type") == "array" and "items" not in out:
        del out["type"]
    properties = out.get("properties")
    if isinstance(properties, dict):
        nullable = {
            name
            for name, field in properties.items()
            if isinstance(field, dict) and field.get("nullable") is True
        }
        _set_required(out, [name for name in out.get("required") or () if name not in nullable])
        out["properties"] = {
            name: v2_schema(field) if isinstance(field, dict) else field for name, field in properties.items()
        }
    additional = out.get("additionalProperties")
    if isinstance(additional, dict):
        if additional.get("nullable") is True:
            _set_required(out, [])
        out["additionalProperties"] = v2_schema(additional)
    items = out.get("items")
    if isinstance(items, dict):
        out["items"] = v2_schema(items)
    if out.get("x-kubernetes-preserve-unknown-fields") is not True:
        _embed(out)
    return out


def v3_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as kube's v3 publishes it: as written, and every ``x-kubernetes-embedded-resource``
    with ``apiVersion``, ``kind`` (both required) and ``metadata`` (kube's ``addEmbeddedProperties``,
    which in v3 adds them beside unknown fields too)."""
    out = dict(schema)
    properties = out.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {
            name: v3_schema(field) if isinstance(field, dict) else field for name, field in properties.items()
        }
    for key in ("additionalProperties", "items"):
        if isinstance(out.get(key), dict):
            out[key] = v3_schema(out[key])
    _embed(out)
    return out


def _embed(out: dict[str, Any]) -> None:
    if out.get("x-kubernetes-embedded-resource") is True:
        out["properties"] = {**(out.get("properties") or {}), **_EMBEDDED}
        required = list(out.get("required") or ())
        out["required"] = required + [name for name in ("kind", "apiVersion") if name not in required]


def _set_required(out: dict[str, Any], required: list[str]) -> None:
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
