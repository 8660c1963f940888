"""Watch delivery: the hub's CPU per watch event delivered over HTTPS, the hub alone.

What runs: a hub (``gpufed controlplane``, embedded etcd) with no members, and the scale
benchmark's watch fan-out (``bench/watch_fanout.py``): N watch streams of Works, each its own
HTTPS connection, in its mix of selectors, and probe Works patched at a steady rate. The
figure is the hub process's CPU seconds over the steady writes and their deliveries -- not
the watchers' TLS handshakes and warm-up -- divided by the deliveries (the PATCHes' own
handling and the hub's background work are in it). Without a fleet the figure moves less with
the rest of the hub's work than ``bench_scale``'s fan-out phase does; the latency figures are
the fan-out's own (from each PATCH's reply to the watcher's read).

Reproduce: ``.venv/bin/python -m bench.watch_delivery [--size tiny|quick|full] [--json FILE]``
(run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to it, to compare).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BenchmarkResult, CpuMeter, Figure, Size, at_most, failed_run, percentile, script_main
from bench.hubdriving import Hub
from bench.watch_fanout import FanoutPlan, FanoutSummary, fan_out
from e2e.harness import ProcessGroup

NAME = "watch-delivery"
PLANS = {
    Size.TINY: FanoutPlan(watchers=20, namespaces=2, groups=2, rate=5.0, seconds=3),
    Size.QUICK: FanoutPlan(watchers=1000, namespaces=10, groups=4, rate=10.0, seconds=20),
    Size.FULL: FanoutPlan(watchers=1000, namespaces=20, groups=4, rate=20.0, seconds=60),
}


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-delivery-") as tmp:
        group = ProcessGroup(root=Path(tmp))
        try:
            hub_proc, hub = group.start_hub("hub", "--log-level", "WARNING")
            assert hub_proc.popen is not None
            meter = CpuMeter({"hub": hub_proc.popen.pid})

            async def measure() -> tuple[FanoutSummary, dict[str, Any]]:
                async with Hub.connect(hub.kubeconfig) as admin:
                    return await fan_out(admin, hub.kubeconfig, plan, meter=meter)

            summary, details = asyncio.run(measure())
        except Exception as exc:
            return failed_run(NAME, size, exc, logs=group.dump_logs()[-6000:], started=started)
        finally:
            group.stop_all()
    cpu = details.get("steady_cpu")
    hub_cpu = cpu.get("hub", 0.0) if isinstance(cpu, dict) else 0.0
    delivered = summary.expected - summary.missed
    delays_ms = [delay * 1000 for delay in summary.delays]
    figures = [
        Figure("deliveries (of the writes' matching watchers)", delivered),
        Figure("deliveries missed", summary.missed, target=at_most(0)),
        Figure("watches dropped (410 or closed by the hub)", summary.dropped + summary.closed, target=at_most(0)),
        Figure("hub CPU per delivery", round(hub_cpu / delivered * 1e6, 1) if delivered else None, "us"),
        Figure("hub CPU over the writes", round(hub_cpu, 2), "s"),
        Figure("write -> watcher p50", round(percentile(delays_ms, 50), 1) if delays_ms else None, "ms"),
        Figure("write -> watcher p99", round(percentile(delays_ms, 99), 1) if delays_ms else None, "ms"),
    ]
    return BenchmarkResult(benchmark=NAME, size=size, figures=figures, details=details,
                           seconds=time.perf_counter() - started)


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
