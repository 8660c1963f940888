"""controlplane.gcpolicy: the hub process's garbage-collector policy. Survivors are frozen so that
the collector's passes stop walking them; a full pass over everything, on its own schedule,
still finds the cycles that form among frozen objects; the older generations' passes are
reported; the process's collector is left as it was when the policy stops."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import TypedDict

import pytest

from controlplane.gcpolicy import NO_AUTOMATIC_FULL_PASS, CollectorPolicy, CollectorTuning, collector_tuned


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


class CachedObject(TypedDict):
    spec: dict[str, int]
    items: list[int]


@pytest.fixture(autouse=True)
def _unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()


def _tracked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_a_freeze_takes_the_survivors_out_of_every_later_pass() -> None:
    cache: dict[str, CachedObject] = {f"key-{i}": {"spec": {"replicas": i}, "items": [i]} for i in range(1000)}
    tuning = CollectorTuning(CollectorPolicy())
    tuning.freeze()
    assert gc.get_freeze_count() >= 1000
    assert not _tracked(cache["key-1"]), "a frozen object is in no generation the collector walks"
    assert cache["key-999"]["spec"]["replicas"] == 999
    gc.unfreeze()
    assert gc.get_freeze_count() == 0 and _tracked(cache["key-1"])


async def test_the_periodic_freeze_does_not_count_the_frozen_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython counts frozen objects by walking all of them (millions in the hub): the freezes
    every few seconds do not count them; only the hourly full pass does, for its log line."""
    counted: list[int] = []
    count = gc.get_freeze_count

    def counting() -> int:
        counted.append(count())
        return counted[-1]

    monkeypatch.setattr(gc, "get_freeze_count", counting)
    now = [0.0]
    tuning = CollectorTuning(CollectorPolicy(freeze_interval=0.001, full_interval=100), clock=lambda: now[0])
    task = asyncio.create_task(tuning.run())
    for _ in range(20):
        await asyncio.sleep(0.002)
    assert count() > 0 and counted == [], "frozen on every tick, never counted"
    now[0] = 100.0
    for _ in range(100):
        await asyncio.sleep(0.002)
        if tuning.full_passes:
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert tuning.full_passes == 1 and len(counted) == 1 and counted[0] > 0


def test_a_frozen_object_replaced_in_its_cache_is_still_freed() -> None:
    """Reference counting frees frozen objects as before: a cache's old versions do not pile up."""
    cache = {"obj": Node()}
    gone = weakref.ref(cache["obj"])
    CollectorTuning(CollectorPolicy()).freeze()
    cache["obj"] = Node()
    assert gone() is None


def test_a_cycle_formed_among_frozen_objects_waits_for_the_full_pass() -> None:
    first, second = Node(), Node()
    tuning = CollectorTuning(CollectorPolicy())
    tuning.freeze()
    first.other, second.other = second, first
    ref = weakref.ref(first)
    del first, second
    gc.collect()
    assert ref() is not None, "the ordinary passes do not walk frozen objects"
    tuning.full_pass()
    assert ref() is None and tuning.full_passes == 1
    assert gc.get_freeze_count() > 0, "the survivors of the full pass are frozen again"


