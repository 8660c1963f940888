"""What one etcd call costs the hub (issue 19): CPU per ``EtcdStore`` update, get and create.

What runs: an embedded etcd as the hub runs it (TLS with a client certificate) and the hub's
``EtcdStore`` on it, in this process. Updates are compare-and-swap updates of a 2 KB value
named by the revision they were made from, as the hub's object layer makes them; gets read one
key; creates make new keys. Each kind of call runs sequentially (one at a time: the cost of
a lone call, gRPC's threads handing over each reply) and updates also from 32 concurrent
tasks (as under load, where replies arrive together). The kinds alternate within each
repetition so that load from elsewhere on the machine hits them alike. Figures: CPU
milliseconds per call of this process (``time.process_time``: every thread, gRPC's poller
and event-engine threads included; etcd's own CPU is not in it), medians over the repetitions.

Run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to it, to compare.

Reproduce: ``.venv/bin/python -m bench.bench_etcd_calls [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import BenchmarkResult, Size, median_ms_figures, script_main
from controlplane.storage import EmbeddedEtcd, EtcdStore

NAME = "etcd-calls"
VALUE = b"x" * 2000
CONCURRENCY = 32


@dataclass(frozen=True, slots=True)
class Plan:
    calls: int
    repeats: int


PLANS = {
    Size.TINY: Plan(calls=100, repeats=2),
    Size.QUICK: Plan(calls=1000, repeats=5),
    Size.FULL: Plan(calls=3000, repeats=7),
}


async def cpu_per_call(calls: int, workers: int, call: Callable[[int], Awaitable[object]]) -> float:
    """CPU seconds per call of ``calls`` calls from ``workers`` concurrent tasks (worker ``w`` passes ``w``)."""

    async def worker(index: int) -> None:
        for _ in range(calls // workers):
            await call(index)

    started = time.process_time()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return (time.process_time() - started) / (calls // workers * workers)


async def measure(plan: Plan) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"update": [], "update, 32 concurrent": [], "get": [], "create": []}
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-etcd-") as tmp:
        etcd = EmbeddedEtcd(Path(tmp))
        url = await etcd.start()
        try:
            async with EtcdStore([url], tls=etcd.client_tls) as store:
                revisions = [(await store.create(f"/bench/k{w}", VALUE)).mod_revision for w in range(CONCURRENCY)]
                created = 0

                async def update(worker: int) -> None:
                    kv = await store.update(f"/bench/k{worker}", VALUE, expected_revision=revisions[worker])
                    revisions[worker] = kv.mod_revision

                async def get(worker: int) -> None:
                    await store.get(f"/bench/k{worker}")

                async def create(worker: int) -> None:
                    nonlocal created
                    created += 1
                    await store.create(f"/bench/new/{created}", VALUE)

                await cpu_per_call(100, 1, update)  # warm-up: the connection, gRPC's threads
                for _ in range(plan.repeats):
                    out["update"].append(await cpu_per_call(plan.calls, 1, update))
                    out["update, 32 concurrent"].append(await cpu_per_call(plan.calls, CONCURRENCY, update))
                    out["get"].append(await cpu_per_call(plan.calls, 1, get))
                    out["create"].append(await cpu_per_call(plan.calls, 1, create))
        finally:
            await etcd.stop()
    return out


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    seconds = asyncio.run(measure(plan))
    figures, runs = median_ms_figures(seconds, lambda kind: f"{kind}: CPU per call (median)")
    details = {
        "calls": plan.calls,
        "repeats": plan.repeats,
        "value_bytes": len(VALUE),
        "cpu_ms_per_call": runs,
        "store": "EtcdStore over TLS with a client certificate, embedded etcd, in process",
    }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
