"""Which fields a value sets, and which fields changed between two values, per schema.

In: JSON values with their :class:`~controlplane.apiserver.patching.schema.FieldSchema`
(associative lists keyed as kube's OpenAPI says, atomic values as wholes). Out: sets of
field paths (:mod:`controlplane.apiserver.patching.fieldpaths`). Server-side apply and
the recording of ordinary writes (:mod:`controlplane.apiserver.patching.apply`) and the
admission checks of owned fields (:mod:`controlplane.apiserver.patching.ownership`) use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.apiserver.patching.fieldpaths import Path, PathElement, field_element, item_element
from controlplane.apiserver.patching.schema import FieldSchema, ListType


class _Absent:
    """The marker of a node a value does not have (``None`` is a JSON null it has)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


def under(zero: Mapping[str, Any], value: Mapping[str, Any]) -> Mapping[str, Any]:
    """``value`` with what ``zero`` has and it lacks (a kind's zero value under an object, as kube
    reads an object into its Go type): ``zero``'s objects merged key by key, its other nodes
    only where ``value`` has none. ``value`` itself when ``zero`` adds nothing; never changed."""
    out: dict[str, Any] | None = None
    for key, below in zero.items():
        if key not in value:
            merged = below
        elif isinstance(below, Mapping) and isinstance(value[key], Mapping):
            merged = under(below, value[key])
            if merged is value[key]:
                continue
        else:
            continue
        if out is None:
            out = dict(value)
        out[key] = merged
    return value if out is None else out


def field_set(value: Any, schema: FieldSchema, path: Path, out: set[Path]) -> None:
    """The fields a configuration sets: leaves, atomic values, list items, empty or null objects."""
    if isinstance(value, Mapping) and not schema.atomic:
        for key, child in value.items():
            child_path = (*path, field_element(key))
            field_set(child, schema.child(key), child_path, out)
            # A map's members are owned themselves; a declared field only when it is a leaf.
            if child is None or (isinstance(child, Mapping) and not child) or (
                schema.is_map_typed and key not in schema.fields
            ):
                out.add(child_path)
        return
    if isinstance(value, list) and schema.list_type is not ListType.ATOMIC:
        for item in value:
            element = item_element(item, schema)
            if element is None:
                continue
            item_path = (*path, element)
            if isinstance(item, Mapping) and not schema.element().atomic:
                field_set(item, schema.element(), item_path, out)
            out.add(item_path)
        return
    if path:
        out.add(path)


@dataclass
class Comparison:
    """The fields a write added, changed and removed, as paths.

    ``owns_added_objects``: an object the write adds where the old value had none is added
    itself, not only its fields, as kube's comparison adds every node absent before (an ordinary
    write's record compares values with the kind's zero value under them: :mod:`.zerovalues`).
    Without it (an apply's comparison, which decides conflicts and what others lose) plain
    objects with fields are left out.
    """

    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)
    owns_added_objects: bool = False


def _nodes(value: Any, schema: FieldSchema, path: Path, out: set[Path], *, objects: bool = False) -> None:
    """Every trackable node of a value that appeared or disappeared as a whole.

    Plain objects with children (``spec``, ``strategy``) are included only with
    ``objects``: a write that adds them does not claim them (their fields carry the
    ownership), but when they disappear nobody may keep owning them.
    """
    if isinstance(value, Mapping) and not schema.atomic:
        if path and (objects or not value or schema.is_map_typed):
            out.add(path)
        for key, child in value.items():
            _nodes(child, schema.child(key), (*path, field_element(key)), out, objects=objects)
        return
    if isinstance(value, list) and schema.list_type is not ListType.ATOMIC:
        out.add(path)
        for item in value:
            element = item_element(item, schema)
            if element is not None:
                _nodes_of_item(item, schema, (*path, element), out, objects=objects)
        return
    if path:
        out.add(path)


def _is_container(value: Any, schema: FieldSchema) -> bool:
    if isinstance(value, Mapping):
        return not schema.atomic
    return isinstance(value, list) and schema.list_type is not ListType.ATOMIC


def compare(old: Any, new: Any, schema: FieldSchema, path: Path, out: Comparison) -> None:
    """Record into ``out`` what changed from ``old`` to ``new`` below ``path``."""
    if old is new:
        return  # one subtree shared by both objects (a status write's spec): nothing changed
    if isinstance(old, Mapping) and isinstance(new, Mapping) and not schema.atomic and (old or new):
        for key in [*old, *(k for k in new if k not in old)]:
            child_path = (*path, field_element(key))
            child_schema = schema.child(key)
            if key not in new:
                _nodes(old[key], child_schema, child_path, out.removed, objects=True)
            elif key not in old:
                _nodes(new[key], child_schema, child_path, out.added, objects=out.owns_added_objects)
            else:
                compare(old[key], new[key], child_schema, child_path, out)
        return
    if isinstance(old, list) and isinstance(new, list) and schema.list_type is not ListType.ATOMIC:
        old_items = _index_items(old, schema)
        new_items = _index_items(new, schema)
        item_schema = schema.element()
        for element, item in old_items.items():
            item_path = (*path, element)
            if element not in new_items:
                _nodes_of_item(item, schema, item_path, out.removed, objects=True)
            elif schema.list_type is ListType.MAP:
                compare(item, new_items[element], item_schema, item_path, out)
        for element, item in new_items.items():
            if element not in old_items:
                _nodes_of_item(item, schema, (*path, element), out.added, objects=out.owns_added_objects)
        return
    if same(old, new):
        return
    if old is None and _is_container(new, schema):
        # A null object or list (a Go zero value's) that now has content: its content is added,
        # the node itself was there.
        compare({} if isinstance(new, Mapping) else [], new, schema, path, out)
        return
    if path:
        out.modified.add(path)
    if _is_container(old, schema):
        _nodes(old, schema, path, out.removed, objects=True)
        out.removed.discard(path)
    if _is_container(new, schema):
        _nodes(new, schema, path, out.added, objects=out.owns_added_objects)
        out.added.discard(path)


def _nodes_of_item(
    item: Any, list_schema: FieldSchema, item_path: Path, out: set[Path], *, objects: bool = False
) -> None:
    out.add(item_path)
    item_schema = list_schema.element()
    if isinstance(item, Mapping) and not item_schema.atomic:
        for key, child in item.items():
            _nodes(child, item_schema.child(key), (*item_path, field_element(key)), out, objects=objects)


def _index_items(items: list[Any], schema: FieldSchema) -> dict[PathElement, Any]:
    out: dict[PathElement, Any] = {}
    for item in items:
        element = item_element(item, schema)
        if element is not None:
            out.setdefault(element, item)
    return out


def same(left: Any, right: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if left is right:
        return True
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, Mapping):
        return (
            isinstance(right, Mapping)
            and left.keys() == right.keys()
            and all(same(left[k], right[k]) for k in left)
        )
    if isinstance(left, list):
        return (
            isinstance(right, list)
            and len(left) == len(right)
            and all(same(a, b) for a, b in zip(left, right, strict=True))
        )
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    return type(left) is type(right) and bool(left == right)
