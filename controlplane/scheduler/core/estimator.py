"""How many replicas of a pod fit in a cluster: exact per node, MIG-aware, reservation-aware.

In: a :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot`, a
:class:`~controlplane.interpreter.requirements.ReplicaRequirements`, and optionally the
:class:`~controlplane.scheduler.core.reservations.Reservations` promised but not yet
reported. Out: an :class:`~controlplane.scheduler.core.estimating.Estimate` (replicas, and
kube-scheduler-style reasons for the nodes that cannot take one). The reservations are
subtracted first (:mod:`~controlplane.scheduler.core.replaying`, which packs with
:mod:`~controlplane.scheduler.core.packing`), then the adjusted snapshot is asked
(:mod:`~controlplane.scheduler.core.estimating`); gangs are fitted in
:mod:`~controlplane.scheduler.core.gangs`. The hot path stays a few dict lookups per
cluster. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from controlplane.apis.gpus import is_gpu_resource
from controlplane.interpreter.requirements import RESOURCE_PODS, ReplicaRequirements
from controlplane.scheduler.core.estimating import Estimate, derive_estimate, node_eligible
from controlplane.scheduler.core.replaying import adjusted_snapshot
from controlplane.scheduler.core.reservations import Reservations
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape

_RUNNABLE = "runnable"
"""Key prefix in a snapshot's memo: ``(_RUNNABLE, requirements)`` -> :func:`can_ever_run`."""


def estimate_max_replicas(
    cluster: ClusterSnapshot,
    requirements: ReplicaRequirements,
    *,
    reserved: Reservations | None = None,
) -> Estimate:
    """Replicas of ``requirements`` that fit in ``cluster`` after ``reserved`` capacity, with reasons."""
    snapshot = adjusted_snapshot(cluster, reserved)
    cache = snapshot.estimates
    found = cache.get(requirements)
    if found is None:
        found = cache[requirements] = derive_estimate(snapshot, requirements)
    result: Estimate = found
    return result


def room_without(
    cluster: ClusterSnapshot,
    requirements: Sequence[ReplicaRequirements],
    *,
    reserved: Reservations,
    binding: str,
) -> int:
    """The most replicas of any of ``requirements`` that fit in ``cluster`` with every
    reservation there but ``binding``'s subtracted (0 without requirements).

    Asks whether a fresh report leaves room for pods of ``binding`` that its member could not
    place: their own promise set aside, the others kept. Works on a copy of the snapshot, so
    the reservation-adjusted view decisions use stays cached.
    """
    others = reserved.without(binding, cluster=cluster.name)
    copy = cluster.with_shapes(cluster.shapes)
    return max((estimate_max_replicas(copy, req, reserved=others).replicas for req in requirements), default=0)


def can_ever_run(cluster: ClusterSnapshot, requirements: ReplicaRequirements) -> bool:
    """Whether some node of ``cluster`` could run one replica of ``requirements`` were it empty.

    The node must be eligible (nodeSelector, required node affinity, taints) and its
    allocatable resources (its free ones where the agent reports no allocatable) must cover
    the request. Unlike :func:`estimate_max_replicas` this ignores what runs there now: it
    says whether replicas a cluster already runs could be running under ``requirements``.
    Memoised on the snapshot.
    """
    key = (_RUNNABLE, requirements)
    memo = cluster.estimates
    found: bool | None = memo.get(key)
    if found is None:
        found = False
        for shape in cluster.shapes:
            # Per node, remembered with its other answers (shared by nodes of equal content).
            fits = shape.fits
            runs = fits.get(key)
            if runs is None:
                runs = fits[key] = int(node_eligible(shape, requirements) and _holds_one_when_empty(shape, requirements))
            if runs:
                found = True
                break
        memo[key] = found
    return found


def _holds_one_when_empty(shape: NodeShape, req: ReplicaRequirements) -> bool:
    allocatable, free = shape.allocatable, shape.free
    for name, amount in (*req.resources, (RESOURCE_PODS, 1)):
        if name == RESOURCE_PODS and name not in allocatable and name not in free:
            continue  # the node reports no pod limit
        if shape.invalid_mig and is_gpu_resource(name):
            return False
        if max(allocatable.get(name, 0), free.get(name, 0)) < amount:
            return False
    return True
