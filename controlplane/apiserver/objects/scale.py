"""The scale subresource: an object's replicas seen and set as an autoscaling/v1 Scale.

Pure functions over the kind's :class:`~controlplane.apiserver.resources.ScaleSubresource`
(where its spec and status replicas and its label selector are): :func:`scale_of` reads the
Scale view of an object, :func:`replicas_patch` turns a Scale into the merge patch that
writes it back, :func:`scale_patch_type`/:func:`patched_scale` apply a patch sent to the
subresource and :func:`applied_scale` a server-side apply of it. The store does the reading
and writing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from controlplane.apis.kube.field import IS_NEGATIVE
from controlplane.apis.kube.selectors import SelectorError, scale_status_selector
from controlplane.apis.untyped import dig
from controlplane.apiserver import errors
from controlplane.apiserver.objects.body_kind import check_url_identity, wrong_scale_kind
from controlplane.apiserver.openapi.known_fields import CannotUnmarshal, unknown_fields_of
from controlplane.apiserver.patches import PatchType, apply_patch, merge_patch
from controlplane.apiserver.patching.scalefields import ReplicasPaths, to_parent, to_subresource
from controlplane.apiserver.resources import ResourceType, ScaleSubresource
from controlplane.apiserver.validation import DecodingError

#: kube's decoding of an autoscaling/v1 Scale.
_SCALE_DECODING = unknown_fields_of("autoscaling", "v1", "Scale")


def scale_of(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of ``obj``."""
    spec = require_scale(rt)
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": dig(obj, *spec.status_replicas.split(".")) or 0}
    try:
        shown = scale_status_selector(obj, path=spec.label_selector, label_set=spec.label_set)
    except SelectorError as exc:
        raise errors.bad_selector(exc) from None
    if shown is not None:
        status["selector"] = shown
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            key: meta[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in meta
        },
        "spec": {"replicas": dig(obj, *spec.spec_replicas.split(".")) or 0},
        "status": status,
    }


def require_scale(rt: ResourceType) -> ScaleSubresource:
    if rt.scale is None:
        raise errors.NotFound(f"the server could not find the requested resource ({rt.plural}/scale)")
    return rt.scale


def replicas_patch(
    rt: ResourceType, scale: Any, *, name: str, sent_to: tuple[str | None, str] | None = None
) -> dict[str, Any]:
    """The merge patch that sets the object's replicas from ``scale`` (its resourceVersion,
    when given, a precondition). As kube decodes a Scale: replicas of another type than an
    int32 are the decoder's :class:`DecodingError` (``json: cannot unmarshal string into Go
    struct field ScaleSpec.spec.replicas of type int32``), none are 0, fewer than none Invalid.
    A Scale sent to a URL (``sent_to``: its namespace and name) is first refused if it says it is
    of another kind (kube's decoder's 400), then names the URL's object, as kube's update handler
    checks it: its namespace when given, its name always (400s in kube's words)."""
    spec = require_scale(rt)
    wrong_kind = wrong_scale_kind(rt, scale) if sent_to is not None and isinstance(scale, dict) else None
    if wrong_kind is not None:
        raise wrong_kind
    try:
        _SCALE_DECODING(scale if isinstance(scale, dict) else {}, False)
    except CannotUnmarshal as exc:
        scale_type = dataclasses.replace(rt, kind="Scale", version="v1")
        raise DecodingError(scale_type, str(exc), converted=exc.converted) from exc
    if sent_to is not None:
        meta = scale.get("metadata") if isinstance(scale, dict) else None
        url_namespace, url_name = sent_to
        check_url_identity(meta if isinstance(meta, dict) else {}, namespace=url_namespace, name=url_name, named=True)
    replicas = dig(scale, "spec", "replicas") or 0
    if replicas < 0:
        raise errors.invalid(
            kind="Scale", group="autoscaling", name=name,
            causes=[errors.Cause(errors.CauseType.FIELD_VALUE_INVALID, f"Invalid value: {replicas}: {IS_NEGATIVE}", "spec.replicas")],
        )
    patch: dict[str, Any] = {}
    node = patch
    *parents, leaf = spec.spec_replicas.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = replicas
    wanted = dig(scale, "metadata", "resourceVersion")
    if wanted:
        patch["metadata"] = {"resourceVersion": str(wanted)}
    return patch


