"""The placement strategies the what-if compares, each over the same simulated members.

* **gpufed** -- the hub's real scheduler: for every arriving job the members' current
  ``Cluster`` reports become :class:`~controlplane.scheduler.core.snapshot.ClusterSnapshot`
  objects, :func:`controlplane.scheduler.core.deciding.schedule` chooses the cluster under
  the PropagationPolicy's placement (default: Divided, TieredOverflow: cheapest tier first),
  and the member's scheduler picks the node. When the member cannot place the pod (the hub's
  shape-level estimate was optimistic), the job is rescheduled without that cluster, as the
  hub does with replicas a member reports unschedulable.
* **gpufed-rebalance** -- ``gpufed`` plus automatic returns to a cheaper tier
  (``tieredOverflow.rebalance``): when room frees in a cheaper cluster, running jobs move
  there as the hub would move a Deployment's replicas (:mod:`simulator.whatif.returns`).
* **static** -- every job has a fixed home cluster (the trace's ``cluster`` column, else a
  seeded draw weighted by the clusters' GPU counts among those with the GPU models it
  accepts) and waits there.
* **karmada-like** -- Karmada's general estimator and dynamic weights: a cluster's available
  replicas are its free resources *summed over nodes* divided by the request (so eight nodes
  with one free GPU each look like room for an 8-GPU job), the replica goes to the cluster
  with the most (``policies.division.divide_by_dynamic_weights``), and a job the member then
  cannot place waits in that member.
* **pooled** -- every node of the fleet in one cluster, no hub, under the fleet's member
  scoring; **pooled-best-fit** and **pooled-fgd** the same under best-fit and FGD whatever
  the fleet's scoring (one big cluster is not an upper bound: under least-allocated it
  spreads multi-GPU jobs; the packing references are these two).

A job's GPU request has one or more :class:`~simulator.whatif.member.PodShape` forms: whole
GPUs; for a fraction of a GPU, thousandths of one GPU (:data:`RESOURCE_GPU_MILLI`), else the
smallest MIG slice of the fleet holding that fraction, else one time-sliced share per 1/N of
a GPU. Every strategy tries them in that order.

In: the members, the jobs. Out: :class:`Outcome` per attempt. Pure; no I/O.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar

from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU
from controlplane.apis.fragmentation import DemandMix
from controlplane.interpreter.requirements import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ReplicaRequirements,
)
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.returning import propose_return, return_order
from policies.division import divide_by_dynamic_weights
from policies.models import Placement
from simulator.profile import ClusterProfile
from simulator.scheduling.model import PodRequest
from simulator.whatif.member import (
    RESOURCE_GPU_MILLI,
    InsideHints,
    MemberCluster,
    MemberScoring,
    Placed,
    PodShape,
    pod_request,
    steered,
)
from simulator.whatif.returns import Returned, return_candidates
from simulator.whatif.trace import MILLI_PER_GPU, Job

#: The hub's clock in the replay; decisions do not depend on it.
HUB_NOW = datetime(2023, 1, 1, tzinfo=UTC)
MIB = 2**20

DEFAULT_PLACEMENT = Placement.model_validate(
    {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}}
)


class StrategyName(StrEnum):
    GPUFED = "gpufed"
    GPUFED_REBALANCE = "gpufed-rebalance"
    STATIC = "static"
    KARMADA_LIKE = "karmada-like"
    POOLED = "pooled"
    POOLED_BEST_FIT = "pooled-best-fit"
    POOLED_FGD = "pooled-fgd"


#: The strategies a run compares unless told otherwise.
DEFAULT_STRATEGIES = (StrategyName.GPUFED, StrategyName.STATIC, StrategyName.KARMADA_LIKE, StrategyName.POOLED)
#: The member scoring each pooled baseline forces (None: the fleet's).
POOLED_SCORING: dict[StrategyName, MemberScoring | None] = {
    StrategyName.POOLED: None,
    StrategyName.POOLED_BEST_FIT: MemberScoring.BEST_FIT,
    StrategyName.POOLED_FGD: MemberScoring.FGD,
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """``placed`` when the job runs now; else it waits at the hub (``waiting_in`` None) or in a member."""

    placed: Placed | None
    waiting_in: str | None = None


# ------------------------------------------------------------------------------------------ shapes


def job_shapes(
    job: Job, *, mig: Mapping[str, float] | None = None, shared: Mapping[str, int] | None = None
) -> tuple[PodShape, ...]:
    """The forms of ``job``'s GPU request, preferred first (see the module docstring)."""
    if not job.num_gpu:
        return (PodShape((), 0.0, "cpu-only"),)
    if not job.fractional:
        return (PodShape(((RESOURCE_GPU, job.num_gpu),), float(job.num_gpu), "gpu"),)
    fraction = job.gpu_milli / MILLI_PER_GPU
    shapes = [PodShape(((RESOURCE_GPU_MILLI, job.gpu_milli),), fraction, "gpu-share")]
    for resource, share in sorted((mig or {}).items(), key=lambda kv: (kv[1], kv[0])):
        if share + 1e-9 >= fraction:
            shapes.append(PodShape(((resource, 1),), share, resource.removeprefix("nvidia.com/")))
            break
    for resource, replicas in sorted((shared or {}).items()):
        count = min(replicas, max(1, math.ceil(job.gpu_milli * replicas / MILLI_PER_GPU)))
        shapes.append(PodShape(((resource, count),), count / replicas, f"{resource} x{count}"))
    return tuple(shapes)


