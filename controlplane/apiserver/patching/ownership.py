"""Field ownership as an admission check reads it: who owns what, and what a write changes.

Server-side apply records, per field manager, the fields it owns
(``metadata.managedFields``, see :mod:`controlplane.apiserver.patching.apply`). A check
that lets a client change only the fields it owns (the hub's ClusterRestriction) needs
two answers from that bookkeeping, with the same field paths and list semantics:

- :func:`owners`: the main-resource fields each manager owns (``.status`` entries, which
  only the status subresource writes, are left out);
- :func:`changed_fields`: the fields a write changes between the stored object and the
  one it would store — added, modified or removed leaves, never system metadata,
  ``managedFields`` or ``.status``.

Pure; inputs are not modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.apiserver.patching.apply import (
    _decode_managed,
    _managed_fields_of,
    _trackable,
    _without_managed_fields,
)
from controlplane.apiserver.patching.comparing import Comparison, compare
from controlplane.apiserver.patching.fieldpaths import Path, describe
from controlplane.apiserver.patching.schema import FieldSchema

__all__ = ["Path", "changed_fields", "describe", "owners"]


def owners(obj: Mapping[str, Any]) -> dict[str, frozenset[Path]]:
    """manager -> the main-resource fields it owns in ``obj`` (all its entries together)."""
    out: dict[str, set[Path]] = {}
    for entry in _decode_managed(_managed_fields_of(obj)).values():
        if entry.subresource:
            continue
        out.setdefault(entry.manager, set()).update(entry.fields)
    return {manager: frozenset(fields) for manager, fields in out.items()}


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any], *, schema: FieldSchema) -> frozenset[Path]:
    """The leaf fields of the main resource that differ between ``old`` and ``new``.

    A field that appeared or disappeared with all its children counts as its leaves
    only (removing a whole map of labels changes each label), so a check can compare
    the answer with the leaves a manager owns.
    """
    comparison = Comparison()
    compare(_without_managed_fields(old), _without_managed_fields(new), schema, (), comparison)
    changed = _trackable(comparison.added | comparison.modified | comparison.removed, "")
    return frozenset(path for path in changed if not any(_is_ancestor(path, other) for other in changed))


def _is_ancestor(path: Path, other: Path) -> bool:
    return len(other) > len(path) and other[: len(path)] == path
