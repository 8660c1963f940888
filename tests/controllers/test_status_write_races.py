"""A controller's status write that loses a race (409 Conflict: its copy was stale) is looked at
again in CONFLICT_RETRY_SECONDS; one whose object went meanwhile (404 NotFound) is done. Either
way nothing that follows a written status happens (its log line, its Event, its TTL wait), and
the reconcile does not fail. For each controller that writes a status this way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controlplane.apiserver import errors as api_errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.context import CONFLICT_RETRY_SECONDS, ControllerContext
from controlplane.controllers.federatedhpa.cron import CronFederatedHPAController
from controlplane.controllers.federatedquotas import FederatedQuotaController
from controlplane.controllers.multiclusterservices import MultiClusterServiceController
from controlplane.controllers.policyselectors import PolicySelectorsController
from controlplane.controllers.rebalancers import RebalancerController
from controlplane.objectclient import ResourceType, errors

from .conftest import FAST
from .fleet import eventually
from .test_cron_federated_hpa import API as CRON_API
from .test_cron_federated_hpa import START, Clock
from .test_federated_quotas import SAMPLE as QUOTA
from .test_multi_cluster_services import MCS_API, mcs
from .test_policy_selectors import policy
from .test_workload_rebalancer import REBALANCER_API, rebalancer

Refusal = Callable[[ResourceType, dict[str, Any]], errors.ApiError]


def _conflict(rt: ResourceType, obj: dict[str, Any]) -> errors.ApiError:
    return errors.conflict_modified(plural=rt.plural, group=rt.group, name=obj["metadata"]["name"])


def _gone(rt: ResourceType, obj: dict[str, Any]) -> errors.ApiError:
    return api_errors.not_found(plural=rt.plural, group=rt.group, name=obj["metadata"]["name"])


#: (how the status write is refused, what the reconcile returns then)
OUTCOMES = [
    pytest.param(_conflict, CONFLICT_RETRY_SECONDS, id="conflict"),
    pytest.param(_gone, None, id="not-found"),
]


def refuse_status_writes(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch, kind: str, refusal: Refusal
) -> list[str]:
    """Make every status write of ``kind`` fail with ``refusal`` (others go through); the names
    whose status writes were refused."""
    real = objects.update_status
    refused: list[str] = []

    async def update_status(rt: ResourceType, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if rt.kind == kind:
            refused.append(obj["metadata"]["name"])
            raise refusal(rt, obj)
        return await real(rt, obj, **kwargs)

    monkeypatch.setattr(objects, "update_status", update_status)
    return refused


@contextlib.asynccontextmanager
async def informed(ctx: ControllerContext) -> AsyncIterator[None]:
    """The context's informers running and listed (for reconciles that read their copies)."""
    task = asyncio.create_task(ctx.run_informers())
    try:
        await ctx.wait_synced()
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def cached(ctx: ControllerContext, rt: ResourceType, namespace: str | None, name: str) -> None:
    async def seen() -> bool:
        return ctx.cached(rt, namespace, name) is not None

    await eventually(seen, what=f"{rt.kind} {name} in the informer")


@pytest.mark.parametrize(("refusal", "outcome"), OUTCOMES)
async def test_cron_federated_hpa(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch, refusal: Refusal, outcome: float | None
) -> None:
    controller = CronFederatedHPAController(ControllerContext(objects, settings=FAST, clock=Clock(START)))
    rt = objects.registry.require(CRON_API, "CronFederatedHPA")
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    await objects.create(
        rt,
        {
            "apiVersion": CRON_API,
            "kind": "CronFederatedHPA",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "scaleTargetRef": ref,
                "rules": [{"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 3}],
            },
        },
    )
    refused = refuse_status_writes(objects, monkeypatch, "CronFederatedHPA", refusal)
    # Written, it would wait for the rule's next execution (30 s away).
    assert await controller.reconcile(("default", "web")) == outcome
    assert refused == ["web"]


@pytest.mark.parametrize(("refusal", "outcome"), OUTCOMES)
async def test_federated_resource_quota(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch, refusal: Refusal, outcome: float | None
) -> None:
    ctx = ControllerContext(objects, settings=FAST)
    controller = FederatedQuotaController(ctx)
    rt = objects.registry.require(QUOTA["apiVersion"], "FederatedResourceQuota")
    await objects.create(rt, QUOTA)
    refused = refuse_status_writes(objects, monkeypatch, "FederatedResourceQuota", refusal)
    async with informed(ctx):
        await cached(ctx, rt, "default", "test")
        assert await controller.reconcile(("default", "test")) == outcome
    assert refused == ["test"]


@pytest.mark.parametrize(("refusal", "outcome"), OUTCOMES)
async def test_workload_rebalancer(
    objects: ObjectStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    refusal: Refusal,
    outcome: float | None,
) -> None:
    controller = RebalancerController(ControllerContext(objects, settings=FAST))
    await objects.create(
        objects.registry.require(REBALANCER_API, "WorkloadRebalancer"), rebalancer("now", "ghost", ttl=60)
    )
    refused = refuse_status_writes(objects, monkeypatch, "WorkloadRebalancer", refusal)
    with caplog.at_level(logging.INFO, logger="controlplane.controllers.rebalancers"):
        # Written, it would log its results and wait out its TTL (60 s).
        assert await controller.reconcile("now") == outcome
    assert refused == ["now"]
    assert "WorkloadRebalancer now:" not in caplog.text


@pytest.mark.parametrize(("refusal", "outcome"), OUTCOMES)
async def test_multi_cluster_service(
    objects: ObjectStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    refusal: Refusal,
    outcome: float | None,
) -> None:
    ctx = ControllerContext(objects, settings=FAST)
    controller = MultiClusterServiceController(ctx)
    rt = objects.registry.require(MCS_API, "MultiClusterService")
    await objects.create(rt, mcs("nginx", "CrossCluster"))
    refused = refuse_status_writes(objects, monkeypatch, "MultiClusterService", refusal)
    async with informed(ctx):
        await cached(ctx, rt, "default", "nginx")
        with caplog.at_level(logging.INFO, logger="controlplane.controllers.multiclusterservices"):
            assert await controller.reconcile(("default", "nginx")) == outcome
    assert refused == ["nginx"]
    assert "conditions written" not in caplog.text


@pytest.mark.parametrize(("refusal", "outcome"), OUTCOMES)
async def test_policy_selectors(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch, refusal: Refusal, outcome: float | None
) -> None:
    ctx = ControllerContext(objects, settings=FAST)
    controller = PolicySelectorsController(ctx)
    obj = policy("PropagationPolicy", ("ml.example.com/v1", "Trainer"))  # a kind the hub does not serve
    await objects.create(objects.registry.require(obj["apiVersion"], "PropagationPolicy"), obj)
    (rt,) = (t for t in ctx.propagation_types if t.kind == "PropagationPolicy")  # as stored
    refused = refuse_status_writes(objects, monkeypatch, "PropagationPolicy", refusal)
    async with informed(ctx):
        await cached(ctx, rt, "default", "trainers")
        assert await controller.reconcile(("PropagationPolicy", "default", "trainers")) == outcome
    assert refused == ["trainers"]
    # Written, the condition's False would come with a Warning Event.
    events = await objects.list(objects.registry.require("v1", "Event"), namespace="default")
    assert [e["reason"] for e in events.items if e["involvedObject"]["name"] == "trainers"] == []
