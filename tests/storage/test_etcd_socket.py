"""The embedded etcd's default client transport: a Unix socket without TLS, kept from other
local users by the modes of its directory (0700) and of the socket itself (0600).

What would break unseen: a directory or socket others can enter or write (then any local
process reads and rewrites every object and token), a path longer than a socket path may be,
a socket left by a killed etcd that blocks the next start, or secrets in the launcher's logs.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from controlplane.storage import EmbeddedEtcd, EtcdClientTransport, EtcdStartError, EtcdStore
from controlplane.storage.embedded import (
    MAX_SOCKET_PATH_BYTES,
    SOCKET_NAME,
    ensure_private_directory,
    socket_path_fits,
)

pytestmark = pytest.mark.waiting

#: A user the test can become to play "another local user" (needs root to switch to it).
NOBODY = 65534
#: The system interpreter: the project's may live under a directory only root can enter.
SYSTEM_PYTHON = Path("/usr/bin/python3")

CONNECT = textwrap.dedent(
    """
    import socket, sys
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(sys.argv[1])
        except PermissionError:
            print("refused")
        else:
            print("connected")
    """
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


async def test_etcd_listens_on_a_private_socket_without_tls(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="controlplane.storage.embedded")
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    # A directory left open by someone else is closed again before etcd binds in it.
    etcd.socket_dir.mkdir(parents=True)
    etcd.socket_dir.chmod(0o755)
    url = await etcd.start()
    try:
        assert url == f"unix://{tmp_path / 'etcd' / 'socket' / SOCKET_NAME}"
        assert etcd.client_tls is None and not etcd.pki_dir.exists()
        assert stat.S_ISSOCK(etcd.socket_path.lstat().st_mode)
        assert mode(etcd.socket_dir) == 0o700 and mode(etcd.socket_path) == 0o600
        assert etcd.socket_dir.stat().st_uid == etcd.socket_path.stat().st_uid == os.geteuid()
        assert etcd.pid is not None
        argv = cmdline(etcd.pid)
        assert f"--listen-client-urls=unix://{SOCKET_NAME}" in argv
        assert not [arg for arg in argv if arg.startswith(("--cert-file", "--key-file", "--client-cert-auth"))]
        async with EtcdStore([url], prefix="/socket-test") as store:
            created = await store.create("/a", b"1")
            assert await store.get("/a") == created
    finally:
        await etcd.stop()
    # Nothing secret in what the launcher logs, its command line included (DEBUG).
    assert "etcd is up" in caplog.text and "PRIVATE KEY" not in caplog.text


@pytest.mark.skipif(os.geteuid() != 0 or not SYSTEM_PYTHON.exists(), reason="becoming another user needs root")
async def test_another_local_user_cannot_connect_to_the_socket() -> None:
    """Each of the two modes keeps another user out on its own; with both opened up, that user
    gets in (so a refusal is the modes' doing, not the test's)."""
    # Not under pytest's base directory (nor TMPDIR, which points into it): only its owner may enter it.
    with tempfile.TemporaryDirectory(prefix="gpufed-socket-", dir="/tmp") as tmp:
        os.chmod(tmp, 0o755)
        etcd = EmbeddedEtcd(Path(tmp) / "etcd", unsafe_no_fsync=True)
        await etcd.start()
        try:
            await refuse_others(etcd)
        finally:
            await etcd.stop()


def connect_as_nobody(path: Path) -> str:
    """``connected`` or ``refused``: what another local user gets connecting to ``path``."""
    done = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", CONNECT, str(path)], user=NOBODY, group=NOBODY,
        capture_output=True, text=True, timeout=30, check=True, cwd="/",
    )
    return done.stdout.strip()


async def refuse_others(etcd: EmbeddedEtcd) -> None:
    etcd.data_dir.chmod(0o755)
    assert connect_as_nobody(etcd.socket_path) == "refused"  # as started: directory 0700, socket 0600
    etcd.socket_path.chmod(0o666)
    assert connect_as_nobody(etcd.socket_path) == "refused"  # the directory alone
    etcd.socket_dir.chmod(0o711)
    etcd.socket_path.chmod(0o600)
    assert connect_as_nobody(etcd.socket_path) == "refused"  # the socket alone
    etcd.socket_path.chmod(0o666)
    assert connect_as_nobody(etcd.socket_path) == "connected"  # neither


async def test_a_socket_left_by_a_killed_etcd_does_not_block_the_next_start(tmp_path: Path) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    url = await etcd.start()
    try:
        async with EtcdStore([url], prefix="/killed") as store:
            await store.create("/a", b"1")
        assert etcd.pid is not None
        os.kill(etcd.pid, signal.SIGKILL)
        await etcd.stop()
        assert etcd.socket_path.exists()  # nobody cleaned up
        assert await etcd.start() == url
        assert mode(etcd.socket_path) == 0o600
        # The restarted etcd serves on the same socket. (Whether "/a" survived the SIGKILL is not
        # this test's claim: the packaged etcd 3.5.1 can lose a committed write when killed,
        # etcd-io/etcd#13766, and this etcd runs without fsync.)
        async with EtcdStore([url], prefix="/killed") as store:
            created = await store.create("/b", b"2")
            assert await store.get("/b") == created
    finally:
        await etcd.stop()


@pytest.mark.parametrize(("length", "fits"), [(MAX_SOCKET_PATH_BYTES, True), (MAX_SOCKET_PATH_BYTES + 1, False)])
def test_a_socket_path_fits_up_to_the_kernels_limit(length: int, fits: bool) -> None:
    assert socket_path_fits(Path("/" + "s" * (length - 1))) is fits


async def test_a_data_dir_too_deep_for_a_socket_falls_back_to_tcp_with_tls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    deep = tmp_path / ("d" * MAX_SOCKET_PATH_BYTES)
    etcd = EmbeddedEtcd(deep, unsafe_no_fsync=True)
    assert etcd.transport is EtcdClientTransport.TLS
    assert "longer than 107 bytes" in caplog.text and "TCP with TLS instead" in caplog.text
    url = await etcd.start()
    try:
        assert url.startswith("https://127.0.0.1:") and etcd.client_tls is not None
        assert not etcd.socket_dir.exists()
        async with EtcdStore([url], prefix="/deep", tls=etcd.client_tls) as store:
            assert (await store.create("/a", b"1")).value == b"1"
    finally:
        await etcd.stop()


async def test_a_relative_data_dir_means_the_same_place_for_etcd_running_in_its_socket_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpufed controlplane`` defaults to ``--state-dir .gpufed``: relative to where the hub runs."""
    monkeypatch.chdir(tmp_path)
    etcd = EmbeddedEtcd(Path("state") / "etcd", unsafe_no_fsync=True)
    url = await etcd.start()
    try:
        assert url == f"unix://{tmp_path / 'state' / 'etcd' / 'socket' / SOCKET_NAME}"
        assert (tmp_path / "state" / "etcd" / "etcd" / "member").is_dir()
        assert not (etcd.socket_dir / "state").exists()
    finally:
        await etcd.stop()


def test_the_socket_directory_is_made_private_and_never_followed_elsewhere(tmp_path: Path) -> None:
    opened = tmp_path / "opened"
    opened.mkdir(mode=0o755)
    opened.chmod(0o755)
    assert ensure_private_directory(opened) == opened and mode(opened) == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(EtcdStartError, match="must be a directory owned by this user"):
        ensure_private_directory(tmp_path / "link")


async def test_a_data_dir_served_over_tls_keeps_its_data_over_the_socket(tmp_path: Path) -> None:
    """A hub upgraded from the TCP and TLS default (or switched either way) finds its objects."""
    over_tls = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True, transport=EtcdClientTransport.TLS)
    url = await over_tls.start()
    try:
        async with EtcdStore([url], prefix="/upgrade", tls=over_tls.client_tls) as store:
            created = await store.create("/a", b"1")
    finally:
        await over_tls.stop()
    over_socket = EmbeddedEtcd(tmp_path / "etcd", unsafe_no_fsync=True)
    url = await over_socket.start()
    try:
        assert url.startswith("unix://")
        async with EtcdStore([url], prefix="/upgrade") as store:
            assert await store.get("/a") == created
    finally:
        await over_socket.stop()
