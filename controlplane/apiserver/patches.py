"""The four PATCH content types, applied to an object dict.

In: the live object (a dict), the parsed patch body, and its :class:`PatchType`.
Out: the patched object, or an ``ApiError`` (415 for a patch type the kind does not
take, 422 for a patch that cannot be applied, 409 with causes for server-side apply
conflicts).

JSON patch (RFC 6902) is kube's JSON patch library's (:mod:`controlplane.apis.kube.jsonpatches`); JSON merge patch (RFC 7386) is
the few lines below. Strategic merge patch and server-side apply live in
``controlplane.apiserver.patching`` (their own package), imported like any other part
of this server: a broken import there fails at start, never turns into a 415.
"""

from __future__ import annotations

import copy
from enum import StrEnum
from typing import Any, cast

from controlplane.apis.kube.jsonpatches import JsonPatchFailed, json_patched
from controlplane.apis.kube.requestoptions import patch_options_errors
from controlplane.apiserver.errors import (
    BadRequest,
    Cause,
    CauseType,
    Conflict,
    Invalid,
    RejectedRequest,
    RequestEntityTooLarge,
    Target,
    invalid_options,
    unknown_body_format,
)
from controlplane.apiserver.openapi.applytypes import applied_type
from controlplane.apiserver.patching.apply import UntypedApply
from controlplane.apiserver.patching.apply import record_update as _record_update
from controlplane.apiserver.patching.conflicts import ApplyConflict
from controlplane.apiserver.patching.lastapplied import apply_upgrading_client_side
from controlplane.apiserver.patching.strategic import BadRetainKeys, strategic_merge_patch
from controlplane.apiserver.patching.typedvalue import applied_managed_fields, applied_typing_error
from controlplane.apiserver.patching.versions import VersionConverter
from controlplane.apiserver.patching.zerovalues import UNSTRUCTURED, zero_value
from controlplane.apiserver.resources import ResourceType
from controlplane.gojson import cannot_unmarshal


class PatchType(StrEnum):
    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"

    @classmethod
    def from_content_type(cls, content_type: str, rt: ResourceType) -> PatchType:
        media = content_type.split(";", 1)[0].strip().lower()
        for member in cls:
            if member.value == media and (member is not cls.STRATEGIC or rt.strategic_merge):
                return member
        raise unknown_body_format([t.value for t in accepted_patch_types(rt)])


def accepted_patch_types(rt: ResourceType) -> list[PatchType]:
    return [t for t in PatchType if t is not PatchType.STRATEGIC or rt.strategic_merge]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def record_update(
    rt: ResourceType,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str = "Update",
    now: str,
    subresource: str | None = None,
    converter: VersionConverter | None = None,
) -> dict[str, Any]:
    """managedFields bookkeeping for a non-apply write; ``subresource``: the one it was made
    through (``status``, ``scale``), which kube records in the manager's entry; ``converter``:
    the kind's other served versions, for entries written at them."""
    return _record_update(
        old, new, schema=rt.apply_schema, manager=manager, operation=operation, now=now, subresource=subresource,
        converter=converter, zero=zero_value(rt.group, rt.kind) if rt.built_in else UNSTRUCTURED,
    )


def _apply_conflict(exc: ApplyConflict, rt: ResourceType, name: str) -> Conflict:
    """kube's 409 for an apply that conflicts: the conflict's own message and causes, each
    manager named as kube names it (an applier without "using", a subresource's writer
    "with subresource ...", an updater with the version it wrote)."""
    causes = [Cause(CauseType.FIELD_MANAGER_CONFLICT, cause["message"], cause["field"]) for cause in exc.causes]
    return Conflict(str(exc), target=Target(name=name, group=rt.group, kind=rt.plural), causes=causes)


