"""A binding's ``status.explanation`` as stored: small at any fleet size.

The scheduler judges every cluster of the fleet for a binding, one verdict each
(:class:`~controlplane.apis.work_v1alpha1.ClusterExplanation`). Stored as one entry per
cluster, that list was nine tenths of a binding at 100 clusters (15 KB, most of it 90-odd
"feasible but not needed by the division"), and a binding is written several times on its
way to Running and read by every informer. So past :data:`LIST_EVERY_CLUSTER_UP_TO` entries,
clusters that were not chosen, run nothing and share a verdict (the same reasons, score, tier
and price) are one entry, the first of them by name, whose ``alike`` names the others
(:func:`compacted`); a reader that works per cluster reads :func:`expanded`; a reader that words a
cluster's packing hint tells a share's by :data:`SHARE_REMAINDER`. Pure: wire dicts in, new wire
dicts out.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

#: An explanation of at most this many entries lists every cluster on its own.
LIST_EVERY_CLUSTER_UP_TO = 16

#: Words of a chosen cluster's reason when the scheduler packed the replica's share of a GPU toward
#: the nodes of the tightest remainder that holds it (share remainder hints), which ``gpufed explain``
#: reads to tell that cluster's packing hint from the hint that keeps whole nodes free.
SHARE_REMAINDER = "whose shared GPUs have the tightest free remainder that holds it"

#: Words of a chosen cluster's reason when the scheduler steered the replica off GPU models whose nodes
#: alone hold recent larger replicas (rare node steering), which ``gpufed explain`` reads to tell that
#: cluster's steering from the steering for model-constrained demand.
RARE_NODES = "their nodes alone hold recent replicas of more GPUs"


def compacted(explanation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``explanation`` (one entry per cluster, sorted by cluster) as stored: unchanged up to
    :data:`LIST_EVERY_CLUSTER_UP_TO` entries; past that, the clusters that were not chosen, run
    nothing and share every other field are one entry (the first by name) with ``alike`` the
    others' names."""
    entries = expanded(explanation)
    if len(entries) <= LIST_EVERY_CLUSTER_UP_TO:
        return entries
    out: list[dict[str, Any]] = []
    groups: dict[Hashable, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("chosen") or entry.get("replicas"):
            out.append(entry)
            continue
        verdict = _verdict(entry)
        first = groups.get(verdict)
        if first is None:
            groups[verdict] = entry
            out.append(entry)
        else:
            first.setdefault("alike", []).append(entry["cluster"])
    return out


def _verdict(entry: Mapping[str, Any]) -> Hashable:
    """Everything of ``entry`` but its cluster, as a key."""
    key = tuple(
        (name, tuple(value) if isinstance(value, list) else value)
        for name, value in sorted(entry.items())
        if name != "cluster"
    )
    try:
        hash(key)
    except TypeError:  # a value that is not hashable (not one the scheduler writes)
        return json.dumps({k: v for k, v in entry.items() if k != "cluster"}, sort_keys=True, default=str)
    return key


def expanded(explanation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per cluster (a stored entry's ``alike`` clusters each get its verdict), sorted
    by cluster; new dicts, so the caller may change them."""
    out: list[dict[str, Any]] = []
    for entry in explanation:
        for name in (entry.get("cluster"), *(entry.get("alike") or ())):
            own = {key: value for key, value in entry.items() if key != "alike"}
            own["cluster"] = name
            if "reasons" in own:
                own["reasons"] = list(own["reasons"])
            out.append(own)
    out.sort(key=lambda entry: str(entry.get("cluster")))
    return out