async def test_a_graph_reported_released_is_collected_at_the_next_turn_while_the_policy_runs() -> None:
    """A lost leadership term (:meth:`Hub.after_each_term`) is collected without waiting for the
    scheduled full pass, once the code that reported it has returned; outside the policy, a report
    makes no pass."""
    tuning = CollectorTuning(CollectorPolicy(freeze_interval=3600, full_interval=0))
    tuning.released("nothing: the policy does not run")
    await asyncio.sleep(0)
    assert tuning.full_passes == 0
    task = asyncio.create_task(tuning.run())
    await asyncio.sleep(0)  # in force: the survivors are frozen
    first, second = Node(), Node()
    first.other, second.other = second, first
    ref = weakref.ref(first)
    gc.freeze()  # the term lived past a freeze
    del first, second
    gc.collect()
    assert ref() is not None, "frozen, the cycle waits for a full pass"
    tuning.released("a lost leadership term")
    assert ref() is not None and tuning.full_passes == 0, "not while the caller still runs"
    await asyncio.sleep(0)
    assert ref() is None and tuning.full_passes == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_run_freezes_on_its_interval_reports_old_passes_and_restores_the_collector() -> None:
    observed: list[tuple[int, float]] = []
    now = [0.0]
    tuning = CollectorTuning(
        CollectorPolicy(freeze_interval=0.01, full_interval=100), observe=lambda g, s: observed.append((g, s)),
        clock=lambda: now[0],
    )
    task = asyncio.create_task(tuning.run())
    await asyncio.sleep(0.05)
    assert gc.get_freeze_count() > 0 and tuning.full_passes == 0
    gc.collect()
    assert any(generation == 2 and seconds >= 0 for generation, seconds in observed)
    assert all(generation in (1, 2) for generation, _ in observed), "generation 0 passes are not reported"
    now[0] = 100.0
    for _ in range(100):
        await asyncio.sleep(0.01)
        if tuning.full_passes:
            break
    assert tuning.full_passes == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gc.get_freeze_count() == 0
    count = len(observed)
    gc.collect()
    assert len(observed) == count, "the observer is removed with the policy"


async def test_while_it_runs_only_the_policy_makes_full_passes() -> None:
    """CPython's own schedule would walk the whole old generation every time it grew by a
    quarter; under the policy the old generation is frozen on the tick instead."""
    observed: list[int] = []
    thresholds = gc.get_threshold()
    task = asyncio.create_task(
        CollectorTuning(CollectorPolicy(freeze_interval=3600), observe=lambda g, s: observed.append(g)).run()
    )
    await asyncio.sleep(0)
    kept = [[{"n": i}] for i in range(200_000)]  # enough survivors for many automatic passes
    assert len(kept) == 200_000 and 1 in observed, "the young generations are collected as before"
    assert 2 not in observed
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gc.get_threshold() == thresholds


async def test_a_zero_interval_leaves_the_collector_as_python_has_it() -> None:
    observed: list[tuple[int, float]] = []
    task = asyncio.create_task(
        CollectorTuning(CollectorPolicy(freeze_interval=0), observe=lambda g, s: observed.append((g, s))).run()
    )
    await asyncio.sleep(0.02)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert observed, "the pauses are still reported"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_an_exiting_process_keeps_its_frozen_objects_frozen() -> None:
    thresholds = gc.get_threshold()
    task = asyncio.create_task(CollectorTuning(CollectorPolicy(freeze_interval=3600)).run(thaw=False))
    await asyncio.sleep(0.01)
    frozen = gc.get_freeze_count()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert frozen > 0 and gc.get_freeze_count() > frozen // 2 and gc.get_threshold() == thresholds


@pytest.mark.parametrize("command", ["controlplane", "agent", "sim-fleet"])
async def test_each_long_running_command_runs_the_policy_its_flags_give(command: str) -> None:
    """The hub, the agent and a hollow fleet share the flags and run the policy beside their work
    (``collector_tuned``): Python makes no full pass of its own while it runs, the survivors are
    frozen, and the collector's thresholds come back after it."""
    from gpufed.cli import build_parser
    from gpufed.commands.running import collector_policy

    required = {"controlplane": [], "agent": ["--cluster-name", "c", "--hub", "https://hub:6443", "--state-dir", "/tmp/x"], "sim-fleet": ["--clusters", "1", "--nodes", "1",
                                                                                   "--state-dir", "/tmp/x"]}[command]
    args = build_parser().parse_args([command, *required, "--gc-freeze-interval", "3600", "--gc-full-interval", "0"])
    policy = collector_policy(args)
    assert policy == CollectorPolicy(freeze_interval=3600, full_interval=0)
    thresholds = gc.get_threshold()
    async with collector_tuned(policy):
        await asyncio.sleep(0.01)
        assert gc.get_threshold()[2] == NO_AUTOMATIC_FULL_PASS
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == thresholds
    off = collector_policy(build_parser().parse_args([command, *required, "--gc-freeze-interval", "0"]))
    assert not off.enabled
