"""Server-side apply and field ownership (``metadata.managedFields``).

Every write records which field manager owns which fields, exactly in Kubernetes'
FieldsV1 format, so that ``kubectl apply --server-side``, the member agent's applies and
``kubectl get -o yaml --show-managed-fields`` behave as against a real cluster:

- :func:`server_side_apply` merges an applied configuration into the live object. Fields
  set in the configuration are set and owned by the manager; fields the manager applied
  before and omits now are removed unless another manager owns them too; changing a
  field another manager owns is a conflict (:class:`ApplyConflict`) unless ``force``,
  which moves the ownership. Setting a field to the value it already has never conflicts:
  the managers then share it.
- :func:`record_update` records ordinary writes (create, update, patch): the fields that
  changed become the manager's and leave every other manager's set.

Writes through the ``status`` subresource track ``.status`` only, in their own entry
(``subresource: status``); writes to the main resource never own ``.status``, nor do applies
of the Scale a ``scale`` subresource serves (:mod:`.scalefields` maps its entries). System
fields (``metadata.name``, ``resourceVersion``, ``uid``, ``managedFields``…) are never owned.
List semantics come from the kind's :class:`FieldSchema`, which the caller passes in: a
built-in kind's from :mod:`controlplane.apiserver.patching.schema` (associative lists keyed
by ``name``/``containerPort``…), a custom resource's from its CRD's structural schema
(:mod:`controlplane.apiserver.patching.structural`); lists nothing describes are atomic.

In: the live object (or ``None``), the new or applied object, the kind's schema, the
manager, the operation time. Out: a new object with ``metadata.managedFields`` updated;
inputs are not modified. :func:`record_update` runs on every write, so its result shares
all but ``metadata`` with the new object it was given (callers own that object and do not
change it afterwards).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Required, TypedDict

from controlplane.apiserver.patching.comparing import ABSENT, field_set, under
from controlplane.apiserver.patching.conflicts import conflict_error
from controlplane.apiserver.patching.fieldpaths import (
    FIELD,
    FieldsError,
    Path,
    PathElement,
    decode_fields,
    describe,
    encode_fields,
    field_element,
    item_element,
    with_named_ancestors,
)
from controlplane.apiserver.patching.merging import merge_applied, remove_paths
from controlplane.apiserver.patching.schema import FieldSchema, ListType
from controlplane.apiserver.patching.typedvalue import applied_typing_error
from controlplane.apiserver.patching.versions import VersionConverter, comparisons_by_version, fields_at

logger = logging.getLogger(__name__)

STATUS_SUBRESOURCE = "status"
FIELDS_TYPE = "FieldsV1"


class Operation(StrEnum):
    """``operation`` of a managedFields entry."""

    APPLY = "Apply"
    UPDATE = "Update"


class ApplyError(ValueError):
    """An applied configuration that cannot be applied (no manager, wrong target, untyped: :class:`UntypedApply`)."""


class UntypedApply(ApplyError):
    """An applied configuration kube's structured-merge-diff cannot type, in its words (``path:
    message``, :mod:`.typedvalue`): kube's field manager returns it as a plain error, answered as
    a reasonless 500."""


@dataclass
class _Entry:
    manager: str
    operation: str
    api_version: str
    subresource: str
    time: str | None
    fields: set[Path] = field(default_factory=set)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        # Appliers keep one entry across API versions; updaters get one per version,
        # as Kubernetes builds its manager identifiers.
        version = "" if self.operation == Operation.APPLY else self.api_version
        return (self.manager, self.operation, self.subresource, version)

    def describe(self) -> str:
        """The manager as Kubernetes names it in conflict messages."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == Operation.UPDATE:
            text += f" using {self.api_version}"
        return text

    def encode(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time is not None:
            out["time"] = self.time
        out["fieldsType"] = FIELDS_TYPE
        out["fieldsV1"] = encode_fields(self.fields)
        if self.subresource:
            out["subresource"] = self.subresource
        return out


_Managed = dict[tuple[str, str, str, str], _Entry]

# Fields the server owns: never tracked, never pruned (Kubernetes' stripped set).
_SYSTEM_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_UNOWNED: frozenset[Path] = frozenset(
    {
        (field_element("apiVersion"),),
        (field_element("kind"),),
        (field_element("metadata"),),
        *(((field_element("metadata")), field_element(name)) for name in _SYSTEM_META),
    }
)
# Values an applied configuration may carry but that the server, not the applier, sets.
_NOT_APPLIED_META = frozenset(_SYSTEM_META) - {"name", "namespace"}
_STATUS: PathElement = field_element("status")


class ApplyArgs(TypedDict, total=False):
    """The keyword arguments of :func:`server_side_apply`, for what applies through it."""

    schema: Required[FieldSchema]
    manager: Required[str]
    force: Required[bool]
    now: Required[str]
    subresource: str | None
    converter: VersionConverter | None


def server_side_apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    schema: FieldSchema,
    manager: str,
    force: bool,
    now: str,
    subresource: str | None = None,
    converter: VersionConverter | None = None,
) -> dict[str, Any]:
    """Apply ``applied`` as ``manager`` to an object of the kind ``schema`` describes; ``live``
    is ``None`` when the object is being created. ``converter``: the kind's other versions, in
    which the entries written at them are compared (:mod:`.versions`)."""
    if not isinstance(applied, Mapping):
        raise ApplyError("the applied configuration must be a JSON object")
    if not manager:
        raise ApplyError("server-side apply needs a field manager (fieldManager=...)")
    if live is None and subresource:
        raise ApplyError(f"cannot create an object through the {subresource} subresource")
    section = subresource or ""
    api_version = _text(applied.get("apiVersion")) or _text((live or {}).get("apiVersion"))

    if (untyped := applied_typing_error(applied, schema)) is not None:
        raise UntypedApply(untyped)
    config = _applied_content(applied, section)
    current = copy.deepcopy(live) if live is not None else {}
    managed = _decode_managed(_managed_fields_of(current))
    _drop_managed_fields(current)

    # The merge shares untouched subtrees with `current`; pruning must not reach them.
    merged: dict[str, Any] = copy.deepcopy(merge_applied(current, config, schema))
    config_fields: set[Path] = set()
    field_set(config, schema, (), config_fields)
    owned = _trackable(config_fields, section)

    identity = (manager, Operation.APPLY.value, section, "")
    previous = managed.get(identity)
    last = previous.fields if previous is not None else set()
    if last and previous is not None and previous.api_version != api_version and converter is not None:
        # Applied last at another version: its fields as this version names them.
        last = fields_at(current, last, version=previous.api_version, schema=schema, converter=converter) or last
    if last:
        keep: set[Path] = set(config_fields) | owned
        for other_identity, entry in managed.items():
            if other_identity != identity:
                keep |= entry.fields
        doomed = with_named_ancestors(last) - with_named_ancestors(keep)
        remove_paths(merged, (p for p in doomed if p not in _UNOWNED and _in_section(p, section)), schema)

    others = {key: entry for key, entry in managed.items() if key != identity}
    comparison, by_version = comparisons_by_version(
        current, merged, schema=schema, api_version=api_version,
        versions=(entry.api_version for entry in others.values()), converter=converter,
    )
    changed = comparison.added | comparison.modified
    conflicts: list[tuple[_Entry, Path]] = []
    for entry in others.values():
        seen = by_version.get(entry.api_version, comparison)
        conflicts.extend((entry, path) for path in entry.fields & (seen.added | seen.modified))
    if conflicts and not force:
        raise conflict_error(conflicts)
    for entry in others.values():
        seen = by_version.get(entry.api_version, comparison)
        entry.fields -= seen.added | seen.modified | seen.removed

    object_changed = bool(changed or comparison.removed)
    if previous is None:
        previous = _Entry(manager, Operation.APPLY.value, api_version, section, now)
        managed[identity] = previous
    elif object_changed or previous.fields != owned or previous.api_version != api_version:
        previous.time = now
    previous.api_version = api_version
    previous.fields = owned
    if conflicts:
        logger.info(
            "apply forced ownership",
            extra={"manager": manager, "fields": sorted(describe(p) for _, p in conflicts)},
        )
    _store_managed(merged, managed)
    return merged


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    schema: FieldSchema,
    manager: str,
    operation: str,
    now: str,
    subresource: str | None = None,
    converter: VersionConverter | None = None,
    zero: Mapping[str, Any],
) -> dict[str, Any]:
    """Record an ordinary write of ``new`` over ``old`` (``None`` on create) by ``manager``;
    ``schema``: the kind's, ``converter``: its other versions (see :func:`server_side_apply`);
    ``zero``: the kind's value before any write (:mod:`.zerovalues`), under ``old`` and ``new``
    alike: an object or list the write adds where that lacks one is owned itself too.

    Managed fields come from ``old``, unless the request itself carries a valid non-empty
    ``metadata.managedFields`` (used as sent) or an empty list (which resets them), as in
    Kubernetes; status subresource writes always keep the stored ones.
    """
    if not isinstance(new, Mapping):
        raise ApplyError("the object must be a JSON object")
    section = subresource or ""
    # Only metadata.managedFields is written, so only the metadata mapping is copied: the
    # result shares every other subtree with ``new``, and the comparison reads views of
    # both objects without managedFields instead of deep copies (a create copies nothing).
    result = _with_own_metadata(new)
    before: Mapping[str, Any] = old if old is not None else {}
    api_version = _text(result.get("apiVersion")) or _text(before.get("apiVersion"))

    requested = _managed_fields_of(result)
    managed: _Managed
    if not section and isinstance(requested, list) and _is_reset(requested):
        managed = {}
    else:
        managed = {}
        if not section and isinstance(requested, list):
            managed = _decode_managed(requested)
        if not managed:
            managed = _decode_managed(_managed_fields_of(before))
    before = _without_managed_fields(before)
    after = _without_managed_fields(result)

    if old is None and not section and not managed:
        # A plain create: the manager owns every trackable field of the object. One walk
        # builds the FieldsV1 tree; None when a list repeats a key (the general path
        # below merges such items).
        owned = _created_fields(after, schema, zero)
        if owned is not None:
            _store_managed_tree(result, owned, manager=manager, operation=operation, api_version=api_version, now=now)
            return result

    comparison, by_version = comparisons_by_version(
        under(zero, before), under(zero, after), schema=schema, api_version=api_version,
        versions=(entry.api_version for entry in managed.values()), converter=converter, owns_added_objects=True,
    )
    changed = _trackable(comparison.added | comparison.modified, section, owns_status=True)
    for entry in managed.values():
        seen = by_version.get(entry.api_version)
        if seen is None:
            entry.fields -= changed | comparison.removed
        else:
            entry.fields -= _trackable(seen.added | seen.modified, section, owns_status=True) | seen.removed
    if changed:
        # A write through /scale is recorded as kube's ScaleHandler records it: without a time.
        time = None if section == "scale" else now
        entry = _Entry(manager, operation, api_version, section, time)
        existing = managed.setdefault(entry.identity, entry)
        existing.fields |= changed
        existing.time = time
    _store_managed(result, managed)
    return result


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_reset(entries: list[Any]) -> bool:
    return not entries or (len(entries) == 1 and entries[0] == {})