def _requirements(job: Job, shape: PodShape) -> ReplicaRequirements:
    resources = dict(shape.resources)
    if job.cpu_milli:
        resources["cpu"] = job.cpu_milli
    if job.memory_mib:
        resources["memory"] = job.memory_mib * MIB
    affinity: tuple[NodeSelectorTerm, ...] = ()
    if job.gpu_products:
        affinity = (
            NodeSelectorTerm(
                expressions=(NodeSelectorRequirement(LABEL_GPU_PRODUCT, "In", job.gpu_products),)
            ),
        )
    return ReplicaRequirements.build(resources, node_affinity=affinity)


# ------------------------------------------------------------------------------------------ strategies


class Strategy(ABC):
    """Places jobs on members; tracks which member holds which job."""

    name: ClassVar[StrategyName]

    def __init__(self, members: Mapping[str, MemberCluster]) -> None:
        self.members = dict(members)
        self.where: dict[str, str] = {}
        self._mig: dict[str, float] = {}
        self._shared: dict[str, int] = {}
        for member in self.members.values():
            self._mig.update(member.mig_resources)
            self._shared.update(member.shared_resources)
        self._pods: dict[tuple[str, PodShape], PodRequest] = {}

    @abstractmethod
    def try_place(self, job: Job) -> Outcome: ...

    def shapes(self, job: Job, member: MemberCluster | None = None) -> tuple[PodShape, ...]:
        if member is None:
            return job_shapes(job, mig=self._mig, shared=self._shared)
        return job_shapes(job, mig=member.mig_resources, shared=member.shared_resources)

    def pods(
        self, job: Job, shapes: Sequence[PodShape], hints: InsideHints | None = None
    ) -> dict[PodShape, PodRequest]:
        """The job's pod per shape, with the hub's ``hints`` for the cluster (steering away from GPU
        models, packing toward nodes)."""
        out = {}
        for shape in shapes:
            key = (job.name, shape)
            pod = self._pods.get(key)
            if pod is None:
                pod = self._pods[key] = pod_request(
                    job.name,
                    shape=shape,
                    cpu_milli=job.cpu_milli,
                    memory_bytes=job.memory_mib * MIB,
                    products=job.gpu_products,
                )
            out[shape] = steered(pod, hints) if hints is not None else pod
        return out

    def place_in(
        self, member: MemberCluster, job: Job, shapes: Sequence[PodShape] | None = None, hints: InsideHints | None = None
    ) -> Placed | None:
        chosen = tuple(shapes) if shapes is not None else self.shapes(job, member)
        placed = member.place(self.pods(job, chosen, hints), chosen)
        if placed is not None:
            self.where[job.name] = member.name
        return placed

    def release(self, job: Job) -> Placed | None:
        """Free the job's resources; returns where it ran (None when it never ran)."""
        cluster = self.where.pop(job.name, None)
        self.forget(job)
        if cluster is None:
            return None
        return self.members[cluster].release(f"whatif/{job.name}")

    def forget(self, job: Job) -> None:
        """Drop per-job memory once a job will not be tried again."""
        for member in (None, *self.members.values()):
            for shape in self.shapes(job, member):
                self._pods.pop((job.name, shape), None)

    def fits_now(self, job: Job) -> list[str]:
        """Members where the job could start now, whatever this strategy would choose."""
        out = []
        for name, member in self.members.items():
            shapes = self.shapes(job, member)
            pods = self.pods(job, shapes)
            if any(member.fits_somewhere(pods[s]) for s in shapes):
                out.append(name)
        return out

    @property
    def held_gpus(self) -> float:
        return sum(m.held_gpus for m in self.members.values())


