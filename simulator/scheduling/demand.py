"""One pod request shape as columns of the scheduler's node arrays: :class:`Demand`.

In: a pod's requests, the amounts of any further columns (:meth:`ClusterState._extra_demand`) and
the node arrays' column lookup; out: what a node's free amounts must cover, kube's per-node failure
checks in kube's order, and what scoring reads. Built once per request shape by
:class:`~.cluster_state.ClusterState`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from controlplane.apis.gpus import is_nvidia_resource
from simulator.scheduling.model import FilterReason

#: kube-scheduler's non-zero defaults for pods that request nothing (scoring only).
_DEFAULT_CPU_MILLI: Final = 100
_DEFAULT_MEMORY: Final = 200 * 1024 * 1024

#: Array columns that are not Kubernetes resources (a space is never in a resource name).
POD_SLOTS_COLUMN: Final = "pod slots"

IntArray = NDArray[np.int64]
IndexArray = NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class Demand:
    """One request shape as array columns, built once per shape."""

    #: Columns a node's free amounts must cover, and the amounts (requests, a pod slot, extras).
    fit_columns: IndexArray
    fit_amounts: IntArray
    #: kube's per-node failure texts, each with its column and amount, in kube's order.
    reason_checks: tuple[tuple[str, int, int], ...]
    #: least/most-allocated: cpu and memory (with kube's defaults) and the GPU resources.
    score_columns: IndexArray
    score_amounts: IntArray
    #: best-fit: the pod's GPU resources (converted per node to thousandths) and its cpu.
    gpu_columns: IndexArray
    gpu_amounts: IntArray
    cpu: int


def request_demand(requests: Mapping[str, int], extra: Mapping[str, int], column: Callable[[str], int]) -> Demand:
    """The :class:`Demand` of a pod requesting ``requests`` that must also fit ``extra`` (further
    columns); ``column`` gives a resource's array column, adding it the first time it is seen."""
    fit = {column(resource): amount for resource, amount in requests.items()}
    slots = column(POD_SLOTS_COLUMN)
    fit[slots] = 1
    for name, amount in extra.items():
        fit[column(name)] = amount
    checks = [(FilterReason.TOO_MANY_PODS.value, slots, 1)]
    checks += [
        (f"{FilterReason.INSUFFICIENT.value} {resource}", column(resource), amount)
        for resource, amount in requests.items()
    ]
    scored = {"cpu": max(requests.get("cpu", 0), _DEFAULT_CPU_MILLI)}
    scored["memory"] = max(requests.get("memory", 0), _DEFAULT_MEMORY)
    gpus = {}
    for resource, amount in requests.items():
        if is_nvidia_resource(resource):
            scored[resource] = amount
            gpus[resource] = amount
    return Demand(
        fit_columns=np.fromiter(fit, dtype=np.intp, count=len(fit)),
        fit_amounts=np.fromiter(fit.values(), dtype=np.int64, count=len(fit)),
        reason_checks=tuple(checks),
        score_columns=np.array([column(r) for r in scored], dtype=np.intp),
        score_amounts=np.fromiter(scored.values(), dtype=np.int64, count=len(scored)),
        gpu_columns=np.array([column(r) for r in gpus], dtype=np.intp),
        gpu_amounts=np.fromiter(gpus.values(), dtype=np.int64, count=len(gpus)),
        cpu=requests.get("cpu", 0),
    )
