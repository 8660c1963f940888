"""`gpufed whatif run|split`: replay a GPU job trace against a simulated fleet, compare strategies.

``run`` loads a fleet YAML and a trace (Alibaba openb CSV or the generic CSV), replays it
once per strategy (gpufed's hub scheduler, static partitioning, a Karmada-like baseline,
all nodes pooled) and prints a table or the JSON contract; ``--plot`` draws the curves.
``split`` turns the openb node list into a fleet YAML on stdout; ``variant`` writes a seeded
variant of an openb pod list (the FGD paper's gpushare/multigpu/gpuspec/cpu kinds) on stdout.
Details: docs/whatif.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from gpufed.argtypes import UsageError, whole_number
from gpufed.commands.kueueflags import (
    add_admission_fair_sharing_arguments,
    add_preemption_strategies_argument,
    admission_fair_sharing,
    admission_fair_sharing_conflicts,
    fair_sharing_conflicts,
    preemption_strategies,
)
from gpufed.commands.running import report
from gpufed.logging_setup import LEVELS, configure_logging


def _strategies(text: str) -> list[str]:
    from simulator.whatif.strategies import StrategyName

    names = [part.strip() for part in text.split(",") if part.strip()]
    known = [str(s) for s in StrategyName]
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"unknown strategy {name!r} (choose from {', '.join(known)})")
    if not names:
        raise argparse.ArgumentTypeError("name at least one strategy")
    return list(dict.fromkeys(names))


def _inflate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--inflate wants a number, not {text!r}") from None
    if not 1.3 <= value <= 10:
        raise argparse.ArgumentTypeError("--inflate must be between 1.3 and 10")
    return value


def _percent(text: str) -> int:
    if not text.isdigit() or int(text) > 100:
        raise argparse.ArgumentTypeError(f"want a percentage from 0 to 100, not {text!r}")
    return int(text)


_positive = whole_number(1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from simulator.whatif.fleetsplit import SplitBy
    from simulator.whatif.member import MemberScoring
    from simulator.whatif.strategies import DEFAULT_STRATEGIES, StrategyName
    from simulator.whatif.variants import VariantKind

    sub = parser.add_subparsers(dest="whatif_command", metavar="ACTION")
    sub.required = True
    run = sub.add_parser(
        "run", help="replay a GPU job trace against a fleet and compare placement strategies"
    )
    run.add_argument("--fleet", required=True, type=Path, help="fleet YAML (see `gpufed whatif split`)")
    run.add_argument("--trace", required=True, type=Path, help="openb pod list CSV or a generic job CSV")
    run.add_argument(
        "--policy", type=Path, help="PropagationPolicy YAML whose placement the gpufed strategy uses"
    )
    run.add_argument(
        "--compare",
        type=_strategies,
        default=[str(s) for s in DEFAULT_STRATEGIES],
        metavar="STRATEGIES",
        help=f"comma-separated strategies of {','.join(StrategyName)} (default: {','.join(DEFAULT_STRATEGIES)})",
    )
    run.add_argument(
        "--rebalance",
        action="store_true",
        help="also replay gpufed with automatic returns to a cheaper tier (gpufed-rebalance) and "
        "report what they saved against gpufed without them",
    )
    run.add_argument(
        "--member-scoring",
        choices=[str(s) for s in MemberScoring],
        help="scoring of every member's scheduler (default: each cluster's simulation.scoring)",
    )
    run.add_argument(
        "--inflate",
        type=_inflate,
        default=1.3,
        help="fill until arrived GPU demand is this multiple of capacity (default 1.3)",
    )
    run.add_argument(
        "--seed", type=int, default=0, help="seed for order, sampling and tie-breaking (default 0)"
    )
    run.add_argument(
        "--nodes-to-score",
        type=_percent,
        default=0,
        metavar="PCT",
        help="members' percentageOfNodesToScore: 0 is kube's adaptive default, 100 scores every "
        "feasible node as the FGD paper's simulator does (default 0)",
    )
    run.add_argument(
        "--no-replay", action="store_true", help="skip the timed replay (allocation figures only)"
    )
    run.add_argument(
        "--quotas",
        type=Path,
        metavar="FILE",
        help="Kueue ResourceFlavor/ClusterQueue/LocalQueue (and Cohort) YAML: the replay admits each job through its "
        "tenant's (namespace's) LocalQueue and reports waits, GPU-hours and Jain's index per tenant",
    )
    run.add_argument(
        "--fair-sharing",
        choices=["off", "on", "both"],
        default="off",
        help="with --quotas: admit with Kueue's fair sharing (fairSharing.enable), without it (default, as "
        "Kueue), or replay both and show the tenants' figures of each",
    )
    add_preemption_strategies_argument(run)  # the hub's flag: with --fair-sharing on or both
    run.add_argument(
        "--synthetic-tenants",
        type=_positive,
        metavar="N",
        help="give jobs without a tenant one of team-1..team-N, by a hash of the seed and the job's name "
        "(Zipf weights 1/k: team-1 submits most)",
    )
    add_admission_fair_sharing_arguments(run)  # the hub's flags: with --quotas, the replay keeps usage as the hub does
    run.add_argument("-o", "--output", choices=["table", "json"], default="table")
    run.add_argument(
        "--plot", type=Path, metavar="FILE", help="also draw the comparison to FILE (.png, .svg, .pdf)"
    )
    run.add_argument("--log-level", default="WARNING", choices=LEVELS)
    split = sub.add_parser("split", help="split the openb node list into a fleet YAML (on stdout)")
    split.add_argument("nodes", type=Path, metavar="NODES.csv")
    split.add_argument("--clusters", type=_positive, required=True)
    split.add_argument("--by", choices=[str(s) for s in SplitBy], default=str(SplitBy.MODEL))
    split.add_argument("--seed", type=int, default=0)
    variant = sub.add_parser("variant", help="write a seeded variant of an openb pod list (on stdout)")
    variant.add_argument("trace", type=Path, metavar="TRACE.csv")
    variant.add_argument("--kind", choices=[str(k) for k in VariantKind], required=True)
    variant.add_argument("--percent", type=_positive, required=True, metavar="X")
    variant.add_argument("--nodes", type=Path, metavar="NODES.csv", help="node list (gpuspec draws its models)")
    variant.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    if args.whatif_command == "split":
        return _split(args)
    if args.whatif_command == "variant":
        return _variant(args)
    configure_logging(args.log_level, component="whatif")
    from simulator.profile import ProfileError
    from simulator.whatif.trace import TraceError

    try:
        return _run(args)
    except (BrokenPipeError, UsageError):
        raise  # the reader of the output went away: the entry point ends quietly; exit status 2
    except (OSError, ProfileError, TraceError, ValueError) as exc:
        return report(exc)


def _split(args: argparse.Namespace) -> int:
    from simulator.profile import read_alibaba_nodes
    from simulator.whatif.fleetsplit import SplitBy, SplitError, split_nodes

    try:
        nodes = read_alibaba_nodes(args.nodes)
        fleet = split_nodes(
            nodes, clusters=args.clusters, by=SplitBy(args.by), seed=args.seed, csv_path=str(args.nodes)
        )
    except OSError as exc:
        return report(exc)
    except (ValueError, KeyError, SplitError) as exc:
        print(f"error: {args.nodes}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(
        f"# gpufed what-if fleet: {args.nodes} split --by {args.by} into {args.clusters} cluster(s), seed {args.seed}.\n"
        "# Nodes: Alibaba clusterdata cluster-trace-gpu-v2023 (CC BY 4.0), Weng et al., USENIX ATC '23.\n"
        "# Prices are $ per GPU-hour assumptions; edit them to match your contracts.\n"
    )
    yaml.safe_dump(fleet, sys.stdout, sort_keys=False, default_flow_style=None, width=200)
    return 0


def _variant(args: argparse.Namespace) -> int:
    from collections import Counter

    from simulator.profile import ALIBABA_MODELS, read_alibaba_nodes
    from simulator.whatif.trace import TraceError, read_trace
    from simulator.whatif.variants import VariantError, VariantKind, make_variant, to_openb_csv

    try:
        _, jobs = read_trace(args.trace)
        model_gpus: Counter[str] = Counter()
        if args.nodes is not None:
            try:
                nodes = read_alibaba_nodes(args.nodes)
            except ValueError as exc:
                print(f"error: {args.nodes}: {exc}", file=sys.stderr)
                return 1
            for node in nodes:
                if node.gpuCount and node.model in ALIBABA_MODELS:
                    model_gpus[ALIBABA_MODELS[node.model][0]] += node.gpuCount
        jobs = make_variant(jobs, VariantKind(args.kind), args.percent, seed=args.seed, model_gpus=model_gpus)
    except (OSError, TraceError, VariantError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(to_openb_csv(jobs))
    return 0


def _load_policy(path: Path) -> Any:
    from controlplane.yamlfile import read_yaml_mapping
    from policies.models import ClusterPropagationPolicy, PropagationPolicy
    from policies.validation import parse_policy
    from simulator.profile import format_validation_error

    document = read_yaml_mapping(path, not_mapping=": expected one PropagationPolicy document")
    try:
        policy = parse_policy(document)
    except ValidationError as exc:
        raise ValueError(f"{path}: {format_validation_error(exc)}") from exc
    if not isinstance(policy, PropagationPolicy | ClusterPropagationPolicy):
        raise ValueError(f"{path}: kind {policy.kind} has no placement; give a (Cluster)PropagationPolicy")
    return policy.spec.placement


class _Progress:
    """One self-overwriting stderr line on a terminal; elsewhere a plain line every 10 % of a phase."""

    STEP_PCT = 10

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.width = 0
        self.logged: dict[str, int] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        pct = 100 * done // max(total, 1)
        if not self.enabled:
            step = pct // self.STEP_PCT
            if step > self.logged.get(phase, 0) or (done >= total and phase not in self.logged):
                self.logged[phase] = step
                self.stream.write(f"whatif: {phase} {done}/{total} ({pct} %)\n")
                self.stream.flush()
            return
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        line = f"{phase:<22} [{bar}] {done}/{total}"
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(self.width))
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def _run(args: argparse.Namespace) -> int:
    from simulator.profile import load_fleet
    from simulator.whatif.engine import Settings, compare
    from simulator.whatif.member import MemberScoring
    from simulator.whatif.strategies import StrategyName
    from simulator.whatif.trace import read_trace

    if args.plot:
        from simulator.whatif.plot import check_target

        check_target(args.plot)
    if not args.quotas and (args.fair_sharing != "off" or args.synthetic_tenants):
        flag = "--fair-sharing" if args.fair_sharing != "off" else "--synthetic-tenants"
        raise UsageError(f"{flag} needs --quotas (tenants and fair sharing matter only under Kueue quotas)")
    if (conflict := admission_fair_sharing_conflicts(args)) is not None:
        raise UsageError(conflict)
    fair = fair_sharing_conflicts(args, enabled=args.fair_sharing != "off", turn_on="--fair-sharing on (or both)")
    if fair is not None:
        raise UsageError(fair)
    if not args.quotas and args.kueue_admission_fair_sharing:
        raise UsageError("--kueue-admission-fair-sharing needs --quotas (it orders the LocalQueues of Kueue quotas)")
    if args.quotas and args.no_replay:
        raise UsageError("--quotas gates the timed replay; it cannot go with --no-replay")
    fleet = load_fleet(args.fleet)
    trace_format, jobs = read_trace(args.trace)
    if not jobs:
        raise ValueError(f"{args.trace}: the trace has no jobs")
    if args.synthetic_tenants:
        from simulator.whatif.tenants import assign_synthetic_tenants

        jobs = assign_synthetic_tenants(jobs, count=args.synthetic_tenants, seed=args.seed)
    quotas = None
    if args.quotas:
        from simulator.whatif.quotas import read_quotas

        quotas = replace(read_quotas(args.quotas), admission_fair_sharing=admission_fair_sharing(args))
    if not trace_format.timed and not args.no_replay:
        raise ValueError(
            f"{args.trace}: the pod list has no creation_time/deletion_time columns, so it cannot be "
            "replayed in time; add --no-replay for the allocation figures"
        )
    placement = _load_policy(args.policy) if args.policy else None
    names = list(args.compare)
    if args.rebalance:
        names += [str(s) for s in (StrategyName.GPUFED, StrategyName.GPUFED_REBALANCE) if str(s) not in names]
    settings = Settings(
        seed=args.seed,
        inflate=args.inflate,
        scoring=MemberScoring(args.member_scoring) if args.member_scoring else None,
        placement=placement,
        percentage_of_nodes_to_score=args.nodes_to_score,
        replay=not args.no_replay,
        quotas=quotas,
        fair_sharing={"off": (False,), "on": (True,), "both": (False, True)}[args.fair_sharing],
        fair_sharing_preemption_strategies=preemption_strategies(args),
    )
    comparison = compare(
        fleet,
        jobs,
        strategies=[StrategyName(s) for s in names],
        settings=settings,
        progress=_Progress(sys.stderr),
    )
    result = comparison.to_json()
    result["trace"]["path"] = str(args.trace)
    result["trace"]["format"] = str(trace_format)
    if args.plot:
        from simulator.whatif.plot import render

        render(result, args.plot)
    if args.output == "json":
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(result))
    return 0


COLUMNS = (
    ("STRATEGY", None),
    ("ALLOC@100%", "allocation_pct_at_100"),
    ("ALLOC@130%", "allocation_pct_at_130"),
    ("UNALLOC GPUS@100%", "unallocated_gpus_at_100"),
    ("WAIT MEAN", "wait_mean_s"),
    ("WAIT P99", "wait_p99_s"),
    ("COST $", "cost_usd"),
)
STATE_COLUMNS = ("busy", "idle-allocated", "free-needed", "free-fragmented", "free-spare")


def format_table(result: dict[str, Any]) -> str:
    """The comparison as a kubectl-style table, GPU-hours by state on the right."""
    header = [name for name, _ in COLUMNS] + [f"{s.upper()} GPU-H" for s in STATE_COLUMNS]
    rows = [header]
    for name, values in result["strategies"].items():
        row = [name]
        for _, key in COLUMNS[1:]:
            assert key is not None
            if values[key] is None:
                row.append("-")
                continue
            value = float(values[key])
            row.append(f"{value:.1f}" if key.endswith(("pct_at_100", "pct_at_130")) else f"{value:,.1f}")
        hours = values["gpu_hours"]
        row += ["-" if hours is None else f"{float(hours.get(s, 0.0)):,.0f}" for s in STATE_COLUMNS]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    fleet = result["fleet"]
    lines.append("")
    lines.append(
        f"fleet: {fleet['gpus']} GPUs in {len(fleet['clusters'])} cluster(s); trace: {result['trace']['jobs']} jobs; "
        f"waits in seconds; allocation = GPUs allocated / capacity when arrived demand reached the mark."
    )
    scorings = {name: values.get("member_scoring") for name, values in result["strategies"].items()}
    lines.append("member scoring: " + ", ".join(f"{name} {scoring}" for name, scoring in scorings.items()))
    rebalance = result.get("rebalance")
    if rebalance is not None:
        lines += format_rebalance(rebalance)
    for name, values in result["strategies"].items():
        for tally in (values.get("tenants") or {}).values():
            lines += ["", *format_tenants(name, tally)]
    if any(values["wait_mean_s"] is None for values in result["strategies"].values()):
        lines.append("no replay ran (--no-replay): waits, costs and GPU-hours were not measured.")
    return "\n".join(lines) + "\n"


TENANT_COLUMNS = (
    ("TENANT", None),
    ("CLUSTERQUEUE", "cluster_queue"),
    ("SHARE", "share"),
    ("JOBS", "jobs"),
    ("ADMITTED", "jobs_admitted"),
    ("PREEMPTED", "preempted"),
    ("WAIT MEAN", "wait_mean_s"),
    ("WAIT P99", "wait_p99_s"),
    ("GPU-H", "gpu_hours"),
    ("QUOTA-WAIT H", "quota_wait_hours"),
    ("GPUS/SHARE WAITING", "gpus_per_share_while_waiting"),
)


def format_tenants(strategy: str, tally: dict[str, Any]) -> list[str]:
    """One replay's per-tenant figures and Jain's index (formula: docs/whatif.md)."""
    rows = [[name for name, _ in TENANT_COLUMNS]]
    for tenant, values in tally["tenants"].items():
        row = [tenant]
        for _, key in TENANT_COLUMNS[1:]:
            assert key is not None
            value = values[key]
            if value is None:
                row.append("-")
            elif isinstance(value, str):
                row.append(value)
            elif isinstance(value, int):
                row.append(f"{value:,}")
            else:
                row.append(f"{value:,.2f}" if key in ("share", "gpus_per_share_while_waiting") else f"{value:,.1f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    mode = "with" if tally["fair_sharing"] else "without"
    jain = tally["jain_index"]
    return [
        f"tenants ({strategy}, {mode} fair sharing):",
        *("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows),
        f"Jain's fairness index over tenants that waited for quota ({mode} fair sharing): "
        + (f"{jain:.4f}" if jain is not None else "- (no tenant waited for quota)"),
    ]


def _tiers(hours: dict[str, float]) -> str:
    return ", ".join(f"{tier} {value:,.0f}" for tier, value in hours.items()) or "none"


def format_rebalance(rebalance: dict[str, Any]) -> list[str]:
    """What automatic returns to a cheaper tier did, ``gpufed-rebalance`` against ``gpufed``."""
    cost, hours = rebalance["cost_usd"], rebalance["gpu_hours_by_tier"]
    return [
        f"returns to a cheaper tier (gpufed-rebalance against gpufed): saved ${rebalance['saved_usd']:,.2f} "
        f"(cost ${cost['without']:,.2f} -> ${cost['with']:,.2f}); {rebalance['replicas_moved']} replica(s) "
        f"moved ({rebalance['gpus_moved']:,.1f} GPUs), the moves' own estimate ${rebalance['estimated_saving_usd']:,.2f}",
        f"allocated GPU-hours by tier: without {_tiers(hours['without'])}; with {_tiers(hours['with'])}",
    ]
