"""Replacing replicas that spot reclaims took: when they are due, where they go, what is recorded.

An agent shows the pods a workload lost with reclaimed spot nodes in its Work status
(``manifestStatuses[].reclaimed`` = ``{pods, nodes, time}``, see :mod:`member_agent.reclaims`).
Those replicas are due to move at once — no confirming report, no grace period: the capacity is
gone — and they move like the replicas a member cannot place
(:func:`~controlplane.scheduler.core.rescheduling.decide_with_moves`: the cluster keeps the rest
and takes no new ones in that decision). Once a binding's replicas were reclaimed
``preferNonSpotAfter`` times within ``windowSeconds`` (the policy's ``spotReclaims``, default 2 per
hour), the replacements go to non-spot clusters when those have room, to any cluster otherwise.
A cluster is spot when every node its agent reports is spot (``status.nodeSummary.spot``).

What was acted on, and the binding's reclaim history (the count, and the latest reclaims with
their cluster and replicas), live in the binding's annotation :data:`ANNOTATION_SPOT_RECLAIMS`, so
a new leader neither acts twice on one reclaim nor forgets the history; the waste report counts
the reclaims survived from it. Each replacement is a ``SpotReclaimed`` Event on the workload.

In: the binding's Works (informer), the Clusters' reports, the binding and its policy.
Out: the clusters due to move with their replicas and reasons; the candidate clusters in order of
preference; the annotation and the Event once a decision moved them.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from controlplane.apis.events import EventType
from controlplane.apis.spot import ANNOTATION_SPOT_RECLAIMS, parse_annotation
from controlplane.apis.timestamps import parse_time_or_none
from controlplane.apis.work_v1alpha1 import BindingKey
from controlplane.controllers.context import INDEX_BINDING, ControllerContext
from controlplane.controllers.events import EventReason, record_event
from controlplane.controllers.works import cluster_of_namespace
from controlplane.objectclient import errors
from controlplane.scheduler.controller.reading import key_text, workload_of
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import DEFAULT_SPOT_RECLAIMS, PropagationSpec
from policies.models import SpotReclaims as SpotReclaimSettings

log = logging.getLogger(__name__)

#: The latest reclaims a binding keeps in its annotation (bounded).
HISTORY_LIMIT: Final = 20


@dataclass(frozen=True)
class Reclaimed:
    """One cluster's reclaim as a Work reports it."""

    pods: int
    nodes: tuple[str, ...]
    time: str

    @property
    def mark(self) -> str:
        return f"{self.time}/{self.pods}"


