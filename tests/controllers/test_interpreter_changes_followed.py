"""A changed interpretation reaches the objects that already exist: a resource interpreter webhook
configured (or removed) after a workload exists changes its binding and what its binding shows of
the members, and a ResourceInterpreterCustomization likewise, without the workload or its Works
being written. The status and health webhooks are asked once per member report: a status
reconcile that finds the report unchanged sends nothing."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.webhooks.interpreting import InterpreterWebhooks
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.webhookinterpreting import MemberAnswers
from tests.webhookserver import WebhookServer

from .conftest import FAST
from .fleet import eventually, get_object, settled
from .test_interpreter_webhook_members import (
    KIND_API,
    _aggregated,
    _configure,
    _serve_workloads,
    configuration,
    runs_as_runner,
)
from .test_interpreter_webhook_propagation import CONFIG_API, NS, WORK_API, report, workload

pytestmark = pytest.mark.waiting

BINDING = "nginx-workload"
REPORTED = {"readyReplicas": 1, "memberOnly": "x"}


async def _binding(objects: ObjectStore, replicas: int) -> dict[str, Any] | None:
    found = await get_object(objects, WORK_API, "ResourceBinding", BINDING)
    return found if found is not None and (found["spec"].get("replicas") or 0) == replicas else None


async def _reported_work(objects: ObjectStore) -> dict[str, Any]:
    async def written() -> dict[str, Any] | None:
        return await get_object(objects, WORK_API, "Work", f"{NS}-{BINDING}", namespace="gpufed-es-east")

    work = await eventually(written, what="the Work in east")
    await report(objects, work, REPORTED, health="Healthy")
    return work


def _calls(server: WebhookServer, operation: str) -> int:
    return sum(1 for c in server.received.get("/interpreter-workload", ()) if c["request"]["operation"] == operation)


async def test_a_webhook_configured_later_reinterprets_what_exists(
    objects: ObjectStore, crds: CrdController, webhooks: InterpreterWebhooks, server: WebhookServer
) -> None:
    await _serve_workloads(objects)
    kind_rt = objects.registry.require(KIND_API, "Workload")
    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks) as manager:
        await objects.create(kind_rt, workload(2))
        await eventually(lambda: _binding(objects, 0), what="the binding, without replicas (no interpreter)")
        await _reported_work(objects)
        as_reported = {"clusterName": "east", "applied": True, "health": "Healthy", "status": REPORTED}
        await eventually(lambda: _aggregated(objects, as_reported), what="the member's report as it is")
        await settled(manager)
        generation = (await objects.get(kind_rt, namespace=NS, name="nginx"))["metadata"]["generation"]

        await _configure(objects, webhooks, configuration(
            server, "/interpreter-workload", ["InterpretReplica", "InterpretStatus", "InterpretHealth"]
        ))
        bound = await eventually(lambda: _binding(objects, 2), what="the webhook's replicas on the existing binding")
        assert bound["spec"]["replicaRequirements"]["resourceRequest"] == {"cpu": "500m", "nvidia.com/gpu": "1"}
        reflected = {"clusterName": "east", "applied": True, "health": "Unhealthy", "status": {"readyReplicas": 1}}
        await eventually(lambda: _aggregated(objects, reflected), what="the report as the webhooks read it")

        # The configuration goes: what the webhooks said goes with it.
        await objects.delete(objects.registry.require(CONFIG_API, "ResourceInterpreterWebhookConfiguration"), name="examples")
        await eventually(lambda: _binding(objects, 0), what="the binding without the webhook's replicas")
        await eventually(lambda: _aggregated(objects, as_reported), what="the member's report as it is again")

        hub = await objects.get(kind_rt, namespace=NS, name="nginx")
        assert hub["metadata"]["generation"] == generation  # the workload itself was never written
        current = await get_object(objects, WORK_API, "Work", f"{NS}-{BINDING}", namespace="gpufed-es-east")
        assert current is not None and current["status"]["manifestStatuses"][0]["status"] == REPORTED


async def test_a_customization_created_later_reinterprets_what_exists(
    objects: ObjectStore, crds: CrdController, webhooks: InterpreterWebhooks
) -> None:
    await _serve_workloads(objects, propagateDeps=True)
    uses_runner = await runs_as_runner(objects, replicas=3)
    kind_rt = objects.registry.require(KIND_API, "Workload")

    async def attached(name: str = "runner") -> dict[str, Any] | None:
        return await get_object(objects, WORK_API, "ResourceBinding", f"{name}-serviceaccount")

    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks) as manager:
        await objects.create(kind_rt, uses_runner)
        await eventually(lambda: _binding(objects, 0), what="the binding, without replicas (no interpreter)")
        await settled(manager)
        assert await attached() is None  # nothing says the Workload needs its ServiceAccount
        generation = (await objects.get(kind_rt, namespace=NS, name="nginx"))["metadata"]["generation"]

        customizations = objects.registry.require(CONFIG_API, "ResourceInterpreterCustomization")
        await objects.create(customizations, _customization(_DEPENDENCIES))
        await eventually(lambda: _binding(objects, 3), what="the script's replicas on the existing binding")
        await eventually(attached, what="the ServiceAccount the script names, attached")

        await settled(manager)
        # Only the dependency script changes (the binding stays as it is): what follows changes.
        stored = await objects.get(customizations, name="workloads")  # with the status the controller wrote
        await objects.update(customizations, {**stored, "spec": _customization(_OTHER)["spec"]})
        await eventually(lambda: attached("other"), what="the ServiceAccount the new script names, attached")

        async def runner_gone() -> bool:
            return await attached() is None

        await eventually(runner_gone, what="the ServiceAccount no longer named, left")
        hub = await objects.get(kind_rt, namespace=NS, name="nginx")
        assert hub["metadata"]["generation"] == generation  # the workload itself was never written


def _customization(dependencies: str) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG_API, "kind": "ResourceInterpreterCustomization", "metadata": {"name": "workloads"},
        "spec": {"target": {"apiVersion": KIND_API, "kind": "Workload"}, "customizations": {
            "replicaResource": {"luaScript": _REPLICAS}, "dependencyInterpretation": {"luaScript": dependencies},
        }},
    }


_REPLICAS = """
function GetReplicas(obj)
  local kube = require("kube")
  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)
