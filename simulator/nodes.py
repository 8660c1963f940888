"""Turn a cluster profile into v1 Node objects and each node's device inventory.

The member agent and the hub read simulated nodes exactly as they read real ones, so a
node carries what GPU Feature Discovery and the NVIDIA device plugin would put there:
``nvidia.com/gpu.product/memory/count/family/replicas``, ``gpu.sharing-strategy``,
``mig.capable/strategy/config``, ``mig-<profile>.count/memory/multiprocessors/slices.*``,
and in ``status.allocatable`` ``nvidia.com/gpu`` (0 on MIG cards under the mixed
strategy; MIG slices under the single strategy; N x GPUs when time-sliced), one
``nvidia.com/mig-<profile>`` per profile under the mixed strategy, or
``nvidia.com/gpu.shared`` for renamed shares.

In: a :class:`~simulator.profile.ClusterProfile`.
Out: ``build_nodes(profile) -> list[dict]`` (Node manifests, names
``<cluster>-<group>-<i>`` or the CSV's node names) and ``build_inventory(profile) ->
dict[node name, NodeInventory]`` (GPU UUIDs, PCI ids, MIG instances, allocatable
devices). Both are pure and deterministic: UUIDs derive from cluster and node names.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from controlplane.apis import constants as c
from controlplane.apis import spot
from controlplane.apis.gpus import MIG_INVALID_SUFFIX
from simulator import gpus
from simulator.devices import Device, Gpu, MigInstance, NodeInventory
from simulator.profile import (
    ALIBABA_MODELS,
    ClusterProfile,
    CsvNode,
    GpuSpec,
    MigStrategy,
    NodeGroup,
    SharingStrategy,
)

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
#: The node group a simulated node was built from.
LABEL_NODE_GROUP = "sim.gpufed.io/node-group"

_NAMESPACE = uuid.UUID("6f1f7d2e-3c55-4b8e-9a43-8d0c2b1e5a77")
# GPU instance ids NVML gives profiles on an A100/H100 (the first instance of each size).
_GI_BASE = {7: 0, 4: 1, 3: 1, 2: 3, 1: 7}


@dataclass(frozen=True, slots=True)
class _NodeSpec:
    name: str
    group: NodeGroup
    cpu_milli: int
    memory_bytes: int
    gpu: GpuSpec | None


def _expand(profile: ClusterProfile) -> Iterator[_NodeSpec]:
    for group in profile.nodeGroups:
        if group.fromCsv is not None:
            for row in group.csvNodes:
                yield _NodeSpec(row.name, group, row.cpuMilli, row.memoryMiB * 2**20, _csv_gpu(row))
            continue
        assert group.cpu is not None and group.memoryGiB is not None
        for index in range(group.count):
            yield _NodeSpec(
                f"{profile.name}-{group.name}-{index}",
                group,
                round(group.cpu * 1000),
                round(group.memoryGiB * 2**30),
                group.gpu,
            )


def _csv_gpu(row: CsvNode) -> GpuSpec | None:
    if row.gpuCount == 0:
        return None
    product, memory, family = ALIBABA_MODELS[row.model]
    return GpuSpec(product=product, count=row.gpuCount, memoryMiB=memory, family=family)


def build_nodes(profile: ClusterProfile) -> list[dict[str, Any]]:
    """The cluster's v1 Node manifests, in profile order."""
    return [_node(profile, spec) for spec in _expand(profile)]


def build_inventory(profile: ClusterProfile) -> dict[str, NodeInventory]:
    """Each node's GPUs, MIG instances and allocatable devices."""
    return {spec.name: _inventory(profile, spec) for spec in _expand(profile)}


# ------------------------------------------------------------------------------ devices


def _uuid(prefix: str, *parts: object) -> str:
    return f"{prefix}-{uuid.uuid5(_NAMESPACE, '/'.join(str(p) for p in parts))}"


def _layout_instances(
    model: gpus.GpuModel, gpu_index: int, gpu_uuid: str, layout: list[str], node: str
) -> list[MigInstance]:
    """MIG instances in layout order, with GPU instance ids as NVML tends to number them."""
    used: set[int] = set()
    out = []
    for position, name in enumerate(layout):
        profile = model.mig_profiles[name]
        gi = _GI_BASE.get(profile.compute_slices, 1)
        while gi in used:
            gi += 1
        used.add(gi)
        out.append(
            MigInstance(
                gpu_index=gpu_index,
                gi_id=gi,
                ci_id=0,
                profile=name,
                uuid=_uuid("MIG", node, gpu_index, position, name),
                memory_mib=profile.memory_mib,
                compute_slices=profile.compute_slices,
            )
        )
    return out


