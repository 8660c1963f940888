"""What kube's defaulting and canonical quantities cost the hub's object layer (issue 11).

What runs: the hub's object layer (``ObjectStore``) over an in-memory store, in this process,
three times over the same data: with the built-in kinds' defaulting switched off (served as
stored, the LIST spliced from the stored bytes unparsed); with it (applied on write; objects so
stored are marked and spliced unparsed too); and with objects written without it and read with
it (stored by an older hub: every GET, LIST and WATCH decodes, defaults and re-encodes them).
The data set is the README's GPU Deployment (two containers, quantities written as numbers).
Figures: creates per second and the time to encode a LIST of every object, medians over the
repetitions.

The network, TLS and etcd are left out on purpose: they cost the same with and without
defaulting, and would hide the difference on a shared 2-core machine. ``bench_api`` measures
the whole hub (its data set, ConfigMaps, has no defaults, so it is not affected).

Reproduce: ``.venv/bin/python -m bench.bench_defaulting [--size tiny|quick|full] [--json FILE]``
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import Any

from bench.common import BenchmarkResult, Figure, Size, script_main
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import MemoryStore

NAME = "defaulting"
NAMESPACE = "bench"


@dataclass(frozen=True, slots=True)
class Plan:
    objects: int
    repeats: int


PLANS = {
    Size.TINY: Plan(objects=100, repeats=3),
    Size.QUICK: Plan(objects=1000, repeats=5),
    Size.FULL: Plan(objects=5000, repeats=7),
}


def gpu_deployment(name: str) -> dict[str, Any]:
    """The README's inference Deployment, as kubectl sends it (quantities as written in YAML)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "llm-serving"}},
        "spec": {
            "replicas": 16,
            "selector": {"matchLabels": {"app": "llm-serving"}},
            "template": {
                "metadata": {"labels": {"app": "llm-serving"}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.acme.internal/ml/llm-server:2.3.0",
                            "args": ["--model", "/models/mistral-7b-instruct", "--port", "8000"],
                            "ports": [{"containerPort": 8000}],
                            "resources": {
                                "requests": {"cpu": "4", "memory": "24Gi"},
                                "limits": {"nvidia.com/gpu": 1, "memory": "24Gi"},
                            },
                        },
                        {
                            "name": "metrics",
                            "image": "registry.acme.internal/ml/exporter:1.0",
                            "resources": {"requests": {"cpu": 0.1, "memory": "128Mi"}},
                        },
                    ],
                },
            },
        },
    }


def registry(*, defaulting: bool) -> Registry:
    types = core_resources() + workload_resources()
    if not defaulting:
        types = [dataclasses.replace(rt, defaults=None, defaults_on_read=None) for rt in types]
    return Registry(types)


async def measure(plan: Plan, *, write_defaulting: bool, read_defaulting: bool) -> dict[str, list[float]]:
    """Seconds per repetition: creating ``plan.objects`` Deployments through a hub with or without
    defaulting, then encoding their LIST through one with or without it."""
    writer_registry = registry(defaulting=write_defaulting)
    reader_registry = registry(defaulting=read_defaulting)
    bodies = [gpu_deployment(f"llm-{i:05d}") for i in range(plan.objects)]
    creates: list[float] = []
    lists: list[float] = []
    for repeat in range(plan.repeats):
        async with MemoryStore() as memory:
            writer = ObjectStore(memory, writer_registry)
            reader = ObjectStore(memory, reader_registry)
            await writer.bootstrap()
            await writer.create(writer_registry.require("v1", "Namespace"), {"metadata": {"name": NAMESPACE}})
            deployments = writer_registry.require("apps/v1", "Deployment")
            fresh = [copy.deepcopy(body) for body in bodies]
            started = time.perf_counter()
            for body in fresh:
                await writer.create_encoded(deployments, body, namespace=NAMESPACE)
            creates.append(time.perf_counter() - started)
            started = time.perf_counter()
            listed = await reader.list_encoded(reader_registry.require("apps/v1", "Deployment"), namespace=NAMESPACE)
            size = sum(len(item) for item in listed.items())
            lists.append(time.perf_counter() - started)
            if repeat == 0 and size <= 0:
                raise RuntimeError("the LIST encoded nothing")
    return {"create": creates, "list": lists}


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    without = asyncio.run(measure(plan, write_defaulting=False, read_defaulting=False))
    defaulted = asyncio.run(measure(plan, write_defaulting=True, read_defaulting=True))
    old = asyncio.run(measure(plan, write_defaulting=False, read_defaulting=True))
    creates_without = plan.objects / statistics.median(without["create"])
    creates_with = plan.objects / statistics.median(defaulted["create"])
    list_without, list_with, list_old = (statistics.median(m["list"]) * 1000 for m in (without, defaulted, old))
    figures = [
        Figure(f"creates/s, {plan.objects:,} GPU Deployments, no defaulting", round(creates_without), "objects/s"),
        Figure("creates/s, with kube's defaulting", round(creates_with), "objects/s"),
        Figure("create throughput with / without", round(creates_with / creates_without, 3)),
        Figure(f"LIST of {plan.objects:,} encoded, no defaulting (median)", round(list_without, 1), "ms"),
        Figure("LIST encoded, stored defaulted (median)", round(list_with, 1), "ms"),
        Figure("LIST encoded, stored before defaulting: defaulted on read (median)", round(list_old, 1), "ms"),
    ]
    details = {
        "objects": plan.objects,
        "repeats": plan.repeats,
        "seconds": {"without": without, "defaulted": defaulted, "stored_before_defaulting": old},
        "store": "MemoryStore, in process (no network, TLS or etcd)",
    }
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
