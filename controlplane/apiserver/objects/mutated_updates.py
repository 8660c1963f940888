"""An update's mutating webhooks: they see the object its request carries (the request's body,
defaulted: its status on an update of the main resource, its spec on a status write, the metadata
it names), which is merged with the stored object once they have run, as kube's strategy puts back
what the write may not change after its admission (``rest.BeforeUpdate``)."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.admission import Operation
from controlplane.apiserver.nullpruning import prune_nulls
from controlplane.apiserver.objects.admitting import mutated
from controlplane.apiserver.objects.merging import merged, set_managed_fields
from controlplane.apiserver.objects.revisions import (
    VersionPrecondition,
    check_resource_version,
    set_resource_version,
)
from controlplane.apiserver.objects.values import WriteOptions
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.validation import refuse_unknown_fields


def merged_body(
    rt: ResourceType,
    old: dict[str, Any],
    body: dict[str, Any],
    *,
    subresource: str | None,
    own_managed_fields: bool = False,
) -> dict[str, Any]:
    """What an update of ``old`` keeps of its request's ``body`` (:func:`merged`); with
    ``own_managed_fields`` (a status write's, recorded by its caller), the body's managedFields
    replace those of the stored metadata the status write keeps."""
    new = merged(rt, old, body, subresource=subresource)
    if subresource and own_managed_fields:
        set_managed_fields(new, body)
    return new


async def mutated_update(
    rt: ResourceType,
    old: dict[str, Any],
    seen: dict[str, Any],
    *,
    subresource: str | None,
    options: WriteOptions,
    version: VersionPrecondition | None,
    own_managed_fields: bool = False,
) -> dict[str, Any]:
    """An update's object as the mutating webhooks leave it, merged with ``old`` as the update keeps
    it (:func:`merged_body`). ``seen``, the request's body (or an object merged already, which the
    merge leaves as it is), is the write's own: it is defaulted in place. kube hands its mutating
    admission the object decoded from the request in the update's transformers, before its store
    compares resourceVersions: the webhooks see the resourceVersion the request names (``version``),
    and the one they leave is compared. Under Strict, the body's unknown fields are the decoder's
    400 before any webhook is called."""
    prune_nulls(rt, seen)
    if rt.defaults is not None:
        rt.defaults(seen)
    refuse_unknown_fields(
        rt, seen, old, options.field_validation, status_only=rt.writes_status_only(subresource)
    )
    if version is not None:
        set_resource_version(seen, version.given)
    patched = await mutated(rt, options, Operation.UPDATE, seen, old, subresource=subresource)
    if version is not None:
        check_resource_version(
            rt, version.stored, patched["metadata"].get("resourceVersion"), name=version.name
        )
    return merged_body(rt, old, patched, subresource=subresource, own_managed_fields=own_managed_fields)
