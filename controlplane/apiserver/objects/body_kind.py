"""A written body checked against the URL's resource (:func:`checked_body`): one of another kind
or apiVersion is refused in kube's words.

kube-apiserver decodes a body into the resource's own Go type, so for a built-in kind the
decoder speaks first: a body of a kind kube knows (a Secret sent to ``configmaps``) cannot be
converted (400 ``Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret)
to (core.ConfigMap): unknown conversion``), and one of a kind it does not know (``kind: secret``)
is not registered (``... no kind "secret" is registered for version "v1" in scheme
"pkg/api/legacyscheme/scheme.go:30"``). A body of the same kind in another version of its group
decodes, and then its apiVersion is refused (``the API version in the data (...) does not match
the expected API version (...)``), as for every kind the hub serves that kube does not build in.

In: the resource type and the body's apiVersion and kind. Out: the error to raise. Pure.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.openapi.upstream import shared_definitions
from controlplane.apiserver.resources import ResourceType

#: Where kube's built-in kinds are registered (the scheme named in its "no kind" error).
_LEGACY_SCHEME = "pkg/api/legacyscheme/scheme.go:30"
#: Definitions of the kinds kube-apiserver's own scheme holds (not CRDs' or aggregation's).
_LEGACY_DEFINITIONS = "io.k8s.api."
#: Groups whose kind converts to one internal type: events.k8s.io's Event is core's.
_SHARED_EVENT_GROUPS = frozenset({"", "events.k8s.io"})
#: ObjectMeta's maps and lists marked ``omitempty``: kube decodes every object's metadata into
#: the Go type (a custom resource's too, apiextensions' ``objectmeta.Coerce``), so an empty one is
#: not kept. ``managedFields`` is left alone: an empty list there means "keep them", as in kube.
_OMITTED_WHEN_EMPTY: tuple[tuple[str, type], ...] = (
    ("labels", dict),
    ("annotations", dict),
    ("finalizers", list),
    ("ownerReferences", list),
)


def wrong_body_kind(rt: ResourceType, *, api_version: str, kind: str) -> errors.BadRequest:
    """The error for a body whose ``api_version`` or ``kind`` is not ``rt``'s."""
    group, _, version = api_version.rpartition("/")
    definitions = shared_definitions()
    target = definitions.for_kind(rt.group, rt.version, rt.kind) if rt.custom is None else None
    same_kind = kind == rt.kind and (
        group == rt.group or (kind == "Event" and {group, rt.group} <= _SHARED_EVENT_GROUPS)
    )
    if target is None or not target.startswith(_LEGACY_DEFINITIONS) or same_kind:
        if api_version != rt.api_version:
            return errors.BadRequest(
                f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
            )
        return errors.BadRequest(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    handled = f'{kind} in version "{version}" cannot be handled as a {rt.kind}'
    if definitions.for_kind(group, version, kind) is None:
        return errors.BadRequest(
            f'{handled}: no kind "{kind}" is registered for version "{api_version}" in scheme "{_LEGACY_SCHEME}"'
        )
    internal = "core" if rt.kind == "Event" else target.split(".")[-3]
    return errors.BadRequest(
        f"{handled}: converting ({version}.{kind}) to ({internal}.{rt.kind}): unknown conversion"
    )


def wrong_scale_kind(rt: ResourceType, scale: dict[str, Any]) -> errors.BadRequest | None:
    """The error for a Scale sent to a built-in kind's scale subresource that says it is of another
    kind: kube decodes it into an autoscaling/v1 Scale and refuses it as any body of the wrong kind
    (``Deployment in version "v1" cannot be handled as a Scale: converting (v1.Deployment) to
    (autoscaling.Scale): unknown conversion``); a missing apiVersion is autoscaling/v1's."""
    kind = scale.get("kind")
    if not isinstance(kind, str) or kind in ("", "Scale") or rt.custom is not None:
        return None
    own = shared_definitions().for_kind(rt.group, rt.version, rt.kind)
    if own is None or not own.startswith(_LEGACY_DEFINITIONS):
        return None  # a kind kube serves as a custom resource: its scale is decoded otherwise
    scale_type = dataclasses.replace(rt, group="autoscaling", version="v1", kind="Scale")
    return wrong_body_kind(
        scale_type, api_version=str(scale.get("apiVersion") or "autoscaling/v1"), kind=kind
    )


def checked_body(
    rt: ResourceType,
    obj: Any,
    *,
    namespace: str | None,
    name: str | None = None,
    copy_body: bool = True,
    from_request: bool = False,
    named: bool = False,
) -> dict[str, Any]:
    """A private copy of a written object, checked against the request's type and URL.

    With ``copy_body=False`` the caller hands ``obj`` over and it is used as it is. A request's
    body (``from_request``) of the kind's storage version is refused as any other version's is
    (kube decodes it, then finds its apiVersion not the URL's); an object of the hub's own in
    that version (a patch applied to the stored one) is converted. A request's body, or an object
    that must be ``named`` (a patched one), carries the URL's ``name``: none is kube's 400.
    Empty or null ``labels``, ``annotations``, ``finalizers`` and ``ownerReferences`` are dropped, as
    Go marshals ObjectMeta (a nil map or slice is omitted; Helm renders a bare ``labels:`` null): ``kubectl diff`` of an object without annotations then shows no
    ``annotations: {}`` that kubectl's own patch added.
    """
    if not isinstance(obj, dict):
        raise errors.BadRequest(f"the body must be a {rt.kind} object, not {type(obj).__name__}")
    if copy_body:
        obj = copy.deepcopy(obj)
    checked: dict[str, Any] = obj
    api_version = obj.setdefault("apiVersion", rt.api_version)
    kind = obj.setdefault("kind", rt.kind)
    if not from_request and rt.stored_in_version and api_version == rt.stored_in_version:
        # A stored object written or patched through another version of its kind.
        if rt.conversion is not None:
            obj = checked = rt.conversion.from_storage(obj)
        obj["apiVersion"] = api_version = rt.api_version
    if api_version != rt.api_version or kind != rt.kind:
        raise wrong_body_kind(rt, api_version=str(api_version), kind=str(kind))
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.BadRequest("metadata must be an object")
    check_url_identity(
        meta, namespace=namespace if rt.namespaced else None, name=name, named=from_request or named
    )
    for key, empty_type in _OMITTED_WHEN_EMPTY:
        value = meta.get(key, empty_type)
        if value is None or (isinstance(value, empty_type) and not value):
            del meta[key]
    if rt.namespaced:
        resolved = namespace or meta.get("namespace")
        if not resolved:
            raise errors.BadRequest(f"{rt.plural} is namespaced: the object needs metadata.namespace")
        meta["namespace"] = resolved
    else:
        meta.pop("namespace", None)
    if name is not None:
        meta["name"] = name
    return checked


def check_url_identity(meta: dict[str, Any], *, namespace: str | None, name: str | None, named: bool) -> None:
    """kube's checks of a written body's metadata against its URL: the namespace
    (``EnsureObjectNamespaceMatchesRequestNamespace``), then, on an update, the name (``checkName``;
    with ``named`` a request's body must carry it, as kube decodes one)."""
    body_namespace = meta.get("namespace")
    if namespace and body_namespace and body_namespace != namespace:
        raise errors.BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if name is None:
        return
    body_name = meta.get("name")
    if not body_name and named:
        raise errors.BadRequest(
            f"the name of the object ({name} based on URL) was undeterminable: name must be provided"
        )
    if body_name and body_name != name:
        raise errors.BadRequest(
            f"the name of the object ({body_name}) does not match the name on the URL ({name})"
        )


def status_request(obj: Any) -> Any:
    """A status update's body, copied where the write takes from it: only its ``.status`` is
    written (its metadata is checked against the URL and names the revision), so its spec is
    not copied. Anything but an object is left for :func:`checked_body` to refuse."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = dict(meta)
    if "status" in obj:
        out["status"] = copy.deepcopy(obj["status"])
    return out
