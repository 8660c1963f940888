"""A simulated member cluster as a process: the kube API over HTTPS, plus a DCGM page.

In: a :class:`~simulator.profile.ClusterProfile` and a state dir. Out: a kube-compatible
API (the hub's API machinery over an in-memory store, TLS and a bearer token, like a
real cluster) whose address, CA and token are in ``<state-dir>/kubeconfig``; a
dcgm-exporter-format page at ``http://<dcgm-listen>/metrics`` whose URL is in
``<state-dir>/dcgm-url``; and the :class:`~simulator.cluster.SimulatedCluster` loops
(scheduler, kubelet, controllers) running against that API's store.

The store lives in memory, so the server snapshots it to ``<state-dir>/snapshot.json``
(every key, value and revision; written atomically and synced) every ``snapshot_interval``
seconds and on shutdown, journals every write made since (``<state-dir>/writes.journal``,
:mod:`simulator.journal`), and restores both on start: a member restarted on the same state
dir, even one killed with ``kill -9``, comes back with every write it acknowledged at its
resourceVersion, like a real cluster's etcd.

Pod logs (``pods/<name>/log``, :mod:`simulator.podlogs`) are generated lines, ``pods/<name>/exec``
runs a small command set and ``attach`` streams the container's output, over WebSockets
(:mod:`simulator.podexec`), a pod whose ServiceAccount is missing is refused as kube's admission
refuses it (:mod:`simulator.admitting`), and so is a write past a ResourceQuota (the hub's
:mod:`controlplane.apiserver.quotaadmission`), ``pods/<name>/portforward`` echoes on every port
(:mod:`simulator.portforward`), the resource metrics API (``metrics.k8s.io/v1beta1``,
:mod:`simulator.podmetrics`) modelled usage; the server
records its recent callers (peer address and ``Impersonate-*`` headers) at
``/debug/gpufed/callers``.

A deleted namespace's content is deleted after its delete answers, and the namespace removed once empty,
by kube's namespace controller (:mod:`controlplane.controllers.namespaces`). Every namespace has the ConfigMap ``kube-root-ca.crt`` with the member's CA, kept as kube's root CA
publisher keeps it (:mod:`controlplane.controllers.rootcapublisher`), for the pods whose projected
volumes name it.

``POST /debug/gpufed/reclaim`` reclaims spot nodes as a cloud does, and the fleet file's
``reclaim`` does it periodically (:mod:`simulator.reclaiming`).

``/livez``, ``/readyz`` and ``/healthz`` answer in kube-apiserver's format
(:mod:`controlplane.apiserver.health`); stopping the process takes the member's API down, and starting it
again on the same ``--listen`` address and state dir brings the same cluster back.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import signal
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from controlplane.apiserver.app import create_app
from controlplane.apiserver.auth.static import StaticTokenAuthenticator, load_or_create_token
from controlplane.apiserver.health import HealthEndpoints
from controlplane.apiserver.kubeconfig import write_kubeconfig
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.quotaadmission import QuotaAdmission
from controlplane.apiserver.serviceallocation import (
    DEFAULT_SERVICE_CLUSTER_IP_RANGE,
    DEFAULT_SERVICE_NODE_PORT_RANGE,
    IPRange,
    PortRange,
    ServiceAllocator,
)
from controlplane.apiserver.serving import GuardedTCPSite, ServingLimits, api_runner
from controlplane.apiserver.tls import ensure_pki
from controlplane.controllers.namespaces import NamespaceController
from controlplane.controllers.rootcapublisher import RootCAPublisher
from controlplane.lifecycle import ShutdownOnce
from controlplane.storage.interface import KeyValue
from controlplane.storage.memory import MemoryStore
from simulator.admitting import admit_pods
from simulator.cluster import SimulatedCluster
from simulator.journal import WriteJournal, replay
from simulator.memberaccess import access_middleware
from simulator.nodes import build_nodes
from simulator.podexec import PodExec
from simulator.podlogs import CallerLog, PodLogs
from simulator.podmetrics import ResourceMetrics
from simulator.portforward import PodPortForward
from simulator.profile import ClusterProfile
from simulator.reclaiming import Reclaimer
from simulator.resources import member_registry
from simulator.scheduling.model import Scoring
from simulator.statuses import StatusControllers

log = logging.getLogger(__name__)

KUBECONFIG_NAME = "kubeconfig"
DCGM_URL_NAME = "dcgm-url"
SNAPSHOT_NAME = "snapshot.json"
SNAPSHOT_FORMAT = 1
#: Added to the revision of a snapshot that was not written at a clean shutdown: clients
#: may have seen revisions past it before the crash, and must relist rather than resume.
UNCLEAN_REVISION_GAP = 1_000_000


class SnapshotError(ValueError):
    """A snapshot file that cannot be read back; the message names the file."""


def write_snapshot(path: Path, items: Iterable[KeyValue], *, revision: int, clean: bool) -> None:
    """Write every key, value and revision to ``path`` atomically (temp file, fsync, rename).

    The file holds every object of the member, Secrets included, so only its owner may
    read it (0600).
    """
    entries: list[dict[str, Any]] = []
    for kv in items:
        entry: dict[str, Any] = {"key": kv.key, "createRevision": kv.create_revision, "modRevision": kv.mod_revision}
        try:
            entry["value"] = kv.value.decode("utf-8")
        except UnicodeDecodeError:
            entry["valueBase64"] = base64.b64encode(kv.value).decode("ascii")
        entries.append(entry)
    body = {"format": SNAPSHOT_FORMAT, "revision": revision, "clean": clean, "items": entries}
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a temp file left from before may have been created looser
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(body, handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def load_snapshot(path: Path) -> tuple[list[KeyValue], int, bool] | None:
    """The items of a snapshot, its revision and whether it was written at a clean shutdown;
    None when there is none."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"cannot read member snapshot {path}: {exc}") from exc
    try:
        if body["format"] != SNAPSHOT_FORMAT:
            raise SnapshotError(f"{path}: snapshot format {body['format']!r}, this version reads {SNAPSHOT_FORMAT}")
        items = [
            KeyValue(
                key=str(entry["key"]),
                value=(
                    entry["value"].encode("utf-8") if "value" in entry else base64.b64decode(entry["valueBase64"])
                ),
                create_revision=int(entry["createRevision"]),
                mod_revision=int(entry["modRevision"]),
            )
            for entry in body["items"]
        ]
        revision = int(body["revision"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"{path}: malformed snapshot: {exc!r}") from exc
    return items, revision, bool(body.get("clean"))


def read_snapshot(path: Path) -> tuple[list[KeyValue], int] | None:
    """The items of a snapshot and the revision to restore them at; None when there is none."""
    loaded = load_snapshot(path)
    if loaded is None:
        return None
    items, revision, clean = loaded
    return items, revision if clean else revision + UNCLEAN_REVISION_GAP


def read_state(state_dir: Path) -> tuple[list[KeyValue], int] | None:
    """The member's store as it was last: the snapshot with the write journal replayed over it
    (:mod:`simulator.journal`), and the revision to restore it at; None for a new member.

    After an unclean stop the revision moves :data:`UNCLEAN_REVISION_GAP` past the last
    journalled write (which the page cache keeps through a killed process, not through a lost
    machine), so resourceVersions only ever go up."""
    loaded = load_snapshot(state_dir / SNAPSHOT_NAME)
    items, revision, clean = loaded if loaded is not None else ([], 1, True)
    items, last = replay(state_dir, items, revision)
    if loaded is None and last == revision:
        return None
    return items, last if clean and last == revision else last + UNCLEAN_REVISION_GAP


@dataclass(frozen=True)
class SimServerConfig:
    profile: ClusterProfile
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    dcgm_host: str = "127.0.0.1"
    dcgm_port: int = 0
    time_scale: float = 1.0
    scoring: Scoring | None = None
    seed: int | None = None
    #: Seconds between snapshots of the store to ``<state-dir>/snapshot.json`` (None: only on shutdown).
    snapshot_interval: float | None = 10.0


class SimServer(ShutdownOnce):
    """``async with SimServer(config) as sim: await sim.wait_stopped()``."""

    def __init__(self, config: SimServerConfig) -> None:
        self.config = config
        self.store = MemoryStore()
        self.objects = ObjectStore(self.store, member_registry(without=frozenset(config.profile.unservedResources)))
        # A Service's cluster IP and node ports, from kubeadm's default ranges, as a member's API allocates them.
        self.objects.allocate_with(ServiceAllocator(
            self.store,
            cluster_ips=IPRange.parse(DEFAULT_SERVICE_CLUSTER_IP_RANGE),
            node_ports=PortRange.parse(DEFAULT_SERVICE_NODE_PORT_RANGE),
        ))
        admit_pods(self.objects, self.objects.check_creates)
        # kube-apiserver's ResourceQuota admission: a pod past a quota in its namespace is refused.
        self.objects.admit_writes(QuotaAdmission(self.objects))
        self.cluster = SimulatedCluster(
            config.profile, self.objects, time_scale=config.time_scale, seed=config.seed, scoring=config.scoring
        )
        self.reclaimer = Reclaimer(
            config.profile, self.objects, {n["metadata"]["name"]: n for n in build_nodes(config.profile)}
        )
        self._reclaims: asyncio.Task[None] | None = None
        self._root_ca: asyncio.Task[None] | None = None
        self._namespaces: asyncio.Task[None] | None = None
        self.statuses = StatusControllers(self.objects, clock=self.cluster.clock, salt=config.profile.name)
        #: Who called the API (peer, impersonated user): served at /debug/gpufed/callers.
        self.callers = CallerLog()
        self.url = ""
        self.dcgm_url = ""
        self._runners: list[web.AppRunner] = []
        self._stopped = asyncio.Event()
        self._snapshotter: asyncio.Task[None] | None = None
        self._snapshot_revision = 0
        self._journal: WriteJournal | None = None

    @property
    def snapshot_path(self) -> Path:
        return self.config.state_dir / SNAPSHOT_NAME

    @property
    def kubeconfig_path(self) -> Path:
        return self.config.state_dir / KUBECONFIG_NAME

    async def start(self) -> None:
        state = self.config.state_dir
        # The snapshot, the admin token and the CA key live here: the owner's alone.
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(PermissionError):  # a mounted volume's root may not be ours to change
            state.chmod(0o700)
        snapshot = read_state(state)
        if snapshot is not None:
            items, revision = snapshot
            self.store.restore(items, revision=revision)
            self._snapshot_revision = await self.store.current_revision()
            log.info("restored %d objects of %s from %s", len(items), self.config.profile.name, state)
        self._journal = WriteJournal(state)
        self.store.on_commit = self._journal.record
        pki = ensure_pki(state, hosts=[self.config.host, socket.gethostname()])
        token = load_or_create_token(state / "admin.token")
        logs = PodLogs(self.objects, self.cluster.clock, self._stopped)
        usage = ResourceMetrics(self.objects, self.cluster.clock, lambda key: self.cluster.utilization.get(key, 0.0))
        execs = PodExec(self.objects, self.cluster.inventory, self.cluster.clock, self._stopped)
        forwards = PodPortForward(self.objects, self._stopped)
        app = create_app(
            self.objects,
            self.objects.registry,
            authenticator=StaticTokenAuthenticator(token),
            extra_routes=[*logs.routes(), *execs.routes(), *forwards.routes(), *usage.routes(), *self.callers.routes(),
                          *self.reclaimer.routes()],
            outer_middlewares=[
                HealthEndpoints(
                    {"ping": _passes, "log": _passes, "etcd": self._store_answers, "shutdown": self._not_stopping}
                ).middleware(),
                self.callers.middleware(),
                *self._access_middlewares(),
            ],
        )
        port = await self._serve(
            app, self.config.host, self.config.port, ssl_context=pki.server_ssl_context(), kube_api=True
        )
        host = self.config.host if ":" not in self.config.host else f"[{self.config.host}]"
        self.url = f"https://{host}:{port}"

        await self.cluster.start()
        await self.statuses.start()
        self._root_ca = asyncio.create_task(
            RootCAPublisher(self.objects, ca_pem=pki.ca_pem).run(), name="root-ca-cert-publisher"
        )
        # kube-controller-manager's namespace controller: a deleted namespace's content, then it.
        self._namespaces = asyncio.create_task(NamespaceController(self.objects).run(), name="namespace")
        if self.config.profile.reclaim is not None:
            self._reclaims = asyncio.create_task(self.reclaimer.run_schedule(), name="spot-reclaims")

        dcgm = web.Application()
        dcgm.router.add_get("/metrics", self._metrics)
        dcgm_port = await self._serve(dcgm, self.config.dcgm_host, self.config.dcgm_port)
        self.dcgm_url = f"http://{self.config.dcgm_host}:{dcgm_port}/metrics"
        (state / DCGM_URL_NAME).write_text(self.dcgm_url + "\n", encoding="utf-8")
        write_kubeconfig(
            self.kubeconfig_path, server=self.url, ca_pem=pki.ca_pem, token=token, user="cluster-admin",
            cluster_name=self.config.profile.name, context=self.config.profile.name,
        )
        if self.config.snapshot_interval:
            self._snapshotter = asyncio.create_task(
                self._snapshot_periodically(self.config.snapshot_interval), name="snapshot"
            )
        log.info("simulated cluster %s serving at %s (DCGM at %s)", self.config.profile.name, self.url, self.dcgm_url)

    def _access_middlewares(self) -> list[Middleware]:
        rules = self.config.profile.impersonatedAccess
        return [] if rules is None else [access_middleware(rules, self.config.profile.name)]

    async def _store_answers(self) -> None:
        await self.store.current_revision()

    async def _not_stopping(self) -> None:
        if self._stopped.is_set():
            raise RuntimeError("the API server is shutting down")

    async def snapshot(self, *, clean: bool = False) -> None:
        """Write the store to ``snapshot.json`` if it changed since the last snapshot."""
        listed = await self.store.list("")  # one step: a consistent view
        if listed.revision == self._snapshot_revision:
            return
        if self._journal is not None:
            self._journal.set_aside()  # no await since the list: the writes after it go to a fresh journal
        await asyncio.to_thread(
            write_snapshot, self.snapshot_path, listed.items, revision=listed.revision, clean=clean
        )
        self._snapshot_revision = listed.revision
        if self._journal is not None:
            self._journal.snapshot_written()

    async def _snapshot_periodically(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.snapshot()
            except OSError:
                log.exception("cannot write the snapshot %s", self.snapshot_path)

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=self.cluster.metrics_text(), content_type="text/plain", charset="utf-8")

    async def _serve(
        self, app: web.Application, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None,
        kube_api: bool = False,
    ) -> int:
        """Serve ``app``; the kube API (``kube_api``) as the hub serves its own, with kube-apiserver's
        bounds on a request's head (:mod:`controlplane.apiserver.serving`)."""
        runner = api_runner(app) if kube_api else web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runners.append(runner)
        site: web.TCPSite = (
            GuardedTCPSite(runner, host, port, ssl_context=ssl_context, limits=ServingLimits()) if kube_api
            else web.TCPSite(runner, host, port, ssl_context=ssl_context)
        )
        await site.start()
        for sock in getattr(site._server, "sockets", None) or []:
            return int(sock.getsockname()[1])
        return port

    def request_stop(self) -> None:
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def _release(self) -> None:
        self._stopped.set()
        for task in (self._snapshotter, self._reclaims, self._root_ca, self._namespaces):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.reclaimer.close()
        for runner in reversed(self._runners):
            await runner.cleanup()
        await self.statuses.shutdown()
        await self.cluster.shutdown()
        if self.url:  # started: the store holds this cluster's state
            try:
                self._snapshot_revision = 0  # always mark the final snapshot clean
                await self.snapshot(clean=True)
            except OSError:
                log.exception("cannot write the snapshot %s", self.snapshot_path)
        if self._journal is not None:
            self.store.on_commit = None
            self._journal.close()
        await self.store.close()


async def _passes() -> None:
    """A health check that passes while the server answers at all (kube's ``ping`` and ``log``)."""


async def run_until_signalled(server: SimServer) -> None:
    loop = asyncio.get_running_loop()
    async with server:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.request_stop)
        await server.wait_stopped()
