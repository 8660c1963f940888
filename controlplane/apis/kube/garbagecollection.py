"""What a delete asks of the garbage collector, decided as kube-apiserver's generic store does.

A delete of an object with dependents (objects whose ``metadata.ownerReferences`` name it)
either lets the garbage collector delete them afterwards (``Background``), deletes the
dependents that block the owner first (``Foreground``: the finalizer ``foregroundDeletion``),
or takes the owner out of its dependents' ownerReferences first (``Orphan``, or the legacy
``orphanDependents: true``: the finalizer ``orphan``). The store's
``deletionFinalizersForGarbageCollection`` picks those finalizers from, in order: the delete's
options, the finalizers already on the object (a second delete keeps the first one's choice
unless it says otherwise), and the kind's default policy (its REST strategy's
``DefaultGarbageCollectionPolicy``): Background for nearly every kind, Orphan for batch/v1 Jobs
and v1 ReplicationControllers (kept so for compatibility), and none for Events, whose strategy
does not support it.

In: an object's finalizers, the delete's options, the served kind. Out: the finalizers to
store. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Final

#: kube's ``metav1.FinalizerOrphanDependents``.
FINALIZER_ORPHAN: Final = "orphan"
#: kube's ``metav1.FinalizerDeleteDependents``.
FINALIZER_FOREGROUND: Final = "foregroundDeletion"
GC_FINALIZERS: Final = frozenset({FINALIZER_ORPHAN, FINALIZER_FOREGROUND})


class DeletionPropagation(StrEnum):
    """metav1.DeletionPropagation: how a delete treats the object's dependents (``propagationPolicy``)."""

    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


class GarbageCollectionPolicy(StrEnum):
    """rest.GarbageCollectionPolicy: what a delete without options does to the dependents."""

    DELETE_DEPENDENTS = "DeleteDependents"
    ORPHAN_DEPENDENTS = "OrphanDependents"
    UNSUPPORTED = "Unsupported"


#: (group, version, kind) served versions whose strategy orphans by default (kube's "for back
#: compatibility" cases; the apps/v1beta*, extensions/v1beta1 and batch/v1beta1 ones are not served).
_ORPHAN_BY_DEFAULT: Final = frozenset({("batch", "v1", "Job"), ("", "v1", "ReplicationController")})
#: (group, kind) whose strategy says Unsupported: a delete never adds either finalizer.
_UNSUPPORTED: Final = frozenset({("", "Event"), ("events.k8s.io", "Event")})


def default_policy(group: str, version: str, kind: str) -> GarbageCollectionPolicy:
    """The kind's default policy as served in ``group``/``version`` (custom resources: DeleteDependents)."""
    if (group, kind) in _UNSUPPORTED:
        return GarbageCollectionPolicy.UNSUPPORTED
    if (group, version, kind) in _ORPHAN_BY_DEFAULT:
        return GarbageCollectionPolicy.ORPHAN_DEPENDENTS
    return GarbageCollectionPolicy.DELETE_DEPENDENTS


def _chosen_by_options(orphan_dependents: bool | None, propagation: str | None) -> str | None:
    """The finalizer the options ask for ("" for none), or None when they leave it open."""
    if orphan_dependents is not None:
        return FINALIZER_ORPHAN if orphan_dependents else ""
    if propagation == DeletionPropagation.ORPHAN:
        return FINALIZER_ORPHAN
    if propagation == DeletionPropagation.FOREGROUND:
        return FINALIZER_FOREGROUND
    if propagation == DeletionPropagation.BACKGROUND:
        return ""
    return None


def deletion_finalizers(
    finalizers: Sequence[str],
    *,
    policy: GarbageCollectionPolicy,
    orphan_dependents: bool | None = None,
    propagation: str | None = None,
) -> list[str] | None:
    """The object's finalizers after a delete with these options (kube's
    ``deletionFinalizersForGarbageCollection``): the other finalizers in their order, then the
    one garbage-collection finalizer chosen; None when that leaves the set as it was."""
    chosen = "" if policy is GarbageCollectionPolicy.UNSUPPORTED else _chosen_by_options(orphan_dependents, propagation)
    if chosen is None:
        present = [f for f in finalizers if f in GC_FINALIZERS]
        if present:
            chosen = present[0]
        else:
            chosen = FINALIZER_ORPHAN if policy is GarbageCollectionPolicy.ORPHAN_DEPENDENTS else ""
    new = [f for f in finalizers if f not in GC_FINALIZERS]
    if chosen:
        new.append(chosen)
    return None if set(new) == set(finalizers) else new
