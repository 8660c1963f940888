"""A small real extension API server for the aggregation tests: aiohttp over TLS with a serving
certificate from its own CA (the ``caBundle`` an APIService gives the hub), serving
``widgets.example.com/v1alpha1`` as a k8s.io/apiserver-based server would.

It trusts a caller as such a server trusts kube-apiserver: the client certificate must be signed
by the ``requestheader-client-ca-file`` of the hub's ``extension-apiserver-authentication``
ConfigMap and name one of its ``requestheader-allowed-names``; the user is then read from the
``X-Remote-*`` headers the ConfigMap names. Anything else is answered 401. It serves its discovery
(``/apis/widgets.example.com/v1alpha1``), its OpenAPI (``/openapi/v2``, ``/openapi/v3`` and
``/openapi/v3/apis/widgets.example.com/v1alpha1``, a Widget's schema), a WebSocket ``echo`` subresource of a widget, and a list of one Widget per namespace (``widgets``; a
watch of it sends one event, then a second once :attr:`ExtensionServer.release` is set), and keeps
every identity it saw, by path, for the test to read.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web
from cryptography import x509
from cryptography.x509.oid import NameOID

from controlplane import pki
from tests.webhookserver import cleanup_cutting_connections, served_in_thread

GROUP = "widgets.example.com"
VERSION = "v1alpha1"
DISCOVERY = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [{"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget",
                   "verbs": ["get", "list"], "shortNames": ["wg"]}],
}

#: The Widget schema its OpenAPI documents give (``kubectl explain widget.spec`` prints it).
WIDGET_SCHEMA = {
    "type": "object", "description": "A Widget is a small test object served by the extension server.",
    "properties": {
        "apiVersion": {"type": "string", "description": "APIVersion of the object."},
        "kind": {"type": "string", "description": "Kind of the object."},
        "metadata": {"type": "object", "description": "Standard object's metadata."},
        "spec": {"type": "object", "description": "WidgetSpec is what a Widget should be.",
                 "properties": {"size": {"type": "integer", "format": "int32",
                                         "description": "How many teeth the sprocket has."}}},
    },
    "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "Widget"}],
}
WIDGET_DEFINITION = "com.example.widgets.v1alpha1.Widget"
#: A definition the hub has too, with other content: the hub renames this one when merging.
STATUS_DEFINITION = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_LIST_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/widgets"
OPENAPI_V2 = {
    "swagger": "2.0", "info": {"title": "widgets", "version": "v0.1"},
    "paths": {_LIST_PATH: {"get": {
        "operationId": "listWidgets", "produces": ["application/json"],
        "responses": {"200": {"description": "OK", "schema": {"$ref": f"#/definitions/{WIDGET_DEFINITION}"}},
                      "401": {"description": "Unauthorized", "schema": {"$ref": f"#/definitions/{STATUS_DEFINITION}"}}},
        "x-kubernetes-action": "list",
        "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": "Widget"}}}},
    "definitions": {WIDGET_DEFINITION: WIDGET_SCHEMA,
                    STATUS_DEFINITION: {"type": "object", "description": "The extension server's Status."}},
}
OPENAPI_V3 = {
    "openapi": "3.0.0", "info": {"title": "widgets", "version": "v0.1"},
    "paths": {_LIST_PATH: {"get": {
        "operationId": "listWidgets",
        "responses": {"200": {"description": "OK", "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{WIDGET_DEFINITION}"}}}}},
        "x-kubernetes-action": "list",
        "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": "Widget"}}}},
    "components": {"schemas": {WIDGET_DEFINITION: WIDGET_SCHEMA}},
}


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]


@dataclass
class ExtensionServer:
    port: int
    ca_bundle: str  # base64 of its CA's PEM, as an APIService's caBundle
    seen: dict[str, list[Identity]] = field(default_factory=dict)
    #: A watch of widgets sends its first event, then waits for this before its second and its end.
    release: asyncio.Event = field(default_factory=asyncio.Event)


def _widget(namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
            "metadata": {"name": "sprocket", "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"}}


def _server_context(directory: Path, *, hosts: list[str], client_ca_pem: str) -> tuple[ssl.SSLContext, str]:
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.load_or_create_ca(directory / "ca.crt", directory / "ca.key", common_name="widgets-test-ca")
    pki.ensure_certificate(
        directory / "tls.crt", directory / "tls.key", ca_cert=ca, ca_key_path=directory / "ca.key",
        common_name="widgets", hosts=hosts, usages=[x509.oid.ExtendedKeyUsageOID.SERVER_AUTH],
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    context.verify_mode = ssl.CERT_OPTIONAL  # anonymous TLS is allowed; such a caller is not trusted
    context.load_verify_locations(cadata=client_ca_pem)
    return context, base64.b64encode((directory / "ca.crt").read_bytes()).decode()


def _caller(request: web.Request, authentication: dict[str, str]) -> Identity | None:
    """The front proxy's user, as k8s.io/apiserver's request-header authenticator reads it."""
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return None
    names = x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or names[0].value not in json.loads(authentication["requestheader-allowed-names"]):
        return None
    [user_header] = json.loads(authentication["requestheader-username-headers"])
    [group_header] = json.loads(authentication["requestheader-group-headers"])
    [prefix] = json.loads(authentication["requestheader-extra-headers-prefix"])
    user = request.headers.get(user_header)
    if not user:
        return None
    extra: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        if name.lower().startswith(prefix.lower()):
            extra.setdefault(name[len(prefix):].lower(), []).append(value)
    return Identity(user, tuple(request.headers.getall(group_header, [])), extra)


async def _watch(request: web.Request, state: ExtensionServer, namespace: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(json.dumps({"type": "ADDED", "object": _widget(namespace)}).encode() + b"\n")
    await state.release.wait()
    await response.write(json.dumps({"type": "DELETED", "object": _widget(namespace)}).encode() + b"\n")
    await response.write_eof()
    return response


async def _echo(request: web.Request) -> web.StreamResponse:
    """A widget's ``echo`` subresource: a WebSocket on kube's ``v5.channel.k8s.io`` that answers each
    message with ``echo: `` before it, and closes with code 4000 when told ``bye``."""
    ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io",))
    await ws.prepare(request)
    async for message in ws:
        if message.type is WSMsgType.BINARY:
            await ws.send_bytes(b"echo: " + message.data)
        elif message.type is WSMsgType.TEXT and message.data == "bye":
            await ws.close(code=4000)
        elif message.type is WSMsgType.TEXT:
            await ws.send_str("echo: " + message.data)
    return ws


@asynccontextmanager
async def extension_server(
    directory: Path, *, authentication: dict[str, str], hosts: tuple[str, ...],
) -> AsyncIterator[ExtensionServer]:
    """The server on a free port of 127.0.0.1; ``authentication``: the hub's ConfigMap data."""
    context, bundle = _server_context(directory, hosts=list(hosts),
                                      client_ca_pem=authentication["requestheader-client-ca-file"])
    state = ExtensionServer(0, bundle)

    async def handle(request: web.Request) -> web.StreamResponse:
        caller = _caller(request, authentication)
        if caller is None:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, status=401)
        state.seen.setdefault(request.path, []).append(caller)
        parts = [p for p in request.path.split("/") if p]
        if parts == ["apis", GROUP, VERSION]:
            return web.json_response(DISCOVERY)
        if parts == ["openapi", "v2"]:
            return web.json_response(OPENAPI_V2)
        if parts == ["openapi", "v3"]:
            return web.json_response({"paths": {f"apis/{GROUP}/{VERSION}": {
                "serverRelativeURL": f"/openapi/v3/apis/{GROUP}/{VERSION}?hash=1"}}})
        if parts == ["openapi", "v3", "apis", GROUP, VERSION]:
            return web.json_response(OPENAPI_V3)
        if parts == ["apis", GROUP]:
            return web.json_response({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                                      "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}]})
        if parts[:3] == ["apis", GROUP, VERSION] and parts[-1] == "echo" and len(parts) == 8:
            return await _echo(request)
        if len(parts) == 6 and parts[:3] == ["apis", GROUP, VERSION] and parts[3] == "namespaces" and parts[5] == "widgets":
            if request.query.get("watch") in ("1", "true"):
                return await _watch(request, state, parts[4])
            return web.json_response({"apiVersion": f"{GROUP}/{VERSION}", "kind": "WidgetList",
                                      "metadata": {"resourceVersion": "1"}, "items": [_widget(parts[4])]})
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "message": "the server could not find the requested resource", "reason": "NotFound",
                                  "code": 404}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    state.port = sock.getsockname()[1]
    await web.SockSite(runner, sock, ssl_context=context).start()
    try:
        yield state
    finally:
        await cleanup_cutting_connections(runner)


@contextmanager
def extension_server_thread(
    directory: Path, *, authentication: dict[str, str], hosts: tuple[str, ...],
) -> Iterator[ExtensionServer]:
    """:func:`extension_server` on an event loop of its own thread, for the e2e tests; it stops
    when the block ends."""
    serving = partial(extension_server, directory, authentication=authentication, hosts=hosts)
    with served_in_thread(serving, name="extension-server") as server:
        yield server
