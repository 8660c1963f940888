"""What one etcd call costs the hub and etcd (issue 19): CPU per ``EtcdStore`` update, get and create,
over each way the hub can reach its embedded etcd, unfenced and fenced.

What runs: one embedded etcd per transport -- a Unix socket in a private directory without TLS
(the hub's default) and TCP with TLS and a client certificate (``--embedded-etcd-transport tls``,
and what any external etcd over https:// costs) -- and the hub's ``EtcdStore`` on each, in this
process. Updates are compare-and-swap updates of a 2 KB value named by the revision they were
made from, as the hub's object layer makes them; gets read one key; creates make new keys;
"fenced" updates and creates carry a write guard on a leader key, as every write of the hub's
controllers does (``FencedStore``: the write holds only while the controllers' leader term does). Each
kind of call runs sequentially (one at a time: the cost of a lone call, gRPC's threads handing
over each reply) and updates also from 32 concurrent tasks (as under load, where replies arrive
together). Kinds and transports alternate within each repetition so that load from elsewhere on
the machine hits them alike. Figures: CPU milliseconds per call of this process
(``time.process_time``: every thread, gRPC's poller and event-engine threads included) and of
the etcd server (its utime + stime from ``/proc/<pid>/stat``, in clock ticks of 10 ms: read the
etcd figures at ``--size quick`` or larger), medians over the repetitions.

Run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to it, to compare.

Reproduce: ``.venv/bin/python -m bench.bench_etcd_calls [--size tiny|quick|full] [--transports unix,tls] [--json FILE]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import BenchmarkResult, CpuMeter, Size, benchmark_main, median_ms_figures
from controlplane.storage import EmbeddedEtcd, EtcdClientTransport, EtcdStore
from controlplane.storage.etcd import WriteGuard

NAME = "etcd-calls"
VALUE = b"x" * 2000
CONCURRENCY = 32
KINDS = ("update", "update, 32 concurrent", "get", "create", "update, fenced", "create, fenced")
DEFAULT_TRANSPORTS = (EtcdClientTransport.UNIX, EtcdClientTransport.TLS)


@dataclass(frozen=True, slots=True)
class Plan:
    calls: int
    repeats: int


PLANS = {
    Size.TINY: Plan(calls=100, repeats=2),
    Size.QUICK: Plan(calls=1000, repeats=5),
    Size.FULL: Plan(calls=3000, repeats=7),
}


@dataclass(slots=True)
class Target:
    """One etcd, the store on it, and the keys and revisions its calls update."""

    transport: EtcdClientTransport
    etcd: EmbeddedEtcd
    store: EtcdStore
    revisions: list[int] = field(default_factory=list)
    created: int = 0
    #: The fenced calls' guard: a key standing for the controllers' leader key.
    guards: tuple[WriteGuard, ...] = ()

    async def update(self, worker: int) -> None:
        kv = await self.store.update(f"/bench/k{worker}", VALUE, expected_revision=self.revisions[worker])
        self.revisions[worker] = kv.mod_revision

    async def get(self, worker: int) -> None:
        await self.store.get(f"/bench/k{worker}")

    async def create(self, _worker: int) -> None:
        self.created += 1
        await self.store.create(f"/bench/new/{self.created}", VALUE)

    async def update_fenced(self, worker: int) -> None:
        kv = await self.store.update(
            f"/bench/k{worker}", VALUE, expected_revision=self.revisions[worker], guards=self.guards
        )
        self.revisions[worker] = kv.mod_revision

    async def create_fenced(self, _worker: int) -> None:
        self.created += 1
        await self.store.create(f"/bench/new/{self.created}", VALUE, guards=self.guards)


async def cpu_per_call(
    calls: int, workers: int, call: Callable[[int], Awaitable[object]], *, etcd_pid: int
) -> tuple[float, float]:
    """CPU seconds per call of this process and of etcd, for ``calls`` calls from ``workers``
    concurrent tasks (worker ``w`` passes ``w``)."""

    async def worker(index: int) -> None:
        for _ in range(calls // workers):
            await call(index)

    meter = CpuMeter({"etcd": etcd_pid})
    before = meter.sample()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    used = CpuMeter.delta(before, meter.sample())
    made = calls // workers * workers
    return used["client"] / made, used["etcd"] / made


@contextlib.asynccontextmanager
async def target(transport: EtcdClientTransport, data_dir: Path) -> AsyncIterator[Target]:
    etcd = EmbeddedEtcd(data_dir, transport=transport)
    url = await etcd.start()
    try:
        async with EtcdStore([url], tls=etcd.client_tls) as store:
            revisions = [(await store.create(f"/bench/k{w}", VALUE)).mod_revision for w in range(CONCURRENCY)]
            leader = await store.create("/bench/leader", b"term")
            guards = (WriteGuard(key="/bench/leader", create_revision=leader.create_revision),)
            yield Target(transport, etcd, store, revisions, guards=guards)
    finally:
        await etcd.stop()


async def measure(plan: Plan, transports: Sequence[EtcdClientTransport]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {
        f"{transport}: {kind}{side}": [] for transport in transports for kind in KINDS for side in ("", " (etcd)")
    }
    # A short directory: a Unix socket path is limited to 107 bytes.
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-etcd-") as tmp:
        async with contextlib.AsyncExitStack() as stack:
            targets = [
                await stack.enter_async_context(target(transport, Path(tmp) / transport))
                for transport in transports
            ]
            for each in targets:  # warm-up: the connection, gRPC's threads
                await cpu_per_call(100, 1, each.update, etcd_pid=each.etcd.pid or 0)
            for _ in range(plan.repeats):
                for kind in KINDS:
                    for each in targets:
                        pid = each.etcd.pid or 0
                        if kind == "update, 32 concurrent":
                            hub, etcd = await cpu_per_call(plan.calls, CONCURRENCY, each.update, etcd_pid=pid)
                        else:
                            call = {
                                "update": each.update,
                                "get": each.get,
                                "create": each.create,
                                "update, fenced": each.update_fenced,
                                "create, fenced": each.create_fenced,
                            }[kind]
                            hub, etcd = await cpu_per_call(plan.calls, 1, call, etcd_pid=pid)
                        out[f"{each.transport}: {kind}"].append(hub)
                        out[f"{each.transport}: {kind} (etcd)"].append(etcd)
    return out


def run(size: Size, *, transports: Sequence[EtcdClientTransport] = DEFAULT_TRANSPORTS) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    seconds = asyncio.run(measure(plan, transports))
    figures, runs = median_ms_figures(
        seconds,
        lambda key: f"{key.removesuffix(' (etcd)')}: etcd CPU per call (median)"
        if key.endswith(" (etcd)")
        else f"{key}: CPU per call (median)",
    )
    details = {
        "calls": plan.calls,
        "repeats": plan.repeats,
        "value_bytes": len(VALUE),
        "cpu_ms_per_call": runs,
        "store": "EtcdStore in process, one embedded etcd per transport: "
        "unix = Unix socket without TLS, tls = TCP with TLS and a client certificate",
    }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


OPTIONS = argparse.ArgumentParser(add_help=False)
OPTIONS.add_argument(
    "--transports", default="unix,tls", metavar="NAME,...",
    help="how the store reaches etcd, alternated: unix (socket, no TLS), tls (TCP, TLS), plain (TCP) (default unix,tls)",
)


def main(argv: Sequence[str]) -> int:
    options, _ = OPTIONS.parse_known_args(argv)
    transports = tuple(EtcdClientTransport(name) for name in options.transports.split(",") if name)
    bound = functools.partial(run, transports=transports)
    return benchmark_main(bound, argv, description=(__doc__ or "").splitlines()[0], parents=(OPTIONS,))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
