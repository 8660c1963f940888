"""An informer whose list or watch fails waits longer after each failure, as client-go's
reflector (0.8 s doubling up to 30 s, each stretched by up to as much again), logs the outage
once, and after a list that succeeds starts again from 0.8 s. Pauses go through a fake sleep
that records them: the test counts tries and checks each pause's range, never the wall clock."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from controlplane.apiserver.crd.converting import ConversionFailed
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.informing import Informer, ListWatchBackoff
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore


class _FailingLists:
    """The object layer, whose first ``failures`` lists fail with kube's 500 (a custom kind whose
    conversion webhook is down) and whose watches fail ``watch_failures`` times, then wait."""

    def __init__(self, objects: ObjectStore, failures: int, watch_failures: int = 0) -> None:
        self._objects = objects
        self.registry = objects.registry
        self.failures = failures
        self.watch_failures = watch_failures
        self.lists = 0
        self.watches = 0
        #: Set when the watch after the failed ones starts.
        self.watching = asyncio.Event()

    async def list(self, rt: Any, **options: Any) -> Any:
        self.lists += 1
        if self.lists <= self.failures:
            raise ConversionFailed("conversion webhook for example.com/v2, Kind=Trainer failed: connection refused")
        return await self._objects.list(rt, **options)

    def watch(self, rt: Any, **options: Any) -> Any:
        self.watches += 1
        if self.watches > self.watch_failures:
            self.watching.set()
        return self._failing() if self.watches <= self.watch_failures else self._objects.watch(rt, **options)

    async def _failing(self) -> Any:
        raise ConversionFailed("conversion webhook for example.com/v2, Kind=Trainer failed: connection refused")
        yield  # an async generator, as a watch is


def _in_range(delay: float, base: float) -> bool:
    return base <= delay < 2 * base


async def test_failing_lists_back_off_log_once_and_a_successful_list_starts_the_backoff_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MemoryStore() as store:
        objects = ObjectStore(store, hub_registry())
        await objects.bootstrap()
        configmaps = objects.registry.require("v1", "ConfigMap")
        client = _FailingLists(objects, failures=8, watch_failures=1)
        pauses: list[float] = []

        async def sleep(delay: float) -> None:
            pauses.append(delay)
            await asyncio.sleep(0)

        informer = Informer(client, configmaps, sleep=sleep)  # type: ignore[arg-type]
        with caplog.at_level(logging.DEBUG, logger="controlplane.controllers.informing"):
            running = asyncio.create_task(informer.run())
            try:
                async with asyncio.timeout(10):
                    await informer.synced.wait()
                    await client.watching.wait()
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        # One pause per failed list (8), then one for the failed first watch; the ninth list
        # succeeded at once, after the eighth pause.
        assert client.lists == 9 and len(pauses) == 9
        bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
        assert all(_in_range(delay, base) for delay, base in zip(pauses, bases, strict=False)), pauses
        # The list that succeeded started the backoff again: the failed watch waits 0.8 s to 1.6 s.
        assert _in_range(pauses[8], 0.8), pauses
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "interrupted" in r.getMessage()]
        assert len(warnings) == 2  # the failing lists once, the failed watch once


def test_the_backoff_starts_again_after_two_minutes_without_a_failure() -> None:
    now = [0.0]
    backoff = ListWatchBackoff(jitter=0.0, clock=lambda: now[0])
    assert [backoff.next_delay() for _ in range(7)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    now[0] += 120.0  # exactly two minutes: not yet (client-go resets only after more)
    assert backoff.next_delay() == 30.0
    now[0] += 120.5
    assert backoff.next_delay() == 0.8
    assert backoff.next_delay() == 1.6
    backoff.reset()
    assert backoff.next_delay() == 0.8


def test_a_backoff_must_start_below_its_maximum() -> None:
    with pytest.raises(ValueError, match="initial"):
        ListWatchBackoff(initial=40.0)
