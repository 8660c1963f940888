"""What the simulator knows about GPU models: memory, family, MIG profiles.

A simulated node must look like a real one to the agent and the hub, so the numbers
GPU Feature Discovery would put on a node (``gpu.memory``, ``gpu.family``, the
``mig-<profile>.*`` labels) and the MIG profile table with its slice budget (7
compute / 8 memory slices per GPU, a maximum count per profile) come from here.

In: a GFD product label value such as ``NVIDIA-A100-SXM4-80GB``.
Out: :class:`GpuModel` with its :class:`MigProfile` table, or None for a product the
catalog does not know (a profile then has to give memory and family itself, and the
GPU cannot be partitioned).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

#: A GPU is cut into 7 compute slices and 8 memory slices.
COMPUTE_SLICES: Final = 7
MEMORY_SLICES: Final = 8


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG profile on one GPU model, e.g. ``3g.40gb`` on an A100-80GB."""

    name: str
    compute_slices: int
    memory_slices: int
    memory_mib: int
    multiprocessors: int
    max_count: int

    @property
    def media_extensions(self) -> bool:
        return self.name.endswith("+me")

    @property
    def resource_name(self) -> str:
        """The device plugin's resource name (``+me`` is advertised as ``.me``)."""
        return "nvidia.com/mig-" + self.name.replace("+", ".")

    @property
    def share(self) -> float:
        """The fraction of a GPU this slice counts as for accounting (compute slices / 7)."""
        return self.compute_slices / COMPUTE_SLICES


@dataclass(frozen=True, slots=True)
class GpuModel:
    product: str
    family: str
    memory_mib: int
    #: The name NVML and dcgm-exporter report (``modelName``), with spaces.
    model_name: str
    multiprocessors: int
    compute_major: int
    compute_minor: int
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


def _profiles(rows: list[tuple[str, int, int, int, int, int]]) -> dict[str, MigProfile]:
    return {
        name: MigProfile(name, compute, memory, memory_mib, sms, max_count)
        for name, compute, memory, memory_mib, sms, max_count in rows
    }


# (name, compute slices, memory slices, memory MiB, multiprocessors, max per GPU)
_A100_40GB = _profiles(
    [
        ("1g.5gb", 1, 1, 4864, 14, 7),
        ("1g.5gb+me", 1, 1, 4864, 14, 1),
        ("1g.10gb", 1, 2, 9856, 14, 4),
        ("2g.10gb", 2, 2, 9856, 28, 3),
        ("3g.20gb", 3, 4, 19968, 42, 2),
        ("4g.20gb", 4, 4, 19968, 56, 1),
        ("7g.40gb", 7, 8, 40192, 98, 1),
    ]
)
_A100_80GB = _profiles(
    [
        ("1g.10gb", 1, 1, 9728, 14, 7),
        ("1g.10gb+me", 1, 1, 9728, 14, 1),
        ("1g.20gb", 1, 2, 19968, 14, 4),
        ("2g.20gb", 2, 2, 19968, 28, 3),
        ("3g.40gb", 3, 4, 40192, 42, 2),
        ("4g.40gb", 4, 4, 40192, 56, 1),
        ("7g.80gb", 7, 8, 80896, 98, 1),
    ]
)
_H100_80GB = _profiles(
    [
        ("1g.10gb", 1, 1, 9984, 16, 7),
        ("1g.10gb+me", 1, 1, 9984, 16, 1),
        ("1g.20gb", 1, 2, 20096, 26, 4),
        ("2g.20gb", 2, 2, 20096, 32, 3),
        ("3g.40gb", 3, 4, 40320, 60, 2),
        ("4g.40gb", 4, 4, 40320, 64, 1),
        ("7g.80gb", 7, 8, 80896, 132, 1),
    ]
)
_H200_141GB = _profiles(
    [
        ("1g.18gb", 1, 1, 16384, 16, 7),
        ("1g.18gb+me", 1, 1, 16384, 16, 1),
        ("1g.35gb", 1, 2, 32768, 26, 4),
        ("2g.35gb", 2, 2, 32768, 32, 3),
        ("3g.71gb", 3, 4, 65536, 60, 2),
        ("4g.71gb", 4, 4, 65536, 64, 1),
        ("7g.141gb", 7, 8, 143360, 132, 1),
    ]
)

_MODELS: Final[tuple[GpuModel, ...]] = (
    GpuModel("NVIDIA-A100-SXM4-40GB", "ampere", 40960, "NVIDIA A100-SXM4-40GB", 108, 8, 0, _A100_40GB),
    GpuModel("NVIDIA-A100-PCIE-40GB", "ampere", 40960, "NVIDIA A100-PCIE-40GB", 108, 8, 0, _A100_40GB),
    GpuModel("NVIDIA-A100-SXM4-80GB", "ampere", 81920, "NVIDIA A100-SXM4-80GB", 108, 8, 0, _A100_80GB),
    GpuModel("NVIDIA-A100-80GB-PCIe", "ampere", 81920, "NVIDIA A100 80GB PCIe", 108, 8, 0, _A100_80GB),
    GpuModel("NVIDIA-H100-80GB-HBM3", "hopper", 81559, "NVIDIA H100 80GB HBM3", 132, 9, 0, _H100_80GB),
    GpuModel("NVIDIA-H100-PCIe", "hopper", 81559, "NVIDIA H100 PCIe", 114, 9, 0, _H100_80GB),
    GpuModel("NVIDIA-H200", "hopper", 143771, "NVIDIA H200", 132, 9, 0, _H200_141GB),
    GpuModel("NVIDIA-A10", "ampere", 23028, "NVIDIA A10", 72, 8, 6),
    GpuModel("NVIDIA-A10G", "ampere", 23028, "NVIDIA A10G", 80, 8, 6),
    GpuModel("NVIDIA-L4", "ada-lovelace", 23034, "NVIDIA L4", 58, 8, 9),
    GpuModel("NVIDIA-L40S", "ada-lovelace", 46068, "NVIDIA L40S", 142, 8, 9),
    GpuModel("Tesla-T4", "turing", 15360, "Tesla T4", 40, 7, 5),
    GpuModel("Tesla-V100-SXM2-16GB", "volta", 16384, "Tesla V100-SXM2-16GB", 80, 7, 0),
    GpuModel("Tesla-V100-SXM2-32GB", "volta", 32768, "Tesla V100-SXM2-32GB", 80, 7, 0),
    GpuModel("Tesla-P100-PCIE-16GB", "pascal", 16384, "Tesla P100-PCIE-16GB", 56, 6, 0),
)

CATALOG: Final[dict[str, GpuModel]] = {model.product: model for model in _MODELS}


def lookup(product: str) -> GpuModel | None:
    """The catalog entry for a GFD product label value, or None."""
    return CATALOG.get(product)


def custom_model(*, product: str, memory_mib: int, family: str) -> GpuModel:
    """A GPU the catalog does not know: whole devices only, no MIG."""
    return GpuModel(product, family, memory_mib, product.replace("-", " "), 0, 0, 0)
