"""What a watched write costs etcd (issue 19): etcd's CPU per ``EtcdStore`` update while watches
follow the key, as the hub's watch cache follows every kind it serves.

What runs: an embedded etcd as the hub runs it (its Unix socket, no TLS) and the hub's
``EtcdStore`` on it, in this process. :data:`WATCHES` watches of the store follow the prefix of
one key; the benchmark makes compare-and-swap updates of a 2 KB value to that key, one at a
time, and waits until every watch has received every event. Figures: CPU milliseconds per
update of the etcd process (``/proc/<pid>/stat``) and of this process (the updates and the
watches' decoding; ``time.process_time``, gRPC's threads included), medians over the repetitions.
A watch that asks etcd for each event's previous value (``prev_kv``) makes etcd read that value
from its backend for every event and every watch, which is what this shows.

Run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to it, to compare.

Reproduce: ``.venv/bin/python -m bench.bench_etcd_watches [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import BenchmarkResult, CpuMeter, Size, median_ms_figures, script_main
from controlplane.storage import EmbeddedEtcd, EtcdStore

NAME = "etcd-watches"
VALUE = b"x" * 2000
WATCHES = 4
PREFIX = "/bench/"
KEY = PREFIX + "k"


@dataclass(frozen=True, slots=True)
class Plan:
    updates: int
    repeats: int


PLANS = {
    Size.TINY: Plan(updates=100, repeats=2),
    Size.QUICK: Plan(updates=1000, repeats=5),
    Size.FULL: Plan(updates=3000, repeats=7),
}


async def measure(plan: Plan) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"etcd": [], "client": []}
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-watches-") as tmp:
        etcd = EmbeddedEtcd(Path(tmp))
        url = await etcd.start()
        try:
            pid = etcd.pid
            if pid is None:
                raise RuntimeError("the embedded etcd is not running")
            meter = CpuMeter({"etcd": pid})  # and "client": this process
            async with EtcdStore([url], tls=etcd.client_tls) as store:
                revision = (await store.create(KEY, VALUE)).mod_revision
                seen = [0] * WATCHES
                target = 0
                caught_up = asyncio.Event()

                async def follow(index: int, start: int) -> None:
                    async for _ in store.watch(PREFIX, from_revision=start):
                        seen[index] += 1
                        if min(seen) >= target:
                            caught_up.set()

                async def updates(count: int) -> None:
                    nonlocal revision, target
                    target = min(seen) + count
                    caught_up.clear()
                    for _ in range(count):
                        revision = (await store.update(KEY, VALUE, expected_revision=revision)).mod_revision
                    await caught_up.wait()

                watches = [asyncio.ensure_future(follow(i, revision + 1)) for i in range(WATCHES)]
                try:
                    await updates(100)  # warm-up: the connection, the streams, gRPC's threads
                    for _ in range(plan.repeats):
                        before = meter.sample()
                        await updates(plan.updates)
                        used = CpuMeter.delta(before, meter.sample())
                        for who in out:
                            out[who].append(used[who] / plan.updates)
                finally:
                    for watch in watches:
                        watch.cancel()
                    await asyncio.gather(*watches, return_exceptions=True)
        finally:
            await etcd.stop()
    return out


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    seconds = asyncio.run(measure(plan))
    figures, runs = median_ms_figures(seconds, lambda who: f"{who}: CPU per update with {WATCHES} watches (median)")
    details = {
        "updates": plan.updates,
        "repeats": plan.repeats,
        "watches": WATCHES,
        "value_bytes": len(VALUE),
        "cpu_ms_per_update": runs,
        "store": "EtcdStore over TLS with a client certificate, embedded etcd, in process",
    }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