end
"""
_DEPENDENCIES = """
function GetDependencies(desiredObj)
  local kube = require("kube")
  return kube.getPodDependencies(desiredObj.spec.template, desiredObj.metadata.namespace)
end
"""
_OTHER = """
function GetDependencies(desiredObj)
  return {{apiVersion = "v1", kind = "ServiceAccount", name = "other", namespace = desiredObj.metadata.namespace}}
end
"""


async def test_an_unchanged_member_report_is_not_sent_to_the_webhooks_again(
    objects: ObjectStore, crds: CrdController, webhooks: InterpreterWebhooks, server: WebhookServer
) -> None:
    await _serve_workloads(objects)
    await _configure(objects, webhooks, configuration(server, "/interpreter-workload", ["InterpretStatus", "InterpretHealth"]))
    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks) as manager:
        await objects.create(objects.registry.require(KIND_API, "Workload"), workload(2))
        work = await _reported_work(objects)
        reflected = {"clusterName": "east", "applied": True, "health": "Unhealthy", "status": {"readyReplicas": 1}}
        await eventually(lambda: _aggregated(objects, reflected), what="the reflected report")
        await settled(manager)
        assert (_calls(server, "InterpretStatus"), _calls(server, "InterpretHealth")) == (1, 1)

        assert manager.status is not None
        before = manager.reconciles()["status"]
        await manager.status.loop.add((NS, BINDING))
        await settled(manager)
        assert manager.reconciles()["status"] > before  # looked at again, the report unchanged
        assert (_calls(server, "InterpretStatus"), _calls(server, "InterpretHealth")) == (1, 1)

        await report(objects, work, {"readyReplicas": 2}, health="Healthy")
        healthy = {"clusterName": "east", "applied": True, "health": "Healthy", "status": {"readyReplicas": 2}}
        await eventually(lambda: _aggregated(objects, healthy), what="the new report, reflected")
        assert (_calls(server, "InterpretStatus"), _calls(server, "InterpretHealth")) == (2, 2)


def test_member_answers_are_bounded_dropping_the_least_recently_used() -> None:
    answers = MemberAnswers(size=2)
    answers.put("a", {"readyReplicas": 1})
    answers.put("b", False)  # a health answer: kept, though falsy
    answers.put("none", None)  # no answer: nothing kept
    assert answers.get("a") == {"readyReplicas": 1}  # now the most recently used
    answers.get("a")["readyReplicas"] = 5  # what a caller does with its answer stays its own
    answers.put("c", True)
    assert (answers.get("a"), answers.get("b"), answers.get("c"), len(answers)) == ({"readyReplicas": 1}, None, True, 2)
