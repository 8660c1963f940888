"""Moving an object from client-side to server-side apply, as kube-apiserver does.

``kubectl apply`` (client-side) records what it applied in the
``kubectl.kubernetes.io/last-applied-configuration`` annotation and writes as the manager
``kubectl-client-side-apply``. When ``kubectl apply --server-side`` (the manager
``kubectl``) later changes one of those fields, a plain server-side apply would conflict
with ``kubectl-client-side-apply``. kube's field manager (``lastAppliedManager`` and
``lastAppliedUpdater`` in k8s.io/apimachinery's managedfields) instead:

- takes over, without a conflict, every conflicting field that the last-applied
  configuration lists with the value the object still has (a field someone changed since
  still conflicts; so does everything when the annotation is missing, unreadable or of
  another apiVersion);
- after a successful apply by ``kubectl``, rewrites the annotation (when the object has
  one) to the configuration just applied, so that a later client-side apply diffs against
  it; the annotation is dropped when it would take the object's annotations over kube's
  256 KiB limit.

Only the manager ``kubectl`` gets this, as in kube: another manager name opts out.
Pure; inputs are not modified.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Unpack

from controlplane.apiserver.patching.apply import ApplyArgs, _without_managed_fields, server_side_apply
from controlplane.apiserver.patching.comparing import Comparison, compare, field_set
from controlplane.apiserver.patching.conflicts import ApplyConflict
from controlplane.apiserver.patching.fieldpaths import Path
from controlplane.apiserver.patching.schema import FieldSchema
from controlplane.gojson import go_json

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
#: The field manager whose server-side applies upgrade client-side apply's ownership.
KUBECTL_MANAGER = "kubectl"
#: kube's limit on all of an object's annotations together (keys and values).
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def apply_upgrading_client_side(
    live: dict[str, Any] | None, applied: dict[str, Any], **options: Unpack[ApplyArgs]
) -> dict[str, Any]:
    """:func:`server_side_apply` with its ``options``, and kube's client-side apply upgrade when
    ``kubectl`` applies to an object that exists (through the main resource: an apply through a
    subresource is a plain one)."""
    if options.get("subresource") or options["manager"] != KUBECTL_MANAGER or live is None:
        return server_side_apply(live, applied, **options)
    try:
        result = server_side_apply(live, applied, **options)
    except ApplyConflict as conflict:
        allowed = allowed_conflicts(live, schema=options["schema"])
        if allowed is None:
            raise
        left = conflict.without(allowed)
        if left is not None:
            raise left from conflict
        options["force"] = True
        result = server_side_apply(live, applied, **options)
    if _last_applied(live):
        _set_last_applied(result, applied)
    return result


def allowed_conflicts(live: Mapping[str, Any], *, schema: FieldSchema) -> set[Path] | None:
    """The fields the last-applied configuration lists with the value ``live`` still has
    (None when ``live`` has no readable annotation of its own apiVersion)."""
    raw = _last_applied(live)
    if not raw:
        return None
    try:
        last = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != live.get("apiVersion"):
        return None
    listed: set[Path] = set()
    field_set(last, schema, (), listed)
    comparison = Comparison()
    compare(last, _without_managed_fields(live), schema, (), comparison)
    return listed - comparison.modified - comparison.added - comparison.removed


def _last_applied(obj: Mapping[str, Any]) -> str:
    annotations = (obj.get("metadata") or {}).get("annotations")
    value = annotations.get(LAST_APPLIED_ANNOTATION) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else ""


def _set_last_applied(result: dict[str, Any], applied: Mapping[str, Any]) -> None:
    """Record ``applied`` (without the annotation itself) as the last-applied configuration."""
    meta = result.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    # As Go's json.Encoder writes it (kube's unstructured encoding): sorted keys and a closing newline.
    annotations[LAST_APPLIED_ANNOTATION] = go_json(_without_last_applied(applied), sort_keys=True) + "\n"
    if sum(len(k) + len(v) for k, v in annotations.items() if isinstance(v, str)) > TOTAL_ANNOTATION_SIZE_LIMIT:
        del annotations[LAST_APPLIED_ANNOTATION]
    meta["annotations"] = annotations


def _without_last_applied(applied: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(applied)
    meta = out.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get("annotations"), Mapping):
        annotations = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED_ANNOTATION}
        out["metadata"] = {**meta, "annotations": annotations}
    return out

