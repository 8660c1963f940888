"""The floor under the API benchmark: what no API server's create can skip, nothing more.

An aiohttp app over HTTPS, served with the hub's own serving certificate and TLS context
(:meth:`controlplane.apiserver.tls.ServingCertificate.server_ssl_context`), whose one route,
``POST /api/v1/namespaces/{namespace}/configmaps``, reads the body, parses it with orjson,
sets the namespace, uid and creationTimestamp, serialises it, makes one create (a guarded
Txn) through the hub's own :class:`EtcdStore` (its transport and gRPC settings) under a key
prefix the hub does not watch, and answers 201 with the object and its resourceVersion.
No authentication, admission, validation, managedFields, watch cache or controllers.

:mod:`bench.bench_api` runs it in its own process, as the hub runs, beside the hub's etcd:
``python bench/apifloor.py --etcd-dir HUB_STATE/etcd --pki-dir HUB_STATE/pki
--listen 127.0.0.1:0``; it prints ``listening on PORT`` once it serves.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__" and not __package__:
    # Run by path (as bench_api starts it): import this tree's packages, not an installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The store runs gRPC as the hub does: its settings go into the environment before gRPC loads.
import controlplane.storage.grpcsettings  # noqa: F401

# isort: split
import argparse
import asyncio
import datetime as dt
import signal
import uuid

import orjson
from aiohttp import web

from controlplane.apiserver.tls import ServingCertificate
from controlplane.storage.connecting import EtcdClientTls
from controlplane.storage.embedded import SOCKET_NAME, SOCKET_SUBDIR
from controlplane.storage.etcd import EtcdStore
from controlplane.storage.interface import AlreadyExists

#: The floor's objects live under this etcd prefix, which the hub neither reads nor watches.
FLOOR_PREFIX = "/bench-floor"
STORE = web.AppKey("store", EtcdStore)


def embedded_etcd(etcd_dir: Path) -> tuple[str, EtcdClientTls | None]:
    """How the hub reaches its embedded etcd in ``etcd_dir``: the client URL (its Unix socket
    if there is one, else TCP) and the client certificate TCP needs."""
    socket_path = etcd_dir / SOCKET_SUBDIR / SOCKET_NAME
    if socket_path.exists():
        return f"unix://{socket_path.absolute()}", None
    pki = etcd_dir / "pki"
    tls = EtcdClientTls(ca_file=pki / "ca.crt", cert_file=pki / "client.crt", key_file=pki / "client.key")
    port = int(orjson.loads((etcd_dir / "ports.json").read_bytes())["client_port"])
    return f"https://127.0.0.1:{port}", tls


def etcd_store(etcd_dir: Path) -> EtcdStore:
    """The store the hub opens on its embedded etcd, keeping its keys under :data:`FLOOR_PREFIX`."""
    url, tls = embedded_etcd(etcd_dir)
    return EtcdStore([url], prefix=FLOOR_PREFIX, tls=tls)


async def create(request: web.Request) -> web.Response:
    namespace = request.match_info["namespace"]
    obj = orjson.loads(await request.read())
    metadata = obj.setdefault("metadata", {})
    metadata["namespace"] = namespace
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        stored = await request.app[STORE].create(f"/configmaps/{namespace}/{metadata['name']}", orjson.dumps(obj))
    except AlreadyExists:
        return web.json_response({"kind": "Status", "code": 409, "reason": "AlreadyExists"}, status=409)
    metadata["resourceVersion"] = str(stored.mod_revision)
    return web.Response(status=201, body=orjson.dumps(obj), content_type="application/json")


async def serve(etcd_dir: Path, pki_dir: Path, host: str, port: int) -> None:
    store = etcd_store(etcd_dir)
    await store.connect()
    serving = ServingCertificate(
        cert_path=pki_dir / "server.crt", key_path=pki_dir / "server.key", ca_pem=(pki_dir / "ca.crt").read_bytes()
    )
    app = web.Application()
    app[STORE] = store
    app.router.add_post("/api/v1/namespaces/{namespace}/configmaps", create)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=serving.server_ssl_context())
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []  # aiohttp exposes the bound sockets only here
    print(f"listening on {sockets[0].getsockname()[1]}", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    try:
        await stopped.wait()
    finally:
        await runner.cleanup()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--etcd-dir", type=Path, required=True, help="the hub's embedded etcd directory")
    parser.add_argument("--pki-dir", type=Path, required=True, help="the hub's PKI directory (serving cert)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any free port)")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    asyncio.run(serve(args.etcd_dir, args.pki_dir, host, int(port)))


if __name__ == "__main__":
    main()
