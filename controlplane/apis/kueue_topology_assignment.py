"""A pod set's topology assignment in a Kueue Workload's ``status.admission`` at
``kueue.x-k8s.io/v1beta2``: ``levels`` and ``slices``, and its conversion to and from v1beta1's
``levels`` and ``domains``, the form the hub stores. Pure: no I/O.

v1beta1 lists each domain with its node label values (one per level) and its pod count. v1beta2
writes the same domains in slices, compressed: per slice a ``domainCount``, per level either one
``universal`` value of every domain of the slice or the ``individual`` values as ``roots`` between
a common ``prefix`` and ``suffix``, and the pod counts either ``universal`` or ``individual``
(Kueue's ``TopologyAssignment`` of ``apis/kueue/v1beta2/workload_types.go``, its CRD YAML at
01ed66fd). Its CEL rules are :func:`controlplane.apis.kueue_rules.topology_assignments`.

The conversion is Kueue's (``Convert_v1beta1_TopologyAssignment_To_v1beta2_TopologyAssignment``
and back, ``pkg/util/tas/tas_assignment.go`` at 2b633284): v1beta1's domains become one slice
compressed as far as it goes (no slice for no domain); v1beta2's slices are read domain by domain,
in order. So a v1beta1 assignment reads back the same; a v1beta2 one reads back as the same
domains in that one-slice encoding, however it was sliced when written. A domain with more values
than levels loses the extra ones at v1beta2 (Kueue's conversion reads one per level); one with
fewer fails Kueue's conversion, and the hub refuses it at v1beta1
(:func:`controlplane.apis.kueue_rules.workload`); one stored before reads the missing ones as "".

The hub's difference: since Kueue 0.16 the storage version is v1beta2 (kueue PR #8020), so upstream
a v1beta2 write reads back exactly as sliced; the hub stores v1beta1 and re-slices into one compact
slice. And since v1beta1 lists every domain, the slices are bounded by what a v1beta1 write can
carry (:data:`MAX_DOMAIN_BYTES`), measured from the slices without listing a domain
(:func:`v1beta1_bytes`); slices the rules refuse for their shape, or that would list more than any
v1beta1 write carries (:data:`MAX_CONVERTED_BYTES`), are converted to no domain (:func:`fit`), so
no input, checked or not, costs more to convert than a v1beta1 write would. An update that keeps
an assignment as stored is not refused for its size (kube's ratcheting): a Workload stored through
v1beta1 with more than 1 MiB of domains can still be written at v1beta2 and keeps them.

Values are compressed as Go compares strings, byte by byte: two values whose characters differ but
start with the same UTF-8 bytes share those bytes as a prefix, and the cut pieces, not UTF-8, are
written as U+FFFD each, as Kueue's answer writes them (so a v1beta2 write of that read stores U+FFFD
where the characters were, as a write of Kueue's read would).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, AnyStr

from pydantic import Field

from controlplane.apis.meta import LISTED_ATOMIC, WireModel
from controlplane.gojson import go_string

Obj = dict[str, Any]
#: Kueue's bound on a topology placement value, a prefix, a suffix and a root.
MAX_VALUE_LENGTH = 63
#: Kueue's bound on the domains of a slice (its roots, its individual pod counts).
MAX_SLICE_DOMAINS = 100000
#: Kueue's bound on a topology's levels.
MAX_LEVELS = 16
#: The most bytes a Workload's topology assignments may take as v1beta1's ``domains`` (the form the
#: hub stores, and Kueue's before 0.16): 1 MiB. A v1beta1 write lists every domain and travels
#: whole in one etcd request of at most 1.5 MiB; 1 MiB of domains leaves the rest of the Workload
#: its room. So a v1beta2 write, whose slices may be a few bytes for any number of domains, costs
#: no more than the v1beta1 write it stands for. It is about 38800 one-character domains, or 18700
#: whose node names are 30 characters (Kueue's issue #7220 counted about 20000-25000 such nodes for
#: v1beta1 in all of etcd's 1.5 MiB).
MAX_DOMAIN_BYTES = 1 << 20
#: The most bytes of v1beta1's domains the conversion of a Workload's v1beta2 assignments lists:
#: 3 MiB, the largest request body the hub reads, and so more than any v1beta1 write carries.
#: Above :data:`MAX_DOMAIN_BYTES` only for assignments an update keeps as stored (the rules do not
#: refuse them again, :func:`controlplane.apis.kueue_rules.topology_assignments`), so a Workload
#: stored through v1beta1 with more than 1 MiB of domains keeps them through a write at v1beta2.
MAX_CONVERTED_BYTES = 3 << 20
#: The bytes of a v1beta1 domain beside its values and its count: ``{"values":[],"count":}``.
_DOMAIN_OVERHEAD = len('{"values":[],"count":}')
#: The bytes of a value beside its text: its quotes and a comma.
_VALUE_OVERHEAD = 3


class TopologyAssignmentSliceLevelIndividualValues(WireModel):
    prefix: str | None = Field(default=None, max_length=MAX_VALUE_LENGTH)
    """The start every value of the slice at this level shares (left out when none)."""
    suffix: str | None = Field(default=None, max_length=MAX_VALUE_LENGTH)
    """The end every value of the slice at this level shares (left out when none)."""
    roots: list[Annotated[str, Field(max_length=MAX_VALUE_LENGTH)]] = Field(
        min_length=1, max_length=MAX_SLICE_DOMAINS, json_schema_extra=LISTED_ATOMIC
    )
    """Each domain's value without the prefix and suffix: as many as the slice's domainCount."""


class TopologyAssignmentSliceLevelValues(WireModel):
    universal: str | None = Field(default=None, max_length=MAX_VALUE_LENGTH)
    """The value of every domain of the slice at this level. Exactly one of universal, individual."""
    individual: TopologyAssignmentSliceLevelIndividualValues | None = None
    """The value of each domain of the slice at this level. Exactly one of universal, individual."""


class TopologyAssignmentSlicePodCounts(WireModel):
    universal: int | None = Field(default=None, ge=1)
    """The pods of every domain of the slice. Exactly one of universal, individual."""
    individual: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None, min_length=1, max_length=MAX_SLICE_DOMAINS, json_schema_extra=LISTED_ATOMIC
    )
    """The pods of each domain of the slice, as many as its domainCount. Exactly one of universal, individual."""


class TopologyAssignmentSlice(WireModel):
    domain_count: int = Field(ge=1)
    """How many domains the slice holds."""
    pod_counts: TopologyAssignmentSlicePodCounts
    """The pods of each domain."""
    values_per_level: list[TopologyAssignmentSliceLevelValues] = Field(
        min_length=1, max_length=MAX_LEVELS, json_schema_extra=LISTED_ATOMIC
    )
    """The domains' node label values, one entry per level of the assignment."""


