"""What the member agent's capacity report costs at 1,000 nodes x 8 GPUs, and how fast the
simulated member's scheduler binds pods (issue 3).

The report: a simulated cluster of 1,000 nodes with 8 GPUs each (whole A100s, A100s cut
into a mixed MIG layout, whole H100s, time-sliced A10s) is partly filled with Running
pods of mixed GPU shapes, placed with the simulator's own device allocator, so every pod
holds real device ids. The DCGM exporter page the simulator would serve for that state is
rendered once. Then, exactly as the agent does on every report: the page is parsed and
grouped per node (:mod:`member_agent.dcgm`), and :func:`member_agent.capacity.summarize`
turns the trimmed nodes and pods (the agent's caches hold :func:`~member_agent.capacity.trim_node`
/ :func:`~member_agent.capacity.trim_pod` forms) into the Cluster status. Figures: the
body's size as the agent sends it (``json.dumps``, what kubernetes_asyncio does), and the
compute time of ``summarize`` and of the DCGM parse, p50 over repeated runs.

A report of a large, lightly loaded member (a hollow member of the scale benchmark: 5,000
nodes of one pool, as the agent's :class:`~member_agent.capacity.NodeTrimmer` caches them, and
300 Running pods of one GPU on distinct nodes): between two reports one pod goes and another
comes, and one node changes. Figures: per-report time, median, of the agent's way (the node
totals kept over node changes: :meth:`~member_agent.nodetotals.NodeTotals.update` then
:func:`~member_agent.capacity.summarize` over the totals) and of a summary over the node list
(the totals counted afresh, every node walked), with their ratio.

Pod binding: :func:`bench.bench_sim_bind.run` (1,000 nodes, 5,000 pending pods in batches
of 500, every scoring strategy); figure: pods bound per second.

Reproduce: ``.venv/bin/python -m bench.bench_agent_report [--size quick|full] [--json FILE]``
"""

from __future__ import annotations

import gzip
import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench import bench_sim_bind
from bench.common import BenchmarkResult, Figure, Size, latency_summary, percentile, script_main
from member_agent import capacity, dcgm
from member_agent.nodetotals import NodeTotals
from simulator.dcgm import PodDevice, render_metrics
from simulator.hollow.nodes import HollowNodes, hollow_profile
from simulator.nodes import LABEL_NODE_GROUP, build_inventory, build_nodes
from simulator.profile import ClusterProfile, parse_fleet
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.reading import pod_request

log = logging.getLogger(__name__)

NAME = "agent"
REPORT_TIME = "2024-05-01T10:00:00Z"
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
A10 = "NVIDIA-A10"
MIG_LAYOUT = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
SHARES_PER_GPU = 4


@dataclass(frozen=True, slots=True)
class Plan:
    nodes: int
    #: summarize() runs timed (after one warm-up run).
    repeats: int
    #: DCGM page parses timed (a 1,000-node page takes seconds, so fewer).
    parse_repeats: int
    bind_nodes: int
    bind_pods: int
    bind_batch: int
    #: The large, lightly loaded member: nodes, pods, and reports timed each way.
    kept_nodes: int
    kept_pods: int
    kept_repeats: int


PLANS = {
    Size.TINY: Plan(nodes=24, repeats=2, parse_repeats=1, bind_nodes=24, bind_pods=60, bind_batch=20,
                    kept_nodes=200, kept_pods=20, kept_repeats=3),
    Size.QUICK: Plan(nodes=1000, repeats=5, parse_repeats=1, bind_nodes=1000, bind_pods=1500, bind_batch=500,
                     kept_nodes=5000, kept_pods=300, kept_repeats=21),
    Size.FULL: Plan(nodes=1000, repeats=15, parse_repeats=3, bind_nodes=1000, bind_pods=5000, bind_batch=500,
                    kept_nodes=5000, kept_pods=300, kept_repeats=61),
}

