"""What `gpufed up` asks the hub and the members over HTTP, and what it makes of the answers.

In: a kubeconfig (the hub's or a member's). Out: readiness probes for the supervisor (a
server answers /readyz; an agent's cluster reports Ready to the hub) and ``HubView``, the
hub's Cluster objects polled every few seconds for the status board; plus the one-time join
token an agent without a stored credential needs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from controlplane.apis.timestamps import parse_time_or_none
from gpufed.supervising import Probe

CLUSTERS_PATH: Final = "/apis/cluster.gpufed.io/v1alpha1/clusters"
STATUS_INTERVAL: Final = 2.0
REQUEST_TIMEOUT: Final = 5.0


def _fresh(path: Path, started_at: float) -> bool:
    # Written by the run that started at ``started_at`` (a second of slack for mtime granularity).
    return path.exists() and path.stat().st_mtime >= started_at - 1.0


async def _readyz(kubeconfig: Path) -> bool:
    from controlplane.apiserver.kubeconfig import load_kubeconfig
    from controlplane.apiserver.tls import client_ssl_context

    credentials = load_kubeconfig(kubeconfig)
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(credentials.ca_pem))
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
        # With its credentials: a hub started with --anonymous-auth=false answers 401 without them.
        session.get(credentials.server.rstrip("/") + "/readyz",
                    headers={"Authorization": f"Bearer {credentials.token}"} if credentials.token else None) as response,
    ):
        return response.status == 200


def kube_probe(kubeconfig: Path) -> Probe:
    """Ready once this run rewrote ``kubeconfig`` and the server it names answers /readyz."""

    async def probe(started_at: float) -> bool:
        return _fresh(kubeconfig, started_at) and await _readyz(kubeconfig)

    return probe


@dataclass(frozen=True)
class ClusterView:
    """What the status line shows of one Cluster object of the hub."""

    name: str
    ready: str
    last_report: float | None
    gpus: tuple[tuple[str, int, int], ...]  # (kind, allocated, allocatable)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClusterView:
        status = obj.get("status") or {}
        ready = next((str(c.get("status")) for c in status.get("conditions") or [] if c.get("type") == "Ready"),
                     "Unknown")
        totals: dict[str, list[int]] = {}
        for entry in status.get("gpuSummary") or []:
            resource = str(entry.get("resource", ""))
            kind = "mig" if resource.startswith("nvidia.com/mig-") else "gpu"
            total = totals.setdefault(kind, [0, 0])
            total[0] += int(entry.get("allocated") or 0)
            total[1] += int(entry.get("allocatable") or 0)
        return cls(
            name=str(obj["metadata"]["name"]),
            ready=ready,
            last_report=_timestamp(status.get("lastReportTime")),
            gpus=tuple((kind, a, b) for kind, (a, b) in sorted(totals.items())),
        )

    def describe(self) -> str:
        ready = {"True": "Ready", "False": "NotReady"}.get(self.ready, "Unknown")
        gpus = "  ".join(f"{kind} {used}/{total} used" for kind, used, total in self.gpus)
        return f"{ready:<8} {gpus}".rstrip()


def _timestamp(value: Any) -> float | None:
    moment = parse_time_or_none(value, naive_as_utc=True)
    return None if moment is None else moment.timestamp()


@dataclass
class HubView:
    """The hub as `gpufed up` sees it, refreshed every few seconds."""

    kubeconfig: Path
    clusters: dict[str, ClusterView] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def refresh(self) -> None:
        from gpufed.hubclient import HubClient

        client = HubClient.from_kubeconfig(self.kubeconfig)
        async with asyncio.timeout(REQUEST_TIMEOUT):
            listing = await client.read_list(CLUSTERS_PATH)
        clusters = {view.name: view for view in map(ClusterView.from_object, listing.get("items", []))}
        if clusters != self.clusters:
            self.clusters = clusters
            self.changed.set()

    async def run(self) -> None:
        from gpufed.hubclient import HubError

        while True:
            with contextlib.suppress(HubError, TimeoutError, OSError, ValueError):
                await self.refresh()
            await asyncio.sleep(STATUS_INTERVAL)

    def agent_probe(self, cluster: str) -> Probe:
        """Ready once the hub shows the cluster Ready with a report made since the agent started."""

        async def probe(started_at: float) -> bool:
            view = self.clusters.get(cluster)
            return bool(view and view.ready == "True" and view.last_report and view.last_report >= started_at - 1)

        return probe

    async def mint_bootstrap_token(self, cluster: str) -> str:
        """A one-time join token for ``cluster``, as `gpufed token create --cluster NAME
        --print-join-command` mints it: scoped, so an agent whose state was lost re-joins."""
        from controlplane.apis.constants import TOKENS_PATH
        from gpufed.hubclient import HubClient

        client = HubClient.from_kubeconfig(self.kubeconfig)
        async with asyncio.timeout(REQUEST_TIMEOUT * 2):
            created = await client.request(
                "POST", TOKENS_PATH, body={"role": "bootstrap", "name": f"gpufed-up/{cluster}", "cluster": cluster}
            )
        return str(created["token"])