def _managed_fields_of(obj: Mapping[str, Any]) -> Any:
    metadata = obj.get("metadata")
    return metadata.get("managedFields") if isinstance(metadata, Mapping) else None


def _with_own_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``obj`` whose ``metadata`` mapping (only) is its own."""
    out = dict(obj)
    metadata = out.get("metadata")
    if isinstance(metadata, Mapping):
        out["metadata"] = dict(metadata)
    return out


def _without_managed_fields(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` as seen without ``metadata.managedFields`` (shares everything else)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or "managedFields" not in metadata:
        return obj
    return {**obj, "metadata": {key: value for key, value in metadata.items() if key != "managedFields"}}


def _drop_managed_fields(obj: dict[str, Any]) -> None:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)


def _decode_managed(raw: Any) -> _Managed:
    """Entries of a stored managedFields list; unreadable entries are dropped, not fatal."""
    managed: _Managed = {}
    if not isinstance(raw, list):
        return managed
    for item in raw:
        if not isinstance(item, Mapping) or item.get("fieldsType", FIELDS_TYPE) != FIELDS_TYPE:
            logger.warning("dropping unreadable managedFields entry", extra={"entry": repr(item)[:200]})
            continue
        try:
            fields = decode_fields(item.get("fieldsV1", {}))
        except FieldsError as exc:
            logger.warning("dropping managedFields entry: %s", exc, extra={"manager": item.get("manager")})
            continue
        entry = _Entry(
            manager=_text(item.get("manager")),
            operation=_text(item.get("operation")) or Operation.UPDATE.value,
            api_version=_text(item.get("apiVersion")),
            subresource=_text(item.get("subresource")),
            time=item.get("time") if isinstance(item.get("time"), str) else None,
            fields=fields,
        )
        existing = managed.get(entry.identity)
        if existing is None:
            managed[entry.identity] = entry
        else:
            existing.fields |= entry.fields
    return managed


def _store_managed(obj: dict[str, Any], managed: _Managed) -> None:
    entries = [entry for entry in managed.values() if entry.fields]
    # Kubernetes' order: appliers first, then by time, manager, version, subresource.
    entries.sort(key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        if not entries:
            return
        metadata = obj["metadata"] = {}
    if entries:
        metadata["managedFields"] = [entry.encode() for entry in entries]
    else:
        metadata.pop("managedFields", None)


class _RepeatedItem(Exception):
    """A list names two items alike; the set-based path handles the merge."""


def _created_fields(obj: Mapping[str, Any], schema: FieldSchema, zero: Mapping[str, Any]) -> dict[str, Any] | None:
    """The FieldsV1 tree a create by one manager owns: what ``encode_fields`` gives for the
    trackable paths among every node of ``obj`` (``compare`` against the kind's ``zero``
    value), built in one walk without path sets. None when a list holds two items with the same key."""
    out: dict[str, Any] = {}
    try:
        for key in sorted(obj):
            if key == "status":
                continue  # never owned through the main resource
            value, child_schema = obj[key], schema.child(key)
            if key == "metadata" and isinstance(value, Mapping) and not child_schema.atomic:
                tree = _created_metadata(value, child_schema)
            else:
                tree = _created_node(value, child_schema, zero.get(key, ABSENT))
                if tree is not None and (field_element(key),) in _UNOWNED:
                    tree = _disowned(tree)
            if tree is not None:
                out[f"{FIELD}:{key}"] = tree
    except _RepeatedItem:
        return None
    return out


def _created_metadata(metadata: Mapping[str, Any], schema: FieldSchema) -> dict[str, Any] | None:
    """``metadata``'s subtree: never owned itself, nor are the system fields or managedFields."""
    out: dict[str, Any] = {}
    for key in sorted(metadata):
        if key == "managedFields":
            continue
        tree = _created_node(metadata[key], schema.child(key), ABSENT)
        if tree is not None and key in _SYSTEM_META:
            tree = _disowned(tree)
        if tree is not None:
            out[f"{FIELD}:{key}"] = tree
    return out or None


