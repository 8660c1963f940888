"""Watch fan-out: N watchers of Works, before (one store watch per watcher) and after the
watch cache (one store watch, each event decoded once) -- issue 17 item 3.

What runs: the hub's object layer over an in-memory store, in this process, with the hub's
registry. N watchers (100 and 1,000) watch every Work of the hub (all namespaces, as the
controllers, dashboards and kubectl do; an agent's watch of its own namespace gets one
event in N and costs less). Each watcher takes its events as the HTTP handler does,
including the watch line it would write (``{"type":..., "object":...}`` JSON): without the
cache every watcher decodes and encodes each event itself; with it, it takes the line the
cache encoded once. The writer updates one Work (a Deployment manifest, about 2 KiB), waits
until every watcher has received the update, and repeats. Figures: objects decoded per
event, CPU time per event, and the fan-out latency from the write to each watcher's receipt (p50/p99 over every
delivery) and to the last watcher's (p99 over events).

The store is in memory on purpose: with etcd, each watcher without the cache also holds its
own etcd watch stream, which would make the difference larger still, and the machine's
noise would hide it. ``bench_api`` measures the whole hub over HTTP and etcd.

Reproduce: ``.venv/bin/python -m bench.bench_watch [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from bench.common import BenchmarkResult, Figure, Size, percentile, script_main
from controlplane.apiserver import codec
from controlplane.apiserver.objects import ObjectEvent, ObjectStore, events
from controlplane.apiserver.patches import PatchType
from controlplane.apiserver.resources import ResourceType
from controlplane.apiserver.watchcache import WatchCache
from controlplane.apiserver.watchcache.watcher import SharedEvent
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

NAME = "watch"
NAMESPACE = "gpufed-es-bench"


@dataclass(frozen=True, slots=True)
class Plan:
    watchers: tuple[int, ...]
    events: int


PLANS = {
    Size.TINY: Plan(watchers=(10,), events=3),
    Size.QUICK: Plan(watchers=(100, 1000), events=20),
    Size.FULL: Plan(watchers=(100, 1000), events=100),
}


def work(name: str) -> dict[str, Any]:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "server", "image": "registry.acme.internal/ml/llm-server:2.3.0",
                    "args": ["--model", "/models/mistral-7b-instruct", "--port", "8000"],
                    "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "24Gi"}},
                    "env": [{"name": f"OPTION_{i}", "value": "x" * 40} for i in range(16)],
                }]},
            },
        },
    }
    return {
        "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"workload": {"manifests": [deployment]}},
    }


@dataclass(slots=True)
class Run:
    """One measurement: decodes per event and the fan-out latencies in seconds."""

    decodes_per_event: float
    deliveries: list[float]
    last: list[float]
    #: CPU seconds of this process per event (the write included), immune to a busy machine's waits.
    cpu_per_event: float


def _line(event: ObjectEvent) -> bytes:
    """What the HTTP handler writes for ``event``."""
    if isinstance(event, SharedEvent):
        return event.line
    return codec.dumps({"type": event.type.value, "object": event.object}) + b"\n"


async def _consume(stream: AsyncIterator[ObjectEvent], received: Callable[[int], None]) -> None:
    async for event in stream:
        _line(event)
        received(event.revision)


async def measure(watchers: int, updates: int, *, cached: bool) -> Run:
    decodes = 0
    original = events.__dict__["decode"]

    def counting_decode(rt: ResourceType, kv: Any) -> dict[str, Any]:
        nonlocal decodes
        decodes += 1
        decoded: dict[str, Any] = original(rt, kv)
        return decoded

    events.__dict__["decode"] = counting_decode  # count the store watch's decodes
    try:
        async with MemoryStore(watch_queue_size=10_000) as memory:
            registry = hub_registry()
            objects = ObjectStore(memory, registry)
            await objects.bootstrap()
            await objects.create(registry.require("v1", "Namespace"), {"metadata": {"name": NAMESPACE}})
            works = registry.require("work.gpufed.io/v1alpha1", "Work")
            created = await objects.create(works, work("llm"))
            cache = WatchCache(objects) if cached else None
            source = cache or objects
            if cache is not None:
                # As the hub does for Works: cached from the start, so every watch resumes from it.
                await cache.list(works, resource_version="0")
            rv = created["metadata"]["resourceVersion"]
            loop = asyncio.get_running_loop()
            arrivals: dict[int, list[float]] = {}
            done: dict[int, asyncio.Event] = {}

            def received(revision: int) -> None:
                times = arrivals.setdefault(revision, [])
                times.append(loop.time())
                if len(times) == watchers:
                    done.setdefault(revision, asyncio.Event()).set()

            tasks = [
                asyncio.create_task(_consume(source.watch(works, resource_version=rv), received))
                for _ in range(watchers)
            ]
            deliveries: list[float] = []
            last: list[float] = []
            cpu = 0.0
            try:
                for index in range(updates + 1):  # the first one only proves every watcher attached
                    started, cpu_started = loop.time(), time.process_time()
                    updated = await objects.patch(
                        works, namespace=NAMESPACE, name="llm", patch_type=PatchType.MERGE,
                        patch={"metadata": {"annotations": {"bench/round": str(index)}}},
                    )
                    revision = int(updated["metadata"]["resourceVersion"])
                    async with asyncio.timeout(120):
                        await done.setdefault(revision, asyncio.Event()).wait()
                    cpu += time.process_time() - cpu_started
                    if index == 0:
                        cpu = 0.0
                        decodes = 0
                        if cache is not None:
                            counters = next(iter(cache.counters().values()))
                            counters.decodes = 0
                        continue
                    times = arrivals.pop(revision)
                    deliveries += [moment - started for moment in times]
                    last.append(max(times) - started)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if cache is not None:
                    decodes += sum(c.decodes for c in cache.counters().values())
                    await cache.close()
    finally:
        events.__dict__["decode"] = original
    return Run(decodes / updates, deliveries, last, cpu / updates)


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    figures: list[Figure] = []
    details: dict[str, Any] = {"events": plan.events, "store": "MemoryStore, in process", "runs": {}}
    for watchers in plan.watchers:
        for cached in (False, True):
            measured = asyncio.run(measure(watchers, plan.events, cached=cached))
            label = f"{watchers:,} watchers, {'watch cache' if cached else 'no cache'}"
            p50, p99 = (percentile(measured.deliveries, q) * 1000 for q in (50, 99))
            last_p99 = percentile(measured.last, 99) * 1000
            figures += [
                Figure(f"{label}: objects decoded per event", round(measured.decodes_per_event, 1)),
                Figure(f"{label}: CPU per event", round(measured.cpu_per_event * 1000, 2), "ms"),
                Figure(f"{label}: fan-out latency p50", round(p50, 2), "ms"),
                Figure(f"{label}: fan-out latency p99", round(p99, 2), "ms"),
                Figure(f"{label}: last watcher p99", round(last_p99, 2), "ms"),
            ]
            details["runs"][label] = {
                "decodes_per_event": measured.decodes_per_event, "cpu_ms_per_event": measured.cpu_per_event * 1000,
                "p50_ms": p50, "p99_ms": p99, "last_p99_ms": last_p99,
            }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
