"""`gpufed logs POD|KIND/NAME [-n NS] [-c C] [-f] [--tail N] [--since D] [--all-pods] [--clusters ...]`.

A pod's log, or the logs of a hub workload's pods wherever they run, read through the hub's
cluster proxy (the member's ``pods/<name>/log`` with kube's options). A workload's pods are
those its owner references tie to it, on the clusters the hub's Works carry it to; without
``--all-pods`` one of them is shown (as ``kubectl logs deploy/x`` does), with it every one,
each line prefixed ``[cluster/pod]``. With ``-f`` the streams stay open and lines appear as
the members write them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from gpufed.argtypes import duration, tail_lines
from gpufed.commands.running import error_line, run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument, add_namespace_argument
from gpufed.memberproxy import add_clusters_argument, no_pods, print_unreached, stream_lines, target_pods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="POD|KIND/NAME", help="e.g. train-0, pod/train-0, pytorchjob/train")
    add_namespace_argument(parser)
    parser.add_argument("-c", "--container", help="the container (required when a pod has several)")
    parser.add_argument("-f", "--follow", action="store_true", help="keep streaming new lines")
    parser.add_argument("--tail", type=tail_lines, help="only the last N lines of each log (-1: all, the default)")
    parser.add_argument("--since", type=duration, help="only lines newer than this (e.g. 10s, 5m, 1h)")
    parser.add_argument("--all-pods", action="store_true", help="every pod of the workload, not one")
    add_clusters_argument(parser)
    add_kubeconfig_argument(parser)


async def _pods_of(hub: HubClient, args: argparse.Namespace, kind_word: str, name: str) -> list[tuple[str, str]]:
    """(cluster, pod) pairs of the target."""
    pairs, failed = await target_pods(hub, args.namespace, args.clusters, kind_word, name)
    print_unreached(failed)
    return pairs


async def _follow(hub: HubClient, args: argparse.Namespace, cluster: str, pod: str, prefix: bool) -> None:
    params = [("follow", "true")] if args.follow else []
    if args.container:
        params.append(("container", args.container))
    if args.tail is not None and args.tail >= 0:
        params.append(("tailLines", str(args.tail)))
    if args.since:
        params.append(("sinceSeconds", str(max(1, int(args.since.total_seconds())))))
    path = f"/api/v1/namespaces/{args.namespace}/pods/{pod}/log"
    async for line in stream_lines(hub, cluster, path, params):
        print(f"[{cluster}/{pod}] {line}" if prefix else line, flush=True)


async def logs(args: argparse.Namespace) -> int:
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    kind_word, _, name = args.target.rpartition("/")
    pods = await _pods_of(hub, args, kind_word.lower(), name)
    if not pods:
        raise no_pods(args.target, args.namespace)
    if not args.all_pods:
        pods = pods[:1]
    results = await asyncio.gather(
        *(_follow(hub, args, cluster, pod, prefix=args.all_pods) for cluster, pod in pods), return_exceptions=True
    )
    failed = [r for r in results if isinstance(r, BaseException)]
    for error in failed:
        if not isinstance(error, HubError):
            raise error
        print(error_line(error), file=sys.stderr)
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    return run_reporting(logs(args), (HubError, ValueError))
