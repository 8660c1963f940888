"""Field ownership across the versions of a kind (kube's fieldmanager version converter).

A kind served at several versions over one stored object (an HPA at autoscaling/v1 and v2, a
Kueue ClusterQueue at v1beta1 and v1beta2) keeps each managedFields entry in the version its
manager wrote: its ``apiVersion`` and its field paths are that version's. A write decides which
fields of other managers it changes, takes or conflicts with by comparing the object before and
after it *in each entry's version*, as structured-merge-diff's updater does: both objects are
converted to that version and compared there, and the entry's own paths are checked against that
comparison. So a v1beta1 applier of ``spec.cohort`` conflicts with a v1beta2 apply of
``spec.cohortName``, and the conflict names ``.spec.cohort``, the field as its owner holds it.

In: the objects before and after a write (in the request's version), the request's version, the
versions of the other entries, and a :class:`VersionConverter` (the kind's served versions). Out:
one :class:`Comparison` per version. When every entry is in the request's version (the common
case) nothing is converted: the one comparison of the request's version is all there is. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from controlplane.apiserver.patching.comparing import Comparison, compare
from controlplane.apiserver.patching.fieldpaths import Path
from controlplane.apiserver.patching.merging import remove_paths
from controlplane.apiserver.patching.schema import FieldSchema

_UNCONVERTIBLE = (TypeError, ValueError, KeyError, AttributeError)


class VersionConverter(Protocol):
    """Converts an object of a kind to another version the kind is served at."""

    def __call__(self, obj: Mapping[str, Any], api_version: str) -> tuple[dict[str, Any], FieldSchema] | None:
        """``obj`` at ``api_version`` and that version's schema; None when the kind is not served
        at ``api_version`` (or ``obj``'s own version is unknown)."""
        ...


def comparisons_by_version(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    schema: FieldSchema,
    api_version: str,
    versions: Iterable[str],
    converter: VersionConverter | None,
    owns_added_objects: bool = False,
) -> tuple[Comparison, dict[str, Comparison]]:
    """The comparison of ``before`` and ``after`` in ``api_version`` (their own), and in each of
    ``versions`` that differs from it. A version the kind is not served at, or an object that
    does not convert, is compared in the request's version (as the hub compared before).
    ``owns_added_objects``: see :class:`~.comparing.Comparison`."""
    own = Comparison(owns_added_objects=owns_added_objects)
    compare(before, after, schema, (), own)
    others: dict[str, Comparison] = {}
    if converter is None or not before:
        return own, others
    for version in versions:
        if not version or version == api_version or version in others:
            continue
        others[version] = _compared_at(before, after, version, converter, owns_added_objects) or own
    return own, others


def _compared_at(
    before: Mapping[str, Any], after: Mapping[str, Any], version: str, converter: VersionConverter,
    owns_added_objects: bool,
) -> Comparison | None:
    try:
        old, new = converter(before, version), converter(after, version)
    except _UNCONVERTIBLE:
        return None  # a converter meets an object it cannot read: compared as it is
    if old is None or new is None:
        return None
    comparison = Comparison(owns_added_objects=owns_added_objects)
    compare(old[0], new[0], new[1], (), comparison)
    return comparison


def fields_at(
    obj: Mapping[str, Any],
    fields: set[Path],
    *,
    version: str,
    schema: FieldSchema,
    converter: VersionConverter,
) -> set[Path] | None:
    """``fields``, paths of ``obj`` at ``version``, as ``obj``'s own version names them: what of
    ``obj`` changes when they are removed at ``version`` (kube prunes an applier's last set in its
    version and converts back). None when ``obj`` does not convert."""
    try:
        there = converter(obj, version)
        if there is None:
            return None
        held, held_schema = copy.deepcopy(there[0]), there[1]
        remove_paths(held, fields, held_schema)
        back = converter(held, str(obj.get("apiVersion")))
    except _UNCONVERTIBLE:
        return None
    if back is None:
        return None
    comparison = Comparison()
    compare(obj, back[0], schema, (), comparison)
    return comparison.removed | comparison.modified