@dataclass
class History:
    """The binding's annotation: reclaims survived, the latest ones, and what was acted on."""

    count: int = 0
    recent: list[dict[str, Any]] = field(default_factory=list)
    acted: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, binding: Mapping[str, Any]) -> History:
        data = parse_annotation(((binding.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SPOT_RECLAIMS))
        recent = [r for r in data.get("recent") or [] if isinstance(r, dict)]
        acted = {str(k): str(v) for k, v in (data.get("acted") or {}).items()} if isinstance(data.get("acted"), dict) else {}
        count = data.get("count")
        return cls(count=count if isinstance(count, int) else 0, recent=recent, acted=acted)

    def encode(self) -> str:
        return json.dumps(
            {"count": self.count, "recent": self.recent[-HISTORY_LIMIT:], "acted": self.acted},
            sort_keys=True, separators=(",", ":"),
        )

    def within(self, window: timedelta, *, now: datetime) -> int:
        """Reclaims recorded since ``now - window``."""
        return sum(1 for r in self.recent if (_parse(r.get("time")) or datetime.min.replace(tzinfo=now.tzinfo)) >= now - window)


def _parse(text: Any) -> datetime | None:
    return parse_time_or_none(text, naive_as_utc=True)


def reclaimed_of(work: Mapping[str, Any]) -> Reclaimed | None:
    """The largest ``reclaimed`` entry of a Work's manifests (a Work holds one workload)."""
    best: Reclaimed | None = None
    for manifest in (work.get("status") or {}).get("manifestStatuses") or []:
        entry = manifest.get("reclaimed") or {}
        pods = entry.get("pods")
        if not isinstance(pods, int) or pods <= 0:
            continue
        found = Reclaimed(pods, tuple(str(n) for n in entry.get("nodes") or ()), str(entry.get("time") or ""))
        if best is None or found.pods > best.pods:
            best = found
    return best


def new_pods(reclaimed: Reclaimed, acted_mark: str | None) -> int:
    """Replicas of ``reclaimed`` not acted on yet: its count grows within the agent's window and
    starts afresh after it."""
    if acted_mark is None:
        return reclaimed.pods
    time, _, pods_text = acted_mark.rpartition("/")
    acted_pods = int(pods_text) if pods_text.isdigit() else 0
    if time == reclaimed.time and acted_pods >= reclaimed.pods:
        return 0
    if reclaimed.pods > acted_pods:
        return reclaimed.pods - acted_pods
    return reclaimed.pods if time != reclaimed.time and reclaimed.time > time else 0


def is_spot_cluster(cluster: Mapping[str, Any] | None) -> bool:
    summary = ((cluster or {}).get("status") or {}).get("nodeSummary") or {}
    total, spot = summary.get("total"), summary.get("spot")
    return isinstance(total, int) and isinstance(spot, int) and total > 0 and spot >= total


def settings_of(policy: PropagationSpec | None) -> SpotReclaimSettings:
    return (policy.spot_reclaims if policy is not None else None) or DEFAULT_SPOT_RECLAIMS


class ReclaimReplacements:
    """Per binding: the reclaimed replicas due to move, and their record once moved."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        # Per binding, what the latest due() found (cluster -> reclaim), for acted().
        self._pending: dict[BindingKey, dict[str, Reclaimed]] = {}

    def due(self, key: BindingKey, binding: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, str]]:
        """Clusters where spot reclaims took replicas not replaced yet, and why they move."""
        history = History.of(binding)
        moves: dict[str, int] = {}
        reasons: dict[str, str] = {}
        found: dict[str, Reclaimed] = {}
        for work in self.ctx.works.by_index(INDEX_BINDING, key):
            cluster = cluster_of_namespace(str((work.get("metadata") or {}).get("namespace") or ""))
            reclaimed = reclaimed_of(work)
            if cluster is None or reclaimed is None:
                continue
            pods = new_pods(reclaimed, history.acted.get(cluster))
            if not pods:
                continue
            found[cluster] = reclaimed
            moves[cluster] = pods
            reasons[cluster] = (
                f"spot node(s) {', '.join(reclaimed.nodes) or '?'} reclaimed with {pods} replica(s): replaced elsewhere"
            )
        if found:
            self._pending[key] = found
        else:
            self._pending.pop(key, None)
        return moves, reasons

    def nodes(self, key: BindingKey) -> dict[str, tuple[str, ...]]:
        """Per cluster where the latest :meth:`due` found reclaimed replicas of ``key``, the nodes."""
        return {cluster: reclaimed.nodes for cluster, reclaimed in (self._pending.get(key) or {}).items()}

    def candidate_sets(
        self, binding: Mapping[str, Any], policy: PropagationSpec | None, ordered: Sequence[ClusterSnapshot],
        *, previous: Mapping[str, int], reclaimed: bool,
    ) -> Iterator[tuple[Sequence[ClusterSnapshot], bool]]:
        """The clusters to try, in order, with whether that set is non-spot only: after
        ``preferNonSpotAfter`` reclaims in the window (this one included), non-spot clusters (and
        those the binding runs in) first, then all."""
        if reclaimed:
            settings = settings_of(policy)
            window = timedelta(seconds=settings.window_seconds)
            if History.of(binding).within(window, now=self.ctx.now()) + 1 >= settings.prefer_non_spot_after:
                non_spot = [
                    s for s in ordered
                    if s.name in previous or not is_spot_cluster(self.ctx.clusters.get(None, s.name))
                ]
                if len(non_spot) < len(ordered):
                    yield non_spot, True
        yield ordered, False

    async def acted(
        self, key: BindingKey, binding: Mapping[str, Any], moved: Mapping[str, int], *, placed: str, non_spot: bool
    ) -> None:
        """Record the replaced reclaims on the binding and as an Event on the workload."""
        found = {c: r for c, r in (self._pending.pop(key, None) or {}).items() if moved.get(c)}
        if not found:
            return
        now = self.ctx.now_text()
        for _ in range(5):
            current = await self.ctx.get(self.ctx.binding_rt, key[0], key[1])
            if current is None:
                return
            history = History.of(current)
            for cluster, reclaimed in sorted(found.items()):
                history.count += 1
                history.recent.append({"time": now, "cluster": cluster, "replicas": moved[cluster]})
                history.acted[cluster] = reclaimed.mark
            history.recent = history.recent[-HISTORY_LIMIT:]
            written = copy.deepcopy(current)
            written["metadata"].setdefault("annotations", {})[ANNOTATION_SPOT_RECLAIMS] = history.encode()
            try:
                await self.ctx.objects.update(self.ctx.binding_rt, written)
                break
            except errors.Conflict:
                continue
            except errors.NotFound:
                return
        workload = workload_of(self.ctx, dict(binding))
        for cluster, reclaimed in sorted(found.items()):
            message = (
                f"spot node(s) {', '.join(reclaimed.nodes)} of cluster {cluster} reclaimed: {moved[cluster]} replica(s) "
                f"replaced, now {placed} (reclaim {history.count} of this workload"
                f"{'; preferring non-spot capacity' if non_spot else ''})"
            )
            log.info("binding %s: %s", key_text(key), message, extra={"cluster": cluster})
            if workload is not None:
                await record_event(self.ctx, workload, type=EventType.WARNING, reason=EventReason.SPOT_RECLAIMED,
                                   message=message)

    def forget(self, key: BindingKey) -> None:
        self._pending.pop(key, None)
