"""The `gpufed up` command: its arguments, and the hub, members and agents started in order.

In: the parsed arguments. Out: the hub started and ready, then every member, then every agent
(joined with a one-time token unless it holds a credential for this hub); on Ctrl-C, SIGTERM
or SIGHUP, agents, then members, then the hub stopped; the exit code (1 when a start failed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shlex
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

import yaml

from controlplane.apis.constants import BOOTSTRAP_TOKEN_ENV
from controlplane.pki import private_directory
from gpufed.argtypes import port_number, positive_number
from gpufed.commands.running import report
from gpufed.commands.up.board import StatusBoard, welcome
from gpufed.commands.up.layout import (
    DEFAULT_STATE_DIR,
    Layout,
    UpError,
    exclusive,
    link_kubeconfig,
    resolve_fleet,
)
from gpufed.commands.up.polling import HubView, kube_probe
from gpufed.commands.up.ports import HOST, Ports, choose_hub_port
from gpufed.logging_setup import LEVELS, RedactingFilter
from gpufed.supervising import ProcessSpec, SupervisedProcess, Supervisor
from member_agent.clusterfile import CLUSTER_FILE_FIELDS

#: How long each start-up stage may take before `gpufed up` gives up and says why.
HUB_START_TIMEOUT: Final = 120.0
MEMBER_START_TIMEOUT: Final = 120.0
AGENT_START_TIMEOUT: Final = 180.0


def _bucket_seconds(text: str) -> int:
    """The hub's own check of ``--waste-bucket-length`` (imported when used: `gpufed up --help` stays light)."""
    from gpufed.commands.controlplane import bucket_seconds

    return bucket_seconds(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fleet", type=Path, metavar="FILE",
                        help="fleet YAML (default: the fleet of the previous run in DIR, else the demo fleet)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, metavar="DIR",
                        help="where every component keeps its state and logs (default .gpufed)")
    parser.add_argument("--port", type=port_number, default=None,
                        help="hub port (default: the previous run's, else 6443; a free one if taken; 0: a free one, "
                             "remembered for the next run)")
    parser.add_argument("--time-scale", type=positive_number("a speed-up factor such as 2 or 0.5"), default=1.0, metavar="X",
                        help="simulated members run X times faster than the wall clock (default 1)")
    parser.add_argument("--log-level", default="INFO", choices=LEVELS,
                        help="log level of every component (logs go to DIR/logs)")
    parser.add_argument("--waste-sample-interval", type=float, default=None, metavar="SECONDS",
                        help="how often the hub samples GPU usage for the waste report (default: the hub's, 60)")
    parser.add_argument("--waste-bucket-length", type=_bucket_seconds, default=None, metavar="SECONDS",
                        help="the length of the waste rollups' fine buckets, a divisor of a minute (default: the hub's, 60)")
    parser.add_argument("--hub-arg", action="append", default=[], metavar="FLAG",
                        help="one more flag for the hub (any flag of `gpufed controlplane`), repeatable: "
                             "--hub-arg=--kueue-fair-sharing --hub-arg='--kueue-wait-for-pods-ready-timeout 300'")


#: The hub flags `gpufed up` sets itself, and its own flag that sets each.
_UP_OWNS_HUB_FLAGS: Final = {"--state-dir": "--state-dir", "--listen": "--port", "--log-level": "--log-level",
                             "--waste-sample-interval": "--waste-sample-interval",
                             "--waste-bucket-length": "--waste-bucket-length"}


class _HubFlags(argparse.ArgumentParser):
    """The hub's own parser, answering a bad flag with an :class:`UpError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UpError(f"--hub-arg: {message}")


def hub_args(values: Sequence[str]) -> tuple[str, ...]:
    """The ``--hub-arg`` values as the hub's argv (each split as a shell would: ``"--flag 300"``
    is a flag and its value), checked by the hub's own parser so that a wrong flag is refused
    before anything starts; the flags `gpufed up` sets itself are refused with the flag to use."""
    from gpufed.commands import controlplane

    argv = tuple(part for value in values for part in shlex.split(value))
    for part in argv:
        flag = part.split("=", 1)[0]
        if flag in _UP_OWNS_HUB_FLAGS:
            raise UpError(f"--hub-arg: gpufed up sets the hub's {flag} itself; use gpufed up {_UP_OWNS_HUB_FLAGS[flag]}")
    parser = _HubFlags(prog="gpufed controlplane", add_help=False)
    controlplane.add_arguments(parser)
    conflict = controlplane.conflicting_flags(parser.parse_args(argv))
    if conflict:
        raise UpError(f"--hub-arg: {conflict}")
    return argv


def _waste_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The waste accounting's flags given to `gpufed up`, for the hub (unset ones are the hub's defaults)."""
    interval = getattr(args, "waste_sample_interval", None)
    length = getattr(args, "waste_bucket_length", None)
    return (*(("--waste-sample-interval", str(interval)) if interval else ()),
            *(("--waste-bucket-length", str(length)) if length else ()))


