"""End-to-end: workload applied to the hub -> all its replicas Running, as the hub reports
it, over 1,000 workloads on 10 simulated member clusters (issue 4).

What runs, all real processes started as a user starts them (through
:mod:`e2e.harness`): a hub (``gpufed controlplane``, embedded etcd, its controllers), 10
``gpufed sim-cluster`` members (on-prem A100s, on-prem A100s with a mixed MIG layout,
cloud H100s with a price) and 10 ``gpufed agent`` processes joined with fresh join
tokens, at the agent's default intervals (lease every 10 s, capacity report every 30 s, DCGM
every 15 s: their background work shares the machine as it would in use). One PropagationPolicy (Divided, TieredOverflow: on-prem first, overflow to the
cloud) claims every Deployment of the benchmark's namespace.

What is measured: this process creates the Deployments (1 or 2 replicas of one whole
GPU, two whole GPUs, or one ``mig-1g.10gb`` slice) at a steady rate over HTTPS with the
admin token (a POST, what ``kubectl create``/``apply`` sends for a new object), and
watches the hub's Deployments. A workload's latency runs from just before its POST to
the watch event in which the hub's ``status.readyReplicas`` (the sum over members, set by
the hub's status controller) reaches ``spec.replicas``. That covers the whole loop:
detector -> binding -> scheduler -> Work -> agent -> member apply -> member scheduler and
kubelet -> member status -> agent -> Work status -> hub status. Simulated pods start
with no delay (``startupDelaySeconds: 0``), so the figure is gpufed's own time, not an
image pull's.

Before the measurement, probe workloads are created one at a time on the idle fleet and
each stage of the loop is timed from watch events (binding created, binding Scheduled,
Work created, Work Applied, Work reporting replicas ready, hub workload Running): where
an unloaded workload's time goes. A probe must reach Running within
:data:`PROBE_TIMEOUT`; if it does not (the controllers do not place workloads yet), the
benchmark reports ``skipped`` with the stage the probe got stuck at.

CPU per placed workload (issue 19): the CPU seconds each role's processes used from the first
create until the last workload ran (or the drain window ended), over the workloads Running; the
hub's and etcd's are figures with the issue's targets (18 and 13 ms). The window holds the
fleet's background work too (leases, capacity reports), as a real fleet's does.

Reproduce: ``.venv/bin/python -m bench.bench_e2e_apply [--size quick|full] [--rate PER_S] [--workloads N] [--json FILE]``
(``--rate 30`` for the issue's busier case).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import logging
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import (
    BenchmarkResult,
    CpuMeter,
    Figure,
    Size,
    Status,
    at_least,
    at_most,
    benchmark_main,
    failed_run,
    latency_summary,
    percentile,
)
from bench.hubdriving import (
    WORKS,
    Hub,
    apply_all,
    claim_namespace,
    fleet_meter,
    follow,
    is_running,
    ready_clusters,
)
from e2e.harness import Kubectl, ProcessGroup, wait_for

log = logging.getLogger(__name__)

NAME = "e2e"
NAMESPACE = "bench-e2e"
POLICY = "bench-e2e"
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
MIG_1G = "nvidia.com/mig-1g.10gb"
GPU = "nvidia.com/gpu"
P99_TARGET_S = 1.0
#: How long the probe workload may take to run before the benchmark is skipped.
PROBE_TIMEOUT = 90.0
CLUSTERS_READY_TIMEOUT = 240.0
#: Cluster kinds in the order clusters are added: 10 clusters = 4 A100, 2 MIG, 4 H100.
CLUSTER_KINDS = ("a100", "mig", "h100", "a100", "h100", "a100", "mig", "h100", "a100", "h100")


@dataclass(frozen=True, slots=True)
class Plan:
    clusters: int
    nodes_per_cluster: int
    workloads: int
    #: Workloads created per second (an open loop: the schedule does not wait for the hub).
    rate: float
    #: Seconds to wait for the last workloads after the last one was created.
    drain_timeout: float
    #: Single workloads timed stage by stage on the idle fleet before the measurement.
    probes: int


PLANS = {
    Size.TINY: Plan(clusters=2, nodes_per_cluster=1, workloads=4, rate=4.0, drain_timeout=60, probes=1),
    Size.QUICK: Plan(clusters=10, nodes_per_cluster=12, workloads=200, rate=10.0, drain_timeout=90, probes=3),
    Size.FULL: Plan(
        clusters=10, nodes_per_cluster=32, workloads=1000, rate=10.0, drain_timeout=120, probes=3
    ),
}


#: Issue 19's targets: CPU milliseconds per placed workload of the hub and of etcd.
HUB_CPU_MS_TARGET = 18.0
ETCD_CPU_MS_TARGET = 13.0


class Skip(Exception):
    """The benchmark cannot measure here; the message says why."""


# ----------------------------------------------------------------------------- inputs


def fleet(plan: Plan) -> dict[str, Any]:
    """The member clusters, as a fleet file for ``gpufed sim-cluster``."""
    clusters = []
    for index in range(plan.clusters):
        kind = CLUSTER_KINDS[index % len(CLUSTER_KINDS)]
        group: dict[str, Any] = {"name": kind, "count": plan.nodes_per_cluster, "cpu": 96, "memoryGiB": 1024}
        entry: dict[str, Any] = {
            "name": f"{kind}-{index:02d}",
            "simulation": {"startupDelaySeconds": 0},
            "nodeGroups": [group],
        }
        if kind == "h100":
            group["gpu"] = {"product": H100, "count": 8}
            entry.update(provider="aws", region="us-east-1", pricing={H100: 4.10})
        else:
            group["gpu"] = {"product": A100, "count": 8}
            if kind == "mig":
                group["gpu"]["mig"] = {
                    "strategy": "mixed",
                    "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
                }
            entry.update(provider="onprem", region="eu-west", pricing={A100: 1.20})
        clusters.append(entry)
    return {"clusters": clusters}


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": POLICY, "namespace": NAMESPACE},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": {
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "TieredOverflow",
                }
            },
        },
    }


def deployment(name: str, *, replicas: int, resource: str, amount: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name, "bench": "e2e"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.example.com/infer:1",
                            "resources": {"limits": {resource: amount, "cpu": "1", "memory": "4Gi"}},
                        }
                    ]
                },
            },
        },
    }


def workload_mix(plan: Plan, *, seed: int = 1) -> list[dict[str, Any]]:
    """70 % one whole GPU, 10 % two GPUs, 20 % one MIG 1g slice (when a MIG cluster exists);
    1 or 2 replicas each."""
    rng = random.Random(seed)
    has_mig = "mig" in CLUSTER_KINDS[: plan.clusters]
    out = []
    for index in range(plan.workloads):
        roll = rng.random()
        replicas = rng.choice((1, 2))
        if roll < 0.2 and has_mig:
            resource, amount = MIG_1G, 1
        elif roll < 0.3:
            resource, amount = GPU, 2
        else:
            resource, amount = GPU, 1
        out.append(deployment(f"w-{index:04d}", replicas=replicas, resource=resource, amount=amount))
    return out


DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"


# ----------------------------------------------------------------------------- the measurement


@dataclass
class Tracker:
    """When each workload was created and when the hub first reported it Running."""

    applied: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    apply_seconds: list[float] = field(default_factory=list)
    all_running: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0

    def observe(self, obj: dict[str, Any], now: float) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        if name in self.running or name not in self.applied or not is_running(obj):
            return
        self.running[name] = now
        if len(self.running) >= self.expected:
            self.all_running.set()

    def latencies(self) -> list[float]:
        return [self.running[name] - self.applied[name] for name in self.running]


async def diagnose(hub: Hub, name: str) -> str:
    """Where a workload that never ran got stuck, in the federation loop's order."""
    _, workload = await hub.get(f"{DEPLOYMENTS}/{name}")
    conditions = ((workload or {}).get("status") or {}).get("conditions") or []
    _, bindings = await hub.get(f"/apis/work.gpufed.io/v1alpha1/namespaces/{NAMESPACE}/resourcebindings")
    binding = next(
        (
            b
            for b in (bindings or {}).get("items") or []
            if b.get("spec", {}).get("resource", {}).get("name") == name
        ),
        None,
    )
    if binding is None:
        return f"no ResourceBinding was created for {name} (detector); workload conditions: {conditions}"
    scheduled = next(
        (c for c in (binding.get("status") or {}).get("conditions") or [] if c.get("type") == "Scheduled"),
        None,
    )
    if scheduled is None or scheduled.get("status") != "True":
        return f"binding for {name} is not Scheduled (scheduler): {scheduled}"
    _, works = await hub.get("/apis/work.gpufed.io/v1alpha1/works")
    binding_name = binding["metadata"]["name"]
    mine = [
        w
        for w in (works or {}).get("items") or []
        if (w.get("metadata", {}).get("labels") or {}).get("work.gpufed.io/binding") == binding_name
    ]
    if not mine:
        return f"binding {binding_name} is scheduled to {binding['spec'].get('clusters')} but no Work exists"
    statuses = [(w["metadata"]["namespace"], (w.get("status") or {}).get("manifestStatuses")) for w in mine]
    return (
        f"Works exist for {name} but the hub's status is {(workload or {}).get('status')}; "
        f"Work statuses: {str(statuses)[:600]}"
    )