def _inventory(profile: ClusterProfile, spec: _NodeSpec) -> NodeInventory:
    driver = profile.simulation.driverVersion
    gpu = spec.gpu
    if gpu is None:
        return NodeInventory(node=spec.name, gpus=(), mig_instances=(), devices={}, driver_version=driver)
    model = gpu.model()
    strategy = gpu.mig_strategy
    mig_on = strategy is not MigStrategy.NONE
    layout = gpu.mig.layout if gpu.mig is not None else []
    cards: list[Gpu] = []
    instances: list[MigInstance] = []
    devices: dict[str, list[Device]] = {}
    for index in range(gpu.count):
        gpu_uuid = _uuid("GPU", profile.name, spec.name, index)
        cards.append(
            Gpu(
                index=index,
                uuid=gpu_uuid,
                pci_bus_id=f"00000000:{0x07 + index * 8:02X}:00.0",
                product=model.product,
                model_name=model.model_name,
                memory_mib=model.memory_mib,
                mig_enabled=mig_on,
            )
        )
        if mig_on:
            instances.extend(_layout_instances(model, index, gpu_uuid, layout, spec.name))
    if gpu.mig_invalid:
        pass  # GFD labels the node -MIG-INVALID and the device plugin advertises nothing usable
    elif strategy is MigStrategy.MIXED:
        for inst in instances:
            resource = model.mig_profiles[inst.profile].resource_name
            devices.setdefault(resource, []).append(
                Device(inst.uuid, resource, inst.gpu_index, inst.compute_slices / gpus.COMPUTE_SLICES, inst)
            )
    elif strategy is MigStrategy.SINGLE:
        for inst in instances:
            devices.setdefault(c.RESOURCE_GPU, []).append(
                Device(
                    inst.uuid, c.RESOURCE_GPU, inst.gpu_index, inst.compute_slices / gpus.COMPUTE_SLICES, inst
                )
            )
    elif gpu.sharing is not None:
        resource = c.RESOURCE_GPU_SHARED if gpu.sharing.renameByDefault else c.RESOURCE_GPU
        replicas = gpu.sharing.replicas
        # Replica-major order: consecutive pods land on different GPUs first.
        devices[resource] = [
            Device(f"{card.uuid}::{r}", resource, card.index, 1 / replicas, None, r)
            for r in range(replicas)
            for card in cards
        ]
    else:
        devices[c.RESOURCE_GPU] = [Device(card.uuid, c.RESOURCE_GPU, card.index, 1.0) for card in cards]
    return NodeInventory(
        node=spec.name,
        gpus=tuple(cards),
        mig_instances=tuple(instances),
        devices={r: tuple(ds) for r, ds in devices.items()},
        driver_version=driver,
    )


# ------------------------------------------------------------------------------ objects


def _gpu_labels(profile: ClusterProfile, gpu: GpuSpec, inventory: NodeInventory) -> dict[str, str]:
    model = gpu.model()
    strategy = gpu.mig_strategy
    sim = profile.simulation
    driver = sim.driverVersion.split(".")
    cuda = sim.cudaDriverVersion.split(".")
    labels = {
        "nvidia.com/gpu.present": "true",
        c.LABEL_GPU_PRODUCT: model.product,
        c.LABEL_GPU_MEMORY: str(model.memory_mib),
        c.LABEL_GPU_COUNT: str(gpu.count),
        c.LABEL_GPU_FAMILY: model.family,
        "nvidia.com/gpu.machine": "SIMULATED",
        "nvidia.com/gpu.compute.major": str(model.compute_major),
        "nvidia.com/gpu.compute.minor": str(model.compute_minor),
        "nvidia.com/cuda.driver-version.full": sim.driverVersion,
        "nvidia.com/cuda.driver-version.major": driver[0],
        "nvidia.com/cuda.driver-version.minor": driver[1] if len(driver) > 1 else "0",
        "nvidia.com/cuda.driver-version.revision": driver[2] if len(driver) > 2 else "0",
        "nvidia.com/cuda.driver.major": cuda[0],
        "nvidia.com/cuda.driver.minor": cuda[1] if len(cuda) > 1 else "0",
        "nvidia.com/cuda.runtime-version.full": sim.cudaDriverVersion,
        c.LABEL_MIG_CAPABLE: "true" if model.mig_capable else "false",
        c.LABEL_MIG_STRATEGY: strategy.value,
        c.LABEL_SHARING_STRATEGY: SharingStrategy.NONE.value,
    }
    if model.mig_capable:
        balanced = _balanced(model)
        labels[c.LABEL_MIG_CONFIG] = (gpu.mig or _NO_MIG).config_name(balanced)
    replicas = "1"
    if gpu.sharing is not None:
        labels[c.LABEL_SHARING_STRATEGY] = gpu.sharing.strategy.value
        replicas = str(gpu.sharing.replicas)
        if gpu.sharing.renameByDefault:
            labels["nvidia.com/gpu.shared.replicas"] = replicas
    if strategy is MigStrategy.MIXED:
        replicas = "0"
        for name, count in Counter(i.profile for i in inventory.mig_instances).items():
            mig = model.mig_profiles[name]
            prefix = "nvidia.com/mig-" + name.replace("+", ".")
            labels[f"{prefix}.count"] = str(count)
            labels[f"{prefix}.memory"] = str(mig.memory_mib)
            labels[f"{prefix}.multiprocessors"] = str(mig.multiprocessors)
            labels[f"{prefix}.slices.gi"] = str(mig.compute_slices)
            labels[f"{prefix}.slices.ci"] = str(mig.compute_slices)
            labels[f"{prefix}.product"] = f"{model.product}-MIG-{name}"
            labels[f"{prefix}.replicas"] = "1"
    elif strategy is MigStrategy.SINGLE:
        if gpu.mig_invalid:
            labels[c.LABEL_GPU_PRODUCT] = f"{model.product}{MIG_INVALID_SUFFIX}"
            labels[c.LABEL_GPU_COUNT] = "0"
            replicas = "0"
        else:
            name = inventory.mig_instances[0].profile
            mig = model.mig_profiles[name]
            labels[c.LABEL_GPU_PRODUCT] = f"{model.product}-MIG-{name}"
            labels[c.LABEL_GPU_COUNT] = str(len(inventory.mig_instances))
            labels[c.LABEL_GPU_MEMORY] = str(mig.memory_mib)
            labels["nvidia.com/gpu.multiprocessors"] = str(mig.multiprocessors)
            labels["nvidia.com/gpu.slices.gi"] = str(mig.compute_slices)
            labels["nvidia.com/gpu.slices.ci"] = str(mig.compute_slices)
    labels[c.LABEL_GPU_REPLICAS] = replicas
    return labels


