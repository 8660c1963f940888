"""A list+watch cache of one collection (nodes, pods, Works), as client-go's informers keep.

In: a :class:`~member_agent.kubeapi.KubeTransport`, a collection path, an optional ``transform``
(to keep only the fields the agent needs, which bounds memory), and an ``on_change`` callback
that receives the key (``namespace/name`` or ``name``) of every object that was added, changed
or removed. Out: :attr:`Informer.objects`, the current objects by key, and :attr:`Informer.synced`.

The watch resumes from the last resourceVersion it saw (bookmarks included) when a stream
ends or breaks; when the server answers 410 Gone, the informer relists and reports the
difference from its cache as changes, so consumers (all level-based) see no duplicates that
matter and miss nothing. Transport and server errors back off with jitter (tenacity).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential_jitter

from member_agent.kubeapi import ApiError, Gone, KubeTransport
from member_agent.reachability import failure_level

logger = logging.getLogger(__name__)

#: Changes a relist reports between two turns of the event loop.
RELIST_TURN = 256
Transform = Callable[[Mapping[str, Any]], dict[str, Any]]
OnChange = Callable[[str], None]


def object_key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj)


class Informer:
    """Keeps :attr:`objects` equal to the server's collection; call :meth:`run` in a task."""

    def __init__(
        self,
        api: KubeTransport,
        path: str,
        *,
        name: str,
        transform: Transform | None = None,
        on_change: OnChange | None = None,
        query: Mapping[str, Any] | None = None,
        watch_timeout_seconds: int = 300,
        max_backoff: float = 30.0,
    ) -> None:
        self.api = api
        self.path = path
        self.name = name
        self.transform = transform if transform is not None else _identity
        self.on_change = on_change
        self.query = dict(query or {})
        self.watch_timeout_seconds = watch_timeout_seconds
        self.max_backoff = max_backoff
        self.objects: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0

    def _notify(self, key: str) -> None:
        if self.on_change is not None:
            self.on_change(key)

    async def _relist(self) -> None:
        fresh: dict[str, dict[str, Any]] = {}

        def keep(item: dict[str, Any]) -> None:
            fresh[object_key(item)] = self.transform(item)

        resource_version = await self.api.list_each(self.path, keep, query=self.query)
        changed = [key for key, obj in fresh.items() if self.objects.get(key) != obj]
        removed = [key for key in self.objects if key not in fresh]
        self.objects = fresh
        self.resource_version = resource_version
        self.relists += 1
        self.synced.set()
        for number, key in enumerate(changed + removed, 1):
            self._notify(key)
            if number % RELIST_TURN == 0:  # thousands of pods' changes must not hold the loop
                await asyncio.sleep(0)
        logger.debug("informer %s listed %d objects at rv %s", self.name, len(fresh), resource_version)

    def _apply_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        if resource_version:
            self.resource_version = str(resource_version)
        if kind == "BOOKMARK":
            return
        key = object_key(obj)
        if kind == "DELETED":
            if self.objects.pop(key, None) is not None:
                self._notify(key)
            return
        if kind in ("ADDED", "MODIFIED"):
            trimmed = self.transform(obj)
            if self.objects.get(key) != trimmed:
                self.objects[key] = trimmed
                self._notify(key)

    async def _session(self) -> None:
        """List when there is nothing to resume from, then watch until the stream ends."""
        if not self.resource_version:
            await self._relist()
        try:
            async for event in self.api.watch(
                self.path,
                resource_version=self.resource_version,
                query=self.query,
                timeout_seconds=self.watch_timeout_seconds,
            ):
                self._apply_event(event)
        except Gone:
            logger.info(
                "informer %s: resourceVersion %s expired, relisting", self.name, self.resource_version
            )
            self.resource_version = ""

    async def run(self) -> None:
        while True:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type((ApiError, aiohttp.ClientError, TimeoutError, OSError)),
                wait=wait_exponential_jitter(multiplier=0.2, max=self.max_backoff, jitter=0.5),
                before_sleep=self._log_retry,
            ):
                with attempt:
                    await self._session()

    def _log_retry(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.log(failure_level(exc), "informer %s: %s; retrying (attempt %d)", self.name, exc, state.attempt_number)