SLOWEST = 5
"""How many of the slowest workloads the JSON describes (latency, and the binding's moves)."""


async def slowest_workloads(hub: Hub, tracker: Tracker) -> list[dict[str, Any]]:
    """The slowest workloads from apply to Running, each with where its binding placed it and
    the scheduler's reasons that mention a move (replicas a member could not place, failover)."""
    def took(name: str) -> float:
        return tracker.running[name] - tracker.applied[name]

    ranked = sorted(tracker.running, key=took, reverse=True)[:SLOWEST]
    out = []
    for name in ranked:
        _, binding = await hub.get(f"{BINDINGS}/{name}-deployment")
        spec = (binding or {}).get("spec") or {}
        explanation = ((binding or {}).get("status") or {}).get("explanation") or []
        moves = [
            f"{entry.get('cluster')}: {reason}"
            for entry in explanation
            for reason in entry.get("reasons") or ()
            if "moved" in str(reason) or "unschedulable" in str(reason)
        ]
        out.append({
            "name": name,
            "seconds": round(took(name), 3),
            "clusters": {c.get("name"): c.get("replicas") for c in spec.get("clusters") or ()},
            "moves": moves[:4],
        })
    return out


def cpu_by_role(used: dict[str, float]) -> dict[str, float]:
    """CPU seconds summed per role: hub, etcd, sim (all members), agent (all agents), client."""
    roles: dict[str, float] = {}
    for name, seconds in used.items():
        role = name.split("-", 1)[0]
        roles[role] = roles.get(role, 0.0) + seconds
    return {role: round(seconds, 1) for role, seconds in sorted(roles.items())}


