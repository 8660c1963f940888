"""Watch cache dispatch: the hub's CPU to hand one Work change to 1,000 cached watchers.

What runs: the hub's object layer over an in-memory store, in this process, and one
:class:`~controlplane.apiserver.watchcache.cacher.Cacher` of Works with N watchers attached
in the scale benchmark's mix (``bench/watch_fanout.py``): 1 in 10 of every Work, 6 in 10 of
one namespace's, 2 in 10 by label in every namespace, 1 in 10 by label in one namespace
(10 namespaces, 4 label values, as its quick size). Probe Works (about 2 KiB) are patched
in turn; the figure is the CPU time of ``Cacher._apply`` per event -- matching, decoding,
encoding and queueing for every watcher it offers the event to -- apart from HTTP, TLS and
the event loop's wake-ups, which ``bench_scale`` measures whole. The watchers' queues are
not read (each keeps the events it got, under its bound).

Reproduce: ``.venv/bin/python -m bench.watch_dispatch [--size tiny|quick|full] [--json FILE]``
(run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to it, to compare).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.bench_watch import work
from bench.common import BenchmarkResult, Figure, Size, percentile, script_main
from controlplane.apis.kube.selectors import FieldSelector, parse_label_selector
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.watchcache.cacher import Cacher
from controlplane.apiserver.watchcache.watcher import CacheWatcher, WatcherLimits
from controlplane.apiserver.watchcache.window import EventWindow
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from controlplane.storage import interface as storage

NAME = "watch-dispatch"
NAMESPACES, GROUPS = 10, 4
#: (watchers, events) per size.
PLANS = {Size.TINY: (20, 20), Size.QUICK: (1000, 300), Size.FULL: (1000, 900)}


def _probe(namespace: int, group: int) -> dict[str, Any]:
    obj = work(f"probe-{group}")
    obj["metadata"].update(namespace=f"bench-dispatch-{namespace}", labels={"probe": f"g{group}"})
    return obj


async def measure(watchers: int, events: int) -> dict[str, Any]:
    async with MemoryStore(watch_queue_size=10_000) as memory:
        registry = hub_registry()
        objects = ObjectStore(memory, registry)
        await objects.bootstrap()
        namespaces = registry.require("v1", "Namespace")
        works = registry.require("work.gpufed.io/v1alpha1", "Work")
        for ns in range(NAMESPACES):
            await objects.create(namespaces, {"metadata": {"name": f"bench-dispatch-{ns}"}})
            for group in range(GROUPS):
                await objects.create(works, _probe(ns, group))
        cacher = Cacher(memory, works, EventWindow())
        cacher.start()
        await cacher.wait_ready()
        limits = WatcherLimits(max_events=events + 10)
        for index in range(watchers):
            share = index % 10
            namespace = None if share in (0, 7, 8) else f"bench-dispatch-{index % NAMESPACES}"
            labels = f"probe=g{index % GROUPS}" if share in (7, 8, 9) else None
            watcher = CacheWatcher(
                works, prefix=works.key_prefix(namespace), labels=parse_label_selector(labels),
                fields=FieldSelector(), after=cacher.revision, limits=limits,
            )
            assert cacher.attach(watcher, cacher.revision)
        timings: list[float] = []
        apply = cacher._apply
        all_taken = asyncio.Event()

        def timed(event: storage.WatchEvent) -> None:
            started = time.process_time()
            apply(event)
            timings.append(time.process_time() - started)
            if len(timings) == events:
                all_taken.set()

        cacher._apply = timed  # type: ignore[method-assign]
        for index in range(events):
            await objects.patch(
                works, namespace=f"bench-dispatch-{index % NAMESPACES}", name=f"probe-{index % GROUPS}",
                patch_type=PatchType.MERGE, patch={"metadata": {"annotations": {"bench/round": str(index)}}},
            )
        async with asyncio.timeout(60):
            await all_taken.wait()
        await cacher.stop()
    return {"cpu_us": [t * 1e6 for t in timings], "decodes": cacher.counters.decodes, "lines": cacher.counters.lines}


def run(size: Size) -> BenchmarkResult:
    watchers, events = PLANS[size]
    started = time.perf_counter()
    measured = asyncio.run(measure(watchers, events))
    cpu = measured["cpu_us"]
    figures = [
        Figure(f"{watchers:,} watchers: dispatch CPU per event, mean", round(sum(cpu) / len(cpu), 1), "us"),
        Figure(f"{watchers:,} watchers: dispatch CPU per event, p50", round(percentile(cpu, 50), 1), "us"),
        Figure(f"{watchers:,} watchers: dispatch CPU per event, p99", round(percentile(cpu, 99), 1), "us"),
        Figure(f"{watchers:,} watchers: objects decoded per event", round(measured["decodes"] / events, 2)),
    ]
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, seconds=time.perf_counter() - started,
        details={"watchers": watchers, "events": events, "lines": measured["lines"]},
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
