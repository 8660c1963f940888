"""Strategic merge patch (``application/strategic-merge-patch+json``) for built-in kinds.

``kubectl apply`` (client-side), ``kubectl edit`` and ``kubectl patch`` send this patch
format for Kubernetes' own kinds. It is JSON merge patch plus knowledge of the types:
lists with a merge key (containers by ``name``, ports by ``containerPort``…) are merged
item by item instead of replaced, lists of scalars with the merge strategy (finalizers)
are merged as sets, and the patch may carry directives:

- ``$patch: replace`` (take this object or list as sent), ``$patch: delete`` (remove this
  object, or the list item with this merge key), ``$patch: merge`` (the default);
- ``$setElementOrder/<list>``: the order the list must end up in (kubectl's 3-way patch
  sends it with only the changed items in ``<list>``);
- ``$retainKeys``: drop every field of this object not listed (union types, volumes);
- ``$deleteFromPrimitiveList/<list>``: values to remove from a merged list of scalars.

``null`` deletes a key. The semantics follow Kubernetes' server-side implementation
(k8s.io/apimachinery strategicpatch with MergeParallelList and IgnoreUnmatchedNulls; the
tests compare with real ``kubectl patch --local``). A value sent for a field the object
lacks is cleaned of directives and nulls here, where Kubernetes gets the same result by
decoding into its Go types. Two deliberate differences: ``$patch: delete`` on an object
removes the key (Kubernetes leaves ``{}``, which its defaulting then refills), and
``$patch: merge`` is accepted as the explicit default (Kubernetes refuses it).

Each merged list is indexed once per merge (an item's identity, the canonical JSON of its merge
key or value, computed once), so a patch costs time in proportion to the lists' length.

In: the stored object, the patch, the kind name. Out: a new patched object (the inputs are
not modified), or :class:`PatchError` with a message a person can act on.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.apiserver.patching.fieldpaths import canonical_json
from controlplane.apiserver.patching.schema import FieldSchema, strategic_schema

DIRECTIVE_MARKER = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER_PREFIX = "$setElementOrder/"
DELETE_FROM_PRIMITIVE_LIST_PREFIX = "$deleteFromPrimitiveList/"


class Directive(StrEnum):
    """Values of ``$patch``."""

    REPLACE = "replace"
    MERGE = "merge"
    DELETE = "delete"


class PatchError(ValueError):
    """A strategic merge patch that cannot be applied; the message says what to change."""


class BadRetainKeys(PatchError):
    """A ``$retainKeys`` kube refuses as ``ErrBadPatchFormatForRetainKeys`` (a 400 whose message is
    ``invalid patch format of retainKeys``); the message here says which field is at fault."""


_Ident = Callable[[Any], str]


def strategic_merge_patch(original: dict[str, Any], patch: dict[str, Any], *, kind: str) -> dict[str, Any]:
    """Apply a strategic merge ``patch`` to ``original`` (an object of ``kind``)."""
    schema = strategic_schema(kind)
    if schema is None:
        raise PatchError(f"strategic merge patch is not supported for kind {kind}; use merge patch")
    if not isinstance(patch, Mapping):
        raise PatchError("a strategic merge patch must be a JSON object")
    if not isinstance(original, Mapping):
        raise PatchError("the object to patch must be a JSON object")
    result = _merge_map(copy.deepcopy(dict(original)), patch, schema, "")
    if result is None:
        raise PatchError(
            "`$patch: delete` at the top level would delete the whole object; send a DELETE request instead"
        )
    return result


def _where(path: str) -> str:
    return path or "the patch"


def _child_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _merge_map(
    original: dict[str, Any], patch: Mapping[str, Any], schema: FieldSchema, path: str
) -> dict[str, Any] | None:
    """Merge ``patch`` into ``original`` (owned by the caller, modified in place); ``None`` = delete."""
    work = dict(patch)
    if DIRECTIVE_MARKER in work:
        directive = work.pop(DIRECTIVE_MARKER)
        if directive == Directive.REPLACE:
            return _merge_map({}, work, schema, path)
        if directive == Directive.DELETE:
            return None
        if directive != Directive.MERGE:
            raise PatchError(f"{_where(path)}: unknown `$patch: {directive}`; use replace, merge or delete")

    if RETAIN_KEYS in work:
        _apply_retain_keys(original, work, work.pop(RETAIN_KEYS), path)

    for key in [k for k in work if k.startswith(SET_ELEMENT_ORDER_PREFIX)]:
        _apply_element_order(original, work, key, schema, path)

    deletions: list[tuple[str, Any]] = []
    for key, value in work.items():
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST_PREFIX):
            deletions.append((key[len(DELETE_FROM_PRIMITIVE_LIST_PREFIX) :], value))
            continue
        if key.startswith("$"):
            # Directives this server does not know are ignored, as Kubernetes servers
            # do, so that a newer client's patch still works.
            continue
        child = schema.child(key)
        child_path = _child_path(path, key)
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merged = _merge_map(current, value, child, child_path)
        elif isinstance(value, list) and isinstance(current, list):
            if child.patch_merges:
                merged_list: Any = _merge_list(current, value, child, child_path)
            else:
                merged_list = _replace_list(value, child, child_path)
            original[key] = merged_list
            continue
        else:
            merged = _materialize(value, child, child_path)
        if merged is None:
            original.pop(key, None)
        else:
            original[key] = merged

    for name, values in deletions:
        _delete_from_primitive_list(original, name, values, _child_path(path, name))
    return original


def _apply_retain_keys(original: dict[str, Any], work: Mapping[str, Any], retain: Any, path: str) -> None:
    if not isinstance(retain, list):
        raise BadRetainKeys(f"{_where(path)}: `$retainKeys` must be a list of field names")
    keep = {k for k in retain if isinstance(k, str)}
    for key, value in work.items():
        # kube passes over nulls and the two parallel-list directives, and nothing else.
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST_PREFIX, SET_ELEMENT_ORDER_PREFIX)):
            continue
        if key not in keep:
            raise BadRetainKeys(
                f"{_where(path)}: field {key!r} is in the patch but not in `$retainKeys` {sorted(keep)}; "
                "list every field the object keeps"
            )
    for key in [k for k in original if k not in keep]:
        del original[key]


def _apply_element_order(
    original: dict[str, Any], work: dict[str, Any], key: str, schema: FieldSchema, path: str
) -> None:
    """Merge the list named by a ``$setElementOrder/<list>`` directive and put it in that order."""
    order = work.pop(key)
    name = key[len(SET_ELEMENT_ORDER_PREFIX) :]
    if not name:
        raise PatchError(f"{_where(path)}: `{key}` must name a list, like `$setElementOrder/containers`")
    list_path = _child_path(path, name)
    if not isinstance(order, list):
        raise PatchError(f"{list_path}: `{key}` must be a list")
    child = schema.child(name)
    if not child.patch_merges:
        # A list that is replaced whole takes the order it is sent in.
        return
    if name in work and work[name] is None:
        return
    current = original.get(name)
    server_list: list[Any] = current if isinstance(current, list) else []
    ident = _identity(child)
    server_ids = [ident(x) for x in server_list]
    order_ids = [_order_identity(item, child, list_path) for item in order]
    if name in work:
        patch_list = work.pop(name)
        if not isinstance(patch_list, list):
            raise PatchError(f"{list_path} must be a list")
        _check_order_matches(patch_list, order_ids, child, list_path)
        merged = _merged_list(list(server_list), server_ids, patch_list, child, list_path)
    elif isinstance(current, list):
        merged = _Identified(current, server_ids)
    else:
        return
    original[name] = _order_items(merged, order_ids, server_ids).items


def _order_identity(item: Any, schema: FieldSchema, path: str) -> str:
    if schema.merge_key is not None and isinstance(item, Mapping):
        if schema.merge_key not in item:
            raise PatchError(
                f"{path}: every item of `$setElementOrder` needs the merge key {schema.merge_key!r}"
            )
        return canonical_json(item[schema.merge_key])
    return canonical_json(item)


def _check_order_matches(
    patch_list: Sequence[Any], order_ids: Sequence[str], schema: FieldSchema, path: str
) -> None:
    """The items sent must appear in ``$setElementOrder`` in the same relative order."""
    ident = _identity(schema)
    key = schema.merge_key
    items = [
        item
        for item in patch_list
        if not isinstance(item, Mapping) or (DIRECTIVE_MARKER not in item and (key is None or key in item))
    ]
    position = 0
    for item in items:
        wanted = ident(item)
        while position < len(order_ids) and order_ids[position] != wanted:
            position += 1
        if position == len(order_ids):
            raise PatchError(
                f"{path}: the items in the patch are not in the order `$setElementOrder` gives "
                "(or are missing from it); list every item of the list in `$setElementOrder`"
            )
        position += 1


def _identity(schema: FieldSchema) -> _Ident:
    """How two items of a merged list are recognised as the same item: by this text, computed
    once per item and merge (a long list is indexed by it, never scanned per patch item)."""
    key = schema.merge_key
    if key is None:
        return canonical_json

    def by_key(item: Any) -> str:
        if isinstance(item, Mapping):
            return canonical_json(item.get(key))
        return canonical_json(item)

    return by_key


@dataclass(frozen=True)
class _Identified:
    """A list's items with the identity of each (``_identity``), position by position."""

    items: list[Any]
    ids: list[str]