RUNNING_STAGE = "hub workload Running"
BINDINGS = f"/apis/work.gpufed.io/v1alpha1/namespaces/{NAMESPACE}/resourcebindings"


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _bound_to(obj: dict[str, Any], name: str) -> bool:
    return bool(((obj.get("spec") or {}).get("resource") or {}).get("name") == name)


def carries(work: dict[str, Any], name: str) -> bool:
    manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
    return any((m.get("metadata") or {}).get("name") == name for m in manifests)


def work_ready(work: dict[str, Any], name: str) -> bool:
    statuses = (work.get("status") or {}).get("manifestStatuses") or []
    for entry in statuses:
        status = entry.get("status") or {}
        if (entry.get("identifier") or {}).get("name") == name and status.get("readyReplicas", 0) >= max(
            1, int(status.get("replicas") or 1)
        ):
            return True
    return False


#: The federation loop's steps, each seen as the first object event that shows it done:
#: (stage, collection watched, predicate over (object, workload name)).
PROBE_STAGES: tuple[tuple[str, str, Any], ...] = (
    ("binding created (detector)", BINDINGS, _bound_to),
    (
        "binding Scheduled (scheduler)",
        BINDINGS,
        lambda o, n: _bound_to(o, n) and condition_true(o, "Scheduled"),
    ),
    ("Work created (binding controller)", WORKS, carries),
    ("Work Applied (agent)", WORKS, lambda o, n: carries(o, n) and condition_true(o, "Applied")),
    ("Work reports replicas ready (agent)", WORKS, lambda o, n: carries(o, n) and work_ready(o, n)),
    (RUNNING_STAGE, DEPLOYMENTS, lambda o, n: (o.get("metadata") or {}).get("name") == n and is_running(o)),
)


