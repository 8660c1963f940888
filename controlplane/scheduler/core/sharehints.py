"""A share of one GPU packed, inside a spreading member, toward the tightest GPU remainder that holds it.

A replica that asks for a share of one GPU (``nvidia.com/gpu-milli`` under 1000) lands, under kube's
LeastAllocated scoring, on the node with the most free CPU, memory and thousandths: an empty one,
where it breaks a whole GPU while the remainders of GPUs already shared elsewhere would have held it.
On the placement benchmark's traces those remainders are most of what least-allocated members leave
unallocated (docs/benchmarks.md, "Seed 7's closest cells").

Packing hints (:mod:`~controlplane.scheduler.core.packhints`) name nodes by their free GPUs and give
shares nothing; and they wait for multi-GPU demand. While they wait
(:func:`~controlplane.scheduler.core.packhints.share_remainder_enabled`; ``tieredOverflow.
shareRemainderHints``, on by default), the Work sent to a cluster whose agent reports a spreading
node scoring (``status.nodeScoring`` LeastAllocated) for a replica asking for a share gets the
packing term (:func:`~controlplane.scheduler.core.packhints.preferred_term`: weight 1,
``kubernetes.io/hostname In``) toward :func:`tightest_remainder`: the named nodes
(``nodeShapes[].hostnames``, which the agent lists for nodes whose GPUs are partly held) of the node
shapes holding the replica whose least free remainder of a shared GPU (:func:`~controlplane.
scheduler.core.clusterfit.gpu_vector`'s entries under 1000) that holds the share is the least of
the cluster, at most :data:`~controlplane.scheduler.core.packhints.MAX_HINTED` names. Only the
tightest: the next remainders up are left to later shares that need them.

Only where FGD says it pays (:func:`share_hint`): the recent demand's mix (FGD's fragmentation,
:func:`~controlplane.scheduler.core.clusterfit.row_growth`) must grow less on a node of the tightest
remainder than on the node the member picks by itself
(:func:`~controlplane.scheduler.core.shapescarcity.least_allocated_rows`), each side taken at its
least growth (the nodes of the tightest remainder may differ in CPU; the member's score may tie
nodes); a remainder the mix's popular shares need is kept for them. Both sides keep to the nodes
the replica may go to: its node selector, required node affinity and tolerations against the shapes'
labels and taints, as the estimator reads them (:func:`~controlplane.scheduler.core.estimating.
shape_fit`), so a tainted empty node is not taken for the member's pick. Each node's growth is the
one the ties of tier and price remember (``SchedulerCache.growths``), and the hint is remembered per
snapshot, mix version and requirements (``SchedulerCache.share_hints``).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import NamedTuple

from controlplane.apis.cluster_v1alpha1 import SPREADING_SCORINGS
from controlplane.apis.explanations import SHARE_REMAINDER
from controlplane.apis.fragmentation import GPU_MILLI, DemandMix, TaskShape
from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import SchedulerCache
from controlplane.scheduler.core.clusterfit import NodeRow, fragmentation_growth, gpu_vector, node_row
from controlplane.scheduler.core.estimating import shape_fit
from controlplane.scheduler.core.framework import CycleState
from controlplane.scheduler.core.packhints import (
    MAX_HINTED,
    PACKING_WEIGHT,
    first_names,
    pinned_by_name,
    share_remainder_enabled,
)
from controlplane.scheduler.core.shapescarcity import least_allocated_rows
from controlplane.scheduler.core.sharefit import is_share
from controlplane.scheduler.core.snapshot import ClusterSnapshot, NodeShape
from controlplane.scheduler.core.tiebreak import cached_task, growth_memo, memory_of


class ShareHint(NamedTuple):
    """A share's hint in one cluster: the nodes named, the share and the remainder they hold
    (thousandths), and the demand mix's least fragmentation growth (thousandths) over the named
    nodes and over the nodes the member's own scoring would pick."""

    hosts: tuple[str, ...]
    share: int
    remainder: int
    growth: float
    spread_growth: float


