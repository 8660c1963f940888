"""The simulated member's ttl-after-finished controller: finished Jobs deleted once their TTL passes.

A real member runs kube-controller-manager's ``ttlafterfinished`` controller: a Job whose
``Complete`` or ``Failed`` condition is True and that has ``spec.ttlSecondsAfterFinished`` is
deleted that many seconds after the condition's ``lastTransitionTime``
(:func:`~controlplane.interpreter.job.ttl_expiry`); its pods go with it. A simulated member must
behave the same, or a federation that leaves the TTL in a member's copy looks right here and
re-runs the Job in a real cluster.

In: the member's ``ObjectClient``, its Job informer and its (simulated) clock. Out:
:meth:`FinishedJobsCleaner.run`, a loop that sleeps until the earliest TTL runs out, then reads
the Job afresh (its TTL may have changed since the cache saw it) and deletes it with a uid
precondition, as kube does. The member's garbage collector then deletes its pods (the object
layer keeps no foreground-deletion finalizer; the pods go right after the Job instead of before).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from controlplane.controllers.informing import Informer
from controlplane.interpreter.job import ttl_expiry
from controlplane.objectclient import ObjectClient, Preconditions, WatchEventType, errors
from simulator.clock import Clock
from simulator.controllers.base import is_terminating
from simulator.informers import as_handler, object_key

logger = logging.getLogger(__name__)


def _due(job: dict[str, Any]) -> float | None:
    """The simulated time ``job`` is to be deleted at; None when it is not (or already is)."""
    if is_terminating(job):
        return None
    expiry = ttl_expiry(job)
    return None if expiry is None else expiry.timestamp()


class FinishedJobsCleaner:
    """Deletes each finished Job ``ttlSecondsAfterFinished`` after it finished."""

    def __init__(self, objects: ObjectClient, jobs: Informer, *, clock: Clock) -> None:
        self._objects = objects
        self._jobs = jobs
        self._clock = clock
        #: Job key -> when it is due (simulated epoch seconds).
        self._due: dict[str, float] = {}
        self._wake = asyncio.Event()
        jobs.add_handler(as_handler(self._on_job))

    def _on_job(self, event: WatchEventType, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new or old
        assert obj is not None
        key = object_key(obj)
        due = _due(new) if new is not None else None
        if due is None:
            self._due.pop(key, None)
            return
        self._due[key] = due
        self._wake.set()

    async def run(self) -> None:
        for job in self._jobs.items():
            self._on_job(WatchEventType.ADDED, None, job)
        while True:
            self._wake.clear()
            now = self._clock.now()
            for key in sorted(k for k, due in self._due.items() if due <= now):
                del self._due[key]
                await self._expire(key)
            await self._clock.sleep_until(min(self._due.values(), default=None), self._wake)

    async def _expire(self, key: str) -> None:
        namespace, _, name = key.rpartition("/")
        rt = self._jobs.rt
        try:
            fresh = await self._objects.get(rt, namespace=namespace, name=name)
        except errors.NotFound:
            return
        due = _due(fresh)
        if due is None:
            return
        if due > self._clock.now():
            self._due[key] = due  # its TTL grew meanwhile
            return
        uid = str(fresh["metadata"].get("uid") or "") or None
        try:
            await self._objects.delete(
                rt, namespace=namespace, name=name, preconditions=Preconditions(uid=uid),
                propagation_policy="Foreground",
            )
        except (errors.NotFound, errors.Conflict):
            return  # gone, or another Job of that name now: its own events decide
        logger.info("deleted finished job %s: its ttlSecondsAfterFinished passed", key)
