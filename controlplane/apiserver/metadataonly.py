"""Answers of metadata alone: ``meta.k8s.io`` PartialObjectMetadata and PartialObjectMetadataList.

A client whose Accept asks ``as=PartialObjectMetadata;g=meta.k8s.io;v=v1`` (or ``v1beta1``) gets
an object's ``metadata`` as a PartialObjectMetadata, and each watch event's object so;
``as=PartialObjectMetadataList`` gets a list's items so, with the list's resourceVersion,
continue token and remaining count. client-go's metadata client (kube's garbage collector and
namespace controller, controller-runtime's metadata-only watches) and the official Python
client's DynamicClient ask for them. As kube's ``asPartialObjectMetadata`` and
``asPartialObjectMetadataList``, one object asked for as a list, or a list as one object, is a
406 NotAcceptable naming the Go type kube serves it from; a watch asked for lists writes its
events' objects whole, as kube's watch encoder falls back to them. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apiserver.errors import NotAcceptable
from controlplane.apiserver.negotiation import PARTIAL_LIST, PARTIAL_OBJECT, Conversion, conversion_asked
from controlplane.apiserver.resources import ResourceType


def metadata_asked(accept: str | None) -> Conversion | None:
    """The PartialObjectMetadata(List) conversion the request's Accept asks for, if it is one."""
    conversion = conversion_asked(accept)
    return conversion if conversion is not None and conversion.kind in (PARTIAL_OBJECT, PARTIAL_LIST) else None


def _go_type(rt: ResourceType, *, listed: bool) -> str:
    """The Go type kube's 406 names: a built-in kind's internal type, else unstructured's."""
    if not rt.built_in:
        return "*unstructured.UnstructuredList" if listed else "*unstructured.Unstructured"
    package = rt.group.split(".")[0] or "core"
    return f"*{package}.{rt.list_kind if listed else rt.kind}"


def _partial(obj: Mapping[str, Any], conversion: Conversion) -> dict[str, Any]:
    return {"kind": PARTIAL_OBJECT, "apiVersion": conversion.api_version, "metadata": obj.get("metadata") or {}}


def partial_object(rt: ResourceType, obj: Mapping[str, Any], conversion: Conversion) -> dict[str, Any]:
    """One object of ``rt`` (or its Scale) as ``conversion`` asks it."""
    if conversion.kind != PARTIAL_OBJECT:
        raise NotAcceptable(f"you requested {PARTIAL_LIST}, but the requested object is not a list "
                            f"({_go_type(rt, listed=False)})")
    return _partial(obj, conversion)


def partial_list(
    rt: ResourceType, items: Iterable[Mapping[str, Any]], conversion: Conversion, *,
    resource_version: str, continue_token: str = "", remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """A list of ``rt`` as ``conversion`` asks it."""
    if conversion.kind != PARTIAL_LIST:
        raise NotAcceptable(f"you requested {PARTIAL_OBJECT}, but the requested object is a list "
                            f"({_go_type(rt, listed=True)})")
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    if remaining_item_count is not None:
        metadata["remainingItemCount"] = remaining_item_count
    return {"kind": PARTIAL_LIST, "apiVersion": conversion.api_version, "metadata": metadata,
            "items": [_partial(item, conversion) for item in items]}


def watched_object(obj: dict[str, Any], conversion: Conversion) -> dict[str, Any]:
    """A watch event's object (a bookmark's too) as ``conversion`` asks it; whole when it asks
    for a list."""
    return _partial(obj, conversion) if conversion.kind == PARTIAL_OBJECT else obj
