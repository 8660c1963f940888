"""The ``scale`` subresource of a CRD version its conversion webhook serves, as kube's ``ScaleREST``
serves each version with that version's own ``subresources.scale``: the object read and converted
to the request's version, its Scale read there through that version's ``specReplicasPath``,
``statusReplicasPath`` and ``labelSelectorPath`` (:func:`custom_scale`, kube's
``scaleFromCustomResource`` and its errors); a write sets that version's replicas field on it, and
the object is converted back and stored. Admission sees the write as kube's does: a Scale of the
request's version read through its paths (:class:`_RequestVersionScale`). The write's managedFields
entry is recorded as kube's scale handler records it: the replicas' owners found by each version's
replicas field (no conversion), the writer's entry at the request's version.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from controlplane.apis.kube.field import go_printed
from controlplane.apis.untyped import dig
from controlplane.apiserver import errors
from controlplane.apiserver.admission import Operation, WebhookCalls, WebhookRequest
from controlplane.apiserver.handlers import (
    ResourceHandlers,
    field_manager_for,
    json_response,
    method_not_allowed,
)
from controlplane.apiserver.objects.scale import (
    applied_scale,
    patched_scale,
    replicas_patch,
    scale_patch_type,
)
from controlplane.apiserver.objects.writing import PATCH_RETRIES
from controlplane.apiserver.patches import PatchType, merge_patch, record_update
from controlplane.apiserver.patching.scalefields import ReplicasPaths, to_parent, to_subresource
from controlplane.apiserver.requestoptions import force_of
from controlplane.apiserver.requeststate import request_warnings
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.routing import RequestInfo
from controlplane.apiserver.tables import IncludeObject, table, table_content_type, wants_table

if TYPE_CHECKING:
    from controlplane.apiserver.crd.converted import WebhookConversions

#: kube's mark for a Scale read from an object without replicas: a write must set them.
_NO_REPLICAS = -2147483648


def _go_type(value: Any) -> str:
    """Go's ``%T`` of a decoded JSON value."""
    if value is None:
        return "<nil>"
    for kind, name in ((bool, "bool"), (str, "string"), (int, "int64"), (float, "float64"), (list, "[]interface {}")):
        if isinstance(value, kind):
            return name
    return "map[string]interface {}"


def _nested(obj: dict[str, Any], dotted: str, expected: str) -> tuple[Any, bool]:
    """The value at ``dotted`` and whether it is there, as kube's ``unstructured.NestedInt64`` and
    ``NestedString`` read it; a value of another type is their accessor error."""
    fields = dotted.removeprefix(".").split(".")
    value: Any = obj
    for depth, field in enumerate(fields):
        if value is None:
            return None, False
        if not isinstance(value, dict):
            path = "." + ".".join(fields[:depth + 1])
            raise errors.ServerError(
                f"{path} accessor error: {go_printed(value)} is of the type {_go_type(value)}, expected map[string]interface{{}}"
            )
        if field not in value:
            return None, False
        value = value[field]
    if _go_type(value) != expected:
        raise errors.ServerError(
            f".{'.'.join(fields)} accessor error: {go_printed(value)} is of the type {_go_type(value)}, expected {expected}"
        )
    return value, True


