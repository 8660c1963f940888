"""GPU resource names and the invalid-MIG product label, as every package reads them."""

from __future__ import annotations

import pytest

from controlplane.apis.gpus import is_gpu_resource, is_mig_invalid_product, is_nvidia_resource


@pytest.mark.parametrize(
    ("name", "gpu_like", "nvidia"),
    [
        ("nvidia.com/gpu", True, True),
        ("nvidia.com/gpu.shared", True, True),
        ("nvidia.com/mig-3g.40gb", True, True),
        ("nvidia.com/gpu-milli", False, True),
        ("cpu", False, False),
        ("amd.com/gpu", False, False),
    ],
)
def test_gpu_like_and_nvidia_resources(name: str, gpu_like: bool, nvidia: bool) -> None:
    assert (is_gpu_resource(name), is_nvidia_resource(name)) == (gpu_like, nvidia)


@pytest.mark.parametrize(
    ("product", "invalid"),
    [("NVIDIA-A100-SXM4-40GB-MIG-INVALID", True), ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", False), ("", False)],
)
def test_mig_invalid_product(product: str, invalid: bool) -> None:
    assert is_mig_invalid_product(product) is invalid
