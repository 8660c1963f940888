"""Failover decisions as pure functions: default tolerations, taint and application evictions,
eviction tasks and when they end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apis.meta import Taint, Toleration
from controlplane.apis.timestamps import format_time
from controlplane.apis.work_v1alpha1 import EvictionReason
from controlplane.controllers.failover import (
    EvictionCause,
    PurgeMode,
    application_evictions,
    assess_task,
    effective_tolerations,
    evicting_clusters,
    eviction_task,
    merge_checks,
    new_placement_ready,
    purge_mode_of,
    reported_health,
    taint_evictions,
    with_tasks,
)
from policies.affinity import ClusterView

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
UNREACHABLE = "cluster.gpufed.io/unreachable"
NOT_READY = "cluster.gpufed.io/not-ready"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def toleration(key: str | None, *, seconds: int | None = None, effect: str | None = "NoExecute") -> Toleration:
    return Toleration.model_validate(
        {"key": key, "operator": "Exists", "effect": effect, "tolerationSeconds": seconds}
    )


def tainted(name: str, *taints: tuple[str, str]) -> ClusterView:
    return ClusterView(
        name=name,
        taints=tuple(Taint(key=key, effect=effect, time_added=format_time(T0)) for key, effect in taints),
    )


@pytest.mark.parametrize(
    ("given", "defaults"),
    [
        ([], {UNREACHABLE: 300, NOT_READY: 300}),
        ([toleration(UNREACHABLE, seconds=60)], {NOT_READY: 300}),
        ([toleration(UNREACHABLE)], {NOT_READY: 300}),  # tolerated for ever: no default for it
        ([toleration(None, effect=None)], {}),  # tolerates every taint
        ([toleration(UNREACHABLE, effect="NoSchedule")], {UNREACHABLE: 300, NOT_READY: 300}),
    ],
)
def test_health_taints_get_a_default_toleration_only_when_none_matches(
    given: list[Toleration], defaults: dict[str, int]
) -> None:
    out = effective_tolerations(given, unreachable_seconds=300, not_ready_seconds=300)
    assert out[: len(given)] == given
    added = {t.key: t.toleration_seconds for t in out[len(given) :]}
    assert added == defaults
    assert all(t.effect == "NoExecute" for t in out[len(given) :])


UNREACHABLE_BOTH = ((UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute"))


@pytest.mark.parametrize(
    ("taints", "tolerations", "now", "due", "next_at"),
    [
        # the default toleration of the unreachable taint: 300 s from timeAdded
        (UNREACHABLE_BOTH, [], at(299), False, at(300)),
        (UNREACHABLE_BOTH, [], at(300), True, None),
        # the placement's own tolerationSeconds wins over the default
        (UNREACHABLE_BOTH, [toleration(UNREACHABLE, seconds=30)], at(29), False, at(30)),
        (UNREACHABLE_BOTH, [toleration(UNREACHABLE, seconds=30)], at(31), True, None),
        # tolerated for ever: never evicted
        (UNREACHABLE_BOTH, [toleration(UNREACHABLE)], at(10_000), False, None),
        # any other untolerated NoExecute taint evicts at once
        ((("maintenance", "NoExecute"),), [], at(0), True, None),
        # NoSchedule alone never evicts
        ((("maintenance", "NoSchedule"),), [], at(10_000), False, None),
    ],
)
def test_no_execute_taints_evict_when_their_toleration_runs_out(
    taints: tuple[tuple[str, str], ...], tolerations: list[Toleration], now: datetime, due: bool, next_at: datetime | None
) -> None:
    effective = effective_tolerations(tolerations, unreachable_seconds=300, not_ready_seconds=300)
    check = taint_evictions(
        ["a"], {"a": tainted("a", *taints)}, effective, now=now, purge_mode=PurgeMode.GRACEFULLY, grace_period_seconds=600
    )
    assert ("a" in check.due) is due
    assert check.next_at == next_at
    if due:
        cause = check.due["a"]
        assert cause.reason is EvictionReason.TAINT_UNTOLERATED
        assert taints[-1][0] in cause.message
        assert (cause.purge_mode, cause.grace_period_seconds) == (PurgeMode.GRACEFULLY, 600)


def test_only_the_clusters_the_binding_runs_in_are_looked_at() -> None:
    views = {"a": tainted("a", ("maintenance", "NoExecute")), "b": tainted("b", ("maintenance", "NoExecute"))}
    check = taint_evictions(["b", "gone"], views, [], now=T0, purge_mode=PurgeMode.DIRECTLY, grace_period_seconds=None)
    assert set(check.due) == {"b"}


@pytest.mark.parametrize(("now", "due", "next_at"), [(at(119), False, at(120)), (at(120), True, None)])
def test_application_unhealthy_for_the_toleration_is_evicted(now: datetime, due: bool, next_at: datetime | None) -> None:
    check = application_evictions(
        {"a": T0}, toleration_seconds=120, now=now, purge_mode=PurgeMode.GRACEFULLY, grace_period_seconds=60
    )
    assert ("a" in check.due) is due
    assert check.next_at == next_at
    if due:
        assert check.due["a"].reason is EvictionReason.APPLICATION_FAILURE
        assert "Unhealthy" in check.due["a"].message


def test_merged_checks_keep_the_first_cause_and_the_soonest_time() -> None:
    taint = taint_evictions(
        ["a"], {"a": tainted("a", ("maintenance", "NoExecute"))}, [], now=T0,
        purge_mode=PurgeMode.GRACEFULLY, grace_period_seconds=600,
    )
    app = application_evictions(
        {"a": T0, "b": at(-50)}, toleration_seconds=100, now=at(60), purge_mode=PurgeMode.DIRECTLY,
        grace_period_seconds=None,
    )
    merged = merge_checks(taint, app)
    assert merged.due["a"].reason is EvictionReason.TAINT_UNTOLERATED
    assert set(merged.due) == {"a", "b"}
    assert merge_checks(
        application_evictions({"x": T0}, toleration_seconds=10, now=T0, purge_mode=PurgeMode.NEVER, grace_period_seconds=None),
        application_evictions({"y": T0}, toleration_seconds=5, now=T0, purge_mode=PurgeMode.NEVER, grace_period_seconds=None),
    ).next_at == at(5)


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, PurgeMode.GRACEFULLY),
        ("Gracefully", PurgeMode.GRACEFULLY),
        ("Graciously", PurgeMode.GRACEFULLY),
        ("Directly", PurgeMode.DIRECTLY),
        ("Immediately", PurgeMode.DIRECTLY),
        ("Never", PurgeMode.NEVER),
    ],
)
def test_both_purge_mode_spellings_are_understood(value: str | None, mode: PurgeMode) -> None:
    assert purge_mode_of(value) is mode


def test_eviction_tasks_record_the_cause_and_replace_an_older_one_for_the_cluster() -> None:
    cause = EvictionCause("a", EvictionReason.TAINT_UNTOLERATED, "why", PurgeMode.GRACEFULLY, 90)
    task = eviction_task(cause, replicas=4, now=T0)
    assert task == {
        "fromCluster": "a", "replicas": 4, "reason": "TaintUntolerated", "message": "why",
        "creationTimestamp": "2024-05-01T10:00:00Z", "purgeMode": "Gracefully", "gracePeriodSeconds": 90,
    }
    direct = eviction_task(EvictionCause("b", EvictionReason.APPLICATION_FAILURE, "m", PurgeMode.DIRECTLY, 90), replicas=1, now=T0)
    assert "gracePeriodSeconds" not in direct
    older = {"fromCluster": "a", "replicas": 9, "creationTimestamp": "2024-04-01T00:00:00Z"}
    other = {"fromCluster": "c", "replicas": 1}
    assert with_tasks([older, other], [task]) == [other, task]
    assert evicting_clusters({"gracefulEvictionTasks": [other, task]}) == {"a", "c"}
    assert evicting_clusters({}) == set()


def item(cluster: str, *, applied: bool = True, health: str | None = "Healthy") -> dict[str, Any]:
    out: dict[str, Any] = {"clusterName": cluster, "applied": applied}
    if health:
        out["health"] = health
    return out


@pytest.mark.parametrize(
    ("items", "targets", "ready"),
    [
        ([item("b")], ["b"], True),
        ([item("b"), item("c")], ["b", "c"], True),
        ([item("b"), item("c", health="Unknown")], ["b", "c"], False),
        ([item("b", applied=False)], ["b"], False),
        ([item("b", health=None)], ["b"], False),
        ([], ["b"], False),
        ([], [], True),
    ],
)
def test_new_placement_is_ready_when_every_target_is_applied_and_healthy(
    items: list[dict[str, Any]], targets: list[str], ready: bool
) -> None:
    assert new_placement_ready(items, targets) is ready


def task(mode: str | None, *, grace: int | None = 60, cluster: str = "a") -> dict[str, Any]:
    out: dict[str, Any] = {"fromCluster": cluster, "replicas": 2, "reason": "TaintUntolerated", "creationTimestamp": format_time(T0)}
    if mode:
        out["purgeMode"] = mode
    if grace is not None:
        out["gracePeriodSeconds"] = grace
    return out


@pytest.mark.parametrize(
    ("given", "targets", "ready", "exists", "now", "done", "recheck"),
    [
        (task("Directly", grace=None), ["b"], False, True, at(0), True, None),
        (task("Immediately", grace=None), ["b"], False, True, at(0), True, None),
        (task("Never", grace=None), ["b"], True, True, at(10_000), False, None),
        (task("Gracefully"), ["b"], True, True, at(1), True, None),
        (task("Gracefully"), ["b"], False, True, at(59), False, at(60)),
        (task("Gracefully"), ["b"], False, True, at(60), True, None),
        (task(None, grace=None), ["b"], False, True, at(100), False, at(120)),  # the hub's default grace
        (task("Graciously", grace=None), ["b"], False, True, at(120), True, None),
        (task("Never", grace=None), ["a", "b"], False, True, at(0), True, None),  # chosen again
        (task("Gracefully"), ["b"], False, False, at(0), True, None),  # the cluster was deleted
    ],
)
def test_eviction_tasks_end_by_purge_mode_readiness_and_grace(
    given: dict[str, Any], targets: list[str], ready: bool, exists: bool, now: datetime, done: bool,
    recheck: datetime | None,
) -> None:
    verdict = assess_task(
        given, targets=targets, ready=ready, cluster_exists=exists, now=now, default_grace_seconds=120
    )
    assert verdict.done is done, verdict.why
    assert verdict.recheck_at == recheck
    assert verdict.why


def work(*, generation: int, observed: int, health: str, name: str = "train") -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "status": {
            "conditions": [{"type": "Applied", "status": "True", "observedGeneration": observed}],
            "manifestStatuses": [
                {"identifier": {"kind": "ConfigMap", "name": "settings"}, "health": "Healthy"},
                {"identifier": {"kind": "Deployment", "name": name}, "health": health},
            ],
        },
    }


@pytest.mark.parametrize(
    ("given", "health"),
    [
        (work(generation=2, observed=2, health="Unhealthy"), "Unhealthy"),
        (work(generation=3, observed=2, health="Unhealthy"), None),  # about an older generation
        (work(generation=2, observed=2, health="Healthy"), "Healthy"),
        (work(generation=2, observed=2, health="Unhealthy", name="other"), None),
    ],
)
def test_reported_health_is_the_workloads_at_the_current_generation(given: dict[str, Any], health: str | None) -> None:
    assert reported_health(given, {"kind": "Deployment", "name": "train"}) == health
