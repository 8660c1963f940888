"""NVIDIA GPU resource names and GPU Feature Discovery conventions, written once.

Two questions about a resource name, with different answers on purpose:

* :func:`is_gpu_resource` — is it a *GPU-like* request the hub places and rewrites (a whole
  ``nvidia.com/gpu``, a time-sliced ``nvidia.com/gpu.shared``, a ``nvidia.com/mig-<profile>``
  slice)? The interpreter, the scheduler, the Work builder and the reports ask this.
* :func:`is_nvidia_resource` — is it any resource NVIDIA's device plugin advertises
  (``nvidia.com/...``, including ones the hub does not know, such as the simulator's
  ``nvidia.com/gpu-milli``)? The agent tracks and reports every one of them.

And two about a node: :func:`is_mig_invalid_product` — GPU Feature Discovery labels
``nvidia.com/gpu.product`` with :data:`MIG_INVALID_SUFFIX` when a node's MIG layout is mixed
under the ``single`` strategy; such a node's GPUs are unusable; and :func:`gpus_partly_used` —
do pods hold some of its GPU resources while some are still free (the nodes the agent names in
its report, for the hub's packing hints)?

Pure: names and amounts in, booleans out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from controlplane.apis.constants import RESOURCE_GPU, RESOURCE_GPU_SHARED, RESOURCE_MIG_PREFIX

NVIDIA_RESOURCE_PREFIX: Final = "nvidia.com/"
MIG_INVALID_SUFFIX: Final = "-MIG-INVALID"


def is_gpu_resource(name: str) -> bool:
    """Whether ``name`` is a GPU-like extended resource (whole GPU, GPU share or MIG slice)."""
    return name in (RESOURCE_GPU, RESOURCE_GPU_SHARED) or name.startswith(RESOURCE_MIG_PREFIX)


def is_nvidia_resource(name: str) -> bool:
    """Whether ``name`` is any resource under NVIDIA's ``nvidia.com/`` prefix."""
    return name.startswith(NVIDIA_RESOURCE_PREFIX)


def is_mig_invalid_product(product: str) -> bool:
    """Whether a ``nvidia.com/gpu.product`` label marks an invalid (unusable) MIG layout."""
    return product.endswith(MIG_INVALID_SUFFIX)


def gpus_partly_used(allocatable: Mapping[str, int], allocated: Mapping[str, int]) -> bool:
    """Whether pods hold some of a node's ``nvidia.com/`` resources (``allocated``) and some are still
    free (``allocatable`` beyond it)."""
    used = free = False
    for name, amount in allocatable.items():
        if amount > 0 and is_nvidia_resource(name):
            held = allocated.get(name, 0)
            used = used or held > 0
            free = free or held < amount
    return used and free
