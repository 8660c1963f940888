"""The fleet snapshot from the hub's objects: the adapter the sampling loop calls.

Why this module exists: the waste accounting works on frozen dataclasses
(:mod:`controlplane.reports.fleet`), the hub stores plain dicts; :func:`sample_from_cluster_statuses`
turns the hub's ``Cluster``, ``ResourceBinding`` and ``Work`` objects (dicts as stored) at one
instant into a :class:`~controlplane.reports.fleet.FleetSample`. It is pure; the loop that
lists the objects and feeds the accumulator is :mod:`controlplane.reports.sampling`.

* ``Cluster`` objects: ``spec.pricing/provider/tier/unschedulable``, the Ready condition and
  ``status.utilization`` (written by :func:`member_agent.capacity.summarize`: the aggregated
  form of :mod:`controlplane.reports.aggregated`, or an older agent's per-device encodings,
  read with :func:`controlplane.apis.utilization.expand_utilization`), with
  ``gpuSummary`` and ``nodeShapes`` filling in GPUs that no DCGM series reported
  (:mod:`controlplane.reports.unreported`).
* ``ResourceBinding`` and ``Work`` objects: pending demand and placement constraints
  (:mod:`controlplane.reports.demand`); Works also name the workloads a pod reported without
  an owner is put under (:mod:`controlplane.reports.owners`).

Adapter rules: each node of a report becomes a :class:`~controlplane.reports.fleet.NodeSample`
by :func:`controlplane.reports.nodes.node_sample` (the device rules are there, shared with the
agent's report); a cluster is ready when its Ready condition is ``True`` (and, with
``stale_after``, its ``lastReportTime`` is recent enough).

No I/O happens here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

from pydantic import ValidationError

from controlplane.apis.cluster_v1alpha1 import PROVIDER_ONPREM
from controlplane.apis.drareading import ListedClaims
from controlplane.apis.meta import Taint
from controlplane.apis.podview import propagated_workloads
from controlplane.apis.spot import RecordedReclaim, recorded_reclaims
from controlplane.apis.timestamps import parse_time
from controlplane.apis.trainer_runtime import runtime_lookup
from controlplane.apis.untyped import as_int, as_list, as_mapping
from controlplane.apis.utilization import expand_utilization
from controlplane.reports.aggregated import expand as expand_aggregated
from controlplane.reports.aggregated import is_aggregated
from controlplane.reports.classify import finish
from controlplane.reports.demand import AllowedClusters, binding_demand, work_demand
from controlplane.reports.fleet import (
    ClusterSample,
    FleetSample,
    NodeSample,
    PendingDemand,
    WorkloadConstraints,
)
from controlplane.reports.moves import MoveRecord, moves_of_binding
from controlplane.reports.nodes import node_sample
from controlplane.reports.owners import ownerless_namespaces, with_owners_by_name
from controlplane.reports.unreported import gpu_summary, unreported_nodes
from policies.affinity import ClusterView

#: A workload propagated to a member cluster: (namespace, kind, name).
Workload = tuple[str, str, str]

logger = logging.getLogger(__name__)


def _cluster_ready(status: Mapping[str, Any], *, now: datetime, stale_after: timedelta | None) -> bool:
    ready = any(
        as_mapping(cond).get("type") == "Ready" and as_mapping(cond).get("status") == "True"
        for cond in as_list(status.get("conditions"))
    )
    if ready and stale_after is not None:
        reported = status.get("lastReportTime")
        try:
            return isinstance(reported, str) and now - parse_time(reported) <= stale_after
        except ValueError:
            return False
    return ready


def _cluster_view(raw: Mapping[str, Any]) -> ClusterView:
    metadata, spec = as_mapping(raw.get("metadata")), as_mapping(raw.get("spec"))
    provider = str(spec.get("provider") or "")
    tier = spec.get("tier")
    taints: list[Taint] = []
    for taint in as_list(spec.get("taints")):
        try:
            taints.append(Taint.model_validate(taint))
        except ValidationError:
            logger.warning("cluster %s: ignoring malformed taint %r", metadata.get("name"), taint)
    pricing: dict[str, float] = {}
    for product, price in as_mapping(spec.get("pricing")).items():
        if isinstance(price, int | float) and not isinstance(price, bool):
            pricing[str(product)] = float(price)
    return ClusterView(
        name=str(metadata.get("name") or ""),
        labels={str(k): str(v) for k, v in as_mapping(metadata.get("labels")).items()},
        provider=provider or None,
        region=spec.get("region"),
        zone=spec.get("zone"),
        tier=as_int(tier) if tier is not None else (0 if provider == PROVIDER_ONPREM else 1),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        pricing=pricing,
    )


class ClusterNodesCache:
    """Each cluster's nodes as its last sample built them, kept while what they are built from
    stays equal: the report's ``gpuSummary``, ``utilization`` and ``nodeShapes`` and the workloads
    propagated to the cluster. A report that only renews ``lastReportTime`` (an agent's periodic
    report of an unchanged cluster) then costs one comparison of those parts, not a rebuild of
    every device (a 5,000-node cluster has 40,000). The nodes are immutable, so a sample may
    share them with the last one; an unchanged cluster's nodes are the very same tuple, which
    :class:`~controlplane.reports.classify.ClassificationMemo` relies on."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[Any, ...], tuple[NodeSample, ...], frozenset[str]]] = {}
        self._elsewhere: dict[
            str, tuple[tuple[NodeSample, ...], tuple[Workload, ...], tuple[NodeSample, ...]]
        ] = {}
        self.hits = 0
        self.builds = 0

    def nodes(self, name: str, key: tuple[Any, ...], build: Callable[[], tuple[NodeSample, ...]]) -> tuple[NodeSample, ...]:
        """The nodes cached for ``name`` when ``key`` equals the cached key, else ``build()``'s."""
        entry = self._entries.get(name)
        if entry is not None and entry[0] == key:
            self.hits += 1
            return entry[1]
        nodes = build()
        self.builds += 1
        self._entries[name] = (key, nodes, ownerless_namespaces(nodes))
        return nodes

    def with_elsewhere(
        self, name: str, nodes: tuple[NodeSample, ...], elsewhere: Sequence[Workload]
    ) -> tuple[NodeSample, ...]:
        """``nodes`` (this cache's for ``name``) with the pods no workload of their own cluster
        matched put under a workload of their namespace propagated to another cluster
        (:func:`_owners_elsewhere`); the same tuple while neither changes."""
        entry = self._entries.get(name)
        if entry is None or entry[1] is not nodes or not entry[2]:
            return nodes
        relevant = tuple(w for w in elsewhere if w[0] in entry[2])
        if not relevant:
            return nodes
        kept = self._elsewhere.get(name)
        if kept is not None and kept[0] is nodes and kept[1] == relevant:
            return kept[2]
        resolved = with_owners_by_name(nodes, relevant)
        self._elsewhere[name] = (nodes, relevant, resolved)
        return resolved

    def retain(self, names: Iterable[str]) -> None:
        """Forget the clusters not in ``names`` (deleted from the fleet)."""
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]
        for name in [n for n in self._elsewhere if n not in keep]:
            del self._elsewhere[name]