def _merge_list(original: list[Any], patch: Sequence[Any], schema: FieldSchema, path: str) -> list[Any]:
    """Merge a list with the merge strategy: by merge key for objects, as a set for scalars."""
    if not patch:
        # Kubernetes leaves a merged list untouched by an empty list in the patch;
        # `null` or `$patch: replace` clears it.
        return original
    ident = _identity(schema)
    return _merged_list(original, [ident(x) for x in original], patch, schema, path).items


def _merged_list(
    original: list[Any], original_ids: list[str], patch: Sequence[Any], schema: FieldSchema, path: str
) -> _Identified:
    """:func:`_merge_list`, given and giving the identity of each item."""
    if not patch:
        return _Identified(original, original_ids)
    objects = [isinstance(x, Mapping) for x in [*original, *patch]]
    if any(isinstance(x, list) for x in [*original, *patch]):
        raise PatchError(f"{path}: lists of lists cannot be merged")
    if any(objects) and not all(objects):
        raise PatchError(f"{path}: the list mixes objects and plain values, so it cannot be merged")
    if not all(objects):
        return _merged_values(original, original_ids, patch, _identity(schema))
    return _merged_by_key(original, original_ids, patch, schema, path)


def _merged_values(
    original: list[Any], original_ids: list[str], patch: Sequence[Any], ident: _Ident
) -> _Identified:
    """A list of plain values merged as a set: each value once, the patch's in its order."""
    patch_ids = [ident(x) for x in patch]
    merged = _Identified([], [])
    seen: set[str] = set()
    for value, value_id in zip([*original, *patch], [*original_ids, *patch_ids], strict=True):
        if value_id not in seen:
            seen.add(value_id)
            merged.items.append(copy.deepcopy(value))
            merged.ids.append(value_id)
    return _order_items(merged, patch_ids, original_ids)