#: What pods on each node group ask for: (resource, amount per pod) choices.
POD_SHAPES: dict[str, list[tuple[str, int]]] = {
    "a100": [("nvidia.com/gpu", 1), ("nvidia.com/gpu", 2), ("nvidia.com/gpu", 4), ("nvidia.com/gpu", 8)],
    "a100-mig": [
        ("nvidia.com/mig-1g.10gb", 1),
        ("nvidia.com/mig-2g.20gb", 1),
        ("nvidia.com/mig-3g.40gb", 1),
    ],
    "h100": [("nvidia.com/gpu", 1), ("nvidia.com/gpu", 4), ("nvidia.com/gpu", 8)],
    "a10-shared": [("nvidia.com/gpu.shared", 1), ("nvidia.com/gpu.shared", 2)],
}


def report_profile(nodes: int) -> ClusterProfile:
    """``nodes`` nodes x 8 GPUs: half whole A100s, a quarter MIG A100s, the rest split
    between whole H100s and time-sliced A10s."""
    half, quarter = nodes // 2, nodes // 4
    h100 = (nodes - half - quarter) // 2
    a10 = nodes - half - quarter - h100
    groups: list[dict[str, Any]] = [
        {"name": "a100", "count": half, "cpu": 96, "memoryGiB": 1024, "gpu": {"product": A100, "count": 8}},
        {
            "name": "a100-mig",
            "count": quarter,
            "cpu": 96,
            "memoryGiB": 1024,
            "gpu": {"product": A100, "count": 8, "mig": {"strategy": "mixed", "layout": MIG_LAYOUT}},
        },
        {"name": "h100", "count": h100, "cpu": 192, "memoryGiB": 2048, "gpu": {"product": H100, "count": 8}},
        {
            "name": "a10-shared",
            "count": a10,
            "cpu": 64,
            "memoryGiB": 512,
            "gpu": {
                "product": A10,
                "count": 8,
                "sharing": {"replicas": SHARES_PER_GPU, "renameByDefault": True},
            },
        },
    ]
    fleet = parse_fleet({"clusters": [{"name": "bench", "nodeGroups": groups}]})
    return fleet.clusters[0]


def _pod(name: str, *, resource: str, amount: int, workload: str) -> dict[str, Any]:
    template_hash = "5d8f7c9b4"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-" + workload.split("-")[0],
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {"app": workload, "pod-template-hash": template_hash},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{workload}-{template_hash}",
                    "uid": f"uid-rs-{workload}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/train:1",
                    "resources": {"limits": {resource: amount}, "requests": {"cpu": "2", "memory": "8Gi"}},
                }
            ]
        },
        "status": {"phase": "Running"},
    }


def fill_cluster(
    profile: ClusterProfile, nodes: Sequence[dict[str, Any]], *, seed: int
) -> tuple[list[dict[str, Any]], list[PodDevice], dict[str, float]]:
    """Bound, Running pods filling each node to a random share of its GPUs (0 to 100 %, so
    nodes differ and the report cannot fold them into a handful of shapes).

    Returns the pods, the devices each holds (what the DCGM exporter maps to pods), and a
    utilization per pod key.
    """
    rng = random.Random(seed)
    inventory = build_inventory(profile)
    state = ClusterState(seed=seed)
    for node in nodes:
        state.add_node(node, inventory[node["metadata"]["name"]])
    pods: list[dict[str, Any]] = []
    uses: list[PodDevice] = []
    utilization: dict[str, float] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        group = node["metadata"]["labels"][LABEL_NODE_GROUP]
        shapes = POD_SHAPES[group]
        node_state = state.nodes[name]
        fill = rng.choice((0.0, 0.25, 0.5, 0.75, 0.9, 1.0))
        for _ in range(64):
            resource, amount = rng.choice(shapes)
            allocatable = node_state.allocatable.get(resource, 0)
            if allocatable == 0 or node_state.free(resource) < amount:
                continue
            if 1 - (node_state.free(resource) - amount) / allocatable > fill + 1e-9:
                continue
            workload = f"{rng.choice(('nlp', 'vision', 'rec', 'speech'))}-{rng.randrange(40)}"
            pod = _pod(f"{workload}-{len(pods)}", resource=resource, amount=amount, workload=workload)
            allocation = state.assume(pod_request(pod), name)
            pod["spec"]["nodeName"] = name
            pods.append(pod)
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            utilization[key] = round(rng.random(), 3)
            uses.extend(
                PodDevice(name, device.id, pod["metadata"]["namespace"], pod["metadata"]["name"], "main")
                for device in allocation.devices
            )
    return pods, uses, utilization


