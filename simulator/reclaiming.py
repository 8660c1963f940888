"""Spot reclaims in a simulated member: nodes taken back the way a cloud takes them.

A reclaim picks spot nodes (labelled as :mod:`controlplane.apis.spot` knows; of one node group
when ``pool`` is given; busiest first, so a demo reclaim hits running work), optionally
taints them with the reclaim notice clouds set (``cloud.google.com/impending-node-termination``,
NoSchedule) for ``notice`` seconds, then deletes the Node objects and the pods bound to them,
as the cloud controller manager and the pod garbage collector do when the VM is gone.
The workload controllers then recreate the pods, which wait for room like any other.

A periodic reclaim (the fleet file's ``reclaim``) brings the nodes it took back one period
later, as a cloud's node pool replaces reclaimed VMs.

In: the member's ``ObjectClient``, its :class:`~simulator.profile.ClusterProfile` and clock.
Out: :meth:`Reclaimer.reclaim` (the nodes chosen, the pods deleted), :meth:`Reclaimer.run_schedule`,
and :meth:`Reclaimer.routes` (``POST /debug/gpufed/reclaim``, which ``gpufed sim-cluster
reclaim`` calls with the member's kubeconfig).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from controlplane.apis import spot
from controlplane.objectclient import ObjectClient, errors
from simulator.nodes import LABEL_NODE_GROUP
from simulator.profile import ClusterProfile

log = logging.getLogger(__name__)

RECLAIM_PATH: Final = "/debug/gpufed/reclaim"
#: At most this many nodes per request (a bounded input).
MAX_NODES: Final = 1000


class ReclaimError(ValueError):
    """A reclaim that cannot be done as asked; the message says why."""


@dataclass(frozen=True)
class ReclaimRequest:
    nodes: int
    notice: float = 0.0
    pool: str | None = None

    @classmethod
    def from_json(cls, body: Any) -> ReclaimRequest:
        if not isinstance(body, dict):
            raise ReclaimError("the body must be a JSON object {nodes, notice?, pool?}")
        nodes, notice, pool = body.get("nodes"), body.get("notice", 0), body.get("pool")
        if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= MAX_NODES:
            raise ReclaimError(f"nodes must be a whole number from 1 to {MAX_NODES}")
        if not isinstance(notice, int | float) or isinstance(notice, bool) or not 0 <= notice <= 3600:
            raise ReclaimError("notice must be a number of seconds from 0 to 3600")
        if pool is not None and not isinstance(pool, str):
            raise ReclaimError("pool must be a node group name")
        return cls(nodes=nodes, notice=float(notice), pool=pool)


@dataclass
class ReclaimResult:
    nodes: list[str]
    pods: int = 0
    notice: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "pods": self.pods, "notice": self.notice}


def choose_nodes(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, count: int, pool: str | None, busy: set[str]
) -> list[str]:
    """The spot nodes to reclaim: of ``pool`` when given, not already being reclaimed, the ones
    running the most pods first (then by name)."""
    running = Counter(str((pod.get("spec") or {}).get("nodeName") or "") for pod in pods)
    candidates = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = str(meta.get("name") or "")
        if not spot.is_spot(labels) or name in busy:
            continue
        if pool is not None and labels.get(LABEL_NODE_GROUP) != pool:
            continue
        candidates.append(name)
    candidates.sort(key=lambda name: (-running[name], name))
    return candidates[:count]


@dataclass
class Reclaimer:
    """Reclaims spot nodes of one simulated member; see the module docstring."""

    profile: ClusterProfile
    objects: ObjectClient
    #: Node manifests as first created (a periodic reclaim brings them back).
    manifests: dict[str, dict[str, Any]]
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _busy: set[str] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    reclaimed: int = 0

    def __post_init__(self) -> None:
        self._node_rt = self.objects.registry.require("v1", "Node")
        self._pod_rt = self.objects.registry.require("v1", "Pod")

    async def reclaim(self, request: ReclaimRequest) -> ReclaimResult:
        """Choose the nodes; with a notice, taint them and finish in the background."""
        spot_groups = [g.name for g in self.profile.nodeGroups if self.profile.group_is_spot(g)]
        if request.pool is not None and request.pool not in spot_groups:
            raise ReclaimError(
                f"cluster {self.profile.name} has no spot node group {request.pool!r}"
                f" (spot groups: {', '.join(spot_groups) or 'none'})"
            )
        nodes = (await self.objects.list(self._node_rt)).items
        pods = (await self.objects.list(self._pod_rt)).items
        chosen = choose_nodes(nodes, pods, count=request.nodes, pool=request.pool, busy=self._busy)
        if not chosen:
            raise ReclaimError(f"cluster {self.profile.name} has no spot node left to reclaim")
        self._busy.update(chosen)
        result = ReclaimResult(nodes=chosen, notice=request.notice)
        if request.notice <= 0:
            result.pods = await self._take(chosen)
            return result
        for name in chosen:
            await self._taint(name)
        task = asyncio.create_task(self._after_notice(chosen, request.notice), name="spot-reclaim")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return result

    async def _after_notice(self, names: list[str], notice: float) -> None:
        await self.sleep(notice)
        await self._take(names)

    async def _taint(self, name: str) -> None:
        for _ in range(5):
            try:
                node = await self.objects.get(self._node_rt, name=name)
                taints = list((node.get("spec") or {}).get("taints") or [])
                if spot.has_reclaim_notice(taints):
                    return
                taints.append({"key": spot.SIMULATED_NOTICE_TAINT, "value": "true", "effect": "NoSchedule"})
                node.setdefault("spec", {})["taints"] = taints
                await self.objects.update(self._node_rt, node)
                return
            except errors.Conflict:
                continue
            except errors.NotFound:
                return

    async def _take(self, names: list[str]) -> int:
        """Delete the nodes, then the pods bound to them; the number of pods deleted."""
        for name in names:
            with contextlib.suppress(errors.NotFound):
                await self.objects.delete(self._node_rt, name=name)
        gone = set(names)
        deleted = 0
        for pod in (await self.objects.list(self._pod_rt)).items:
            if (pod.get("spec") or {}).get("nodeName") not in gone:
                continue
            meta = pod["metadata"]
            with contextlib.suppress(errors.NotFound):
                await self.objects.delete(self._pod_rt, namespace=meta.get("namespace"), name=meta["name"])
                deleted += 1
        self.reclaimed += len(names)
        self._busy.difference_update(names)
        log.info("reclaimed spot node(s) %s of %s with %d pod(s)", ", ".join(names), self.profile.name, deleted)
        return deleted

    async def restore(self, names: list[str]) -> None:
        """Bring reclaimed nodes back (a node pool replacing its VMs)."""
        for name in names:
            manifest = self.manifests.get(name)
            if manifest is None:
                continue
            with contextlib.suppress(errors.AlreadyExists):
                created = await self.objects.create(self._node_rt, copy.deepcopy(manifest))
                created["status"] = copy.deepcopy(manifest["status"])
                await self.objects.update_status(self._node_rt, created)

    async def run_schedule(self) -> None:
        """The fleet file's periodic reclaim, until cancelled."""
        schedule = self.profile.reclaim
        if schedule is None:
            return
        request = ReclaimRequest(nodes=schedule.nodes, notice=schedule.noticeSeconds, pool=schedule.pool)
        while True:
            await self.sleep(schedule.everySeconds)
            try:
                result = await self.reclaim(request)
            except ReclaimError as exc:
                log.info("periodic reclaim skipped: %s", exc)
                continue
            await self.sleep(schedule.everySeconds + result.notice)
            await self.restore(result.nodes)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def routes(self) -> list[web.RouteDef]:
        return [web.post(RECLAIM_PATH, self._serve)]

    async def _serve(self, request: web.Request) -> web.Response:
        try:
            body = await request.json() if request.can_read_body else {}
            result = await self.reclaim(ReclaimRequest.from_json(body))
        except ValueError as exc:  # ReclaimError, and JSON that does not parse
            return web.json_response(_status(400, "BadRequest", str(exc)), status=400)
        return web.json_response(result.as_dict(), status=202 if result.notice else 200)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}
