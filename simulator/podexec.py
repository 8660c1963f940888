"""``exec`` and ``attach`` of a simulated pod (``/api/v1/namespaces/<ns>/pods/<name>/exec``,
``.../attach``) over WebSockets.

Kube's channel protocol, ``v5.channel.k8s.io`` or ``v4.channel.k8s.io`` (the first the client
offers): every binary message starts with its channel — 0 stdin, 1 stdout, 2 stderr, 3 error,
4 resize — and v5 clients close their stdin with the message ``255 0``. The query follows
kube's ``PodExecOptions``: ``command`` (repeated), ``container``, ``stdin``, ``stdout``,
``stderr``, ``tty`` (stderr then goes to stdout, lines end ``\\r\\n``). The command runs in
:mod:`simulator.commands`; its exit status arrives on channel 3 as kubelet sends it
(``Success``, or ``Failure`` with reason ``NonZeroExitCode`` and an ``ExitCode`` cause), then
the server closes the connection. ``cat`` with ``stdin=true`` copies stdin back as it arrives.
With ``tty=true``, ``stty size`` first waits (at most :data:`TERMINAL_WAIT_SECONDS`) for the
client's terminal size, the JSON ``{"Width": W, "Height": H}`` kubectl sends on channel 4 as
soon as it connects, and prints it (``0 0`` when none came).
``attach`` streams the container's output from now on (its generated log lines, as
:mod:`simulator.podlogs` writes them) until the client leaves or the pod is deleted.
Errors before the upgrade are kube's Status: 404 unknown pod, 400 bad container, missing
command, a container not running, or a request that is not a WebSocket upgrade (SPDY is not
served).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import WSMsgType, web

from controlplane.objectclient import ObjectClient, errors
from simulator import commands
from simulator.clock import Clock, parse_rfc3339
from simulator.cluster import ANNOTATION_DEVICES
from simulator.commands import Container, GpuView
from simulator.devices import NodeInventory
from simulator.podlogs import LINE_INTERVAL, container_of, line_range, log_line

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
#: The most stdin one ``cat`` copies (a bound on a misbehaving client).
MAX_STDIN_BYTES = 1024 * 1024
#: How long ``stty size`` waits for the client's first terminal size.
TERMINAL_WAIT_SECONDS = 5.0
_TRUE = ("1", "true", "True")


def exit_status(code: int, argv: list[str]) -> dict[str, Any]:
    """The Status kubelet sends on the error channel when a command ends."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {}, "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command {argv}, exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def gpu_views(pod: Mapping[str, Any], inventory: NodeInventory | None) -> tuple[GpuView, ...]:
    """The GPUs (and MIG instances) a pod's devices are, in the order the device plugin gave them."""
    if inventory is None:
        return ()
    ids = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_DEVICES) or ""
    by_uuid = {gpu.uuid: gpu for gpu in inventory.gpus}
    migs = {mig.uuid: mig for mig in inventory.mig_instances}
    views: dict[str, GpuView] = {}
    for device in filter(None, ids.split(",")):
        uuid = device.split("::", 1)[0]
        mig = migs.get(uuid)
        gpu = inventory.gpus[mig.gpu_index] if mig is not None else by_uuid.get(uuid)
        if gpu is None:
            continue
        view = views.get(gpu.uuid, GpuView(model=gpu.model_name, uuid=gpu.uuid))
        if mig is not None:
            view = GpuView(view.model, view.uuid, (*view.mig, (mig.profile, mig.uuid)))
        views[gpu.uuid] = view
    return tuple(views.values())