class TopologyAssignment(WireModel):
    levels: list[Annotated[str, Field(max_length=317)]] = Field(
        min_length=1, max_length=MAX_LEVELS, json_schema_extra=LISTED_ATOMIC
    )
    """The node label keys of the topology's levels, from the highest to the lowest."""
    slices: list[TopologyAssignmentSlice] = Field(max_length=1000, json_schema_extra=LISTED_ATOMIC)
    """The domains the pods go to, in slices; the assignment is all of them."""


# --- conversion --------------------------------------------------------------------------------


def _items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _common_prefix(values: list[AnyStr]) -> AnyStr:
    """The longest start all ``values`` share: the one the least and the greatest of them share."""
    least, greatest = min(values), max(values)
    # The least is no longer than the greatest where it starts it, and differs from it within both otherwise.
    pairs = enumerate(zip(least, greatest, strict=False))
    return least[: next((i for i, (a, b) in pairs if a != b), len(least))]


def _common_ends(values: list[AnyStr]) -> tuple[AnyStr, AnyStr]:
    """The longest start and end all ``values`` share, not overlapping in the shortest one
    (Kueue's ``fillSingleCompactSliceValues``: ``["ababa", "aba"]`` share the end ``"aba"`` and so
    no start). Compared byte by byte, as Go indexes a string: two values whose characters differ
    but begin with the same bytes share those bytes. Kueue narrows a start and an end value by
    value; the longest common ones are the same, found from the least and the greatest value."""
    prefix = _common_prefix(values)
    suffix = _common_prefix([value[::-1] for value in values])[::-1]
    shortest = min(map(len, values))
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    return prefix, suffix


def _level_values(values: list[str]) -> Obj:
    """One level's values of a slice, as Kueue compresses them. Its prefix, suffix and roots are
    cut from the values' UTF-8 bytes, as Go cuts strings: a cut inside a character leaves bytes
    that are not UTF-8, which Kueue's answer (Go's JSON encoder) writes as U+FFFD each."""
    if all(value == values[0] for value in values):
        return {"universal": values[0]}
    if all(map(str.isascii, values)):  # a character is a byte: cut the text itself
        prefix, suffix = _common_ends(values)
        roots = [value[len(prefix) : len(value) - len(suffix)] for value in values]
    else:
        encoded = [value.encode("utf-8", "surrogatepass") for value in values]
        ends = _common_ends(encoded)
        roots = [go_string(value[len(ends[0]) : len(value) - len(ends[1])]) for value in encoded]
        prefix, suffix = go_string(ends[0]), go_string(ends[1])
    individual: Obj = {"prefix": prefix} if prefix else {}
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = roots
    return {"individual": individual}


def _value_at(values: list[Any], level: int) -> str:
    return str(values[level]) if level < len(values) and values[level] is not None else ""


