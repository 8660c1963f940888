"""Steering a flexible replica, inside the cluster it goes to, away from GPU models that
constrained demand needs.

The hub picks the cluster; the member's scheduler picks the node. A replica that accepts
several GPU models lands where the member's scoring puts it (best-fit and FGD both prefer the
small nodes, often the T4, P100 and V100 ones), and replicas that accept only those models then
find them full. So, when the policy divides by ``TieredOverflow`` (the only division whose
``tieredOverflow`` block can turn it off), the scarcity switch is on
(``tieredOverflow.scarcityAware``, default true) and steering is not turned off
(``tieredOverflow.scarcitySteering``, default :data:`STEERING_DEFAULT`), the Work sent to the
cluster carries one more ``preferredDuringSchedulingIgnoredDuringExecution`` node-affinity
term: prefer nodes whose ``nvidia.com/gpu.product`` is NOT one of :func:`avoided_models`,
weight :data:`STEERING_WEIGHT`.

Which models (:func:`avoided_models`): the cluster's GPU models the replica accepts whose recent
constrained demand (GPUs of replicas accepting only some models, ``SchedulerCache.demand``) is
at least :data:`PRESSURE` of the fleet's free GPUs of that model; only while the replica accepts
another model of the cluster with at least its GPUs free (else the term could not help).

Weight 1, the lowest kube accepts: alone, the term decides between matching and other nodes
(kube's NodeAffinity weighs 2 against the resource score's 1, normalised to 0-100 each); next
to the user's own preferred terms, which the hub never drops or changes, it can at most even
out a difference of their weights (integers of at least 1), never reverse it. A preference,
not a requirement: when only avoided nodes have room the replica still runs there.

:func:`steering` is what the decision records per cluster (``ScheduleResult.steering``), the
binding controller writes into the Work (:func:`preferred_term`) and the what-if hands its
simulated members. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.apis.constants import LABEL_GPU_PRODUCT
from controlplane.apis.fragmentation import GPU_MILLI, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from controlplane.scheduler.core.tiebreak import cached_task, fleet_free, free_gpus, scarcity_aware
from policies.models import DivisionStrategy

#: Whether steering is on when a TieredOverflow policy does not say.
STEERING_DEFAULT: Final = True
#: Weight of the steering term (kube's lowest; see the module).
STEERING_WEIGHT: Final = 1
#: Constrained demand, as a share of the fleet's free GPUs of a model, from which it is avoided.
PRESSURE: Final = 1.0


def steering_enabled(state: CycleState) -> bool:
    """Whether the decision's policy steers: TieredOverflow, steering not turned off and the
    scarcity switch on (other divisions never steer: they have no block to turn it off in)."""
    request = state.request
    if request.strategy is not DivisionStrategy.TIERED_OVERFLOW:
        return False
    replica_scheduling = request.placement.replica_scheduling
    tiered = replica_scheduling.tiered_overflow if replica_scheduling else None
    asked = tiered.scarcity_steering if tiered is not None else None
    return (STEERING_DEFAULT if asked is None else asked) and scarcity_aware(state)


def avoided_models(
    task: TaskShape,
    cluster_free: Mapping[str, float],
    fleet_free: Mapping[str, float],
    constrained: Mapping[str, float],
) -> tuple[str, ...]:
    """The GPU models of a cluster (free GPUs per model ``cluster_free``) a replica ``task`` should
    avoid there, sorted; () when it accepts one model only, asks for no GPU, or nothing is left
    for it once they are avoided (see the module)."""
    if not task.num_gpu or len(task.models) == 1:
        return ()
    accepted = {m: f for m, f in cluster_free.items() if f > 0 and task.accepts(m)}
    avoid = sorted(
        m for m in accepted if constrained.get(m, 0.0) >= PRESSURE * max(fleet_free.get(m, 0.0), 1.0)
    )
    if not avoid:
        return ()
    needed = task.num_gpu * task.gpu_milli / GPU_MILLI
    left = sum(f for m, f in accepted.items() if m not in avoid)
    return tuple(avoid) if left >= needed else ()


def steering(
    state: CycleState, fresh: Sequence[ClusterSnapshot], requirements: Mapping[str, ReplicaRequirements]
) -> dict[str, tuple[str, ...]]:
    """Per cluster of ``fresh`` (those that get their first replicas; ``requirements`` per replica,
    by cluster), the models its replicas are steered away from; clusters with none are left out.
    A cluster already running replicas keeps what its Work has (the binding controller's part)."""
    if not fresh or not steering_enabled(state):
        return {}
    constrained = state.cache.demand.constrained()
    if not constrained:
        return {}
    fleet = fleet_free(state, fresh)
    out: dict[str, tuple[str, ...]] = {}
    for cluster in fresh:
        task = cached_task(requirements[cluster.name], state.cache)
        avoid = avoided_models(task, free_gpus(cluster, state.cache), fleet, constrained) if task else ()
        if avoid:
            out[cluster.name] = avoid
    return out


def preferred_term(avoid: Sequence[str]) -> dict[str, Any]:
    """The ``preferredDuringSchedulingIgnoredDuringExecution`` entry that steers away from ``avoid``."""
    expression = {"key": LABEL_GPU_PRODUCT, "operator": "NotIn", "values": list(avoid)}
    return {"weight": STEERING_WEIGHT, "preference": {"matchExpressions": [expression]}}


def describe(avoid: Sequence[str]) -> str:
    """The explanation's words for a steering term."""
    return (
        f"steered inside the cluster away from {', '.join(avoid)} (preferred node affinity, weight "
        f"{STEERING_WEIGHT}): replicas that accept only those models need them"
    )
