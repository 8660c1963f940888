"""Spot (preemptible) capacity: which node labels mark it and which taints announce a reclaim.

Clouds label spot nodes and taint a node shortly before they take it back; the agent, the
simulator, the scheduler and the reports all read those facts through this one module.

In: a node's labels or taints (plain mappings, as the Kubernetes API returns them); a binding.
Out: whether the node is spot, whether it carries a reclaim notice, the label a simulated
spot node of a given provider gets; the reclaims the scheduler recorded on a binding
(:data:`ANNOTATION_SPOT_RECLAIMS`). Pure; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from controlplane.apis.timestamps import parse_time_or_none

#: On a ResourceBinding: the spot reclaims whose replicas the scheduler replaced (JSON:
#: ``{"count": n, "recent": [{"time", "cluster", "replicas"}], "acted": {cluster: mark}}``).
ANNOTATION_SPOT_RECLAIMS: Final = "scheduler.gpufed.io/spot-reclaims"

#: Labels clouds and node provisioners put on spot nodes, with the value(s) meaning "spot"
#: (compared case-insensitively).
SPOT_LABELS: Final[Mapping[str, frozenset[str]]] = {
    "cloud.google.com/gke-spot": frozenset({"true"}),
    "cloud.google.com/gke-preemptible": frozenset({"true"}),
    "karpenter.sh/capacity-type": frozenset({"spot"}),
    "eks.amazonaws.com/capacityType": frozenset({"spot"}),
    "kubernetes.azure.com/scalesetpriority": frozenset({"spot"}),
    "node.kubernetes.io/lifecycle": frozenset({"spot", "preemptible"}),
}

#: The label a simulated spot node gets, by the cluster's provider (Karpenter's for others).
SPOT_LABEL_BY_PROVIDER: Final[Mapping[str, tuple[str, str]]] = {
    "gcp": ("cloud.google.com/gke-spot", "true"),
    "aws": ("eks.amazonaws.com/capacityType", "SPOT"),
    "azure": ("kubernetes.azure.com/scalesetpriority", "spot"),
}
DEFAULT_SPOT_LABEL: Final = ("karpenter.sh/capacity-type", "spot")

#: Taints set on a node shortly before its reclaim: GKE's graceful node shutdown, the AWS node
#: termination handler's spot interruption notice, Karpenter's disruption taint.
RECLAIM_NOTICE_TAINTS: Final = frozenset(
    {
        "cloud.google.com/impending-node-termination",
        "aws-node-termination-handler/spot-itn",
        "karpenter.sh/disrupted",
    }
)
#: The notice taint the simulator sets.
SIMULATED_NOTICE_TAINT: Final = "cloud.google.com/impending-node-termination"


def is_spot(labels: Mapping[str, Any] | None) -> bool:
    """True when ``labels`` carry one of :data:`SPOT_LABELS` with a spot value."""
    if not labels:
        return False
    for key, values in SPOT_LABELS.items():
        value = labels.get(key)
        if value is not None and str(value).lower() in values:
            return True
    return False


def spot_label(provider: str) -> tuple[str, str]:
    """The (key, value) a spot node of ``provider`` is labelled with."""
    return SPOT_LABEL_BY_PROVIDER.get(provider, DEFAULT_SPOT_LABEL)


def has_reclaim_notice(taints: Iterable[Mapping[str, Any]] | None) -> bool:
    """True when one of ``taints`` announces the node's reclaim."""
    return any(str(taint.get("key") or "") in RECLAIM_NOTICE_TAINTS for taint in taints or ())


@dataclass(frozen=True, slots=True)
class RecordedReclaim:
    """A reclaim of a workload's replicas that the hub replaced."""

    namespace: str
    workload: str
    cluster: str
    time: datetime
    replicas: int


def parse_annotation(raw: str | None) -> dict[str, Any]:
    """The annotation's JSON object; empty when absent or unreadable."""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def recorded_reclaims(binding: Mapping[str, Any]) -> tuple[RecordedReclaim, ...]:
    """The reclaims recorded on ``binding`` (the latest ones the annotation keeps), for its workload
    (``Kind/name`` of ``spec.resource``)."""
    meta = binding.get("metadata") or {}
    data = parse_annotation((meta.get("annotations") or {}).get(ANNOTATION_SPOT_RECLAIMS))
    resource = (binding.get("spec") or {}).get("resource") or {}
    workload = f"{resource.get('kind', '')}/{resource.get('name', '')}"
    out = []
    for entry in data.get("recent") or ():
        if not isinstance(entry, dict):
            continue
        moment = parse_time_or_none(entry.get("time"), naive_as_utc=True)
        if moment is None:
            continue
        replicas = entry.get("replicas")
        out.append(
            RecordedReclaim(
                namespace=str(meta.get("namespace") or ""),
                workload=workload,
                cluster=str(entry.get("cluster") or ""),
                time=moment,
                replicas=replicas if isinstance(replicas, int) else 0,
            )
        )
    return tuple(out)
