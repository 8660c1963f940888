"""The simulated member cluster's scheduler core: kube-scheduler plus the NVIDIA device plugin.

The hub only estimates; a member's own scheduler makes the final per-node placement.
This module decides those placements the way kube-scheduler would, so that the hub
sees realistic outcomes (fragmentation included) and realistic refusals:

* filters, in kube's plugin order, stopping at the first that fails on a node:
  NodeUnschedulable, TaintToleration (NoSchedule/NoExecute taints), NodeAffinity
  (``nodeSelector`` and required node affinity), NodeResourcesFit (cpu, memory, pods,
  ``nvidia.com/gpu``, every ``nvidia.com/mig-*`` and shared-GPU resource);
* like kube, it stops looking once it has found ``percentageOfNodesToScore`` feasible
  nodes (adaptive by default: 50% minus 1% per 125 nodes, at least 5%, at least 100
  nodes), starting where the previous pod left off;
* scoring: ``least-allocated`` (kube's default), ``most-allocated``, ``best-fit``
  (smallest leftover of the pod's GPU resource, then of cpu) or ``random``; ties are
  broken with the seeded random generator, so runs are reproducible;
* gangs bind all-or-nothing. A pod belongs to a gang when it has the label
  ``scheduling.x-k8s.io/pod-group: <name>`` (the coscheduling plugin's key; the
  gang needs ``scheduling.x-k8s.io/min-member: "<n>"`` pods, an annotation, else all
  pods of the group that exist), or else when its controller owner is a PyTorchJob
  or MPIJob (the gang is then every pod of that owner);
* a pod that fits nowhere gets kube's message, reasons counted per node and sorted as
  kube sorts them (as strings): ``0/12 nodes are available: 4 node(s) didn't match
  Pod's node affinity/selector, 8 Insufficient nvidia.com/mig-3g.40gb.``

Each binding names the concrete devices (GPU index / MIG instance / share) the pod
gets, for DCGM. Pure: no I/O; :class:`ClusterState` is plain mutable memory.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.quantity import QuantityError, to_int
from simulator.devices import Device, NodeInventory

#: Pod-group label (scheduler-plugins coscheduling) and the simulator's min-member annotation.
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
ANNOTATION_MIN_MEMBER: Final = "scheduling.x-k8s.io/min-member"
#: Controller kinds whose pods form a gang without a pod-group label.
GANG_OWNER_KINDS: Final = frozenset({"PyTorchJob", "MPIJob"})

TAINT_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"

#: kube-scheduler's non-zero defaults for pods that request nothing (scoring only).
_DEFAULT_CPU_MILLI: Final = 100
_DEFAULT_MEMORY: Final = 200 * 1024 * 1024
_MIN_FEASIBLE_NODES: Final = 100


class Scoring(StrEnum):
    LEAST_ALLOCATED = "least-allocated"
    MOST_ALLOCATED = "most-allocated"
    BEST_FIT = "best-fit"
    RANDOM = "random"


class FilterReason(StrEnum):
    """kube-scheduler's per-node failure texts (resource reasons are built from these)."""

    UNSCHEDULABLE = "node(s) were unschedulable"
    AFFINITY = "node(s) didn't match Pod's node affinity/selector"
    TOO_MANY_PODS = "Too many pods"
    INSUFFICIENT = "Insufficient"
    UNTOLERATED_TAINT = "node(s) had untolerated taint"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


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
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


#: A node selector term: all requirements must hold (terms are ORed).
SelectorTerm = tuple[Requirement, ...]


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
    tolerations: tuple[Toleration, ...] = ()
    gang: str | None = None
    #: Pods the gang needs before any binds; 0 means all pods of the gang that exist.
    min_member: int = 0
    priority: int = 0
    #: ``spec.nodeName`` when the pod was created already bound.
    node_name: str | None = None

    @property
    def constraint_key(self) -> tuple[Any, ...]:
        return (tuple(sorted(self.node_selector.items())), self.affinity, self.tolerations)


