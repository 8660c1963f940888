"""How `gpufed get` and `gpufed logs` reach member clusters: through the hub's cluster proxy.

Every call goes to ``/apis/cluster.gpufed.io/v1alpha1/clusters/<name>/proxy/<member path>`` on
the hub with the user's hub credential; the hub forwards it through that cluster's agent.
This module lists the clusters (``--clusters c1,c2`` or ``all``) and says which could not be
asked, resolves a kind the way
kubectl does (plural, singular, kind or short name, from the member's discovery), picks the
pods of a hub workload (the clusters its Works carry it to, then the pods it owns), and
streams a response line by line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from controlplane.apis import constants as c
from controlplane.apis.podview import owned_by, propagated_workloads
from controlplane.apiserver.tls import client_ssl_context
from gpufed.hubclient import (
    HubClient,
    HubError,
    add_chunk_size_argument,
    add_kubeconfig_argument,
    add_namespace_argument,
    read_answer,
    unreachable,
)

CLUSTERS_PATH = f"/apis/{c.CLUSTER_GROUP}/{c.VERSION}/clusters"
WORKS_PATH = f"/apis/{c.WORK_GROUP}/{c.VERSION}/works"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def proxy_path(cluster: str, path: str) -> str:
    return f"{CLUSTERS_PATH}/{cluster}/proxy{path}"


def add_clusters_argument(parser: argparse.ArgumentParser) -> None:
    """``--clusters``: the member clusters a command looks in (see :func:`clusters`)."""
    parser.add_argument("--clusters", default="all", help="where to look: c1,c2 or all (default all)")


def add_object_arguments(parser: argparse.ArgumentParser, *, examples: str) -> None:
    """``KIND/NAME [-n NS] [--clusters ...] [--chunk-size N] [--kubeconfig ...]``: one hub object
    of a namespace, looked up across the member clusters (`gpufed describe`, `gpufed events`)."""
    parser.add_argument("target", metavar="KIND/NAME", help=f"e.g. {examples}")
    add_namespace_argument(parser)
    add_clusters_argument(parser)
    add_chunk_size_argument(parser)
    add_kubeconfig_argument(parser)


def print_unreached(failed: Mapping[str, str]) -> None:
    """One line on stderr for each cluster that could not be asked, and why."""
    for cluster, why in failed.items():
        print(f"cluster {cluster}: {why}", file=sys.stderr)


async def clusters(hub: HubClient, wanted: str) -> list[str]:
    """The clusters ``--clusters`` names (``all``: every Cluster on the hub), sorted. A user who
    may not list Clusters (a team allowed only ``clusters/proxy``) may still name them."""
    names = [name.strip() for name in wanted.split(",") if name.strip()] if wanted not in ("", "all") else []
    try:
        known = sorted(item["metadata"]["name"] for item in (await hub.read_list(CLUSTERS_PATH))["items"])
    except HubError as exc:
        if exc.status == 403 and names:
            return names
        raise
    if not names:
        return known
    unknown = [name for name in names if name not in known]
    if unknown:
        raise HubError(f"no such cluster(s): {', '.join(unknown)}; the hub has: {', '.join(known) or 'none'}")
    return names


@dataclass(frozen=True)
class Resource:
    """A member resource as discovery lists it."""

    path: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    kind: str
    namespaced: bool

    def collection(self, namespace: str | None) -> str:
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{self.path}{where}/{self.plural}"


def _matches(entry: Mapping[str, Any], word: str) -> bool:
    word = word.lower()
    names = {str(entry.get("name", "")), str(entry.get("singularName", "")), str(entry.get("kind", "")).lower()}
    return word in names or word in {str(s) for s in entry.get("shortNames") or []}


async def resolve(hub: HubClient, cluster: str | None, word: str) -> Resource:
    """The resource ``word`` names (``pods``, ``pod``, ``po``, ``Deployment``, ``deploy.apps``) on
    member ``cluster``, or on the hub itself when ``cluster`` is None."""

    def at(path: str) -> str:
        return path if cluster is None else proxy_path(cluster, path)

    word, _, group = word.partition(".")
    candidates: list[str] = []
    if not group:
        candidates.append("/api/v1")
    groups = await hub.request("GET", at("/apis"))
    for item in groups.get("groups") or []:
        if group and item.get("name") != group:
            continue
        version = (item.get("preferredVersion") or {}).get("groupVersion")
        if version:
            candidates.append(f"/apis/{version}")
    for path in candidates:
        listing = await hub.request("GET", at(path))
        for entry in listing.get("resources") or []:
            if "/" not in str(entry.get("name", "")) and _matches(entry, word):
                return Resource(path, str(entry["name"]), str(entry.get("kind", "")), bool(entry.get("namespaced")))
    where = "" if cluster else " (the hub)"  # a member's answer is printed after its cluster's name
    raise HubError(f'the server doesn\'t have a resource type "{word}"{where}')


async def cluster_utilization(hub: HubClient, cluster: str) -> Any:
    """The DCGM data cluster's agent last reported (``Cluster.status.utilization``; None when the
    hub has none or the caller may not read the Cluster): which pod holds which GPU device."""
    try:
        found = await hub.get_or_none(f"{CLUSTERS_PATH}/{cluster}")
    except HubError:
        return None
    return ((found or {}).get("status") or {}).get("utilization")


async def workload_clusters(hub: HubClient, namespace: str, kind: str, name: str) -> list[str]:
    """The clusters the hub's Works carry workload ``namespace/kind/name`` to."""
    works = (await hub.read_list(WORKS_PATH))["items"]
    return sorted(
        cluster for cluster, workloads in propagated_workloads(works).items()
        if (namespace, kind, name) in workloads
    )