def tightest_remainder(
    cluster: ClusterSnapshot, requirements: ReplicaRequirements, task: TaskShape
) -> tuple[int, tuple[NodeShape, ...]]:
    """The least free remainder of a shared GPU that holds ``task``'s share on a named node of
    ``cluster`` holding the replica, and the shapes that have it; (0, ()) when none has one."""
    if pinned_by_name(requirements):
        return 0, ()
    least = 0
    tightest: list[NodeShape] = []
    for shape in cluster.shapes:
        if not shape.hostnames:
            continue
        held = [free for free in gpu_vector(shape) if task.gpu_milli <= free < GPU_MILLI]
        if not held or (least and min(held) > least) or shape_fit(shape, requirements) <= 0:
            continue
        if min(held) != least:
            least, tightest = min(held), []
        tightest.append(shape)
    return least, tuple(tightest)


def share_hint(
    cluster: ClusterSnapshot, requirements: ReplicaRequirements, task: TaskShape, cache: SchedulerCache
) -> ShareHint | None:
    """The hint toward the tightest remainder for one share in ``cluster`` (see the module); None
    when no named node's remainder holds it or FGD does not prefer it. Remembered per snapshot, mix
    version and requirements (``SchedulerCache.share_hints``); each node's growth is the one the
    ties of tier and price read (``SchedulerCache.growths``)."""
    mix = cache.demand.mix()
    key = (cluster.serial, cache.demand.version, requirements)
    if key in cache.share_hints:
        return cache.share_hints[key]
    return cache.share_hints.remember(
        key, _share_hint(cluster, requirements, task, mix, growth_memo(cache, task))
    )


def _share_hint(
    cluster: ClusterSnapshot,
    requirements: ReplicaRequirements,
    task: TaskShape,
    mix: DemandMix,
    memo: MutableMapping[NodeRow, float | None],
) -> ShareHint | None:
    remainder, shapes = tightest_remainder(cluster, requirements, task)
    if not shapes:
        return None
    # Each side at its least growth (FGD's measure of each node, as ties of tier and price take a
    # cluster's): the tightest remainder's nodes may differ in CPU, the member's score may tie nodes.
    growth = fragmentation_growth([node_row(shape) for shape in shapes], task, mix, memo)
    picked = least_allocated_rows(cluster, (task, memory_of(requirements)), requirements)
    spread = fragmentation_growth([(product, cpu, gpus) for product, cpu, _, gpus in picked], task, mix, memo)
    if growth is None or spread is None or growth >= spread:
        return None
    names = sorted({name for shape in shapes for name in shape.hostnames or ()})[:MAX_HINTED]
    return ShareHint(tuple(names), task.gpu_milli, remainder, growth, spread)


def share_hints_wanted(state: CycleState, requirements: Mapping[str, ReplicaRequirements]) -> bool:
    """Whether the decision's policy packs shares now and a replica of ``requirements`` (per cluster
    decided) asks for one: a decision of whole GPUs walks no cluster for them."""
    if not share_remainder_enabled(state):
        return False
    return any(is_share(cached_task(needs, state.cache)) for needs in requirements.values())


def share_hints(
    state: CycleState, fresh: Sequence[ClusterSnapshot], requirements: Mapping[str, ReplicaRequirements]
) -> dict[str, ShareHint]:
    """Per spreading cluster of ``fresh`` (as :func:`~controlplane.scheduler.core.packhints.packing_hints`),
    the share's hint; clusters with none are left out."""
    if not fresh or not share_remainder_enabled(state):
        return {}
    out: dict[str, ShareHint] = {}
    for cluster in fresh:
        if cluster.node_scoring not in SPREADING_SCORINGS:
            continue
        needs = requirements[cluster.name]
        task = cached_task(needs, state.cache)
        if task is None or not is_share(task):
            continue
        hint = share_hint(cluster, needs, task, state.cache)
        if hint is not None:
            out[cluster.name] = hint
    return out


def describe(hint: ShareHint, scoring: str | None) -> str:
    """The explanation's words for a share's hint (``scoring``: the member's, which spreads)."""
    hosts = hint.hosts
    return (
        f"share of {hint.share}/{GPU_MILLI} of a GPU packed inside the cluster toward {len(hosts)} node(s) "
        f"{SHARE_REMAINDER} ({hint.remainder} thousandths; "
        f"{first_names(hosts)}; preferred node affinity, weight {PACKING_WEIGHT}): the recent demand's GPU "
        f"fragmentation grows by at least {hint.growth / GPU_MILLI:.2f} GPUs there against {hint.spread_growth / GPU_MILLI:.2f} "
        f"on the nodes the member's node scoring {scoring} would pick, which spreads replicas over empty nodes "
        "(shareRemainderHints; packing hints wait for multi-GPU demand)"
    )
