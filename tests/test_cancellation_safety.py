"""Long-running loops must stay cancellable.

On Python 3.11, ``asyncio.wait_for`` drops a cancellation that arrives in the same loop
iteration as the awaited future completing (python/cpython#86296, fixed in 3.12): the loop
around it carries on, and the ``TaskGroup`` or ``shutdown()`` waiting for it hangs forever.
The member agent hung that way on exit while its Work events were firing. The code uses
``asyncio.timeout`` instead, which delivers the cancellation; this test keeps it that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.waiting

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("controlplane", "member_agent", "policies", "simulator", "gpufed")
WAIT_FOR = re.compile(r"\basyncio\.wait_for\(|\bfrom asyncio import [^\n]*\bwait_for\b")


def test_no_package_module_uses_asyncio_wait_for() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if WAIT_FOR.search(line)
    ]
    assert not offenders, f"use asyncio.timeout(...) instead of asyncio.wait_for at {offenders}"


async def _event_loop(event: asyncio.Event, rounds: list[int], wait: str) -> None:
    while True:
        with contextlib.suppress(TimeoutError):
            if wait == "wait_for":
                await asyncio.wait_for(event.wait(), 1.0)
            else:
                async with asyncio.timeout(1.0):
                    await event.wait()
        event.clear()
        rounds.append(1)


async def _cancelled_while_event_fires(wait: str) -> bool:
    """True when a loop cancelled in the same iteration its event is set actually ends."""
    event, rounds = asyncio.Event(), []
    task = asyncio.create_task(_event_loop(event, rounds, wait))
    await asyncio.sleep(0.01)
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2.0)
    if not done:
        task.cancel()  # a second cancel is not swallowed: clean up
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return bool(done)


async def test_the_timeout_idiom_ends_a_loop_cancelled_as_its_event_fires() -> None:
    assert await _cancelled_while_event_fires("timeout")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for delivers the cancellation since 3.12")
async def test_wait_for_swallows_that_cancellation_on_this_python() -> None:
    # Why the rule above exists: the same loop with wait_for does not end.
    assert not await _cancelled_while_event_fires("wait_for")


async def test_a_stopping_hub_waits_for_its_sampler_but_stays_cancellable() -> None:
    from controlplane.hubleading import _finish

    async def saves(seconds: float) -> None:
        await asyncio.sleep(seconds)

    quick = asyncio.create_task(saves(0.01))
    await _finish(quick, seconds=5.0)
    assert quick.done() and not quick.cancelled()

    stuck = asyncio.create_task(saves(60))
    await _finish(stuck, seconds=0.05)
    assert stuck.cancelled()

    # The caller's own cancellation goes through (suppress(CancelledError) swallowed it).
    slow = asyncio.create_task(saves(60))
    waiter = asyncio.create_task(_finish(slow, seconds=30.0))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    assert waiter.cancelled()
    slow.cancel()
