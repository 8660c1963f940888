"""Where the hub's CPU per create goes, by component, against the floor server's (issue 19).

What runs: the API benchmark's hub (``gpufed controlplane``, embedded etcd, HTTPS, admin token)
or its floor server (:mod:`bench.apifloor`), warmed with 500 creates, then ``--creates``
ConfigMaps of about 1 KiB POSTed by 64 concurrent clients exactly as :mod:`bench.bench_api`
sends them, while ``py-spy record --threads --nonblocking`` samples the server at 200 Hz. It
prints the server's CPU per create (user and system, from /proc) and the share of the samples
of each component (:data:`COMPONENTS`). A sample counts for the innermost frame that names a
component, so a library's frames (orjson, uuid, asyncio's helpers) count for the code that
called them; the gRPC poller thread is a component of its own.

py-spy counts a thread that is runnable but waiting for a core as if it ran, so on a loaded
machine the samples outnumber the CPU time; the shares are what compare, within one run.

Reproduce: ``.venv/bin/python -m bench.api_profile [--floor] [--creates N] [--raw FILE]``;
``--split FILE...`` splits saved samples (``py-spy record --format raw --threads``) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.bench_api import NAMESPACE, PLANS, WARM_NAMESPACE, ApiBench, config_map, drive, start_floor
from bench.common import CLOCK_TICKS, CpuMeter, Size, etcd_pid
from e2e.harness import ProcessGroup

WARM_CREATES = 500
SAMPLE_RATE = 200
POLLER_THREAD = "gRPC poller thread"

#: (component, frames it names); a frame's first match names it. Frames are
#: ``function (file:line)`` as py-spy writes them.
COMPONENTS: list[tuple[str, str]] = [
    ("etcd call (request, gRPC call, reply)",
     r"storage/etcd/(unary|calls|wire)\.py|EtcdStore\.create|grpc/_cython|aetcd/"),
    ("etcd watch stream (the watch cache's)", r"storage/etcd/watching\.py|grpc/aio/_call\.py|storage/wrapping\.py"),
    ("watch cache and fan-out", r"apiserver/watchcache/|apiserver/watching\.py"),
    ("controllers' informers and handlers", r"controlplane/(controllers|scheduler|admission|objectclient)/"),
    ("storage layers (recent values, write ledger)",
     r"storage/recent\.py|storage/ledger\.py|objects/reading\.py.*store_call|allocating\.py.*stored_with"),
    ("managedFields", r"apiserver/patching/|apiserver/patches\.py"),
    ("validation and defaulting", r"apiserver/validation\.py|apiserver/openapi/|controlplane/apis/|apiserver/admission\.py"),
    ("body decode", r"apiserver/decoding\.py|ResourceHandlers\._body"),
    ("encode", r"apiserver/codec\.py|stored_form|json_response"),
    ("authentication, authorization", r"apiserver/auth/|auth_middleware|authoriz"),
    ("flow control (APF)", r"apiserver/flowcontrol/"),
    ("metrics", r"controlplane/metrics\.py|prometheus_client/"),
    ("routing, middleware, negotiation", r"apiserver/(routing|app|negotiation|serving|errors)\.py"),
    ("create handler (uid, timestamps, writer)",
     r"apiserver/(handlers|allocating|computed|resources)\.py|apiserver/objects/|serviceallocation/"),
    ("floor server's handler", r"bench/apifloor\.py"),
    ("garbage-collector policy", r"gcpolicy\.py"),
    ("event-loop watchdog thread", r"loopwatch\.py"),
    ("logging", r"/logging/|logging_setup"),
    ("aiohttp HTTP, TLS", r"aiohttp/|multidict|yarl/|sslproto\.py|ssl\.py|selector_events\.py|aiosignal/"),
    ("event loop", r"asyncio/base_events\.py|selectors\.py|asyncio/events\.py"),
]
_COMPILED = [(name, re.compile(pattern)) for name, pattern in COMPONENTS]


def component(frame: str) -> str | None:
    return next((name for name, pattern in _COMPILED if pattern.search(frame)), None)


@dataclass(slots=True)
class Split:
    samples: int
    shares: dict[str, float]


def split(raw: str) -> Split:
    """Shares of ``raw`` (py-spy's ``--format raw --threads``: ``thread;frame;...;frame count``)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        thread, *frames = stack.split(";")
        if "_poll_wrapper" in thread:
            name = POLLER_THREAD
        else:
            name = next((found for found in map(component, reversed(frames)) if found), "other")
        counts[name] += int(count)
    total = sum(counts.values())
    return Split(total, {name: n / total for name, n in counts.items()} if total else {})


def table(splits: list[tuple[str, Split]]) -> str:
    names = sorted({n for _, s in splits for n in s.shares}, key=lambda n: -splits[0][1].shares.get(n, 0.0))
    lines = ["| component | " + " | ".join(title for title, _ in splits) + " |"]
    lines.append("|---|" + "---|" * len(splits))
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{100 * s.shares.get(name, 0.0):.1f} %" for _, s in splits) + " |")
    lines.append("| samples | " + " | ".join(f"{s.samples:,}" for _, s in splits) + " |")
    return "\n".join(lines)


def _user_system(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


async def _profile(bench: ApiBench, *, pid: int, base: str, creates: int, raw: Path) -> str:
    async with bench._session(PLANS[Size.QUICK].concurrency) as session:
        await bench._create_namespace(session, NAMESPACE)
        await bench._create_namespace(session, WARM_NAMESPACE)
        warm = [orjson.dumps(config_map(f"warm-{i}", WARM_NAMESPACE)) for i in range(WARM_CREATES)]
        warm_url = f"{base}/api/v1/namespaces/{WARM_NAMESPACE}/configmaps"
        await drive("warm-up", range(WARM_CREATES), 64, lambda i: bench._post(session, warm_url, warm[i]), bench.meter)
        bodies = [orjson.dumps(config_map(f"obj-{i:05d}")) for i in range(creates)]
        url = f"{base}/api/v1/namespaces/{NAMESPACE}/configmaps"
        spy = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pid), "-r", str(SAMPLE_RATE),
            "--format", "raw", "--threads", "--nonblocking", "-o", str(raw),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(1.0)  # py-spy attaches
        user, system = _user_system(pid)
        phase = await drive("creates", range(creates), 64, lambda i: bench._post(session, url, bodies[i]), bench.meter)
        user_after, system_after = _user_system(pid)
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples and exits
        await asyncio.wait_for(spy.wait(), timeout=60)
    if phase.errors:
        raise RuntimeError(f"{phase.errors} of {creates} creates failed")
    return (
        f"{creates} creates at {phase.rate:,.0f}/s; server CPU per create "
        f"{1000 * (user_after - user + system_after - system) / creates:.3f} ms "
        f"(user {1000 * (user_after - user) / creates:.3f}, system {1000 * (system_after - system) / creates:.3f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor", action="store_true", help="profile the floor server instead of the hub")
    parser.add_argument("--creates", type=int, default=20_000)
    parser.add_argument("--raw", type=Path, help="keep py-spy's samples in this file")
    parser.add_argument("--split", type=Path, nargs="+", help="only split these saved samples, side by side")
    args = parser.parse_args()
    if args.split:
        print(table([(path.name, split(path.read_text())) for path in args.split]))
        return 0
    with tempfile.TemporaryDirectory(prefix="gpufed-api-profile-") as tmp:
        root = Path(tmp)
        raw = args.raw or root / "samples.txt"
        group = ProcessGroup(root=root)
        try:
            hub_proc, hub = group.start_hub("hub")
            assert hub_proc.popen is not None
            pid, base, floor_url = hub_proc.popen.pid, "", "https://127.0.0.1:1"
            if args.floor:
                floor_proc, floor_url = start_floor(group, root / "hub")
                assert floor_proc.popen is not None
                pid = floor_proc.popen.pid
            pids = {"server": pid}
            etcd = etcd_pid(root / "hub" / "etcd" / "etcd")
            if etcd is not None:
                pids["etcd"] = etcd
            bench = ApiBench(
                PLANS[Size.QUICK], kubeconfig=hub.kubeconfig, etcd_dir=root / "hub" / "etcd", floor_url=floor_url,
                meter=CpuMeter(pids),
            )
            base = bench.floor_base if args.floor else bench.base
            summary = asyncio.run(_profile(bench, pid=pid, base=base, creates=args.creates, raw=raw))
        finally:
            group.stop_all()
        print(summary)
        print(table([("floor" if args.floor else "hub", split(raw.read_text()))]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
