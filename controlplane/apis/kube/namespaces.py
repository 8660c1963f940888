"""The namespaces every kube cluster has, and which of them kube refuses to delete.

kube-apiserver creates :data:`SYSTEM_NAMESPACES` at start and again whenever one is gone
(``default`` from its bootstrap controller, the others from its ``systemnamespaces``
controller); its NamespaceLifecycle admission plugin refuses to delete
:data:`IMMORTAL_NAMESPACES` with ``this namespace may not be deleted``. The hub and the
simulated members both follow it. A namespace's ``spec.finalizers`` are kube's: a create keeps
the request's and adds ``kubernetes`` (:func:`prepare_create`), an update keeps the stored ones
(:func:`keep_spec_finalizers`), and only the ``finalize`` subresource changes them, its names
checked as kube checks them (:func:`validate_finalize`). A namespace being deleted
(:func:`is_terminating`) gets no new content from kube's controllers.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.finalizers import FINALIZER_KUBERNETES, finalizer_name_errors

SYSTEM_NAMESPACES: Final[tuple[str, ...]] = ("default", "kube-system", "kube-public", "kube-node-lease")
#: ``kube-node-lease`` is not among them: deleting it is allowed, and it is created again.
IMMORTAL_NAMESPACES: Final[frozenset[str]] = frozenset({"default", "kube-system", "kube-public"})


def is_terminating(namespace: dict[str, Any]) -> bool:
    """Whether ``namespace`` is being deleted (a ``deletionTimestamp``, or phase ``Terminating``)."""
    metadata = namespace.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) or (namespace.get("status") or {}).get("phase") == "Terminating"


def well_typed_spec(obj: dict[str, Any]) -> bool:
    """Whether ``obj``'s spec decodes as kube's ``NamespaceSpec`` (absent, or an object whose
    ``finalizers`` are absent or a list of strings). One that does not is left as it is by the
    two functions below, for the type check to refuse in kube's words (its 400 ``cannot unmarshal``)
    rather than replaced or read."""
    spec = obj.get("spec")
    if spec is None:
        return True
    if not isinstance(spec, dict):
        return False
    finalizers = spec.get("finalizers")
    return finalizers is None or (isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers))


def prepare_create(obj: dict[str, Any]) -> None:
    """kube's ``PrepareForCreate``: a created namespace is ``Active`` and keeps the finalizers it
    was given, with ``kubernetes`` added at the end when it is not among them."""
    if well_typed_spec(obj):
        spec = obj["spec"] = dict(obj.get("spec") or {})
        finalizers = list(spec.get("finalizers") or [])
        if FINALIZER_KUBERNETES not in finalizers:
            finalizers.append(FINALIZER_KUBERNETES)
        spec["finalizers"] = finalizers
    obj["status"] = {"phase": "Active"}


def _spec_finalizers(obj: dict[str, Any]) -> list[str]:
    return list((obj.get("spec") or {}).get("finalizers") or []) if well_typed_spec(obj) else []


def validate_namespace(new: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """kube's ``ValidateNamespace`` (metadata aside): every name in ``spec.finalizers``, each
    error at ``spec.finalizers`` as kube words it (no index)."""
    return [e for name in _spec_finalizers(new) for e in finalizer_name_errors(name, "spec.finalizers")]


def validate_finalize(new: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """kube's ``ValidateNamespaceFinalizeUpdate`` (metadata aside): every name in
    ``spec.finalizers``, each error at its index."""
    return [
        e for index, name in enumerate(_spec_finalizers(new))
        for e in finalizer_name_errors(name, f"spec.finalizers[{index}]")
    ]


def without_lifecycle_finalizer(obj: dict[str, Any]) -> list[str] | None:
    """The ``spec.finalizers`` a namespace keeps once the lifecycle has emptied it (kube's
    namespace controller takes ``kubernetes`` off through ``finalize``); None when it holds
    no other, and may go."""
    kept = [f for f in _spec_finalizers(obj) if f != FINALIZER_KUBERNETES]
    return kept or None


def keep_spec_finalizers(new: dict[str, Any], old: dict[str, Any]) -> None:
    """kube's namespace ``PrepareForUpdate``: an update keeps the stored ``spec.finalizers`` (only
    ``finalize`` and the namespace's lifecycle change them), so a write to a terminating namespace
    never finishes its deletion early."""
    if not well_typed_spec(new):
        return
    finalizers = (old.get("spec") or {}).get("finalizers")
    spec = dict(new.get("spec") or {})
    if finalizers is None:
        spec.pop("finalizers", None)
    else:
        spec["finalizers"] = list(finalizers)
    new["spec"] = spec
