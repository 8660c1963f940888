"""Karmada's FederatedQuotaEnforcement (``--federated-quota-enforcement``): the scheduler writes no
decision that takes a namespace past a FederatedResourceQuota's ``overall``; the binding says why
(``QuotaExceeded``, Karmada's message) and is placed once room is made; the quota's
``status.overallUsed`` is what the namespace's bindings take. Off, nothing is held back."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.scheduler.controller import controller as scheduler_controller

from .conftest import FAST
from .fleet import deployment, eventually, node_shape, propagation_policy, put_cluster, settled
from .test_tier_return_loop import binding_of, placed

QUOTA_API = "policy.karmada.io/v1alpha1"
QUOTA = {"apiVersion": QUOTA_API, "kind": "FederatedResourceQuota",
         "metadata": {"name": "q", "namespace": "default"}, "spec": {"overall": {"cpu": "3"}}}


@pytest.fixture
async def enforcing(objects: ObjectStore) -> AsyncIterator[ControllerManager]:
    settings = dataclasses.replace(FAST, federated_quota_enforcement=True)
    async with ControllerManager(objects, settings=settings) as running:
        yield running


async def _setup(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(4, gpus=8))
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"),
                         propagation_policy("all"))
    await objects.create(objects.registry.require(QUOTA_API, "FederatedResourceQuota"), QUOTA)
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("a", replicas=2))


async def _scheduled(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    binding = await binding_of(objects, name)
    return next((c for c in ((binding or {}).get("status") or {}).get("conditions") or () if c["type"] == "Scheduled"), None)


async def test_a_decision_past_overall_is_held_back(objects: ObjectStore, enforcing: ControllerManager) -> None:
    await _setup(objects)
    assert await eventually(lambda: placed(objects, "a"), what="a placed") == {"onprem": 2}
    rt = objects.registry.require(QUOTA_API, "FederatedResourceQuota")

    async def used() -> Any:
        status = (await objects.get(rt, namespace="default", name="q")).get("status") or {}
        return status if (status.get("overallUsed") or {}).get("cpu") else None

    status = await eventually(used, what="overallUsed from the bindings")
    assert (status["overall"], status["overallUsed"]["cpu"]) == ({"cpu": "3"}, "2")

    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("b", replicas=2))

    async def held() -> dict[str, Any] | None:
        condition = await _scheduled(objects, "b")
        return condition if condition and condition["reason"] == "QuotaExceeded" else None

    condition = await eventually(held, what="b held back by the quota")
    assert (condition["status"], condition["message"]) == (
        "False", "FederatedResourceQuota(default/q) exceeded for resource cpu: requested sum 4, limit 3."
    )
    assert await placed(objects, "b") is None
    events = (await objects.list(objects.registry.require("v1", "Event"), namespace="default")).items
    assert any(e["reason"] == "FailedScheduling" and e["message"] == condition["message"] for e in events)

    raised = copy.deepcopy(await objects.get(rt, namespace="default", name="q"))
    raised["spec"]["overall"] = {"cpu": "4"}
    await objects.update(rt, raised)
    assert await eventually(lambda: placed(objects, "b"), what="b placed once overall is raised") == {"onprem": 2}

    async def all_used() -> Any:
        status = (await objects.get(rt, namespace="default", name="q")).get("status") or {}
        return status if (status.get("overallUsed") or {}).get("cpu") == "4" else None

    await eventually(all_used, what="overallUsed counting b")


def raise_overall_before_refusal(
    objects: ObjectStore, manager: ControllerManager, monkeypatch: pytest.MonkeyPatch, overall: dict[str, str],
) -> list[str]:
    """Make the scheduler's first quota refusal raise the FederatedResourceQuota ``default/q`` to
    ``overall``, and wait for the scheduler to see it, before the refusal is recorded: the binding
    (or group) does not say ``QuotaExceeded`` when the raise comes. Returns the refusals so raced."""
    assert manager.scheduler is not None
    enforcement = manager.scheduler.quota_enforcement
    assert enforcement.quotas is not None
    informer, refuse, raised = enforcement.quotas, enforcement.refuse, []
    rt = objects.registry.require(QUOTA_API, "FederatedResourceQuota")

    async def raise_first(binding: dict[str, Any], message: str) -> Any:
        if not raised:
            raised.append(message)
            current = await objects.get(rt, namespace="default", name="q")
            current["spec"]["overall"] = overall
            await objects.update(rt, current)

            async def seen() -> bool:
                return (informer.get("default", "q") or {}).get("spec", {}).get("overall") == overall

            await eventually(seen, what="the raise seen")
        return await refuse(binding, message)

    monkeypatch.setattr(enforcement, "refuse", raise_first)
    return raised


async def test_a_quota_raised_while_a_binding_is_refused_places_it_at_once(
    objects: ObjectStore, enforcing: ControllerManager, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``overall`` is raised from 3 to 4 CPUs between the scheduler refusing ``b`` and ``b``'s
    binding saying so (it does not say ``QuotaExceeded`` yet when the raise is seen, so the raise
    queues nothing): ``b`` is decided again once its refusal is written, and placed. The scheduler's
    retry of unplaced bindings is put an hour away, so only the raise can place it."""
    monkeypatch.setattr(scheduler_controller, "UNPLACED_RETRY_SECONDS", 3600.0)
    await _setup(objects)
    assert await eventually(lambda: placed(objects, "a"), what="a placed") == {"onprem": 2}
    raised = raise_overall_before_refusal(objects, enforcing, monkeypatch, {"cpu": "4"})
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("b", replicas=2))
    assert await eventually(lambda: placed(objects, "b"), what="b placed after the raise") == {"onprem": 2}
    assert raised == ["FederatedResourceQuota(default/q) exceeded for resource cpu: requested sum 4, limit 3."]


async def test_without_enforcement_nothing_is_held_back(objects: ObjectStore, manager: ControllerManager) -> None:
    await _setup(objects)
    await objects.create(objects.registry.require("apps/v1", "Deployment"), deployment("b", replicas=2))
    assert await eventually(lambda: placed(objects, "b"), what="b placed") == {"onprem": 2}
    await settled(manager)
    assert await placed(objects, "a") == {"onprem": 2}
