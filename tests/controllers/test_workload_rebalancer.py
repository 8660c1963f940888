"""Karmada's WorkloadRebalancer: listed workloads are placed afresh, with a result per workload."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager

from .fleet import A100, eventually, node_shape, put_cluster, settled
from .test_tier_return_loop import binding_of, burst_then_free, later, placed

REBALANCER_API = "apps.karmada.io/v1alpha1"


def rebalancer(name: str, *workloads: str, ttl: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workloads": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": w} for w in workloads]
    }
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": REBALANCER_API, "kind": "WorkloadRebalancer", "metadata": {"name": name}, "spec": spec}


async def _gone(objects: ObjectStore, name: str) -> bool:
    try:
        await objects.get(objects.registry.require(REBALANCER_API, "WorkloadRebalancer"), name=name)
    except errors.NotFound:
        return True
    return False


async def test_a_rebalancer_places_its_workloads_afresh(objects: ObjectStore, manager: ControllerManager) -> None:
    # Automatic returns are off: only the rebalancer moves the replicas.
    await burst_then_free(objects, manager, rebalance={"enabled": False})
    await settled(manager)
    assert await placed(objects, "web") == {"cloud": 4}

    rt = objects.registry.require(REBALANCER_API, "WorkloadRebalancer")
    await objects.create(rt, rebalancer("now", "web", "ghost"))

    async def on_prem() -> dict[str, int] | None:
        now = await placed(objects, "web")
        return now if now == {"onprem": 4} else None

    await eventually(on_prem, what="web placed afresh on-prem")

    async def finished() -> dict[str, Any] | None:
        status = (await objects.get(rt, name="now")).get("status") or {}
        return status if status.get("finishTime") else None

    status = await eventually(finished, what="the rebalancer's results")
    results = {w["workload"]["name"]: (w["result"], w.get("reason")) for w in status["observedWorkloads"]}
    assert results == {"web": ("Successful", None), "ghost": ("Failed", "ReferencedBindingNotFound")}
    assert status["observedGeneration"] == 1

    # Placed once: the same request does not move it again on later reports.
    await put_cluster(objects, "cloud", node_shape(1, gpus=8), provider="aws", pricing={A100: 4.1}, report_time=later(60), pods=[])
    await settled(manager)
    assert await placed(objects, "web") == {"onprem": 4}


async def test_a_finished_rebalancer_goes_after_its_ttl(objects: ObjectStore, manager: ControllerManager) -> None:
    rt = objects.registry.require(REBALANCER_API, "WorkloadRebalancer")
    await objects.create(rt, rebalancer("brief", "ghost", ttl=0))
    await eventually(lambda: _gone(objects, "brief"), what="the rebalancer deleted")


async def test_what_karmadas_crd_takes_applies_and_is_handled(objects: ObjectStore, manager: ControllerManager) -> None:
    """Karmada's CRD bounds neither a workload's names, nor their number, nor the TTL: an empty name
    finds no binding (Failed, ReferencedBindingNotFound, as Karmada's controller reports it), more
    than 1,000 workloads each get a result, and a negative TTL has run out once the rebalancer
    finished (Karmada's timeLeft <= 0: deleted at once)."""
    rt = objects.registry.require(REBALANCER_API, "WorkloadRebalancer")
    await objects.create(rt, rebalancer("unnamed", ""))
    await objects.create(rt, rebalancer("many", *(f"ghost-{i}" for i in range(1001))))
    created = await objects.create(rt, rebalancer("expired", "ghost", ttl=-1))
    assert created["spec"]["ttlSecondsAfterFinished"] == -1

    async def results(name: str) -> list[tuple[str, str, str | None]] | None:
        status = (await objects.get(rt, name=name)).get("status") or {}
        if not status.get("finishTime"):
            return None
        return [(w["workload"]["name"], w["result"], w.get("reason")) for w in status["observedWorkloads"]]

    assert await eventually(lambda: results("unnamed"), what="the unnamed workload's result") == [
        ("", "Failed", "ReferencedBindingNotFound")
    ]
    assert await eventually(lambda: results("many"), what="1,001 results") == [
        (f"ghost-{i}", "Failed", "ReferencedBindingNotFound") for i in range(1001)
    ]

    await eventually(lambda: _gone(objects, "expired"), what="the expired rebalancer deleted")


async def test_a_rebalancer_must_list_workloads(objects: ObjectStore) -> None:
    rt = objects.registry.require(REBALANCER_API, "WorkloadRebalancer")
    for spec in ({"workloads": []}, {}, {"workloads": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}):
        try:
            await objects.create(rt, {**rebalancer("bad"), "spec": spec})
        except errors.Invalid as exc:
            assert "spec.workloads" in str(exc)
        else:
            raise AssertionError(f"{spec} was accepted")


async def test_a_running_gang_keeps_its_cluster(objects: ObjectStore, manager: ControllerManager) -> None:
    await burst_then_free(objects, manager, replicas=2, gang=True)
    await settled(manager)

    rt = objects.registry.require(REBALANCER_API, "WorkloadRebalancer")
    await objects.create(rt, rebalancer("now", "web"))

    async def finished() -> dict[str, Any] | None:
        status = (await objects.get(rt, name="now")).get("status") or {}
        return status if status.get("finishTime") else None

    await eventually(finished, what="the rebalancer's results")
    binding = await eventually(lambda: binding_of(objects, "web"), what="web's binding")

    async def decided_again() -> bool:
        current = await binding_of(objects, "web") or {}
        last = (current.get("status") or {}).get("lastScheduledTime") or ""
        return last > str(current["spec"].get("rescheduleTriggeredAt"))

    await eventually(decided_again, what="the fresh decision")
    assert binding["spec"]["gang"] is True
    assert await placed(objects, "web") == {"cloud": 2}