def cluster_file(profile: Any) -> dict[str, Any]:
    """What the agent declares about its cluster: the fleet entry's placement facts and pricing."""
    data = profile.model_dump(include=set(CLUSTER_FILE_FIELDS), exclude_none=True)
    return {key: data[key] for key in CLUSTER_FILE_FIELDS if key in data and data[key] not in ({},)}


def scoring_flags(profile: Any) -> tuple[str, ...]:
    """The agent's flag that reports the simulated member's node scoring (its profile's) to the hub."""
    return ("--member-node-scoring", profile.simulation.scoring.node_scoring.value)


def run(args: argparse.Namespace) -> int:
    from simulator.profile import ProfileError, load_fleet

    layout = Layout(args.state_dir)
    try:
        extra_hub_args = hub_args(args.hub_arg)
    except UpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.hub_arg = list(extra_hub_args)
    try:
        # Kubeconfigs, agent credentials, member snapshots (Secrets included): the owner's alone.
        private_directory(layout.root)
        with exclusive(layout.lock):
            try:
                if args.fleet is not None:  # checked before it replaces the previous run's fleet
                    load_fleet(args.fleet)
                fleet = load_fleet(resolve_fleet(args.fleet, layout))
            except ProfileError as exc:
                where = str(args.fleet or layout.fleet)
                print(f"error: {exc}" if where in str(exc) else f"error: {where}: {exc}", file=sys.stderr)
                return 2
            _configure_logging(layout, args.log_level)
            return asyncio.run(_up(args, layout, [c.name for c in fleet.clusters], fleet))
    except UpError as exc:
        return report(exc)
    except OSError as exc:  # a state dir or fleet file that cannot be used
        if exc.filename is None:
            raise
        return report(exc)


