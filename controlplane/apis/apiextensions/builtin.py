"""The CustomResourceDefinitions the hub publishes for the kinds it serves built in.

A real cluster serves Karmada's and Kueue's kinds (and JobSet, LeaderWorkerSet, the MCS API's,
Kubeflow's and KubeRay's) from CustomResourceDefinitions, which install scripts and clients read
(``kubectl wait --for=condition=Established crd/...``, lightkube's generic loader). The hub
serves them built in, and publishes for each a CRD that describes the kind and defines
nothing: it carries :data:`LABEL`, the CRD controller does not serve it, and it cannot be deleted,
nor changed to define another kind. The spec the hub made (:data:`GENERATED`) is never propagated
(it would overwrite a member's own CRD of the kind); the CRD of the kind a user applies over it
(an upstream install manifest's) is kept as written and propagates as any CRD. Karmada's ``cluster.karmada.io``
has none: Karmada serves it from its aggregated API server, not from a CRD.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controlplane.apis.kube.unconditional import CUSTOM_RESOURCE_GROUPS

#: The label on every CRD the hub publishes for a kind it serves built in (value ``"true"``).
LABEL: Final = "apiextensions.gpufed.io/served-built-in"

#: The annotation (value ``"true"``) of a published CRD whose spec the hub made; a CRD of the kind
#: applied over it (an upstream install manifest's) keeps the label and loses this annotation: its
#: spec is the user's from then on, and it propagates as written.
GENERATED: Final = "apiextensions.gpufed.io/generated"

#: The groups whose built-in kinds get such a CRD: those that are CRDs on a real cluster.
GROUPS: Final[frozenset[str]] = CUSTOM_RESOURCE_GROUPS - {"cluster.karmada.io"}

_CRD_API_VERSION_PREFIX: Final = "apiextensions.k8s.io/"
_CRD_KIND: Final = "CustomResourceDefinition"

#: The open schema of a version the hub has no CRD schema for.
OPEN_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def is_view(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` is a CRD the hub publishes for a kind it serves built in."""
    if (
        not obj
        or obj.get("kind") != _CRD_KIND
        or not str(obj.get("apiVersion", "")).startswith(_CRD_API_VERSION_PREFIX)
    ):
        return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(LABEL) == "true"


def is_generated(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` is a published CRD whose spec the hub made (not one a user applied over it)."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return is_view(obj) and isinstance(annotations, Mapping) and annotations.get(GENERATED) == "true"


def keep_marks(new: dict[str, Any], old: Mapping[str, Any]) -> None:
    """Give ``new``, a write of the published CRD ``old`` that defines the same kind, the marks it
    keeps: :data:`LABEL` always; :data:`GENERATED` only while its spec is still the hub's."""
    meta = new.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), LABEL: "true"}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != GENERATED}
    if is_generated(old) and new.get("spec") == old.get("spec"):
        annotations[GENERATED] = "true"
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)


def carries_label(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` (a CRD) names :data:`LABEL`, whatever its value."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and LABEL in labels


def refusal(name: str) -> str:
    """Why a delete or a change of the view ``name`` is refused (after kube's ``... is forbidden: ``)."""
    return (
        f'customresourcedefinitions.apiextensions.k8s.io "{name}" is forbidden: its kind is served built in '
        "by gpufed, which publishes this CustomResourceDefinition; it cannot be changed or deleted"
    )


def defines_same_kind(new: Mapping[str, Any], view: Mapping[str, Any]) -> bool:
    """Whether ``new`` (a write of the view ``view``) defines the kind the view describes: the
    same group, scope, plural and kind (an upstream install manifest's CRD does), whatever its
    versions and schemas."""
    spec, served = new.get("spec") or {}, view.get("spec") or {}
    names, served_names = spec.get("names") or {}, served.get("names") or {}
    return (
        spec.get("group") == served.get("group")
        and spec.get("scope") == served.get("scope")
        and names.get("plural") == served_names.get("plural")
        and names.get("kind") == served_names.get("kind")
    )


def view_status(spec: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """A view's status: its names accepted, established, its storage version stored."""
    storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    return {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "acceptedNames": dict(spec.get("names") or {}),
        "storedVersions": storage,
    }
