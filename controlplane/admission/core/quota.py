"""Quota arithmetic of ClusterQueues and their cohorts, as Kueue's ``pkg/cache`` computes it.

Every amount is an integer in base units (GPUs as a count, CPU in millicores, memory in bytes).
Per flavor and resource a ClusterQueue has a nominal quota; in a cohort it may also lend unused
nominal quota (up to ``lendingLimit``; absent: all of it) and borrow the cohort's unused quota
(up to ``borrowingLimit``; absent: no limit). The part of nominal quota it does not lend is its
own (guaranteed); what it uses beyond that draws on the cohort's pool, which is the sum of what
its members lend.

Cohorts form a tree (Kueue's hierarchical cohorts: a Cohort names its ``parentName`` and may
hold quota of its own), so the pool of a cohort is its own quota plus what its children lend,
and a child borrows from its parent's pool, which borrows from its own parent. Each node of the
tree keeps its subtree quota and its usage (a cohort's usage is what its children use beyond
their guaranteed part), updated as workloads are added and removed.

The dominant resource share (DRS) of a node, used by fair sharing, is Kueue's: per resource,
what the node uses beyond its subtree quota (summed over flavors) per thousand of what its
parent could lend it, the largest of those, divided by the node's ``fairSharing.weight``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Self

#: (flavor, resource)
FlavorResource = tuple[str, str]


#: ``fairSharing.weight`` 1, in thousandths.
DEFAULT_WEIGHT = 1000
#: The share of a node with weight 0 that borrows (Kueue's ``math.MaxInt``).
INFINITE_SHARE = 2**63 - 1


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class PreemptionPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


#: Kueue's newer name (v1beta2's only one) of ``Borrow`` and of ``Preempt``: read as them.
MAY_STOP_SEARCH = "MayStopSearch"


class _FungibilityPolicy(StrEnum):
    """A ``flavorFungibility`` policy whose first value stops the search at a flavor (``Borrow``,
    ``Preempt``): :data:`MAY_STOP_SEARCH` reads as it."""

    @classmethod
    def _missing_(cls, value: object) -> Self | None:
        return next(iter(cls)) if value == MAY_STOP_SEARCH else None


class WhenCanBorrow(_FungibilityPolicy):
    """``flavorFungibility.whenCanBorrow``: take a flavor that fits by borrowing, or look further."""

    BORROW = "Borrow"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class WhenCanPreempt(_FungibilityPolicy):
    """``flavorFungibility.whenCanPreempt``: take a flavor that fits by preempting, or look further."""

    PREEMPT = "Preempt"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(StrEnum):
    """``flavorFungibility.preference``: when every flavor tried needs borrowing or preemption,
    which of the two the chosen flavor should rather need."""

    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    """How the flavor takes the request first (fits, reclaims, preempts), then from how close it
    borrows."""
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
    """From how close it borrows first (its own quota best), then how it takes the request."""


@dataclass(frozen=True)
class FlavorFungibility:
    """A ClusterQueue's ``flavorFungibility`` (Kueue's defaults: borrow, but try the next flavor
    before preempting; prefer borrowing to preempting)."""

    when_can_borrow: WhenCanBorrow = WhenCanBorrow.BORROW
    when_can_preempt: WhenCanPreempt = WhenCanPreempt.TRY_NEXT_FLAVOR
    preference: FungibilityPreference = FungibilityPreference.BORROWING_OVER_PREEMPTION


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's ``preemption`` policies (Kueue's defaults: preempt nothing)."""

    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    #: ``borrowWithinCohort.policy``: Never or LowerPriority.
    borrow_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    #: ``borrowWithinCohort.maxPriorityThreshold``: only workloads at or below it are preempted.
    max_priority_threshold: int | None = None

    @property
    def enabled(self) -> bool:
        return any(p is not PreemptionPolicy.NEVER for p in (self.within_cluster_queue, self.reclaim_within_cohort))


