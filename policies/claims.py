"""The marks Karmada puts on what a propagation policy claims, and on the policy itself.

Karmada's mutating webhook gives every PropagationPolicy and ClusterPropagationPolicy it creates a
permanent id, a random UUID in the label ``propagationpolicy.karmada.io/permanent-id`` (or
``clusterpropagationpolicy.karmada.io/permanent-id``), kept for the policy's life
(``pkg/webhook/{,cluster}propagationpolicy/mutating.go``; :func:`assign_permanent_id`). Its
detector marks a resource template a policy claims, and the template's ResourceBinding, with that
id and the policy's name (``pkg/detector/claim.go``, ``AddPPClaimMetadata``/``AddCPPClaimMetadata``):

* claimed by a PropagationPolicy: the label ``propagationpolicy.karmada.io/permanent-id`` and the
  annotations ``propagationpolicy.karmada.io/namespace`` and ``propagationpolicy.karmada.io/name``;
* by a ClusterPropagationPolicy: the label ``clusterpropagationpolicy.karmada.io/permanent-id`` and
  the annotation ``clusterpropagationpolicy.karmada.io/name``.

One claimant's marks at a time: a PropagationPolicy that preempts a ClusterPropagationPolicy's claim
removes the other's (``excludeClusterPolicy``), and the marks go when the policy is deleted or stops
selecting the template (``CleanupPPClaimMetadata``), the binding staying until the template goes.

A policy stored before the hub gave ids has none; its ``metadata.uid`` stands for it. Pure.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from policies.models import AnyPropagationPolicy, PropagationPolicy

PP_PERMANENT_ID_LABEL: Final = "propagationpolicy.karmada.io/permanent-id"
PP_NAMESPACE_ANNOTATION: Final = "propagationpolicy.karmada.io/namespace"
PP_NAME_ANNOTATION: Final = "propagationpolicy.karmada.io/name"
CPP_PERMANENT_ID_LABEL: Final = "clusterpropagationpolicy.karmada.io/permanent-id"
CPP_NAME_ANNOTATION: Final = "clusterpropagationpolicy.karmada.io/name"

#: The permanent-id label of each propagation policy kind.
PERMANENT_ID_LABELS: Final = {
    "PropagationPolicy": PP_PERMANENT_ID_LABEL,
    "ClusterPropagationPolicy": CPP_PERMANENT_ID_LABEL,
}
#: Every claim mark, labels and annotations: what a claim replaces and a release removes.
CLAIM_LABELS: Final = (PP_PERMANENT_ID_LABEL, CPP_PERMANENT_ID_LABEL)
CLAIM_ANNOTATIONS: Final = (PP_NAMESPACE_ANNOTATION, PP_NAME_ANNOTATION, CPP_NAME_ANNOTATION)


def assign_permanent_id(kind: str, obj: dict[str, Any]) -> None:
    """Karmada's mutating webhook on a create of a ``kind`` policy: a new permanent id in its
    label (``util.MergeLabel``, over any value the create sent)."""
    meta = obj.setdefault("metadata", {})
    labels = meta.get("labels")
    meta["labels"] = {
        **(labels if isinstance(labels, dict) else {}),
        PERMANENT_ID_LABELS[kind]: str(uuid.uuid4()),
    }


def permanent_id(policy: AnyPropagationPolicy) -> str:
    """The policy's permanent id: its label, else (stored before ids were given) its uid."""
    label = (policy.metadata.labels or {}).get(PERMANENT_ID_LABELS[policy.kind])
    return label if label is not None else policy.metadata.uid or ""


def claim_marks(policy: AnyPropagationPolicy | None) -> tuple[dict[str, str], dict[str, str]]:
    """The (labels, annotations) that say ``policy`` claims an object; none for None (released)."""
    if policy is None:
        return {}, {}
    if isinstance(policy, PropagationPolicy):
        annotations = {
            PP_NAMESPACE_ANNOTATION: policy.metadata.namespace or "",
            PP_NAME_ANNOTATION: policy.metadata.name or "",
        }
        return {PP_PERMANENT_ID_LABEL: permanent_id(policy)}, annotations
    return {CPP_PERMANENT_ID_LABEL: permanent_id(policy)}, {CPP_NAME_ANNOTATION: policy.metadata.name or ""}


def _marked(current: Any, keys: tuple[str, ...], wanted: Mapping[str, str]) -> dict[str, str] | None:
    """``current`` (a labels or annotations map) with the claim ``keys`` set to ``wanted``'s; None when
    it already is so."""
    current = current if isinstance(current, dict) else {}
    kept = {k: v for k, v in current.items() if k not in keys or k in wanted}
    new = {**kept, **wanted}
    return None if new == current else new


def with_claim_marks(
    metadata: Mapping[str, Any], policy: AnyPropagationPolicy | None
) -> dict[str, Any] | None:
    """``metadata`` marked as claimed by ``policy`` (the other claimant's marks removed; every mark
    removed for None), or None when it is marked so already. Empty maps are left out, as kube
    stores them."""
    labels, annotations = claim_marks(policy)
    new_labels = _marked(metadata.get("labels"), CLAIM_LABELS, labels)
    new_annotations = _marked(metadata.get("annotations"), CLAIM_ANNOTATIONS, annotations)
    if new_labels is None and new_annotations is None:
        return None
    out = dict(metadata)
    for key, value in (("labels", new_labels), ("annotations", new_annotations)):
        if value is None:
            continue
        if value:
            out[key] = value
        else:
            out.pop(key, None)
    return out


__all__ = [
    "CLAIM_ANNOTATIONS",
    "CLAIM_LABELS",
    "CPP_NAME_ANNOTATION",
    "CPP_PERMANENT_ID_LABEL",
    "PERMANENT_ID_LABELS",
    "PP_NAMESPACE_ANNOTATION",
    "PP_NAME_ANNOTATION",
    "PP_PERMANENT_ID_LABEL",
    "assign_permanent_id",
    "claim_marks",
    "permanent_id",
    "with_claim_marks",
]
