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
fewer reads the missing ones as "" (where Kueue's would fail).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Annotated, Any

from pydantic import Field

from controlplane.apis.kueue_status import MAX_TOPOLOGY_DOMAINS
from controlplane.apis.meta import LISTED_ATOMIC, WireModel

Obj = dict[str, Any]
#: Kueue's bound on a topology placement value, a prefix, a suffix and a root.
MAX_VALUE_LENGTH = 63
#: Kueue's bound on the domains of a slice (its roots, its individual pod counts).
MAX_SLICE_DOMAINS = 100000


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
        min_length=1, max_length=16, json_schema_extra=LISTED_ATOMIC
    )
    """The domains' node label values, one entry per level of the assignment."""


class TopologyAssignment(WireModel):
    levels: list[Annotated[str, Field(max_length=317)]] = Field(
        min_length=1, max_length=16, json_schema_extra=LISTED_ATOMIC
    )
    """The node label keys of the topology's levels, from the highest to the lowest."""
    slices: list[TopologyAssignmentSlice] = Field(max_length=1000, json_schema_extra=LISTED_ATOMIC)
    """The domains the pods go to, in slices; the assignment is all of them."""


# --- conversion --------------------------------------------------------------------------------


def _items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _common_ends(values: list[str]) -> tuple[str, str]:
    """The longest start and end all ``values`` share, not overlapping in the shortest one
    (Kueue's ``fillSingleCompactSliceValues``: ``["ababa", "aba"]`` share the end ``"aba"`` and so no start)."""
    prefix = suffix = values[0]
    for value in values[1:]:
        prefix = prefix[: len(value)]
        suffix = suffix[max(len(suffix) - len(value), 0) :]
        prefix = prefix[: next((i for i, c in enumerate(prefix) if value[i] != c), len(prefix))]
        kept = next((i for i in range(len(suffix)) if value[-1 - i] != suffix[-1 - i]), len(suffix))
        suffix = suffix[len(suffix) - kept :]
    shortest = min(map(len, values))
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    return prefix, suffix


def _level_values(values: list[str]) -> Obj:
    """One level's values of a slice, as Kueue compresses them."""
    if all(value == values[0] for value in values):
        return {"universal": values[0]}
    prefix, suffix = _common_ends(values)
    individual: Obj = {"prefix": prefix} if prefix else {}
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [value[len(prefix) : len(value) - len(suffix)] for value in values]
    return {"individual": individual}


def _value_at(values: list[Any], level: int) -> str:
    return str(values[level]) if level < len(values) and values[level] is not None else ""


def slices_from_domains(assignment: Mapping[str, Any]) -> Obj:
    """A v1beta1 topology assignment (``levels``, ``domains``) as v1beta2's (``levels``,
    ``slices``): Kueue's single compact slice. Its other fields are kept as they are."""
    out = {key: value for key, value in assignment.items() if key != "domains"}
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


def _slice_value(values: Mapping[str, Any], index: int) -> str:
    if values.get("universal") is not None:
        return str(values["universal"])
    individual = _mapping(values.get("individual"))
    roots = _items(individual.get("roots"))
    root = str(roots[index]) if index < len(roots) else ""
    return f"{individual.get('prefix') or ''}{root}{individual.get('suffix') or ''}"


def domain_count(assignment: Mapping[str, Any]) -> int:
    """How many domains a v1beta2 assignment's slices hold in all."""
    counts = (_mapping(slice_).get("domainCount") for slice_ in _items(assignment.get("slices")))
    return sum(count for count in counts if isinstance(count, int) and count > 0)


def _domains(assignment: Mapping[str, Any]) -> Iterator[Obj]:
    """Each domain of a v1beta2 assignment's slices, in order (Kueue's ``InternalSeqFrom``)."""
    levels = len(_items(assignment.get("levels")))
    for slice_ in map(_mapping, _items(assignment.get("slices"))):
        count = slice_.get("domainCount")
        per_level = [_mapping(values) for values in _items(slice_.get("valuesPerLevel"))]
        pods = _mapping(slice_.get("podCounts"))
        individual = _items(pods.get("individual"))
        for index in range(count if isinstance(count, int) else 0):
            yield {
                "values": [
                    _slice_value(per_level[level] if level < len(per_level) else {}, index)
                    for level in range(levels)
                ],
                "count": pods["universal"]
                if pods.get("universal") is not None
                else (individual[index] if index < len(individual) else None),
            }


def domains_from_slices(assignment: Mapping[str, Any]) -> Obj:
    """A v1beta2 topology assignment (``levels``, ``slices``) as v1beta1's (``levels``,
    ``domains``): every domain of every slice, up to :data:`MAX_TOPOLOGY_DOMAINS` (validation
    refuses more). Its other fields are kept as they are."""
    out = {key: value for key, value in assignment.items() if key != "slices"}
    out["domains"] = list(islice(_domains(assignment), MAX_TOPOLOGY_DOMAINS))
    return out
