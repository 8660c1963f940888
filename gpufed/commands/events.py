"""`gpufed events KIND/NAME [-n NS] [--clusters c1,c2|all]`: one timeline of a workload's events.

The hub's Events about the workload (scheduling, propagation, failover) and, through the
cluster proxy, each member's Events about the workload, its ReplicaSets and its pods, on the
clusters the hub's Works carry it to; merged oldest first with the cluster they come from
(``hub`` for the hub's own).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from gpufed.commands.running import run_reporting
from gpufed.hubclient import HubClient, HubError
from gpufed.memberproxy import (
    add_object_arguments,
    clusters,
    print_unreached,
    proxy_path,
    resolve,
    workload_pods,
)

HUB = "hub"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_object_arguments(parser, examples="deployment/llm-serving, pytorchjob/train")


def event_time(event: Mapping[str, Any]) -> str:
    meta = event.get("metadata") or {}
    return str(event.get("lastTimestamp") or event.get("eventTime") or meta.get("creationTimestamp") or "")


def about(event: Mapping[str, Any], kind: str, name: str, pods: set[str]) -> bool:
    """Whether ``event`` concerns workload ``kind/name``, one of its ReplicaSets or one of ``pods``."""
    involved = event.get("involvedObject") or {}
    involved_kind, involved_name = involved.get("kind"), str(involved.get("name", ""))
    if involved_kind == kind and involved_name == name:
        return True
    if involved_kind == "Pod":
        return involved_name in pods
    return kind == "Deployment" and involved_kind == "ReplicaSet" and involved_name.rsplit("-", 1)[0] == name


def timeline(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """The merged events, oldest first, as aligned rows under a header."""
    rows = [["TIME", "CLUSTER", "TYPE", "REASON", "OBJECT", "MESSAGE"]]
    for cluster, event in sorted(events, key=lambda pair: event_time(pair[1])):
        involved = event.get("involvedObject") or {}
        rows.append([
            event_time(event) or "<unknown>", cluster, str(event.get("type", "")), str(event.get("reason", "")),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            " ".join(str(event.get("message", "")).split()),
        ])
    if len(rows) == 1:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["   ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip() for row in rows]


async def collect(
    hub: HubClient, namespace: str, kind: str, name: str, candidates: list[str]
) -> tuple[list[tuple[str, Mapping[str, Any]]], dict[str, str]]:
    """The hub's and the members' events about workload ``namespace/kind/name`` (with the
    cluster each comes from), and the clusters that could not be asked, with why."""
    events_path = f"/api/v1/namespaces/{namespace}/events"
    merged: list[tuple[str, Mapping[str, Any]]] = [
        (HUB, event) for event in (await hub.read_list(events_path)).get("items") or []
        if about(event, kind, name, set())
    ]
    found, failed = await workload_pods(hub, namespace, kind, name, candidates)
    for cluster, pods in found.items():
        try:
            listing = await hub.read_list(proxy_path(cluster, events_path))
        except HubError as exc:
            failed[cluster] = str(exc)
            continue
        names = {pod["metadata"]["name"] for pod in pods}
        merged.extend((cluster, event) for event in listing.get("items") or [] if about(event, kind, name, names))
    return merged, failed


async def events(args: argparse.Namespace) -> int:
    hub = HubClient.from_kubeconfig(args.kubeconfig)
    hub.chunk_size = args.chunk_size
    kind_word, _, name = args.target.partition("/")
    if not name:
        raise HubError("give the workload as KIND/NAME, e.g. deployment/llm-serving")
    kind = (await resolve(hub, None, kind_word)).kind
    namespace = args.namespace
    merged, failed = await collect(hub, namespace, kind, name, await clusters(hub, args.clusters))
    print_unreached(failed)
    lines = timeline(merged)
    for line in lines:
        print(line)
    if not lines:
        print(f"No events found for {args.target} in namespace {namespace}.", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    return run_reporting(events(args), (HubError,))