def _cluster_nodes(status: Mapping[str, Any], owners: Sequence[tuple[str, str, str]]) -> tuple[NodeSample, ...]:
    summary = gpu_summary(status)
    utilization = status.get("utilization")
    if is_aggregated(utilization):
        reported = expand_aggregated(utilization)
    else:
        reported = [node_sample(node, summary) for node in expand_utilization(utilization)]
    reported = [n for n in reported if n.devices]
    shapes = [as_mapping(s) for s in as_list(status.get("nodeShapes"))]
    return with_owners_by_name(tuple(reported + unreported_nodes(summary, reported, shapes)), owners)


def _nodes_key(status: Mapping[str, Any], owners: tuple[tuple[str, str, str], ...]) -> tuple[Any, ...]:
    return (status.get("gpuSummary"), status.get("utilization"), status.get("nodeShapes"), owners)


def warm_cluster_nodes(
    raw: Mapping[str, Any], owners: Mapping[str, Sequence[tuple[str, str, str]]], *, cache: ClusterNodesCache
) -> bool:
    """Build the nodes of the Cluster ``raw`` into ``cache`` unless they are there already (its
    report unchanged); True when they were built. ``owners``: per cluster, the workloads
    propagated to it (:func:`~controlplane.apis.podview.propagated_workloads`)."""
    name = str(as_mapping(raw.get("metadata")).get("name") or "")
    status = as_mapping(raw.get("status"))
    mine = tuple(owners.get(name, ()))
    builds = cache.builds
    cache.nodes(name, _nodes_key(status, mine), lambda: _cluster_nodes(status, mine))
    return cache.builds > builds


def _owners_elsewhere(propagated: Mapping[str, Sequence[Workload]]) -> tuple[Workload, ...]:
    """Every workload propagated to some cluster, once: a pod that no workload of its own cluster
    matches by name (its Work was deleted when the last replicas moved away, and the pod is still
    terminating) is put under a workload of its namespace propagated to another cluster, so a
    report by workload shows hub workloads, not ``Pod/<name>``."""
    return tuple(dict.fromkeys(w for workloads in propagated.values() for w in workloads))


