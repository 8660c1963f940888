"""A relist of a large collection takes turns with the rest of the agent (its lease renewals,
applies and reports share the event loop): between pages of a server that ignores ``limit``
and between the changes it reports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from member_agent.informing import Informer
from member_agent.kubeapi import KubeTransport, Request

PODS = 5_000


class IdleWatchServer(KubeTransport):
    """A member whose watches stay open with nothing to say and which serves no plain-text page;
    a subclass answers the JSON requests."""

    async def _text(self, request: Request) -> tuple[int, str]:
        return 404, ""

    async def _events(self, path: str, query: Mapping[str, Any], *, timeout_seconds: int) -> AsyncIterator[dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}

    @property
    def server(self) -> str:
        return type(self).__name__


class OnePageServer(IdleWatchServer):
    """Answers a list with every pod in one page, whatever ``limit`` says, without a turn; its
    watch then stays open with nothing to say. ``listing`` is called as a list is answered."""

    def __init__(self, listing: Callable[[], None]) -> None:
        super().__init__()
        self.items = [{"metadata": {"name": f"p{i}", "namespace": "ml", "resourceVersion": "7"}} for i in range(PODS)]
        self.listing = listing

    async def _exchange(self, request: Request) -> dict[str, Any]:
        self.listing()
        return {"kind": "PodList", "items": self.items, "metadata": {"resourceVersion": "7"}}


async def test_a_relist_of_one_huge_page_takes_turns() -> None:
    turns = 0
    listed_at: list[int] = []
    changes: list[str] = []
    reported = asyncio.Event()

    def changed(key: str) -> None:
        changes.append(key)
        if len(changes) == PODS:
            reported.set()

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    informer = Informer(
        OnePageServer(lambda: listed_at.append(turns)), "/api/v1/pods", name="pods", on_change=changed
    )
    ticker = asyncio.create_task(other_work())
    running = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(30):
            await reported.wait()
        during = turns - listed_at[0]
    finally:
        running.cancel()
        ticker.cancel()
        await asyncio.gather(running, ticker, return_exceptions=True)
    assert len(listed_at) == 1 and len(informer.objects) == PODS and len(changes) == PODS
    # Turns while the page is read (every 500 items: 10) and while its changes are reported
    # (every 256: 19); none without them (the server's answer never waits).
    assert during >= 25, during
