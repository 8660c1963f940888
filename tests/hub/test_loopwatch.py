"""The event-loop watchdog (:mod:`controlplane.loopwatch`): a stall past the threshold is
reported once, when it ends, with its length and the stack the loop was held in (and one that
goes on, while it lasts); a shorter one and a loop that keeps time report nothing; a failing
reporter does not end the watch."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

import pytest

from controlplane import loopwatch
from controlplane.loopwatch import Frame, LoopWatchdog, Stall, call_stack, dominant_path


def hold_the_loop_in_a_named_function(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # busy, as a long computation on the loop would be
        sum(range(1000))


async def _watching(watchdog: LoopWatchdog, body: float | None) -> None:
    """Run ``watchdog`` while the loop is held ``body`` seconds (None: not at all), then let
    the loop run long enough for the watchdog to see it resume."""
    task = asyncio.create_task(watchdog.run())
    try:
        await asyncio.sleep(0.1)
        if body is not None:
            hold_the_loop_in_a_named_function(body)
        await asyncio.sleep(watchdog.tick * 4)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_stall_is_reported_once_with_its_length_and_where_the_loop_was_held() -> None:
    stalls: list[Stall] = []
    watchdog = LoopWatchdog(0.3, tick=0.05, on_stall=stalls.append)
    await _watching(watchdog, 1.5)
    assert len(stalls) == 1, stalls
    [stall] = stalls
    assert 1.0 <= stall.seconds <= 2.5, stall
    assert stall.samples >= 1 and stall.samples / 2 <= stall.count <= stall.samples
    assert stall.stack[0].startswith("hold_the_loop_in_a_named_function (hub/test_loopwatch.py")
    assert any(frame.startswith("_watching (") for frame in stall.stack)
    assert stall.message().startswith("the event loop was held for ")
    assert "hold_the_loop_in_a_named_function" in stall.message()


async def test_a_stall_that_goes_on_is_reported_while_it_lasts(caplog: pytest.LogCaptureFixture) -> None:
    """A loop held for good never resumes: the thread says so while it is held, and again each
    time the stall doubles; the usual report follows if it ends."""
    stalls: list[Stall] = []
    watchdog = LoopWatchdog(0.1, tick=0.02, on_stall=stalls.append, still_held_after=0.3)
    task = asyncio.create_task(watchdog.run())
    try:
        await asyncio.sleep(0.1)
        with caplog.at_level("WARNING", logger="controlplane.loopwatch"):
            hold_the_loop_in_a_named_function(1.4)
            ended = time.time()
            await asyncio.sleep(watchdog.tick * 4)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    notices = [r for r in caplog.records if "is still held" in r.getMessage()]
    assert 2 <= len(notices) <= 3, [r.getMessage() for r in notices]  # at 0.3 s, 0.6 s, 1.2 s: the last may miss
    assert all(r.created < ended for r in notices)  # said while the loop was held
    assert re.match(r"the event loop has been held for \d+\.\ds and is still held; ", notices[0].getMessage())
    assert "hold_the_loop_in_a_named_function" in notices[-1].getMessage()
    # The stall the test made (at a 0.1 s threshold a loaded machine may add one of its own, the
    # process not scheduled while the loop waited in select).
    held = [stall for stall in stalls if "hold_the_loop_in_a_named_function" in stall.message()]
    assert len(held) == 1 and held[0].seconds >= 1.2, stalls


async def test_a_stall_shorter_than_the_threshold_is_sampled_but_not_reported() -> None:
    stalls: list[Stall] = []
    await _watching(LoopWatchdog(1.5, tick=0.05, on_stall=stalls.append), 0.4)
    assert stalls == []


async def test_a_long_stall_keeps_at_most_max_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loopwatch, "MAX_SAMPLES", 3)
    stalls: list[Stall] = []
    await _watching(LoopWatchdog(0.1, tick=0.02, on_stall=stalls.append), 1.0)
    assert [stall.samples for stall in stalls] == [3]
    assert stalls[0].seconds >= 0.8


async def test_a_loop_that_keeps_time_reports_nothing() -> None:
    stalls: list[Stall] = []
    await _watching(LoopWatchdog(2.0, tick=0.05, on_stall=stalls.append), None)
    assert stalls == []


async def test_a_failing_reporter_is_logged_and_the_next_stall_is_still_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[Stall] = []

    def flaky(stall: Stall) -> None:
        seen.append(stall)
        if len(seen) == 1:
            raise RuntimeError("reporter down")

    watchdog = LoopWatchdog(0.2, tick=0.05, on_stall=flaky)
    task = asyncio.create_task(watchdog.run())
    try:
        for _ in range(2):
            await asyncio.sleep(0.1)
            hold_the_loop_in_a_named_function(0.6)
            await asyncio.sleep(0.3)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(seen) == 2
    assert "reporting a stall of the event loop failed" in caplog.text


def test_a_call_stack_is_outermost_first_and_keeps_the_innermost_frames() -> None:
    def inner() -> tuple[Frame, ...]:
        import sys

        return call_stack(sys._getframe(), depth=2)

    stack = inner()
    assert [(function, file) for function, file, _line in stack] == [
        ("test_a_call_stack_is_outermost_first_and_keeps_the_innermost_frames", "hub/test_loopwatch.py"),
        ("inner", "hub/test_loopwatch.py"),
    ]
    assert call_stack(None) == ()


def _f(function: str, line: int = 1) -> Frame:
    return (function, "pkg/mod.py", line)


def test_the_dominant_path_is_the_deepest_that_half_the_samples_share() -> None:
    samples: Counter[tuple[Frame, ...]] = Counter({
        # Six samples under reconcile, in copies of different depths and lines.
        (_f("run"), _f("reconcile", 10), _f("write", 20), _f("deepcopy", 1)): 2,
        (_f("run"), _f("reconcile", 10), _f("write", 20), _f("deepcopy", 1), _f("deepcopy", 2)): 2,
        (_f("run"), _f("reconcile", 10), _f("write", 21)): 2,
        (_f("run"), _f("encode", 5)): 3,
    })
    path, count = dominant_path(samples)
    assert (path, count) == (("write (pkg/mod.py)", "reconcile (pkg/mod.py:10)", "run (pkg/mod.py:1)"), 6)
    assert dominant_path(Counter()) == ((), 0)
    split: Counter[tuple[Frame, ...]] = Counter({(_f("a"),): 1, (_f("b"),): 1, (_f("c"),): 1})
    assert dominant_path(split) == ((), 0)


def test_a_stall_without_samples_or_a_shared_path_says_so() -> None:
    message = Stall(seconds=3.04, samples=0, stack=(), count=0).message()
    assert message.startswith("the event loop was held for 3.0s, with no sample taken")
    message = Stall(seconds=2.0, samples=3, stack=(), count=0).message()
    assert message == "the event loop was held for 2.0s; no call path is in half of its 3 samples"


@pytest.mark.parametrize(("threshold", "tick"), [(0, 0.1), (1, 0), (-1, 0.1)])
def test_a_threshold_and_tick_must_be_positive(threshold: float, tick: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        LoopWatchdog(threshold, tick=tick)