class GpufedStrategy(Strategy):
    name = StrategyName.GPUFED

    def __init__(self, members: Mapping[str, MemberCluster], *, placement: Placement | None = None) -> None:
        super().__init__(members)
        self.placement = placement or DEFAULT_PLACEMENT
        self.cache = SchedulerCache()

    def try_place(self, job: Job) -> Outcome:
        rejected: set[str] = set()
        for shape in self.shapes(job):
            request = BindingRequest(
                key=f"whatif/{job.name}",
                replicas=1,
                requirements=_requirements(job, shape),
                placement=self.placement,
            )
            while True:
                snapshots = [m.snapshot() for name, m in self.members.items() if name not in rejected]
                if not snapshots:
                    return Outcome(None)
                result = schedule(request, snapshots, now=HUB_NOW, cache=self.cache)
                chosen = [name for name, replicas in result.clusters.items() if replicas]
                if not chosen:
                    break
                member = self.members[chosen[0]]
                hints = InsideHints(result.steering.get(member.name, ()), result.packing.get(member.name, ()))
                placed = self.place_in(member, job, (shape,), hints)
                if placed is not None:
                    return Outcome(placed)
                rejected.add(member.name)  # the member disagrees: reschedule elsewhere
        return Outcome(None)


class ReturningGpufedStrategy(GpufedStrategy):
    """``gpufed`` whose running jobs move back to a cheaper tier when room frees there."""

    name = StrategyName.GPUFED_REBALANCE

    def __init__(self, members: Mapping[str, MemberCluster], *, placement: Placement | None = None) -> None:
        super().__init__(members, placement=placement)
        self.shape_of: dict[str, PodShape] = {}
        self.last_move: dict[str, datetime] = {}

    def place_in(
        self, member: MemberCluster, job: Job, shapes: Sequence[PodShape] | None = None, hints: InsideHints | None = None
    ) -> Placed | None:
        placed = super().place_in(member, job, shapes, hints)
        if placed is not None:
            self.shape_of[job.name] = placed.shape
        return placed

    def release(self, job: Job) -> Placed | None:
        self.shape_of.pop(job.name, None)
        self.last_move.pop(job.name, None)
        return super().release(job)

    def return_jobs(self, running: Mapping[str, Job], freed: Iterable[str], *, now_s: float) -> list[Returned]:
        """Offer ``running`` jobs (by name) a move into the room ``freed`` clusters gained, most
        expensive first; make the moves :func:`propose_return` picks. A job shaped like one that
        could not move from the same cluster is not asked again in this round."""
        now = HUB_NOW + timedelta(seconds=now_s)
        where = {name: self.where[name] for name in running if name in self.where}
        if not where:
            return []
        ranking = BindingRequest(
            key="whatif/order", replicas=1, requirements=ReplicaRequirements.build({}), placement=self.placement
        )
        order = return_order(ranking, [m.snapshot() for m in self.members.values()])
        out: list[Returned] = []
        failed: set[tuple[object, ...]] = set()
        for name in return_candidates(where, order, freed):
            job, source, shape = running[name], where[name], self.shape_of.get(name)
            signature = (source, shape, job.cpu_milli, job.memory_mib, job.gpu_products)
            if shape is None or signature in failed:
                continue
            request = BindingRequest(
                key=f"whatif/{name}",
                replicas=1,
                requirements=_requirements(job, shape),
                placement=self.placement,
                previous={source: 1},
            )
            snapshots = [m.snapshot() for m in self.members.values()]
            plan = propose_return(
                request, snapshots, last_move=self.last_move.get(name), now=now, cache=self.cache
            )
            move = plan.move
            placed = None if move is None else self.members[move.target].place(self.pods(job, (shape,)), (shape,))
            if move is None or placed is None:
                failed.add(signature)
                continue
            self.members[source].release(f"whatif/{name}")
            self.where[name] = move.target
            self.last_move[name] = now
            out.append(Returned(name, move, placed))
        return out


