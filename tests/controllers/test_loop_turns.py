"""A reconcile loop gives the event loop a turn between keys. Taking a ready key and a
reconcile served from caches complete without suspending, so without that turn a backlog of
thousands (a resync, a policy change) is worked through in one go with the loop held: every
other task (leases, API requests) waits for all of it. The test counts how far the backlog
had got each time another task ran."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane.controllers.reconciling import ReconcileLoop

BACKLOG = 300


async def _observed_while(done: asyncio.Event, progress: list[Any]) -> list[int]:
    """How long ``progress`` was each time this task ran, until ``done``."""
    seen: list[int] = []
    while not done.is_set():
        seen.append(len(progress))
        await asyncio.sleep(0)
    return seen


def _interleaved(seen: list[int]) -> list[int]:
    return sorted({count for count in seen if 0 < count < BACKLOG})


async def test_a_reconcile_loop_lets_other_tasks_run_between_keys() -> None:
    reconciled: list[int] = []
    done = asyncio.Event()

    async def reconcile(key: int) -> None:  # never waits: its reads are all cached
        reconciled.append(key)
        if len(reconciled) == BACKLOG:
            done.set()

    loop = ReconcileLoop("turns", reconcile, workers=1)
    for key in range(BACKLOG):
        await loop.add(key)
    observer = asyncio.create_task(_observed_while(done, reconciled))
    running = asyncio.create_task(loop.run())
    try:
        seen = await asyncio.wait_for(observer, timeout=30)
    finally:
        await loop.shutdown()
        await asyncio.wait_for(running, timeout=10)
    assert len(_interleaved(seen)) >= BACKLOG // 2, "the backlog held the loop"