def _merged_by_key(
    original: list[Any], original_ids: list[str], patch: Sequence[Any], schema: FieldSchema, path: str
) -> _Identified:
    """A list of objects merged item by item, each patch item's match found in an index of the list."""
    ident = _identity(schema)
    key = schema.merge_key
    if key is None:
        raise PatchError(
            f"{path}: this list has no merge key, so its items cannot be merged; send the whole list instead"
        )
    plain: list[Mapping[str, Any]] = []
    replace = False
    deleted: set[str] = set()
    for index, item in enumerate(patch):
        if DIRECTIVE_MARKER not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE_MARKER]
        if directive == Directive.DELETE:
            if key not in item:
                raise PatchError(
                    f"{path}[{index}]: `$patch: delete` needs the merge key {key!r} to find the item"
                )
            deleted.add(canonical_json(item[key]))
        elif directive == Directive.REPLACE:
            replace = True
        elif directive == Directive.MERGE:
            if len(item) > 1:
                plain.append(item)
        else:
            raise PatchError(f"{path}[{index}]: unknown `$patch: {directive}`; use replace, merge or delete")
    if replace:
        replaced = [_materialize(item, schema.element(), path) for item in plain]
        return _Identified(replaced, [ident(x) for x in replaced])
    if deleted:
        kept = [(x, x_id) for x, x_id in zip(original, original_ids, strict=True) if x_id not in deleted]
        original, original_ids = [x for x, _ in kept], [x_id for _, x_id in kept]

    result = _Identified(list(original), list(original_ids))
    positions = _Positions(original_ids)
    patch_ids: list[str] = []
    for index, item in enumerate(plain):
        if key not in item:
            raise PatchError(
                f"{path}[{index}]: the item has no {key!r}; every item of this list needs its merge key {key!r}"
            )
        wanted = canonical_json(item[key])
        patch_ids.append(wanted)
        item_path = f"{path}[{key}={wanted}]"
        found = positions.first(wanted)
        if found is None:
            added = _materialize(item, schema.element(), item_path)
            positions.add(len(result.items), added_id := ident(added))
            result.items.append(added)
            result.ids.append(added_id)
            continue
        merged_item = _merge_map(result.items[found], item, schema.element(), item_path)
        result.items[found] = _GONE if merged_item is None else merged_item
        merged_id = _GONE_ID if merged_item is None else ident(merged_item)
        if merged_id != wanted:
            positions.move(found, wanted, merged_id)
            result.ids[found] = merged_id
    left = [(x, x_id) for x, x_id in zip(result.items, result.ids, strict=True) if x is not _GONE]
    return _order_items(
        _Identified([x for x, _ in left], [x_id for _, x_id in left]), patch_ids, original_ids
    )