async def probe(hub: Hub, name: str) -> dict[str, float]:
    """Create one workload on an otherwise idle fleet and time each stage of the federation
    loop (seconds after the create request was sent); raise :class:`Skip` when the workload
    does not run within :data:`PROBE_TIMEOUT`."""
    seen: dict[str, float] = {}
    running = asyncio.Event()
    started = time.perf_counter()

    def observe(path: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter() - started
        for stage, stage_path, predicate in PROBE_STAGES:
            if stage_path == path and stage not in seen and predicate(obj, name):
                seen[stage] = now
        if RUNNING_STAGE in seen:
            running.set()

    watchers = [
        asyncio.create_task(follow(hub, path, lambda obj, _now, path=path: observe(path, obj)))
        for path in (BINDINGS, WORKS, DEPLOYMENTS)
    ]
    try:
        await asyncio.sleep(0.5)  # let the watches open before the create
        started = time.perf_counter()
        await hub.create(DEPLOYMENTS, deployment(name, replicas=1, resource=GPU, amount=1))
        try:
            await asyncio.wait_for(running.wait(), PROBE_TIMEOUT)
        except TimeoutError:
            raise Skip(
                f"the probe workload was not Running on the hub within {PROBE_TIMEOUT:.0f}s: "
                + await diagnose(hub, name)
            ) from None
    finally:
        for task in watchers:
            task.cancel()
        for task in watchers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return {stage: round(seen[stage], 3) for stage, _, _ in PROBE_STAGES if stage in seen}


async def measure(kubeconfig: Path, plan: Plan, meter: CpuMeter) -> tuple[list[Figure], dict[str, Any]]:
    async with Hub.connect(kubeconfig) as hub:
        await claim_namespace(hub, NAMESPACE, policy())

        stages: list[dict[str, float]] = []
        for index in range(plan.probes):
            stages.append(await probe(hub, f"probe-{index}"))
        probe_s = percentile([s[RUNNING_STAGE] for s in stages], 50)
        log.info("probe workloads Running after %.2fs (median); stages: %s", probe_s, stages)

        workloads = workload_mix(plan)
        tracker = Tracker(expected=len(workloads))
        watcher = asyncio.create_task(follow(hub, DEPLOYMENTS, tracker.observe))
        cpu_before = meter.sample()
        try:
            apply_s = await apply_all(hub, workloads, tracker, rate=plan.rate, path=DEPLOYMENTS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tracker.all_running.wait(), plan.drain_timeout)
            cpu_used = CpuMeter.delta(cpu_before, meter.sample())
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        stuck = sorted(set(tracker.applied) - set(tracker.running))
        stuck_reason = await diagnose(hub, stuck[0]) if stuck else ""
        slowest = await slowest_workloads(hub, tracker)

    latencies = tracker.latencies()
    summary = latency_summary(latencies)
    done = len(latencies)
    first_applied = min(tracker.applied.values())
    last_running = max(tracker.running.values(), default=first_applied)
    throughput = done / (last_running - first_applied) if last_running > first_applied else 0.0
    figures = [
        Figure(f"workloads Running (of {len(workloads):,})", done, "", at_least(len(workloads))),
    ]
    if latencies:
        figures += [
            Figure("apply -> Running p50", round(percentile(latencies, 50), 3), "s"),
            Figure("apply -> Running p99", round(percentile(latencies, 99), 3), "s", at_most(P99_TARGET_S)),
            Figure("apply -> Running max", round(max(latencies), 3), "s"),
        ]
    roles = cpu_by_role(cpu_used)
    if done:
        figures += [
            Figure("hub CPU per placed workload", round(roles.get("hub", 0.0) * 1000 / done, 1), "ms",
                   at_most(HUB_CPU_MS_TARGET)),
            Figure("etcd CPU per placed workload", round(roles.get("etcd", 0.0) * 1000 / done, 1), "ms",
                   at_most(ETCD_CPU_MS_TARGET)),
        ]
    figures += [
        Figure("one workload on an idle fleet (probe median)", round(probe_s, 3), "s"),
        Figure("workloads Running per second", round(throughput, 1), "1/s"),
        Figure("create request p99", round(percentile(tracker.apply_seconds, 99) * 1000, 1), "ms"),
    ]
    details = {
        "clusters": plan.clusters,
        "nodes_per_cluster": plan.nodes_per_cluster,
        "gpus_per_node": 8,
        "workloads": len(workloads),
        "replicas": sum(w["spec"]["replicas"] for w in workloads),
        "rate_per_s": plan.rate,
        "apply_seconds": round(apply_s, 2),
        "first_apply_to_last_running_s": round(last_running - first_applied, 2),
        "cpu_seconds_by_role": roles,
        "cpu_ms_per_placed_workload": {role: round(sec * 1000 / done, 1) for role, sec in roles.items()} if done else {},
        "probe_seconds": round(probe_s, 3),
        "probe_stages_s": {
            stage: round(percentile([s[stage] for s in stages if stage in s], 50), 3)
            for stage, _, _ in PROBE_STAGES
            if any(stage in s for s in stages)
        },
        "latency": summary,
        "create_request": latency_summary(tracker.apply_seconds),
        "not_running": stuck[:20],
        "not_running_count": len(stuck),
        "not_running_reason": stuck_reason,
        "slowest": slowest,
    }
    return figures, details


# ----------------------------------------------------------------------------- processes


def start_fleet(group: ProcessGroup, plan: Plan) -> Kubectl:
    """Hub, members and agents; returns the hub's kubectl once every cluster is Ready."""
    fleet_file = group.root / "fleet.yaml"
    spec = fleet(plan)
    fleet_file.write_text(yaml.safe_dump(spec))
    _, hub = group.start_hub("hub", "--log-level", "WARNING")
    names = set()
    for entry in spec["clusters"]:
        name = entry["name"]
        _, member, dcgm = group.start_member(fleet_file, name, extra=("--log-level", "WARNING"))
        group.start_agent(hub, fleet_file, name, member, dcgm, extra=("--log-level", "WARNING"), test_intervals=False)
        names.add(name)
    wait_for(
        lambda: names <= ready_clusters(hub),
        timeout=CLUSTERS_READY_TIMEOUT,
        interval=1.0,
        what="clusters Ready",
    )
    return hub


def plan_for(size: Size, *, rate: float | None, workloads: int | None) -> Plan:
    """The size's plan, with ``rate`` (creates per second) and ``workloads`` where given."""
    plan = PLANS[size]
    if rate is not None:
        plan = dataclasses.replace(plan, rate=rate)
    if workloads is not None:
        plan = dataclasses.replace(plan, workloads=workloads)
    return plan


def run(size: Size, *, rate: float | None = None, workloads: int | None = None) -> BenchmarkResult:
    """The benchmark at ``size``; ``rate`` and ``workloads`` replace the size's own."""
    plan = plan_for(size, rate=rate, workloads=workloads)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-e2e-") as tmp:
        group = ProcessGroup(root=Path(tmp))
        try:
            hub = start_fleet(group, plan)
            log.info("%d clusters Ready after %.0fs", plan.clusters, time.perf_counter() - started)
            figures, details = asyncio.run(measure(hub.kubeconfig, plan, fleet_meter(group)))
        except Skip as skip:
            log.warning("skipped: %s", skip)
            return BenchmarkResult(
                benchmark=NAME,
                size=size,
                status=Status.SKIPPED,
                reason=str(skip),
                seconds=time.perf_counter() - started,
            )
        except Exception as exc:
            return failed_run(NAME, size, exc, logs=group.dump_logs()[-6000:], started=started)
        finally:
            group.stop_all()
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=details, seconds=time.perf_counter() - started
    )


OPTIONS = argparse.ArgumentParser(add_help=False)
OPTIONS.add_argument("--rate", type=float, metavar="PER_S", help="Deployments created per second (the size's own by default)")
OPTIONS.add_argument("--workloads", type=int, metavar="N", help="Deployments created (the size's own by default)")


def main(argv: Sequence[str] | None = None) -> int:
    """The common benchmark options, plus ``--rate`` and ``--workloads`` (the size's own otherwise)."""
    known, _ = OPTIONS.parse_known_args(argv)
    if known.rate is not None and known.rate <= 0:
        OPTIONS.error("--rate must be above 0")
    if known.workloads is not None and known.workloads <= 0:
        OPTIONS.error("--workloads must be at least 1")
    bound = functools.partial(run, rate=known.rate, workloads=known.workloads)
    return benchmark_main(bound, argv, description=(__doc__ or NAME).splitlines()[0], parents=(OPTIONS,))


if __name__ == "__main__":
    sys.exit(main())
