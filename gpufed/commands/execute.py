"""`gpufed exec [--cluster C] [-n NS] POD|KIND/NAME [-c CONTAINER] [-i] [-t] -- COMMAND...`.

Runs a command in a member's pod through the hub's cluster proxy with the caller's hub
credential: a WebSocket to the member's ``pods/<name>/exec`` (kube's ``v5.channel.k8s.io``,
else ``v4``), relayed by the cluster's agent. ``POD`` is looked for on every cluster (or the
one ``--cluster`` names); for ``KIND/NAME`` the first pod of the hub workload, on a cluster its
Works carry it to, as ``kubectl exec deploy/x`` picks one. ``-i`` sends stdin (closing it at
its end), ``-t`` asks for a terminal (stderr joins stdout; a local terminal is put in raw mode,
and its size is sent, again whenever it is resized).
The exit code is the remote command's; 1 when it could not run, with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp

from controlplane.apiserver.tls import client_ssl_context
from controlplane.wsdial import HandshakeRefused, dial
from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError, add_kubeconfig_argument, add_namespace_argument, unreachable
from gpufed.memberproxy import no_pods, print_unreached, proxy_path, target_pods

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE_STREAM = 255
STDIN_CHUNK = 32 * 1024
MAX_MESSAGE_BYTES = 64 * 1024 + 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="POD|KIND/NAME", help="e.g. train-0, deployment/llm-serving")
    parser.add_argument("command", nargs="+", metavar="-- COMMAND", help="the command and its arguments, after --")
    add_namespace_argument(parser)
    parser.add_argument("-c", "--container", help="the container (required when a pod has several)")
    parser.add_argument("--cluster", help="the member cluster (default: wherever the pod is)")
    parser.add_argument("-i", "--stdin", action="store_true", help="pass stdin to the command")
    parser.add_argument("-t", "--tty", action="store_true", help="stdin is a terminal (stderr joins stdout)")
    add_kubeconfig_argument(parser)


def exit_code(status: Mapping[str, Any] | None, cluster: str, close: str) -> int:
    """The remote command's exit code from the Status on the error channel."""
    if status is None:
        raise HubError(f"cluster {cluster}: the connection closed before the command's exit status arrived ({close})")
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                with contextlib.suppress(ValueError):
                    return int(cause.get("message", ""))
    raise HubError(f"cluster {cluster}: {status.get('message') or 'the command failed'}")


async def _locate(hub: HubClient, args: argparse.Namespace) -> tuple[str, str]:
    kind_word, _, name = args.target.rpartition("/")
    kind_word = kind_word.lower()
    pairs, failed = await target_pods(hub, args.namespace, args.cluster or "all", kind_word, name)
    print_unreached(failed)
    if not pairs:
        raise no_pods(args.target, args.namespace)
    where = sorted({cluster for cluster, _ in pairs})
    if kind_word in ("", "pod", "pods", "po") and len(where) > 1:
        raise HubError(f"pod {name} exists on clusters {', '.join(where)}: choose one with --cluster")
    return pairs[0]


def _stdin_reader(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
    """Read stdin in a daemon thread (a blocked read must not keep the command alive)."""
    while True:
        try:
            data = os.read(sys.stdin.fileno(), STDIN_CHUNK)
        except OSError:
            data = b""
        loop.call_soon_threadsafe(queue.put_nowait, data)
        if not data:
            return


async def _feed_stdin(ws: aiohttp.ClientWebSocketResponse) -> None:
    queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=0)
    threading.Thread(target=_stdin_reader, args=(asyncio.get_running_loop(), queue), daemon=True).start()
    while data := await queue.get():
        await ws.send_bytes(bytes([STDIN]) + data)
    if ws.protocol == "v5.channel.k8s.io":
        await ws.send_bytes(bytes([CLOSE_STREAM, STDIN]))


def resize_message(columns: int, rows: int) -> bytes:
    """A terminal size on the resize channel, as kubectl sends it."""
    return bytes([RESIZE]) + json.dumps({"Width": columns, "Height": rows}).encode()


async def _send_sizes(ws: aiohttp.ClientWebSocketResponse, fd: int) -> None:
    """The terminal's size now and after every SIGWINCH (the terminal was resized)."""
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    loop.add_signal_handler(signal.SIGWINCH, changed.set)
    try:
        while True:
            size = os.get_terminal_size(fd)
            await ws.send_bytes(resize_message(size.columns, size.lines))
            await changed.wait()
            changed.clear()
    finally:
        loop.remove_signal_handler(signal.SIGWINCH)


@contextlib.contextmanager
def _raw_terminal(enabled: bool) -> Iterator[None]:
    if not enabled or not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    saved = termios.tcgetattr(sys.stdin.fileno())
    tty.setraw(sys.stdin.fileno())
    try:
        yield
    finally:
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


async def _converse(ws: aiohttp.ClientWebSocketResponse, *, stdin: bool, tty: bool) -> dict[str, Any] | None:
    """Print the command's output; the Status from the error channel. With a tty whose output
    is a terminal, its size goes along (channel 4) and follows its resizes."""
    feeder = asyncio.create_task(_feed_stdin(ws)) if stdin else None
    sizes = asyncio.create_task(_send_sizes(ws, sys.stdout.fileno())) if tty and sys.stdout.isatty() else None
    status: dict[str, Any] | None = None
    try:
        async for message in ws:
            if message.type is not aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], bytes(message.data[1:])
            if channel in (STDOUT, STDERR):
                out = sys.stdout if channel == STDOUT else sys.stderr
                out.buffer.write(data)
                out.flush()
            elif channel == ERROR:
                with contextlib.suppress(ValueError):
                    status = json.loads(data)
    finally:
        for task in (feeder, sizes):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                    await task
    return status


async def execute(args: argparse.Namespace) -> int:
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    cluster, pod = await _locate(hub, args)
    params = [("command", word) for word in args.command] + [("stdout", "true")]
    params += [("tty", "true")] if args.tty else [("stderr", "true")]
    if args.stdin:
        params.append(("stdin", "true"))
    if args.container:
        params.append(("container", args.container))
    url = hub.server + proxy_path(cluster, f"/api/v1/namespaces/{args.namespace}/pods/{pod}/exec")
    headers = {"Authorization": f"Bearer {hub.credentials.token}"}
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(hub.credentials.ca_pem))
    try:
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            dial(session, url, params=params, headers=headers, protocols=PROTOCOLS,
                 max_msg_size=MAX_MESSAGE_BYTES) as ws,
        ):
            with _raw_terminal(args.tty and args.stdin):
                status = await _converse(ws, stdin=args.stdin, tty=args.tty)
            close = f"close code {ws.close_code}"
    except HandshakeRefused as refused:
        raise HubError(f"cluster {cluster}: {refused.message}", status=refused.status) from refused
    except aiohttp.ClientConnectorError as exc:
        raise unreachable(hub.server, exc, kubeconfig=hub.kubeconfig) from exc
    except aiohttp.ClientError as exc:
        raise HubError(f"cluster {cluster}: the exec connection failed: {exc}") from exc
    return exit_code(status, cluster, close)


def run(args: argparse.Namespace) -> int:
    return run_reporting(execute(args), (HubError, ValueError))
