"""Hub API throughput against raw etcd, and GET/LIST latency (issue 2).

What runs: a real hub (``gpufed controlplane``, its own process, embedded etcd, HTTPS,
bearer-token auth) started as a user starts it. This process is the client: one aiohttp
session with 64 connections for the hub (64 concurrent clients, each POSTing ConfigMaps
of about 1 KiB with the admin token), and one gRPC channel (aetcd's etcd stubs, the way the
hub reaches its etcd: its Unix socket, or TCP with its TLS client certificate under
``--embedded-etcd-transport tls``, and gRPC's settings as the hub has them:
:mod:`controlplane.storage.grpcsettings`) with 64 concurrent ``put``s of the
very bytes the hub stored for such an object to the same etcd (under a key prefix the
hub does not watch). A third phase sends the hub's POSTs to the floor server
(:mod:`bench.apifloor`, its own process: the hub's TLS, aiohttp, orjson and one
``EtcdStore`` create, nothing else), which shows what no server can avoid. The phases
alternate (raw, hub, floor, raw, hub, floor, ...) so that a burst of load from elsewhere on
the machine hits all three; the figure is the ratio of total hub creates/s to total raw
puts/s (target >= 0.5), with the floor's ratios beside it. The hub's creates are also the data set of
the LIST: afterwards one client GETs single objects (p50/p99) and LISTs the namespace
holding all of them, unpaginated (p50/p99 until the last byte arrives; the body is
parsed once, outside the timing, to check the count).

Why a separate hub process: in one process the client's TLS and JSON work would share
the hub's event loop and inflate its latency. On a 2-core machine the client process,
the hub and etcd still contend for CPU (the client uses about as much CPU as the hub
does for raw puts), so the ratio is measured with the same client overhead on both
sides; the per-phase CPU seconds of the hub, etcd and this client, and their CPU
milliseconds per operation, are reported in the details to show where the time went.

Reproduce: ``.venv/bin/python -m bench.bench_api [--size quick|full] [--json FILE]``
"""

from __future__ import annotations

# The raw puts run gRPC as the hub does: its settings go into the environment before gRPC loads.
import controlplane.storage.grpcsettings  # noqa: F401

# isort: split
import asyncio
import logging
import random
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aetcd import rpc

from bench import apifloor
from bench.common import (
    BenchmarkResult,
    CpuMeter,
    Figure,
    Size,
    at_least,
    etcd_pid,
    failed_run,
    latency_summary,
    percentile,
    script_main,
)
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from controlplane.storage.connecting import grpc_target
from e2e.harness import Process, ProcessGroup, wait_for

log = logging.getLogger(__name__)

NAME = "api"
NAMESPACE = "bench-api"
WARM_NAMESPACE = "bench-warm"
#: Where the hub's EtcdStore keeps objects (its default prefix) and where raw puts go.
HUB_KEY_PREFIX = "/gpufed/registry/core/configmaps"
RAW_KEY_PREFIX = "/bench-raw/configmaps"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=60)
PUT_TIMEOUT = 30.0
#: aiohttp closes TLS transports a moment after the session (its documented graceful shutdown).
SSL_CLOSE_GRACE = 0.25
RATIO_TARGET = 0.5

#: About 1 KiB of configuration, the size of a typical workload ConfigMap.
PAYLOAD = "\n".join(
    f"{key}: {value}"
    for key, value in [
        ("model", "llama-3-8b-instruct"),
        ("precision", "bf16"),
        ("max_batch_size", "64"),
        ("max_sequence_length", "8192"),
        ("tensor_parallel", "2"),
        ("kv_cache_fraction", "0.85"),
        ("tokenizer", "s3://models.example.com/llama-3-8b/tokenizer.json"),
        ("weights", "s3://models.example.com/llama-3-8b/weights/"),
        ("metrics_port", "9400"),
        ("log_level", "info"),
    ]
    + [(f"feature_flag_{i:02d}", "enabled" if i % 3 else "disabled") for i in range(24)]
)