def apply_patch(
    rt: ResourceType,
    live: dict[str, Any] | None,
    patch_type: PatchType,
    patch: Any,
    *,
    manager: str | None,
    force: bool,
    now: str,
    subresource: str | None = None,
    strict_decoding: bool = True,
    converter: VersionConverter | None = None,
) -> dict[str, Any]:
    """``live`` patched by ``patch``; ``live`` is None only for an apply that creates. An apply
    through ``subresource`` (``status``) merges and owns that part of the object only.
    ``strict_decoding``: the request's ``fieldValidation`` is ``Warn`` or ``Strict`` (kube then
    decodes a JSON or merge patch strictly first, and its errors say so)."""
    name = str(((live or {}).get("metadata") or {}).get("name") or "")
    if patch_type is PatchType.APPLY:
        manager = check_apply_request(rt, patch, manager=manager)
        try:
            return apply_upgrading_client_side(
                copy.deepcopy(live) if live is not None else None,
                patch,
                schema=rt.apply_schema,
                manager=manager,
                force=force,
                now=now,
                subresource=subresource,
                converter=converter,
            )
        except UntypedApply as exc:
            raise _untyped(rt, patch, str(exc), name) from exc
        except ValueError as exc:
            raise _unappliable(str(exc), str(exc), rt, name) from exc
        except ApplyConflict as exc:
            raise _apply_conflict(exc, rt, name) from exc
    if live is None:
        raise ValueError("only server-side apply can patch an object that does not exist")
    if patch_type is PatchType.MERGE:
        if not isinstance(patch, dict):
            raise _undecodable(patch, "map[string]interface {}", prefix="error decoding patch: " if strict_decoding else "")
        return cast(dict[str, Any], merge_patch(live, patch))
    if patch_type is PatchType.JSON:
        if patch is None:
            return copy.deepcopy(live)  # Go decodes null as no operations
        strict_prefix = "error decoding patch: " if strict_decoding else ""
        if not isinstance(patch, list):
            raise _undecodable(patch, "[]handlers.jsonPatchOp" if strict_decoding else "jsonpatch.Patch", prefix=strict_prefix)
        for op in patch:
            if op is not None and not isinstance(op, dict):
                raise _undecodable(op, "handlers.jsonPatchOp" if strict_decoding else "jsonpatch.Operation", prefix=strict_prefix)
        if len(patch) > MAX_JSON_PATCH_OPERATIONS:
            raise RequestEntityTooLarge(f"Request entity too large: The allowed maximum operations in a JSON patch "
                                        f"is {MAX_JSON_PATCH_OPERATIONS}, got {len(patch)}")
        try:
            result = json_patched(live, patch)
        except JsonPatchFailed as exc:  # CopiedTooMuch among them
            # kube's reasonless 422; the failing operation rides as a cause, so kubectl says which
            raise RejectedRequest(str(exc)) from exc
        if not isinstance(result, dict):
            raise BadRequest("the JSON patch must leave an object")
        return cast(dict[str, Any], result)
    if not isinstance(patch, dict):
        raise _undecodable(patch, "map[string]interface {}", prefix="")
    try:
        return strategic_merge_patch(copy.deepcopy(live), patch, kind=rt.kind)
    except BadRetainKeys as exc:
        # kube's words and 400 (ErrBadPatchFormatForRetainKeys); which field, as a cause
        cause = Cause(CauseType.FIELD_VALUE_INVALID, str(exc), "patch")
        raise BadRequest("invalid patch format of retainKeys", causes=[cause]) from exc
    except ValueError as exc:
        raise _unappliable(f"the strategic merge patch could not be applied: {exc}", str(exc), rt, name) from exc