def _configure_logging(layout: Layout, level: str) -> None:
    layout.logs.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(layout.log("up"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-5s up %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def _gpufed(*args: str) -> tuple[str, ...]:
    # The running interpreter, so children use the same installation whatever PATH says.
    return (sys.executable, "-m", "gpufed.cli", *args)


async def _up(args: argparse.Namespace, layout: Layout, names: list[str], fleet: Any) -> int:
    out = sys.stdout
    stop = asyncio.Event()
    presses = 0
    supervisor_ref: list[Supervisor] = []

    def on_signal() -> None:
        nonlocal presses
        presses += 1
        stop.set()
        if presses > 1 and supervisor_ref:
            supervisor_ref[0].kill_all()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal went away
        loop.add_signal_handler(sig, on_signal)

    ports = Ports.load(layout.ports)
    hub_port, note = choose_hub_port(requested=args.port, remembered=ports.hub)
    ports.hub = hub_port
    ports.assign_members(names)
    ports.save(layout.ports)

    hub_view = HubView(layout.hub_kubeconfig)
    board: StatusBoard | None = None

    def on_change(_process: SupervisedProcess) -> None:
        if board is not None:
            board.refresh()

    common = ("--log-level", args.log_level)
    async with Supervisor(on_change=on_change) as supervisor:
        supervisor_ref.append(supervisor)
        board = StatusBoard(out, supervisor.processes, hub_view)
        board.say(f"gpufed up: state in {layout.root}, fleet {', '.join(names)}")
        if note:
            board.say(note)

        async def ticker() -> None:
            while True:
                board.refresh()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await hub_view.changed.wait()
                hub_view.changed.clear()

        hub = supervisor.launch(hub_spec(args, layout, hub_port))
        background = [asyncio.create_task(ticker(), name="status-board")]
        try:
            if not await _wait_all([hub], stop, HUB_START_TIMEOUT, board):
                return await _shut_down(supervisor, board, stop, failed=True)
            link_kubeconfig(layout)
            background.append(asyncio.create_task(hub_view.run(), name="hub-view"))

            members = [
                supervisor.launch(ProcessSpec(
                    name=f"member/{name}",
                    argv=_gpufed("sim-cluster", "--profile", str(layout.fleet), "--cluster", name,
                                 "--state-dir", str(layout.member_dir(name)),
                                 "--listen", f"{HOST}:{ports.members[name]['api']}",
                                 "--dcgm-listen", f"{HOST}:{ports.members[name]['dcgm']}",
                                 "--time-scale", str(args.time_scale), *common),
                    log_path=layout.log(f"member-{name}"),
                    ready=kube_probe(layout.member_dir(name) / "kubeconfig"),
                ))
                for name in names
            ]
            if not await _wait_all(members, stop, MEMBER_START_TIMEOUT, board):
                return await _shut_down(supervisor, board, stop, failed=True)

            agents = [
                supervisor.launch(_agent_spec(layout, name, fleet.cluster(name), ports, hub_view, common))
                for name in names
            ]
            if not await _wait_all(agents, stop, AGENT_START_TIMEOUT, board):
                return await _shut_down(supervisor, board, stop, failed=True)

            board.say(welcome(layout, hub_port, names))
            await stop.wait()
            return await _shut_down(supervisor, board, stop, failed=False, order=(agents, members, [hub]))
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)


def hub_spec(args: argparse.Namespace, layout: Layout, hub_port: int) -> ProcessSpec:
    """The hub's process: its state, address and log level from `gpufed up`'s flags, then the
    ``--hub-arg`` flags (checked by :func:`hub_args`)."""
    return ProcessSpec(
        name="hub",
        argv=_gpufed("controlplane", "--state-dir", str(layout.hub_dir), "--listen", f"{HOST}:{hub_port}",
                     "--log-level", args.log_level, *_waste_flags(args), *args.hub_arg),
        log_path=layout.log("hub"),
        ready=kube_probe(layout.hub_kubeconfig),
    )


def _agent_spec(
    layout: Layout, name: str, profile: Any, ports: Ports, hub_view: HubView, common: tuple[str, ...]
) -> ProcessSpec:
    from controlplane.apiserver.kubeconfig import load_kubeconfig
    from controlplane.apiserver.tls import ca_hash
    from member_agent.hubclient import StateDir

    credentials = load_kubeconfig(layout.hub_kubeconfig)
    hub_url = credentials.server.rstrip("/")
    state = layout.agent_dir(name)
    state.mkdir(parents=True, exist_ok=True)
    declared = state / "cluster.yaml"
    declared.write_text(yaml.safe_dump(cluster_file(profile), sort_keys=False))

    async def prepare() -> Mapping[str, str]:
        # A stored credential for this hub is enough; otherwise join with a fresh one-time token.
        if StateDir(state).load_credential(hub=hub_url, cluster_name=name) is not None:
            return {}
        return {BOOTSTRAP_TOKEN_ENV: await hub_view.mint_bootstrap_token(name)}

    return ProcessSpec(
        name=f"agent/{name}",
        argv=_gpufed("agent", "--hub", hub_url, "--hub-ca-hash", ca_hash(credentials.ca_pem),
                     "--cluster-name", name, "--kubeconfig", str(layout.member_dir(name) / "kubeconfig"),
                     "--state-dir", str(state),
                     "--dcgm-url", f"http://{HOST}:{ports.members[name]['dcgm']}/metrics",
                     "--cluster-file", str(declared), "--enable-proxy", *scoring_flags(profile), *common),
        log_path=layout.log(f"agent-{name}"),
        ready=hub_view.agent_probe(name),
        prepare=prepare,
    )


async def _wait_all(
    processes: list[SupervisedProcess], stop: asyncio.Event, limit: float, board: StatusBoard
) -> bool:
    """True once every process is ready; False (after saying why) on Ctrl-C or after ``limit`` seconds."""
    waiting: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*(p.wait_ready() for p in processes)))
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({waiting, stopped}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in (waiting, stopped):
            future.cancel()
        await asyncio.gather(waiting, stopped, return_exceptions=True)
    if waiting in done:
        return True
    if not stop.is_set():
        for process in processes:
            if not process.ready:
                board.say(f"error: {process.name} did not become ready within {limit:.0f}s "
                          f"(state {process.state.value}, {process.restarts} restart(s)); "
                          f"last lines of {process.spec.log_path}:\n{_tail(process.spec.log_path)}")
    return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "  (no log)"
    return "\n".join("  " + line for line in text.splitlines()[-lines:])


async def _shut_down(
    supervisor: Supervisor,
    board: StatusBoard,
    stop: asyncio.Event,
    *,
    failed: bool,
    order: Sequence[Sequence[SupervisedProcess]] = (),
) -> int:
    board.say("stopping: agents, then members, then the hub ...")
    if order:
        await supervisor.stop_in_order(*order)
    await supervisor.stop_all()
    board.refresh()
    board.say("stopped." if not failed else "stopped after a failed start; see the logs above.")
    return 1 if failed and not stop.is_set() else 0
