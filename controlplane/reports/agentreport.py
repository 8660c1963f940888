"""The ``utilization`` part of the agent's Cluster status report, from what the agent sees.

Why this module exists: the agent must report exactly what the hub's accounting would have
derived from a per-device report, only aggregated (:mod:`controlplane.reports.aggregated`).
So it derives it the same way: the per-node facts (:class:`~controlplane.apis.utilization.NodeUtilization`)
become the entries the hub would read back from the per-device encoding
(:func:`~controlplane.apis.utilization.node_entries`, which a test holds equal to encoding and
reading back) and go through the hub's own per-node adapter
(:func:`controlplane.reports.nodes.node_sample`: device shares, MIG remainders, time-sliced
shares, devices of pods the exporter did not name), and the resulting node samples are
aggregated.

The per-device encoding itself is kept next to the aggregates (``perDevice``) while it fits
:data:`PER_DEVICE_BUDGET` (about 150 nodes x 8 GPUs): the hub's pod views (``gpufed
explain``/``describe``/``top``, the dashboard's pod list) show which devices a pod holds from
it. A larger member's report leaves it out (``perDevice: null``), so the report stays bounded;
its pod views then show no devices. No I/O happens here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from controlplane.apis.untyped import as_mapping
from controlplane.apis.utilization import (
    NodeUtilization,
    encode_utilization,
    encoded_size_at_least,
    node_entries,
)
from controlplane.reports.aggregated import aggregate
from controlplane.reports.nodes import node_sample

#: The largest per-device encoding (JSON bytes) the report carries for the pod views.
PER_DEVICE_BUDGET: Final = 64 * 1024


def utilization_report(nodes: Sequence[NodeUtilization], *, sample_time: str | None) -> dict[str, Any]:
    """``Cluster.status.utilization`` (version 3) for ``nodes`` (in name order)."""
    entries = node_entries(nodes)
    samples = [node_sample(entry) for entry in entries]
    bound = []
    for entry in entries:
        for pod in entry.get("pods") or ():
            owner = as_mapping(as_mapping(pod).get("owner"))
            kind, name = owner.get("kind"), owner.get("name")
            bound.append((str(pod.get("namespace") or ""), str(kind) if kind else None, str(name) if name else None))
    report = aggregate(samples, bound, sample_time=sample_time)
    report["perDevice"] = None
    if encoded_size_at_least(nodes) <= PER_DEVICE_BUDGET:
        per_device = encode_utilization(nodes, sample_time=sample_time)
        if len(json.dumps(per_device, separators=(",", ":"))) <= PER_DEVICE_BUDGET:
            report["perDevice"] = per_device
    return report