@dataclass(slots=True)
class NodeState:
    """One node as the scheduler tracks it: static facts plus what is already requested."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    pod_count: int = 0
    inventory: NodeInventory | None = None
    #: Free devices by resource, in hand-out order.
    free_devices: dict[str, list[Device]] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)


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


# --------------------------------------------------------------------------- reading objects


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """A pod's effective requests: max(sum of containers, largest init container), per resource.

    As in kube, a container's request defaults to its limit when only the limit is set
    (always the case for extended resources such as ``nvidia.com/gpu``).
    """
    total: Counter[str] = Counter()
    for container in spec.get("containers") or []:
        total.update(_container_requests(container))
    for container in spec.get("initContainers") or []:
        for name, amount in _container_requests(container).items():
            if amount > total[name]:
                total[name] = amount
    for name, amount in (spec.get("overhead") or {}).items():
        total[name] += to_int(name, amount)
    return {name: amount for name, amount in total.items() if amount > 0}


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: to_int(name, qty) for name, qty in merged.items()}


def _terms(affinity: Mapping[str, Any] | None) -> tuple[SelectorTerm, ...] | None:
    required = (
        ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return None
    out: list[SelectorTerm] = []
    for term in terms:
        reqs = [
            Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()))
            for e in term.get("matchExpressions") or []
        ]
        reqs += [
            Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()), field=True)
            for e in term.get("matchFields") or []
        ]
        out.append(tuple(reqs))
    return tuple(out)


def pod_request(pod: Mapping[str, Any]) -> PodRequest:
    """Read a v1 Pod dict. Raises ValueError for a malformed quantity."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    name = meta["name"]
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    gang: str | None = None
    min_member = 0
    group = labels.get(LABEL_POD_GROUP)
    if group:
        gang = f"{namespace}/{group}"
        try:
            min_member = max(0, int(annotations.get(ANNOTATION_MIN_MEMBER, 0)))
        except ValueError:
            min_member = 0
    else:
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") in GANG_OWNER_KINDS:
                gang = f"{namespace}/{ref['kind']}/{ref['name']}"
                break
    try:
        requests = pod_requests(spec)
    except QuantityError as exc:
        raise ValueError(f"pod {namespace}/{name}: {exc}") from exc
    tolerations = tuple(
        Toleration(
            t.get("key") or "",
            t.get("operator") or "Equal",
            t.get("value") or "",
            t.get("effect") or "",
        )
        for t in spec.get("tolerations") or []
    )
    return PodRequest(
        key=f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        requests=requests,
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=_terms(spec.get("affinity")),
        tolerations=tolerations,
        gang=gang,
        min_member=min_member,
        priority=int(spec.get("priority") or 0),
        node_name=spec.get("nodeName") or None,
    )