def _disowned(tree: dict[str, Any]) -> dict[str, Any] | None:
    """``tree`` with its root not owned (its owned descendants stay)."""
    tree.pop(".", None)
    return tree or None


def _created_node(value: Any, schema: FieldSchema, zero: Any) -> dict[str, Any] | None:
    """The FieldsV1 subtree of one node as ``comparing.compare`` sees it against ``zero``, the
    kind's zero value there (:data:`ABSENT`: none). None: nothing owned here or below.

    Siblings are all fields (an object) or all keys or values (a list), so ordering them
    by their text is Kubernetes' order.
    """
    if isinstance(value, str):
        return {}  # most nodes are string leaves; skip the (slow) ABC checks below
    out: dict[str, Any] = {}
    if isinstance(value, dict | Mapping) and not schema.atomic:
        # Owned when the zero value has none; an empty one also when it differs from the zero's.
        member = not isinstance(zero, Mapping) if not value else zero is ABSENT
        for key in sorted(value):
            tree = _created_node(value[key], schema.child(key), zero.get(key, ABSENT) if isinstance(zero, Mapping) else ABSENT)
            if tree is not None:
                out[f"{FIELD}:{key}"] = tree
    elif isinstance(value, list) and schema.list_type is not ListType.ATOMIC:
        member = not value or zero is ABSENT  # a null list of the zero value is not owned
        item_schema = schema.element()
        items: dict[str, dict[str, Any]] = {}
        for item in value:
            element = item_element(item, schema)
            if element is None:
                continue
            name = f"{element[0]}:{element[1]}"
            if name in items:
                raise _RepeatedItem
            item_tree: dict[str, Any] = {}
            if isinstance(item, Mapping) and not item_schema.atomic:
                for key in sorted(item):
                    tree = _created_node(item[key], item_schema.child(key), ABSENT)
                    if tree is not None:
                        item_tree[f"{FIELD}:{key}"] = tree
            items[name] = {".": {}, **item_tree} if item_tree else {}
        for name in sorted(items, key=lambda text: text[2:]):
            out[name] = items[name]
    else:
        return {}
    if not member:
        return out or None
    return {".": {}, **out} if out else {}


