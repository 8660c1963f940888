"""`gpufed up`: the whole federation on one machine, as real processes, in one command.

In: a fleet file (default: the one a previous run used, else the demo fleet shipped in
``gpufed/fleets/demo.yaml``) and a state dir (default ``.gpufed``). Out: a hub with its
embedded etcd (``DIR/hub``), one simulated member cluster per fleet entry
(``DIR/members/<name>``) and one agent joined to the hub per member
(``DIR/agents/<name>``), each supervised (restarted on a crash) with its log in
``DIR/logs/<component>.log``; ``DIR/hub.kubeconfig`` for kubectl; a live one-line
status per component; and, on Ctrl-C or SIGTERM, agents, then members, then the hub
stopped cleanly. Started again on the same DIR it resumes: the hub keeps its etcd data,
members restore their snapshot, agents reuse their stored credential, and every
component comes back on the port it had (remembered in ``DIR/up.json``) when it is free.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import fcntl
import importlib.resources
import json
import logging
import os
import shutil
import signal
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import aiohttp
import yaml

from controlplane.apis.constants import BOOTSTRAP_TOKEN_ENV
from gpufed.logging_setup import RedactingFilter
from gpufed.supervising import Probe, ProcessSpec, ProcessState, SupervisedProcess, Supervisor

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR: Final = Path(".gpufed")
DEFAULT_HUB_PORT: Final = 6443
HOST: Final = "127.0.0.1"
CLUSTERS_PATH: Final = "/apis/cluster.gpufed.io/v1alpha1/clusters"
STATUS_INTERVAL: Final = 2.0
REQUEST_TIMEOUT: Final = 5.0
#: How long each start-up stage may take before `gpufed up` gives up and says why.
HUB_START_TIMEOUT: Final = 120.0
MEMBER_START_TIMEOUT: Final = 120.0
AGENT_START_TIMEOUT: Final = 180.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fleet", type=Path, metavar="FILE",
                        help="fleet YAML (default: the fleet of the previous run in DIR, else the demo fleet)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, metavar="DIR",
                        help="where every component keeps its state and logs (default .gpufed)")
    parser.add_argument("--port", type=int, default=None,
                        help="hub port (default: the previous run's, else 6443; a free one if taken)")
    parser.add_argument("--time-scale", type=float, default=1.0, metavar="X",
                        help="simulated members run X times faster than the wall clock (default 1)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="log level of every component (logs go to DIR/logs)")
    parser.add_argument("--waste-sample-interval", type=float, default=None, metavar="SECONDS",
                        help="how often the hub samples GPU usage for the waste report (default: the hub's, 60)")


def _waste_interval(args: argparse.Namespace) -> tuple[str, ...]:
    interval = getattr(args, "waste_sample_interval", None)
    return ("--waste-sample-interval", str(interval)) if interval else ()


# -- where things live ------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The files of one `gpufed up` state dir."""

    root: Path

    @property
    def hub_dir(self) -> Path:
        return self.root / "hub"

    @property
    def hub_kubeconfig(self) -> Path:
        return self.hub_dir / "hub.kubeconfig"

    @property
    def kubeconfig(self) -> Path:
        """What users point kubectl at: a link to the hub's admin kubeconfig."""
        return self.root / "hub.kubeconfig"

    @property
    def fleet(self) -> Path:
        return self.root / "fleet.yaml"

    @property
    def ports(self) -> Path:
        return self.root / "up.json"

    @property
    def lock(self) -> Path:
        return self.root / "up.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def member_dir(self, cluster: str) -> Path:
        return self.root / "members" / cluster

    def agent_dir(self, cluster: str) -> Path:
        return self.root / "agents" / cluster

    def log(self, component: str) -> Path:
        return self.logs / f"{component.replace('/', '-')}.log"


def port_is_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # aiohttp listens with SO_REUSEADDR, so a port in TIME_WAIT counts as free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST, *, taken: set[int] | None = None) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if not taken or port not in taken:
            return port


