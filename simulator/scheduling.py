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
* scoring (:class:`Scoring`): ``least-allocated`` (kube's default), ``most-allocated``,
  ``best-fit`` (the FGD paper's: CPU and GPU left after the pod, normalised to a
  128-core, 8-GPU node) or ``random``; ties are broken with the seeded random
  generator, so runs are reproducible;
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

Speed: a what-if replay asks this core for tens of thousands of placements over a
thousand nodes, so filtering and scoring run over NumPy arrays (one row per node: free
and allocatable amounts per resource, GPU thousandths) kept in step with the
``NodeState`` objects, instead of Python loops over nodes. The arrays are derived
state; the ``NodeState`` dictionaries stay the record, and results are identical to
scoring node by node (``tests/simulator/test_sim_scoring_equivalence.py``).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, cast

import numpy as np
from numpy.typing import NDArray

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
_DEFAULT_MAX_PODS: Final = 110

#: Thousandths of one GPU. Nodes whose GPUs are shared by thousandths (the what-if's
#: plain-GPU nodes) advertise this resource, 1000 per GPU.
RESOURCE_GPU_MILLI: Final = "nvidia.com/gpu-milli"
GPU_MILLI: Final = 1000
#: best-fit's normalisation, as in the FGD paper's simulator: a node of 128 cores and 8 GPUs.
BEST_FIT_MAX_CPU_MILLI: Final = 128_000
BEST_FIT_MAX_GPU_MILLI: Final = 8 * GPU_MILLI
_BEST_FIT_WEIGHT: Final = 0.5

_MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(\d+)g\.")
_MIG_SLICES: Final = 7

#: Array columns that are not Kubernetes resources (a space is never in a resource name).
POD_SLOTS_COLUMN: Final = "pod slots"

IntArray = NDArray[np.int64]
IndexArray = NDArray[np.intp]
_NO_ROWS: Final[IndexArray] = np.zeros(0, dtype=np.intp)


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
    * ``random``: a uniform draw among the feasible nodes.
    """

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
    #: Thousandths of a GPU one unit of each GPU resource is on this node (best-fit's GPU measure).
    gpu_milli: dict[str, int] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)

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
    state.gpu_milli = gpu_milli_per_unit(allocatable, inventory)
    return state


def gpu_milli_per_unit(allocatable: Mapping[str, int], inventory: NodeInventory | None) -> dict[str, int]:
    """Thousandths of a GPU one unit of each ``nvidia.com/*`` resource a node advertises is.

    From the device plugin's devices when the inventory is known (a whole GPU 1000, a MIG
    instance compute slices / 7 of that, a time-sliced share 1/N); otherwise 1000 for
    ``nvidia.com/gpu``, the profile's slices for ``nvidia.com/mig-<N>g.*``, 1 for
    :data:`RESOURCE_GPU_MILLI` and 0 for anything else.
    """
    units: dict[str, int] = {}
    devices = inventory.devices if inventory is not None else {}
    for resource in allocatable:
        if not resource.startswith("nvidia.com/"):
            continue
        known = devices.get(resource)
        mig = _MIG_RESOURCE.match(resource)
        if resource == RESOURCE_GPU_MILLI:
            units[resource] = 1
        elif known:
            units[resource] = round(known[0].share * GPU_MILLI)
        elif resource == "nvidia.com/gpu":
            units[resource] = GPU_MILLI
        elif mig is not None:
            units[resource] = round(int(mig.group(1)) * GPU_MILLI / _MIG_SLICES)
        else:
            units[resource] = 0
    return units


# --------------------------------------------------------------------------- the scheduler


def adaptive_nodes_to_find(node_count: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering."""
    if node_count < _MIN_FEASIBLE_NODES or percentage >= 100:
        return node_count
    if percentage <= 0:
        percentage = max(5, 50 - node_count // 125)
    return max(_MIN_FEASIBLE_NODES, node_count * percentage // 100)


@dataclass(frozen=True, slots=True)
class _Static:
    """Usage-independent filtering of one pod shape: what no allocation can change."""

    #: Rows of the nodes passing the label/taint filters.
    passing_rows: IndexArray
    #: Those of them whose allocatable could ever hold the pod (the only ones worth searching).
    capable_rows: IndexArray
    #: Why the other nodes failed.
    reasons: Counter[str]


@dataclass(frozen=True, slots=True)
class _Demand:
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


class ClusterState:
    """Nodes, their free capacity and devices, and every pod's allocation.

    The scheduler loop keeps one instance in step with the API objects: ``add_node``
    / ``remove_node`` as nodes come and go, ``assume`` for pods found already bound,
    ``release`` when a pod finishes or is deleted, and ``schedule`` for pending pods.

    Filtering and scoring read arrays with one row per node (in name order) and one
    column per resource: ``_alloc`` (allocatable), ``_free`` (allocatable minus
    requested; the :data:`POD_SLOTS_COLUMN` holds free pod slots), ``_units`` (GPU
    thousandths per unit) and ``_gpu_left`` (free GPU thousandths). They are built on
    first use after the node set changes and a node's row is rewritten whenever its
    requests change (``_node_changed``); subclasses that change ``requested`` call it too.
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
        self._static_cache: dict[tuple[Any, ...], _Static] = {}
        self._passing_cache: dict[tuple[Any, ...], tuple[IndexArray, Counter[str]]] = {}
        self._demand_cache: dict[tuple[tuple[str, int], ...], _Demand] = {}
        self._row: dict[str, int] = {}
        self._columns: dict[str, int] = {}
        self._built = False
        self._alloc: IntArray = np.zeros((0, 0), dtype=np.int64)
        self._free: IntArray = np.zeros((0, 0), dtype=np.int64)
        self._units: IntArray = np.zeros((0, 0), dtype=np.int64)
        self._gpu_left: IntArray = np.zeros(0, dtype=np.int64)

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
                state.gpu_milli = gpu_milli_per_unit(state.allocatable, state.inventory)
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
        self._row = {node.name: row for row, node in enumerate(self._order)}
        self._static_cache.clear()
        self._passing_cache.clear()
        self._demand_cache.clear()
        self._built = False

    # --- the arrays ----------------------------------------------------------------------

    def _extra_free(self, node: NodeState) -> Mapping[str, int]:
        """Further per-node amounts (array columns) that a pod's ``_extra_demand`` must fit.

        For constraints kube's resource counts cannot express (a subclass packing shares
        per device adds the largest free device). They never appear in failure reasons.
        """
        return {}

    def _extra_demand(self, pod: PodRequest) -> Mapping[str, int]:
        """The pod's amounts of the ``_extra_free`` columns (same for every pod of a shape)."""
        return {}

    def _column(self, name: str) -> int:
        """The array column of a resource, added (zero for every node) the first time it is seen."""
        column = self._columns.get(name)
        if column is None:
            column = self._columns[name] = len(self._columns)
            if self._built:
                pad = ((0, 0), (0, 1))
                self._alloc = np.pad(self._alloc, pad)
                self._free = np.pad(self._free, pad)
                self._units = np.pad(self._units, pad)
        return column

    def _ensure_arrays(self) -> None:
        if self._built:
            return
        names: dict[str, None] = {POD_SLOTS_COLUMN: None, "cpu": None, "memory": None}
        for node in self._order:
            names.update(dict.fromkeys(node.allocatable))
            names.update(dict.fromkeys(node.requested))
            names.update(dict.fromkeys(self._extra_free(node)))
        names.update(dict.fromkeys(self._columns))
        self._columns = {name: column for column, name in enumerate(names)}
        shape = (len(self._order), len(self._columns))
        self._alloc = np.zeros(shape, dtype=np.int64)
        self._free = np.zeros(shape, dtype=np.int64)
        self._units = np.zeros(shape, dtype=np.int64)
        self._gpu_left = np.zeros(len(self._order), dtype=np.int64)
        self._built = True
        for row, node in enumerate(self._order):
            self._write_row(row, node)

    def _node_changed(self, node: NodeState) -> None:
        """Bring the node's array row in step after its requests, pods or extras changed."""
        if self._built:
            row = self._row.get(node.name)
            if row is not None and self._order[row] is node:
                self._write_free(row, node)

    def _write_row(self, row: int, node: NodeState) -> None:
        column = self._column
        alloc_cells = [(column(name), amount) for name, amount in node.allocatable.items()]
        unit_cells = [(column(name), unit) for name, unit in node.gpu_milli.items()]
        alloc, units = self._alloc[row], self._units[row]
        alloc[:] = 0
        units[:] = 0
        for index, amount in alloc_cells:
            alloc[index] = amount
        for index, unit in unit_cells:
            units[index] = unit
        alloc[column(POD_SLOTS_COLUMN)] = 0
        self._write_free(row, node)

    def _write_free(self, row: int, node: NodeState) -> None:
        column = self._column
        used_cells = [(column(name), amount) for name, amount in node.requested.items()]
        extra_cells = [(column(name), amount) for name, amount in self._extra_free(node).items()]
        slots = column(POD_SLOTS_COLUMN)
        free = self._free[row]
        free[:] = self._alloc[row]
        for index, amount in used_cells:
            free[index] -= amount
        free[slots] = node.allocatable.get("pods", _DEFAULT_MAX_PODS) - node.pod_count
        for index, amount in extra_cells:
            free[index] = amount
        self._gpu_left[row] = node.gpu_milli_free()

    def _demand(self, pod: PodRequest) -> _Demand:
        key = tuple(pod.requests.items())
        cached = self._demand_cache.get(key)
        if cached is not None:
            return cached
        column = self._column
        requests = pod.requests
        fit = {column(resource): amount for resource, amount in requests.items()}
        slots = column(POD_SLOTS_COLUMN)
        fit[slots] = 1
        for name, amount in self._extra_demand(pod).items():
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
            if resource.startswith("nvidia.com/"):
                scored[resource] = amount
                gpus[resource] = amount
        demand = _Demand(
            fit_columns=np.fromiter(fit, dtype=np.intp, count=len(fit)),
            fit_amounts=np.fromiter(fit.values(), dtype=np.int64, count=len(fit)),
            reason_checks=tuple(checks),
            score_columns=np.array([column(r) for r in scored], dtype=np.intp),
            score_amounts=np.fromiter(scored.values(), dtype=np.int64, count=len(scored)),
            gpu_columns=np.array([column(r) for r in gpus], dtype=np.intp),
            gpu_amounts=np.fromiter(gpus.values(), dtype=np.int64, count=len(gpus)),
            cpu=requests.get("cpu", 0),
        )
        self._demand_cache[key] = demand
        return demand

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
            self._node_changed(state)
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
        self._node_changed(state)
        return allocation

    # --- filtering -----------------------------------------------------------------------

    def _static(self, pod: PodRequest) -> _Static:
        """Usage-independent filtering, cached per constraint and request shape."""
        key = (pod.constraint_key, tuple(sorted(pod.requests.items())))
        cached = self._static_cache.get(key)
        if cached is not None:
            return cached
        passing, reasons = self._passing(pod)
        capable = passing
        if len(passing) and pod.requests:
            columns = np.array([self._column(r) for r in pod.requests], dtype=np.intp)
            amounts = np.fromiter(pod.requests.values(), dtype=np.int64, count=len(columns))
            allocatable = self._alloc.take(columns, axis=1).take(passing, axis=0)
            capable = passing[(allocatable >= amounts).all(axis=1)]
        static = _Static(passing_rows=passing, capable_rows=capable, reasons=reasons)
        self._static_cache[key] = static
        return static

    def _passing(self, pod: PodRequest) -> tuple[IndexArray, Counter[str]]:
        """Rows passing the label and taint filters, and why the others failed (per constraint)."""
        key = pod.constraint_key
        cached = self._passing_cache.get(key)
        if cached is not None:
            return cached
        rows: list[int] = []
        reasons: Counter[str] = Counter()
        for row, node in enumerate(self._order):
            reason = _static_reason(pod, node)
            if reason is None:
                rows.append(row)
            else:
                reasons[reason] += 1
        result = (np.array(rows, dtype=np.intp), reasons)
        self._passing_cache[key] = result
        return result

    def _fit_mask(self, demand: _Demand, rows: IndexArray) -> NDArray[np.bool_]:
        """Per row: whether the pod fits the node now (kube's NodeResourcesFit plus the extras)."""
        free = self._free.take(demand.fit_columns, axis=1).take(rows, axis=0)
        return cast("NDArray[np.bool_]", (free >= demand.fit_amounts).all(axis=1))

    def _feasible_rows(self, pod: PodRequest) -> tuple[IndexArray, Counter[str]]:
        """Rows of the feasible nodes (up to kube's search limit) and, when none, the reasons per node.

        As kube-scheduler, the search starts where the previous pod's stopped and stops
        once it has found the nodes it wants.
        """
        self._ensure_arrays()
        static = self._static(pod)
        if not len(static.passing_rows):
            return _NO_ROWS, Counter(static.reasons)
        demand = self._demand(pod)
        wanted = adaptive_nodes_to_find(len(self._order), self.percentage)
        rows = static.capable_rows
        count = len(rows)
        if count:
            start = self._next_start % count
            fits = self._fit_mask(demand, rows)
            if start:
                fits = np.concatenate((fits[start:], fits[:start]))
            hits = np.flatnonzero(fits)
            if len(hits) >= wanted:
                hits = hits[:wanted]
                examined = int(hits[-1]) + 1
            else:
                examined = count
            self._next_start = (start + examined) % count
            if len(hits):
                found: IndexArray = rows[(hits + start) % count]
                return found, Counter()
        return _NO_ROWS, self._fit_reasons(static, demand)

    def _fit_reasons(self, static: _Static, demand: _Demand) -> Counter[str]:
        """The static reasons plus kube's resource reasons counted over the passing nodes.

        Reasons are added in the order a node-by-node walk would first meet them.
        """
        reasons = Counter(static.reasons)
        free = self._free.take(static.passing_rows, axis=0)
        found: list[tuple[int, int, str, int]] = []
        for position, (reason, column, amount) in enumerate(demand.reason_checks):
            short: NDArray[np.bool_] = free[:, column] < amount
            hits = int(np.count_nonzero(short))
            if hits:
                found.append((int(np.argmax(short)), position, reason, hits))
        for _, _, reason, hits in sorted(found):
            reasons[reason] += hits
        return reasons

    def feasible_nodes(self, pod: PodRequest) -> tuple[list[NodeState], Counter[str]]:
        """Feasible nodes (up to kube's search limit) and, when none, the reasons per node."""
        rows, reasons = self._feasible_rows(pod)
        order = self._order
        return [order[row] for row in rows], reasons

    def fits_somewhere(self, pod: PodRequest) -> bool:
        """Whether some node could take ``pod`` now (the whole cluster searched, nothing changed)."""
        self._ensure_arrays()
        rows = self._static(pod).capable_rows
        return bool(len(rows)) and bool(self._fit_mask(self._demand(pod), rows).any())

    # --- scoring -------------------------------------------------------------------------

    def score_nodes(self, pod: PodRequest, nodes: Sequence[NodeState]) -> list[int]:
        """Each node's score for ``pod`` under this state's :class:`Scoring` (0 under random)."""
        self._ensure_arrays()
        rows = np.array([self._row[node.name] for node in nodes], dtype=np.intp)
        return [int(score) for score in self._scores(self._demand(pod), rows)]

    def _scores(self, demand: _Demand, rows: IndexArray) -> IntArray:
        if self.scoring is Scoring.RANDOM:
            return np.zeros(len(rows), dtype=np.int64)
        if self.scoring is Scoring.BEST_FIT:
            return self._best_fit_scores(demand, rows)
        columns = demand.score_columns
        capacity = self._alloc.take(columns, axis=1).take(rows, axis=0)
        free = self._free.take(columns, axis=1).take(rows, axis=0)
        used = capacity - free + demand.score_amounts
        present = capacity > 0
        divisor = np.where(present, capacity, 1)
        if self.scoring is Scoring.MOST_ALLOCATED:
            part = np.where(used > capacity, 100, used * 100 // divisor)
        else:
            part = np.where(used > capacity, 0, (capacity - used) * 100 // divisor)
        total = np.where(present, part, 0).sum(axis=1)
        weight = present.sum(axis=1)
        scores: IntArray = np.where(weight > 0, total // np.maximum(weight, 1), 0)
        return scores

    def _best_fit_scores(self, demand: _Demand, rows: IndexArray) -> IntArray:
        cpu_left = self._free[rows, self._columns["cpu"]] - demand.cpu
        gpu_left = self._gpu_left[rows]
        if len(demand.gpu_columns):
            units = self._units.take(demand.gpu_columns, axis=1).take(rows, axis=0)
            gpu_left = gpu_left - (units * demand.gpu_amounts).sum(axis=1)
        # The FGD simulator's expression, term by term, so the float rounding is the same.
        left = (
            cpu_left / BEST_FIT_MAX_CPU_MILLI * _BEST_FIT_WEIGHT
            + gpu_left / BEST_FIT_MAX_GPU_MILLI * _BEST_FIT_WEIGHT
        )
        scores: IntArray = np.trunc((1.0 - left) * 100.0).astype(np.int64)
        return scores

    def _select(self, pod: PodRequest, rows: IndexArray) -> NodeState:
        """The node to bind: the best score, ties drawn with the seeded generator."""
        if len(rows) == 1:
            return self._order[int(rows[0])]
        if self.scoring is Scoring.RANDOM:
            return self._order[int(rows[self.rng.choice(range(len(rows)))])]
        scores = self._scores(self._demand(pod), rows)
        best = rows[scores == scores.max()]
        if len(best) == 1:
            return self._order[int(best[0])]
        return self._order[int(best[self.rng.choice(range(len(best)))])]

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
        rows, reasons = self._feasible_rows(pod)
        if not len(rows):
            return None, Unschedulable(pod.key, fit_error_message(len(self._order), reasons), dict(reasons))
        node = self._select(pod, rows)
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
