"""The waste classification's demand matching as it was before it worked shape by shape: node
by node, every free node of the fleet sorted again for every demand. Kept as the reference the
shape-grouped matching must agree with (``test_classify_matching.py``); rules 1-3 and the
demand order are the module's own (``_base_states``, ``_gpu_demands``), which the grouping did
not change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from controlplane.reports.classify import (
    DEFAULT_THRESHOLD,
    DeviceState,
    UnmetDemand,
    WasteState,
    _base_states,
    _gpu_demands,
)
from controlplane.reports.fleet import ClusterSample, FleetSample, NodeSample, PendingDemand


@dataclass(slots=True)
class _FreeNode:
    cluster: ClusterSample
    node: NodeSample
    free: dict[str, list[int]]
    all_free: list[int]

    def replicas_fitting(self, requests: dict[str, int]) -> int:
        return min(len(self.free.get(resource, ())) // amount for resource, amount in requests.items())

    def order(self) -> tuple[int, float, int, str, str]:
        return (
            self.cluster.tier,
            self.cluster.price(self.node.product),
            sum(len(v) for v in self.free.values()),
            self.cluster.name,
            self.node.name,
        )


def _free_nodes(cluster: ClusterSample, states: Sequence[DeviceState], offset: int) -> list[_FreeNode]:
    out: list[_FreeNode] = []
    index = offset
    for node in cluster.nodes:
        free_node = _FreeNode(cluster, node, {}, [])
        for device in node.devices:
            if states[index].state is WasteState.FREE_SPARE:
                free_node.all_free.append(index)
                if device.resource is not None:
                    free_node.free.setdefault(device.resource, []).append(index)
            index += 1
        if free_node.all_free:
            out.append(free_node)
    return out


def reference_classification(
    sample: FleetSample, *, threshold: float = DEFAULT_THRESHOLD, cap_needed_by_demand: bool = True
) -> tuple[list[DeviceState], list[UnmetDemand]]:
    """Every device's state and the unmet demand, node by node."""
    demands = _gpu_demands(sample.pending)
    states: list[DeviceState] = []
    free_nodes: list[_FreeNode] = []
    for cluster in sample.clusters:
        offset = len(states)
        states.extend(_base_states(cluster, threshold))
        free_nodes.extend(_free_nodes(cluster, states, offset))
    unmet: list[UnmetDemand] = []
    if cap_needed_by_demand:
        for demand in demands:
            remaining = _match(demand, free_nodes, states)
            if remaining:
                unmet.append(UnmetDemand(demand, remaining))
    else:
        for demand in demands:
            fits_anywhere = False
            for free_node in free_nodes:
                if not demand.allows(free_node.cluster.name, free_node.node.product):
                    continue
                requests = demand.gpu_requests
                if free_node.replicas_fitting(requests) < 1:
                    continue
                fits_anywhere = True
                for resource in requests:
                    for index in free_node.free[resource]:
                        _mark_needed(states, index, demand)
            if not fits_anywhere:
                unmet.append(UnmetDemand(demand, demand.replicas))
    _mark_fragmented(states, free_nodes, [u.demand for u in unmet] if cap_needed_by_demand else demands)
    return states, unmet


def _mark_needed(states: list[DeviceState], index: int, demand: PendingDemand) -> None:
    old = states[index]
    if old.state == WasteState.FREE_SPARE:
        states[index] = replace(old, state=WasteState.FREE_NEEDED, demand=(demand.namespace, demand.workload))


def _match(demand: PendingDemand, free_nodes: Sequence[_FreeNode], states: list[DeviceState]) -> int:
    requests = demand.gpu_requests
    remaining = demand.replicas
    candidates = sorted(
        (n for n in free_nodes if demand.allows(n.cluster.name, n.node.product)),
        key=_FreeNode.order,
    )
    for free_node in candidates:
        if remaining == 0:
            break
        take = min(free_node.replicas_fitting(requests), remaining)
        if take <= 0:
            continue
        for resource, amount in requests.items():
            claimed = free_node.free[resource][: take * amount]
            del free_node.free[resource][: take * amount]
            for index in claimed:
                _mark_needed(states, index, demand)
        remaining -= take
    return remaining


def _mark_fragmented(
    states: list[DeviceState], free_nodes: Sequence[_FreeNode], waiting: Sequence[PendingDemand]
) -> None:
    if not waiting:
        return
    for free_node in free_nodes:
        if not any(d.allows(free_node.cluster.name, free_node.node.product) for d in waiting):
            continue
        for index in free_node.all_free:
            if states[index].state == WasteState.FREE_SPARE:
                states[index] = replace(states[index], state=WasteState.FREE_FRAGMENTED)