@dataclass
class Ports:
    """Every component's port, remembered across runs so that a resumed fleet keeps its URLs."""

    hub: int = 0
    members: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Ports:
        try:
            data = json.loads(path.read_text())
            return cls(hub=int(data.get("hub", 0)),
                       members={k: {"api": int(v["api"]), "dcgm": int(v["dcgm"])}
                                for k, v in dict(data.get("members", {})).items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"hub": self.hub, "members": self.members}, indent=2) + "\n")
        os.replace(tmp, path)

    def assign_members(self, names: Sequence[str]) -> None:
        """Keep each member's remembered ports that are still free; pick new ones for the rest."""
        taken = {self.hub}
        for name in names:
            wanted = self.members.get(name, {})
            chosen: dict[str, int] = {}
            for role in ("api", "dcgm"):
                port = wanted.get(role, 0)
                if not port or port in taken or not port_is_free(port):
                    port = free_port(taken=taken)
                taken.add(port)
                chosen[role] = port
            self.members[name] = chosen


def choose_hub_port(*, requested: int | None, remembered: int) -> tuple[int, str | None]:
    """The hub's port and, when it is not the one asked for, a sentence saying why."""
    wanted = requested or remembered or DEFAULT_HUB_PORT
    if port_is_free(wanted):
        return wanted, None
    if requested is None and remembered and wanted != DEFAULT_HUB_PORT and port_is_free(DEFAULT_HUB_PORT):
        return DEFAULT_HUB_PORT, f"port {wanted} (used last time) is taken; the hub listens on {DEFAULT_HUB_PORT}"
    port = free_port()
    return port, f"port {wanted} is taken; the hub listens on {port} instead"


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two `gpufed up` on one state dir would fight)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise UpError(f"another `gpufed up` (pid {holder}) is running on {path.parent}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield


class UpError(Exception):
    """`gpufed up` cannot go on; the message says why and what to do."""


# -- the fleet --------------------------------------------------------------------------


def demo_fleet() -> Path:
    return Path(str(importlib.resources.files("gpufed.fleets") / "demo.yaml"))


def resolve_fleet(explicit: Path | None, layout: Layout) -> Path:
    """Copy the chosen fleet into the state dir (the members read it there on every start)."""
    source = explicit or (layout.fleet if layout.fleet.exists() else demo_fleet())
    if source.resolve() != layout.fleet.resolve():
        layout.root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, layout.fleet)
    return layout.fleet


def cluster_file(profile: Any) -> dict[str, Any]:
    """What the agent declares about its cluster: the fleet entry's placement facts and pricing."""
    fields = ("provider", "region", "zone", "tier", "labels", "pricing")
    data = profile.model_dump(include=set(fields), exclude_none=True)
    return {key: data[key] for key in fields if key in data and data[key] not in ({},)}


# -- talking to the hub and the members -----------------------------------------------


def _fresh(path: Path, started_at: float) -> bool:
    # Written by the run that started at ``started_at`` (a second of slack for mtime granularity).
    return path.exists() and path.stat().st_mtime >= started_at - 1.0


async def _readyz(kubeconfig: Path) -> bool:
    from controlplane.apiserver.kubeconfig import load_kubeconfig
    from controlplane.apiserver.tls import client_ssl_context

    credentials = load_kubeconfig(kubeconfig)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
        session.get(credentials.server.rstrip("/") + "/readyz") as response,
    ):
        return response.status == 200


def kube_probe(kubeconfig: Path) -> Probe:
    """Ready once this run rewrote ``kubeconfig`` and the server it names answers /readyz."""

    async def probe(started_at: float) -> bool:
        return _fresh(kubeconfig, started_at) and await _readyz(kubeconfig)

    return probe