def node_state(node: Mapping[str, Any], inventory: NodeInventory | None = None) -> NodeState:
    """Read a v1 Node dict (a node that is not Ready gets kube's not-ready taint)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = [
        Taint(t["key"], t.get("value") or "", t["effect"])
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute", "PreferNoSchedule")
    ]
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    if not ready and not any(t.key == TAINT_NOT_READY for t in taints):
        taints.append(Taint(TAINT_NOT_READY, "", "NoSchedule"))
    allocatable = {name: to_int(name, qty) for name, qty in (status.get("allocatable") or {}).items()}
    state = NodeState(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=allocatable,
        inventory=inventory,
    )
    if inventory is not None:
        state.free_devices = {resource: list(devices) for resource, devices in inventory.devices.items()}
    return state


# --------------------------------------------------------------------------- the scheduler


def adaptive_nodes_to_find(node_count: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering."""
    if node_count < _MIN_FEASIBLE_NODES or percentage >= 100:
        return node_count
    if percentage <= 0:
        percentage = max(5, 50 - node_count // 125)
    return max(_MIN_FEASIBLE_NODES, node_count * percentage // 100)


class ClusterState:
    """Nodes, their free capacity and devices, and every pod's allocation.

    The scheduler loop keeps one instance in step with the API objects: ``add_node``
    / ``remove_node`` as nodes come and go, ``assume`` for pods found already bound,
    ``release`` when a pod finishes or is deleted, and ``schedule`` for pending pods.
    """

    def __init__(
        self,
        *,
        scoring: Scoring = Scoring.LEAST_ALLOCATED,
        seed: int | None = None,
        percentage_of_nodes_to_score: int = 0,
    ) -> None:
        self.scoring = Scoring(scoring)
        self.rng = random.Random(seed)
        self.percentage = percentage_of_nodes_to_score
        self.nodes: dict[str, NodeState] = {}
        self.allocations: dict[str, Allocation] = {}
        self._order: list[NodeState] = []
        self._next_start = 0
        self._static_cache: dict[tuple[Any, ...], tuple[list[NodeState], list[NodeState], Counter[str]]] = {}

    # --- nodes -------------------------------------------------------------------------

    def add_node(self, node: Mapping[str, Any], inventory: NodeInventory | None = None) -> None:
        """Add or refresh a node; its existing allocations are kept."""
        state = node_state(node, inventory)
        old = self.nodes.get(state.name)
        if old is not None:
            state.requested = old.requested
            state.pod_count = old.pod_count
            if inventory is None:
                state.inventory = old.inventory
            taken = {d.id for a in self.allocations.values() if a.node == state.name for d in a.devices}
            base = state.inventory.devices if state.inventory else {}
            state.free_devices = {r: [d for d in ds if d.id not in taken] for r, ds in base.items()}
        self.nodes[state.name] = state
        self._reindex()

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self._reindex()

    def _reindex(self) -> None:
        self._order = sorted(self.nodes.values(), key=lambda n: n.name)
        self._static_cache.clear()

    # --- allocations ---------------------------------------------------------------------

    def assume(self, pod: PodRequest, node: str, device_ids: Sequence[str] | None = None) -> Allocation:
        """Record a pod already bound to ``node`` (taking the named devices when known)."""
        existing = self.allocations.get(pod.key)
        if existing is not None:
            return existing
        state = self.nodes.get(node)
        if state is None:
            allocation = Allocation(pod.key, node, dict(pod.requests), (), pod.gang)
            self.allocations[pod.key] = allocation
            return allocation
        return self._allocate(pod, state, device_ids=device_ids)

    def release(self, pod_key: str) -> Allocation | None:
        allocation = self.allocations.pop(pod_key, None)
        if allocation is None:
            return None
        state = self.nodes.get(allocation.node)
        if state is not None:
            for resource, amount in allocation.requests.items():
                state.requested[resource] = state.requested.get(resource, 0) - amount
            state.pod_count -= 1
            for device in allocation.devices:
                free = state.free_devices.setdefault(device.resource, [])
                free.append(device)
                if state.inventory is not None:
                    order = {d.id: i for i, d in enumerate(state.inventory.devices.get(device.resource, ()))}
                    free.sort(key=lambda d: order.get(d.id, 0))
        return allocation

    def _allocate(
        self, pod: PodRequest, state: NodeState, *, device_ids: Sequence[str] | None = None
    ) -> Allocation:
        devices: list[Device] = []
        for resource, amount in pod.requests.items():
            state.requested[resource] = state.requested.get(resource, 0) + amount
            free = state.free_devices.get(resource)
            if not free:
                continue
            if device_ids:
                wanted = set(device_ids)
                chosen = [d for d in free if d.id in wanted][:amount]
            else:
                chosen = []
            if len(chosen) < amount:
                rest = [d for d in free if d not in chosen]
                chosen += rest[: amount - len(chosen)]
            taken = {d.id for d in chosen}
            state.free_devices[resource] = [d for d in free if d.id not in taken]
            devices.extend(chosen)
        state.pod_count += 1
        allocation = Allocation(pod.key, state.name, dict(pod.requests), tuple(devices), pod.gang)
        self.allocations[pod.key] = allocation
        return allocation

    # --- filtering -----------------------------------------------------------------------

    def _static_candidates(self, pod: PodRequest) -> tuple[list[NodeState], list[NodeState], Counter[str]]:
        """Usage-independent filtering, cached per constraint and request shape.

        Returns the nodes passing the label/taint filters, those of them whose
        allocatable could ever hold the pod (the only ones worth searching), and the
        reasons the other nodes failed.
        """
        key = (pod.constraint_key, tuple(sorted(pod.requests.items())))
        cached = self._static_cache.get(key)
        if cached is not None:
            return cached
        passing: list[NodeState] = []
        capable: list[NodeState] = []
        reasons: Counter[str] = Counter()
        requests = pod.requests.items()
        for node in self._order:
            reason = _static_reason(pod, node)
            if reason is not None:
                reasons[reason] += 1
                continue
            passing.append(node)
            allocatable = node.allocatable
            if all(amount <= allocatable.get(resource, 0) for resource, amount in requests):
                capable.append(node)
        self._static_cache[key] = (passing, capable, reasons)
        return passing, capable, reasons

    def _fit_reasons(self, pod: PodRequest, node: NodeState) -> list[str]:
        reasons = []
        if node.pod_count + 1 > node.allocatable.get("pods", 110):
            reasons.append(FilterReason.TOO_MANY_PODS.value)
        for resource, amount in pod.requests.items():
            if amount > node.allocatable.get(resource, 0) - node.requested.get(resource, 0):
                reasons.append(f"{FilterReason.INSUFFICIENT.value} {resource}")
        return reasons

    def _fits(self, pod: PodRequest, node: NodeState) -> bool:
        if node.pod_count >= node.allocatable.get("pods", 110):
            return False
        allocatable = node.allocatable
        requested = node.requested
        for resource, amount in pod.requests.items():
            if amount > allocatable.get(resource, 0) - requested.get(resource, 0):
                return False
        return True

    def feasible_nodes(self, pod: PodRequest) -> tuple[list[NodeState], Counter[str]]:
        """Feasible nodes (up to kube's search limit) and, when none, the reasons per node."""
        passing, candidates, static_reasons = self._static_candidates(pod)
        total = len(self._order)
        if not passing:
            return [], Counter(static_reasons)
        wanted = adaptive_nodes_to_find(total, self.percentage)
        count = len(candidates)
        start = self._next_start % count if count else 0
        feasible: list[NodeState] = []
        examined = 0
        for offset in range(count):
            node = candidates[(start + offset) % count]
            examined += 1
            if self._fits(pod, node):
                feasible.append(node)
                if len(feasible) >= wanted:
                    break
        if count:
            self._next_start = (start + examined) % count
        if feasible:
            return feasible, Counter()
        reasons = Counter(static_reasons)
        for node in passing:
            for reason in self._fit_reasons(pod, node):
                reasons[reason] += 1
        return [], reasons

    # --- scoring -------------------------------------------------------------------------

    def _select(self, pod: PodRequest, feasible: list[NodeState]) -> NodeState:
        if len(feasible) == 1:
            return feasible[0]
        if self.scoring is Scoring.RANDOM:
            return self.rng.choice(feasible)
        best: list[NodeState] = []
        best_score: tuple[float, ...] | None = None
        for node in feasible:
            score = self._score(pod, node)
            if best_score is None or score > best_score:
                best_score, best = score, [node]
            elif score == best_score:
                best.append(node)
        return best[0] if len(best) == 1 else self.rng.choice(best)

    def _score(self, pod: PodRequest, node: NodeState) -> tuple[float, ...]:
        requests = pod.requests
        if self.scoring is Scoring.BEST_FIT:
            gpu_left = sum(
                node.free(resource) - amount
                for resource, amount in requests.items()
                if resource.startswith("nvidia.com/")
            )
            cpu_alloc = node.allocatable.get("cpu", 0) or 1
            cpu_left = (node.free("cpu") - requests.get("cpu", 0)) / cpu_alloc
            return (-gpu_left, -cpu_left)
        resources = {"cpu": max(requests.get("cpu", 0), _DEFAULT_CPU_MILLI)}
        resources["memory"] = max(requests.get("memory", 0), _DEFAULT_MEMORY)
        for resource, amount in requests.items():
            if resource.startswith("nvidia.com/"):
                resources[resource] = amount
        total = 0
        weight = 0
        most = self.scoring is Scoring.MOST_ALLOCATED
        for resource, amount in resources.items():
            capacity = node.allocatable.get(resource, 0)
            if capacity <= 0:
                continue
            used = node.requested.get(resource, 0) + amount
            if used > capacity:
                part = 0 if not most else 100
            elif most:
                part = used * 100 // capacity
            else:
                part = (capacity - used) * 100 // capacity
            total += part
            weight += 1
        return (total // weight if weight else 0,)

    # --- the cycle -----------------------------------------------------------------------

    def schedule(self, pods: Iterable[PodRequest]) -> ScheduleResult:
        """Place pending pods (highest priority first, then in the order given)."""
        result = ScheduleResult()
        ordered = sorted(pods, key=lambda p: -p.priority)
        gangs: dict[str, list[PodRequest]] = {}
        singles: list[PodRequest | str] = []
        for pod in ordered:
            if pod.key in self.allocations:
                continue
            if pod.gang is None:
                singles.append(pod)
            else:
                if pod.gang not in gangs:
                    singles.append(pod.gang)
                    gangs[pod.gang] = []
                gangs[pod.gang].append(pod)
        for item in singles:
            if isinstance(item, str):
                self._schedule_gang(item, gangs[item], result)
                continue
            binding, failure = self._schedule_one(item)
            if binding is not None:
                result.bindings.append(binding)
            elif failure is not None:
                result.unschedulable.append(failure)
        return result

    def _schedule_one(self, pod: PodRequest) -> tuple[Binding | None, Unschedulable | None]:
        if pod.node_name is not None:
            allocation = self.assume(pod, pod.node_name)
            return Binding(pod.key, allocation.node, allocation.devices), None
        feasible, reasons = self.feasible_nodes(pod)
        if not feasible:
            return None, Unschedulable(pod.key, fit_error_message(len(self._order), reasons), dict(reasons))
        node = self._select(pod, feasible)
        allocation = self._allocate(pod, node)
        return Binding(pod.key, node.name, allocation.devices), None

    def _schedule_gang(self, gang: str, members: list[PodRequest], result: ScheduleResult) -> None:
        bound = sum(1 for a in self.allocations.values() if a.gang == gang)
        need = max((p.min_member for p in members), default=0)
        present = bound + len(members)
        if need and present < need:
            message = f"pod group {gang} has {present} of the {need} pods it needs (min-member); waiting for the rest"
            result.unschedulable.extend(Unschedulable(p.key, message, {}) for p in members)
            return
        placed: list[Binding] = []
        for pod in members:
            binding, failure = self._schedule_one(pod)
            if binding is not None:
                placed.append(binding)
                continue
            assert failure is not None
            for done in placed:
                self.release(done.pod_key)
            sibling = f"pod group {gang} cannot be placed all together: pod {pod.name}: {failure.message}"
            for other in members:
                if other.key == pod.key:
                    result.unschedulable.append(failure)
                else:
                    result.unschedulable.append(Unschedulable(other.key, sibling, failure.reasons))
            return
        result.bindings.extend(placed)


def _static_reason(pod: PodRequest, node: NodeState) -> str | None:
    """The first usage-independent filter that rejects ``node``, in kube's plugin order."""
    if node.unschedulable and not any(
        t.tolerates(Taint(TAINT_UNSCHEDULABLE, "", "NoSchedule")) for t in pod.tolerations
    ):
        return FilterReason.UNSCHEDULABLE.value
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in pod.tolerations):
            return f"{FilterReason.UNTOLERATED_TAINT.value} {{{taint.key}: {taint.value}}}"
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return FilterReason.AFFINITY.value
    if pod.affinity is not None and not any(
        all(req.matches(node.name, labels) for req in term) for term in pod.affinity
    ):
        return FilterReason.AFFINITY.value
    return None


def fit_error_message(node_count: int, reasons: Mapping[str, int]) -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <count reason>, ....``"""
    if node_count == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{node_count} nodes are available: {', '.join(parts)}."


def gpu_share(devices: Iterable[Device]) -> float:
    """How many GPUs' worth the devices are (MIG slices as compute slices / 7, shares as 1/N)."""
    return math.fsum(d.share for d in devices)
