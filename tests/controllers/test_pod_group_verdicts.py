"""A pod group that does not fit, or that a FederatedResourceQuota refuses, is decided once per
trigger, not once per Pod, and one that can never fit says so, as a single binding does, and waits
for the fleet's capacity to change.

Decisions are counted with the hub's ``gpufed_scheduling_duration_seconds`` histogram, which
observes one sample per scheduling decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.metrics import hub_metrics
from controlplane.scheduler.controller import controller as scheduler_controller

from .conftest import FAST
from .fleet import eventually, put_cluster, settled
from .test_admission import create
from .test_admission_pod_groups import group_pod
from .test_federated_quota_enforcement import raise_overall_before_refusal
from .test_pod_group_placement import (
    binding,
    clusters,
    decided,
    fleet,
    nodes,
    place_group,
    placed_binding,
    scheduled,
    take_placement_away,
)

pytestmark = pytest.mark.waiting


def decisions() -> float:
    """Scheduling decisions the hub has made so far, whatever their result."""
    metric = "gpufed_scheduling_duration_seconds_count"
    return sum(
        sample.value
        for family in hub_metrics().registry.collect()
        for sample in family.samples
        if sample.name == metric
    )


async def put_big(objects: ObjectStore, *, gpus: int, allocatable: int | None = None, minute: int) -> None:
    """A capacity report of ``b-big``: one node of ``gpus`` free GPUs (of ``allocatable``)."""
    await put_cluster(
        objects, "b-big", nodes(1, gpus=gpus, allocatable=allocatable), provider="cloud", pricing={"A100": 4.0},
        pods=[], report_time=f"2024-05-01T10:{minute:02d}:00Z",
    )


async def told(objects: ObjectStore, pod: str, text: str) -> dict[str, Any] | None:
    found = await decided(objects, pod)
    return found if found is not None and text in scheduled(found)["message"] else None


async def test_a_group_of_eight_that_does_not_fit_is_decided_once_per_report(
    objects: ObjectStore, manager: ControllerManager,
) -> None:
    """8 one-GPU Pods, 2 free GPUs of 8 in each cluster: every capacity report (here, ``b-big``'s,
    the same again) sends all 8 bindings back to the scheduler, which decides for the group once, and rewrites no binding
    whose decision is the same."""
    await fleet(objects, manager, small=2, big=2, allocatable=8)
    names = [f"g{i}" for i in range(8)]
    for name in names:
        await create(objects, group_pod(name, total="8", queue="team-lq"))
    for name in names:
        await eventually(lambda n=name: told(objects, n, "no cluster can hold its 8 pods"), what=f"{name} told why")
    await decided_once_per_report(objects, manager, names, gpus=2, allocatable=8)


async def decided_once_per_report(
    objects: ObjectStore, manager: ControllerManager, names: list[str], *, gpus: int, allocatable: int | None = None,
) -> None:
    """Three reports of ``b-big`` (``gpus`` free of ``allocatable``), each of which decides for the
    unplaced group of ``names`` once and rewrites none of its bindings."""
    await settled(manager)
    versions = {name: (await binding(objects, name) or {})["metadata"]["resourceVersion"] for name in names}
    for minute in range(1, 4):
        before = decisions()
        await put_big(objects, gpus=gpus, allocatable=allocatable, minute=minute)
        await settled(manager)
        assert decisions() - before == 1, f"report {minute}: {decisions() - before} decisions for one group"
    for name in names:
        found = await binding(objects, name)
        assert found is not None and clusters(found) == {}
        assert found["metadata"]["resourceVersion"] == versions[name], f"{name}'s unchanged status was written again"


QUOTA_API = "policy.karmada.io/v1alpha1"


@pytest.fixture
async def enforcing(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    """The controllers with Karmada's FederatedQuotaEnforcement on."""
    async with ControllerManager(objects, settings=dataclasses.replace(FAST, federated_quota_enforcement=True)) as running:
        yield running


async def test_a_group_a_federated_quota_refuses_is_decided_once_per_report(
    objects: ObjectStore, enforcing: ControllerManager,
) -> None:
    """A FederatedResourceQuota of 2 GPUs, a group of three 1-GPU Pods that ``b-big`` holds: what the
    three take together is past ``overall`` (each alone is not), so none is placed and every binding
    says so, with the same message; each capacity report decides for the group once and rewrites no
    binding."""
    quota = {"apiVersion": QUOTA_API, "kind": "FederatedResourceQuota", "metadata": {"name": "q", "namespace": "default"},
             "spec": {"overall": {"nvidia.com/gpu": "2"}}}
    await objects.create(objects.registry.require(QUOTA_API, "FederatedResourceQuota"), quota)
    await fleet(objects, enforcing, small=2, big=4)
    names = ["g0", "g1", "g2"]
    for name in names:
        await create(objects, group_pod(name, queue="team-lq"))
    message = "FederatedResourceQuota(default/q) exceeded for resource nvidia.com/gpu: requested sum 3, limit 2."
    for name in names:
        found = await eventually(lambda n=name: told(objects, n, "FederatedResourceQuota"), what=f"{name} refused")
        condition = scheduled(found)
        assert (condition["status"], condition["reason"], condition["message"]) == ("False", "QuotaExceeded", message)
    await decided_once_per_report(objects, enforcing, names, gpus=4)
    assert sorted(n for n, m in await pod_events(objects, "FailedScheduling") if m == message) == names


