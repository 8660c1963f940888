"""`gpufed sim-fleet`: many hollow member clusters, each with the real agent, in one process.

Joins every cluster to the hub with its own one-time bootstrap token: minted here through the
hub's token API with ``--hub-kubeconfig`` (an admin's kubeconfig, as ``gpufed token create
--cluster NAME`` does), or read one per line from ``--token-file`` with ``--hub`` and
``--hub-ca-hash``. Prints one line once every cluster has reported (the process RSS per
node) and writes the same figures to ``<state-dir>/fleet.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

from pydantic import SecretStr, ValidationError

from controlplane.gcpolicy import collector_tuned
from controlplane.loopwatch import watching_the_loop
from gpufed.commands.running import (
    add_collector_arguments,
    add_loop_stall_argument,
    collector_policy,
    first_problem,
    report,
)
from gpufed.hubclient import HubClient, HubError
from gpufed.logging_setup import LEVELS, configure_logging

MAX_CLUSTERS = 1000
MAX_NODES = 100_000
TOKEN_TTL_SECONDS = 3600
STATS_NAME = "fleet.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clusters", type=int, required=True, help="how many hollow member clusters")
    parser.add_argument("--nodes", type=int, required=True, help="GPU nodes per cluster")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--models", default="NVIDIA-A100-SXM4-80GB",
                        help="comma-separated GPU products, given to the clusters in turn (default an A100)")
    parser.add_argument("--name-prefix", default="hollow", help="clusters are named PREFIX-0, PREFIX-1 ...")
    parser.add_argument("--state-dir", type=Path, required=True, help="where the agents keep their credentials")
    parser.add_argument("--hub-kubeconfig", type=Path,
                        help="admin kubeconfig of the hub: a join token is created for each cluster")
    parser.add_argument("--hub", help="hub URL (with --token-file)")
    parser.add_argument("--hub-ca-hash", help="sha256:<hex> of the hub CA's public key (with --token-file)")
    parser.add_argument("--token-file", type=Path,
                        help="one-time join tokens, one per line, one per cluster (instead of --hub-kubeconfig)")
    parser.add_argument("--heartbeat-interval", type=float, default=10.0, help="agent lease renewal, seconds")
    parser.add_argument("--report-interval", type=float, default=30.0, help="agent capacity report, seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the member schedulers' tie breaks")
    parser.add_argument("--log-level", default="WARNING", choices=LEVELS)
    add_loop_stall_argument(parser, loop="fleet's")
    add_collector_arguments(parser)


def _check(args: argparse.Namespace) -> str | None:
    if not 1 <= args.clusters <= MAX_CLUSTERS:
        return f"--clusters must be 1..{MAX_CLUSTERS}"
    if not 1 <= args.nodes <= MAX_NODES:
        return f"--nodes must be 1..{MAX_NODES}"
    if not 1 <= args.gpus_per_node <= 16:
        return "--gpus-per-node must be 1..16"
    if (args.hub_kubeconfig is None) == (args.token_file is None):
        return "give either --hub-kubeconfig (tokens are created) or --token-file with --hub and --hub-ca-hash"
    if args.token_file is not None and not (args.hub and args.hub_ca_hash):
        return "--token-file needs --hub and --hub-ca-hash"
    from simulator.hollow.nodes import hollow_profile

    if not _models(args):
        return "--models names no GPU product"
    for model in _models(args):
        try:
            hollow_profile("check", nodes=1, gpus_per_node=args.gpus_per_node, product=model)
        except ValidationError as exc:
            return f"--models: {first_problem(exc)}"
    return None


def _models(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(m.strip() for m in args.models.split(",") if m.strip())


async def _tokens(args: argparse.Namespace, names: list[str]) -> tuple[str, str, list[str]]:
    """(hub URL, CA hash, one join token per cluster)."""
    if args.token_file is not None:
        try:
            lines = [line.strip() for line in args.token_file.read_text().splitlines() if line.strip()]
        except OSError as exc:
            raise ValueError(f"cannot read --token-file {args.token_file}: {exc}") from exc
        if len(lines) < len(names):
            raise ValueError(f"--token-file {args.token_file} has {len(lines)} tokens; {len(names)} clusters need one each")
        return str(args.hub), str(args.hub_ca_hash), lines[: len(names)]
    from controlplane.apis.constants import TOKENS_PATH
    from controlplane.apiserver.tls import ca_hash

    client = HubClient.from_kubeconfig(
        args.hub_kubeconfig, missing=f"--hub-kubeconfig {args.hub_kubeconfig}: no such file")
    tokens = []
    for name in names:
        body = {"role": "bootstrap", "name": f"sim-fleet-{name}", "cluster": name, "ttlSeconds": TOKEN_TTL_SECONDS}
        created = await client.request("POST", TOKENS_PATH, body=body)
        tokens.append(str(created["token"]))
    return client.server, ca_hash(client.credentials.ca_pem), tokens


async def _main(args: argparse.Namespace) -> int:
    from member_agent.config import AgentConfig
    from simulator.hollow.fleet import FleetPlan, HollowFleet

    models = _models(args)
    plan = FleetPlan(clusters=args.clusters, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                     models=models, prefix=args.name_prefix, seed=args.seed)
    names = plan.names()
    hub, hub_ca_hash, tokens = await _tokens(args, names)
    try:
        configs = [
            AgentConfig(hub=hub, hub_ca_hash=hub_ca_hash, bootstrap_token=SecretStr(token), cluster_name=name,
                        state_dir=args.state_dir / name, heartbeat_interval=args.heartbeat_interval,
                        report_interval=args.report_interval,
                        # One agent per hollow member, all in this process: nothing to elect.
                        leader_elect=False)
            for name, token in zip(names, tokens, strict=True)
        ]
    except ValidationError as exc:
        raise ValueError(first_problem(exc)) from None
    fleet = HollowFleet(plan, configs)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, fleet.request_stop)
    async with collector_tuned(collector_policy(args)), watching_the_loop(args.loop_stall_warning):
        task = fleet.spawn()
        joined = asyncio.ensure_future(fleet.joined().wait())
        await asyncio.wait({task, joined}, return_when=asyncio.FIRST_COMPLETED)
        if joined.done():
            stats = fleet.stats()
            figures = {"clusters": stats.clusters, "nodesPerCluster": stats.nodes, "buildSeconds": round(stats.build_seconds, 2),
                       "joinSeconds": round(stats.join_seconds or 0.0, 2), "rssBytes": stats.rss,
                       "rssPerNodeBytes": round(stats.rss_per_node)}
            (args.state_dir / STATS_NAME).write_text(json.dumps(figures) + "\n")
            print(f"hollow fleet ready: {stats.clusters} clusters x {stats.nodes} nodes joined in "
                  f"{stats.join_seconds or 0:.1f} s; RSS {stats.rss / 2**20:.0f} MiB "
                  f"({stats.rss_per_node / 1024:.1f} KiB per node)", flush=True)
        else:
            joined.cancel()
        await task
    return 0


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    configure_logging(args.log_level, component="sim-fleet")
    try:
        args.state_dir.mkdir(parents=True, exist_ok=True)
        return asyncio.run(_main(args))
    except (HubError, ValueError, OSError) as exc:
        logging.getLogger("gpufed.sim-fleet").debug("sim-fleet stopped", exc_info=True)
        return report(exc)
