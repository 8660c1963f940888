"""The `gpufed` command: one entry point, one subcommand per process or user action.

Subcommands import their implementation lazily so that `gpufed --help` and the small
user commands start fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence

# name -> (module, help). Each module has `add_arguments(parser)` and `run(args) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "up": ("gpufed.commands.up", "run a hub and a demo fleet of simulated GPU clusters with their agents"),
    "controlplane": ("gpufed.commands.controlplane", "run the hub: API server, controllers, embedded etcd if none given"),
    "backup": ("gpufed.commands.backup", "save a snapshot of the hub's etcd, or restore a stopped hub's etcd from one"),
    "sim-cluster": ("gpufed.commands.simcluster", "run a simulated GPU member cluster"),
    "sim-fleet": ("gpufed.commands.simfleet", "run many hollow member clusters with their agents in one process (scale tests)"),
    "agent": ("gpufed.commands.agent", "run the member agent for one cluster"),
    "token": ("gpufed.commands.token", "create, list and revoke hub tokens (join tokens for agents)"),
    "whatif": ("gpufed.commands.whatif", "replay a GPU job trace against a simulated fleet and compare placement strategies"),
    "waste": ("gpufed.commands.waste", "GPU-hours and $ per waste state, idle workloads, recommendations"),
    "cordon": ("gpufed.commands.cordon", "mark a member cluster unschedulable: new work avoids it, running work stays"),
    "uncordon": ("gpufed.commands.cordon", "mark a member cluster schedulable again"),
    "taint": ("gpufed.commands.cordon", "add or remove taints on a member cluster (key=value:Effect, key:Effect-)"),
    "explain": ("gpufed.commands.explain", "why a workload runs where it runs: per cluster, chosen or not and why"),
    "get": ("gpufed.commands.get", "list objects on member clusters through the hub's cluster proxy, CLUSTER column first"),
    "events": ("gpufed.commands.events", "a workload's events on the hub and on its member clusters, one timeline"),
    "logs": ("gpufed.commands.logs", "a pod's log, or every pod's of a workload, from member clusters through the hub"),
    "describe": ("gpufed.commands.describe", "an object as the hub and its member clusters see it: placement, pods, events"),
    "top": ("gpufed.commands.top", "CPU, memory and GPU use of pods or nodes on member clusters, CLUSTER column first"),
    "queues": ("gpufed.commands.queues", "fleet quotas per ClusterQueue, flavor and resource: nominal, limits, usage, borrowed, pending"),
    "exec": ("gpufed.commands.execute", "run a command in a member cluster's pod through the hub; its exit code is the command's"),
}


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``commands``, only those subcommands' modules are imported
    and get their flags (the others are listed for ``gpufed --help`` by name and help alone)."""
    parser = argparse.ArgumentParser(
        prog="gpufed",
        description="Multi-cluster GPU federation: place GPU work across clusters, report GPU waste.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = set(SUBCOMMANDS if commands is None else commands)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        if name not in wanted:
            continue
        module = importlib.import_module(module_name)
        module.add_arguments(child)
        run: Callable[[argparse.Namespace], int] = module.run
        child.set_defaults(handler=run, usage_error=child.error)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line: its first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand to its exit status: its own, 2 for a usage error (argparse's, or a
    :class:`~gpufed.argtypes.UsageError` the command raises), 130 on
    Ctrl-C and 141 when the reader of its output went away (`gpufed get ... | head -1`), as for a
    program SIGPIPE ends; never a traceback for either."""
    # gRPC (the etcd client) logs a failed TLS handshake to stderr on its own; the command
    # already reports it as one actionable line.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            return _run(words)
        finally:
            if sys.stdout is not None:
                sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Whatever is still buffered would fail again when the interpreter flushes it at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def parse(words: list[str]) -> argparse.Namespace:
    """The arguments of one command line, ``-n`` filled in from the kubeconfig's context where
    the command takes it as kubectl does (:func:`gpufed.hubclient.add_namespace_argument`)."""
    parser = build_parser([command] if (command := _command(words)) is not None else [])
    args = parser.parse_args(words)
    if getattr(args, "namespace_from_context", False):
        from gpufed.hubclient import resolve_namespace

        resolve_namespace(args)
    return args


def _run(words: list[str]) -> int:
    # Every process (hub, agent, member, each user command) starts through here: importing one
    # subcommand's module, not all of them, saves seconds of CPU per process started.
    from gpufed.argtypes import UsageError

    args = parse(words)
    try:
        return int(args.handler(args))
    except UsageError as exc:
        args.usage_error(str(exc))  # argparse's: the usage, the message, exit status 2
        raise


if __name__ == "__main__":
    sys.exit(main())
