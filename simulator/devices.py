"""The physical side of a simulated node: GPUs, MIG instances, and the devices pods get.

The Kubernetes Node object only carries counts (``nvidia.com/mig-1g.10gb: 14``). The
device plugin, the kubelet and dcgm-exporter know which concrete device a pod holds
(GPU 3, or GPU instance 9 on GPU 0, or replica 2 of a time-sliced GPU). The scheduler
assigns these devices and dcgm.py reports per device, so both share these types.

In: built by :mod:`simulator.nodes` from a profile.
Out: immutable :class:`NodeInventory` per node; :class:`Device` is the unit a pod is
allocated (its ``share`` is the fraction of one GPU it counts as).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    uuid: str
    pci_bus_id: str
    product: str
    model_name: str
    memory_mib: int
    mig_enabled: bool


@dataclass(frozen=True, slots=True)
class MigInstance:
    gpu_index: int
    #: GPU instance id and compute instance id, as NVML numbers them.
    gi_id: int
    ci_id: int
    profile: str
    uuid: str
    memory_mib: int
    compute_slices: int


@dataclass(frozen=True, slots=True)
class Device:
    """One allocatable unit of an extended resource, as the device plugin advertises it."""

    #: The device plugin's id: a GPU UUID, a MIG UUID, or ``<GPU UUID>::<replica>`` for a share.
    id: str
    resource: str
    gpu_index: int
    #: Fraction of one GPU: 1 for a whole GPU, compute slices / 7 for MIG, 1/N for a share.
    share: float
    mig: MigInstance | None = None
    #: Replica number for time-sliced / MPS shares.
    replica: int | None = None


@dataclass(frozen=True, slots=True)
class NodeInventory:
    node: str
    gpus: tuple[Gpu, ...]
    mig_instances: tuple[MigInstance, ...]
    #: Allocatable devices by resource name, in the order the device plugin hands them out.
    devices: Mapping[str, tuple[Device, ...]]
    driver_version: str = ""

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)


EMPTY_INVENTORY = NodeInventory(node="", gpus=(), mig_instances=(), devices={})