class StaticStrategy(Strategy):
    name = StrategyName.STATIC

    def __init__(self, members: Mapping[str, MemberCluster], *, seed: int = 0) -> None:
        super().__init__(members)
        self.seed = seed
        self.home: dict[str, str] = {}

    def home_of(self, job: Job) -> str:
        found = self.home.get(job.name)
        if found is not None:
            return found
        if job.home_cluster in self.members:
            home = job.home_cluster
        else:
            names = sorted(self.members)
            eligible = [n for n in names if self.members[n].has_products(job.gpu_products)] or names
            weights = [max(self.members[n].capacity_gpus, 0) for n in eligible]
            rng = random.Random(f"{self.seed}:{job.name}")
            home = rng.choices(eligible, weights=weights)[0] if sum(weights) else rng.choice(eligible)
        assert home is not None
        self.home[job.name] = home
        return home

    def try_place(self, job: Job) -> Outcome:
        home = self.home_of(job)
        placed = self.place_in(self.members[home], job)
        return Outcome(placed, None if placed else home)


class KarmadaLikeStrategy(Strategy):
    name = StrategyName.KARMADA_LIKE

    def __init__(self, members: Mapping[str, MemberCluster]) -> None:
        super().__init__(members)
        self.assigned: dict[str, tuple[str, PodShape]] = {}

    def available_replicas(self, member: MemberCluster, job: Job) -> tuple[int, PodShape | None]:
        """Replicas the cluster-wide free sums hold, with the first shape the cluster offers."""
        if not member.has_products(job.gpu_products):
            return 0, None
        totals = member.free_totals()
        for shape in self.shapes(job, member):
            request = _requirements(job, shape).resource_map
            if any(res not in totals for res in request if res not in ("cpu", "memory")):
                continue
            replicas = min((totals.get(res, 0) // amount for res, amount in request.items()), default=1 << 30)
            return max(replicas, 0), shape
        return 0, None

    def try_place(self, job: Job) -> Outcome:
        assigned = self.assigned.get(job.name)
        if assigned is None:
            available: dict[str, int] = {}
            shapes: dict[str, PodShape] = {}
            for name, member in sorted(self.members.items()):
                replicas, shape = self.available_replicas(member, job)
                if shape is not None:
                    available[name] = replicas
                    shapes[name] = shape
            division = divide_by_dynamic_weights(1, available)
            chosen = [name for name, replicas in division.assignments.items() if replicas]
            if not chosen:
                return Outcome(None)
            assigned = self.assigned[job.name] = (chosen[0], shapes[chosen[0]])
        cluster, shape = assigned
        placed = self.place_in(self.members[cluster], job, (shape,))
        return Outcome(placed, None if placed else cluster)

    def release(self, job: Job) -> Placed | None:
        self.assigned.pop(job.name, None)
        return super().release(job)


class PooledStrategy(Strategy):
    name = StrategyName.POOLED

    def try_place(self, job: Job) -> Outcome:
        member = next(iter(self.members.values()))
        placed = self.place_in(member, job)
        return Outcome(placed, None if placed else member.name)

    def fits_now(self, job: Job) -> list[str]:
        return []


# ------------------------------------------------------------------------------------------ building


@dataclass(frozen=True)
class FleetNodes:
    """Every cluster's Node objects and device inventories, built once and shared read-only."""

    profiles: tuple[ClusterProfile, ...]
    nodes: Mapping[str, Sequence[Mapping[str, Any]]]
    inventories: Mapping[str, Mapping[str, Any]]

    @property
    def node_cluster(self) -> dict[str, str]:
        return {str(n["metadata"]["name"]): c for c, ns in self.nodes.items() for n in ns}


def build_members(
    fleet: FleetNodes,
    *,
    scoring: MemberScoring | None,
    seed: int,
    percentage: int = 100,
    demand_mix: DemandMix | None = None,
) -> dict[str, MemberCluster]:
    members = {}
    for index, profile in enumerate(fleet.profiles):
        members[profile.name] = MemberCluster(
            profile,
            scoring=scoring,
            seed=seed + index,
            percentage_of_nodes_to_score=percentage,
            demand_mix=demand_mix,
            nodes=fleet.nodes[profile.name],
            inventories=fleet.inventories[profile.name],
        )
    return members


def build_pooled(
    fleet: FleetNodes,
    *,
    scoring: MemberScoring | None,
    seed: int,
    percentage: int = 100,
    demand_mix: DemandMix | None = None,
) -> MemberCluster:
    first = fleet.profiles[0]
    pricing: dict[str, float] = {}
    for profile in fleet.profiles:
        for product, price in profile.pricing.items():
            pricing.setdefault(product, price)
    pooled = ClusterProfile(
        name="pooled", provider=first.provider, pricing=pricing, simulation=first.simulation
    )
    nodes = [n for p in fleet.profiles for n in fleet.nodes[p.name]]
    inventories = {k: v for p in fleet.profiles for k, v in fleet.inventories[p.name].items()}
    return MemberCluster(
        pooled,
        scoring=scoring,
        seed=seed,
        percentage_of_nodes_to_score=percentage,
        demand_mix=demand_mix,
        nodes=nodes,
        inventories=inventories,
    )


def build_strategy(
    name: StrategyName,
    fleet: FleetNodes,
    *,
    scoring: MemberScoring | None = None,
    seed: int = 0,
    placement: Placement | None = None,
    percentage: int = 100,
    demand_mix: DemandMix | None = None,
) -> Strategy:
    """A fresh strategy; ``demand_mix`` is FGD's task mix (None: members learn it from arrivals)."""
    if name in POOLED_SCORING:
        forced = POOLED_SCORING[name]
        pooled = build_pooled(
            fleet, scoring=forced or scoring, seed=seed, percentage=percentage, demand_mix=demand_mix
        )
        return PooledStrategy({"pooled": pooled})
    members = build_members(fleet, scoring=scoring, seed=seed, percentage=percentage, demand_mix=demand_mix)
    if name is StrategyName.GPUFED:
        return GpufedStrategy(members, placement=placement)
    if name is StrategyName.GPUFED_REBALANCE:
        return ReturningGpufedStrategy(members, placement=placement)
    if name is StrategyName.STATIC:
        return StaticStrategy(members, seed=seed)
    return KarmadaLikeStrategy(members)
