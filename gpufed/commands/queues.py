"""`gpufed queues`: the fleet's quotas at a glance, one row per ClusterQueue, flavor and resource.

In: the hub's ``kueue.x-k8s.io/v1beta1`` ClusterQueues (their spec and the status the hub's
admission controller writes). Out: a table — CLUSTERQUEUE, COHORT, FLAVOR, RESOURCE, NOMINAL,
BORROWING LIMIT, LENDING LIMIT, USAGE, BORROWED, LENT, PENDING, ADMITTED, WEIGHT, SHARE — or the
same as JSON (``-o json``). LENT is what the queue offers its cohort now: its unused nominal
quota, at most its lendingLimit. Pending, admitted, the fair-sharing weight and the weighted
share (``status.fairSharing.weightedShare``, written when the hub runs with
``--kueue-fair-sharing``; "inf" for a weight-0 queue that borrows) are per ClusterQueue (shown on
its first row).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from typing import Any

from controlplane.admission.core import INFINITE_SHARE
from controlplane.apis.quantity import QuantityError, format_quantity, to_int
from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument

PATH = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
HEADER = (
    "CLUSTERQUEUE", "COHORT", "FLAVOR", "RESOURCE", "NOMINAL", "BORROWING LIMIT", "LENDING LIMIT",
    "USAGE", "BORROWED", "LENT", "PENDING", "ADMITTED", "WEIGHT", "SHARE",
)
#: The weighted share of a weight-0 queue that borrows (Kueue's math.MaxInt).
def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_kubeconfig_argument(parser)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")


def _usage(status: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for flavor in status.get("flavorsReservation") or ():
        for resource in flavor.get("resources") or ():
            out[(str(flavor.get("name")), str(resource.get("name")))] = resource
    return out


def _amount(resource: str, value: Any) -> int:
    try:
        return to_int(resource, value) if value is not None else 0
    except (QuantityError, TypeError, ValueError):
        return 0


def _lent(resource: str, quota: Mapping[str, Any], used: Any, in_cohort: bool) -> str:
    """Unused nominal quota, at most the lendingLimit (nothing outside a cohort)."""
    if not in_cohort:
        return "0"
    unused = max(0, _amount(resource, quota.get("nominalQuota")) - _amount(resource, used))
    if quota.get("lendingLimit") is not None:
        unused = min(unused, _amount(resource, quota["lendingLimit"]))
    return format_quantity(resource, unused)


def queue_rows(cluster_queues: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per ClusterQueue, flavor and resource (sorted by ClusterQueue name). Pure."""
    rows: list[dict[str, Any]] = []
    for cq in sorted(cluster_queues, key=lambda o: str((o.get("metadata") or {}).get("name"))):
        name = str((cq.get("metadata") or {}).get("name"))
        spec, status = cq.get("spec") or {}, cq.get("status") or {}
        usage = _usage(status)
        weight = (spec.get("fairSharing") or {}).get("weight", 1)
        share = (status.get("fairSharing") or {}).get("weightedShare")
        first = True
        for group in spec.get("resourceGroups") or ():
            for flavor in group.get("flavors") or ():
                for quota in flavor.get("resources") or ():
                    used = usage.get((str(flavor.get("name")), str(quota.get("name"))), {})
                    resource = str(quota.get("name"))
                    rows.append({
                        "clusterQueue": name, "cohort": spec.get("cohort") or "",
                        "flavor": flavor.get("name"), "resource": quota.get("name"),
                        "nominal": str(quota.get("nominalQuota")),
                        "borrowingLimit": str(quota.get("borrowingLimit", "")),
                        "lendingLimit": str(quota.get("lendingLimit", "")),
                        "usage": str(used.get("total", "0")), "borrowed": str(used.get("borrowed", "0")),
                        "lent": _lent(resource, quota, used.get("total"), bool(spec.get("cohort"))),
                        "pending": status.get("pendingWorkloads", 0) if first else None,
                        "admitted": status.get("admittedWorkloads", 0) if first else None,
                        "weight": str(weight) if first else None,
                        "weightedShare": share if first else None,
                    })
                    first = False
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    keys = ("clusterQueue", "cohort", "flavor", "resource", "nominal", "borrowingLimit", "lendingLimit",
            "usage", "borrowed", "lent", "pending", "admitted", "weight")
    cells = [HEADER, *[(*("" if r[k] is None else str(r[k]) or "-" for k in keys), _share_cell(r)) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _share_cell(row: Mapping[str, Any]) -> str:
    share = row["weightedShare"]
    if share is None:
        return "" if row["pending"] is None else "-"
    return "inf" if share == INFINITE_SHARE else str(share)


async def fetch(args: argparse.Namespace) -> list[dict[str, Any]]:
    client = HubClient.from_kubeconfig(args.kubeconfig)
    listed = await client.read_list(PATH)
    return list(listed.get("items") or [])


def run(args: argparse.Namespace) -> int:
    return run_reporting(_show(args), (HubError,))


async def _show(args: argparse.Namespace) -> int:
    rows = queue_rows(await fetch(args))
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("No ClusterQueues on the hub (kubectl apply a kueue.x-k8s.io/v1beta2 or v1beta1 ClusterQueue).")
    else:
        print(render(rows))
    return 0
