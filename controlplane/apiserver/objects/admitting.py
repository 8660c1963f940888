"""What the object layer hands the admission webhooks of a write
(:class:`~controlplane.apiserver.admission.WebhookCalls`): the write as they see it — a write
through ``scale`` as its Scale — and the object as the mutating ones patched it (a Scale's replicas
set on it), defaulted again as kube decodes a patched object before its validation; and what
becomes of a write of a CRD the hub publishes for a kind it serves built in (:func:`view_update`).
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apis.apiextensions import builtin
from controlplane.apis.untyped import dig
from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WebhookRequest
from controlplane.apiserver.nullpruning import prune_nulls
from controlplane.apiserver.objects.body_kind import checked_body
from controlplane.apiserver.objects.scale import replicas_patch, require_scale, scale_of
from controlplane.apiserver.objects.values import WriteOptions
from controlplane.apiserver.resources import ResourceType


def webhook_request(
    rt: ResourceType, options: WriteOptions, operation: Operation, obj: dict[str, Any], old: dict[str, Any] | None,
    *, subresource: str | None,
) -> WebhookRequest:
    """The write as the admission webhooks see it: a write through ``scale`` as its Scale."""
    subresource = subresource or options.recorded_subresource
    meta = obj["metadata"]
    if subresource == "scale":
        obj, old = scale_of(rt, obj), None if old is None else scale_of(rt, old)
    return WebhookRequest(
        operation, rt, str(meta.get("name") or ""), meta.get("namespace"), obj, old,
        subresource=subresource, dry_run=options.dry_run,
    )


async def mutated(
    rt: ResourceType, options: WriteOptions, operation: Operation, obj: dict[str, Any], old: dict[str, Any] | None,
    *, subresource: str | None,
) -> dict[str, Any]:
    """``obj`` as the mutating webhooks patch it, defaulted again (as kube decodes a patched object)."""
    assert options.webhooks is not None
    patched = await options.webhooks.mutate(webhook_request(rt, options, operation, obj, old, subresource=subresource))
    if patched is None:
        return obj
    meta = obj["metadata"]
    if (subresource or options.recorded_subresource) == "scale":
        # The webhooks patched the Scale: its replicas (checked as a Scale written) are the object's.
        replicas_path = require_scale(rt).spec_replicas.split(".")
        replicas = dig(replicas_patch(rt, patched, name=str(meta.get("name") or "")), *replicas_path)
        scaled = copy.deepcopy(obj)
        node = scaled
        for part in replicas_path[:-1]:
            node = node.setdefault(part, {})
        node[replicas_path[-1]] = replicas
        return scaled
    # The patched object is checked as a request's body: its kind, namespace and name stay the write's.
    patched = checked_body(rt, patched, namespace=meta.get("namespace"), name=meta.get("name"), copy_body=False)
    prune_nulls(rt, patched)
    if rt.defaults is not None:
        rt.defaults(patched)
    return patched


def view_update(old: dict[str, Any], new: dict[str, Any], *, subresource: str | None) -> dict[str, Any] | None:
    """None unless ``old`` is a CRD the hub publishes for a kind it serves built in
    (:mod:`controlplane.apis.apiextensions.builtin`), or ``new`` defines the same kind (an upstream
    install manifest's CRD): then ``new`` keeps the CRD's marks (:func:`builtin.keep_marks`) and
    the update goes on (None). A status write that changes nothing is nothing (``old``); any other
    write is a 403 Forbidden."""
    if not builtin.is_view(old):
        return None
    name = str(old["metadata"]["name"])
    if subresource is None and builtin.defines_same_kind(new, old):
        builtin.keep_marks(new, old)
        return None
    if subresource is not None and new.get("status") == old.get("status"):
        return old
    raise errors.Forbidden(
        builtin.refusal(name),
        target=errors.Target(name=name, group="apiextensions.k8s.io", kind="customresourcedefinitions"),
    )
