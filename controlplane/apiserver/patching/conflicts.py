"""Server-side apply conflicts: the error an apply raises when it would change fields other
managers own, with the message and ``Status`` causes Kubernetes returns with its 409.

:func:`conflict_error` builds it from (owner, field) pairs; :meth:`ApplyConflict.without`
narrows it to the fields still in conflict once some are allowed (kube's client-side apply
upgrade, :mod:`controlplane.apiserver.patching.lastapplied`). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from controlplane.apiserver.patching.fieldpaths import Path, describe, sort_key

CONFLICT_CAUSE_TYPE = "FieldManagerConflict"


class Owner(Protocol):
    """A managedFields entry as a conflict names it."""

    @property
    def manager(self) -> str: ...

    def describe(self) -> str:
        """The manager as Kubernetes names it in conflict messages."""
        ...


class ApplyConflict(Exception):
    """The applied configuration changes fields other managers own.

    ``conflicts`` lists ``(field path, manager)`` pairs such as ``(".spec.replicas",
    "kubectl-client-side-apply")``; ``causes`` are the matching ``Status`` causes
    (``{"type": "FieldManagerConflict", "message": ..., "field": ...}``); the message is
    the one Kubernetes returns with its 409.
    """

    def __init__(
        self,
        conflicts: list[tuple[str, str]],
        *,
        message: str,
        causes: list[dict[str, str]],
        entries: tuple[tuple[Owner, Path], ...] = (),
    ) -> None:
        super().__init__(message)
        self.conflicts = conflicts
        self.causes = causes
        self._entries = entries

    def without(self, allowed: set[Path] | frozenset[Path]) -> ApplyConflict | None:
        """The conflict left once the fields in ``allowed`` no longer conflict (None: none left)."""
        left = [(owner, path) for owner, path in self._entries if path not in allowed]
        return conflict_error(left) if left else None


def conflict_error(conflicts: Sequence[tuple[Owner, Path]]) -> ApplyConflict:
    """The error for ``conflicts`` ((owner, field) pairs), ordered and worded as kube's."""
    ordered = sorted(conflicts, key=lambda c: (c[0].describe(), sort_key(c[1])))
    pairs = [(describe(path), owner.manager) for owner, path in ordered]
    causes = [
        {"type": CONFLICT_CAUSE_TYPE, "message": f"conflict with {owner.describe()}", "field": describe(path)}
        for owner, path in ordered
    ]
    if len(ordered) == 1:
        owner, path = ordered[0]
        message = f"Apply failed with 1 conflict: conflict with {owner.describe()}: {describe(path)}"
    else:
        lines: list[str] = []
        by_manager: dict[str, list[str]] = {}
        for owner, path in ordered:
            by_manager.setdefault(owner.describe(), []).append(describe(path))
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines.extend(f"- {text}" for text in by_manager[name])
        message = f"Apply failed with {len(ordered)} conflicts: " + "\n".join(lines)
    return ApplyConflict(pairs, message=message, causes=causes, entries=tuple(ordered))
