"""``matchPolicy: Equivalent``: a write matched by a rule naming another form of the same resource.

kube-apiserver takes two resources as equivalent when they are the same stored objects (its
``EquivalentResourceRegistry`` is keyed by the storage prefix): a rule for ``autoscaling/v2``
horizontalpodautoscalers matches a write through ``autoscaling/v1``, one for ``events.k8s.io/v1``
events a core ``v1`` Event's, one for a CRD's version a write through another. The hub keys them the
same way, by :meth:`ResourceType.key_prefix`, which also makes ``policy.karmada.io`` and
``policy.gpufed.io`` equivalent: the hub stores one set of policies under both groups.

In: the hub's registry, the request's type and subresource. Out: the equivalent types (the
request's own excluded, in the registry's order; for a subresource, those serving it), and the
object converted between two of them through the storage form (the types' own
:class:`~controlplane.apiserver.resources.VersionConversion`). The versions of a CRD converted by
its conversion webhook are converted by a :data:`Converter` the hub gives (kube's dispatcher
converts through the CRD's converter, the webhook); this module itself does no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any

from controlplane.apiserver.admission import WebhookRequest
from controlplane.apiserver.resources import Registry, ResourceType


def equivalents(registry: Registry, rt: ResourceType, subresource: str | None) -> tuple[ResourceType, ...]:
    """The types serving the objects ``rt`` serves, other than ``rt`` (and serving ``subresource``)."""
    # A registry serving CRDs changes with them: its generation is part of the key.
    generation = getattr(registry, "generation", 0)
    return _equivalents(registry, generation, rt.group, rt.version, rt.plural, subresource or "")


@lru_cache(maxsize=256)
def _equivalents(
    registry: Registry, generation: int, group: str, version: str, plural: str, subresource: str
) -> tuple[ResourceType, ...]:
    del generation  # only a part of the cache key
    own = registry.get(group, version, plural)
    if own is None:
        return ()
    prefix = own.key_prefix()
    return tuple(
        rt for rt in registry
        if rt is not own and rt.key_prefix() == prefix and _serves(rt, subresource)
    )


def _serves(rt: ResourceType, subresource: str) -> bool:
    if subresource == "status":
        return rt.has_status
    if subresource == "scale":
        return rt.scale is not None
    return not subresource


def convert(obj: dict[str, Any], source: ResourceType, target: ResourceType) -> dict[str, Any]:
    """``obj``, an object of ``source``, as ``target`` serves it (through the stored form)."""
    stored = dict(obj) if source.conversion is None else source.conversion.to_storage(dict(obj))
    if target.conversion is not None:
        return target.conversion.from_storage(stored)
    return {**stored, "apiVersion": target.api_version}


#: Converts objects of the first type to the second, equivalent one (:func:`converted`, or through
#: a CRD's conversion webhook, all the objects in one review).
Converter = Callable[[list[dict[str, Any]], ResourceType, ResourceType], Awaitable[list[dict[str, Any]]]]


async def converted(objects: list[dict[str, Any]], source: ResourceType, target: ResourceType) -> list[dict[str, Any]]:
    """:func:`convert` as a :data:`Converter`."""
    return [convert(obj, source, target) for obj in objects]


async def as_type(
    request: WebhookRequest, rt: ResourceType, converter: Converter = converted, *, requested: bool = True
) -> WebhookRequest:
    """``request`` as a webhook matching it through the equivalent ``rt`` sees it: its objects
    converted by ``converter`` (a Scale stays a Scale) and the type it was made through as
    ``requested`` (unless ``requested`` is false: ``rt`` is then the request's own type)."""
    if rt is request.resource:
        return request
    made = request.resource if requested else None
    if request.subresource == "scale":
        return dataclasses.replace(request, resource=rt, requested=made)
    objects = [obj for obj in (request.obj, request.old) if obj is not None]
    out = iter(await converter(objects, request.resource, rt) if objects else ())
    obj = None if request.obj is None else next(out)
    old = None if request.old is None else next(out)
    return dataclasses.replace(request, resource=rt, requested=made, obj=obj, old=old)