def check_apply_request(rt: ResourceType, patch: Any, *, manager: str | None) -> str:
    """Refuse a server-side apply kube refuses before merging anything: one without a field
    manager, one that is not an object, and one whose ``apiVersion`` and ``kind`` are not the
    URL's (kube's field manager checks the applied object's group, version and kind first, so
    an apply at ``apps/v1`` of a body saying ``apps/v1beta1`` is a 400 ``invalid object type:
    apps/v1beta1, Kind=Deployment``; the body's version is never converted), one that carries
    ``metadata.managedFields`` (kube's 400 ``metadata.managedFields must be nil``: an applier
    states fields, the server records who owns them), and one that structured-merge-diff cannot
    type (:func:`_untyped`): a value of the wrong type, a field the kind does not declare
    (whatever the request's ``fieldValidation``, as kube). Returns the manager."""
    # The HTTP layer checked the request's PatchOptions; an in-process apply gets the same 422.
    found = patch_options_errors(apply=True, force_given=False, manager=manager or "", dry_run=(), field_validation="")
    if found or not manager:
        raise invalid_options("PatchOptions", found)
    if not isinstance(patch, dict):
        raise BadRequest("the apply patch must be a single object (a YAML or JSON mapping)")
    group, version, kind = _group_version_kind(patch)
    if (group, version, kind) != (rt.group, rt.version, rt.kind):
        raise BadRequest(f"invalid object type: {group}/{version}, Kind={kind}")
    if applied_managed_fields(patch):
        raise BadRequest("metadata.managedFields must be nil")
    # Typed before its fields are decoded, as kube's field manager types it: a value of the wrong
    # shape or type is structured-merge-diff's error, not the kind's decoding error.
    if (untyped := applied_typing_error(patch, rt.apply_schema, applied_type(rt))) is not None:
        metadata = patch.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        raise _untyped(rt, patch, untyped, name if isinstance(name, str) else "")
    return manager


def _untyped(rt: ResourceType, patch: dict[str, Any], detail: str, name: str) -> Invalid:
    """structured-merge-diff's refusal to type an applied object (:mod:`.patching.typedvalue`).
    kube's field manager returns it as a plain error, a reasonless 500; the hub keeps its words
    but says what it is, the client's mistake: a 422 with them as the cause at ``patch``, which
    kubectl prints."""
    return _unappliable(f"failed to create typed patch object ({_gvknn(patch)}): {detail}", detail, rt, name)


def _group_version_kind(obj: dict[str, Any]) -> tuple[str, str, str]:
    """An object's group, version and kind as Go's ``Unstructured.GroupVersionKind`` reads them:
    a value that is not a string counts as empty, and an apiVersion with more than one ``/``
    yields no group, version or kind at all."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    api_version = api_version if isinstance(api_version, str) else ""
    kind = kind if isinstance(kind, str) else ""
    if api_version in ("", "/"):
        return "", "", kind
    if api_version.count("/") > 1:
        return "", "", ""
    group, _, version = api_version.rpartition("/")
    return group, version, kind


#: kube's ``maxJSONPatchOperations``: a JSON patch with more operations is a 413.
MAX_JSON_PATCH_OPERATIONS = 10_000


def _undecodable(value: Any, go_type: str, *, prefix: str) -> BadRequest:
    """Go's error decoding a patch body of the wrong JSON type into ``go_type`` (kube's 400)."""
    return BadRequest(prefix + cannot_unmarshal(value, go_type))


def _gvknn(applied: dict[str, Any]) -> str:
    """The applied object as kube's field manager names it in its errors (``objectGVKNN``):
    ``namespace/name; group/version, Kind=kind``, from the body itself."""
    found = applied.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    group, _, version = str(applied.get("apiVersion") or "").rpartition("/")
    return (f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}; "
            f"{group}/{version}, Kind={applied.get('kind') or ''}")


def _unappliable(message: str, detail: str, rt: ResourceType, name: str) -> Invalid:
    """A patch that cannot be applied to the object: 422 with the reason as a cause at ``patch``,
    so that kubectl, which prints an Invalid error's causes and not its message, says why
    (``The Deployment "web" is invalid: patch: can't remove a non-existent object 'x'``)."""
    return Invalid(
        message,
        target=Target(name=name, group=rt.group, kind=rt.kind),
        causes=[Cause(CauseType.FIELD_VALUE_INVALID, detail, "patch")],
    )