@dataclass(frozen=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def guaranteed(self) -> int:
        """The part of nominal quota the queue does not lend."""
        return self.nominal - min(self.lending_limit, self.nominal) if self.lending_limit is not None else 0


@dataclass(frozen=True)
class FlavorQuotas:
    flavor: str
    quotas: Mapping[str, Quota]
    """Per covered resource."""


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]
    """In the order admission tries them."""


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    #: Why the queue admits nothing (stopPolicy Hold, a missing ResourceFlavor ...); None: active.
    inactive_reason: str | None = None
    preemption: Preemption = field(default_factory=Preemption)
    #: ``fairSharing.weight`` in thousandths (Kueue's MilliValue): 1000 is the default weight 1;
    #: 0 borrows only what no other queue wants.
    fair_weight: int = DEFAULT_WEIGHT

    def quota(self, fr: FlavorResource) -> Quota | None:
        flavor, resource = fr
        for group in self.groups:
            if resource in group.covered:
                for fq in group.flavors:
                    if fq.flavor == flavor:
                        return fq.quotas.get(resource)
        return None

    def group_of(self, resource: str) -> ResourceGroup | None:
        for group in self.groups:
            if resource in group.covered:
                return group
        return None




@dataclass(frozen=True)
class Cohort:
    """A cohort (Kueue's ``Cohort`` object, or only named by ClusterQueues): a node of the quota
    tree with optional quota of its own, a parent and a fair-sharing weight."""

    name: str
    parent: str | None = None
    groups: tuple[ResourceGroup, ...] = ()
    fair_weight: int = DEFAULT_WEIGHT


def _quotas(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, Quota]:
    return {(fq.flavor, r): q for g in groups for fq in g.flavors for r, q in fq.quotas.items()}


