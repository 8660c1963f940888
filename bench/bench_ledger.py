"""The write ledger of one workload (issue 19): every etcd write the hub makes for one
Deployment from apply to Running, by resource, subresource, writer and verb, and every
watch event the hub's watchers decode meanwhile.

What runs: a hub started with ``--debug-write-journal`` (it keeps its last writes in full
and serves them with its counters at ``GET /debug/writes``), two simulated member clusters
of A100s and their agents, all real processes (:mod:`e2e.harness`). Two cases, each on the
otherwise idle fleet:

* ``one``: a Deployment of 1 replica, Divided (TieredOverflow) -- placed on one cluster;
* ``divided``: a Deployment of 2 replicas, Divided with equal static weights over both
  clusters -- one replica each;
* ``load`` (sizes quick and full): :data:`LOAD_WORKLOADS` Deployments of 1 or 2 replicas
  created at :data:`LOAD_RATE` per second, as the end-to-end benchmark does, reported per
  workload: what concurrency adds (or coalesces) over the idle cases.

For each case the benchmark reads the ledger, creates the Deployment, waits until the hub
reports it Running and then until its objects have been quiet for :data:`QUIET_SECONDS`
(status updates that trail Running count too), and reads the ledger again. A write is the
workload's when its key names the workload, its binding, its Works or its Events; other
writes in the window (cluster heartbeats, leases) are counted apart as background. Watch
events are the counters' difference for the workload's kinds, per watcher.

Reproduce: ``.venv/bin/python -m bench.bench_ledger [--size tiny|quick|full] [--json FILE]``
(tiny runs the two idle cases, quick and full add ``load``; the idle counts do not depend on
the machine, the load case's a little: what coalesces depends on timing).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.bench_e2e_apply import deployment
from bench.common import BenchmarkResult, CpuMeter, Figure, Size, failed_run, script_main
from bench.hubdriving import Hub, fleet_meter, is_running, ready_clusters
from e2e.harness import ProcessGroup, wait_for

log = logging.getLogger(__name__)

NAME = "ledger"
A100 = "NVIDIA-A100-SXM4-80GB"
CLUSTERS = ("a100-one", "a100-two")
DEBUG_WRITES = "/debug/writes"
JOURNAL = 100_000
#: The workload's objects have settled when none was written for this long after Running.
QUIET_SECONDS = 3.0
RUNNING_TIMEOUT = 90.0
SETTLE_TIMEOUT = 60.0
POLL_SECONDS = 0.25
#: How far back (in revisions) each poll of the journal starts before the last write it saw.
JOURNAL_OVERLAP = 50
NODES = 5
LOAD_NAMESPACE = "ledger-load"
LOAD_WORKLOADS = 30
LOAD_RATE = 10.0
#: The kinds whose watch events count as the workload's.
WORKLOAD_RESOURCES = ("deployments.apps", "resourcebindings.work.gpufed.io", "works.work.gpufed.io", "events")


def fleet_file() -> dict[str, Any]:
    return {
        "clusters": [
            {
                "name": name,
                "provider": "onprem",
                "region": "eu-west",
                "pricing": {A100: 1.20},
                "simulation": {"startupDelaySeconds": 0},
                "nodeGroups": [
                    {"name": "a100", "count": NODES, "cpu": 96, "memoryGiB": 1024, "gpu": {"product": A100, "count": 8}}
                ],
            }
            for name in CLUSTERS
        ]
    }


def policy(namespace: str, placement: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": namespace, "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": placement,
        },
    }


#: (case, namespace, replicas, placement)
CASES: tuple[tuple[str, str, int, dict[str, Any]], ...] = (
    (
        "one",
        "ledger-one",
        1,
        {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}},
    ),
    (
        "divided",
        "ledger-divided",
        2,
        {
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {
                    "staticWeightList": [
                        {"targetCluster": {"clusterNames": [name]}, "weight": 1} for name in CLUSTERS
                    ]
                },
            }
        },
    ),
)


# ----------------------------------------------------------------------------- the pure part


def is_workload_key(key: str, *, namespace: str, name: str) -> bool:
    """Whether a storage key names the workload, its binding, its Works or its Events (with
    ``name`` empty: any workload of ``namespace``)."""
    parts = key.rstrip("/").split("/")
    last = parts[-1]
    if last.startswith(f"{namespace}-{name}-" if name else f"{namespace}-"):
        return True  # a Work, in an execution namespace
    in_namespace = len(parts) > 2 and parts[-2] == namespace
    return in_namespace and (not name or last == name or last.startswith((f"{name}-", f"{name}.")))


def write_rows(journal: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Writes grouped by (resource, subresource, writer, verb), with how often each set of
    changed fields was the reason."""
    counts: Counter[tuple[str, str, str, str]] = Counter()
    reasons: dict[tuple[str, str, str, str], Counter[str]] = {}
    for entry in journal:
        key = (entry["resource"], entry["subresource"], entry["writer"], entry["verb"])
        counts[key] += 1
        reasons.setdefault(key, Counter())[",".join(entry["changed"]) or "-"] += 1
    return [
        {
            "resource": resource,
            "subresource": subresource,
            "writer": writer,
            "verb": verb,
            "count": count,
            "changed": dict(reasons[(resource, subresource, writer, verb)].most_common()),
        }
        for (resource, subresource, writer, verb), count in sorted(counts.items())
    ]


