"""`gpufed backup save|restore`: back up the hub's etcd to a snapshot file, and restore it.

``save`` takes a consistent snapshot of a running hub's etcd: the embedded one of ``--state-dir``
(through its socket or its TLS client certificate, as the hub connects), or the etcd of
``--etcd-endpoints`` with the same ``--etcd-*file`` flags as ``gpufed controlplane``. ``restore``
replaces the embedded etcd's data of a stopped hub (controlplane.storage.restoring). Progress
goes to stderr; the snapshot's summary to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpufed.argtypes import whole_number
from gpufed.commands.controlplane import etcd_client_tls, etcd_endpoints
from gpufed.commands.running import run_reporting

if TYPE_CHECKING:
    from controlplane.storage.etcd import EtcdStore

#: Progress lines for a snapshot at most this often (in bytes written).
_PROGRESS_STEP = 16 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="backup_command", metavar="ACTION")
    sub.required = True
    save = sub.add_parser("save", help="save a snapshot of a running hub's etcd to FILE (mode 0600)")
    save.add_argument("file", type=Path, metavar="FILE")
    save.add_argument("--force", action="store_true", help="replace FILE if it exists")
    _state_dir(save)
    save.add_argument("--etcd-endpoints", default="", metavar="URLS",
                      help="the hub's external etcd, as given to `gpufed controlplane` (default: the embedded "
                           "etcd of --state-dir)")
    save.add_argument("--etcd-cafile", type=Path, metavar="FILE", help="as `gpufed controlplane --etcd-cafile`")
    save.add_argument("--etcd-certfile", type=Path, metavar="FILE", help="as `gpufed controlplane --etcd-certfile`")
    save.add_argument("--etcd-keyfile", type=Path, metavar="FILE", help="as `gpufed controlplane --etcd-keyfile`")
    restore = sub.add_parser("restore", help="replace the embedded etcd's data of a stopped hub by a snapshot")
    restore.add_argument("file", type=Path, metavar="FILE")
    _state_dir(restore)
    restore.add_argument("--bump-revision", type=whole_number(), default=None, metavar="N",
                         help="start the restored etcd N revisions past the snapshot's, as etcdutl's flag "
                              "(default: past the highest revision the replaced data reached)")


def _state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", type=Path, default=Path(".gpufed"),
                        help="the hub's state dir, as given to `gpufed controlplane` (default .gpufed)")


def run(args: argparse.Namespace) -> int:
    from controlplane.storage.connecting import EtcdConfigError
    from controlplane.storage.interface import StorageError
    from controlplane.storage.snapshots import BackupError

    expected = (BackupError, EtcdConfigError, StorageError)
    if args.backup_command == "save":
        return run_reporting(_save(args), expected)
    if not args.file.is_file():
        print(f"error: {args.file}: no such snapshot file", file=sys.stderr)
        return 1
    return run_reporting(_restore(args), expected)


def _embedded_store(state_dir: Path) -> EtcdStore:
    """A store on the embedded etcd of a running hub, reached as the hub reaches it."""
    from controlplane.storage.connecting import EtcdClientTls
    from controlplane.storage.datalock import DataDirBusy, DataLock
    from controlplane.storage.embedded import PKI_SUBDIR, PORTS_FILE, SOCKET_NAME, SOCKET_SUBDIR
    from controlplane.storage.etcd import EtcdStore
    from controlplane.storage.snapshots import BackupError

    etcd_dir = (state_dir / "etcd").absolute()
    if not (etcd_dir / "etcd").is_dir():
        raise BackupError(f"{state_dir} holds no embedded etcd data: is it the hub's --state-dir?")
    try:
        DataLock.take(etcd_dir, role="gpufed backup save").release()
    except DataDirBusy:
        pass  # the hub runs: what a backup needs
    else:
        raise BackupError(
            f"the hub of {state_dir} is not running: start it (gpufed controlplane --state-dir {state_dir}); "
            "a backup is taken from a running hub's etcd"
        )
    socket = etcd_dir / SOCKET_SUBDIR / SOCKET_NAME
    if socket.exists():
        return EtcdStore([f"unix://{socket}"])
    pki = etcd_dir / PKI_SUBDIR
    try:
        port = int(json.loads((etcd_dir / PORTS_FILE).read_text())["client_port"])
    except (OSError, ValueError, KeyError, TypeError):
        raise BackupError(f"cannot tell how to reach the etcd of {state_dir}: {etcd_dir / PORTS_FILE} is unreadable") from None
    tls = EtcdClientTls(ca_file=pki / "ca.crt", cert_file=pki / "client.crt", key_file=pki / "client.key")
    return EtcdStore([f"https://127.0.0.1:{port}"], tls=tls)


def _external_store(args: argparse.Namespace) -> EtcdStore:
    from controlplane.storage.etcd import EtcdStore

    return EtcdStore(list(etcd_endpoints(args)), tls=etcd_client_tls(args), retry_budget=5.0)


async def _save(args: argparse.Namespace) -> int:
    from controlplane.storage.snapshots import BackupError, save_snapshot

    if etcd_endpoints(args):
        store = _external_store(args)
    elif args.etcd_cafile or args.etcd_certfile or args.etcd_keyfile:
        raise BackupError("--etcd-cafile/--etcd-certfile/--etcd-keyfile need --etcd-endpoints")
    else:
        store = _embedded_store(args.state_dir)
    reported = [0]

    def progress(written: int, total: int) -> None:
        if written - reported[0] >= _PROGRESS_STEP or (written == total and reported[0]):
            reported[0] = written
            print(f"saving: {written / 2**20:.0f} of {total / 2**20:.0f} MiB", file=sys.stderr, flush=True)

    async with store:
        summary = await save_snapshot(store.maintenance, args.file.absolute(), force=args.force, progress=progress)
    print(f"saved {args.file}", file=sys.stderr)
    print(summary.table())
    return 0


async def _restore(args: argparse.Namespace) -> int:
    from controlplane.storage.restoring import restore_snapshot

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    outcome = await restore_snapshot(
        args.file.absolute(), (args.state_dir / "etcd").absolute(), bump_revision=args.bump_revision, say=say
    )
    if outcome.previous is not None:
        say(f"the replaced data is kept in {outcome.previous} (remove it once the restored hub is verified)")
    say(f"restored: start the hub (gpufed controlplane --state-dir {args.state_dir}); it starts at revision "
        f"{outcome.revision}, and clients holding an older resourceVersion relist")
    print(outcome.snapshot.table())
    return 0
