"""Kueue's admission fair sharing in the admission core: the decay and the entry penalty, computed
by hand from Kueue's formulas, and a ClusterQueue that takes its workloads by their LocalQueue's
usage (``admissionScope.admissionMode: UsageBasedAdmissionFairSharing``)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from controlplane.admission.core import Pending, PodSetRequest, decide
from controlplane.admission.core.admissionfairsharing import (
    AdmissionFairSharing,
    LocalQueueUsage,
    alpha_rate,
    decayed,
    entry_penalty,
    weighted_usage,
)
from tests.admission.builders import cluster_queue as cq

GPU = "nvidia.com/gpu"
#: A half-life of 10 minutes sampled every 5: the old value keeps 0.5 ** 0.5 = 0.70710678… of its weight.
TEN_MINUTES = AdmissionFairSharing(usage_half_life_seconds=600, usage_sampling_interval_seconds=300)


def job(key: str, local_queue: str, gpus: int = 4, *, at: str) -> Pending:
    return Pending(key, "shared", (PodSetRequest("main", 1, {GPU: gpus}),), 0, at, f"default/{local_queue}")


def test_the_decay_is_kueues_exponential_average_with_its_half_life() -> None:
    # alpha = 1 - 0.5 ** (300 / 600) = 0.29289321…; each product keeps milli-units, as Kueue's quantities.
    assert alpha_rate(300, 600) == pytest.approx(0.2928932188)
    got = decayed({GPU: 10.0, "cpu": 2.0}, {GPU: 4.0}, elapsed=300, half_life=600)
    # GPUs: 10 * 0.70710678 = 7.071 (truncated), 4 * 0.29289321 = 1.171; cpu: 2 * 0.70710678 = 1.414.
    assert got == {GPU: pytest.approx(8.242), "cpu": pytest.approx(1.414)}
    # One half-life later, what is held now weighs as much as the history.
    assert decayed({GPU: 10.0}, {GPU: 0.0}, elapsed=600, half_life=600) == {GPU: 5.0}
    # No half-life: no history (Kueue resets the usage).
    assert alpha_rate(300, 0) == 0.0


def test_the_entry_penalty_is_the_requests_times_one_intervals_decay() -> None:
    assert entry_penalty({GPU: 4.0}, TEN_MINUTES) == {GPU: pytest.approx(1.171)}
    assert entry_penalty({GPU: 4.0}, AdmissionFairSharing()) == {GPU: 0.0}  # no half-life, no penalty


def test_usage_weighs_resources_and_divides_by_the_local_queues_weight() -> None:
    consumed = {GPU: 2.0, "cpu": 8.0}
    assert weighted_usage(consumed, {}, weight=1, resource_weights={}) == 10.0
    assert weighted_usage(consumed, {GPU: 1.0}, weight=2, resource_weights={GPU: 4.0, "cpu": 0.5}) == (12 + 4) / 2
    assert weighted_usage(consumed, {}, weight=0, resource_weights={}) == float("inf")


def usage(consumed: Mapping[str, Mapping[str, float]], *, weights: Mapping[str, float] | None = None) -> LocalQueueUsage:
    return LocalQueueUsage(TEN_MINUTES, cluster_queues={"shared"}, consumed=consumed, weights=weights or {}, penalties={})


def test_the_local_queue_that_consumed_more_waits_behind_the_other_even_when_first() -> None:
    queue = cq("shared", {"onprem": {GPU: 4}})
    pending = [job("a1", "heavy", at="T1"), job("b1", "light", at="T2")]
    consumed = {"default/heavy": {GPU: 12.0}, "default/light": {GPU: 1.0}}
    fair = decide({"shared": queue}, pending, [], {}, fair_usage=usage(consumed))
    assert [a.key for a in fair.admitted] == ["b1"]
    assert [(w.key, w.position) for w in fair.waiting] == [("a1", 0)]
    plain = decide({"shared": queue}, pending, [], {})  # no admission fair sharing: the older first
    assert [a.key for a in plain.admitted] == ["a1"]


def test_a_local_queues_weight_lowers_its_usage() -> None:
    queue = cq("shared", {"onprem": {GPU: 4}})
    pending = [job("a1", "heavy", at="T2"), job("b1", "light", at="T1")]
    consumed = {"default/heavy": {GPU: 12.0}, "default/light": {GPU: 4.0}}
    fair = decide({"shared": queue}, pending, [], {}, fair_usage=usage(consumed, weights={"default/heavy": 4}))
    assert [a.key for a in fair.admitted] == ["a1"]  # 12 / 4 = 3 < 4, though b1 is older
    unweighted = decide({"shared": queue}, pending, [], {}, fair_usage=usage(consumed))
    assert [a.key for a in unweighted.admitted] == ["b1"]


def test_an_admission_adds_its_entry_penalty_so_the_next_goes_to_the_other_local_queue() -> None:
    queue = cq("shared", {"onprem": {GPU: 8}})
    pending = [job("a1", "team-a", at="T1"), job("a2", "team-a", at="T2"), job("b1", "team-b", at="T3")]
    fair_usage = usage({})
    fair = decide({"shared": queue}, pending, [], {}, fair_usage=fair_usage)
    assert sorted(a.key for a in fair.admitted) == ["a1", "b1"]
    assert fair_usage.penalties == {"default/team-a": {GPU: pytest.approx(1.171)}, "default/team-b": {GPU: pytest.approx(1.171)}}
    plain = decide({"shared": queue}, pending, [], {})
    assert sorted(a.key for a in plain.admitted) == ["a1", "a2"]


def test_a_cluster_queue_without_the_mode_keeps_its_order() -> None:
    queue = cq("other", {"onprem": {GPU: 4}})
    pending = [Pending("a1", "other", (PodSetRequest("main", 1, {GPU: 4}),), 0, "T1", "default/heavy"),
               Pending("b1", "other", (PodSetRequest("main", 1, {GPU: 4}),), 0, "T2", "default/light")]
    fair = decide({"other": queue}, pending, [], {}, fair_usage=usage({"default/heavy": {GPU: 12.0}}))
    assert [a.key for a in fair.admitted] == ["a1"]