@dataclass(frozen=True, slots=True)
class Plan:
    objects: int
    concurrency: int
    gets: int
    lists: int
    rounds: int


PLANS = {
    Size.TINY: Plan(objects=120, concurrency=8, gets=20, lists=3, rounds=2),
    Size.QUICK: Plan(objects=2000, concurrency=64, gets=300, lists=5, rounds=2),
    Size.FULL: Plan(objects=10_000, concurrency=64, gets=2000, lists=20, rounds=2),
}


@dataclass(slots=True)
class Phase:
    """One timed burst of operations."""

    kind: str
    ops: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ops": self.ops,
            "seconds": round(self.seconds, 3),
            "ops_per_s": round(self.rate, 1),
            "errors": self.errors,
            "latency": latency_summary(self.latencies),
            "cpu_seconds": {k: round(v, 2) for k, v in self.cpu_seconds.items()},
        }


def cpu_ms_per_op(phases: list[Phase]) -> dict[str, float]:
    """CPU milliseconds per operation of each measured process over ``phases``."""
    ops = sum(p.ops for p in phases)
    names = sorted({name for p in phases for name in p.cpu_seconds})
    return {
        name: round(1000 * sum(p.cpu_seconds.get(name, 0.0) for p in phases) / ops, 3) if ops else 0.0
        for name in names
    }


def of_kind(phases: list[Phase], kind: str) -> list[Phase]:
    return [p for p in phases if p.kind == kind]


def total_rate(phases: list[Phase]) -> float:
    """Operations per second over ``phases`` together (total operations / total seconds)."""
    seconds = sum(p.seconds for p in phases)
    return sum(p.ops for p in phases) / seconds if seconds else 0.0


def config_map(name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench", "tier": "api"}},
        "data": {"server.yaml": PAYLOAD},
    }


