"""A real HTTPS admission webhook for tests: an aiohttp server with a certificate from its own
CA (the ``caBundle`` a configuration gives the hub), answering AdmissionReviews by path.

``/deny`` refuses objects labelled ``deny: "yes"`` (``no GPUs for you``, code 403, with a warning)
and admits the rest with a warning; ``/label``, ``/break``, ``/move``, ``/cap``, ``/unversion`` and ``/double`` answer with the JSON
patches of :data:`PATCHES`, ``/copy`` notes the label ``/label`` adds in an annotation; ``/slow`` answers after :data:`SLOW_SECONDS`; ``/together`` admits
only a call made while another one is in flight (else ``called alone``). Every review
received is kept, by path, for the test to read.

An EventList (the audit webhook's batch) is kept and answered ``{}``; ``/audit-refused`` answers
``400``, ``/audit-once-500`` answers its first one ``500``; with ``client_certificates``, the server
asks for a client certificate its CA signed (:func:`client_certificate` issues one). A ConversionReview (a CRD's conversion webhook) is answered by :func:`_convert`: ``/convert``
converts CronTabs between ``v1`` (``spec.cronSpec``) and ``v2`` (``spec.schedule``) and labels them
``converted-to``; ``/convert-wrong-uid``, ``/convert-renamed``, ``/convert-fail`` and ``/convert-short``
answer as a broken webhook would (another uid, a renamed object, a Failure result, too few objects).
A ResourceInterpreterContext (a Karmada interpreter webhook's call) is answered by
:func:`tests.interpreterwebhook.interpret`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import queue
import socket
import ssl
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from cryptography import x509

from controlplane import pki
from tests.interpreterwebhook import interpret

T = TypeVar("T")

SLOW_SECONDS = 3.0
#: The JSON patch each mutating path answers with.
PATCHES: dict[str, list[dict[str, Any]]] = {
    "/label": [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}],
    "/break": [{"op": "replace", "path": "/spec/replicas", "value": -1}],
    "/move": [{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}],
    "/cap": [{"op": "replace", "path": "/spec/replicas", "value": 2}],
    "/unversion": [{"op": "remove", "path": "/metadata/resourceVersion"}],
    # A hostile patch: a 1 KiB list, then thirteen copies of it into itself, each doubling it.
    "/double": [{"op": "add", "path": "/spec/padding", "value": ["y" * 1024]},
                *[{"op": "copy", "from": "/spec/padding", "path": "/spec/padding/-"}] * 13],
}


@dataclass
class WebhookServer:
    url: str  # https://127.0.0.1:<port>
    port: int
    ca_bundle: str  # base64 of the CA's PEM, as a configuration's caBundle
    received: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def client(self, path: str) -> dict[str, Any]:
        return {"url": f"{self.url}{path}", "caBundle": self.ca_bundle}


def _answer(review: dict[str, Any], **response: Any) -> web.Response:
    return web.json_response({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], **response},
    })


def _converted(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """A CronTab in ``desired``: v1's ``spec.cronSpec`` is v2's ``spec.schedule``."""
    out = json.loads(json.dumps(obj))
    spec = out.setdefault("spec", {})
    if desired.endswith("/v2") and "cronSpec" in spec:
        spec["schedule"] = spec.pop("cronSpec")
    elif desired.endswith("/v1") and "schedule" in spec:
        spec["cronSpec"] = spec.pop("schedule")
    out["apiVersion"] = desired
    labels = out["metadata"].setdefault("labels", {})
    labels["converted-to"] = desired.rpartition("/")[2]
    return out


def _convert(path: str, review: dict[str, Any]) -> dict[str, Any]:
    request = review["request"]
    converted = [_converted(obj, request["desiredAPIVersion"]) for obj in request["objects"]]
    uid = "not-the-request" if path == "/convert-wrong-uid" else request["uid"]
    result: dict[str, Any] = {"status": "Success"}
    if path == "/convert-fail":
        result = {"status": "Failure", "message": "cronSpec cannot be parsed"}
    if path == "/convert-renamed":
        for obj in converted:
            obj["metadata"]["name"] += "-renamed"
    if path == "/convert-short":
        converted = converted[1:]
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": uid, "result": result, "convertedObjects": converted}}


def _labels(review: dict[str, Any]) -> dict[str, Any]:
    obj = review["request"].get("object") or review["request"].get("oldObject") or {}
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _certificates(directory: Path, hosts: tuple[str, ...]) -> tuple[ssl.SSLContext, str]:
    """A CA and a server certificate for ``hosts`` in ``directory``: the server's TLS context and
    the CA as a caBundle."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.load_or_create_ca(directory / "ca.crt", directory / "ca.key", common_name="webhook-test-ca")
    pki.ensure_certificate(
        directory / "tls.crt", directory / "tls.key", ca_cert=ca, ca_key_path=directory / "ca.key",
        common_name="webhook", hosts=list(hosts), usages=[x509.oid.ExtendedKeyUsageOID.SERVER_AUTH],
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return context, base64.b64encode((directory / "ca.crt").read_bytes()).decode()


def client_certificate(directory: Path, common_name: str) -> tuple[bytes, bytes]:
    """A client certificate (PEM) and its key, signed by the CA of the server in ``directory``."""
    ca = pki.load_or_create_ca(directory / "ca.crt", directory / "ca.key", common_name="webhook-test-ca")
    cert, key = directory / f"{common_name}.crt", directory / f"{common_name}.key"
    pki.ensure_certificate(cert, key, ca_cert=ca, ca_key_path=directory / "ca.key", common_name=common_name,
                           usages=[x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH])
    return cert.read_bytes(), key.read_bytes()


@asynccontextmanager
async def webhook_server(
    directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1",), client_certificates: bool = False,
) -> AsyncIterator[WebhookServer]:
    """The server on a free port of 127.0.0.1, its certificate valid for ``hosts``."""
    context, bundle = _certificates(directory, hosts)
    if client_certificates:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(directory / "ca.crt")
    received: dict[str, list[dict[str, Any]]] = defaultdict(list)
    waiting: list[dict[str, Any]] = []
    paired = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        review = await request.json()
        received[request.path].append(review)
        if review.get("kind") == "ConversionReview":
            return web.json_response(_convert(request.path, review))
        if review.get("kind") == "ResourceInterpreterContext":
            return web.json_response(interpret(request.path, review))
        if review.get("kind") == "EventList":  # an audit webhook's batch: kept, nothing to answer
            if request.path == "/audit-refused":
                return web.json_response({"message": "not these events"}, status=400)
            if request.path == "/audit-once-500" and len(received[request.path]) == 1:
                return web.json_response({"message": "try again"}, status=500)
            return web.json_response({})
        if request.path == "/deny":
            if _labels(review).get("deny") == "yes":
                return _answer(review, allowed=False, warnings=["denied by the acme policy"],
                               status={"code": 403, "message": "no GPUs for you"})
            return _answer(review, allowed=True, warnings=["checked by the acme policy"])
        if request.path == "/copy":
            # Notes, in an annotation, the label /label adds, once it is there.
            obj = review["request"]["object"]
            if "mutated" not in _labels(review):
                return _answer(review, allowed=True)
            annotations = {**(obj["metadata"].get("annotations") or {}), "acme.io/saw-label": "yes"}
            patch = [{"op": "add", "path": "/metadata/annotations", "value": annotations}]
            encoded = base64.b64encode(json.dumps(patch).encode()).decode()
            return _answer(review, allowed=True, patchType="JSONPatch", patch=encoded)
        if request.path in PATCHES:
            patch = PATCHES[request.path]
            encoded = base64.b64encode(json.dumps(patch).encode()).decode()
            return _answer(review, allowed=True, patchType="JSONPatch", patch=encoded)
        if request.path == "/slow":
            await asyncio.sleep(SLOW_SECONDS)
        if request.path == "/together":
            # Admits only while another call to /together is in flight with it.
            waiting.append(review)
            if len(waiting) % 2 == 0:
                paired.set()
            try:
                await asyncio.wait_for(paired.wait(), SLOW_SECONDS)
            except TimeoutError:
                return _answer(review, allowed=False, status={"message": "called alone"})
        return _answer(review, allowed=True)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock, ssl_context=context).start()
    try:
        yield WebhookServer(f"https://127.0.0.1:{port}", port, bundle, received)
    finally:
        await cleanup_cutting_connections(runner)