def delta_rows(
    before: Mapping[str, Any], after: Mapping[str, Any], section: str, who: str, resources: Sequence[str]
) -> list[dict[str, Any]]:
    """A ledger counter's growth between two snapshots (``section``: watchEvents or reads, whose
    entries name the watcher or reader in ``who``), per resource of ``resources`` and who."""

    def counts(snapshot: Mapping[str, Any]) -> Counter[tuple[str, str]]:
        return Counter({(e["resource"], e[who]): int(e["count"]) for e in snapshot.get(section) or []})

    delta = counts(after)
    delta.subtract(counts(before))
    return [
        {"resource": resource, who: name, "count": count}
        for (resource, name), count in sorted(delta.items())
        if count > 0 and resource in resources
    ]


def format_ledger(
    case: str, rows: list[dict[str, Any]], events: list[dict[str, Any]], reads: list[dict[str, Any]], background: int
) -> str:
    total = sum(r["count"] for r in rows)
    lines = [f"== {case}: {total} writes at the hub ({background} background writes in the window)"]
    lines.append(f"{'resource':34} {'sub':7} {'writer':26} {'verb':7} {'count':>5}  changed fields (times)")
    for r in rows:
        changed = "; ".join(f"{k} ({v})" for k, v in r["changed"].items())
        lines.append(
            f"{r['resource']:34} {r['subresource'] or '-':7} {r['writer']:26} {r['verb']:7} {r['count']:>5}  {changed}"
        )
    lines.append(f"-- watch events decoded: {sum(e['count'] for e in events)}")
    lines.extend(f"{e['resource']:34} {e['watcher']:42} {e['count']:>5}" for e in events)
    lines.append(f"-- etcd reads (get): {sum(r['count'] for r in reads)}")
    lines.extend(f"{r['resource']:34} {r['reader']:42} {r['count']:>5}" for r in reads)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the measurement


async def ledger(hub: Hub, *, since: int = 0) -> dict[str, Any]:
    """The hub's write ledger; its journal from revision ``since`` on (the polls while a case
    settles ask for their window only, so that reading the ledger costs the hub little)."""
    status, body = await hub.get(f"{DEBUG_WRITES}?since={since}" if since else DEBUG_WRITES)
    if status != 200 or not isinstance(body, dict):
        raise RuntimeError(f"GET {DEBUG_WRITES}: HTTP {status}: {str(body)[:300]}")
    return body


def _last_revision(snapshot: Mapping[str, Any]) -> int:
    return int(snapshot.get("journalRevision") or 0)


