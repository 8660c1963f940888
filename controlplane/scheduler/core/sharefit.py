"""A share of one GPU tied between packing members: the cluster of the tightest node that holds it.

Among clusters tied on tier, price and cost (:mod:`~controlplane.scheduler.core.tiebreak`), the
hub packs clusters: the one with the fewest free GPUs takes the replica, and its member picks the
node. For a replica asking for a share of one GPU (``nvidia.com/gpu-milli`` under 1000) whose tied
clusters' members all pack by themselves (``status.nodeScoring: MostAllocated``), that sends every
share to one cluster, where the member finds only its own nodes, while another tied cluster has a
node the share fills to the brim. Where shares are most of the demand, the clusters packed first
then run out of CPU with GPUs left free beside it (docs/benchmarks.md, "Shares tied between packing
members").

So, while shares ask for at least :data:`SHARE_FIT_PERCENT` of the GPUs of the hub's recent
arrivals (:meth:`~controlplane.scheduler.core.demand.DemandHistory.share_percent`) and the policy
does not turn it off (``tieredOverflow.shareFitTies``, default :data:`SHARE_FIT_DEFAULT`), such a
tie is decided, after cost and before fewest free GPUs, by :func:`tightest_left`: the fewest free
GPU thousandths a node of the cluster keeps once it hosts the share, as one best-fit scheduler over
every tied cluster's nodes would choose. Only the nodes the replica's node selector, required node
affinity and tolerations let it on count, as the estimator reads them
(:func:`~controlplane.scheduler.core.estimating.shape_fit`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from controlplane.apis.cluster_v1alpha1 import NodeScoring
from controlplane.apis.fragmentation import GPU_MILLI, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.estimating import shape_fit
from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.shapescarcity import after, row_of
from controlplane.scheduler.core.snapshot import ClusterSnapshot

#: Default of ``tieredOverflow.shareFitTies``.
SHARE_FIT_DEFAULT: Final = True
#: Percent of the recent arrivals' GPUs that shares must ask for before their ties go by the tightest node.
SHARE_FIT_PERCENT: Final = 50.0
#: The member scoring that packs by itself (``status.nodeScoring``).
PACKING: Final = NodeScoring.MOST_ALLOCATED.value


def is_share(task: TaskShape | None) -> bool:
    """Whether ``task`` asks for a fraction of one GPU."""
    return task is not None and task.num_gpu == 1 and 0 < task.gpu_milli < GPU_MILLI


def share_fit_wanted(state: CycleState, task: TaskShape | None, tied: Sequence[ClusterSnapshot]) -> bool:
    """Whether this tie of ``tied`` clusters for a replica of ``task`` goes by the tightest node (see the
    module): a share, every member packing, shares at least :data:`SHARE_FIT_PERCENT` of the recent
    GPUs, and the policy's ``shareFitTies`` not false."""
    if not is_share(task) or len(tied) < 2 or any(c.node_scoring != PACKING for c in tied):
        return False
    replica_scheduling = state.request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    asked = tiered.share_fit_ties if tiered is not None else None
    if not (SHARE_FIT_DEFAULT if asked is None else asked):
        return False
    return state.cache.demand.share_percent() >= SHARE_FIT_PERCENT


def tightest_left(
    cluster: ClusterSnapshot,
    requirements: ReplicaRequirements,
    task: TaskShape,
    memory: int,
    cache: SchedulerCache,
) -> int | None:
    """The fewest free GPU thousandths a node of ``cluster`` keeps once it hosts the share (its whole
    GPUs and remainders together), over the nodes that host it and that ``requirements`` let it on;
    None when none does. Remembered per snapshot and requirements (``SchedulerCache.tightest_left``)."""
    key = (cluster.serial, requirements)
    if key in cache.tightest_left:
        return cache.tightest_left[key]
    least: int | None = None
    for shape in cluster.shapes:
        if not shape.count or shape.invalid_mig:
            continue
        left = after(row_of(shape), (task, memory))
        if left is None or shape_fit(shape, requirements) <= 0:
            continue
        kept = sum(left[3])
        if least is None or kept < least:
            least = kept
    return cache.tightest_left.remember(key, least)