async def settle(
    meter: CpuMeter, *, idle_share: float = 0.05, window: float = 0.25, limit: float = 15.0
) -> float:
    """Wait until the hub and etcd are idle (use under ``idle_share`` of a core over
    ``window`` seconds) so that one phase's after-work (watch fan-out, controllers) is not
    billed to the next. Returns the seconds waited (at most ``limit``)."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        before = meter.sample()
        await asyncio.sleep(window)
        used = CpuMeter.delta(before, meter.sample())
        if all(v < idle_share * window for k, v in used.items() if k != "client"):
            break
    return time.perf_counter() - started


async def drive(
    kind: str, batch: range, concurrency: int, op: Callable[[int], Awaitable[bool]], meter: CpuMeter
) -> Phase:
    """Run ``op(i)`` for every ``i`` in ``batch`` from ``concurrency`` concurrent workers
    (one shared iterator: a worker takes the next index when its call returns)."""
    ops = len(batch)
    indexes = iter(batch)
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        for index in indexes:
            started = time.perf_counter()
            ok = await op(index)
            latencies.append(time.perf_counter() - started)
            errors += not ok

    settled = await settle(meter)
    cpu_before = meter.sample()
    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    elapsed = time.perf_counter() - started
    phase = Phase(kind, ops, elapsed, latencies, errors, CpuMeter.delta(cpu_before, meter.sample()))
    log.info(
        "%s: %d ops in %.2fs = %.0f/s (%d errors; waited %.1fs for idle before)",
        kind,
        ops,
        elapsed,
        phase.rate,
        errors,
        settled,
    )
    return phase


class ApiBench:
    """The measurements against one running hub, its etcd and the floor server beside them."""

    def __init__(
        self, plan: Plan, *, kubeconfig: Path, etcd_dir: Path, floor_url: str, meter: CpuMeter
    ) -> None:
        self.plan = plan
        self.credentials = load_kubeconfig(kubeconfig)
        self.etcd_dir = etcd_dir
        self.meter = meter
        self.base = self.credentials.server.rstrip("/")
        self.floor_base = floor_url.rstrip("/")

    def _session(self, connections: int) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            ssl=client_ssl_context(self.credentials.ca_pem), limit=connections, limit_per_host=connections
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=REQUEST_TIMEOUT,
            headers={
                "Authorization": f"Bearer {self.credentials.token}",
                "Accept": "application/json",
                "Content-Type": "application/json",
            },
        )

    async def _post(self, session: aiohttp.ClientSession, url: str, body: bytes) -> bool:
        async with session.post(url, data=body) as response:
            await response.read()
            return response.status == 201

    async def _create_namespace(self, session: aiohttp.ClientSession, name: str) -> None:
        body = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        async with session.post(f"{self.base}/api/v1/namespaces", data=body) as response:
            text = await response.text()
            if response.status not in (201, 409):
                raise RuntimeError(f"creating namespace {name}: HTTP {response.status}: {text[:300]}")

    async def run(self) -> tuple[list[Figure], dict[str, Any]]:
        plan = self.plan
        etcd = RawEtcd(self.etcd_dir)
        try:
            # The floor has a session (a connection pool) of its own, as a separate client would.
            async with self._session(plan.concurrency) as session, self._session(plan.concurrency) as floor:
                return await self._measure(session, floor, etcd)
        finally:
            await etcd.close()
            await asyncio.sleep(SSL_CLOSE_GRACE)

    async def _measure(
        self, session: aiohttp.ClientSession, floor: aiohttp.ClientSession, etcd: RawEtcd
    ) -> tuple[list[Figure], dict[str, Any]]:
        plan = self.plan
        await self._create_namespace(session, NAMESPACE)
        await self._create_namespace(session, WARM_NAMESPACE)

        # Warm-up: open every connection, fill the hub's caches, and learn the stored bytes.
        warm_bodies = [orjson.dumps(config_map(f"warm-{i}", WARM_NAMESPACE)) for i in range(plan.concurrency)]
        warm_path = f"/api/v1/namespaces/{WARM_NAMESPACE}/configmaps"
        await drive(
            "warm-up hub",
            range(len(warm_bodies)),
            plan.concurrency,
            lambda i: self._post(session, self.base + warm_path, warm_bodies[i]),
            self.meter,
        )
        await drive(
            "warm-up floor",
            range(len(warm_bodies)),
            plan.concurrency,
            lambda i: self._post(floor, self.floor_base + warm_path, warm_bodies[i]),
            self.meter,
        )
        stored = await etcd.get(f"{HUB_KEY_PREFIX}/{WARM_NAMESPACE}/warm-0".encode())
        if stored is None:
            raise RuntimeError(f"the hub's object is not at {HUB_KEY_PREFIX}/{WARM_NAMESPACE}/warm-0 in etcd")
        value: bytes = stored

        async def raw_put(index: int) -> bool:
            async with asyncio.timeout(PUT_TIMEOUT):
                await etcd.put(f"{RAW_KEY_PREFIX}/{index}".encode(), value)
            return True

        await drive("warm-up raw", range(plan.concurrency), plan.concurrency, raw_put, self.meter)

        bodies = [orjson.dumps(config_map(f"obj-{i:05d}")) for i in range(plan.objects)]
        create_path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"

        async def create(index: int) -> bool:
            return await self._post(session, self.base + create_path, bodies[index])

        async def floor_create(index: int) -> bool:
            return await self._post(floor, self.floor_base + create_path, bodies[index])

        per_round = -(-plan.objects // plan.rounds)
        phases: list[Phase] = []
        for round_index in range(plan.rounds):
            first = round_index * per_round
            count = min(per_round, plan.objects - first)
            batch = range(first, first + count)
            phases.append(await drive("raw put", batch, plan.concurrency, raw_put, self.meter))
            phases.append(await drive("hub create", batch, plan.concurrency, create, self.meter))
            phases.append(await drive("floor create", batch, plan.concurrency, floor_create, self.meter))
        raw, hub, floor_phases = (of_kind(phases, kind) for kind in ("raw put", "hub create", "floor create"))
        raw_rate, hub_rate, floor_rate = (total_rate(measured) for measured in (raw, hub, floor_phases))
        for measured in (hub, floor_phases):
            errors = sum(p.errors for p in measured)
            if errors:
                raise RuntimeError(f"{errors} of {plan.objects} {measured[0].kind}s failed")
        floor_stored = await etcd.count(f"{apifloor.FLOOR_PREFIX}/configmaps/{NAMESPACE}/".encode())
        if floor_stored != plan.objects:
            raise RuntimeError(f"the floor stored {floor_stored} objects in etcd, expected {plan.objects}")

        get_latencies = await self._gets(session)
        list_latencies, listed = await self._lists(session)
        if listed != plan.objects:
            raise RuntimeError(f"LIST returned {listed} objects, expected {plan.objects}")

        ratio = hub_rate / raw_rate
        figures = [
            Figure("hub create / raw etcd put ratio", round(ratio, 3), "", at_least(RATIO_TARGET)),
            Figure(f"hub creates ({plan.concurrency} clients)", round(hub_rate, 1), "obj/s"),
            Figure(f"raw aetcd puts ({plan.concurrency} concurrent)", round(raw_rate, 1), "puts/s"),
            Figure(f"floor creates ({plan.concurrency} clients)", round(floor_rate, 1), "obj/s"),
            Figure("floor create / raw etcd put ratio", round(floor_rate / raw_rate, 3), ""),
            Figure("hub create / floor create ratio", round(hub_rate / floor_rate, 3), ""),
            Figure("hub CPU per create", cpu_ms_per_op(hub).get("hub", 0.0), "ms"),
            Figure("floor server CPU per create", cpu_ms_per_op(floor_phases).get("floor", 0.0), "ms"),
            Figure(
                "create latency p99",
                round(percentile([x for p in hub for x in p.latencies], 99) * 1000, 1),
                "ms",
            ),
            Figure("GET p50", round(percentile(get_latencies, 50) * 1000, 2), "ms"),
            Figure("GET p99", round(percentile(get_latencies, 99) * 1000, 2), "ms"),
            Figure(
                f"LIST {plan.objects:,} objects p50", round(percentile(list_latencies, 50) * 1000, 1), "ms"
            ),
            Figure(
                f"LIST {plan.objects:,} objects p99", round(percentile(list_latencies, 99) * 1000, 1), "ms"
            ),
        ]
        details = {
            "objects": plan.objects,
            "concurrency": plan.concurrency,
            "object_bytes_stored": len(value),
            "request_body_bytes": len(bodies[0]),
            "hub_creates_per_s": round(hub_rate, 1),
            "raw_puts_per_s": round(raw_rate, 1),
            "ratio": round(ratio, 4),
            "floor_creates_per_s": round(floor_rate, 1),
            "floor_ratio": round(floor_rate / raw_rate, 4),
            "hub_over_floor": round(hub_rate / floor_rate, 4),
            "round_ratios": [round(h.rate / r.rate, 4) for r, h in zip(raw, hub, strict=True)],
            "round_floor_ratios": [round(f.rate / r.rate, 4) for r, f in zip(raw, floor_phases, strict=True)],
            "cpu_ms_per_op": {
                "hub create": cpu_ms_per_op(hub),
                "raw put": cpu_ms_per_op(raw),
                "floor create": cpu_ms_per_op(floor_phases),
            },
            "phases": [p.as_dict() for p in phases],
            "get": latency_summary(get_latencies),
            "list": latency_summary(list_latencies),
            "list_objects": listed,
            "floor_objects_stored": floor_stored,
        }
        return figures, details

    async def _gets(self, session: aiohttp.ClientSession) -> list[float]:
        rng = random.Random(7)
        latencies: list[float] = []
        for _ in range(self.plan.gets):
            name = f"obj-{rng.randrange(self.plan.objects):05d}"
            started = time.perf_counter()
            async with session.get(
                f"{self.base}/api/v1/namespaces/{NAMESPACE}/configmaps/{name}"
            ) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"GET {name}: HTTP {response.status}")
            latencies.append(time.perf_counter() - started)
        return latencies

    async def _lists(self, session: aiohttp.ClientSession) -> tuple[list[float], int]:
        latencies: list[float] = []
        body = b""
        for _ in range(self.plan.lists):
            started = time.perf_counter()
            async with session.get(f"{self.base}/api/v1/namespaces/{NAMESPACE}/configmaps") as response:
                body = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"LIST: HTTP {response.status}: {body[:300]!r}")
            latencies.append(time.perf_counter() - started)
        items = orjson.loads(body).get("items") or []
        # The namespace also holds kube-root-ca.crt, which the hub publishes in every namespace.
        ours = [item for item in items if (item.get("metadata", {}).get("labels") or {}).get("app") == "bench"]
        return latencies, len(ours)


class RawEtcd:
    """etcd's KV service reached as the hub reaches it (the embedded etcd's socket, else TCP with
    the hub's TLS client certificate): gRPC stubs only, no gpufed code on the path, so a put
    costs what etcd and gRPC cost."""

    def __init__(self, etcd_dir: Path) -> None:
        url, tls = apifloor.embedded_etcd(etcd_dir)
        target = grpc_target([url])
        if tls is None:
            self._channel = rpc.insecure_channel(target)
        else:
            self._channel = rpc.secure_channel(target, tls.channel_credentials())
        self._kv = rpc.KVStub(self._channel)

    async def get(self, key: bytes) -> bytes | None:
        response = await self._kv.Range(rpc.RangeRequest(key=key), timeout=PUT_TIMEOUT)
        return bytes(response.kvs[0].value) if response.kvs else None

    async def count(self, prefix: bytes) -> int:
        """How many keys start with ``prefix``."""
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        response = await self._kv.Range(
            rpc.RangeRequest(key=prefix, range_end=end, count_only=True), timeout=PUT_TIMEOUT
        )
        return int(response.count)

    async def put(self, key: bytes, value: bytes) -> None:
        await self._kv.Put(rpc.PutRequest(key=key, value=value), timeout=PUT_TIMEOUT)

    async def close(self) -> None:
        await self._channel.close()


def start_floor(group: ProcessGroup, hub_state: Path) -> tuple[Process, str]:
    """Start the floor server (:mod:`bench.apifloor`) on the hub's etcd and serving certificate;
    returns it and its URL once it serves."""
    proc = group.start_raw("floor", [
        sys.executable, str(Path(apifloor.__file__).resolve()), "--etcd-dir", str(hub_state / "etcd"),
        "--pki-dir", str(hub_state / "pki"), "--listen", "127.0.0.1:0",
    ])
    listening = re.compile(r"^listening on (\d+)$", re.MULTILINE)
    found = wait_for(
        lambda: listening.search(proc.log()) or not proc.alive(), timeout=30, what="the floor server to listen"
    )
    if not isinstance(found, re.Match):
        raise RuntimeError(f"the floor server exited:\n{proc.log()[-4000:]}")
    return proc, f"https://127.0.0.1:{found.group(1)}"


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-api-") as tmp:
        root = Path(tmp)
        group = ProcessGroup(root=root)
        try:
            hub_proc, hub = group.start_hub("hub")
            state = root / "hub"
            assert hub_proc.popen is not None
            floor_proc, floor_url = start_floor(group, state)
            assert floor_proc.popen is not None
            pids = {"hub": hub_proc.popen.pid, "floor": floor_proc.popen.pid}
            etcd = etcd_pid(state / "etcd" / "etcd")
            if etcd is not None:
                pids["etcd"] = etcd
            bench = ApiBench(
                plan, kubeconfig=hub.kubeconfig, etcd_dir=state / "etcd", floor_url=floor_url,
                meter=CpuMeter(pids),
            )
            figures, details = asyncio.run(bench.run())
        except Exception as exc:
            return failed_run(NAME, size, exc, logs=group.dump_logs()[-4000:], started=started)
        finally:
            group.stop_all()
    details["hub"] = "separate process (gpufed controlplane, embedded etcd), HTTPS + bearer token"
    details["hub_event_loop"] = "asyncio"
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