@dataclass(frozen=True)
class ClusterView:
    """What the status line shows of one Cluster object of the hub."""

    name: str
    ready: str
    last_report: float | None
    gpus: tuple[tuple[str, int, int], ...]  # (kind, allocated, allocatable)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClusterView:
        status = obj.get("status") or {}
        ready = next((str(c.get("status")) for c in status.get("conditions") or [] if c.get("type") == "Ready"),
                     "Unknown")
        totals: dict[str, list[int]] = {}
        for entry in status.get("gpuSummary") or []:
            resource = str(entry.get("resource", ""))
            kind = "mig" if resource.startswith("nvidia.com/mig-") else "gpu"
            total = totals.setdefault(kind, [0, 0])
            total[0] += int(entry.get("allocated") or 0)
            total[1] += int(entry.get("allocatable") or 0)
        return cls(
            name=str(obj["metadata"]["name"]),
            ready=ready,
            last_report=_timestamp(status.get("lastReportTime")),
            gpus=tuple((kind, a, b) for kind, (a, b) in sorted(totals.items())),
        )

    def describe(self) -> str:
        ready = {"True": "Ready", "False": "NotReady"}.get(self.ready, "Unknown")
        gpus = "  ".join(f"{kind} {used}/{total} used" for kind, used, total in self.gpus)
        return f"{ready:<8} {gpus}".rstrip()


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class HubView:
    """The hub as `gpufed up` sees it, refreshed every few seconds."""

    kubeconfig: Path
    clusters: dict[str, ClusterView] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def refresh(self) -> None:
        from gpufed.hubclient import HubClient

        client = HubClient.from_kubeconfig(self.kubeconfig)
        async with asyncio.timeout(REQUEST_TIMEOUT):
            listing = await client.request("GET", CLUSTERS_PATH)
        clusters = {view.name: view for view in map(ClusterView.from_object, listing.get("items", []))}
        if clusters != self.clusters:
            self.clusters = clusters
            self.changed.set()

    async def run(self) -> None:
        from gpufed.hubclient import HubError

        while True:
            with contextlib.suppress(HubError, TimeoutError, OSError, ValueError):
                await self.refresh()
            await asyncio.sleep(STATUS_INTERVAL)

    def agent_probe(self, cluster: str) -> Probe:
        """Ready once the hub shows the cluster Ready with a report made since the agent started."""

        async def probe(started_at: float) -> bool:
            view = self.clusters.get(cluster)
            return bool(view and view.ready == "True" and view.last_report and view.last_report >= started_at - 1)

        return probe

    async def mint_bootstrap_token(self, cluster: str) -> str:
        """A one-time join token for ``cluster``, as `gpufed token create --cluster NAME
        --print-join-command` mints it: scoped, so an agent whose state was lost re-joins."""
        from controlplane.apiserver.auth.authorizer import TOKENS_PATH
        from gpufed.hubclient import HubClient

        client = HubClient.from_kubeconfig(self.kubeconfig)
        async with asyncio.timeout(REQUEST_TIMEOUT * 2):
            created = await client.request(
                "POST", TOKENS_PATH, body={"role": "bootstrap", "name": f"gpufed-up/{cluster}", "cluster": cluster}
            )
        return str(created["token"])


# -- the status display ---------------------------------------------------------------