class PodExec:
    """``exec`` and ``attach`` of simulated pods."""

    def __init__(
        self, objects: ObjectClient, inventory: Mapping[str, NodeInventory], clock: Clock, stop: asyncio.Event
    ) -> None:
        self.objects = objects
        self.inventory = inventory
        self.clock = clock
        self.stop = stop
        self._pods = objects.registry.require("v1", "Pod")

    def routes(self) -> list[web.RouteDef]:
        return [
            web.route("*", "/api/v1/namespaces/{namespace}/pods/{name}/exec", self.exec),
            web.route("*", "/api/v1/namespaces/{namespace}/pods/{name}/attach", self.attach),
        ]

    async def _pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.objects.get(self._pods, namespace=namespace, name=name)
        except errors.NotFound:
            return None

    async def _upgrade(self, request: web.Request) -> tuple[dict[str, Any], str, web.WebSocketResponse, str]:
        """The running pod, its container and the accepted WebSocket (and its subprotocol); or
        kube's Status before the upgrade."""
        name = request.match_info["name"]
        pod = await self._pod(request.match_info["namespace"], name)
        if pod is None:
            raise errors.NotFound(f'pods "{name}" not found', target=errors.Target(name=name, kind="pods"))
        container = container_of(pod, request.query.get("container"))
        if request.path.endswith("/exec") and not request.query.getall("command", []):
            raise errors.BadRequest("you must specify at least 1 command")
        if not (pod.get("status") or {}).get("startTime"):
            raise errors.BadRequest(f"container {container} is not valid for pod {name}: it is not running")
        ws = web.WebSocketResponse(protocols=PROTOCOLS)
        ready = ws.can_prepare(request)
        if not ready.ok or ready.protocol is None:
            raise errors.BadRequest(
                "exec and attach need a WebSocket upgrade offering v5.channel.k8s.io or v4.channel.k8s.io "
                "(this simulated member does not serve SPDY)"
            )
        await ws.prepare(request)
        return pod, container, ws, ready.protocol

    async def exec(self, request: web.Request) -> web.StreamResponse:
        pod, container, ws, protocol = await self._upgrade(request)
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        argv = request.query.getall("command", [])
        spec = next(c for c in pod["spec"]["containers"] if c.get("name") == container)
        options = _options(request)
        terminal = await _terminal_size(ws) if options["tty"] and commands.reads_terminal(argv) else None
        view = Container(
            pod=name, namespace=namespace, container=container,
            env={str(e["name"]): str(e.get("value", "")) for e in spec.get("env") or [] if "name" in e},
            gpus=gpu_views(pod, self.inventory.get(str((pod.get("spec") or {}).get("nodeName") or ""))),
            terminal=terminal,
        )
        if options["stdin"] and commands.reads_stdin(argv):
            await _copy_stdin(ws, protocol, options)
            result = commands.Result()
        else:
            result = commands.run(argv, view)
        await _write(ws, STDOUT, result.stdout, options)
        await _write(ws, STDERR, result.stderr, options)
        await ws.send_bytes(bytes([ERROR]) + json.dumps(exit_status(result.exit_code, argv)).encode())
        await ws.close()
        return ws

    async def attach(self, request: web.Request) -> web.StreamResponse:
        """The container's output from now on (its log lines as they are written), until the
        client leaves or the pod is deleted."""
        pod, container, ws, _protocol = await self._upgrade(request)
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        options = _options(request)
        start = parse_rfc3339(pod["status"]["startTime"]) or self.clock.now()
        next_index = line_range(start, self.clock.now(), tail=None, since=None).stop
        client = asyncio.create_task(_drain(ws))
        try:
            while not client.done() and not self.stop.is_set():
                sleeper = asyncio.create_task(self.clock.sleep_until(start + next_index * LINE_INTERVAL, self.stop))
                await asyncio.wait({client, sleeper}, return_when=asyncio.FIRST_COMPLETED)
                sleeper.cancel()
                if await self._pod(namespace, name) is None:
                    break
                upto = line_range(start, self.clock.now(), tail=None, since=None).stop
                lines = [log_line(name, container, i, start + i * LINE_INTERVAL, timestamps=False)
                         for i in range(next_index, upto)]
                if lines and not client.done():
                    await _write(ws, STDOUT, "\n".join(lines) + "\n", options)
                next_index = max(next_index, upto)
            if not client.done():
                await ws.send_bytes(bytes([ERROR]) + json.dumps(exit_status(0, [])).encode())
        finally:
            client.cancel()
            await ws.close()
        return ws


def _options(request: web.Request) -> dict[str, bool]:
    return {key: request.query.get(key, "") in _TRUE for key in ("stdin", "stdout", "stderr", "tty")}


def parse_resize(data: bytes) -> tuple[int, int] | None:
    """(rows, columns) of a resize message's JSON ``{"Width": W, "Height": H}``; None if malformed."""
    try:
        size = json.loads(data)
        rows, columns = int(size["Height"]), int(size["Width"])
    except (ValueError, TypeError, KeyError):
        return None
    return (rows, columns) if 0 <= rows < 65536 and 0 <= columns < 65536 else None


async def _terminal_size(ws: web.WebSocketResponse) -> tuple[int, int]:
    """The first terminal size the client sends (channel 4), or (0, 0) if none comes in time."""
    try:
        async with asyncio.timeout(TERMINAL_WAIT_SECONDS):
            async for message in ws:
                if message.type is WSMsgType.BINARY and message.data[:1] == bytes([RESIZE]):
                    size = parse_resize(message.data[1:])
                    if size is not None:
                        return size
    except TimeoutError:
        pass
    return (0, 0)


async def _drain(ws: web.WebSocketResponse) -> None:
    """Read (and ignore) what the client sends until it closes: an attached process here reads no stdin."""
    async for _ in ws:
        pass


async def _write(ws: web.WebSocketResponse, channel: int, text: str, options: Mapping[str, bool]) -> None:
    if not text:
        return
    if options["tty"]:
        channel, text = STDOUT, text.replace("\r\n", "\n").replace("\n", "\r\n")
    if options["stdout" if channel == STDOUT else "stderr"]:
        await ws.send_bytes(bytes([channel]) + text.encode())


async def _copy_stdin(ws: web.WebSocketResponse, protocol: str, options: Mapping[str, bool]) -> None:
    """Copy stdin to stdout as it arrives (``cat``), until the client closes its stdin (v5) or
    the connection."""
    copied = 0
    async for message in ws:
        if message.type is not WSMsgType.BINARY or not message.data:
            continue
        data: bytes = message.data
        if data[0] == CLOSE and protocol.startswith("v5") and data[1:2] == bytes([STDIN]):
            break
        if data[0] != STDIN:
            continue  # resize and other channels mean nothing to cat
        copied += len(data) - 1
        if copied > MAX_STDIN_BYTES:
            await _write(ws, STDERR, f"cat: stdin longer than {MAX_STDIN_BYTES} bytes\n", options)
            break
        await _write(ws, STDOUT, data[1:].decode(errors="replace"), options)
