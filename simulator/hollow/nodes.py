"""A hollow member's nodes as compact records: one template Node per cluster, names by index.

Every node of a hollow cluster has the same shape, so the cluster keeps one Node manifest
(built by :func:`simulator.nodes.build_nodes`, the simulated member's own node builder, for a
one-node copy of the profile) and renders node ``i`` from it on demand by putting the node's
name in place of the template's. The device allocator (:class:`ClusterState`) gets one
:class:`NodeState` per node, all sharing the template's :class:`NodeInventory`.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from simulator.nodes import build_inventory, build_nodes
from simulator.profile import ClusterProfile, GpuSpec, NodeGroup
from simulator.scheduling.cluster_state import ClusterState
from simulator.scheduling.model import NodeState
from simulator.scheduling.reading import node_state

GROUP = "gpu"


def hollow_profile(
    name: str, *, nodes: int, gpus_per_node: int, product: str, cpu: float = 96, memory_gib: float = 1024,
    provider: str = "onprem", tier: int | None = None, pricing: dict[str, float] | None = None,
) -> ClusterProfile:
    """The profile of a hollow cluster: ``nodes`` nodes of ``gpus_per_node`` ``product`` GPUs."""
    return ClusterProfile(
        name=name, provider=provider, tier=tier, pricing=pricing or {},
        nodeGroups=[NodeGroup(name=GROUP, count=nodes, cpu=cpu, memoryGiB=memory_gib,
                              gpu=GpuSpec(product=product, count=gpus_per_node))],
    )


class HollowNodes:
    """The nodes of one hollow cluster: count, template, and rendering by index."""

    def __init__(self, profile: ClusterProfile) -> None:
        group = profile.nodeGroups[0]
        self.count = group.count
        self.prefix = f"{profile.name}-{group.name}-"
        one = profile.model_copy(update={"nodeGroups": [group.model_copy(update={"count": 1})]})
        template = build_nodes(one)[0]
        self._template_name = str(template["metadata"]["name"])
        self._template = orjson.dumps(template).decode()
        self.inventory = build_inventory(one)[self._template_name]

    def name(self, index: int) -> str:
        return f"{self.prefix}{index}"

    def index(self, name: str) -> int | None:
        if not name.startswith(self.prefix):
            return None
        rest = name[len(self.prefix):]
        if not rest.isdigit() or (len(rest) > 1 and rest[0] == "0"):
            return None
        index = int(rest)
        return index if index < self.count else None

    def manifest(self, index: int, *, resource_version: str) -> dict[str, Any]:
        """Node ``index`` as a v1 Node."""
        node: dict[str, Any] = orjson.loads(self._template.replace(self._template_name, self.name(index)))
        node["metadata"]["resourceVersion"] = resource_version
        return node

    def node_state(self, index: int, template: NodeState) -> NodeState:
        """Node ``index`` as the allocator reads it (what :func:`node_state` reads from its
        manifest): the template's state under the node's name, sharing its unchanging parts
        (allocatable, taints, GPU units, label keys and values) with every other node."""
        name = self.name(index)
        old = self._template_name
        labels = {key: value.replace(old, name) if old in value else value for key, value in template.labels.items()}
        return dataclasses.replace(
            template, name=name, labels=labels, requested={},
            free_devices={resource: list(devices) for resource, devices in template.free_devices.items()},
        )

    def fill(self, state: ClusterState) -> None:
        """Give the allocator every node (sharing the template's device inventory and its
        unchanging parts: a node costs its name, its labels dict and its free-device lists)."""
        template = node_state(orjson.loads(self._template), self.inventory)
        state.add_node_states(self.node_state(index, template) for index in range(self.count))