def slices_from_domains(assignment: Mapping[str, Any]) -> Obj:
    """A v1beta1 topology assignment (``levels``, ``domains``) as v1beta2's (``levels``,
    ``slices``): Kueue's single compact slice. Its other fields are kept as they are."""
    out = copy.deepcopy({key: value for key, value in assignment.items() if key != "domains"})
    domains = [_mapping(domain) for domain in _items(assignment.get("domains"))]
    if not domains:
        out["slices"] = []
        return out
    levels = len(_items(assignment.get("levels")))
    per_domain = [_items(domain.get("values")) for domain in domains]
    counts = [domain.get("count") for domain in domains]
    pod_counts = {"universal": counts[0]} if all(c == counts[0] for c in counts) else {"individual": counts}
    out["slices"] = [
        {
            "domainCount": len(domains),
            "valuesPerLevel": [
                _level_values([_value_at(values, level) for values in per_domain]) for level in range(levels)
            ],
            "podCounts": pod_counts,
        }
    ]
    return out


def _text_length(value: object) -> int:
    return len(value) if isinstance(value, str) else len(str(value))


def _level_bytes(values: Mapping[str, Any], count: int) -> int:
    """The bytes one level's values of a slice take as v1beta1's quoted strings, for ``count`` domains."""
    if values.get("universal") is not None:
        return count * (_text_length(values["universal"]) + _VALUE_OVERHEAD)
    individual = _mapping(values.get("individual"))
    ends = sum(_text_length(individual.get(end) or "") for end in ("prefix", "suffix"))
    roots = sum(map(_text_length, _items(individual.get("roots"))))
    return count * (ends + _VALUE_OVERHEAD) + roots


def v1beta1_bytes(assignment: Mapping[str, Any]) -> int | None:
    """About how many bytes a v1beta2 assignment's slices take as v1beta1's ``domains`` (the JSON
    the hub stores), counted from the slices without listing a domain: cheap on any input (its
    work is the size of the slices, not of their domains). None for slices the rules refuse
    whatever their size: no levels or more than 16, a slice without a positive ``domainCount``
    or without one ``valuesPerLevel`` entry per level."""
    levels = len(_items(assignment.get("levels")))
    if not 1 <= levels <= MAX_LEVELS:
        return None
    total = 0
    for slice_ in map(_mapping, _items(assignment.get("slices"))):
        count, per_level = slice_.get("domainCount"), _items(slice_.get("valuesPerLevel"))
        if not isinstance(count, int) or isinstance(count, bool) or count < 1 or len(per_level) != levels:
            return None
        pods = _mapping(slice_.get("podCounts"))
        if pods.get("universal") is not None:
            counts = count * _text_length(pods["universal"])
        else:
            counts = sum(map(_text_length, _items(pods.get("individual"))))
        total += count * _DOMAIN_OVERHEAD + counts + sum(_level_bytes(_mapping(v), count) for v in per_level)
    return total


def fit(assignments: Iterable[Mapping[str, Any]]) -> bool:
    """Whether :func:`domains_from_slices` lists the domains of a Workload's v1beta2 assignments:
    the rules take the shape of each and all of them hold at most :data:`MAX_CONVERTED_BYTES` as
    v1beta1's domains."""
    total = 0
    for assignment in assignments:
        size = v1beta1_bytes(assignment)
        if size is None:
            return False
        total += size
    return total <= MAX_CONVERTED_BYTES


def _level_column(values: Mapping[str, Any], count: int) -> list[str]:
    """One level's value of each of a slice's ``count`` domains (a root missing reads as "")."""
    if values.get("universal") is not None:
        return [str(values["universal"])] * count
    individual = _mapping(values.get("individual"))
    roots = _items(individual.get("roots"))[:count]
    prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
    return [f"{prefix}{root}{suffix}" for root in roots] + [prefix + suffix] * (count - len(roots))


def _domains(assignment: Mapping[str, Any]) -> Iterator[Obj]:
    """Each domain of a v1beta2 assignment's slices, in order (Kueue's ``InternalSeqFrom``); each
    slice's levels read once, not once per domain."""
    levels = len(_items(assignment.get("levels")))
    for slice_ in map(_mapping, _items(assignment.get("slices"))):
        count = slice_.get("domainCount")
        count = count if isinstance(count, int) and count > 0 else 0
        per_level = [_mapping(values) for values in _items(slice_.get("valuesPerLevel"))]
        columns = [
            _level_column(per_level[level] if level < len(per_level) else {}, count)
            for level in range(levels)
        ]
        pods = _mapping(slice_.get("podCounts"))
        universal, individual = pods.get("universal"), _items(pods.get("individual"))
        for index, values in enumerate(zip(*columns, strict=True)):
            count_ = (
                universal
                if universal is not None
                else (individual[index] if index < len(individual) else None)
            )
            yield {"values": list(values), "count": count_}


def domains_from_slices(assignment: Mapping[str, Any], expand: bool = True) -> Obj:
    """A v1beta2 topology assignment (``levels``, ``slices``) as v1beta1's (``levels``,
    ``domains``): every domain of every slice. With ``expand`` false, or for an assignment the
    rules refuse for its shape or that would list more than any v1beta1 write (:func:`fit`), no
    domain: validation refuses it, and no input makes the conversion cost more than a v1beta1
    write. Its other fields are kept as they are (copied)."""
    out = copy.deepcopy({key: value for key, value in assignment.items() if key != "slices"})
    out["domains"] = list(_domains(assignment)) if expand and fit([assignment]) else []
    return out
