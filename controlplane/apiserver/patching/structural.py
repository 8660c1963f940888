"""How server-side apply merges a custom resource: its CRD version's structural schema, read as kube reads it.

kube-apiserver gives a custom resource the merge type of its CRD's OpenAPI schema (the
structured-merge-diff type kube-openapi's ``schemaconv`` builds), not the rules of a built-in
kind that happens to share its kind name. This module builds the same facts as a
:class:`FieldSchema` tree:

- an array's ``x-kubernetes-list-type``: ``map`` with ``x-kubernetes-list-map-keys`` is an
  associative list (items owned and merged by their keys, a key field's ``default`` standing in
  when an item leaves it out), ``set`` owns each value on its own, ``atomic`` or no list type
  replaces the list whole;
- an object's ``x-kubernetes-map-type: atomic`` owns and replaces it whole (``granular``, the
  default, merges it key by key);
- ``additionalProperties`` gives the members of a map their schema; ``additionalProperties:
  true``, an object without properties, and everything below
  ``x-kubernetes-preserve-unknown-fields`` take the deduced type (maps merge key by key, lists
  are atomic);
- the root's and every ``x-kubernetes-embedded-resource``'s ``metadata`` is ObjectMeta.

In: a version's ``openAPIV3Schema`` (a plain JSONSchemaProps dict, already validated as
structural). Out: the root :class:`FieldSchema`. Pure; built once per CRD version by whoever
serves it, never per write.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from controlplane.apiserver.patching.schema import DEDUCED, OBJECT_META, UNKNOWN, FieldSchema, ListType

_PRESERVE = "x-kubernetes-preserve-unknown-fields"


def structural_apply_schema(openapi: Mapping[str, Any]) -> FieldSchema:
    """The :class:`FieldSchema` server-side apply uses for objects of a CRD version with this schema."""
    return _object(openapi, preserve=openapi.get(_PRESERVE) is True, object_meta=True)


def _convert(node: Mapping[str, Any], *, preserve: bool) -> FieldSchema:
    preserve = preserve or node.get(_PRESERVE) is True
    kind = node.get("type")
    if kind == "array" or (kind is None and isinstance(node.get("items"), Mapping)):
        return _list(node, preserve=preserve)
    if kind == "object":
        return _object(node, preserve=preserve, object_meta=node.get("x-kubernetes-embedded-resource") is True)
    if kind is None and preserve and not node.get("x-kubernetes-int-or-string"):
        return DEDUCED
    return UNKNOWN  # a scalar (int-or-string included)


def _object(node: Mapping[str, Any], *, preserve: bool, object_meta: bool) -> FieldSchema:
    properties = node.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    fields = {
        name: _convert(member, preserve=preserve) for name, member in properties.items() if isinstance(member, Mapping)
    }
    if object_meta:
        fields["metadata"] = OBJECT_META
    additional = node.get("additionalProperties")
    values: FieldSchema | None = None
    if isinstance(additional, Mapping):
        values = _convert(additional, preserve=preserve)
    elif additional is True or preserve or not properties:
        values = DEDUCED
    return FieldSchema(
        fields=MappingProxyType(fields),
        values=values,
        atomic=node.get("x-kubernetes-map-type") == "atomic",
    )


def _list(node: Mapping[str, Any], *, preserve: bool) -> FieldSchema:
    items = node.get("items")
    item = _convert(items, preserve=preserve) if isinstance(items, Mapping) else UNKNOWN
    list_type = node.get("x-kubernetes-list-type")
    if list_type == "set":
        return FieldSchema(item=item, list_type=ListType.SET)
    if list_type != "map":
        return FieldSchema(item=item)
    keys = tuple(str(key) for key in node.get("x-kubernetes-list-map-keys") or ())
    properties = items.get("properties") if isinstance(items, Mapping) else None
    properties = properties if isinstance(properties, Mapping) else {}
    defaults = {
        key: properties[key]["default"]
        for key in keys
        if isinstance(properties.get(key), Mapping) and "default" in properties[key]
    }
    return FieldSchema(item=item, list_type=ListType.MAP, keys=keys, key_defaults=MappingProxyType(defaults))