def measure_report(plan: Plan) -> tuple[list[Figure], dict[str, Any]]:
    profile = report_profile(plan.nodes)
    nodes = build_nodes(profile)
    pods, uses, utilization = fill_cluster(profile, nodes, seed=1)
    page = render_metrics(build_inventory(profile).values(), uses, utilization)
    trimmed_nodes = [capacity.trim_node(n) for n in nodes]
    trimmed_pods = [capacity.trim_pod(p) for p in pods]
    log.info("report: %d nodes, %d pods, DCGM page %d bytes", len(nodes), len(pods), len(page))

    parse_seconds: list[float] = []
    by_node: dict[str, list[dict[str, Any]]] = {}
    for _ in range(plan.parse_repeats):
        started = time.perf_counter()
        by_node = dcgm.utilization_by_node(dcgm.parse_metrics(page))
        parse_seconds.append(time.perf_counter() - started)

    summarize_seconds: list[float] = []
    status: dict[str, Any] = {}
    # The reporter's own memo of pod requests, kept from report to report as the agent keeps it
    # (the warm-up run fills it: the pods do not change between the timed runs).
    requests_of = capacity.PodRequests()
    for attempt in range(plan.repeats + 1):
        started = time.perf_counter()
        status = capacity.summarize(
            trimmed_nodes,
            trimmed_pods,
            now=REPORT_TIME,
            utilization=by_node,
            utilization_time=REPORT_TIME,
            kubernetes_version="v1.30.2",
            requests_of=requests_of,
        )
        if attempt:  # the first run warms caches and the allocator
            summarize_seconds.append(time.perf_counter() - started)

    body = json.dumps(status).encode()
    compact = json.dumps(status, separators=(",", ":")).encode()
    # Sections measured as the body is sent (json.dumps defaults), so they add up to the body.
    sections = {key: len(json.dumps(value).encode()) for key, value in status.items()}
    summarize_ms = percentile(summarize_seconds, 50) * 1000
    parse_ms = percentile(parse_seconds, 50) * 1000
    figures = [
        Figure(f"report size ({len(nodes):,} nodes x 8 GPUs)", round(len(body) / 1024, 1), "KiB"),
        Figure("  of which nodeShapes", round(sections.get("nodeShapes", 0) / 1024, 1), "KiB"),
        Figure("  of which utilization", round(sections.get("utilization", 0) / 1024, 1), "KiB"),
        Figure("report compute p50 (summarize)", round(summarize_ms, 1), "ms"),
        Figure(f"DCGM page parse p50 ({len(page) / 2**20:.1f} MiB page)", round(parse_ms, 1), "ms"),
    ]
    details = {
        "nodes": len(nodes),
        "gpus_per_node": 8,
        "physical_gpus": len(nodes) * 8,
        "pods": len(pods),
        "node_shapes": len(status.get("nodeShapes", [])),
        "report_bytes": len(body),
        "report_bytes_compact": len(compact),
        "report_bytes_gzip": len(gzip.compress(body)),
        "section_bytes": sections,
        "dcgm_page_bytes": len(page),
        "summarize": latency_summary(summarize_seconds),
        "dcgm_parse": latency_summary(parse_seconds),
    }
    return figures, details


