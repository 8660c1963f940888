"""Pod -> workload owner resolution for pods an agent reported without an owner.

Why this module exists: the waste report groups GPU time by hub workload, but an agent may
report a device's pod without its owner (the exporter named the pod before the agent's cache
saw it, or after it was gone). Such a pod is put under the workload propagated to its cluster
whose pods are named like it (``infer-56fd5b7d5-9rdjm`` under Deployment ``infer``, following
each kind's pod naming), so a report by workload shows hub workloads, not raw pods. A pod no
workload of its cluster matches (its Work is gone, the pod still terminating) is matched against
the workloads of its namespace propagated anywhere (:func:`ownerless_namespaces` names which
namespaces that concerns, so a cached cluster is matched again only when they change).

In: the hub's ``Work`` objects (plain dicts; :func:`~controlplane.apis.podview.propagated_workloads` reads which
workloads each member carries) and a :class:`~controlplane.reports.fleet.ClusterSample`. Out: the same
sample with owners filled in where a name matches (:func:`with_owners_by_name`). No I/O
happens here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controlplane.apis.podview import POD_NAME_AFTER_WORKLOAD
from controlplane.reports.fleet import DeviceSample, NodeSample, PodRef


def _owner_by_name(holder: PodRef, workloads: Sequence[tuple[str, str, str]]) -> PodRef:
    """A pod the agent reported without an owner (the exporter named it before the agent saw it,
    or after it was gone) under the propagated workload whose pods are named like it."""
    best: tuple[str, str] | None = None
    for namespace, kind, name in workloads:
        if namespace != holder.namespace or not holder.pod.startswith(f"{name}-"):
            continue
        if POD_NAME_AFTER_WORKLOAD[kind].fullmatch(holder.pod[len(name) + 1 :]) is None:
            continue
        if best is None or len(name) > len(best[1]):
            best = (kind, name)
    return holder if best is None else replace(holder, kind=best[0], name=best[1])


def _ownerless(device: DeviceSample) -> bool:
    holder = device.allocated_to
    return holder is not None and not holder.kind and bool(holder.pod)


def ownerless_namespaces(nodes: tuple[NodeSample, ...]) -> frozenset[str]:
    """The namespaces of the pods in ``nodes`` that hold a device and have no owner (yet)."""
    return frozenset(
        d.allocated_to.namespace
        for n in nodes
        for d in n.devices
        if d.allocated_to is not None and _ownerless(d)
    )


def with_owners_by_name(nodes: tuple[NodeSample, ...], workloads: Sequence[tuple[str, str, str]]) -> tuple[NodeSample, ...]:
    """A cluster's ``nodes`` with each device held by an ownerless pod put under its workload by
    name; a node with no such device is kept as it is."""

    def resolved(device: DeviceSample) -> DeviceSample:
        holder = device.allocated_to
        if holder is None or not _ownerless(device):
            return device
        return replace(device, allocated_to=_owner_by_name(holder, workloads))

    if not workloads:
        return nodes
    return tuple(
        replace(node, devices=tuple(resolved(d) for d in node.devices))
        if any(_ownerless(d) for d in node.devices)
        else node
        for node in nodes
    )
