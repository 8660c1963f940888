"""Which Kueue ClusterQueue each hub workload's GPU time belongs to (``gpufed waste --by clusterqueue``).

Why this module exists: a team's quota is a ClusterQueue, so its idle GPU-hours and their cost
are the GPU time of the workloads that queue admitted. In: the hub's Kueue Workloads (each owned
by the workload it queues, named in its controller ownerReference; a Kueue pod group's by each of
its Pods) and LocalQueues. Out: a map from (namespace, ``Kind/name``) — the report's workload key — to the ClusterQueue: the one in the
Workload's ``status.admission`` (kept once it finished, as Kueue keeps it), else, for a workload
not admitted (evicted and waiting again, or never admitted yet), the ClusterQueue its LocalQueue
points at (a workload never admitted has no GPU time to attribute). Workloads with no Workload
are not in the map (the report groups them under ``-``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.admission.objects import controller_owner
from controlplane.admission.podgroups import is_group_workload


def cluster_queues_of(
    workloads: Iterable[Mapping[str, Any]], local_queues: Iterable[Mapping[str, Any]]
) -> dict[tuple[str, str], str]:
    """(namespace, ``Kind/name``) of each queued hub workload → its ClusterQueue."""
    pointing = {
        (str((lq.get("metadata") or {}).get("namespace")), str((lq.get("metadata") or {}).get("name"))):
            str((lq.get("spec") or {}).get("clusterQueue") or "")
        for lq in local_queues
    }
    out: dict[tuple[str, str], str] = {}
    for wl in workloads:
        owner = controller_owner(wl)
        if owner is not None:
            owned = [f"{owner[1]}/{owner[2]}"]
        elif is_group_workload(wl):  # a Kueue pod group's: each of its Pods
            owned = [f"Pod/{r.get('name')}" for r in (wl.get("metadata") or {}).get("ownerReferences") or () if r.get("kind") == "Pod"]
        else:
            continue
        namespace = str((wl.get("metadata") or {}).get("namespace") or "")
        admission = (wl.get("status") or {}).get("admission") or {}
        queue = admission.get("clusterQueue") if isinstance(admission, Mapping) else None
        queue = queue or pointing.get((namespace, str((wl.get("spec") or {}).get("queueName") or "")))
        if queue:
            out.update({(namespace, name): str(queue) for name in owned})
    return out


__all__ = ["cluster_queues_of"]
