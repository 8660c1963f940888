"""Driving a running hub from a benchmark: what the process benchmarks (e2e, scale, ledger) share.

In: the hub's admin kubeconfig (:class:`Hub`, a small HTTPS client), or its kubectl and the
benchmark's :class:`~e2e.harness.ProcessGroup`. Out: collections followed (list, then watch,
re-listing when a stream ends), workloads created on an open-loop schedule, the clusters the hub
has Ready, and a CPU meter over every process the benchmark started.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import orjson

from bench.common import CpuMeter, etcd_pid
from controlplane.apiserver.kubeconfig import load_kubeconfig
from controlplane.apiserver.tls import client_ssl_context
from e2e.harness import Kubectl, ProcessGroup

REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=60)
#: aiohttp closes TLS transports a moment after the session (its documented graceful shutdown).
SSL_CLOSE_GRACE = 0.25
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=120)
WORKS = "/apis/work.gpufed.io/v1alpha1/works"


#: How often a create is sent again when the hub answers with ``Retry-After`` (client-go's limit).
MAX_RETRIES = 10


@dataclass
class Hub:
    """A small HTTPS client for the hub: one session, the admin bearer token."""

    session: aiohttp.ClientSession
    base: str
    #: Creates sent again after a ``Retry-After`` answer (429, or 503 while etcd is away).
    retries: int = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, kubeconfig: Path, *, connections: int = 32) -> AsyncIterator[Hub]:
        creds = load_kubeconfig(kubeconfig)
        connector = aiohttp.TCPConnector(ssl=client_ssl_context(creds.ca_pem), limit=connections)
        headers = {"Authorization": f"Bearer {creds.token}", "Accept": "application/json"}
        async with aiohttp.ClientSession(
            connector=connector, timeout=REQUEST_TIMEOUT, headers=headers
        ) as session:
            yield cls(session, creds.server.rstrip("/"))
        await asyncio.sleep(SSL_CLOSE_GRACE)

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.session.get(self.base + path) as response:
            body = await response.read()
            return response.status, orjson.loads(body) if body else None

    async def create(self, path: str, obj: dict[str, Any]) -> int:
        """POST ``obj``; an answer of 429 or 5xx with ``Retry-After`` is waited out and sent again,
        as client-go does (at most :data:`MAX_RETRIES` times)."""
        body = orjson.dumps(obj)
        for attempt in range(MAX_RETRIES + 1):
            async with self.session.post(
                self.base + path, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                text = await response.read()
                wait = response.headers.get("Retry-After", "")
                if response.status in (201, 409):
                    return response.status
                if (response.status == 429 or response.status >= 500) and wait.isdigit() and attempt < MAX_RETRIES:
                    self.retries += 1
                    await asyncio.sleep(int(wait))
                    continue
                raise RuntimeError(f"POST {path}: HTTP {response.status}: {text[:300]!r}")
        raise AssertionError("unreachable")

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        """Events of one watch stream, from ``resource_version``; ends when the server ends it."""
        url = f"{self.base}{path}?watch=1&allowWatchBookmarks=true&resourceVersion={resource_version}"
        async with self.session.get(url, timeout=WATCH_TIMEOUT) as response:
            if response.status != 200:
                raise RuntimeError(f"watch {path}: HTTP {response.status}: {(await response.read())[:300]!r}")
            async for line in response.content:
                if line.strip():
                    yield orjson.loads(line)


def is_running(obj: dict[str, Any]) -> bool:
    """All replicas Ready, as the hub's aggregated workload status says."""
    wanted = int((obj.get("spec") or {}).get("replicas", 1))
    ready = int((obj.get("status") or {}).get("readyReplicas") or 0)
    return ready >= wanted


async def follow(hub: Hub, path: str, on_object: Callable[[dict[str, Any], float], None]) -> None:
    """List then watch ``path``, calling ``on_object(obj, time)`` for every object listed, added or
    modified; re-lists whenever a stream ends, until cancelled."""
    while True:
        status, listing = await hub.get(path)
        if status != 200:
            raise RuntimeError(f"LIST {path}: HTTP {status}")
        for item in listing.get("items") or []:
            on_object(item, time.perf_counter())
        version = str((listing.get("metadata") or {}).get("resourceVersion", "0"))
        with contextlib.suppress(aiohttp.ClientPayloadError, TimeoutError):
            async for event in hub.watch(path, version):
                if event.get("type") in ("ADDED", "MODIFIED"):
                    on_object(event.get("object") or {}, time.perf_counter())


async def claim_namespace(hub: Hub, namespace: str, policy: dict[str, Any]) -> None:
    """Create the benchmark's namespace and the PropagationPolicy that claims its workloads."""
    await hub.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await hub.create(f"/apis/policy.gpufed.io/v1alpha1/namespaces/{namespace}/propagationpolicies", policy)


class Applies(Protocol):
    """Where :func:`apply_all` records each create's start and duration."""

    applied: dict[str, float]
    apply_seconds: list[float]


async def apply_all(
    hub: Hub, workloads: list[dict[str, Any]], tracker: Applies, *, rate: float, path: str
) -> float:
    """Create the workloads (in collection ``path``) on an open-loop schedule (``rate`` per
    second); returns the seconds the creating took."""
    started = time.perf_counter()

    async def create(index: int, obj: dict[str, Any]) -> None:
        delay = started + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        name = obj["metadata"]["name"]
        tracker.applied[name] = time.perf_counter()
        await hub.create(path, obj)
        tracker.apply_seconds.append(time.perf_counter() - tracker.applied[name])

    async with asyncio.TaskGroup() as group:
        for index, obj in enumerate(workloads):
            group.create_task(create(index, obj))
    return time.perf_counter() - started


def ready_clusters(hub: Kubectl) -> set[str]:
    """The clusters the hub has Ready with a capacity report (``status.nodeShapes``)."""
    return {
        c["metadata"]["name"]
        for c in hub.json("get", "clusters")["items"]
        if (c.get("status") or {}).get("nodeShapes")
        and any(x["type"] == "Ready" and x["status"] == "True" for x in c["status"].get("conditions", []))
    }


def fleet_meter(group: ProcessGroup) -> CpuMeter:
    """CPU of every process the benchmark started, plus the hub's etcd."""
    pids = {proc.name: proc.popen.pid for proc in group.processes if proc.popen is not None}
    etcd = etcd_pid(group.root / "hub" / "etcd" / "etcd")
    if etcd is not None:
        pids["etcd"] = etcd
    return CpuMeter(pids)
