"""`gpufed top pods|nodes [-n NS | -A] [-l SELECTOR] [--clusters c1,c2|all]`: CPU, memory and GPU use per cluster.

CPU and memory come from each member's resource metrics API (``metrics.k8s.io/v1beta1``, what
metrics-server serves and ``kubectl top`` reads), fetched through the hub's cluster proxy. GPU
use is not in that API: it comes from the DCGM exporter data each agent reports to the hub
(``Cluster.status.utilization``: which pod holds which device, and how busy it is), the same data
the waste report is built on. So a pod shows the devices it holds and their mean utilization at
the agent's last report; a node its devices in use out of all, and their mean utilization.

Columns as ``kubectl top`` prints them (CPU in millicores, memory in MiB, percentages of the
node's allocatable rounded down), CLUSTER first, GPU
columns last. A cluster whose member has no metrics API, or cannot be reached, is named on
stderr and the others are shown. The table functions are pure; the I/O is in :func:`top`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.apis.podview import GpuDevice, align, devices_by_pod, percent
from controlplane.apis.quantity import parse_quantity
from controlplane.apis.utilization import expand_utilization
from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument, add_namespace_argument
from gpufed.memberproxy import cluster_utilization, clusters, proxy_path

METRICS = "/apis/metrics.k8s.io/v1beta1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=["pods", "pod", "po", "nodes", "node", "no"], help="pods or nodes")
    add_namespace_argument(parser)
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("-l", "--selector", help="label selector, as kubectl's -l")
    parser.add_argument("--clusters", default="all", help="c1,c2 or all (default all)")
    add_kubeconfig_argument(parser)


def millicores(value: Any) -> int:
    return round(parse_quantity(str(value or "0")) * 1000)


def mebibytes(value: Any) -> int:
    return int(parse_quantity(str(value or "0")) // (1024 * 1024))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pod_table(answers: Sequence[tuple[str, Mapping[str, Any], Mapping[tuple[str, str], Sequence[GpuDevice]]]],
              *, all_namespaces: bool) -> list[str]:
    """``(cluster, PodMetricsList, devices by pod)`` per cluster as one table."""
    rows = [["CLUSTER", *(["NAMESPACE"] if all_namespaces else []), "NAME", "CPU(cores)", "MEMORY(bytes)",
             "GPUS", "GPU DEVICES", "GPU UTIL"]]
    for cluster, listing, devices in answers:
        items = sorted(listing.get("items") or [], key=lambda i: (i["metadata"].get("namespace", ""), i["metadata"]["name"]))
        for item in items:
            meta = item.get("metadata") or {}
            containers = item.get("containers") or []
            held = list(devices.get((str(meta.get("namespace")), str(meta.get("name"))), ()))
            utilization = _mean([d.utilization for d in held if d.utilization is not None])
            rows.append([
                cluster, *([str(meta.get("namespace"))] if all_namespaces else []), str(meta.get("name")),
                f"{sum(millicores((c.get('usage') or {}).get('cpu')) for c in containers)}m",
                f"{sum(mebibytes((c.get('usage') or {}).get('memory')) for c in containers)}Mi",
                str(len(held)), ",".join(d.label() for d in held) or "-", percent(utilization),
            ])
    return align(rows) if len(rows) > 1 else []


def node_table(answers: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Mapping[str, Any]], Any]]) -> list[str]:
    """``(cluster, NodeMetricsList, nodes by name, Cluster.status.utilization)`` as one table."""
    rows = [["CLUSTER", "NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%", "GPUS(used/total)", "GPU UTIL"]]
    for cluster, listing, nodes, utilization in answers:
        gpu_nodes = {str(n.get("name")): n for n in expand_utilization(utilization)}
        for item in sorted(listing.get("items") or [], key=lambda i: str(i["metadata"]["name"])):
            name = str(item["metadata"]["name"])
            usage = item.get("usage") or {}
            allocatable = ((nodes.get(name) or {}).get("status") or {}).get("allocatable") or {}
            cpu, memory = millicores(usage.get("cpu")), mebibytes(usage.get("memory"))
            cpu_total, memory_total = millicores(allocatable.get("cpu")), mebibytes(allocatable.get("memory"))
            devices = (gpu_nodes.get(name) or {}).get("devices") or []
            held = [d for d in devices if d.get("pod")]
            utilization_values = [float(d["utilization"]) for d in held if isinstance(d.get("utilization"), int | float)]
            rows.append([
                cluster, name, f"{cpu}m", f"{100 * cpu // cpu_total}%" if cpu_total else "-",
                f"{memory}Mi", f"{100 * memory // memory_total}%" if memory_total else "-",
                f"{len(held)}/{len(devices)}" if devices else "-", percent(_mean(utilization_values)),
            ])
    return align(rows) if len(rows) > 1 else []


async def _pods(hub: HubClient, cluster: str, args: argparse.Namespace) -> Any:
    where = "" if args.all_namespaces else f"/namespaces/{args.namespace}"
    params = {"labelSelector": args.selector} if args.selector else None
    listing = await hub.read_list(proxy_path(cluster, f"{METRICS}{where}/pods"), params=params)
    return cluster, listing, devices_by_pod(await cluster_utilization(hub, cluster))


async def _nodes(hub: HubClient, cluster: str, args: argparse.Namespace) -> Any:
    params = {"labelSelector": args.selector} if args.selector else None
    listing = await hub.read_list(proxy_path(cluster, f"{METRICS}/nodes"), params=params)
    nodes = await hub.read_list(proxy_path(cluster, "/api/v1/nodes"), params=params)
    by_name = {str(n["metadata"]["name"]): n for n in nodes.get("items") or []}
    return cluster, listing, by_name, await cluster_utilization(hub, cluster)


async def top(args: argparse.Namespace) -> int:
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    names = await clusters(hub, args.clusters)
    pods = args.what in ("pods", "pod", "po")
    fetch = _pods if pods else _nodes
    answers = await asyncio.gather(*(fetch(hub, cluster, args) for cluster in names), return_exceptions=True)
    shown = []
    for cluster, answer in zip(names, answers, strict=True):
        if isinstance(answer, HubError):
            print(f"cluster {cluster}: {answer}", file=sys.stderr)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            shown.append(answer)
    lines = pod_table(shown, all_namespaces=args.all_namespaces) if pods else node_table(shown)
    for line in lines:
        print(line)
    if not lines:
        print(f"No resources found on {', '.join(names) or 'no cluster'}.", file=sys.stderr)
    return 1 if names and not shown else 0


def run(args: argparse.Namespace) -> int:
    return run_reporting(top(args), (HubError,))
