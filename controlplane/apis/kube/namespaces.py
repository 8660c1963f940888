"""The namespaces every kube cluster has, and which of them kube refuses to delete.

kube-apiserver creates :data:`SYSTEM_NAMESPACES` at start and again whenever one is gone
(``default`` from its bootstrap controller, the others from its ``systemnamespaces``
controller); its NamespaceLifecycle admission plugin refuses to delete
:data:`IMMORTAL_NAMESPACES` with ``this namespace may not be deleted``. The hub and the
simulated members both follow it, and keep a namespace's ``spec.finalizers`` through updates
(:func:`keep_spec_finalizers`).
"""

from __future__ import annotations

from typing import Any, Final

SYSTEM_NAMESPACES: Final[tuple[str, ...]] = ("default", "kube-system", "kube-public", "kube-node-lease")
#: ``kube-node-lease`` is not among them: deleting it is allowed, and it is created again.
IMMORTAL_NAMESPACES: Final[frozenset[str]] = frozenset({"default", "kube-system", "kube-public"})


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
    """A created namespace is ``Active`` and carries the ``kubernetes`` finalizer (kube's
    ``PrepareForCreate``) and no other: the hub serves no ``finalize`` subresource that could
    take another off."""
    if well_typed_spec(obj):
        obj["spec"] = {"finalizers": ["kubernetes"]}
    obj["status"] = {"phase": "Active"}


def keep_spec_finalizers(new: dict[str, Any], old: dict[str, Any]) -> None:
    """kube's namespace ``PrepareForUpdate``: an update keeps the stored ``spec.finalizers``
    (``kubernetes``, taken off only by the namespace's finalization), so a write to a terminating
    namespace never finishes its deletion early."""
    if not well_typed_spec(new):
        return
    finalizers = (old.get("spec") or {}).get("finalizers")
    spec = dict(new.get("spec") or {})
    if finalizers is None:
        spec.pop("finalizers", None)
    else:
        spec["finalizers"] = list(finalizers)
    new["spec"] = spec