async def wait_running(hub: Hub, path: str, names: Sequence[str]) -> None:
    deadline = time.perf_counter() + RUNNING_TIMEOUT
    waiting = set(names)
    while waiting:
        _, listing = await hub.get(path)
        for item in (listing or {}).get("items") or []:
            if is_running(item):
                waiting.discard(item["metadata"]["name"])
        if not waiting:
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"not Running within {RUNNING_TIMEOUT:.0f}s: {sorted(waiting)[:5]}")
        await asyncio.sleep(POLL_SECONDS)


async def settle(hub: Hub, start_revision: int, *, namespace: str, name: str) -> dict[str, Any]:
    """The ledger once the workload's objects have been quiet for :data:`QUIET_SECONDS`
    (status writes trail Running: the last Works' conditions, the aggregated status), with the
    journal of the window from ``start_revision``. Each poll asks for the writes after the
    last one it saw, so reading the ledger costs the hub little whatever the window's size."""
    quiet_since, seen, deadline = time.perf_counter(), -1, time.perf_counter() + SETTLE_TIMEOUT
    journal: dict[int, dict[str, Any]] = {}
    since = start_revision
    while True:
        after = await ledger(hub, since=since)
        for entry in after.get("journal") or []:
            journal[int(entry["revision"])] = entry
        # Writes may finish out of order: ask again from a little before the last one seen.
        since = max(start_revision, _last_revision(after) - JOURNAL_OVERLAP)
        mine = sum(1 for e in journal.values() if is_workload_key(e["key"], namespace=namespace, name=name))
        if mine != seen:
            seen, quiet_since = mine, time.perf_counter()
        if time.perf_counter() - quiet_since >= QUIET_SECONDS or time.perf_counter() > deadline:
            return {**after, "journal": [journal[revision] for revision in sorted(journal)]}
        await asyncio.sleep(POLL_SECONDS)


async def one_case(
    hub: Hub, meter: CpuMeter, case: str, namespace: str, workloads: list[dict[str, Any]], *, rate: float
) -> dict[str, Any]:
    """Create ``workloads`` in ``namespace`` (``rate`` per second), wait until all run and
    settle; the ledger of the window, per workload, and the CPU each process used in it."""
    name = workloads[0]["metadata"]["name"] if len(workloads) == 1 else ""
    cpu_before = meter.sample()
    before = await ledger(hub)
    start_revision = _last_revision(before)
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    started = time.perf_counter()
    for index, obj in enumerate(workloads):
        obj["metadata"]["namespace"] = namespace
        delay = started + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await hub.create(path, obj)
    await wait_running(hub, path, [w["metadata"]["name"] for w in workloads])
    running_s = time.perf_counter() - started
    after = await settle(hub, start_revision, namespace=namespace, name=name)
    cpu: dict[str, float] = {}
    for process, seconds in CpuMeter.delta(cpu_before, meter.sample()).items():
        role = process.split("-", 1)[0]  # hub, etcd, sim, agent, client
        cpu[role] = cpu.get(role, 0.0) + seconds
    window = [e for e in after.get("journal") or [] if e["revision"] > start_revision]
    mine = [e for e in window if is_workload_key(e["key"], namespace=namespace, name=name)]
    background = Counter(
        f"{e['resource']} {e['subresource']} {e['writer']}".strip()
        for e in window
        if not is_workload_key(e["key"], namespace=namespace, name=name)
    )
    rows = write_rows(mine)
    events = delta_rows(before, after, "watchEvents", "watcher", WORKLOAD_RESOURCES)
    reads = delta_rows(before, after, "reads", "reader", WORKLOAD_RESOURCES)
    count = len(workloads)
    replicas = sum(int(w["spec"]["replicas"]) for w in workloads)
    title = f"{case}: {count} workload(s), {replicas} replica(s)" + (f", per workload x{count}" if count > 1 else "")
    print(format_ledger(title, rows, events, reads, sum(background.values())))
    print(f"-- CPU seconds in the window (machine load varies): { {k: round(v, 2) for k, v in sorted(cpu.items())} }")
    return {
        "workloads": count,
        "writes_per_workload": round(sum(r["count"] for r in rows) / count, 2),
        "status_writes_per_workload": round(sum(r["count"] for r in rows if r["subresource"] == "status") / count, 2),
        "watch_events_per_workload": round(sum(e["count"] for e in events) / count, 2),
        "reads_per_workload": round(sum(r["count"] for r in reads) / count, 2),
        "seconds_to_all_running": round(running_s, 2),
        # Includes the quiet wait after Running (heartbeats, leases): noisy, and loaded machines differ.
        "cpu_ms_per_workload": {role: round(seconds * 1000 / count, 1) for role, seconds in sorted(cpu.items())},
        "table": rows,
        "watch_events_table": events,
        "reads_table": reads,
        "sequence": [
            f"{e['revision']} {e['resource']} {e['subresource'] or '-'} {e['writer']} {e['verb']} {','.join(e['changed'])}"
            for e in mine
        ][:400],
        "background": dict(background.most_common()),
    }


