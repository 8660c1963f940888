"""``metadata.finalizers`` as kube-apiserver checks them on every write.

Three sets of rules, each kube's own:

* apimachinery's ``ValidateFinalizers`` (every kind, custom resources included): each name a
  qualified name (an optional DNS-subdomain prefix and ``/``, then a name of up to 63
  characters), its errors at ``metadata.finalizers`` without an index; ``orphan`` and
  ``foregroundDeletion`` never both;
* the built-in kinds' ``ValidateObjectMeta`` (``pkg/apis/core/validation``): a name without a
  ``/`` must be one of the standard ones (``kubernetes``, ``orphan``, ``foregroundDeletion``),
  else ``name is neither a standard finalizer name nor is it fully qualified`` at its index;
* ``ValidateNoNewFinalizers``: an object being deleted (it has a ``deletionTimestamp``) may lose
  finalizers, never gain one.

A custom resource (a CRD's kind, and the operators' kinds the hub serves as their CRDs would be)
may carry a name without a ``/``: kube's CRD strategy warns about each one a write adds
(:func:`finalizer_warnings`) instead of refusing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from controlplane.apis.kube.field import FieldError, forbidden, go_strings, invalid
from controlplane.apis.kube.names import qualified_name_errors
from controlplane.gojson import go_quote

FINALIZER_ORPHAN: Final = "orphan"
FINALIZER_FOREGROUND: Final = "foregroundDeletion"
#: The finalizer the namespace lifecycle itself takes off once the namespace is empty.
FINALIZER_KUBERNETES: Final = "kubernetes"
#: kube's standard finalizer names: the only ones that may go without a ``domain/`` prefix.
STANDARD_FINALIZERS: Final[frozenset[str]] = frozenset({FINALIZER_KUBERNETES, FINALIZER_ORPHAN, FINALIZER_FOREGROUND})
NOT_QUALIFIED: Final = "name is neither a standard finalizer name nor is it fully qualified"
PATH: Final = "metadata.finalizers"


def _unqualified(name: str) -> bool:
    return "/" not in name and name not in STANDARD_FINALIZERS


def finalizer_name_errors(name: str, path: str) -> list[FieldError]:
    """kube's ``validateFinalizerName`` (a namespace's ``spec.finalizers``): a qualified name, and
    one without a ``/`` only when it is a standard finalizer."""
    found = [invalid(path, name, message) for message in qualified_name_errors(name)]
    if _unqualified(name):
        found.append(invalid(path, name, NOT_QUALIFIED))
    return found


def metadata_finalizer_errors(finalizers: Sequence[str]) -> list[FieldError]:
    """``metadata.finalizers`` by apimachinery's ``ValidateFinalizers`` (every kind)."""
    found = [invalid(PATH, name, message) for name in finalizers for message in qualified_name_errors(name)]
    if FINALIZER_ORPHAN in finalizers and FINALIZER_FOREGROUND in finalizers:
        found.append(invalid(
            PATH, go_strings(list(finalizers)),
            f"finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND} cannot be both set",
        ))
    return found


def unqualified_finalizer_errors(finalizers: Sequence[str]) -> list[FieldError]:
    """What kube's core ``ValidateObjectMeta`` adds for its built-in kinds: each name without a
    ``/`` that is not a standard one, at its index."""
    return [invalid(f"{PATH}[{index}]", name, NOT_QUALIFIED) for index, name in enumerate(finalizers) if _unqualified(name)]


def new_finalizer_errors(finalizers: Sequence[str], old_finalizers: Sequence[str]) -> list[FieldError]:
    """kube's ``ValidateNoNewFinalizers``, for an update of an object being deleted: the names
    ``finalizers`` adds to ``old_finalizers``, sorted, as Go's ``%#v`` prints them."""
    added = sorted(set(finalizers) - set(old_finalizers))
    if not added:
        return []
    return [forbidden(
        PATH, f"no new finalizers can be added if the object is being deleted, found new finalizers {go_strings(added).text}"
    )]


def finalizer_warnings(finalizers: Sequence[str], old_finalizers: Sequence[str] = ()) -> list[str]:
    """kube's CRD strategy's warnings (``WarningsOnCreate``/``WarningsOnUpdate``): one for each
    name a write adds, in order, that has no ``/`` and is not a standard finalizer; a name with a
    dot is told it lacks a path. A write kube refuses gets no warning, so the qualified-name
    errors (refused by :func:`metadata_finalizer_errors`) never show here."""
    warnings = []
    for name in sorted(set(finalizers) - set(old_finalizers)):
        if not _unqualified(name) or qualified_name_errors(name):
            continue
        advice = "a domain-qualified finalizer name including a path (/)" if "." in name else "a domain-qualified finalizer name"
        warnings.append(f"{PATH}: {go_quote(name)}: prefer {advice} to avoid accidental conflicts with other finalizer writers")
    return warnings