def lightly_loaded_member(nodes: int, pods: int, *, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A hollow member's nodes as the agent caches them, and ``pods`` Running one-GPU pods on
    distinct nodes."""
    hollow = HollowNodes(hollow_profile("bench", nodes=nodes, gpus_per_node=8, product=A100))
    trimmer = capacity.NodeTrimmer()
    cached = [trimmer(hollow.manifest(index, resource_version="1")) for index in range(nodes)]
    rng = random.Random(seed)
    bound = [
        capacity.trim_pod(_bound_pod(f"train-{i}", hollow.name(index)))
        for i, index in enumerate(rng.sample(range(nodes), min(pods, nodes)))
    ]
    return cached, bound


def _bound_pod(name: str, node: str) -> dict[str, Any]:
    pod = _pod(name, resource="nvidia.com/gpu", amount=1, workload="nlp-" + name.rsplit("-", 1)[1])
    pod["spec"]["nodeName"] = node
    return pod


def measure_kept_report(plan: Plan) -> tuple[list[Figure], dict[str, Any]]:
    """Per-report time at a large, lightly loaded member, the agent's way and by a walk of the node list."""
    nodes, pods = lightly_loaded_member(plan.kept_nodes, plan.kept_pods, seed=2)
    by_name = {node["metadata"]["name"]: node for node in nodes}
    rng = random.Random(3)
    totals = NodeTotals.of(nodes)
    seconds: dict[str, list[float]] = {"kept": [], "walked": []}
    requests_of = {way: capacity.PodRequests() for way in seconds}
    reports: dict[str, dict[str, Any]] = {}
    for attempt in range(plan.kept_repeats + 1):
        # Between two reports: a pod finishes, another is bound, a node changes.
        pods[rng.randrange(len(pods))] = capacity.trim_pod(_bound_pod(f"train-{len(pods) + attempt}", rng.choice(list(by_name))))
        changed = rng.choice(list(by_name))
        totals.changed(changed, by_name[changed])
        for way in rng.sample(list(seconds), 2):  # alternated, so neither is always first
            started = time.perf_counter()
            if way == "kept":
                totals.update()
                reports[way] = capacity.summarize(totals, pods, now=REPORT_TIME, requests_of=requests_of[way])
            else:
                reports[way] = capacity.summarize(nodes, pods, now=REPORT_TIME, requests_of=requests_of[way])
            if attempt:  # the first run fills the pods' requests
                seconds[way].append(time.perf_counter() - started)
    if reports["kept"] != reports["walked"]:
        raise AssertionError("the report kept over changes differs from the report of every node")
    kept_ms, walked_ms = (percentile(seconds[way], 50) * 1000 for way in ("kept", "walked"))
    size = f"{plan.kept_nodes:,} nodes, {len(pods)} pods"
    figures = [
        Figure(f"report p50, totals kept ({size})", round(kept_ms, 2), "ms"),
        Figure(f"report p50, every node walked ({size})", round(walked_ms, 2), "ms"),
        Figure("  walked / kept", round(walked_ms / kept_ms, 1), "x"),
    ]
    details = {"kept_report": {way: latency_summary(values) for way, values in seconds.items()}}
    return figures, details


def measure_pod_bind(plan: Plan) -> tuple[list[Figure], dict[str, Any]]:
    rows = bench_sim_bind.run(plan.bind_nodes, plan.bind_pods, plan.bind_batch, 1)
    figures = [
        Figure(f"pod-bind {row['scoring']} ({row['nodes']:,} nodes)", row["pods_per_second"], "pods/s")
        for row in rows
    ]
    return figures, {"pod_bind": rows}


def run(size: Size) -> BenchmarkResult:
    plan = PLANS[size]
    started = time.perf_counter()
    report_figures, report_details = measure_report(plan)
    kept_figures, kept_details = measure_kept_report(plan)
    bind_figures, bind_details = measure_pod_bind(plan)
    return BenchmarkResult(
        benchmark=NAME,
        size=size,
        figures=report_figures + kept_figures + bind_figures,
        details={**report_details, **kept_details, **bind_details},
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    script_main(run, __doc__, name=NAME)
