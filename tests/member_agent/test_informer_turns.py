"""A relist of a large collection takes turns with the rest of the agent (its lease renewals,
applies and reports share the event loop): between pages of a server that ignores ``limit``
and between the changes it reports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from member_agent.informing import Informer
from member_agent.kubeapi import KubeTransport, Request

PODS = 5_000


class OnePageServer(KubeTransport):
    """Answers a list with every pod in one page, whatever ``limit`` says, without a turn."""

    def __init__(self) -> None:
        super().__init__()
        self.items = [{"metadata": {"name": f"p{i}", "namespace": "ml", "resourceVersion": "7"}} for i in range(PODS)]

    async def _exchange(self, request: Request) -> dict[str, Any]:
        return {"kind": "PodList", "items": self.items, "metadata": {"resourceVersion": "7"}}

    async def _text(self, request: Request) -> tuple[int, str]:
        return 404, ""

    async def _events(self, path: str, query: Mapping[str, Any], *, timeout_seconds: int) -> AsyncIterator[dict[str, Any]]:
        return
        yield {}

    @property
    def server(self) -> str:
        return "one-page"


async def test_a_relist_of_one_huge_page_takes_turns() -> None:
    changes: list[str] = []
    informer = Informer(OnePageServer(), "/api/v1/pods", name="pods", on_change=changes.append)
    turns = 0
    relisting = asyncio.Event()

    async def other_work() -> None:
        nonlocal turns
        relisting.set()
        while True:
            turns += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_work())
    await relisting.wait()
    before = turns
    await informer._relist()
    during = turns - before
    ticker.cancel()
    assert len(informer.objects) == PODS and len(changes) == PODS
    # Turns while the page is read (every 500 items: 10) and while its changes are reported
    # (every 256: 19); none without them (the server's answer never waits).
    assert during >= 25, during
