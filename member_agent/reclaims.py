"""Spot reclaims as the agent sees them: which workloads lost replicas when a spot node went.

A node is spot when it carries a label clouds put on spot nodes, and marked for reclaim when it
carries a reclaim notice taint (:mod:`controlplane.apis.spot`). When such a node disappears, the
pods bound to it are lost replicas — those the agent's cache still holds, and those deleted
within a minute before or after the node (the node and pod watches are separate streams, so
either deletion may arrive first; each pod counts once): they are counted per hub
workload (the pod's owner as the hub knows it, :func:`member_agent.capacity.owner_workload`)
and shown, for ``window`` seconds, in the workload's Work status as
``manifestStatuses[].reclaimed`` = ``{pods, nodes, time}`` (``time`` is the latest reclaim's
report time, so the hub acts once per reclaim).

In: node and pod objects as the agent's informers cache them, the report time.
Out: the workloads a reclaim touched, and the ``reclaimed`` entry to add to a manifest's status.
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controlplane.apis import spot
from controlplane.apis.timestamps import format_time
from member_agent.capacity import owner_workload, pod_is_active

#: (namespace, kind, name) of a hub workload, as the agent's Work index keys it.
WorkloadRef = tuple[str, str, str]
#: How long a reclaim stays in the Work status (the hub acts on it once, by its time).
DEFAULT_WINDOW_SECONDS = 600.0
PAIRING_SECONDS = 60.0


@dataclass
class Lost:
    pods: int
    nodes: set[str]
    time: datetime


@dataclass
class ReclaimLog:
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    #: How far apart a pod's deletion and its node's may be seen (the two watches are separate
    #: streams: either event may come first).
    pairing_seconds: float = PAIRING_SECONDS
    #: Spot or noticed nodes now present: name -> noticed.
    _tracked: dict[str, bool] = field(default_factory=dict)
    #: Active pods bound to a node, by pod key: (node, workload).
    _where: dict[str, tuple[str, WorkloadRef]] = field(default_factory=dict)
    #: Pods deleted lately, by key: (node, workload, when).
    _departed: dict[str, tuple[str, WorkloadRef, datetime]] = field(default_factory=dict)
    #: Spot nodes reclaimed lately: name -> when.
    _reclaimed: dict[str, datetime] = field(default_factory=dict)
    _counted: set[str] = field(default_factory=set)
    _lost: dict[WorkloadRef, Lost] = field(default_factory=dict)
    #: Reclaims seen since the agent started (nodes).
    reclaimed_nodes: int = 0

    def node_changed(
        self, name: str, node: Mapping[str, Any] | None, *, now: datetime
    ) -> tuple[bool, set[WorkloadRef]]:
        """Record what ``node`` (None: deleted) now is. Returns whether this is news to report at
        once (a fresh reclaim notice, or a spot node gone) and the workloads that lost pods."""
        self._expire(now)
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
        self._reclaimed[name] = now
        touched: set[WorkloadRef] = set()
        for key, (where, ref) in list(self._where.items()):
            if where == name:
                touched |= self._count(key, where, ref, now=now)
        for key, (where, ref, _) in list(self._departed.items()):
            if where == name:
                touched |= self._count(key, where, ref, now=now)
        return True, touched

    def pod_changed(self, key: str, pod: Mapping[str, Any] | None, *, now: datetime) -> set[WorkloadRef]:
        """Record where a pod runs (None: deleted); the workloads whose pod just went with a
        node reclaimed a moment ago."""
        if pod is not None:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node and pod_is_active(pod):
                self._where[key] = (node, workload_of(pod))
            else:
                self._where.pop(key, None)
            return set()
        known = self._where.pop(key, None)
        if known is None:
            return set()
        node, ref = known
        if node in self._reclaimed:
            return self._count(key, node, ref, now=now)
        self._departed[key] = (node, ref, now)
        return set()

    def _count(self, key: str, node: str, ref: WorkloadRef, *, now: datetime) -> set[WorkloadRef]:
        if key in self._counted:
            return set()
        self._counted.add(key)
        lost = self._lost.get(ref)
        if lost is None or (now - lost.time).total_seconds() > self.window_seconds:
            lost = self._lost[ref] = Lost(pods=0, nodes=set(), time=now)
        lost.pods += 1
        lost.nodes.add(node)
        lost.time = now
        return {ref}

    def _expire(self, now: datetime) -> None:
        horizon = self.pairing_seconds
        self._departed = {k: v for k, v in self._departed.items() if (now - v[2]).total_seconds() <= horizon}
        self._reclaimed = {k: t for k, t in self._reclaimed.items() if (now - t).total_seconds() <= horizon}
        if not self._departed and not self._reclaimed:
            self._counted.clear()

    def entry(self, ref: WorkloadRef, *, now: datetime) -> dict[str, Any] | None:
        """The ``reclaimed`` entry of the workload's manifest status, or None."""
        lost = self._lost.get(ref)
        if lost is None:
            return None
        if (now - lost.time).total_seconds() > self.window_seconds:
            del self._lost[ref]
            return None
        return {"pods": lost.pods, "nodes": sorted(lost.nodes), "time": format_time(lost.time)}

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


def workload_of(pod: Mapping[str, Any]) -> WorkloadRef:
    owner = owner_workload(pod)
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    return (namespace, owner["kind"], owner["name"]) if owner else (namespace, "Pod", str(meta.get("name")))


