"""`gpufed sim-cluster reclaim`: take spot nodes away from a running simulated member.

In: the member's state dir (its kubeconfig) or ``--kubeconfig``, how many nodes, an optional
notice and node group. Out: one line naming the reclaimed nodes (and the pods that went with
them), from the member's ``POST /debug/gpufed/reclaim`` (:mod:`simulator.reclaiming`).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from gpufed.argtypes import duration
from gpufed.commands.running import report
from gpufed.hubclient import HubClient, HubError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--state-dir", type=Path, help="the member's --state-dir (its kubeconfig is read from there)")
    where.add_argument("--kubeconfig", type=Path, help="the member's kubeconfig")
    parser.add_argument("--nodes", type=int, required=True, metavar="N", help="how many spot nodes to reclaim")
    parser.add_argument("--notice", type=duration, default="0s", metavar="DURATION",
                        help="taint the nodes with the reclaim notice this long before they go (e.g. 30s)")
    parser.add_argument("--pool", metavar="NAME", help="reclaim only nodes of this node group")


def run(args: argparse.Namespace) -> int:
    from simulator.reclaiming import RECLAIM_PATH

    notice = args.notice.total_seconds()
    kubeconfig = args.kubeconfig or args.state_dir / "kubeconfig"
    body: dict[str, object] = {"nodes": args.nodes, "notice": notice}
    if args.pool:
        body["pool"] = args.pool
    try:
        client = HubClient.from_kubeconfig(kubeconfig, missing=(
            f"no member kubeconfig at {kubeconfig}: start the member (`gpufed sim-cluster` or `gpufed up`) "
            "or pass its --state-dir"))
        result = asyncio.run(client.request("POST", RECLAIM_PATH, body=body))
    except HubError as exc:
        return report(exc)
    nodes = ", ".join(result.get("nodes") or [])
    if result.get("notice"):
        print(f"reclaim notice on {nodes}: they go in {result['notice']:g}s")
    else:
        print(f"reclaimed {nodes} ({result.get('pods', 0)} pod(s) gone)")
    return 0
