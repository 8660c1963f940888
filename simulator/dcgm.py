"""A simulated node's dcgm-exporter ``/metrics`` page.

The member agent scrapes GPU utilization from dcgm-exporter and maps it to pods by the
exporter's ``pod``/``namespace``/``container`` labels, and the hub's waste report is
built on it. So the simulated clusters render the exporter's exact text format:

* blocks in DCGM field-id order, each ``# HELP`` / ``# TYPE`` then its series;
* labels in the exporter's order: ``gpu``, ``UUID``, ``pci_bus_id``, ``device``,
  ``modelName``, then for MIG instances ``GPU_I_PROFILE`` and ``GPU_I_ID``, then
  ``Hostname``, then label-type fields (``DCGM_FI_DRIVER_VERSION``), then the
  Kubernetes attributes sorted by name (``container``, ``namespace``, ``pod``, and
  ``vgpu`` for time-sliced shares); pod labels only on allocated devices;
* values as the exporter prints them: ratios with ``%f``, integers as integers.

Series: one per whole GPU, one per MIG instance (a MIG-enabled GPU reports only its
instances), and for a time-sliced GPU one per pod sharing it (as the exporter does
with virtual-GPU mapping on). ``DCGM_FI_DEV_GPU_UTIL`` is reported for whole GPUs only;
``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``DCGM_FI_DEV_FB_USED`` and ``DCGM_FI_DEV_FB_FREE``
for every series.

In: node inventories, pod allocations (which devices a pod holds), and each pod's
GPU utilization (a 0..1 ratio of the device it holds; for a shared GPU, of the whole
GPU: the GPU reports the sum of its pods', capped at 1).
Out: the page as a string. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from simulator.devices import Gpu, MigInstance, NodeInventory

# (field id, name, help); the exporter writes blocks in field-id order.
GPU_UTIL: Final = (203, "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
FB_FREE: Final = (251, "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
FB_USED: Final = (252, "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
GR_ENGINE_ACTIVE: Final = (
    1001,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "Ratio of time the graphics engine is active.",
)
LABEL_DRIVER_VERSION: Final = "DCGM_FI_DRIVER_VERSION"

#: Share of framebuffer an allocated device uses: a floor plus a part growing with utilization.
_FB_IDLE_FRACTION: Final = 0.15
_FB_BUSY_FRACTION: Final = 0.7


@dataclass(frozen=True, slots=True)
class PodDevice:
    """One device a pod holds, as the kubelet's pod-resources API reports it."""

    node: str
    device_id: str
    namespace: str
    pod: str
    container: str


@dataclass(slots=True)
class _Series:
    #: The labels as written between the braces (the same for each of the series' families).
    body: str
    whole_gpu: bool
    utilization: float
    memory_mib: int
    fb_used: int


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _gpu_labels(node: NodeInventory, gpu: Gpu, mig: MigInstance | None) -> list[tuple[str, str]]:
    labels = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("pci_bus_id", gpu.pci_bus_id),
        ("device", f"nvidia{gpu.index}"),
        ("modelName", gpu.model_name),
    ]
    if mig is not None:
        labels += [("GPU_I_PROFILE", mig.profile), ("GPU_I_ID", str(mig.gi_id))]
    labels.append(("Hostname", node.node))
    if node.driver_version:
        labels.append((LABEL_DRIVER_VERSION, node.driver_version))
    return labels


def _pod_labels(use: PodDevice, vgpu: str | None = None) -> list[tuple[str, str]]:
    labels = [("container", use.container), ("namespace", use.namespace), ("pod", use.pod)]
    if vgpu is not None:
        labels.append(("vgpu", vgpu))
    return labels


def _fb_used(memory_mib: int, utilization: float, allocated: bool) -> int:
    if not allocated:
        return 0
    return int(memory_mib * (_FB_IDLE_FRACTION + _FB_BUSY_FRACTION * min(1.0, utilization)))


def _series(
    inventories: Iterable[NodeInventory],
    allocations: Iterable[PodDevice],
    utilization: Mapping[str, float],
) -> list[_Series]:
    by_device: dict[tuple[str, str], list[PodDevice]] = {}
    for use in allocations:
        by_device.setdefault((use.node, use.device_id), []).append(use)

    def util(use: PodDevice) -> float:
        return max(0.0, min(1.0, utilization.get(f"{use.namespace}/{use.pod}", 0.0)))

    out: list[_Series] = []
    for node in inventories:
        instances: dict[int, list[MigInstance]] = {}
        for inst in node.mig_instances:
            instances.setdefault(inst.gpu_index, []).append(inst)
        shares: dict[int, list[tuple[str, PodDevice]]] = {}
        for devices in node.devices.values():
            for device in devices:
                if device.replica is not None:
                    for use in by_device.get((node.node, device.id), []):
                        shares.setdefault(device.gpu_index, []).append((str(device.replica), use))
        for gpu in node.gpus:
            if gpu.mig_enabled:
                for inst in sorted(instances.get(gpu.index, []), key=lambda i: i.gi_id):
                    users = by_device.get((node.node, inst.uuid), [])
                    labels = _gpu_labels(node, gpu, inst)
                    value = util(users[0]) if users else 0.0
                    if users:
                        labels += _pod_labels(users[0])
                    used = _fb_used(inst.memory_mib, value, bool(users))
                    out.append(_Series(_body(labels), False, value, inst.memory_mib, used))
                continue
            sharing = shares.get(gpu.index)
            if sharing:
                value = min(1.0, sum(util(use) for _, use in sharing))
                used = _fb_used(gpu.memory_mib, value, True)
                for replica, use in sorted(
                    sharing, key=lambda item: (item[1].namespace, item[1].pod, item[0])
                ):
                    labels = _gpu_labels(node, gpu, None) + _pod_labels(use, replica)
                    out.append(_Series(_body(labels), True, value, gpu.memory_mib, used))
                continue
            users = by_device.get((node.node, gpu.uuid), [])
            labels = _gpu_labels(node, gpu, None)
            value = util(users[0]) if users else 0.0
            if users:
                labels += _pod_labels(users[0])
            out.append(
                _Series(_body(labels), True, value, gpu.memory_mib, _fb_used(gpu.memory_mib, value, bool(users)))
            )
    return out


def _body(labels: list[tuple[str, str]]) -> str:
    return ",".join(f'{key}="{_escape(val)}"' for key, val in labels)


def render_metrics(
    inventories: Iterable[NodeInventory],
    allocations: Iterable[PodDevice],
    utilization: Mapping[str, float],
) -> str:
    """The exporter's page for the given nodes. ``utilization`` is keyed ``namespace/pod``."""
    series = _series(inventories, allocations, utilization)
    lines: list[str] = []

    def block(field: tuple[int, str, str], rows: list[tuple[str, str]]) -> None:
        _, name, help_text = field
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{{{body}}} {value}" for body, value in rows)

    block(GPU_UTIL, [(s.body, str(round(s.utilization * 100))) for s in series if s.whole_gpu])
    block(FB_FREE, [(s.body, str(max(0, s.memory_mib - s.fb_used))) for s in series])
    block(FB_USED, [(s.body, str(s.fb_used)) for s in series])
    block(GR_ENGINE_ACTIVE, [(s.body, f"{s.utilization:f}") for s in series])
    return "\n".join(lines) + "\n"