def scale_patch_type(patch_type: PatchType) -> PatchType:
    """How a patch (not an apply) of the scale subresource is applied: a Scale has no lists, so
    a strategic merge patch is a merge patch here."""
    return PatchType.MERGE if patch_type is PatchType.STRATEGIC else patch_type


def applied_scale(
    rt: ResourceType,
    parent: dict[str, Any],
    patch: Any,
    *,
    replicas_paths: ReplicasPaths,
    manager: str | None,
    force: bool,
    now: str,
    api_version: str | None = None,
) -> dict[str, Any]:
    """``parent`` as a server-side apply of the Scale ``patch`` leaves it: its replicas the
    applied ones, and the applier the owner of them in the parent's managedFields (kube's
    ``ScaleHandler``, :mod:`~controlplane.apiserver.patching.scalefields`). A conflict with
    another owner of the replicas is kube's 409 naming it; ``force`` takes them over. A manager new
    to the replicas is recorded at ``api_version`` (the request's; the parent's when not given)."""
    scale_type = dataclasses.replace(
        rt, group="autoscaling", version="v1", kind="Scale", strategic_merge=False, model=None, field_schema=None
    )
    owners = parent["metadata"].get("managedFields")
    view = scale_of(rt, parent)
    if seen := to_subresource(owners, replicas_paths):
        view["metadata"]["managedFields"] = seen
    applied = apply_patch(
        scale_type, view, PatchType.APPLY, patch, manager=manager, force=force, now=now, subresource="scale"
    )
    replicas = replicas_patch(rt, applied, name=str(parent["metadata"]["name"]))
    replicas.pop("metadata", None)
    out: dict[str, Any] = merge_patch(parent, replicas)
    managed = to_parent(owners, applied["metadata"].get("managedFields"), replicas_paths, api_version=api_version or rt.api_version)
    out["metadata"] = {**out["metadata"], "managedFields": managed}
    if not managed:
        del out["metadata"]["managedFields"]
    return out


def patched_scale(
    rt: ResourceType, current: dict[str, Any], patch_type: PatchType, patch: Any, *, field_manager: str | None, now: str
) -> dict[str, Any]:
    """``current`` (a Scale) with ``patch`` applied (``patch_type`` from :func:`scale_patch_type`)."""
    scale_type = dataclasses.replace(rt, strategic_merge=False, model=None)
    return apply_patch(scale_type, current, patch_type, patch, manager=field_manager, force=False, now=now)


def check_uid_precondition(rt: ResourceType, old: dict[str, Any], wanted: str | None) -> None:
    """A Conflict when a scale write's uid precondition is not the object's uid, as kube's scale
    subresources answer it (``deployments/scale.apps`` for a built-in kind, ``scale.<group>`` for a
    custom one)."""
    meta = old["metadata"]
    if wanted and wanted != meta.get("uid"):
        # Built-in kinds (the ones that take a strategic merge patch) name their own scale
        # resource; apiextensions names a custom resource's plainly ``scale``. Not ``rt.custom``:
        # it marks only CRDs installed on the hub, and LeaderWorkerSet, declared in code, is a CRD in kube.
        resource = f"{rt.plural}/scale" if rt.strategic_merge else "scale"
        raise errors.Conflict(
            f'Operation cannot be fulfilled on {errors.qualified_resource(resource, rt.group)} "{meta["name"]}": '
            f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {meta.get('uid', '')}",
            target=errors.Target(name=meta["name"], group=rt.group, kind=resource),
        )
