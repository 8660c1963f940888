"""Synthetic nodes for the GPUs a cluster counts but no utilization entry showed.

Why this module exists: the fleet's totals must reconcile with its GPU count even when a node
has no DCGM exporter or is not Ready, so the GPUs ``status.gpuSummary`` counts beyond what the
utilization entries cover are added on synthetic nodes named ``(unreported…)``:

* capacity minus allocatable is unavailable (a node ``(unreported, not ready) <product>``);
* allocated (minus what DCGM showed) is held by an unknown pod (utilization unknown);
* the rest is free and laid out on nodes per the remaining ``status.nodeShapes`` (one device
  per node when no shape is left, so a multi-GPU replica is never assumed to fit across
  nodes).

In: the Cluster status's ``gpuSummary`` (:func:`gpu_summary`), the nodes built from the
utilization report and the ``nodeShapes``. Out: the extra
:class:`~controlplane.reports.fleet.NodeSample` values (:func:`unreported_nodes`). No I/O
happens here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.untyped import as_int, as_list, as_mapping
from controlplane.apis.utilization import UNKNOWN_PRODUCT
from controlplane.reports.fleet import DeviceSample, NodeSample, PodRef, mig_share, profile_of_resource

UNREPORTED_NODE = "(unreported)"
UNREPORTED_UNAVAILABLE_NODE = "(unreported, not ready)"


@dataclass(slots=True)
class SummaryEntry:
    """One ``status.gpuSummary`` entry: a GPU resource of one product and its counts."""

    resource: str
    product: str
    replicas: int
    capacity: int
    allocatable: int
    allocated: int

    @property
    def unit(self) -> float:
        """GPU share of one unit of this entry's resource."""
        profile = profile_of_resource(self.resource)
        if profile is not None:
            return mig_share(profile)
        return 1.0 / max(self.replicas, 1)


def gpu_summary(status: Mapping[str, Any]) -> list[SummaryEntry]:
    """The GPU entries of a Cluster status's ``gpuSummary``, unshared capacity first."""
    out = []
    for raw in as_list(status.get("gpuSummary")):
        entry = as_mapping(raw)
        resource = str(entry.get("resource") or "")
        if not is_gpu_resource(resource):
            continue
        out.append(
            SummaryEntry(
                resource=resource,
                product=str(entry.get("product") or UNKNOWN_PRODUCT),
                replicas=max(as_int(entry.get("sharedReplicas"), 1), 1),
                capacity=max(as_int(entry.get("capacity")), 0),
                allocatable=max(as_int(entry.get("allocatable")), 0),
                allocated=max(as_int(entry.get("allocated")), 0),
            )
        )
    # Unshared capacity first, so DCGM-reported whole GPUs cover it before shared entries.
    out.sort(key=lambda e: (e.product, e.resource, e.replicas))
    return out


def _free_vector(node: NodeSample) -> dict[str, int]:
    free: Counter[str] = Counter(
        d.resource for d in node.devices if d.allocated_to is None and d.resource is not None
    )
    return dict(free)


