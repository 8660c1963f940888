"""One node of a member's utilization report as the waste accounting's
:class:`~controlplane.reports.fleet.NodeSample`.

Why this module exists: the hub's fleet snapshot (:mod:`controlplane.reports.snapshot`) and the
agent's aggregated report (:mod:`controlplane.reports.agentreport`) must read a node's DCGM
devices the same way, and the agent must not load the hub's demand and scheduling code to do
it, so the rules live here alone.

* A device is one DCGM series: a whole GPU (share 1), a MIG instance (share = compute
  slices / 7, so ``3g.40gb`` is 3/7), or, when several pods' series share one GPU (time
  slicing), one share per pod of 1/N of the GPU, where N is the node's ``sharedReplicas`` when
  the report carries it, else the number of pods seen; the shares nobody holds are added free.
* A MIG-enabled GPU whose instances use fewer than 7 compute slices gets one extra device,
  profile :data:`~controlplane.reports.fleet.UNPARTITIONED`, holding the rest: no resource
  advertises it, so it can never be allocated (it is stranded capacity), and every GPU's
  shares still add up to 1.
* A device is allocated to the pod named by its series' ``pod``/``namespace`` labels. When the
  exporter has no Kubernetes mapping, the node's ``pods`` list (per-pod GPU requests) assigns
  pods to the node's unlabelled free devices of the requested resource, in device order.
* A node's product, readiness, cordon, labels and time-slicing replicas come from the optional
  ``product``/``ready``/``schedulable``/``labels``/``sharedReplicas`` fields of its
  utilization entry. Without ``product`` it is inferred from ``gpuSummary``: the cluster's only
  GPU product, else the only product offering the node's MIG profiles, else ``unknown``.

No I/O happens here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.untyped import as_int, as_list, as_mapping
from controlplane.apis.utilization import UNKNOWN_PRODUCT, device_order
from controlplane.reports.fleet import (
    MIG_COMPUTE_SLICES,
    SINGLE_STRATEGY_MARKER,
    UNPARTITIONED,
    DeviceSample,
    NodeSample,
    PodRef,
    mig_resource,
    mig_share,
    profile_of_resource,
)
from controlplane.reports.unreported import SummaryEntry


def _utilization(entry: Mapping[str, Any]) -> float | None:
    value = entry.get("utilization")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return min(max(float(value), 0.0), 1.0)


def _infer_product(devices: Sequence[Mapping[str, Any]], summary: Sequence[SummaryEntry]) -> str:
    products = sorted({e.product for e in summary if e.product != UNKNOWN_PRODUCT})
    if len(products) == 1:
        return products[0]
    profiles = {str(d["profile"]) for d in devices if d.get("profile")}
    if profiles:
        candidates = sorted(
            {
                e.product
                for e in summary
                if e.product != UNKNOWN_PRODUCT and profile_of_resource(e.resource) in profiles
            }
        )
        if len(candidates) == 1:
            return candidates[0]
    return UNKNOWN_PRODUCT


def _pod_ref(namespace: str, pod: str, pods: Mapping[tuple[str, str], Mapping[str, Any]]) -> PodRef:
    owner = as_mapping(as_mapping(pods.get((namespace, pod))).get("owner"))
    kind, name = owner.get("kind"), owner.get("name")
    return PodRef(namespace, pod, str(kind) if kind else None, str(name) if name else None)


def _node_devices(
    entries: Sequence[Mapping[str, Any]],
    *,
    product: str,
    shared_replicas: int,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
) -> list[DeviceSample]:
    whole: dict[str, list[Mapping[str, Any]]] = {}
    mig: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        gpu = str(entry.get("gpu", ""))
        target = mig if entry.get("profile") or entry.get("instance") is not None else whole
        target.setdefault(gpu, []).append(entry)
    single_strategy = SINGLE_STRATEGY_MARKER in product
    shares_renamed = any(c.RESOURCE_GPU_SHARED in as_mapping(p.get("resources")) for p in pods.values())

    def holder(entry: Mapping[str, Any]) -> PodRef | None:
        pod, namespace = entry.get("pod"), entry.get("namespace")
        return _pod_ref(str(namespace or ""), str(pod), pods) if pod else None

    devices: list[DeviceSample] = []
    for gpu in sorted(set(whole) | set(mig), key=device_order):
        if gpu in mig:
            used = 0.0
            instances = sorted(mig[gpu], key=lambda e: device_order(str(e.get("instance", ""))))
            for entry in instances:
                profile = str(entry.get("profile") or "")
                share = mig_share(profile) if profile else 1 / MIG_COMPUTE_SLICES
                used += share
                devices.append(
                    DeviceSample(
                        gpu=gpu,
                        uuid=str(entry.get("uuid", "")),
                        profile=profile or None,
                        share=share,
                        allocated_to=holder(entry),
                        utilization=_utilization(entry),
                        resource=c.RESOURCE_GPU if single_strategy else mig_resource(profile),
                    )
                )
            residual = 1.0 - used
            if residual > 1e-9:
                devices.append(
                    DeviceSample(
                        gpu, str(instances[0].get("uuid", "")), UNPARTITIONED, residual, resource=None
                    )
                )
            continue
        series = whole[gpu]
        users = [e for e in series if e.get("pod")]
        uuid = str(series[0].get("uuid", ""))
        if len(users) <= 1 and shared_replicas <= 1:
            entry = users[0] if users else series[0]
            devices.append(DeviceSample(gpu, uuid, None, 1.0, holder(entry), _utilization(entry)))
            continue
        count = max(shared_replicas, len(users))
        resource = c.RESOURCE_GPU_SHARED if shares_renamed else c.RESOURCE_GPU
        # Each pod's series carries the whole GPU's utilization; every share reports it.
        devices.extend(
            DeviceSample(gpu, uuid, None, 1.0 / count, holder(e), _utilization(e), resource) for e in users
        )
        devices.extend(
            DeviceSample(gpu, uuid, None, 1.0 / count, resource=resource) for _ in range(count - len(users))
        )
    return _assign_unlabelled(devices, pods)


def _assign_unlabelled(
    devices: list[DeviceSample], pods: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[DeviceSample]:
    """Give pods whose devices carry no pod label (exporter without Kubernetes mapping) free
    devices of the resource they request."""
    for (namespace, pod), entry in sorted(pods.items()):
        for resource, amount in sorted(as_mapping(entry.get("resources")).items()):
            if not is_gpu_resource(str(resource)):
                continue
            held = sum(
                1
                for d in devices
                if d.resource == resource
                and d.allocated_to
                and (d.allocated_to.namespace, d.allocated_to.pod) == (namespace, pod)
            )
            missing = as_int(amount) - held
            for index, device in enumerate(devices):
                if missing <= 0:
                    break
                if device.resource == resource and device.allocated_to is None:
                    devices[index] = replace(device, allocated_to=_pod_ref(namespace, pod, pods))
                    missing -= 1
    return devices


def node_sample(raw: Mapping[str, Any], summary: Sequence[SummaryEntry] = ()) -> NodeSample:
    """One per-node utilization entry (:func:`~controlplane.apis.utilization.expand_utilization`)
    as the accounting sees it (the agent builds its aggregated report from these too)."""
    name = str(raw.get("name") or "")
    entries = [as_mapping(d) for d in as_list(raw.get("devices"))]
    product = str(raw.get("product") or _infer_product(entries, summary))
    pods: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pod in as_list(raw.get("pods")):
        pod = as_mapping(pod)
        pods[(str(pod.get("namespace") or ""), str(pod.get("pod") or ""))] = pod
    devices = _node_devices(
        entries, product=product, shared_replicas=max(as_int(raw.get("sharedReplicas"), 1), 1), pods=pods
    )
    return NodeSample(
        name=name,
        product=product,
        devices=tuple(devices),
        ready=bool(raw.get("ready", True)),
        schedulable=bool(raw.get("schedulable", True)),
        labels=MappingProxyType({str(k): str(v) for k, v in as_mapping(raw.get("labels")).items()}),
    )
