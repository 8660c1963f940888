"""Pod -> workload owner resolution for pods an agent reported without an owner.

Why this module exists: the waste report groups GPU time by hub workload, but an agent may
report a device's pod without its owner (the exporter named the pod before the agent's cache
saw it, or after it was gone). Such a pod is put under the workload propagated to its cluster
whose pods are named like it (``infer-56fd5b7d5-9rdjm`` under Deployment ``infer``, following
each kind's pod naming), so a report by workload shows hub workloads, not raw pods.

In: the hub's ``Work`` objects (plain dicts; :func:`propagated_workloads` reads which workloads
each member carries) and a :class:`~controlplane.reports.fleet.ClusterSample`. Out: the same
sample with owners filled in where a name matches (:func:`with_owners_by_name`). No I/O
happens here.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.untyped import as_list, as_mapping
from controlplane.reports.fleet import DeviceSample, NodeSample, PodRef

#: How each kind's controller names its pods after ``<workload>-`` (kube's generateName rules:
#: a Deployment's ReplicaSet adds its pod-template-hash, a Job's pods a random suffix...).
_POD_NAME_AFTER_WORKLOAD: Mapping[str, re.Pattern[str]] = {
    "Deployment": re.compile(r"[a-z0-9]+-[a-z0-9]{5}"),
    "StatefulSet": re.compile(r"\d+"),
    "Job": re.compile(r"(\d+-)?[a-z0-9]{5}"),
    "PyTorchJob": re.compile(r"(master|worker)-\d+"),
    "MPIJob": re.compile(r"launcher(-[a-z0-9]{5})?|worker-\d+"),
    "RayCluster": re.compile(r"[a-z0-9-]+"),
    "RayJob": re.compile(r"[a-z0-9-]+"),
}


def propagated_workloads(works: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, str, str]]]:
    """Per member cluster, the (namespace, kind, name) of the workloads its Works carry."""
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for work in works:
        namespace = str(as_mapping(work.get("metadata")).get("namespace") or "")
        if not namespace.startswith(c.EXECUTION_NAMESPACE_PREFIX):
            continue
        member = namespace.removeprefix(c.EXECUTION_NAMESPACE_PREFIX)
        for manifest in as_list(as_mapping(as_mapping(work.get("spec")).get("workload")).get("manifests")):
            kind = str(as_mapping(manifest).get("kind") or "")
            metadata = as_mapping(as_mapping(manifest).get("metadata"))
            if kind in _POD_NAME_AFTER_WORKLOAD and metadata.get("name"):
                out[member].append((str(metadata.get("namespace") or ""), kind, str(metadata["name"])))
    return out


def _owner_by_name(holder: PodRef, workloads: Sequence[tuple[str, str, str]]) -> PodRef:
    """A pod the agent reported without an owner (the exporter named it before the agent saw it,
    or after it was gone) under the propagated workload whose pods are named like it."""
    best: tuple[str, str] | None = None
    for namespace, kind, name in workloads:
        if namespace != holder.namespace or not holder.pod.startswith(f"{name}-"):
            continue
        if _POD_NAME_AFTER_WORKLOAD[kind].fullmatch(holder.pod[len(name) + 1 :]) is None:
            continue
        if best is None or len(name) > len(best[1]):
            best = (kind, name)
    return holder if best is None else replace(holder, kind=best[0], name=best[1])


def with_owners_by_name(nodes: tuple[NodeSample, ...], workloads: Sequence[tuple[str, str, str]]) -> tuple[NodeSample, ...]:
    """A cluster's ``nodes`` with each device held by an ownerless pod put under its workload by
    name; a node with no such device is kept as it is."""

    def ownerless(device: DeviceSample) -> bool:
        holder = device.allocated_to
        return holder is not None and not holder.kind and bool(holder.pod)

    def resolved(device: DeviceSample) -> DeviceSample:
        holder = device.allocated_to
        if holder is None or not ownerless(device):
            return device
        return replace(device, allocated_to=_owner_by_name(holder, workloads))

    if not workloads:
        return nodes
    return tuple(
        replace(node, devices=tuple(resolved(d) for d in node.devices))
        if any(ownerless(d) for d in node.devices)
        else node
        for node in nodes
    )