async def test_a_later_pod_of_a_placed_group_is_held_back_by_a_federated_quota(
    objects: ObjectStore, enforcing: ControllerManager,
) -> None:
    """The group of three fits a quota of 3 GPUs and is placed; ``overall`` is lowered to 2 and one
    Pod's placement is taken away: that Pod follows the rest of its group only within the quota."""
    quota = {"apiVersion": QUOTA_API, "kind": "FederatedResourceQuota", "metadata": {"name": "q", "namespace": "default"},
             "spec": {"overall": {"nvidia.com/gpu": "3"}}}
    quota_rt = objects.registry.require(QUOTA_API, "FederatedResourceQuota")
    await objects.create(quota_rt, quota)
    await fleet(objects, enforcing, small=2, big=4)
    await place_group(objects, enforcing)
    lowered = await objects.get(quota_rt, namespace="default", name="q")
    lowered["spec"]["overall"] = {"nvidia.com/gpu": "2"}
    await objects.update(quota_rt, lowered)
    await settled(enforcing)
    await take_placement_away(objects, "g1")
    held = await eventually(lambda: told(objects, "g1", "FederatedResourceQuota"), what="g1 held back")
    assert scheduled(held)["message"] == (
        "FederatedResourceQuota(default/q) exceeded for resource nvidia.com/gpu: requested sum 3, limit 2."
    )
    await settled(enforcing)
    assert clusters(await binding(objects, "g1") or {"spec": {}}) == {}


async def test_a_quota_raised_while_a_group_is_refused_places_it_at_once(
    objects: ObjectStore, enforcing: ControllerManager, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A FederatedResourceQuota of 2 GPUs refuses the group of three; ``overall`` is raised to 3
    between the decision and its bindings saying so (none of them says ``QuotaExceeded`` yet when
    the raise is seen), so the refusal the group's other Pods would reuse is stale: the group is
    decided again and placed at once. The scheduler's retry of unplaced bindings is put an hour
    away, so only the raise can place it."""
    monkeypatch.setattr(scheduler_controller, "UNPLACED_RETRY_SECONDS", 3600.0)
    quota_rt = objects.registry.require(QUOTA_API, "FederatedResourceQuota")
    await objects.create(quota_rt, {"apiVersion": QUOTA_API, "kind": "FederatedResourceQuota",
                                    "metadata": {"name": "q", "namespace": "default"},
                                    "spec": {"overall": {"nvidia.com/gpu": "2"}}})
    await fleet(objects, enforcing, small=2, big=4)
    raised = raise_overall_before_refusal(objects, enforcing, monkeypatch, {"nvidia.com/gpu": "3"})
    for name in ("g0", "g1", "g2"):
        await create(objects, group_pod(name, queue="team-lq"))
    for name in ("g0", "g1", "g2"):
        found = await eventually(lambda n=name: placed_binding(objects, n), what=f"{name} placed after the raise")
        assert clusters(found) == {"b-big": 1}
    assert raised == ["FederatedResourceQuota(default/q) exceeded for resource nvidia.com/gpu: requested sum 3, limit 2."]


async def pod_events(objects: ObjectStore, reason: str) -> list[tuple[str, str]]:
    listed = await objects.list(objects.registry.require("v1", "Event"), namespace="default")
    return [(e["involvedObject"]["name"], e["message"]) for e in listed.items if e["reason"] == reason]


async def schedulable(objects: ObjectStore, pod: str) -> dict[str, Any] | None:
    found = await objects.get(objects.registry.require("v1", "Pod"), namespace="default", name=pod)
    return next((c for c in (found.get("status") or {}).get("conditions") or () if c["type"] == "Schedulable"), None)


@pytest.mark.parametrize(
    ("small", "big", "gpus", "why"),
    [
        pytest.param(1, 2, (1, 1, 1), "its 3 pods need 3 nvidia.com/gpu together; the largest cluster has 2",
                     id="the-sum-more-than-any-cluster"),
        pytest.param(2, 2, (3, 1, 1), "needs 3 nvidia.com/gpu in one pod; the largest node in the fleet has 2",
                     id="one-pod-more-than-any-node"),
    ],
)
async def test_a_group_that_can_never_fit_says_so_and_waits_for_capacity(
    objects: ObjectStore, manager: ControllerManager, small: int, big: int, gpus: tuple[int, ...], why: str,
) -> None:
    await fleet(objects, manager, small=small, big=big)
    names = [f"g{i}" for i in range(len(gpus))]
    for name, count in zip(names, gpus, strict=True):
        await create(objects, group_pod(name, gpus=count, queue="team-lq"))
    message = f"pod group grp: can never fit: {why}"
    for name in names:
        found = await eventually(lambda n=name: told(objects, n, "can never fit"), what=f"{name} told it never fits")
        condition = scheduled(found)
        assert (condition["status"], condition["reason"], condition["message"]) == ("False", "NeverFits", message)
        assert clusters(found) == {}
        pod_condition = await eventually(lambda n=name: schedulable(objects, n), what=f"{name}'s Schedulable")
        assert (pod_condition["status"], pod_condition["reason"], pod_condition["message"]) == (
            "False", "NeverFits", message,
        )
    await settled(manager)
    assert sorted(n for n, m in await pod_events(objects, "FailedScheduling") if message in m) == names

    # Reports that change only what is free decide nothing, and change nothing.
    before = decisions()
    await put_big(objects, gpus=0, allocatable=big, minute=1)
    await put_big(objects, gpus=big, minute=2)
    await settled(manager)
    assert decisions() == before
    assert len([m for _, m in await pod_events(objects, "FailedScheduling") if message in m]) == len(names)

    # A big enough node joins: the group is decided again, once, and placed whole.
    await put_big(objects, gpus=8, minute=3)
    for name in names:
        found = await eventually(lambda n=name: placed_binding(objects, n), what=f"{name} placed")
        assert clusters(found) == {"b-big": 1}
    await settled(manager)
    for name in names:
        assert await schedulable(objects, name) is None, f"{name}'s Schedulable condition stays"
