"""The scheduler's cache: bounded tables, ids that never mean two things, and decisions that use it."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from controlplane.interpreter.requirements import ReplicaRequirements
from controlplane.scheduler.core.cache import BoundedMemo, SchedulerCache
from controlplane.scheduler.core.deciding import schedule
from controlplane.scheduler.core.framework import BindingRequest
from controlplane.scheduler.core.snapshot import ClusterSnapshot
from policies.models import Placement

from .builders import cluster, shape
from .test_caches_equivalence import random_cluster

NOW = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def test_a_full_table_empties_itself_before_taking_a_new_key_but_not_an_old_one() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(2)
    memo.remember("a", 1)
    memo.remember("b", 2)
    memo.remember("b", 3)  # a key it has: nothing is forgotten
    assert memo == {"a": 1, "b": 3}
    assert memo.remember("c", 4) == 4
    assert memo == {"c": 4}


def test_request_kind_ids_are_stable_in_a_cache_and_never_shared_between_caches() -> None:
    one, other = SchedulerCache(), SchedulerCache()
    kind = (False, ReplicaRequirements.build({"nvidia.com/gpu": 1}), False, 1, ())
    assert one.verdict_id(kind) == one.verdict_id(kind)
    # Snapshots memoise verdicts by these ids and may be asked through both caches.
    assert one.verdict_id(kind) != other.verdict_id(kind)
    assert one.verdict_id((True, *kind[1:])) != one.verdict_id(kind)


def test_node_shapes_share_their_memo_only_through_one_cache() -> None:
    wire = random_cluster(random.Random(11), "c")
    cache = SchedulerCache()
    first = ClusterSnapshot.from_cluster(wire, cache=cache)
    again = ClusterSnapshot.from_cluster(wire, previous=first, cache=cache)
    alone = ClusterSnapshot.from_cluster(wire)
    assert all(a.fits is b.fits for a, b in zip(first.shapes, again.shapes, strict=True))
    assert not any(a.fits is b.fits for a, b in zip(first.shapes, alone.shapes, strict=True))
    assert len(cache.node_memos) == len({id(s.fits) for s in first.shapes})


def test_a_decision_fills_the_cache_it_is_given_and_decides_as_one_without() -> None:
    fleet = [cluster("a", shape(2, gpus=4)), cluster("b", shape(1, gpus=8), provider="aws", tier=1)]
    placement = Placement.model_validate(
        {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "TieredOverflow"}}
    )
    request = BindingRequest("ns/b", 6, ReplicaRequirements.build({"nvidia.com/gpu": 1}), placement=placement)
    cache = SchedulerCache()
    warm = schedule(request, fleet, now=NOW, cache=cache)
    assert cache.affinity_terms and cache.placement_keys and cache.fleet_verdicts and cache.verdict_ids
    again = schedule(request, fleet, now=NOW, cache=cache)
    cold = schedule(request, fleet, now=NOW)
    assert warm.clusters == again.clusters == cold.clusters
    assert sum(warm.clusters.values()) == 6