async def stream_lines(hub: HubClient, cluster: str, path: str, params: Sequence[tuple[str, str]]) -> AsyncIterator[str]:
    """The lines of a (possibly endless) proxied response."""
    headers = {"Authorization": f"Bearer {hub.credentials.token}"}
    connector = aiohttp.TCPConnector(ssl=client_ssl_context(hub.credentials.ca_pem))
    timeout = aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30)
    url = hub.server + proxy_path(cluster, path)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
            session.get(url, params=list(params), headers=headers) as response,
        ):
            if response.status >= 400:
                raw = await read_answer(response, method="GET", path=proxy_path(cluster, path), limit=hub.max_response_bytes)
                text = raw.decode("utf-8", errors="replace")
                try:
                    message = json.loads(text).get("message") or text
                except ValueError:
                    message = text
                raise HubError(f"cluster {cluster}: {message.strip()}", status=response.status)
            async for raw in response.content:
                yield raw.decode(errors="replace").rstrip("\n")
    except aiohttp.ClientPayloadError as exc:
        raise HubError(f"cluster {cluster}: the stream ended early ({exc}); its agent may have disconnected") from exc
    except aiohttp.ClientConnectorError as exc:
        raise unreachable(hub.server, exc, kubeconfig=hub.kubeconfig) from exc


async def workload_pods(
    hub: HubClient, namespace: str, kind: str, name: str, candidates: Sequence[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The pods of workload ``namespace/kind/name`` per cluster, on the ``candidates`` its Works
    reach (all of them when no Work names it), and the clusters that could not be asked, with why."""
    carried = await workload_clusters(hub, namespace, kind, name)
    where = [cluster for cluster in candidates if cluster in carried] if carried else list(candidates)
    found: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, str] = {}
    for cluster in where:
        try:
            listing = await hub.read_list(proxy_path(cluster, f"/api/v1/namespaces/{namespace}/pods"))
        except HubError as exc:
            failed[cluster] = str(exc)
            continue
        found[cluster] = [pod for pod in listing.get("items") or [] if owned_by(pod, kind, name)]
    return found, failed


def no_pods(target: str, namespace: str) -> HubError:
    """``POD`` or ``KIND/NAME`` has no pod on the clusters searched."""
    kind_word, _, name = target.rpartition("/")
    if kind_word.lower() in ("", "pod", "pods", "po"):
        return HubError(f'pods "{name}" not found in namespace "{namespace}" on the clusters searched')
    return HubError(f'{target} has no pods in namespace "{namespace}" on the clusters searched')


async def target_pods(
    hub: HubClient, namespace: str, wanted_clusters: str, kind_word: str, name: str
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(cluster, pod) pairs of ``POD`` (``kind_word`` empty or pod) or of workload ``KIND/NAME``
    on the clusters ``--clusters`` names, sorted; and the clusters that could not be asked, with why."""
    candidates = await clusters(hub, wanted_clusters)
    if kind_word in ("", "pod", "pods", "po"):
        answers = await asyncio.gather(
            *(hub.request("GET", proxy_path(cluster, f"/api/v1/namespaces/{namespace}/pods/{name}"))
              for cluster in candidates),
            return_exceptions=True,
        )
        failed = {
            cluster: str(answer) for cluster, answer in zip(candidates, answers, strict=True)
            if isinstance(answer, HubError) and answer.status != 404
        }
        return [(cluster, name) for cluster, pod in zip(candidates, answers, strict=True) if isinstance(pod, dict)], failed
    kind = (await resolve(hub, None, kind_word)).kind
    found, failed = await workload_pods(hub, namespace, kind, name, candidates)
    return sorted((cluster, pod["metadata"]["name"]) for cluster, pods in found.items() for pod in pods), failed
