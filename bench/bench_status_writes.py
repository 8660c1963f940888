"""What one status write costs the hub's object layer (issue 19): the agent's Work status
update and a controller's Deployment status update, CPU per write.

What runs: the hub's object layer (``ObjectStore``) over an in-memory store, in this process.
A Work carrying three GPU Deployment manifests takes status updates as an agent sends them
(with a field manager, so managedFields are recorded), and a Deployment takes status updates as
the hub's status controller writes them (replicas and the hub's Propagated condition); each
update changes the status, so each is written. Figures: CPU milliseconds per write
(``time.process_time``), medians over the repetitions.

The network, TLS and etcd are left out on purpose: they cost the same whatever the object layer
does, and would hide its part on a shared 2-core machine (``bench_ledger`` measures the whole
hub per workload). Run it from a ``git archive`` of another commit, with ``PYTHONPATH`` set to
it, to compare.

Reproduce: ``.venv/bin/python -m bench.bench_status_writes [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.bench_defaulting import gpu_deployment
from bench.common import BenchmarkResult, Figure, Size, script_main
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore

NAME = "status-writes"
NAMESPACE = "bench"
EXECUTION_NAMESPACE = "gpufed-es-bench"


@dataclass(frozen=True, slots=True)
class Plan:
    writes: int
    repeats: int


PLANS = {
    Size.TINY: Plan(writes=200, repeats=3),
    Size.QUICK: Plan(writes=1000, repeats=5),
    Size.FULL: Plan(writes=3000, repeats=7),
}


def work_status(index: int) -> dict[str, Any]:
    """An agent's report: Applied, and the member Deployment's replicas (changing with ``index``)."""
    return {
        "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful",
                        "message": "all 3 manifest(s) applied", "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "observedGeneration": 1}],
        "manifestStatuses": [{
            "identifier": {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": NAMESPACE,
                           "name": f"llm-{ordinal}", "ordinal": ordinal},
            "status": {"observedGeneration": 1, "replicas": 16, "readyReplicas": index % 17},
            "health": "Healthy" if index % 17 == 16 else "Unhealthy",
        } for ordinal in range(3)],
    }


def deployment_status(index: int) -> dict[str, Any]:
    """The status controller's aggregate, with the detector's Propagated condition kept."""
    return {
        "observedGeneration": 1, "replicas": 16, "updatedReplicas": 16, "readyReplicas": index % 17,
        "availableReplicas": index % 17,
        "conditions": [{"type": "Propagated", "status": "True", "reason": "Claimed",
                        "message": "claimed by PropagationPolicy bench/gpu", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }


async def measure(plan: Plan) -> dict[str, list[float]]:
    """CPU seconds per write, per repetition, for each kind of status write."""
    out: dict[str, list[float]] = {"work": [], "deployment": []}
    registry = hub_registry()
    for _ in range(plan.repeats):
        async with MemoryStore() as memory:
            objects = ObjectStore(memory, registry)
            await objects.bootstrap()
            namespaces = registry.require("v1", "Namespace")
            for name in (NAMESPACE, EXECUTION_NAMESPACE):
                await objects.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            works = registry.require("work.gpufed.io/v1alpha1", "Work")
            deployments = registry.require("apps/v1", "Deployment")
            work = await objects.create(works, {
                "apiVersion": "work.gpufed.io/v1alpha1", "kind": "Work",
                "metadata": {"name": "bench-llm", "namespace": EXECUTION_NAMESPACE},
                "spec": {"workload": {"manifests": [gpu_deployment(f"llm-{i}") for i in range(3)]}},
            })
            deployment = await objects.create(deployments, gpu_deployment("llm"), field_manager="kubectl")
            cases: tuple[tuple[str, Any, dict[str, Any], Callable[[int], dict[str, Any]], dict[str, Any]], ...] = (
                ("work", works, work, work_status, {"field_manager": "gpufed-agent"}),
                ("deployment", deployments, deployment, deployment_status, {}),
            )
            for label, rt, obj, status, options in cases:
                started = time.process_time()
                for index in range(plan.writes):
                    obj = await objects.update_status(rt, {**obj, "status": status(index)}, **options)
                out[label].append((time.process_time() - started) / plan.writes)
    return out


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    seconds = asyncio.run(measure(plan))
    work_ms, deployment_ms = (statistics.median(seconds[k]) * 1000 for k in ("work", "deployment"))
    figures = [
        Figure("Work status write by an agent (3 manifests), CPU per write (median)", round(work_ms, 3), "ms"),
        Figure("Deployment status write by a controller, CPU per write (median)", round(deployment_ms, 3), "ms"),
    ]
    details = {
        "writes": plan.writes,
        "repeats": plan.repeats,
        "cpu_seconds_per_write": seconds,
        "store": "MemoryStore, in process (no network, TLS or etcd)",
    }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
