"""`gpufed sim-cluster`: run one simulated GPU member cluster until SIGINT/SIGTERM.

`gpufed sim-cluster reclaim` takes spot nodes from a running one (:mod:`gpufed.commands.simreclaim`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpufed.argtypes import parse_listen, positive_number
from gpufed.commands import simreclaim
from gpufed.commands.running import serve_reporting
from gpufed.logging_setup import LEVELS, configure_logging

SCORINGS = ("least-allocated", "most-allocated", "best-fit", "fgd", "random")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", type=Path,
                        help="fleet YAML (pick an entry with --cluster) or a single cluster entry")
    parser.add_argument("--cluster", help="which cluster of a fleet file to run (default: the only one)")
    parser.add_argument("--state-dir", type=Path,
                        help="where the cluster writes kubeconfig, its PKI and dcgm-url")
    parser.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 0), metavar="HOST:PORT",
                        help="API address; port 0 picks a free port (default 127.0.0.1:0)")
    parser.add_argument("--dcgm-listen", type=parse_listen, default=("127.0.0.1", 0), metavar="HOST:PORT",
                        help="address of the DCGM exporter page (default 127.0.0.1:0)")
    parser.add_argument("--time-scale", type=positive_number("a speed-up factor such as 2 or 0.5"), default=1.0, metavar="X",
                        help="run simulated time X times faster than the wall clock (default 1)")
    parser.add_argument("--member-scoring", choices=SCORINGS, default=None,
                        help="node scoring of the simulated scheduler (default: the profile's, else least-allocated)")
    parser.add_argument("--seed", type=int, default=None, help="seed for utilization draws and random scoring")
    parser.add_argument("--log-level", default="INFO", choices=LEVELS)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    reclaim = actions.add_parser("reclaim", help="reclaim spot nodes of a running simulated member, as a cloud does")
    simreclaim.add_arguments(reclaim)


def run(args: argparse.Namespace) -> int:
    from simulator.profile import ProfileError, load_fleet
    from simulator.scheduling.model import Scoring
    from simulator.server import SimServer, SimServerConfig, SnapshotError, run_until_signalled

    if getattr(args, "action", None) == "reclaim":
        return simreclaim.run(args)
    missing = [flag for flag, value in (("--profile", args.profile), ("--state-dir", args.state_dir)) if value is None]
    if missing:
        print(f"error: the following arguments are required: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        fleet = load_fleet(args.profile)
    except ProfileError as exc:
        print(f"error: {args.profile}: {exc}", file=sys.stderr)
        return 2
    names = [cluster.name for cluster in fleet.clusters]
    if args.cluster:
        if args.cluster not in names:
            print(f"error: no cluster {args.cluster!r} in {args.profile}; it has: {', '.join(names)}", file=sys.stderr)
            return 2
        profile = fleet.cluster(args.cluster)
    elif len(names) == 1:
        profile = fleet.clusters[0]
    else:
        print(f"error: {args.profile} has {len(names)} clusters ({', '.join(names)}); pick one with --cluster",
              file=sys.stderr)
        return 2
    configure_logging(args.log_level, component=f"sim[{profile.name}]")
    host, port = args.listen
    dcgm_host, dcgm_port = args.dcgm_listen
    config = SimServerConfig(
        profile=profile, state_dir=args.state_dir, host=host, port=port, dcgm_host=dcgm_host,
        dcgm_port=dcgm_port, time_scale=args.time_scale,
        scoring=Scoring(args.member_scoring) if args.member_scoring else None, seed=args.seed,
    )
    return serve_reporting(run_until_signalled(SimServer(config)), host=host, port=port, expected=(SnapshotError,),
                           hint=" (move the file away to start this member empty)")