async def cleanup_cutting_connections(runner: web.AppRunner) -> None:
    """``runner.cleanup()``, the connections its clients keep alive (a hub's) cut first: aiohttp
    closes them as TLS asks, waiting for the client's reply, and the loop serving them (a
    thread's, :func:`served_in_thread`) ends right after, which would leave their sockets open."""
    if runner.server is not None:
        for handler in runner.server.connections:
            if handler.transport is not None:
                handler.transport.abort()
    await runner.cleanup()


@contextmanager
def served_in_thread(serving: Callable[[], AbstractAsyncContextManager[T]], *, name: str) -> Iterator[T]:
    """The server ``serving()`` starts, on an event loop of its own thread, for tests that drive
    processes synchronously (the e2e tests); it stops when the block ends."""
    ready: queue.Queue[T | BaseException] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        try:
            async with serving() as server:
                ready.put(server)
                await stop.wait()
        except BaseException as exc:  # handed to the waiting test
            ready.put(exc)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name=name, daemon=True)
    thread.start()
    started = ready.get(timeout=30)
    if isinstance(started, BaseException):
        raise started
    try:
        yield started
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()


@contextmanager
def webhook_server_thread(directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1",)) -> Iterator[WebhookServer]:
    """:func:`webhook_server` on an event loop of its own thread, for tests that drive processes
    synchronously (the e2e tests)."""
    with served_in_thread(lambda: webhook_server(directory, hosts=hosts), name="webhook-server") as server:
        yield server
