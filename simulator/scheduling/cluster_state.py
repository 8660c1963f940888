"""The simulated member's scheduler: :class:`ClusterState`, its nodes, allocations and scheduling cycle.

In: nodes (``add_node`` / ``remove_node``), pods already bound (``assume``), pods that
finished (``release``) and pending pods (``schedule``); out: a
:class:`~.model.ScheduleResult` of bindings (with the concrete devices each pod gets, for
DCGM) and unschedulable pods with kube's message. Gangs bind all-or-nothing. Filtering
(:mod:`.filtering` plus resource fit) and scoring (:class:`~.model.Scoring`: :mod:`.scoring`,
:mod:`.fgd`) run over NumPy arrays with one row per node, kept in step with the
:class:`~.model.NodeState` objects (a pod shape's columns: :mod:`.demand`); ties are broken
with the seeded generator, so runs are reproducible. Pure: no I/O; the state is plain mutable memory.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import numpy as np
from numpy.typing import NDArray

from controlplane.apis.constants import LABEL_GPU_PRODUCT
from controlplane.apis.fragmentation import DemandMix, TaskShape
from controlplane.apis.gpus import is_nvidia_resource
from simulator.devices import NodeInventory
from simulator.scheduling.demand import POD_SLOTS_COLUMN, Demand, IndexArray, IntArray, request_demand
from simulator.scheduling.fgd import FgdRows, device_slots, pod_task, slots_after
from simulator.scheduling.filtering import adaptive_nodes_to_find, fit_error_message, static_reason
from simulator.scheduling.model import (
    Allocation,
    Binding,
    FilterReason,
    NodeState,
    PodRequest,
    ScheduleResult,
    Scoring,
    Unschedulable,
)
from simulator.scheduling.preferences import Preferences
from simulator.scheduling.reading import gpu_milli_per_unit, node_state
from simulator.scheduling.scoring import allocated_scores, best_fit_scores
from simulator.scheduling.sharedclaims import SharedClaims

#: kube's default pod capacity of a node that declares none.
_DEFAULT_MAX_PODS: Final = 110

_NO_ROWS: Final[IndexArray] = np.zeros(0, dtype=np.intp)


@dataclass(frozen=True, slots=True)
class _Static:
    """Usage-independent filtering of one pod shape: what no allocation can change."""

    #: Rows of the nodes passing the label/taint filters.
    passing_rows: IndexArray
    #: Those of them whose allocatable could ever hold the pod (the only ones worth searching).
    capable_rows: IndexArray
    #: Why the other nodes failed.
    reasons: Counter[str]


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
        demand_mix: DemandMix | None = None,
    ) -> None:
        self.scoring = Scoring(scoring)
        #: FGD's task mix; None learns it from the pods this state places.
        self.demand_mix = demand_mix
        self._seen: Counter[TaskShape] = Counter()
        self._learned: DemandMix | None = None
        self._fgd: FgdRows | None = None
        self.rng = random.Random(seed)
        self.percentage = percentage_of_nodes_to_score
        self.nodes: dict[str, NodeState] = {}
        self.allocations: dict[str, Allocation] = {}
        #: The DRA claims pods name directly, held once on the node they were allocated on.
        self.shared = SharedClaims()
        self._order: list[NodeState] = []
        self._next_start = 0
        self._static_cache: dict[tuple[Any, ...], _Static] = {}
        self._passing_cache: dict[tuple[Any, ...], tuple[IndexArray, Counter[str]]] = {}
        self._demand_cache: dict[tuple[tuple[str, int], ...], Demand] = {}
        self._preferences = Preferences()
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

    def add_uniform_nodes(self, nodes: Iterable[Mapping[str, Any]], inventory: NodeInventory | None = None) -> None:
        """Add many new nodes at once (one re-sort instead of one per node), all with ``inventory``."""
        self.add_node_states(node_state(node, inventory) for node in nodes)

    def add_node_states(self, states: Iterable[NodeState]) -> None:
        """Add many new nodes, already read (one re-sort for all of them)."""
        for state in states:
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
        self._preferences.clear()
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
        if self.scoring is Scoring.FGD:
            width = max((len(self._gpu_slots(node)) for node in self._order), default=0)
            self._fgd = FgdRows(len(self._order), width)
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
        if self._fgd is not None:
            self._fgd.set_row(row, self._gpu_slots(node), node.labels.get(LABEL_GPU_PRODUCT, ""))

    def _demand(self, pod: PodRequest) -> Demand:
        key = tuple(pod.requests.items())
        cached = self._demand_cache.get(key)
        if cached is None:
            cached = self._demand_cache[key] = request_demand(pod.requests, self._extra_demand(pod), self._column)
        return cached

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
        """Free what a pod holds, and the shared claims it was the last user of (kube deallocates them)."""
        for hold in self.shared.leave(pod_key):
            if (node := self.nodes.get(hold.node)) is not None:
                node.give_back(hold.requests, hold.devices)
                self._node_changed(node)
        allocation = self.allocations.pop(pod_key, None)
        if allocation is None:
            return None
        state = self.nodes.get(allocation.node)
        if state is not None:
            state.give_back(allocation.requests, allocation.devices)
            state.pod_count -= 1
            self._node_changed(state)
        return allocation

    def _allocate(
        self, pod: PodRequest, state: NodeState, *, device_ids: Sequence[str] | None = None
    ) -> Allocation:
        devices = state.take(pod.requests, device_ids)
        for key, requests in self.shared.to_hold(pod):  # its shared claims not allocated yet: allocated here
            self.shared.hold(key, state.name, requests, tuple(state.take(requests, None)), pod.key)
        self.shared.use(pod)
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
            reason = static_reason(pod, node)
            if reason is None:
                rows.append(row)
            else:
                reasons[reason] += 1
        result = (np.array(rows, dtype=np.intp), reasons)
        self._passing_cache[key] = result
        return result

    def _fit_mask(self, demand: Demand, rows: IndexArray) -> NDArray[np.bool_]:
        """Per row: whether the pod fits the node now (kube's NodeResourcesFit plus the extras)."""
        free = self._free.take(demand.fit_columns, axis=1).take(rows, axis=0)
        return cast("NDArray[np.bool_]", (free >= demand.fit_amounts).all(axis=1))

    def _feasible_rows(self, pod: PodRequest) -> tuple[IndexArray, Counter[str]]:
        """Rows of the feasible nodes (up to kube's search limit) and, when none, the reasons per node.

        As kube-scheduler, the search starts where the previous pod's stopped and stops
        once it has found the nodes it wants.
        """
        self._ensure_arrays()
        if pod.claim_node is not None:
            return self._claim_node_rows(pod)
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

    def _claim_node_rows(self, pod: PodRequest) -> tuple[IndexArray, Counter[str]]:
        """DynamicResources' filter for a pod whose shared claims are allocated: only their node, after
        the other filters and the fit (kube's order); the nodes passing those are told it is not it."""
        static, demand = self._static(pod), self._demand(pod)
        rows = static.capable_rows
        fitting = rows[self._fit_mask(demand, rows)] if len(rows) else rows
        row = self._row.get(pod.claim_node or "")
        if row is not None and row in fitting:
            return np.array([row], dtype=np.intp), Counter()
        reasons = self._fit_reasons(static, demand)
        if len(fitting):
            reasons[FilterReason.CLAIM_NOT_AVAILABLE.value] += len(fitting)
        return _NO_ROWS, reasons

    def _fit_reasons(self, static: _Static, demand: Demand) -> Counter[str]:
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
        """Each node's score for ``pod`` under this state's :class:`Scoring` (0 under random), plus
        kube's preference scores (:mod:`.preferences`) normalised over ``nodes``."""
        self._ensure_arrays()
        rows = np.array([self._row[node.name] for node in nodes], dtype=np.intp)
        return [int(score) for score in self._total_scores(pod, rows)]

    def _total_scores(self, pod: PodRequest, rows: IndexArray) -> IntArray:
        """The member scoring's score per row plus kube's NodeAffinity and TaintToleration scores."""
        if self.scoring is Scoring.FGD:
            scores = self._fgd_scores(pod, rows)[0]
        else:
            scores = self._scores(self._demand(pod), rows)
        preferred = self._preferences.scores(pod, rows, self._order)
        return scores if preferred is None else scores + preferred

    # --- FGD -----------------------------------------------------------------------------

    def _gpu_slots(self, node: NodeState) -> list[int]:
        """Free thousandths of each of the node's GPUs (by GPU index), for FGD."""
        return device_slots(node)

    def fgd_mix(self) -> DemandMix:
        """The task mix FGD scores against: the given one, else the one learned so far."""
        if self.demand_mix is not None:
            return self.demand_mix
        if self._learned is None:
            self._learned = DemandMix.from_counts(self._seen)
        return self._learned

    def _units_for(self, pod: PodRequest) -> dict[str, int]:
        """GPU thousandths per unit of the pod's GPU resources (the largest any node gives)."""
        self._ensure_arrays()
        return {
            resource: int(self._units[:, self._columns[resource]].max(initial=0))
            for resource in pod.requests
            if resource in self._columns and is_nvidia_resource(resource)
        }

    def _fgd_scores(self, pod: PodRequest, rows: IndexArray) -> tuple[IntArray, IntArray]:
        """FGD's score per row and, for a share of one GPU, the GPU it would take there."""
        assert self._fgd is not None
        _, demand, generic = pod_task(pod, self._units_for(pod))
        mix = self._fgd.use_mix(self.fgd_mix())
        cpu_free = self._free[rows, self._columns["cpu"]]
        after = None
        if not generic:
            width = self._fgd.slots.shape[1]
            after = np.zeros((len(rows), width), dtype=np.int64)
            for index, row in enumerate(rows):
                node = self._order[int(row)]
                slots = slots_after(node, self._gpu_slots(node), pod)[:width]
                after[index, : len(slots)] = slots
        return self._fgd.scores(rows, cpu_free, demand, mix, after=after)

    def fgd_gpu(self, pod: PodRequest, node: NodeState) -> int:
        """Under FGD, the GPU index a share of one GPU goes to on ``node`` (-1 if none fits)."""
        self._ensure_arrays()
        rows = np.array([self._row[node.name]], dtype=np.intp)
        return int(self._fgd_scores(pod, rows)[1][0])

    def record_task(self, pod: PodRequest) -> None:
        """Count ``pod`` into the learned FGD mix (when no mix was given)."""
        if self.demand_mix is None and self.scoring is Scoring.FGD:
            self._seen[pod_task(pod, self._units_for(pod))[0]] += 1
            self._learned = None

    def _scores(self, demand: Demand, rows: IndexArray) -> IntArray:
        if self.scoring is Scoring.RANDOM:
            return np.zeros(len(rows), dtype=np.int64)
        if self.scoring is Scoring.BEST_FIT:
            cpu_free = self._free[rows, self._columns["cpu"]]
            return best_fit_scores(demand, rows, cpu_free=cpu_free, gpu_left=self._gpu_left[rows], units=self._units)
        most = self.scoring is Scoring.MOST_ALLOCATED
        return allocated_scores(demand, rows, alloc=self._alloc, free=self._free, most=most)

    def _select(self, pod: PodRequest, rows: IndexArray) -> NodeState:
        """The node to bind: the best score, ties drawn with the seeded generator."""
        if len(rows) == 1:
            return self._order[int(rows[0])]
        if self.scoring is Scoring.RANDOM and self._preferences.scores(pod, rows, self._order) is None:
            return self._order[int(rows[self.rng.choice(range(len(rows)))])]
        scores = self._total_scores(pod, rows)
        best = rows[scores == scores.max()]
        if self.scoring is Scoring.FGD:
            # FGD's ties go to the first node in name order: a fixed order packs the many
            # equal-score placements (CPU-only tasks) instead of scattering them, which is
            # what reproduces the paper's published allocation (docs/whatif.md).
            return self._order[int(best.min())]
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
        pending = self.shared.pending(pod)  # with its shared claims: to allocate, or where they are
        rows, reasons = self._feasible_rows(pending)
        if not len(rows):
            return None, Unschedulable(pod.key, fit_error_message(len(self._order), reasons), dict(reasons))
        node = self._select(pending, rows)
        allocation = self._allocate(pod, node)
        self.record_task(pending)
        return Binding(pod.key, node.name, allocation.devices + self.shared.carried(pod.key)), None

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
