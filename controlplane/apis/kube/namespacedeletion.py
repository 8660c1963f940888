"""The status conditions of a namespace being deleted, as kube's namespace controller writes them
(``pkg/controller/namespace/deletion/status_condition_utils.go``).

While a namespace is ``Terminating`` its status carries five conditions. The hub discovers and
deletes its content in process, so the first three always read their "ok" form; the last two
say what is still left: ``NamespaceContentRemaining`` counts the objects of each resource
(``<plural>.<group> has N resource instances``, a core resource with the trailing dot kube
prints), ``NamespaceFinalizersRemaining`` the finalizers holding them. This is what a user reads
to learn why a namespace stays ``Terminating``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

CONTENT_REMAINING: Final = "NamespaceContentRemaining"
FINALIZERS_REMAINING: Final = "NamespaceFinalizersRemaining"

#: kube's order of the conditions it keeps, with each one's "ok" reason and message.
_OK: Final[tuple[tuple[str, str, str], ...]] = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    (CONTENT_REMAINING, "ContentRemoved", "All content successfully removed"),
    (FINALIZERS_REMAINING, "ContentRemoved", "All content successfully removed"),
)


def deletion_conditions(
    remaining: Mapping[str, int], finalizers: Mapping[str, int]
) -> list[dict[str, str]]:
    """The five conditions (without times) for ``remaining`` objects by ``plural.group`` and the
    ``finalizers`` holding them (each with the number of objects it is on)."""
    resources = sorted(f"{resource} has {count} resource instances" for resource, count in remaining.items() if count)
    held = sorted(f"{finalizer} in {count} resource instances" for finalizer, count in finalizers.items() if count)
    failing = {}
    if resources:
        failing[CONTENT_REMAINING] = ("SomeResourcesRemain", f"Some resources are remaining: {', '.join(resources)}")
    if held:
        failing[FINALIZERS_REMAINING] = (
            "SomeFinalizersRemain", f"Some content in the namespace has finalizers remaining: {', '.join(held)}"
        )
    out = []
    for kind, reason, message in _OK:
        status = "True" if kind in failing else "False"
        reason, message = failing.get(kind, (reason, message))
        out.append({"type": kind, "status": status, "reason": reason, "message": message})
    return out


def updated_conditions(
    current: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, str]], *, now: str
) -> list[dict[str, Any]] | None:
    """``current`` with each of ``wanted`` put in, as kube's ``updateConditions``: a condition
    keeps its place (a new one goes last) and its ``lastTransitionTime`` unless its status
    changes; None when nothing changes."""
    out = [dict(condition) for condition in current]
    changed = False
    for new in wanted:
        old = next((c for c in out if c.get("type") == new["type"]), None)
        if old is None:
            out.append({  # in the order of Go's NamespaceCondition
                "type": new["type"], "status": new["status"], "lastTransitionTime": now,
                "reason": new["reason"], "message": new["message"],
            })
            changed = True
        elif any(old.get(key) != new[key] for key in ("status", "reason", "message")):
            if old.get("status") != new["status"]:
                old["lastTransitionTime"] = now
            old.update(new)
            changed = True
    return out if changed else None