def unreported_nodes(
    summary: Sequence[SummaryEntry],
    reported: Sequence[NodeSample],
    shapes: Sequence[Mapping[str, Any]],
) -> list[NodeSample]:
    """Synthetic nodes for the GPUs ``gpuSummary`` counts but no utilization entry showed."""
    pool_total: defaultdict[tuple[str, str], float] = defaultdict(float)
    pool_allocated: defaultdict[tuple[str, str], float] = defaultdict(float)
    pool_unavailable: defaultdict[tuple[str, str], float] = defaultdict(float)
    for node in reported:
        for device in node.devices:
            if device.resource is None:
                continue
            key = (node.product, device.resource)
            pool_total[key] += device.share
            if device.allocated_to is not None:
                pool_allocated[key] += device.share
            if not node.ready:
                pool_unavailable[key] += device.share

    unavailable: dict[str, list[DeviceSample]] = {}
    allocated: dict[str, list[DeviceSample]] = {}
    free: dict[tuple[str, str], list[DeviceSample]] = {}
    unknown_holder = PodRef(namespace="", pod="")
    for entry in summary:
        key, unit = (entry.product, entry.resource), entry.unit

        def take(
            pool: defaultdict[tuple[str, str], float],
            units: int,
            key: tuple[str, str] = key,
            unit: float = unit,
        ) -> int:
            covered = min(units, round(pool[key] / unit))
            pool[key] -= covered * unit
            return covered

        missing = entry.capacity - take(pool_total, entry.capacity)
        if missing <= 0:
            continue
        not_ready = max(entry.capacity - entry.allocatable, 0)
        missing_unavailable = min(not_ready - take(pool_unavailable, not_ready), missing)
        missing_allocated = min(
            entry.allocated - take(pool_allocated, entry.allocated), missing - missing_unavailable
        )
        missing_free = missing - missing_unavailable - missing_allocated
        profile = profile_of_resource(entry.resource)

        def devices(
            count: int,
            holder: PodRef | None,
            resource: str = entry.resource,
            profile: str | None = profile,
            share: float = unit,
        ) -> list[DeviceSample]:
            # Unreported devices of one kind cannot be told apart: one immutable sample stands
            # for each of them (a 5,000-node cluster without DCGM has 40,000).
            return [
                DeviceSample(gpu=resource, uuid="", profile=profile, share=share, allocated_to=holder, resource=resource)
            ] * count

        unavailable.setdefault(entry.product, []).extend(devices(missing_unavailable, None))
        allocated.setdefault(entry.product, []).extend(devices(missing_allocated, unknown_holder))
        free.setdefault(key, []).extend(devices(missing_free, None))

    nodes: list[NodeSample] = []
    for by_product, ready, name in (
        (unavailable, False, UNREPORTED_UNAVAILABLE_NODE),
        (allocated, True, UNREPORTED_NODE),
    ):
        for product, group in sorted(by_product.items()):
            if group:
                nodes.append(
                    NodeSample(name=f"{name} {product}", product=product, devices=tuple(group), ready=ready)
                )
    nodes.extend(_lay_out_free(free, reported, shapes))
    return nodes


def _lay_out_free(
    free: dict[tuple[str, str], list[DeviceSample]],
    reported: Sequence[NodeSample],
    shapes: Sequence[Mapping[str, Any]],
) -> list[NodeSample]:
    """Put unreported free devices on nodes as the cluster's remaining free shapes describe."""
    if not any(free.values()):
        return []
    remaining: list[tuple[str, dict[str, int], int]] = []
    for raw in shapes:
        shape = as_mapping(raw)
        product = str(
            as_mapping(shape.get("gpu")).get("product")
            or as_mapping(shape.get("labels")).get(c.LABEL_GPU_PRODUCT)
            or UNKNOWN_PRODUCT
        )
        vector = {
            str(k): as_int(v)
            for k, v in as_mapping(shape.get("free")).items()
            if is_gpu_resource(str(k)) and as_int(v) > 0
        }
        remaining.append((product, vector, as_int(shape.get("count"))))
    for node in reported:
        if not (node.ready and node.schedulable):
            continue
        vector = _free_vector(node)
        for index, (product, shape_free, count) in enumerate(remaining):
            if count > 0 and product == node.product and shape_free == vector:
                remaining[index] = (product, shape_free, count - 1)
                break
    nodes: list[NodeSample] = []
    for shape_index, (product, shape_free, count) in enumerate(remaining):
        for node_index in range(count):
            devices: list[DeviceSample] = []
            for resource, amount in sorted(shape_free.items()):
                pool = free.get((product, resource), [])
                devices.extend(pool[:amount])
                del pool[:amount]
            if devices:
                name = f"{UNREPORTED_NODE} {product} shape {shape_index}-{node_index}"
                nodes.append(NodeSample(name=name, product=product, devices=tuple(devices)))
    leftovers = [(key, d) for key, pool in sorted(free.items()) for d in pool]
    for index, ((product, _), device) in enumerate(leftovers):
        nodes.append(
            NodeSample(name=f"{UNREPORTED_NODE} {product} free {index}", product=product, devices=(device,))
        )
    return nodes
