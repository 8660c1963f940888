"""A written body of another kind or apiVersion than the URL's resource, refused in kube's words.

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

from controlplane.apiserver import errors
from controlplane.apiserver.openapi.upstream import shared_definitions
from controlplane.apiserver.resources import ResourceType

#: Where kube's built-in kinds are registered (the scheme named in its "no kind" error).
_LEGACY_SCHEME = "pkg/api/legacyscheme/scheme.go:30"
#: Definitions of the kinds kube-apiserver's own scheme holds (not CRDs' or aggregation's).
_LEGACY_DEFINITIONS = "io.k8s.api."
#: Groups whose kind converts to one internal type: events.k8s.io's Event is core's.
_SHARED_EVENT_GROUPS = frozenset({"", "events.k8s.io"})


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
        return errors.BadRequest(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
    handled = f'{kind} in version "{version}" cannot be handled as a {rt.kind}'
    if definitions.for_kind(group, version, kind) is None:
        return errors.BadRequest(
            f'{handled}: no kind "{kind}" is registered for version "{api_version}" in scheme "{_LEGACY_SCHEME}"'
        )
    internal = "core" if rt.kind == "Event" else target.split(".")[-3]
    return errors.BadRequest(f"{handled}: converting ({version}.{kind}) to ({internal}.{rt.kind}): unknown conversion")
