"""One kind's objects kept in memory from a list and a watch, for a part of the API server that
follows configuration objects (the admission webhook configurations, APF's FlowSchemas and
PriorityLevelConfigurations), as kube's informers feed them.

In: the object layer, the kind, the dict (name → object) to keep and a callback run after the list
and after every change. A watch that ends or fails is listed again after :data:`RETRY_SECONDS`;
``synced`` is set once the first list is in. Runs until ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from controlplane.apiserver import errors
from controlplane.apiserver.objects.values import WatchEventType
from controlplane.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from controlplane.apiserver.objects import ObjectStore

logger = logging.getLogger(__name__)

RETRY_SECONDS: Final = 2.0


async def follow_kind(
    objects: ObjectStore, rt: ResourceType, seen: dict[str, dict[str, Any]], *,
    changed: Callable[[], None], synced: asyncio.Event, stop: asyncio.Event,
) -> None:
    """Keep ``seen`` holding the cluster-scoped objects of ``rt`` by name; ``changed()`` after each change."""
    while not stop.is_set():
        try:
            listed = await objects.list(rt)
            seen.clear()
            seen.update((obj["metadata"]["name"], obj) for obj in listed.items)
            changed()
            synced.set()
            async for event in objects.watch(rt, resource_version=listed.resource_version):
                if stop.is_set() or event.type is WatchEventType.ERROR:
                    break
                if event.type is WatchEventType.BOOKMARK:
                    continue
                name = event.object["metadata"]["name"]
                if event.type is WatchEventType.DELETED:
                    seen.pop(name, None)
                else:
                    seen[name] = event.object
                changed()
        except asyncio.CancelledError:
            raise
        except errors.ApiError as exc:
            logger.warning("watch of %s interrupted: %s; retrying", rt.kind, exc)
        except Exception:
            logger.exception("watching %s failed; retrying", rt.kind)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RETRY_SECONDS):
                await stop.wait()