def format_uptime(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def status_rows(processes: Sequence[SupervisedProcess], clusters: Mapping[str, ClusterView]) -> list[list[str]]:
    rows = [["COMPONENT", "PID", "STATE", "UPTIME", "RESTARTS", "CLUSTER"]]
    for process in processes:
        kind, _, cluster = process.name.partition("/")
        view = clusters.get(cluster) if kind == "member" else None
        rows.append([
            process.name,
            str(process.pid or "-"),
            process.state.value,
            format_uptime(process.uptime),
            str(process.restarts),
            view.describe() if view else "",
        ])
    return rows


def render_table(rows: Sequence[Sequence[str]], *, width: int) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        lines.append(line[:width])
    return lines


class StatusBoard:
    """The live table on a terminal (redrawn in place), plain lines on anything else.

    A closed terminal (EIO, a broken pipe) silences the board; it never stops a shutdown.
    """

    def __init__(self, stream: IO[str], processes: list[SupervisedProcess], hub: HubView | None) -> None:
        self.stream: IO[str] | None = stream
        self.processes = processes
        self.hub = hub
        self.live = stream.isatty()
        self._drawn = 0
        self._said: dict[str, str] = {}

    def say(self, text: str) -> None:
        """A message above the live table."""
        self._write(self._erase() + text + "\n" + self._table())

    def refresh(self) -> None:
        if self.live:
            self._write(self._erase() + self._table())
            return
        lines = []
        for process in self.processes:
            if process.pid is None and process.state is ProcessState.STARTING:
                continue  # the line with the pid follows
            pid = f" (pid {process.pid})" if process.pid else ""
            lines += self._changed(process.name, f"{process.name}: {process.state.value}{pid}")
        for view in (self.hub.clusters.values() if self.hub else ()):
            lines += self._changed(f"cluster/{view.name}", f"cluster {view.name}: {view.describe()}")
        self._write("".join(line + "\n" for line in lines))

    def _changed(self, key: str, line: str) -> list[str]:
        if self._said.get(key) == line:
            return []
        self._said[key] = line
        return [line]

    def _table(self) -> str:
        if not self.live or not self.processes:
            return ""
        width = shutil.get_terminal_size((120, 24)).columns - 1
        lines = render_table(status_rows(self.processes, self.hub.clusters if self.hub else {}), width=width)
        self._drawn = len(lines)
        return "".join(f"\x1b[2K{line}\n" for line in lines)

    def _erase(self) -> str:
        drawn, self._drawn = self._drawn, 0
        return f"\x1b[{drawn}F\x1b[J" if self.live and drawn else ""

    def _write(self, text: str) -> None:
        if self.stream is None or not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            self.stream = None


# -- the command --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    from simulator.profile import ProfileError, load_fleet

    layout = Layout(args.state_dir)
    if args.time_scale <= 0:
        print("error: --time-scale must be > 0", file=sys.stderr)
        return 2
    try:
        # Kubeconfigs, agent credentials, member snapshots (Secrets included): the owner's alone.
        layout.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(PermissionError):  # a mounted volume's root may not be ours to change
            layout.root.chmod(0o700)
        with exclusive(layout.lock):
            fleet_path = resolve_fleet(args.fleet, layout)
            try:
                fleet = load_fleet(fleet_path)
            except ProfileError as exc:
                print(f"error: {args.fleet or fleet_path}: {exc}", file=sys.stderr)
                return 2
            _configure_logging(layout, args.log_level)
            return asyncio.run(_up(args, layout, [c.name for c in fleet.clusters], fleet))
    except UpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


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

        hub = supervisor.start(ProcessSpec(
            name="hub",
            argv=_gpufed("controlplane", "--state-dir", str(layout.hub_dir), "--listen", f"{HOST}:{hub_port}",
                         *common, *_waste_interval(args)),
            log_path=layout.log("hub"),
            ready=kube_probe(layout.hub_kubeconfig),
        ))
        background = [asyncio.create_task(ticker(), name="status-board")]
        try:
            if not await _wait_all([hub], stop, HUB_START_TIMEOUT, board):
                return await _shut_down(supervisor, board, stop, failed=True)
            _link_kubeconfig(layout)
            background.append(asyncio.create_task(hub_view.run(), name="hub-view"))

            members = [
                supervisor.start(ProcessSpec(
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
                supervisor.start(_agent_spec(layout, name, fleet.cluster(name), ports, hub_view, common))
                for name in names
            ]
            if not await _wait_all(agents, stop, AGENT_START_TIMEOUT, board):
                return await _shut_down(supervisor, board, stop, failed=True)

            board.say(_welcome(layout, hub_port, names))
            await stop.wait()
            return await _shut_down(supervisor, board, stop, failed=False, order=(agents, members, [hub]))
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)


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
                     "--cluster-file", str(declared), *common),
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


def _link_kubeconfig(layout: Layout) -> None:
    """DIR/hub.kubeconfig -> hub/hub.kubeconfig (relative, so the state dir can move)."""
    link = layout.kubeconfig
    target = layout.hub_kubeconfig.relative_to(layout.root)
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(target)
    except OSError:  # no symlinks here: a copy, refreshed on every start
        shutil.copyfile(layout.hub_kubeconfig, tmp)
    os.replace(tmp, link)


def activate_line() -> list[str]:
    """How another shell gets this ``gpufed`` on its PATH: the virtualenv's activate script
    (``make install`` puts gpufed in ``.venv/bin``, not on the PATH); nothing outside a venv."""
    activate = Path(sys.executable).parent / "activate"
    if sys.prefix == sys.base_prefix or not activate.is_file():
        return []
    return [f"  . {activate.absolute()}        # puts gpufed on this shell's PATH"]


def _welcome(layout: Layout, port: int, names: list[str]) -> str:
    kubeconfig = layout.kubeconfig.absolute()
    member = layout.member_dir(names[0]).absolute() / "kubeconfig"
    return "\n".join([
        "",
        f"gpufed is up: a hub and {len(names)} member cluster(s) ({', '.join(names)}).",
        "",
        *activate_line(),
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get clusters",
        "  kubectl apply -f job.yaml          # a Deployment, Job, PyTorchJob, ... and a PropagationPolicy",
        "  kubectl get resourcebindings,works -A",
        f"  kubectl --kubeconfig {member} get nodes   # inside member {names[0]}",
        "",
        f"Dashboard: https://{HOST}:{port}/ui   (sign in with the token of "
        f"`kubectl config view --raw -o jsonpath='{{.users[0].user.token}}'`)",
        f"Logs: {layout.logs.absolute()}/   Ctrl-C stops everything; `gpufed up` again resumes this fleet.",
        "",
    ])
