"""A ResourceInterpreterCustomization drives a custom GPU training kind through the hub (on real
etcd): its Lua ``replicaResource`` decides the binding's replicas and GPU requirements (and so
the clusters chosen), ``replicaRevision`` each cluster's share in its Work, ``statusAggregation``
the hub object's status from the members' statuses; a script that loops forever or fails is a
``Ready=False`` condition and an Event, and the hub keeps working."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers.manager import ControllerManager
from controlplane.hub import hub_registry
from controlplane.interpreter import interpreter_for
from controlplane.storage import EtcdStore
from tests.interpreter.trainingrun_scripts import AGGREGATE, API, GET_REPLICAS, REVISE, RIC_API, customization

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster, settled

pytestmark = pytest.mark.waiting

WORK_API = "work.gpufed.io/v1alpha1"

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "trainingruns.ml.example.com"},
    "spec": {
        "group": "ml.example.com",
        "scope": "Namespaced",
        "names": {"plural": "trainingruns", "kind": "TrainingRun"},
        "versions": [
            {
                "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def training_run(name: str, *, workers: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TrainingRun",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "workers": workers,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "trainer", "image": "trainer:1",
                         "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": str(gpus)},
                                       "limits": {"nvidia.com/gpu": str(gpus)}}}
                    ]
                }
            },
        },
    }


@pytest.fixture
async def hub(etcd_endpoint: str) -> AsyncIterator[ObjectStore]:
    """An etcd-backed hub store serving the TrainingRun CRD (through the CRD controller)."""
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/{uuid.uuid4().hex}") as store:
        registry = hub_registry()
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        crd_type = registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        stop = asyncio.Event()
        crds = CrdController(objects, registry, crd_type)
        task = asyncio.create_task(crds.run(stop))
        try:
            await crds.wait_synced()
            await objects.create(crd_type, CRD)
            await eventually(lambda: _served(registry), what="the TrainingRun CRD served")
            yield objects
        finally:
            stop.set()
            await task


async def _served(registry: DynamicRegistry) -> bool:
    return registry.for_kind(API, "TrainingRun") is not None


async def create(objects: ObjectStore, obj: dict[str, Any]) -> dict[str, Any]:
    return await objects.create(objects.registry.require(obj["apiVersion"], obj["kind"]), obj)


async def get(objects: ObjectStore, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await objects.get(objects.registry.require(api_version, kind), namespace=namespace, name=name)
    except errors.NotFound:
        return None


async def binding(objects: ObjectStore, name: str) -> dict[str, Any] | None:
    found = await get(objects, WORK_API, "ResourceBinding", f"{name}-trainingrun", "default")
    return found if found and (found.get("spec") or {}).get("clusters") else None


async def ready_condition(objects: ObjectStore, reason: str) -> dict[str, Any] | None:
    ric = await get(objects, RIC_API, "ResourceInterpreterCustomization", "trainingrun")
    for cond in ((ric or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("reason") == reason:
            return dict(cond)
    return None


async def binding_condition(objects: ObjectStore, name: str, status: str) -> dict[str, Any] | None:
    found = await get(objects, WORK_API, "ResourceBinding", f"{name}-trainingrun", "default")
    for cond in ((found or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Interpreted" and cond.get("status") == status:
            return dict(cond)
    return None


async def events_about(objects: ObjectStore, kind: str, name: str) -> list[dict[str, Any]]:
    rt = objects.registry.require("v1", "Event")
    listed = await objects.list(rt)
    return [
        e for e in listed.items
        if (e.get("involvedObject") or {}).get("kind") == kind and (e.get("involvedObject") or {}).get("name") == name
        and e.get("reason") == "InterpreterScriptFailed"
    ]


async def report_member_status(
    objects: ObjectStore, cluster: str, name: str, status: dict[str, Any], **manifest: Any
) -> None:
    """What the member agent writes: the Work applied and the member object's status (and, from
    an agent that interprets, ``interpretedBy`` and ``conditions``)."""
    rt = objects.registry.require(WORK_API, "Work")
    work = await eventually(
        lambda: get(objects, WORK_API, "Work", f"default-{name}-trainingrun", f"gpufed-es-{cluster}"),
        what=f"the Work in {cluster}",
    )
    work_status = {
        "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "observedGeneration": work["metadata"]["generation"]}],
        "manifestStatuses": [{
            "identifier": {"group": "ml.example.com", "version": "v1", "kind": "TrainingRun",
                           "namespace": "default", "name": name, "ordinal": 0},
            "status": status,
            **manifest,
        }],
    }
    await objects.update_status(rt, {**work, "status": work_status})


async def test_lua_scripts_drive_placement_and_hub_status(hub: ObjectStore) -> None:
    objects = hub
    await put_cluster(objects, "east", node_shape(1, gpus=8))
    await put_cluster(objects, "west", node_shape(1, gpus=8))
    await create(objects, customization(replicaResource=GET_REPLICAS, replicaRevision=REVISE, statusAggregation=AGGREGATE))
    await create(objects, propagation_policy("runs", kind="TrainingRun", api_version=API))
    async with ControllerManager(objects, settings=FAST) as manager:
        await eventually(lambda: ready_condition(objects, "Loaded"), what="the customization Ready")
        await create(objects, training_run("llm", workers=3, gpus=4))
        bound = await eventually(lambda: binding(objects, "llm"), what="llm scheduled")
        spec = bound["spec"]
        assert spec["replicas"] == 3  # GetReplicas
        assert spec["replicaRequirements"]["resourceRequest"]["nvidia.com/gpu"] == "4"  # accuratePodRequirements
        shares = {t["name"]: t["replicas"] for t in spec["clusters"]}
        assert sum(shares.values()) == 3 and max(shares.values()) <= 2  # 4-GPU workers: two fit a cluster
        for cluster, share in shares.items():
            work = await eventually(
                lambda c=cluster: get(objects, WORK_API, "Work", "default-llm-trainingrun", f"gpufed-es-{c}"),
                what=f"the Work in {cluster}",
            )
            assert work["spec"]["workload"]["manifests"][0]["spec"]["workers"] == share  # ReviseReplica
            await report_member_status(objects, cluster, "llm", {"readyWorkers": share, "noise": "x"})

        async def folded() -> dict[str, Any] | None:
            run = await get(objects, API, "TrainingRun", "llm", "default")
            status = (run or {}).get("status") or {}
            return status if status.get("readyWorkers") == 3 else None

        status = await eventually(folded, what="the hub status folded by AggregateStatus")
        assert sorted(status["clusters"]) == sorted(shares)  # the clusters AggregateStatus listed
        assert "noise" not in status  # only what AggregateStatus wrote (and the hub's own conditions)
        await settled(manager)
    assert interpreter_for(API, "TrainingRun") is None  # the manager stopped: its customizations are gone


REFLECT = """
function ReflectStatus(observedObj)
  return {readyWorkers = observedObj.status.running}