class Node:
    """A ClusterQueue or a cohort in the quota tree (read-only outside :class:`Usage`)."""

    __slots__ = ("children", "is_cohort", "name", "parent", "quotas", "subtree", "usage", "weight")

    def __init__(self, name: str, *, is_cohort: bool, quotas: dict[FlavorResource, Quota], weight: int) -> None:
        self.name, self.is_cohort, self.quotas, self.weight = name, is_cohort, quotas, weight
        self.parent: Node | None = None
        self.children: list[Node] = []
        self.subtree: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}

    def __repr__(self) -> str:
        return f"{'Cohort' if self.is_cohort else 'ClusterQueue'}({self.name})"

    def guaranteed(self, fr: FlavorResource) -> int:
        """The part of the subtree quota the node does not lend to its parent."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - quota.lending_limit)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.guaranteed(fr) - self.usage.get(fr, 0))

    def within_quota(self, frs: Iterable[FlavorResource]) -> bool:
        """Whether the node uses at most its (subtree's) quota of every one of ``frs`` (Kueue's
        ``IsWithinNominalInResources``)."""
        return all(self.usage.get(fr, 0) <= self.subtree.get(fr, 0) for fr in frs)

    def fits_in_quota(self, request: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
        """Whether ``request`` fits the node's (subtree's) quota beside its usage, and what of it
        its guaranteed part cannot hold, to ask the parent next (Kueue's ``QuantitiesFitInQuota``)."""
        fits = all(self.usage.get(fr, 0) + amount <= self.subtree.get(fr, 0) for fr, amount in request.items())
        return fits, {fr: max(0, amount - self.local_available(fr)) for fr, amount in request.items()}

    def path_to_root(self) -> list[Node]:
        """This node, its parent ... the root."""
        out, node = [self], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def root(self) -> Node:
        return self.path_to_root()[-1]


def _height(node: Node) -> int:
    """The distance from a cohort to its furthest ClusterQueue (Kueue's getNodeHeight)."""
    height = min(len(node.children), 1)
    for child in node.children:
        if child.is_cohort:
            height = max(height, _height(child) + 1)
    return height


class Usage:
    """What each ClusterQueue uses per flavor and resource, over the tree of its cohorts (mutable:
    admission adds to it, preemption simulates removals)."""

    def __init__(self, queues: Mapping[str, ClusterQueue], cohorts: Mapping[str, Cohort] | None = None) -> None:
        self.queues = queues
        self.cohorts: dict[str, Node] = {}
        self.nodes: dict[str, Node] = {}
        specs = dict(cohorts or {})
        for q in queues.values():
            if q.cohort:
                specs.setdefault(q.cohort, Cohort(q.cohort))
        for c in list(specs.values()):
            if c.parent:
                specs.setdefault(c.parent, Cohort(c.parent))
        for c in specs.values():
            self.cohorts[c.name] = Node(c.name, is_cohort=True, quotas=_quotas(c.groups), weight=c.fair_weight)
        #: Cohorts whose chain of parents loops (Kueue makes their ClusterQueues inactive); the
        #: loop is cut here so that the arithmetic ends.
        self.cycles: set[str] = set()
        for c in sorted(specs.values(), key=lambda c: c.name):
            if c.parent and not self._loops(c.name, c.parent, specs):
                self._link(self.cohorts[c.name], self.cohorts[c.parent])
        for q in queues.values():
            node = Node(q.name, is_cohort=False, quotas=_quotas(q.groups), weight=q.fair_weight)
            self.nodes[q.name] = node
            if q.cohort:
                self._link(node, self.cohorts[q.cohort])
        for node in self.cohorts.values():
            node.children.sort(key=lambda n: (not n.is_cohort, n.name))
        for root in [n for n in (*self.cohorts.values(), *self.nodes.values()) if n.parent is None]:
            self._accumulate(root)
        self._lendable: dict[int, dict[str, int]] = {}
        self._tree_queues: dict[int, frozenset[str]] = {}
        self._versions: dict[int, int] = {}

    def _loops(self, name: str, parent: str, specs: Mapping[str, Cohort]) -> bool:
        seen = {name}
        at: str | None = parent
        while at is not None:
            if at in seen:
                self.cycles.update(seen)
                return True
            seen.add(at)
            at = specs[at].parent if at in specs else None
        return False

    @staticmethod
    def _link(child: Node, parent: Node) -> None:
        child.parent = parent
        parent.children.append(child)

    def _accumulate(self, node: Node) -> None:
        node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        for child in node.children:
            self._accumulate(child)
            for fr, amount in child.subtree.items():
                node.subtree[fr] = node.subtree.get(fr, 0) + amount - child.guaranteed(fr)

    # --- usage ----------------------------------------------------------------------------

    @property
    def used(self) -> dict[str, dict[FlavorResource, int]]:
        """Per ClusterQueue, its usage per flavor and resource."""
        out = {name: {fr: v for fr, v in node.usage.items() if v} for name, node in self.nodes.items()}
        return {name: used for name, used in out.items() if used}

    def of(self, queue: str, fr: FlavorResource) -> int:
        node = self.nodes.get(queue)
        return node.usage.get(fr, 0) if node is not None else 0

    def add(self, queue: str, amounts: Mapping[FlavorResource, int], sign: int = 1, *, counted: bool = True) -> None:
        """Add (``sign`` -1: remove) a workload's usage. ``counted`` False: a step of a simulation
        that is undone right after, which leaves :meth:`version` as it is."""
        node = self.nodes.get(queue)
        if node is None:
            return  # a workload still holding quota of a ClusterQueue that was deleted
        if amounts and counted:
            root = node.root()
            self._versions[id(root)] = self._versions.get(id(root), 0) + 1
        for fr, amount in amounts.items():
            delta = sign * amount
            if delta > 0:
                self._add(node, fr, delta)
            elif delta < 0:
                self._remove(node, fr, -delta)

    def _add(self, node: Node, fr: FlavorResource, amount: int) -> None:
        # Usage beyond the guaranteed part is stored in the parent too (Kueue's addUsage).
        local = node.local_available(fr)
        node.usage[fr] = node.usage.get(fr, 0) + amount
        if node.parent is not None and amount > local:
            self._add(node.parent, fr, amount - local)

    def _remove(self, node: Node, fr: FlavorResource, amount: int) -> None:
        stored_in_parent = node.usage.get(fr, 0) - node.guaranteed(fr)
        node.usage[fr] = node.usage.get(fr, 0) - amount
        if node.parent is not None and stored_in_parent > 0:
            self._remove(node.parent, fr, min(amount, stored_in_parent))

    # --- what a queue may take ------------------------------------------------------------------

    def _available(self, node: Node, fr: FlavorResource) -> int:
        if node.parent is None:
            return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
        from_parent = self._available(node.parent, fr)
        quota = node.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            stored = node.subtree.get(fr, 0) - node.guaranteed(fr)
            used = max(0, node.usage.get(fr, 0) - node.guaranteed(fr))
            from_parent = min(stored - used + quota.borrowing_limit, from_parent)
        return node.local_available(fr) + from_parent

    def _potential(self, node: Node, fr: FlavorResource) -> int:
        if node.parent is None:
            return node.subtree.get(fr, 0)
        most = node.guaranteed(fr) + self._potential(node.parent, fr)
        quota = node.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            most = min(most, node.subtree.get(fr, 0) + quota.borrowing_limit)
        return most

    def available(self, queue: ClusterQueue, fr: FlavorResource) -> int:
        """How much more of ``fr`` the queue may take now (borrowing included)."""
        if queue.quota(fr) is None:
            return 0
        return max(0, self._available(self.nodes[queue.name], fr))

    def maximum(self, queue: ClusterQueue, fr: FlavorResource) -> int:
        """The most the queue could ever hold of ``fr`` (nominal + what it may borrow), for the
        'request > maximum capacity' answer."""
        if queue.quota(fr) is None:
            return 0
        return self._potential(self.nodes[queue.name], fr)

    def borrowed(self, queue: str, fr: FlavorResource) -> int:
        """What the queue uses of ``fr`` beyond its nominal quota."""
        q = self.queues.get(queue)
        quota = q.quota(fr) if q is not None else None
        return max(0, self.of(queue, fr) - (quota.nominal if quota is not None else 0))

    def borrowing(self, queue: ClusterQueue, frs: Iterable[FlavorResource]) -> bool:
        """Whether a cohort member uses more than its nominal quota of some of ``frs``."""
        return queue.cohort is not None and any(
            (quota := queue.quota(fr)) is not None and self.of(queue.name, fr) > quota.nominal for fr in frs
        )

    def borrows(self, queue: ClusterQueue, amounts: Mapping[FlavorResource, int]) -> bool:
        """Whether adding ``amounts`` takes the queue beyond its nominal quota somewhere."""
        for fr, amount in amounts.items():
            quota = queue.quota(fr)
            if quota is not None and self.of(queue.name, fr) + amount > quota.nominal:
                return True
        return False

    def borrowing_height(self, queue: str, fr: FlavorResource, amount: int) -> tuple[int, bool]:
        """Kueue's ``FindHeightOfLowestSubtreeThatFits``: the height of the lowest subtree around
        the queue whose quota holds ``amount`` more of ``fr`` (0: the queue's own quota; a cohort
        of queues only is 1 ...), and whether that subtree is smaller than the whole tree (the
        queue may then reclaim within it)."""
        node = self.nodes[queue]
        if node.parent is None or node.usage.get(fr, 0) + amount <= node.subtree.get(fr, 0):
            return 0, node.parent is not None
        remaining = amount - node.local_available(fr)
        at: Node | None = node.parent
        while at is not None:
            if at.usage.get(fr, 0) + remaining <= at.subtree.get(fr, 0):
                return _height(at), at.parent is not None
            remaining -= at.local_available(fr)
            at = at.parent
        return _height(node.root()), False

    def version(self, queue: str) -> int:
        """A count that changes whenever usage in the queue's tree does (for caches of shares)."""
        return self._versions.get(id(self.nodes[queue].root()), 0)

    def tree_queues(self, queue: str) -> frozenset[str]:
        """The ClusterQueues under the queue's root cohort (none when it is in no cohort)."""
        root = self.root_of(queue)
        if root is None:
            return frozenset()
        found = self._tree_queues.get(id(root))
        if found is None:
            found = self._tree_queues[id(root)] = frozenset(n for n in self.nodes if self.root_of(n) is root)
        return found

    def root_of(self, queue: str) -> Node | None:
        """The root cohort of the queue's tree (None: the queue is in no cohort)."""
        node = self.nodes[queue]
        return node.root() if node.parent is not None else None

    # --- fair sharing ----------------------------------------------------------------------------

    def lendable(self, parent: Node) -> dict[str, int]:
        """Per resource, the most the tree could lend a child of ``parent`` (summed over flavors)."""
        cached = self._lendable.get(id(parent))
        if cached is None:
            cached = {}
            for fr in parent.root().subtree:
                cached[fr[1]] = cached.get(fr[1], 0) + self._potential(parent, fr)
            self._lendable[id(parent)] = cached
        return cached

    def share(self, node: Node) -> int:
        """The node's dominant resource share, divided by its weight (Kueue's weighted share):
        0 when it borrows nothing, :data:`INFINITE_SHARE` when a weight-0 node borrows."""
        if node.parent is None:
            return 0
        borrowing: dict[str, int] = {}
        for fr, quota in node.subtree.items():
            over = node.usage.get(fr, 0) - quota
            if over > 0:
                borrowing[fr[1]] = borrowing.get(fr[1], 0) + over
        if not borrowing:
            return 0
        if node.weight == 0:
            return INFINITE_SHARE
        lendable = self.lendable(node.parent)
        ratio = max((b * 1000 // lendable[r] for r, b in borrowing.items() if lendable.get(r, 0) > 0), default=0)
        return ratio * 1000 // node.weight

    def queue_share(self, queue: str) -> int:
        return self.share(self.nodes[queue])
