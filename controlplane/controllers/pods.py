"""What a member's capacity report says about the pods of each workload.

The agent's report (``Cluster.status.utilization``, see ``member_agent.capacity``) counts the
pods bound on nodes it has GPU metrics for that request a GPU, per namespace and owning
workload (a ReplicaSet's pods under their Deployment): the aggregated form
(:func:`controlplane.reports.aggregated.pods_by_owner`) or, from an older agent, per node
(:func:`controlplane.apis.utilization.expand_utilization`). The scheduler
controller counts them per workload to settle its reservations exactly: a reservation stays
until a report shows the binding's pods bound, however late the member gets to them. A report
that lists a workload's pods unschedulable (``status.unschedulableWorkloads``) was taken after
they became so. In:
the Cluster object as stored. Out: pod counts per :data:`OwnerKey`, or None when the report
lists no node (no per-pod information at all); and, for the FederatedHPA controller, one
workload's pods with the GPU utilization the report measured for each and the labels it
reported for them. Pure; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.utilization import expand_utilization
from controlplane.apis.views import ClusterObjectView
from controlplane.reports.aggregated import (
    is_aggregated,
    mean_utilization_by_owner,
    node_count,
    pods_by_owner,
)

OwnerKey = tuple[str, str, str]
"""(namespace, kind, name) of the workload that owns pods in the member."""

POD_OWNER_KINDS = frozenset({"Deployment", "StatefulSet", "Job", *TRAINING_KINDS, "RayCluster"})
"""Kinds whose member pods name the workload itself as their owner (a Deployment through its
ReplicaSet). Other kinds' pods hang under objects of other names (a RayJob's under its
RayCluster), so the report cannot say how many of theirs are bound."""


def bound_pods_by_owner(cluster: Mapping[str, Any]) -> Counter[OwnerKey] | None:
    """GPU pods bound in the member per owning workload, as the cluster's last report lists them."""
    utilization = ClusterObjectView(cluster).status.get("utilization")
    if is_aggregated(utilization):
        return pods_by_owner(utilization) if node_count(utilization) else None
    nodes = expand_utilization(utilization)
    if not nodes:
        return None
    counts: Counter[OwnerKey] = Counter()
    for node in nodes:
        for pod in node.get("pods") or ():
            owner = (pod or {}).get("owner") or {}
            if owner.get("kind") and owner.get("name"):
                counts[(str(pod.get("namespace") or ""), str(owner["kind"]), str(owner["name"]))] += 1
    return counts


#: A workload's GPU pods in one member, the utilization percent of those measured, and the labels
#: of those the report gives labels for (an older agent's, or a large member's, gives none).
PodUtilization = tuple[list[str], dict[str, float], dict[str, dict[str, str]]]


def gpu_utilization_by_owner(cluster: Mapping[str, Any]) -> dict[OwnerKey, PodUtilization]:
    """Per owning workload, the GPU pods bound in the member and the utilization percent of those
    the last report measured (the mean over the devices each holds). A report too large to list
    devices (an aggregated one without ``perDevice``) gives each pod its workload's mean."""
    utilization = ClusterObjectView(cluster).status.get("utilization")
    nodes = expand_utilization(utilization)
    out: dict[OwnerKey, PodUtilization] = {}
    if not nodes and is_aggregated(utilization):
        means = mean_utilization_by_owner(utilization)
        for owner, count in pods_by_owner(utilization).items():
            names = [f"{owner[1]}/{owner[2]}#{index}" for index in range(count)]
            mean = means.get(owner)
            out[owner] = (names, {} if mean is None else dict.fromkeys(names, mean), {})
        return out
    measured: dict[tuple[str, str], list[float]] = {}
    owners: dict[tuple[str, str], OwnerKey] = {}
    labelled: dict[tuple[str, str], dict[str, str]] = {}
    for node in nodes:
        for pod in node.get("pods") or ():
            held_by = (pod or {}).get("owner") or {}
            if held_by.get("kind") and held_by.get("name"):
                namespace = str(pod.get("namespace") or "")
                key = (namespace, str(pod.get("pod")))
                owners[key] = (namespace, str(held_by["kind"]), str(held_by["name"]))
                if isinstance(labels := pod.get("labels"), Mapping):
                    labelled[key] = {str(k): str(v) for k, v in labels.items()}
        for device in node.get("devices") or ():
            value = device.get("utilization")
            if device.get("pod") and isinstance(value, int | float) and not isinstance(value, bool):
                key = (str(device.get("namespace") or ""), str(device["pod"]))
                measured.setdefault(key, []).append(float(value) * 100)
    for (namespace, pod), owner in owners.items():
        names, samples, pod_labels = out.setdefault(owner, ([], {}, {}))
        names.append(pod)
        if (namespace, pod) in labelled:
            pod_labels[pod] = labelled[(namespace, pod)]
        values = measured.get((namespace, pod))
        if values:
            samples[pod] = sum(values) / len(values)
    return out


def unschedulable_pods_by_owner(cluster: Mapping[str, Any]) -> Counter[OwnerKey]:
    """Pods the member's scheduler could not place per owning workload, as the cluster's last
    report lists them (``status.unschedulableWorkloads``; none from an older agent)."""
    counts: Counter[OwnerKey] = Counter()
    for entry in ClusterObjectView(cluster).status.get("unschedulableWorkloads") or ():
        if isinstance(entry, Mapping) and entry.get("kind") and entry.get("name"):
            key = (str(entry.get("namespace") or ""), str(entry["kind"]), str(entry["name"]))
            counts[key] += int(entry.get("pods") or 0)
    return counts


def owner_key(resource: Mapping[str, Any]) -> OwnerKey | None:
    """The owner key of a binding's ``spec.resource``, or None when its pods cannot be counted."""
    kind = str(resource.get("kind") or "")
    if kind not in POD_OWNER_KINDS or not resource.get("name"):
        return None
    return (str(resource.get("namespace") or ""), kind, str(resource["name"]))