class _NoMig:
    def config_name(self, balanced: list[str] | None) -> str:
        return "all-disabled"


_NO_MIG = _NoMig()


def _balanced(model: gpus.GpuModel) -> list[str] | None:
    """mig-parted's ``all-balanced`` for the model: 2 x 1g, 1 x 2g, 1 x 3g."""
    by_size: dict[int, str] = {}
    for profile in model.mig_profiles.values():
        if profile.media_extensions:
            continue
        if profile.compute_slices in (1, 2, 3) and profile.compute_slices not in by_size:
            by_size[profile.compute_slices] = profile.name
    if len(by_size) != 3:
        return None
    return [by_size[1], by_size[1], by_size[2], by_size[3]]


def _gpu_resources(gpu: GpuSpec, inventory: NodeInventory) -> dict[str, str]:
    resources = {name: str(len(devices)) for name, devices in inventory.devices.items()}
    if gpu.sharing is not None and gpu.sharing.renameByDefault:
        return resources
    resources.setdefault(c.RESOURCE_GPU, "0")
    return resources


def _node(profile: ClusterProfile, spec: _NodeSpec) -> dict[str, Any]:
    group = spec.group
    inventory = _inventory(profile, spec)
    labels: dict[str, str] = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        LABEL_HOSTNAME: spec.name,
        LABEL_INSTANCE_TYPE: group.instanceType or group.name,
        LABEL_NODE_GROUP: group.name,
    }
    if profile.region:
        labels[LABEL_REGION] = profile.region
    zone = group.zone or profile.zone
    if zone:
        labels[LABEL_ZONE] = zone
    if spec.gpu is not None:
        labels.update(_gpu_labels(profile, spec.gpu, inventory))
    if profile.group_is_spot(group) and not spot.is_spot(group.labels):
        key, value = spot.spot_label(profile.provider)
        labels[key] = value
    labels.update(group.labels)
    capacity: dict[str, str] = {
        "cpu": _cpu(spec.cpu_milli),
        "memory": f"{spec.memory_bytes // 1024}Ki",
        "pods": str(group.maxPods),
        "ephemeral-storage": "1879030784Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if spec.gpu is not None:
        capacity.update(_gpu_resources(spec.gpu, inventory))
    taints = [
        {"key": t.key, "value": t.value, "effect": t.effect.value} for t in [*profile.taints, *group.taints]
    ]
    for taint in taints:
        if not taint["value"]:
            del taint["value"]
    node_spec: dict[str, Any] = {"providerID": f"gpufed-sim://{profile.name}/{spec.name}"}
    if taints:
        node_spec["taints"] = taints
    if group.unschedulable:
        node_spec["unschedulable"] = True
    conditions = [
        _condition(
            "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
        ),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": node_spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": _address(profile.name, spec.name)},
                {"type": "Hostname", "address": spec.name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
                "kernelVersion": "5.15.0-105-generic",
                "containerRuntimeVersion": "containerd://1.7.16",
                "kubeletVersion": profile.simulation.kubernetesVersion,
                "kubeProxyVersion": profile.simulation.kubernetesVersion,
                "machineID": uuid.uuid5(_NAMESPACE, f"machine/{profile.name}/{spec.name}").hex,
                "systemUUID": str(uuid.uuid5(_NAMESPACE, f"system/{profile.name}/{spec.name}")),
                "bootID": str(uuid.uuid5(_NAMESPACE, f"boot/{profile.name}/{spec.name}")),
            },
        },
    }


def _cpu(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _address(cluster: str, node: str) -> str:
    digest = uuid.uuid5(_NAMESPACE, f"ip/{cluster}/{node}").bytes
    return f"10.{digest[0]}.{digest[1]}.{max(1, digest[2] % 255)}"


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    # lastHeartbeatTime/lastTransitionTime are stamped by the kubelet loop when it writes the node.
    return {"type": kind, "status": status, "reason": reason, "message": message}
