"""Server-side apply's merge of an applied configuration into the live object (objects field
by field, associative lists item by item, in kube's order), and the removal of a field a
manager gave up. Pure functions over plain JSON values and the kind's :class:`FieldSchema`;
:mod:`.apply` decides what to merge and what to remove."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.apiserver.patching.fieldpaths import (
    FIELD,
    Path,
    PathElement,
    PathTree,
    item_element,
    path_tree,
)
from controlplane.apiserver.patching.schema import FieldSchema, ListType


def _clean(value: Any, schema: FieldSchema) -> Any:
    """A copy of an applied value for a field the live object lacks: nulls mean "not set"."""
    if isinstance(value, Mapping) and not schema.atomic:
        return {k: _clean(v, schema.child(k)) for k, v in value.items() if v is not None}
    if isinstance(value, list) and schema.list_type is ListType.MAP:
        return [_clean(item, schema.element()) for item in value if item is not None]
    return copy.deepcopy(value)


def merge_applied(live: Any, config: Any, schema: FieldSchema) -> Any:
    """Server-side apply's merge: objects field by field, associative lists item by item."""
    if isinstance(live, Mapping) and isinstance(config, Mapping) and not schema.atomic:
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            elif key in live:
                out[key] = merge_applied(live[key], value, schema.child(key))
            else:
                out[key] = _clean(value, schema.child(key))
        return out
    if isinstance(live, list) and isinstance(config, list) and schema.list_type is not ListType.ATOMIC:
        return _merge_items(live, [item for item in config if item is not None], schema)
    return _clean(config, schema)


def _merge_items(live: list[Any], config: list[Any], schema: FieldSchema) -> list[Any]:
    """Merge two keyed lists keeping live-only items in place and applied items in applied order."""
    item_schema = schema.element()
    live_keys: list[PathElement | tuple[str, int]] = [
        item_element(item, schema) or ("?", index) for index, item in enumerate(live)
    ]
    config_keys: list[PathElement | tuple[str, int]] = [
        item_element(item, schema) or ("?", -1 - index) for index, item in enumerate(config)
    ]
    in_config = set(config_keys)
    live_by_key: dict[Any, Any] = {}
    for key, item in zip(live_keys, live, strict=True):
        live_by_key.setdefault(key, item)
    shared: deque[Any] = deque(k for k in config_keys if k in live_by_key)
    next_shared = shared.popleft() if shared else None

    def merged_item(key: Any, item: Any) -> Any:
        if key in live_by_key and schema.list_type is ListType.MAP:
            return merge_applied(live_by_key[key], item, item_schema)
        return _clean(item, item_schema)

    out: list[Any] = []
    done: set[Any] = set()
    li, ci = 0, 0
    while li < len(live) or ci < len(config):
        if li < len(live) and ci < len(config):
            key = live_keys[li]
            if key == config_keys[ci]:
                out.append(merged_item(key, config[ci]))
                done.add(key)
                li += 1
                ci += 1
                next_shared = shared.popleft() if shared else None
                continue
            if key in in_config and next_shared is not None and next_shared != key:
                li += 1
                continue
        if li < len(live):
            key = live_keys[li]
            if key not in in_config:
                out.append(live[li])
                li += 1
                continue
            if key in done:
                li += 1
                continue
        if ci < len(config):
            key = config_keys[ci]
            done.add(key)
            out.append(merged_item(key, config[ci]))
            ci += 1
            if next_shared is not None and next_shared == key:
                next_shared = shared.popleft() if shared else None
    return out


def remove_paths(obj: Any, paths: Iterable[Path], schema: FieldSchema) -> None:
    """Delete the value at each of ``paths`` that is there (a field, a list item or a set value).

    One walk over the paths as a tree: each list on the way is indexed once (an item's key
    computed once), so pruning n items of a long list is linear, not n scans of it. A path under
    one that is deleted is gone with it; a list item named twice in the list goes with both
    copies, and a path below such an item reaches the first."""
    _remove_below(obj, path_tree(paths), schema)


def _remove_below(node: Any, steps: PathTree, schema: FieldSchema) -> None:
    if isinstance(node, dict):
        for (kind, text), below in steps.children.items():
            if kind != FIELD or text not in node:
                continue
            if below.member:
                del node[text]
            else:
                _remove_below(node[text], below, schema.child(text))
        return
    if not isinstance(node, list):
        return
    by_item = {element: steps_below for element, steps_below in steps.children.items() if element[0] != FIELD}
    if not by_item:
        return
    doomed: set[int] = set()
    entered: set[PathElement] = set()
    for index, item in enumerate(node):
        element = item_element(item, schema)
        item_steps = by_item.get(element) if element is not None else None
        if element is None or item_steps is None:
            continue
        if item_steps.member:
            doomed.add(index)
        elif element not in entered:
            entered.add(element)
            _remove_below(item, item_steps, schema.element())
    if doomed:
        node[:] = [item for index, item in enumerate(node) if index not in doomed]
