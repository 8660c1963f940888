"""The status of every ClusterQueue and LocalQueue, written by the admission cycle.

In: the cycle's ClusterQueues and LocalQueues, the waiting Workloads, who holds quota (and of
them, who is admitted) and what each holds. Out: per queue its pending, reserving and admitted
counts and the condition ``Active``; per ClusterQueue its usage per flavor (and, with
``--kueue-fair-sharing``, its ``fairSharing.weightedShare``); with Kueue's admission fair sharing
(``--kueue-admission-fair-sharing``), per LocalQueue of a usage-based ClusterQueue its
``status.fairSharing.admissionFairSharingStatus`` (:mod:`controlplane.admission.usagehistory`),
folding in the entry penalties of the cycle's admissions.

The LocalQueues the cycle reads are the informer's, with this writer's own status writes over
them until the informer delivers those (a sample must not be taken twice from a stale copy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from controlplane.admission import objects as adm
from controlplane.admission import stopping, usagehistory
from controlplane.admission.core import ClusterQueue, Usage, Waiting
from controlplane.admission.core.admissionfairsharing import LocalQueueUsage, flattened
from controlplane.admission.core.quota import FlavorResource
from controlplane.apis.kueue_views import LocalQueueView
from controlplane.apis.views import ObjectView
from controlplane.controllers.admissiongate import Kinds
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.informing import AssumedWrites
from controlplane.controllers.workloads import with_condition
from controlplane.objectclient import ResourceType

LocalQueueKey = tuple[str, str]


class QueueStatuses:
    """Writes the queues' status for the admission controller, and keeps the entry penalties of
    admission fair sharing until they are sampled into their LocalQueue's status."""

    def __init__(self, ctx: ControllerContext, kinds: Kinds) -> None:
        self.ctx = ctx
        self.kinds = kinds
        self.penalties: dict[str, dict[str, float]] = {}
        """Per LocalQueue (namespace/name), the entry penalties of admissions not yet sampled."""
        self._assumed = AssumedWrites()

    def local_queues(self) -> dict[LocalQueueKey, dict[str, Any]]:
        current = {
            (str(o["metadata"].get("namespace")), str(o["metadata"]["name"])): o
            for o in self.kinds.items(self.kinds.local_queue)
        }
        return self._assumed.overlay(current)

    def fair_usage(
        self, cq_objs: Mapping[str, Mapping[str, Any]], lqs: Mapping[LocalQueueKey, Mapping[str, Any]]
    ) -> LocalQueueUsage | None:
        """The LocalQueue usage the cycle orders by (None: admission fair sharing is off)."""
        settings = self.ctx.settings.kueue_admission_fair_sharing
        if settings is None:
            return None
        return usagehistory.local_queue_usage(settings, cq_objs, lqs.values(), self.penalties)

    async def write(
        self,
        queues: Mapping[str, ClusterQueue],
        cq_objs: Mapping[str, dict[str, Any]],
        lqs: Mapping[LocalQueueKey, dict[str, Any]],
        workloads: Mapping[str, dict[str, Any]],
        waiting: tuple[Waiting, ...],
        holders: Mapping[str, str],
        admitted: set[str],
        usage: Usage,
        active: Mapping[str, Mapping[str, Any]],
        holdings: Mapping[str, Mapping[FlavorResource, int]],
    ) -> float | None:
        """Counts, usage and the ``Active`` condition of every ClusterQueue and LocalQueue.
        ``holders``: Workload key → the ClusterQueue whose quota it holds (``admitted``: those
        of them admitted; ``holdings``: what each holds); ``active``: each ClusterQueue's
        ``Active`` condition. Returns the seconds until a LocalQueue's next usage sample (None:
        none is kept)."""
        now = self.ctx.now_text()
        cq_counts: dict[str, list[int]] = {}
        lq_counts: dict[LocalQueueKey, list[int]] = {}

        def lq_of(key: str) -> LocalQueueKey:
            return adm.local_queue_of(workloads[key])

        for w in waiting:
            cq_counts.setdefault(w.queue, [0, 0, 0])[0] += 1
            lq_counts.setdefault(lq_of(w.key), [0, 0, 0])[0] += 1
        held: dict[LocalQueueKey, dict[str, float]] = {}
        # Per LocalQueue and flavor and resource: what its workloads reserve, and what the admitted hold.
        reserved: dict[LocalQueueKey, dict[FlavorResource, int]] = {}
        in_use: dict[LocalQueueKey, dict[FlavorResource, int]] = {}
        cq_in_use: dict[str, dict[FlavorResource, int]] = {}  # Kueue's AdmittedUsage of the ClusterQueue
        for key, queue in holders.items():
            for counts in (
                cq_counts.setdefault(queue, [0, 0, 0]),
                lq_counts.setdefault(lq_of(key), [0, 0, 0]),
            ):
                counts[1] += 1
                counts[2] += key in admitted
            for totals in (reserved, in_use) if key in admitted else (reserved,):
                mine_by_flavor = totals.setdefault(lq_of(key), {})
                for fr, taken in holdings.get(key, {}).items():
                    mine_by_flavor[fr] = mine_by_flavor.get(fr, 0) + taken
            if key in admitted:  # Kueue's admitted usage of the LocalQueue
                admitted_usage = cq_in_use.setdefault(queue, {})
                for fr, taken in holdings.get(key, {}).items():
                    admitted_usage[fr] = admitted_usage.get(fr, 0) + taken
                mine = held.setdefault(lq_of(key), {})
                for resource, amount in flattened(holdings.get(key, {})).items():
                    mine[resource] = mine.get(resource, 0.0) + amount
        for name, obj in cq_objs.items():
            pending, holding, admitted_count = cq_counts.get(name, [0, 0, 0])
            cluster_queue = queues[name]
            view = ObjectView(obj)
            status = {
                **{k: v for k, v in view.status.items() if k != "fairSharing"},
                "pendingWorkloads": pending,
                "reservingWorkloads": holding,
                "admittedWorkloads": admitted_count,
                "flavorsReservation": adm.flavors_usage(cluster_queue, functools.partial(usage.of, name)),
                "flavorsUsage": adm.flavors_usage(cluster_queue, _amounts(cq_in_use.get(name, {}))),
                "conditions": with_condition(view.conditions, active[name], now=now),
            }
            if self.ctx.settings.kueue_fair_sharing:
                status["fairSharing"] = {"weightedShare": usage.queue_share(name)}
            await self.write_status(self.kinds.cluster_queue, obj, status)
        settings = self.ctx.settings.kueue_admission_fair_sharing
        next_sample: float | None = None
        for lq_key, obj in lqs.items():
            pending, holding, admitted_count = lq_counts.get(lq_key, [0, 0, 0])
            lq = LocalQueueView(obj)
            cq_name = lq.cluster_queue
            lq_active = stopping.local_queue_active(obj, active.get(cq_name))
            status = {
                **lq.status,
                "pendingWorkloads": pending,
                "reservingWorkloads": holding,
                "admittedWorkloads": admitted_count,
                "conditions": with_condition(lq.conditions, lq_active, now=now),
            }
            if (cq := queues.get(cq_name)) is not None:
                status["flavorsReservation"] = adm.local_queue_flavors(cq, reserved.get(lq_key, {}))
                status["flavorUsage"] = adm.local_queue_flavors(cq, in_use.get(lq_key, {}))
            else:  # Kueue's cache has no usage for a LocalQueue without its ClusterQueue
                status.pop("flavorsReservation", None)
                status.pop("flavorUsage", None)
            fair_key = usagehistory.key_of(obj)
            sample = None
            # As Kueue: a stopped LocalQueue, or one whose ClusterQueue is inactive, is not sampled.
            if (
                settings is not None
                and usagehistory.usage_based(cq_objs.get(cq_name))
                and lq_active.get("status") == "True"
            ):
                sample = usagehistory.sampled(
                    obj, held.get(lq_key, {}), self.penalties.get(fair_key), self.ctx.now(), settings
                )
                soon = (
                    settings.usage_sampling_interval_seconds
                    if sample is not None
                    else (usagehistory.next_sample_in(obj, self.ctx.now(), settings))
                )
                next_sample = soon if next_sample is None else min(next_sample, soon)
            if sample is not None:
                status["fairSharing"] = sample
            await self.write_status(self.kinds.local_queue, obj, status)
            if sample is not None:
                self.penalties.pop(fair_key, None)  # sampled into its consumed resources
        for gone in set(self.penalties) - {usagehistory.key_of(o) for o in lqs.values()}:
            del self.penalties[gone]
        return next_sample

    async def write_status(
        self, rt: ResourceType | None, obj: dict[str, Any], status: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The object with ``status``, written when it changed (None: unchanged or not served)."""
        if rt is None or obj.get("status") == status:
            return None
        # A Conflict (a stale cached copy) goes up: the cycle runs again a moment later.
        written = await self.ctx.objects.update_status(rt, {**obj, "status": status})
        if rt is self.kinds.local_queue:
            meta = written.get("metadata") or {}
            self._assumed.assume((str(meta.get("namespace")), str(meta.get("name"))), written)
        return written


def _amounts(amounts: Mapping[FlavorResource, int]) -> Callable[[FlavorResource], int]:
    """What ``amounts`` holds of a flavor and resource (0: none)."""
    return lambda fr: amounts.get(fr, 0)
