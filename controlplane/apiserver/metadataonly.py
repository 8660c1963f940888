"""Answers of metadata alone: ``meta.k8s.io`` PartialObjectMetadata and PartialObjectMetadataList.

A client whose Accept asks ``as=PartialObjectMetadata;g=meta.k8s.io;v=v1`` (or ``v1beta1``) gets
an object's ``metadata`` as a PartialObjectMetadata, and each watch event's object so;
``as=PartialObjectMetadataList`` gets a list's items so, with the list's resourceVersion,
continue token and remaining count. client-go's metadata client (kube's garbage collector and
namespace controller, controller-runtime's metadata-only watches) and the official Python
client's DynamicClient ask for them. As kube's ``asPartialObjectMetadata`` and
``asPartialObjectMetadataList``, one object asked for as a list, or a list as one object, is a
406 NotAcceptable naming the Go type kube serves it from; a watch asked for lists writes its
events' objects whole, as kube's watch encoder falls back to them. The computed resources answer
them too (:func:`computed_metadata`), but for Kueue's visibility summaries, which kube's library
refuses both (:func:`refuse_metadata_of_summary`). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apiserver.errors import NotAcceptable
from controlplane.apiserver.negotiation import PARTIAL_LIST, PARTIAL_OBJECT, Conversion, conversion_asked
from controlplane.apiserver.resources import ResourceType


def metadata_asked(accept: str | None, *, protobuf: bool = True) -> Conversion | None:
    """The PartialObjectMetadata(List) conversion the request's Accept asks for, if it is one
    (``protobuf=False`` for a resource not served in protobuf)."""
    conversion = conversion_asked(accept, protobuf=protobuf)
    return conversion if conversion is not None and conversion.kind in (PARTIAL_OBJECT, PARTIAL_LIST) else None


#: Built-in groups kube serves from another group's storage: ``events.k8s.io``'s Events are core's.
_SERVED_AS: dict[str, str] = {"events.k8s.io": "core"}


def _go_type(rt: ResourceType, *, listed: bool, scale: bool = False) -> str:
    """The Go type kube's 406 names: a built-in kind's internal type (its storage's), else
    unstructured's; a Scale is the internal ``autoscaling.Scale`` of a built-in kind's scale
    storage, and the ``autoscaling/v1`` one a CRD's serves."""
    if scale:
        return "*autoscaling.Scale" if rt.built_in else "*v1.Scale"
    if not rt.built_in:
        return "*unstructured.UnstructuredList" if listed else "*unstructured.Unstructured"
    package = _SERVED_AS.get(rt.group) or rt.group.split(".")[0] or "core"
    return f"*{package}.{rt.list_kind if listed else rt.kind}"


def _partial(obj: Mapping[str, Any], conversion: Conversion) -> dict[str, Any]:
    return {"kind": PARTIAL_OBJECT, "apiVersion": conversion.api_version, "metadata": obj.get("metadata") or {}}


def _not_a_list(go_type: str) -> NotAcceptable:
    return NotAcceptable(f"you requested {PARTIAL_LIST}, but the requested object is not a list ({go_type})")


def _a_list(go_type: str) -> NotAcceptable:
    return NotAcceptable(f"you requested {PARTIAL_OBJECT}, but the requested object is a list ({go_type})")


def partial_object(
    rt: ResourceType, obj: Mapping[str, Any], conversion: Conversion, *, scale: bool = False
) -> dict[str, Any]:
    """One object of ``rt`` (or, ``scale``, its Scale) as ``conversion`` asks it."""
    if conversion.kind != PARTIAL_OBJECT:
        raise _not_a_list(_go_type(rt, listed=False, scale=scale))
    return _partial(obj, conversion)


def partial_list(
    rt: ResourceType, items: Iterable[Mapping[str, Any]], conversion: Conversion, *,
    resource_version: str, continue_token: str = "", remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """A list of ``rt`` as ``conversion`` asks it."""
    if conversion.kind != PARTIAL_LIST:
        raise _a_list(_go_type(rt, listed=True))
    # A computed list's resourceVersion is empty, which kube's ListMeta leaves out.
    metadata: dict[str, Any] = {"resourceVersion": resource_version} if resource_version else {}
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


def computed_metadata(
    rt: ResourceType, accept: str | None, objects: list[dict[str, Any]], *, single: bool
) -> dict[str, Any] | None:
    """A computed resource's answer (one object, or a list without resourceVersion) as the
    Accept asks it, as kube's REST storage answers it (ComponentStatus); None when not asked."""
    conversion = metadata_asked(accept)
    if conversion is None:
        return None
    if single:
        return partial_object(rt, objects[0], conversion)
    return partial_list(rt, objects, conversion, resource_version="")


def refuse_metadata_of_summary(accept: str | None, go_type: str) -> None:
    """kube's 406 for an object with ``Items`` that is no list (``ObjectMeta``, no ``ListMeta``,
    as Kueue's PendingWorkloadsSummary): ``meta.IsListType`` takes it for a list, so no
    PartialObjectMetadata; it lacks the ``ListInterface``, so no PartialObjectMetadataList either."""
    conversion = metadata_asked(accept)
    if conversion is not None:
        raise _a_list(go_type) if conversion.kind == PARTIAL_OBJECT else _not_a_list(go_type)