end
"""


async def test_statuses_the_agents_reflected_are_taken_as_they_are_and_their_failures_reported(
    hub: ObjectStore,
) -> None:
    objects = hub
    await put_cluster(objects, "east", node_shape(1, gpus=4))  # one 4-GPU worker each
    await put_cluster(objects, "west", node_shape(1, gpus=4))
    await create(objects, customization(
        replicaResource=GET_REPLICAS, replicaRevision=REVISE, statusAggregation=AGGREGATE, statusReflection=REFLECT,
    ))
    await create(objects, propagation_policy("runs", kind="TrainingRun", api_version=API))
    async with ControllerManager(objects, settings=FAST) as manager:
        await eventually(lambda: ready_condition(objects, "Loaded"), what="the customization Ready")
        await create(objects, training_run("llm", workers=2, gpus=4))
        bound = await eventually(lambda: binding(objects, "llm"), what="llm scheduled")
        assert {t["name"]: t["replicas"] for t in bound["spec"]["clusters"]} == {"east": 1, "west": 1}
        # east's agent reflected (reflecting again would lose readyWorkers); west's is an older
        # agent that reports the whole status, which the hub reflects itself.
        await report_member_status(
            objects, "east", "llm", {"readyWorkers": 1}, interpretedBy={"statusReflection": "trainingrun"}
        )
        await report_member_status(objects, "west", "llm", {"running": 1, "noise": "x"})

        async def folded() -> dict[str, Any] | None:
            run = await get(objects, API, "TrainingRun", "llm", "default")
            status = (run or {}).get("status") or {}
            return status if status.get("readyWorkers") == 2 else None

        assert await eventually(folded, what="both members' reflected statuses folded")

        # A script that failed at east's agent is reported as the hub's own failures are.
        failed = {
            "type": "Interpreted", "status": "False", "reason": "StatusReflectionFailed",
            "message": "statusReflection script of ResourceInterpreterCustomization trainingrun failed: "
            "instruction limit exceeded (5000000 instructions): the script runs too long",
        }
        ric = await get(objects, RIC_API, "ResourceInterpreterCustomization", "trainingrun")
        assert ric is not None
        generation = ric["metadata"]["generation"]
        # About a script the customization no longer has (an earlier generation): not reported.
        await report_member_status(
            objects, "east", "llm", {"readyWorkers": 1},
            interpretedBy={"statusReflection": "trainingrun"}, conditions=[{**failed, "observedGeneration": generation + 1}],
        )
        await settled(manager)
        assert await ready_condition(objects, "Loaded") is not None
        await report_member_status(
            objects, "east", "llm", {"readyWorkers": 1},
            interpretedBy={"statusReflection": "trainingrun"}, conditions=[{**failed, "observedGeneration": generation}],
        )
        cond = await eventually(lambda: ready_condition(objects, "ScriptFailed"), what="the agent's failure reported")
        assert cond["message"].startswith(
            "statusReflection script of ResourceInterpreterCustomization trainingrun failed: instruction limit"
        )
        assert "(in cluster east)" in cond["message"] and "default/llm" in cond["message"]
        assert await eventually(lambda: events_about(objects, "ResourceBinding", "llm-trainingrun"),
                                what="an Event on the binding")
        await settled(manager)


async def test_a_looping_or_failing_script_is_a_condition_and_the_hub_keeps_working(hub: ObjectStore) -> None:
    objects = hub
    await put_cluster(objects, "east", node_shape(1, gpus=8))
    await create(objects, propagation_policy("runs", kind="TrainingRun", api_version=API))
    await create(objects, customization(replicaResource="function GetReplicas(obj) while true do end end"))
    async with ControllerManager(objects, settings=FAST) as manager:
        await create(objects, training_run("looping", workers=2, gpus=1))
        cond = await eventually(lambda: ready_condition(objects, "ScriptFailed"), what="the ScriptFailed condition")
        assert cond["status"] == "False"
        assert "replicaResource script of ResourceInterpreterCustomization trainingrun failed" in cond["message"]
        assert "instruction limit exceeded" in cond["message"] and "default/looping" in cond["message"]
        assert await eventually(lambda: events_about(objects, "ResourceInterpreterCustomization", "trainingrun"),
                                what="an Event on the customization")
        assert await eventually(lambda: events_about(objects, "ResourceBinding", "looping-trainingrun"),
                                what="an Event on the binding")
        # The hub still works: the default interpretation (no replicas) propagates the object.
        assert await eventually(lambda: binding(objects, "looping"), what="looping bound by the default")
        marked = await eventually(lambda: binding_condition(objects, "looping", "False"), what="Interpreted=False")
        assert marked["reason"] == "ScriptFailed" and "instruction limit exceeded" in marked["message"]

        # Fixing the script clears the condition and the kind is interpreted again at once.
        rt = objects.registry.require(RIC_API, "ResourceInterpreterCustomization")
        current = await objects.get(rt, name="trainingrun")
        current["spec"] = customization(replicaResource=GET_REPLICAS)["spec"]
        await objects.update(rt, current)
        await eventually(lambda: ready_condition(objects, "Loaded"), what="the customization Ready again")

        async def reinterpreted() -> dict[str, Any] | None:
            found = await binding(objects, "looping")
            return found if found and found["spec"].get("replicas") == 2 else None

        assert await eventually(reinterpreted, what="the binding re-interpreted with 2 replicas")

        async def unmarked() -> bool:
            found = await get(objects, WORK_API, "ResourceBinding", "looping-trainingrun", "default")
            conditions = ((found or {}).get("status") or {}).get("conditions") or []
            return not any(c.get("type") == "Interpreted" for c in conditions)

        assert await eventually(unmarked, what="the binding's Interpreted condition removed")

        # A runtime error is reported the same way.
        current = await objects.get(rt, name="trainingrun")
        current["spec"] = customization(replicaResource="function GetReplicas(obj) return obj.spec.nothing.here end")["spec"]
        await objects.update(rt, current)
        cond = await eventually(lambda: ready_condition(objects, "ScriptFailed"), what="the runtime error reported")
        assert "attempt to index a nil value" in cond["message"]

        # Deleted, the customization no longer interprets the kind.
        assert interpreter_for(API, "TrainingRun") is not None
        await objects.delete(rt, name="trainingrun")

        async def uncustomized() -> bool:
            return interpreter_for(API, "TrainingRun") is None

        assert await eventually(uncustomized, what="the customization removed from the registry")
        await settled(manager)


async def test_a_script_that_does_not_load_is_refused_as_karmadas_webhook_refuses_it(hub: ObjectStore) -> None:
    rt = hub.registry.require(RIC_API, "ResourceInterpreterCustomization")
    with pytest.raises(errors.ApiError) as refused:
        await hub.create(rt, customization(replicaResource="function GetReplicas(obj"))
    status = refused.value.to_status()
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert status["message"].startswith(
        'admission webhook "resourceinterpretercustomization.karmada.io" denied the request: '
        "InterpreterOperation(InterpretReplica) Lua script error: the script does not compile: "
    )


async def test_a_second_customization_of_the_same_hook_is_refused(hub: ObjectStore) -> None:
    rt = hub.registry.require(RIC_API, "ResourceInterpreterCustomization")
    await hub.create(rt, customization(replicaResource=GET_REPLICAS))
    second = customization(replicaResource=GET_REPLICAS, statusAggregation=AGGREGATE)
    second["metadata"]["name"] = "trainingrun-status"
    with pytest.raises(errors.ApiError) as refused:
        await hub.create(rt, second)
    assert refused.value.to_status()["message"] == (
        'admission webhook "resourceinterpretercustomization.karmada.io" denied the request: conflicting with '
        "InterpreterOperation(InterpretReplica) of existing ResourceInterpreterCustomization(trainingrun)"
    )
    del second["spec"]["customizations"]["replicaResource"]
    await hub.create(rt, second)  # another hook of the same target is fine