_GONE: Any = object()  # a list item a merge removed, dropped when the merge is done
_GONE_ID = ""  # its identity: no canonical JSON text is empty


class _Positions:
    """Where the items of a list are by identity (ascending), kept as the merge adds, changes and
    removes items: finding a patch item's match is one look-up, not a scan of the list."""

    def __init__(self, ids: Sequence[str]) -> None:
        self._where: dict[str, list[int]] = {}
        for position, item_id in enumerate(ids):
            self._where.setdefault(item_id, []).append(position)

    def first(self, item_id: str) -> int | None:
        found = self._where.get(item_id)
        return found[0] if found else None

    def add(self, position: int, item_id: str) -> None:
        bisect.insort(self._where.setdefault(item_id, []), position)

    def move(self, position: int, old_id: str, new_id: str) -> None:
        self._where[old_id].remove(position)
        if new_id != _GONE_ID:
            self.add(position, new_id)


def _order_items(merged: _Identified, patch_order: Sequence[str], server_order: Sequence[str]) -> _Identified:
    """Order a merged list: items named in ``patch_order`` in that order, the others where they were.

    Server-only items keep their relative order and are placed before a patch item only
    when they stood before it in the stored list, as Kubernetes does.
    """
    patch_pos: dict[str, int] = {}
    for position, item_id in enumerate(patch_order):
        patch_pos.setdefault(item_id, position)
    server_pos: dict[str, int] = {}
    for position, item_id in enumerate(server_order):
        server_pos.setdefault(item_id, position)
    pairs = list(zip(merged.items, merged.ids, strict=True))
    from_patch = sorted((p for p in pairs if p[1] in patch_pos), key=lambda p: patch_pos[p[1]])
    server_only = sorted(
        (p for p in pairs if p[1] not in patch_pos), key=lambda p: server_pos.get(p[1], len(server_pos))
    )
    out: list[tuple[Any, str]] = []
    left, right = 0, 0
    while left < len(server_only) or right < len(from_patch):
        if right >= len(from_patch):
            out.append(server_only[left])
            left += 1
            continue
        if left >= len(server_only):
            out.append(from_patch[right])
            right += 1
            continue
        left_pos = server_pos.get(server_only[left][1])
        right_pos = server_pos.get(from_patch[right][1])
        if left_pos is not None and right_pos is not None and left_pos < right_pos:
            out.append(server_only[left])
            left += 1
        else:
            out.append(from_patch[right])
            right += 1
    return _Identified([x for x, _ in out], [x_id for _, x_id in out])


def _replace_list(value: Sequence[Any], schema: FieldSchema, path: str) -> list[Any]:
    """A list without merge strategy is taken as sent (directive markers and nulls cleaned)."""
    out: list[Any] = []
    for index, item in enumerate(value):
        if isinstance(item, Mapping) and DIRECTIVE_MARKER in item:
            directive = item[DIRECTIVE_MARKER]
            if directive == Directive.REPLACE or (directive == Directive.MERGE and len(item) == 1):
                continue
            raise PatchError(
                f"{path}[{index}]: `$patch: {directive}` needs a list merged by key, but {path} "
                "is replaced as a whole; send the complete list"
            )
        out.append(_materialize(item, schema.element(), f"{path}[{index}]"))
    return out


def _materialize(value: Any, schema: FieldSchema, path: str) -> Any:
    """A patch value for a field the object does not have yet (or of another type)."""
    if isinstance(value, Mapping):
        return _merge_map({}, value, schema, path)
    if isinstance(value, list):
        if schema.patch_merges:
            return _merge_list([], value, schema, path)
        return _replace_list(value, schema, path)
    return value


def _delete_from_primitive_list(original: dict[str, Any], name: str, values: Any, path: str) -> None:
    if not name:
        raise PatchError(f"{path}: `$deleteFromPrimitiveList/` must name a list")
    if not isinstance(values, list) or any(isinstance(v, Mapping | list) for v in values):
        raise PatchError(f"{path}: `$deleteFromPrimitiveList/{name}` must be a list of plain values")
    current = original.get(name)
    if not isinstance(current, list):
        return
    doomed = {canonical_json(v) for v in values}
    original[name] = [x for x in current if canonical_json(x) not in doomed]