def _cluster_sample(
    raw: Mapping[str, Any],
    view: ClusterView,
    *,
    now: datetime,
    stale_after: timedelta | None,
    owners: Sequence[Workload],
    elsewhere: Sequence[Workload],
    cache: ClusterNodesCache | None,
) -> ClusterSample:
    status = as_mapping(raw.get("status"))
    owners = tuple(owners)
    if cache is None:
        nodes = with_owners_by_name(_cluster_nodes(status, owners), elsewhere)
    else:
        nodes = cache.nodes(view.name, _nodes_key(status, owners), lambda: _cluster_nodes(status, owners))
        nodes = cache.with_elsewhere(view.name, nodes, elsewhere)
    return ClusterSample(
        name=view.name,
        nodes=nodes,
        ready=_cluster_ready(status, now=now, stale_after=stale_after),
        schedulable=not view.unschedulable,
        pricing=view.pricing,
        provider=view.provider or "",
        tier=view.tier,
    )


P = ParamSpec("P")
R = TypeVar("R")

#: Bindings (and Works) read between two turns of :func:`sample_steps`.
OBJECTS_PER_STEP = 500


def sample_steps(
    clusters: Iterable[Mapping[str, Any]],
    bindings: Iterable[Mapping[str, Any]],
    works: Iterable[Mapping[str, Any]],
    *,
    now: datetime,
    stale_after: timedelta | None = None,
    cache: ClusterNodesCache | None = None,
    runtimes: Iterable[Mapping[str, Any]] = (),
    claims: Iterable[Mapping[str, Any]] = (),
) -> Generator[None, None, FleetSample]:
    """The fleet at ``now`` from the hub's Cluster, ResourceBinding and Work objects (dicts), in
    steps: it yields after every :data:`OBJECTS_PER_STEP` bindings or Works it reads (a caller
    that gives the event loop a turn there keeps a pass over 20,000 bindings from holding the
    loop for seconds) and returns the sample (:func:`sample_from_cluster_statuses`: in one call).

    ``stale_after``: a cluster whose ``lastReportTime`` is older than this counts as not ready
    (None: trust the Ready condition alone, which the cluster controller maintains). ``cache``:
    the nodes of the clusters whose reports did not change since the last call are taken from it
    (the same sample as without it, built faster). ``runtimes``: the hub's TrainingRuntimes and
    ClusterTrainingRuntimes, which a TrainJob's pending pods are read with (its nodes and GPUs
    are its runtime's). ``claims``: the hub's ResourceClaimTemplates, ResourceClaims and
    DeviceClasses, which the DRA GPUs of a Work's pending pods are read with.
    """
    cluster_list = [as_mapping(c_) for c_ in clusters]
    views = [_cluster_view(raw) for raw in cluster_list]
    binding_list = [as_mapping(b) for b in bindings]
    work_list = [as_mapping(w) for w in works]
    propagated = propagated_workloads(work_list)
    elsewhere = _owners_elsewhere(propagated)
    samples = tuple(
        _cluster_sample(
            raw,
            view,
            now=now,
            stale_after=stale_after,
            owners=propagated.get(view.name, ()),
            elsewhere=elsewhere,
            cache=cache,
        )
        for raw, view in zip(cluster_list, views, strict=True)
    )
    if cache is not None:
        cache.retain(view.name for view in views)
    yield
    constraints: dict[tuple[str, str], WorkloadConstraints] = {}
    pending: list[PendingDemand] = []
    reclaims: list[RecordedReclaim] = []
    moves: list[MoveRecord] = []
    allowed = AllowedClusters(views)
    lookup, listed = runtime_lookup(runtimes), ListedClaims(claims)
    for index, binding in enumerate(binding_list, 1):
        reclaims.extend(recorded_reclaims(binding))
        moves.extend(moves_of_binding(binding))
        parsed = binding_demand(binding, allowed)
        if parsed is not None:
            known, demands = parsed
            constraints[(known.namespace, known.workload)] = known
            pending.extend(demands)
        if index % OBJECTS_PER_STEP == 0:
            yield
    for index, work in enumerate(work_list, 1):
        pending.extend(work_demand(work, constraints, lookup, listed))
        if index % OBJECTS_PER_STEP == 0:
            yield
    return FleetSample(
        time=now,
        clusters=samples,
        pending=tuple(pending),
        workloads=MappingProxyType(constraints),
        spot_reclaims=tuple(reclaims),
        moves=tuple(moves),
    )


def _without_pauses(steps: Callable[P, Generator[None, None, R]]) -> Callable[P, R]:
    """``steps``' work in one call: its steps run to the end, without a pause."""

    def whole(*args: P.args, **kwargs: P.kwargs) -> R:
        return finish(steps(*args, **kwargs))

    return whole


#: The fleet at ``now`` from the hub's Cluster, ResourceBinding and Work objects (dicts), in one
#: call: :func:`sample_steps` without its pauses (same arguments, the sample).
sample_from_cluster_statuses = _without_pauses(sample_steps)
