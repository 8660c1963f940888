"""What the simulated member's scheduler works on: pods, nodes, placements and their constants.

In: nothing but values; out: the frozen :class:`PodRequest` (a pod as the scheduler
needs it), :class:`NodeState` (a node's static facts plus what is requested on it),
:class:`Requirement` (node selector terms; :class:`FrozenTaint` / :class:`FrozenToleration` and the
matching rules are :mod:`controlplane.apis.pods`),
:class:`Allocation`, :class:`Binding`, :class:`Unschedulable` and :class:`ScheduleResult`
(what one scheduling pass decided), :class:`Scoring` (how feasible nodes are ranked) and
:class:`FilterReason` (kube-scheduler's per-node failure texts). :mod:`.reading` builds
these from API objects; :mod:`.cluster_state` schedules over them.

Gangs: a pod belongs to one when it has the label :data:`LABEL_POD_GROUP` (the
coscheduling plugin's key; the gang needs :data:`ANNOTATION_MIN_MEMBER` pods, an
annotation, else all pods of the group that exist), or else when its controller owner
is one of :data:`GANG_OWNER_KINDS` (the gang is then every pod of that owner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.cluster_v1alpha1 import NodeScoring
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.pods import FrozenTaint, FrozenToleration, requirement_matches
from simulator.devices import Device, NodeInventory

#: Pod-group label (scheduler-plugins coscheduling) and the simulator's min-member annotation.
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
ANNOTATION_MIN_MEMBER: Final = "scheduling.x-k8s.io/min-member"
#: Controller kinds whose pods form a gang without a pod-group label.
GANG_OWNER_KINDS: Final = frozenset(TRAINING_KINDS)

TAINT_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"

#: Thousandths of one GPU. Nodes whose GPUs are shared by thousandths (the what-if's
#: plain-GPU nodes) advertise this resource, 1000 per GPU.
RESOURCE_GPU_MILLI: Final = "nvidia.com/gpu-milli"
GPU_MILLI: Final = 1000


class Scoring(StrEnum):
    """How the member scheduler ranks feasible nodes: the highest score wins, ties go to the seeded generator.

    * ``least-allocated`` (kube's NodeResourcesFit default): for cpu and memory (kube's
      non-zero defaults of 100m and 200 MiB when the pod asks for less) and each
      ``nvidia.com/*`` resource the pod requests, ``(capacity - used) * 100 // capacity``
      with ``used`` counting the pod (0 when it would not fit); the score is the integer
      mean over the resources the node has.
    * ``most-allocated``: the same with ``used * 100 // capacity`` (100 when over).
    * ``best-fit``: the FGD paper's Best-fit (Weng et al., ATC '23; ``best_fit_score.go``
      of its Kubernetes scheduler simulator). With CPU left and GPU left on the node after
      the pod, in thousandths, ``left = (cpu left / 128,000) * 0.5 + (GPU left / 8,000) *
      0.5`` and the score is ``int((1 - left) * 100)``: the node the pod leaves the least
      room on wins. CPU and GPU count together, so a node whose CPUs the pod would exhaust
      is as full as one whose GPUs it would; truncating to a whole 0..100 score makes near
      ties real ties, broken at random as kube-scheduler breaks ties. GPU left counts free
      whole GPUs as 1000, MIG instances as compute slices / 7 of that, time-sliced shares as
      1/N (unknown GPU resources as 0); on a node that advertises
      :data:`RESOURCE_GPU_MILLI` it is that resource's free amount alone, and the pod's whole
      GPUs count 1000 each. CPU left does not use kube's non-zero default.
    * ``fgd``: the FGD paper's Fragmentation Gradient Descent
      (:mod:`controlplane.apis.fragmentation`): the score is
      ``int(sigmoid((F before - F after) / 1000) x 100)`` with ``F`` the node's expected
      unusable free GPU thousandths for the task mix (given to the state, else learned from
      the pods it places); a share of one GPU goes to the GPU that scores best.
      Ties go to the first node in name order (not to the seeded generator).
    * ``random``: a uniform draw among the feasible nodes.
    """

    LEAST_ALLOCATED = "least-allocated"
    MOST_ALLOCATED = "most-allocated"
    BEST_FIT = "best-fit"
    FGD = "fgd"
    RANDOM = "random"

    @property
    def node_scoring(self) -> NodeScoring:
        """What a member agent says of this scoring (``Cluster.status.nodeScoring``): best-fit packs
        as kube's MostAllocated does; random is none of kube's."""
        return _NODE_SCORING[self]


_NODE_SCORING: Final = {
    Scoring.LEAST_ALLOCATED: NodeScoring.LEAST_ALLOCATED,
    Scoring.MOST_ALLOCATED: NodeScoring.MOST_ALLOCATED,
    Scoring.BEST_FIT: NodeScoring.MOST_ALLOCATED,
    Scoring.FGD: NodeScoring.FRAGMENTATION_AWARE,
    Scoring.RANDOM: NodeScoring.UNKNOWN,
}


class FilterReason(StrEnum):
    """kube-scheduler's per-node failure texts (resource reasons are built from these)."""

    #: The DynamicResources plugin's: an allocated claim the pod names is not available on the node.
    CLAIM_NOT_AVAILABLE = "resourceclaim not available on the node"
    UNSCHEDULABLE = "node(s) were unschedulable"
    AFFINITY = "node(s) didn't match Pod's node affinity/selector"
    TOO_MANY_PODS = "Too many pods"
    INSUFFICIENT = "Insufficient"
    UNTOLERATED_TAINT = "node(s) had untolerated taint"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions``/``matchFields`` entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...]
    field: bool = False

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.field:
            value: str | None = name if self.key == "metadata.name" else None
        else:
            value = labels.get(self.key)
        return requirement_matches(self.operator, self.values, value)


#: A node selector term: all requirements must hold (terms are ORed).
SelectorTerm = tuple[Requirement, ...]
#: A ``preferredDuringSchedulingIgnoredDuringExecution`` entry: its weight and its term.
PreferredTerm = tuple[int, SelectorTerm]


@dataclass(frozen=True, slots=True)
class SharedClaim:
    """A DRA ResourceClaim pods name directly (``resourceClaimName``): its ``namespace/name`` and the
    devices it asks, in base units (``nvidia.com/gpu``, ``nvidia.com/mig-<profile>``)."""

    key: str
    requests: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What the scheduler needs from a pod, read once from its manifest."""

    key: str
    namespace: str
    name: str
    #: Effective requests in base units (cpu millicores, memory bytes, devices as counts).
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: Required node affinity terms (ORed); None when the pod has none.
    affinity: tuple[SelectorTerm, ...] | None = None
    #: Preferred node affinity terms (scoring only, :mod:`.preferences`).
    preferred: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[FrozenToleration, ...] = ()
    gang: str | None = None
    #: Pods the gang needs before any binds; 0 means all pods of the gang that exist.
    min_member: int = 0
    priority: int = 0
    #: ``spec.nodeName`` when the pod was created already bound.
    node_name: str | None = None
    #: The PersistentVolumeClaims its volumes name (``persistentVolumeClaim.claimName``), in order.
    claims: tuple[str, ...] = ()
    #: The DRA ResourceClaims it names directly, whose devices it shares with the other pods naming
    #: them (not in ``requests``: :mod:`.sharedclaims` holds them once).
    shared_claims: tuple[SharedClaim, ...] = ()
    #: The node the held shared claims are available on ("": on different nodes, so on none);
    #: None: no claim of the pod is held yet. Set by the scheduler for one cycle.
    claim_node: str | None = None

    @property
    def constraint_key(self) -> tuple[Any, ...]:
        return (tuple(sorted(self.node_selector.items())), self.affinity, self.tolerations)


@dataclass(slots=True)
class NodeState:
    """One node as the scheduler tracks it: static facts plus what is already requested."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[FrozenTaint, ...]
    unschedulable: bool
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    pod_count: int = 0
    inventory: NodeInventory | None = None
    #: Free devices by resource, in hand-out order.
    free_devices: dict[str, list[Device]] = field(default_factory=dict)
    #: Thousandths of a GPU one unit of each GPU resource is on this node (best-fit's GPU measure).
    gpu_milli: dict[str, int] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)

    def take(self, requests: Mapping[str, int], device_ids: Sequence[str] | None = None) -> list[Device]:
        """Count ``requests`` as requested here and take their devices (the named ones first)."""
        devices: list[Device] = []
        wanted = set(device_ids or ())
        for resource, amount in requests.items():
            self.requested[resource] = self.requested.get(resource, 0) + amount
            free = self.free_devices.get(resource)
            if not free:
                continue
            chosen = [d for d in free if d.id in wanted][:amount] if wanted else []
            if len(chosen) < amount:
                rest = [d for d in free if d not in chosen]
                chosen += rest[: amount - len(chosen)]
            taken = {d.id for d in chosen}
            self.free_devices[resource] = [d for d in free if d.id not in taken]
            devices.extend(chosen)
        return devices

    def give_back(self, requests: Mapping[str, int], devices: Iterable[Device]) -> None:
        """Undo :meth:`take`: the requests no longer counted, the devices free again in hand-out order."""
        for resource, amount in requests.items():
            self.requested[resource] = self.requested.get(resource, 0) - amount
        for device in devices:
            free = self.free_devices.setdefault(device.resource, [])
            free.append(device)
            if self.inventory is not None:
                order = {d.id: i for i, d in enumerate(self.inventory.devices.get(device.resource, ()))}
                free.sort(key=lambda d: order.get(d.id, 0))

    def gpu_milli_free(self) -> int:
        """Free GPU capacity in thousandths of a GPU, as best-fit measures it."""
        if RESOURCE_GPU_MILLI in self.allocatable:
            return self.free(RESOURCE_GPU_MILLI)
        return sum(self.free(resource) * unit for resource, unit in self.gpu_milli.items())


@dataclass(frozen=True, slots=True)
class Allocation:
    pod_key: str
    node: str
    requests: Mapping[str, int]
    devices: tuple[Device, ...]
    gang: str | None = None


@dataclass(frozen=True, slots=True)
class Binding:
    pod_key: str
    node: str
    devices: tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class Unschedulable:
    pod_key: str
    message: str
    #: Nodes per reason (empty for gang waits).
    reasons: Mapping[str, int]


@dataclass(slots=True)
class ScheduleResult:
    bindings: list[Binding] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)


def gpu_share(devices: Iterable[Device]) -> float:
    """How many GPUs' worth the devices are (MIG slices as compute slices / 7, shares as 1/N)."""
    return math.fsum(d.share for d in devices)