def custom_scale(rt: ResourceType, obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The autoscaling/v1 Scale of ``obj`` (in ``rt``'s version) read through ``rt``'s scale paths,
    and whether its spec replicas are set (kube's ``scaleFromCustomResource``): absent replicas are
    0, a selector that is absent is none, a value of another type kube's 500."""
    if rt.scale is None:
        raise errors.NotFound("the server could not find the requested resource")
    spec, found = _nested(obj, rt.scale.spec_replicas, "int64")
    status, _ = _nested(obj, rt.scale.status_replicas, "int64")
    selector, _ = _nested(obj, rt.scale.label_selector, "string") if rt.scale.label_selector else (None, False)
    meta = obj["metadata"]
    scale: dict[str, Any] = {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if key in meta},
        "spec": {"replicas": spec or 0},
        "status": {"replicas": status or 0},
    }
    if selector:
        scale["status"]["selector"] = selector
    return scale, found


def scaled(
    rt: ResourceType, obj: dict[str, Any], new_scale: Callable[[dict[str, Any]], dict[str, Any]], *,
    replicas_paths: ReplicasPaths, manager: str | None, now: str, sent_to: tuple[str | None, str] | None,
) -> dict[str, Any]:
    """``obj`` (in ``rt``'s version) as a write of its Scale leaves it (kube's
    ``scaleUpdatedObjectInfo``): ``new_scale`` makes the Scale written from the one read (replicas
    it did not find marked, which it must set: kube's 400), its replicas set at ``rt``'s
    ``specReplicasPath`` (its resourceVersion, when given, a precondition), and ``manager`` the
    owner of them at ``rt``'s version."""
    assert rt.scale is not None
    name = str(obj["metadata"]["name"])
    view, found = custom_scale(rt, obj)
    if not found:
        view["spec"]["replicas"] = _NO_REPLICAS
    owners = obj["metadata"].get("managedFields")
    if seen := to_subresource(owners, replicas_paths):
        view["metadata"]["managedFields"] = seen
    written = new_scale(copy.deepcopy(view))
    if dig(written, "spec", "replicas") == _NO_REPLICAS:
        raise errors.BadRequest(f"the spec replicas field {json.dumps('.' + rt.scale.spec_replicas)} cannot be empty")
    patch = replicas_patch(rt, written, name=name, sent_to=sent_to)
    out: dict[str, Any] = merge_patch(obj, patch)
    if manager:
        scale_type = dataclasses.replace(
            rt, group="autoscaling", version="v1", kind="Scale", strategic_merge=False, model=None, field_schema=None
        )
        after = copy.deepcopy(view)
        after["spec"]["replicas"] = dig(patch, *rt.scale.spec_replicas.split("."))
        recorded = record_update(scale_type, view, after, manager=manager, now=now, subresource="scale")
        managed = to_parent(owners, recorded["metadata"].get("managedFields"), replicas_paths, api_version=rt.api_version)
        out["metadata"] = {**out["metadata"], "managedFields": managed}
        if not managed:
            del out["metadata"]["managedFields"]
    return out


class ConvertedScale:
    """The ``scale`` handlers of a version served through its CRD's conversion webhook."""

    def __init__(self, handlers: ResourceHandlers, conversions: WebhookConversions) -> None:
        self._handlers = handlers
        self._conversions = conversions

    async def handle(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.StreamResponse:
        if rt.scale is None or info.name is None:
            raise errors.NotFound("the server could not find the requested resource")
        if info.verb == "get":
            return await self._get(request, rt, stored, info)
        if info.verb == "update":
            body = await self._handlers.body(request, kind="Scale")
            return await self._write(request, rt, stored, info, lambda _view: body, sent=True)
        if info.verb != "patch":
            raise method_not_allowed()
        patch_type = PatchType.from_content_type(request.headers.get("Content-Type", ""), rt)
        force_of(request, patch_type)  # refuses a non-apply patch's force
        patch = await self._handlers.patch_body(request, patch_type, stored, info)
        if patch_type is PatchType.APPLY:
            return await self._write(request, rt, stored, info, None, applied=patch)
        now, manager = self._handlers.objects.now, field_manager_for(request)

        def patched(view: dict[str, Any]) -> dict[str, Any]:
            return patched_scale(rt, view, scale_patch_type(patch_type), patch, field_manager=manager, now=now())

        return await self._write(request, rt, stored, info, patched)

    async def _served(self, rt: ResourceType, stored: ResourceType, info: RequestInfo, **read: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The object as stored and converted to ``rt``'s version."""
        assert info.name is not None
        current = await self._handlers.objects.get(stored, namespace=info.namespace, name=info.name, **read)
        [served] = await self._conversions.served(rt, [current])
        return current, served

    async def _get(self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo) -> web.Response:
        _, served = await self._served(rt, stored, info, resource_version=request.query.get("resourceVersion"))
        scale, found = custom_scale(rt, served)
        if not found:
            assert rt.scale is not None
            raise errors.InternalError(
                f"Internal error occurred: the spec replicas field {json.dumps('.' + rt.scale.spec_replicas)} does not exist"
            )
        if (as_table := wants_table(request.headers.get("Accept"), protobuf=False)) is not None:
            include = IncludeObject.parse(request.query.get("includeObject"))
            rendered = table(rt, [scale], include=include, now=self._handlers.now(), version=as_table.version)
            return json_response(rendered, content_type=table_content_type(as_table.version))
        return json_response(scale)

    async def _write(
        self, request: web.Request, rt: ResourceType, stored: ResourceType, info: RequestInfo,
        new_scale: Callable[[dict[str, Any]], dict[str, Any]] | None, *, sent: bool = False, applied: Any = None,
    ) -> web.Response:
        """The object read in ``rt``'s version with the Scale ``new_scale`` makes written (or the
        Scale ``applied``), converted and stored as a compare-and-swap on the revision read (read
        again and retried when a concurrent write wins, unless the Scale names the revision)."""
        assert info.name is not None
        objects, warnings = self._handlers.objects, request_warnings(request)
        args = self._handlers.write_args(request, warnings)
        manager = args.pop("field_manager", None)
        webhooks: WebhookCalls | None = args.get("webhooks")
        args["recorded_managed_fields"], args["recorded_subresource"] = True, "scale"
        # The object layer writes the storage version (its Scale read through the request's
        # version's paths when the storage version has no scale subresource); admission sees the
        # request's version's Scale (:class:`_RequestVersionScale`).
        writing = stored if stored.scale is not None else dataclasses.replace(stored, scale=rt.scale)
        paths = objects.replicas_paths(rt)
        modified = errors.conflict_modified(plural=rt.plural, group=rt.group, name=info.name)
        for _attempt in range(PATCH_RETRIES):
            current, served = await self._served(rt, stored, info)
            uid: Any = None
            if new_scale is None:
                new = applied_scale(
                    rt, served, applied, replicas_paths=paths, manager=manager, force=force_of(request, PatchType.APPLY),
                    now=objects.now(), api_version=rt.api_version,
                )
            else:
                def made(view: dict[str, Any]) -> dict[str, Any]:
                    nonlocal uid
                    assert new_scale is not None
                    written = new_scale(view)
                    uid = dig(written, "metadata", "uid")
                    return written

                new = scaled(
                    rt, served, made, replicas_paths=paths, manager=manager, now=objects.now(),
                    sent_to=(info.namespace, info.name) if sent else None,
                )
            named = new["metadata"].get("resourceVersion") != served["metadata"].get("resourceVersion")
            if webhooks is not None:
                admitted = _RequestVersionScale(webhooks, rt, served)
                new = await admitted.mutated(new, name=info.name, namespace=info.namespace, dry_run=args["dry_run"])
                args["webhooks"] = admitted
            converted = await self._conversions.stored(rt, new)
            converted["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion")
            args["expected_uid"] = str(uid) if uid else None
            try:
                updated = await self._conversions.replace(
                    objects, writing, converted, current=current, namespace=info.namespace, name=info.name,
                    subresource=None, args=args,
                )
            except errors.Conflict as exc:
                if named or exc.message != modified.message:
                    raise
                continue
            [out] = await self._conversions.served(rt, [updated])
            try:
                scale, _ = custom_scale(rt, out)
            except errors.ServerError as exc:
                raise errors.BadRequest(exc.message) from None
            return json_response(scale, warnings=warnings)
        raise modified


class _RequestVersionScale:
    """The admission of one write through ``rt``'s ``scale`` whose object the object layer stores in
    the storage version: as kube's ScaleREST admits it, the webhooks and policies see a Scale read
    through ``rt``'s own scale paths (an ``autoscaling/v1`` Scale of ``rt``'s resource, subresource
    ``scale``). The mutating webhooks run on the object in ``rt``'s version before it is converted
    (:meth:`mutated`; kube's scale update admits the Scale before its store's update), the
    validating ones and the policies when the object layer asks, on the object written."""

    def __init__(self, calls: WebhookCalls, rt: ResourceType, served: dict[str, Any]) -> None:
        self._calls = calls
        self._rt = rt
        self._old, _ = custom_scale(rt, served)
        self._new: dict[str, Any] | None = None

    async def mutated(self, new: dict[str, Any], *, name: str, namespace: str | None, dry_run: bool) -> dict[str, Any]:
        """``new`` (in ``rt``'s version) with the replicas the mutating webhooks set on its Scale."""
        scale, _ = custom_scale(self._rt, new)
        request = WebhookRequest(Operation.UPDATE, self._rt, name, namespace, scale, self._old,
                                 subresource="scale", dry_run=dry_run)
        patched = await self._calls.mutate(request)
        if patched is not None:
            new = merge_patch(new, replicas_patch(self._rt, patched, name=name))
        self._new, _ = custom_scale(self._rt, new)
        return new

    async def mutate(self, request: WebhookRequest) -> dict[str, Any] | None:
        return None  # done in the request's version (:meth:`mutated`)

    async def validate(self, request: WebhookRequest) -> None:
        assert self._new is not None, "mutated() runs before the object layer validates"
        await self._calls.validate(dataclasses.replace(request, resource=self._rt, obj=self._new, old=self._old))

    def made_through(self, rt: ResourceType) -> WebhookCalls:
        return self
