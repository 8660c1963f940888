"""Spot reclaims as the agent sees them: which workloads lost replicas when a spot node went.

A node is spot when it carries a label clouds put on spot nodes, and marked for reclaim when it
carries a reclaim notice taint (:mod:`controlplane.apis.spot`). When such a node disappears, the
pods the agent's cache still holds bound to it are lost replicas: they are counted per hub
workload (the pod's owner as the hub knows it, :func:`member_agent.capacity.owner_workload`)
and shown, for ``window`` seconds, in the workload's Work status as
``manifestStatuses[].reclaimed`` = ``{pods, nodes, time}`` (``time`` is the latest reclaim's
report time, so the hub acts once per reclaim).

In: node and pod objects as the agent's informers cache them, the report time.
Out: the workloads a reclaim touched, and the ``reclaimed`` entry to add to a manifest's status.
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controlplane.apis import spot
from member_agent.capacity import owner_workload, pod_is_active

#: (namespace, kind, name) of a hub workload, as the agent's Work index keys it.
WorkloadRef = tuple[str, str, str]
#: How long a reclaim stays in the Work status (the hub acts on it once, by its time).
DEFAULT_WINDOW_SECONDS = 600.0


@dataclass
class Lost:
    pods: int
    nodes: set[str]
    time: datetime


@dataclass
class ReclaimLog:
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    #: Spot or noticed nodes now present: name -> noticed.
    _tracked: dict[str, bool] = field(default_factory=dict)
    _lost: dict[WorkloadRef, Lost] = field(default_factory=dict)
    #: Reclaims seen since the agent started (nodes).
    reclaimed_nodes: int = 0

    def node_changed(
        self, name: str, node: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]], *, now: datetime
    ) -> tuple[bool, set[WorkloadRef]]:
        """Record what ``node`` (None: deleted) now is. Returns whether this is news to report at
        once (a fresh reclaim notice, or a spot node gone) and the workloads that lost pods."""
        if node is not None:
            labels = (node.get("metadata") or {}).get("labels") or {}
            noticed = spot.has_reclaim_notice((node.get("spec") or {}).get("taints"))
            was = self._tracked.get(name)
            if spot.is_spot(labels) or noticed:
                self._tracked[name] = noticed
            else:
                self._tracked.pop(name, None)
            return (noticed and not was), set()
        if self._tracked.pop(name, None) is None:
            return False, set()
        self.reclaimed_nodes += 1
        touched: set[WorkloadRef] = set()
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") != name or not pod_is_active(pod):
                continue
            owner = owner_workload(pod)
            meta = pod.get("metadata") or {}
            namespace = str(meta.get("namespace") or "default")
            ref = (namespace, owner["kind"], owner["name"]) if owner else (namespace, "Pod", str(meta.get("name")))
            lost = self._lost.get(ref)
            if lost is None or (now - lost.time).total_seconds() > self.window_seconds:
                lost = self._lost[ref] = Lost(pods=0, nodes=set(), time=now)
            lost.pods += 1
            lost.nodes.add(name)
            lost.time = now
            touched.add(ref)
        return True, touched

    def entry(self, ref: WorkloadRef, *, now: datetime) -> dict[str, Any] | None:
        """The ``reclaimed`` entry of the workload's manifest status, or None."""
        lost = self._lost.get(ref)
        if lost is None:
            return None
        if (now - lost.time).total_seconds() > self.window_seconds:
            del self._lost[ref]
            return None
        return {"pods": lost.pods, "nodes": sorted(lost.nodes), "time": _rfc3339(lost.time)}

    def annotate(self, status: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
        """``status`` (a Work status) with each manifest's ``reclaimed`` entry set or cleared."""
        if not self._lost and not any("reclaimed" in m for m in status.get("manifestStatuses") or []):
            return dict(status)
        manifests = []
        for manifest in status.get("manifestStatuses") or []:
            ident = manifest.get("identifier") or {}
            ref = (str(ident.get("namespace") or "default"), str(ident.get("kind")), str(ident.get("name")))
            entry = self.entry(ref, now=now)
            updated = {k: v for k, v in manifest.items() if k != "reclaimed"}
            if entry is not None:
                updated["reclaimed"] = entry
            manifests.append(updated)
        return {**status, "manifestStatuses": manifests}


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