def load_workloads() -> list[dict[str, Any]]:
    return [
        deployment(f"w-{index:03d}", replicas=1 + index % 2, resource="nvidia.com/gpu", amount=1)
        for index in range(LOAD_WORKLOADS)
    ]


async def measure(kubeconfig: Path, meter: CpuMeter, *, load: bool) -> dict[str, dict[str, Any]]:
    out = {}
    cases = list(CASES)
    if load:
        cases.append(("load", LOAD_NAMESPACE, 0, CASES[0][3]))
    async with Hub.connect(kubeconfig) as hub:
        for _case, namespace, _replicas, placement in cases:
            await hub.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            await hub.create(
                f"/apis/policy.gpufed.io/v1alpha1/namespaces/{namespace}/propagationpolicies",
                policy(namespace, placement),
            )
        for case, namespace, replicas, _placement in CASES:
            workload = deployment(f"{case}-workload", replicas=replicas, resource="nvidia.com/gpu", amount=1)
            out[case] = await one_case(hub, meter, case, namespace, [workload], rate=1.0)
        if load:
            out["load"] = await one_case(hub, meter, "load", LOAD_NAMESPACE, load_workloads(), rate=LOAD_RATE)
    return out


def run(size: Size) -> BenchmarkResult:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpufed-bench-ledger-") as tmp:
        group = ProcessGroup(root=Path(tmp))
        try:
            fleet = group.root / "fleet.yaml"
            fleet.write_text(yaml.safe_dump(fleet_file()))
            _, hub = group.start_hub("hub", "--log-level", "WARNING", "--debug-write-journal", str(JOURNAL))
            for name in CLUSTERS:
                _, member, dcgm = group.start_member(fleet, name, extra=("--log-level", "WARNING"))
                group.start_agent(hub, fleet, name, member, dcgm, extra=("--log-level", "WARNING"))
            wait_for(lambda: set(CLUSTERS) <= ready_clusters(hub), timeout=120, interval=1.0, what="clusters Ready")
            cases = asyncio.run(measure(hub.kubeconfig, fleet_meter(group), load=size is not Size.TINY))
        except Exception as exc:
            return failed_run(NAME, size, exc, logs=group.dump_logs()[-6000:], started=started)
        finally:
            group.stop_all()
    figures = []
    for case, data in cases.items():
        figures += [
            Figure(f"{case}: hub writes per workload, apply -> Running", data["writes_per_workload"]),
            Figure(f"{case}: of which status writes", data["status_writes_per_workload"]),
            Figure(f"{case}: watch events decoded per workload", data["watch_events_per_workload"]),
            Figure(f"{case}: etcd reads per workload", data["reads_per_workload"]),
        ]
    return BenchmarkResult(
        benchmark=NAME, size=size, figures=figures, details=cases, seconds=time.perf_counter() - started
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
