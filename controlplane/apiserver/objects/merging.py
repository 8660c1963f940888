"""What an update stores: the request's object merged with the stored one.

kube's update strategy, as plain functions over dicts and the kind's :class:`ResourceType`: the
server-owned metadata (uid, creationTimestamp, generation, resourceVersion…) and the other half
of the object (``.status`` on a main-resource update, the rest on a status write) are kept from
the stored object, the uid may not change, whether the generation moves
(:func:`spec_changed`), and whether an update changes anything at all (:func:`unchanged`).
:class:`~controlplane.apiserver.objects.writing.Writer` calls them for updates and patches.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import orjson

from controlplane.apis.kube.field import immutable
from controlplane.apis.kube.generation import generation_content, status_write_metadata
from controlplane.apiserver import errors
from controlplane.apiserver.openapi.known_fields import CannotUnmarshal, decoded_time
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.validation import DecodingError

#: The metadata the server owns: a create drops the request's, an update keeps the stored ones.
SERVER_OWNED_METADATA = (
    "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "resourceVersion",
    "selfLink",
)
_SERVER_OWNED_TIMES = ("creationTimestamp", "deletionTimestamp")


def refuse_undecodable_server_times(rt: ResourceType, meta: dict[str, Any]) -> None:
    """kube decodes a built-in kind's body before it drops (create) or replaces (update) the
    server-owned metadata: a ``creationTimestamp`` or ``deletionTimestamp`` Go cannot parse is
    the decoder's 400 all the same, one it can is ignored."""
    if not rt.decoded_by_kube:
        return
    for key in _SERVER_OWNED_TIMES:
        if meta.get(key) is not None:
            try:
                decoded_time(meta[key])
            except CannotUnmarshal as exc:
                raise DecodingError(rt, str(exc)) from exc


def merged(
    rt: ResourceType, old: dict[str, Any], incoming: dict[str, Any], *, subresource: str | None
) -> dict[str, Any]:
    """The object an update would store: server-owned fields and the other half kept."""
    _check_uid(rt, old, incoming)
    new = _merged(rt, old, incoming, subresource=subresource)
    if subresource is not None and subresource in rt.status_writes:
        rt.status_writes[subresource].prepare(new, old)
    if rt.conversion is not None and rt.conversion.status_annotations:
        # Annotations that carry the status (in a converted version) go with it: the request's
        # on a status write, the stored ones on any other.
        source = incoming if rt.writes_status_only(subresource) else old
        _set_annotations(new, source, rt.conversion.status_annotations)
    return new


def _check_uid(rt: ResourceType, old: dict[str, Any], incoming: dict[str, Any]) -> None:
    """kube's ``ValidateObjectMetaUpdate``: an update may leave ``metadata.uid`` out (the stored one
    is kept), never change it. So a patch that names the uid it was made for (kube-apiserver's merge
    patch of a token Secret's last-used label) cannot land on an object re-created under the name."""
    uid, stored = incoming["metadata"].get("uid"), old["metadata"].get("uid")
    if not uid or uid == stored:
        return
    causes = [errors.Cause(str(e.type), e.message, e.field) for e in immutable(uid, stored, "metadata.uid")]
    raise errors.invalid(kind=rt.kind, group=rt.group, name=str(old["metadata"].get("name") or ""), causes=causes)


def set_managed_fields(obj: dict[str, Any], source: dict[str, Any]) -> None:
    """``obj``'s managedFields as ``source`` has them (``obj``'s metadata is its own dict)."""
    managed = source["metadata"].get("managedFields")
    if managed:
        obj["metadata"]["managedFields"] = managed
    else:
        obj["metadata"].pop("managedFields", None)


def _set_annotations(obj: dict[str, Any], source: dict[str, Any], keys: tuple[str, ...]) -> None:
    """``obj``'s annotations ``keys`` as ``source`` has them (set or absent); its annotations are
    replaced by a new dict, never changed in place (a status write shares the stored metadata)."""
    meta = obj["metadata"] = dict(obj.get("metadata") or {})
    given = (source.get("metadata") or {}).get("annotations") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in keys}
    annotations.update({k: given[k] for k in keys if k in given})
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)


def _merged(
    rt: ResourceType, old: dict[str, Any], incoming: dict[str, Any], *, subresource: str | None
) -> dict[str, Any]:
    if rt.writes_status_only(subresource):
        # ``old`` is this write's own decoded copy. Where the kind is defaulted as it is read, it
        # carries its defaults already and defaulting ``new`` again writes no new value, so the
        # two share every subtree but metadata (whose resourceVersion and managedFields change)
        # and status; otherwise defaulting may fill the spec in: ``new`` gets a copy of its own.
        # A ``prepare`` may change nested values in place (a CRD's finalizers): never shared with it.
        shared = rt.prepare is None and (rt.defaults_on_read is not None or rt.defaults is None)
        new = {**old, "metadata": dict(old["metadata"])} if shared else copy.deepcopy(old)
        if "status" in incoming:
            new["status"] = incoming["status"]
        else:
            new.pop("status", None)
        new["metadata"] = status_write_metadata(rt.group, rt.kind, stored=new["metadata"], request=incoming["metadata"])
        return new
    if subresource and not (subresource == "finalize" and rt.finalize is not None):
        raise errors.NotFound(f"the server could not find the requested resource ({rt.plural}/{subresource})")
    new = incoming
    meta = new["metadata"]
    old_meta = old["metadata"]
    refuse_undecodable_server_times(rt, meta)
    for key in SERVER_OWNED_METADATA:
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if "managedFields" not in meta and "managedFields" in old_meta:
        meta["managedFields"] = old_meta["managedFields"]
    if rt.has_status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    return new


def spec_changed(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an update moves the generation (:func:`generation_content`): of the storage forms,
    for a converted version (a v1 HPA's metrics other than CPU are annotations). A kind with a
    status subresource is converted without its status, which the generation does not follow."""
    if rt.conversion is not None:
        if rt.has_status:
            old, new = _without_status(old), _without_status(new)
        old, new = rt.conversion.to_storage(old), rt.conversion.to_storage(new)
    content = partial(generation_content, group=rt.group, kind=rt.kind, has_status=rt.has_status)
    return content(new) != content(old)


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key != "status"}


def unchanged(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an update of ``old`` to ``new`` changes nothing kube would write (the resourceVersion
    aside, and the managedFields' timestamps: :func:`_only_managed_times_differ`)."""
    return _without_resource_version(new) == _without_resource_version(old) or _only_managed_times_differ(old, new)


def _without_resource_version(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _only_managed_times_differ(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``new`` is ``old`` but for its managedFields' timestamps, which kube-apiserver
    treats as no change (its ``IgnoreManagedFieldsTimestampsTransformer``): an apply that changed
    a field which defaulting then put back as it was writes nothing."""
    before, after = old["metadata"].get("managedFields"), new["metadata"].get("managedFields")
    if before == after or not isinstance(before, list) or not isinstance(after, list) or len(before) != len(after):
        return False
    # As entries, not as a list: the sort by time moves the applier's re-dated entry behind others.
    if sorted(map(_untimed_key, before)) != sorted(map(_untimed_key, after)):
        return False
    return _without_resource_version({**new, "metadata": {**new["metadata"], "managedFields": before}}) == (
        _without_resource_version(old)
    )


def _untimed_key(entry: Any) -> bytes:
    untimed = {k: v for k, v in entry.items() if k != "time"} if isinstance(entry, dict) else entry
    return orjson.dumps(untimed, option=orjson.OPT_SORT_KEYS)
