"""`gpufed queues`: the fleet's quotas at a glance, one row per ClusterQueue, flavor and resource.

In: the hub's ``kueue.x-k8s.io/v1beta1`` ClusterQueues (their spec and the status the hub's
admission controller writes). Out: a table — CLUSTERQUEUE, COHORT, FLAVOR, RESOURCE, NOMINAL,
BORROWING LIMIT, LENDING LIMIT, USAGE, BORROWED, PENDING, ADMITTED — or the same as JSON
(``-o json``). Pending and admitted are per ClusterQueue (shown on its first row).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument

PATH = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
HEADER = (
    "CLUSTERQUEUE", "COHORT", "FLAVOR", "RESOURCE", "NOMINAL", "BORROWING LIMIT", "LENDING LIMIT",
    "USAGE", "BORROWED", "PENDING", "ADMITTED",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_kubeconfig_argument(parser)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")


def _usage(status: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for flavor in status.get("flavorsReservation") or ():
        for resource in flavor.get("resources") or ():
            out[(str(flavor.get("name")), str(resource.get("name")))] = resource
    return out


def queue_rows(cluster_queues: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per ClusterQueue, flavor and resource (sorted by ClusterQueue name). Pure."""
    rows: list[dict[str, Any]] = []
    for cq in sorted(cluster_queues, key=lambda o: str((o.get("metadata") or {}).get("name"))):
        name = str((cq.get("metadata") or {}).get("name"))
        spec, status = cq.get("spec") or {}, cq.get("status") or {}
        usage = _usage(status)
        first = True
        for group in spec.get("resourceGroups") or ():
            for flavor in group.get("flavors") or ():
                for quota in flavor.get("resources") or ():
                    used = usage.get((str(flavor.get("name")), str(quota.get("name"))), {})
                    rows.append({
                        "clusterQueue": name, "cohort": spec.get("cohort") or "",
                        "flavor": flavor.get("name"), "resource": quota.get("name"),
                        "nominal": str(quota.get("nominalQuota")),
                        "borrowingLimit": str(quota.get("borrowingLimit", "")),
                        "lendingLimit": str(quota.get("lendingLimit", "")),
                        "usage": str(used.get("total", "0")), "borrowed": str(used.get("borrowed", "0")),
                        "pending": status.get("pendingWorkloads", 0) if first else None,
                        "admitted": status.get("admittedWorkloads", 0) if first else None,
                    })
                    first = False
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    keys = ("clusterQueue", "cohort", "flavor", "resource", "nominal", "borrowingLimit", "lendingLimit",
            "usage", "borrowed", "pending", "admitted")
    cells = [HEADER, *[tuple("" if r[k] is None else str(r[k]) or "-" for k in keys) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells)


async def fetch(args: argparse.Namespace) -> list[dict[str, Any]]:
    client = HubClient.from_kubeconfig(args.kubeconfig)
    listed = await client.request("GET", PATH)
    return list(listed.get("items") or [])


def run(args: argparse.Namespace) -> int:
    try:
        items = asyncio.run(fetch(args))
    except HubError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = queue_rows(items)
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("No ClusterQueues on the hub (kubectl apply a kueue.x-k8s.io/v1beta1 ClusterQueue).")
    else:
        print(render(rows))
    return 0