def _store_managed_tree(
    obj: dict[str, Any], fields_v1: dict[str, Any], *, manager: str, operation: str, api_version: str, now: str
) -> None:
    """``_store_managed`` for a single Update entry whose FieldsV1 tree is already built."""
    metadata = obj.get("metadata")
    if not fields_v1:
        if isinstance(metadata, dict):
            metadata.pop("managedFields", None)
        return
    if not isinstance(metadata, dict):
        metadata = obj["metadata"] = {}
    metadata["managedFields"] = [
        {
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now,
            "fieldsType": FIELDS_TYPE,
            "fieldsV1": fields_v1,
        }
    ]


def _applied_content(applied: Mapping[str, Any], section: str) -> dict[str, Any]:
    """What of an applied configuration is merged: no server-set metadata, status only via /status."""
    config = copy.deepcopy(dict(applied))
    metadata = config.get("metadata")
    if isinstance(metadata, dict):
        for name in _NOT_APPLIED_META:
            metadata.pop(name, None)
    if section == STATUS_SUBRESOURCE:
        return {key: value for key, value in config.items() if key == "status"}
    # The main resource, or an object of its own served through a subresource (a Scale).
    config.pop("status", None)
    return config


def _in_section(path: Path, section: str) -> bool:
    in_status = bool(path) and path[0] == _STATUS
    return in_status if section == STATUS_SUBRESOURCE else not in_status


def _trackable(paths: Iterable[Path], section: str, *, owns_status: bool = False) -> set[Path]:
    """The paths a write may own: no system fields, and only its own part of the object;
    ``.status`` itself only with ``owns_status`` (a custom resource's status a write added)."""
    out: set[Path] = set()
    for path in paths:
        if path in _UNOWNED or not _in_section(path, section):
            continue
        if path[:2] == (field_element("metadata"), field_element("managedFields")):
            continue
        if path == (_STATUS,) and not owns_status:
            continue
        out.add(path)
    return out
