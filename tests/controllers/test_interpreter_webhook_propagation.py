"""Karmada's resource interpreter webhooks while the hub propagates: a custom kind (Karmada's
sample ``workload.example.io/v1alpha1`` Workload, no scale subresource, so no replicas of its
own) gets its replicas and requirements from an InterpretReplica webhook served over TLS, a
Divided policy splits them over two clusters, and each Work carries its share as the
ReviseReplica webhook patches it. A failing webhook leaves the binding as it was, a Warning
Event on the workload naming the webhook and its error, and the controllers running."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.webhooks.interpreting import InterpreterWebhooks
from controlplane.controllers.manager import ControllerManager
from tests.webhookserver import WebhookServer

from .conftest import FAST
from .fleet import eventually, node_shape, propagation_policy, put_cluster

NS = "default"
WORKLOAD_GROUP = "workload.example.io"
WORK_API = "work.gpufed.io/v1alpha1"
CONFIG_API = "config.karmada.io/v1alpha1"
HALVES = {
    "replicaSchedulingType": "Divided",
    "replicaDivisionPreference": "Weighted",
    "weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": ["east"]}, "weight": 1},
        {"targetCluster": {"clusterNames": ["west"]}, "weight": 1},
    ]},
}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"workloads.{WORKLOAD_GROUP}"},
    "spec": {
        "group": WORKLOAD_GROUP, "scope": "Namespaced", "names": {"plural": "workloads", "kind": "Workload"},
        "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def workload(replicas: int) -> dict[str, Any]:
    container = {"name": "nginx", "image": "nginx:1", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": f"{WORKLOAD_GROUP}/v1alpha1", "kind": "Workload",
        "metadata": {"name": "nginx", "namespace": NS},
        "spec": {"replicas": replicas, "paused": False, "template": {"spec": {"containers": [container]}}},
    }


def configuration(server: WebhookServer, path: str) -> dict[str, Any]:
    return {"metadata": {"name": "examples"}, "webhooks": [{
        "name": "workloads.example.com",
        "rules": [{"operations": ["InterpretReplica", "ReviseReplica", "AggregateStatus"], "apiGroups": [WORKLOAD_GROUP],
                   "apiVersions": ["v1alpha1"], "kinds": ["Workload"]}],
        "clientConfig": server.client(path), "interpreterContextVersions": ["v1alpha1"], "timeoutSeconds": 3,
    }]}


async def _shares(objects: ObjectStore, wanted: dict[str, int]) -> dict[str, dict[str, Any]] | None:
    listed = await objects.list(objects.registry.require(WORK_API, "Work"), label_selector="work.gpufed.io/binding=nginx-workload")
    works = {w["metadata"]["namespace"].removeprefix("gpufed-es-"): w for w in listed.items}
    shares = {name: w["spec"]["workload"]["manifests"][0]["spec"]["replicas"] for name, w in works.items()}
    return works if shares == wanted else None


async def report(objects: ObjectStore, work: dict[str, Any], status: dict[str, Any], *, health: str | None = None) -> None:
    """What the agent writes back: applied, with the member copy's whole status (and the health
    its own rules give, with the member's generation)."""
    rt = objects.registry.require(WORK_API, "Work")
    current = await objects.get(rt, namespace=work["metadata"]["namespace"], name=work["metadata"]["name"])
    manifest: dict[str, Any] = {
        "identifier": {"group": WORKLOAD_GROUP, "version": "v1alpha1", "kind": "Workload", "namespace": NS,
                       "name": "nginx", "ordinal": 0},
        "status": status,
    }
    if health is not None:
        manifest.update(health=health, generation=1)
    conditions = [{
        "type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "applied",
        "lastTransitionTime": "2024-05-01T10:00:00Z", "observedGeneration": current["metadata"]["generation"],
    }]
    await objects.update_status(rt, {**current, "status": {"conditions": conditions, "manifestStatuses": [manifest]}})


async def test_webhooks_interpret_and_revise_a_custom_kinds_replicas(
    objects: ObjectStore, crds: CrdController, webhooks: InterpreterWebhooks, server: WebhookServer
) -> None:
    for name in ("east", "west"):
        await put_cluster(objects, name, node_shape(2, gpus=8))
    config_rt = objects.registry.require(CONFIG_API, "ResourceInterpreterWebhookConfiguration")
    await objects.create(config_rt, configuration(server, "/interpreter-workload"))
    await objects.create(objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD)

    async def served() -> bool:
        return objects.registry.for_kind(f"{WORKLOAD_GROUP}/v1alpha1", "Workload") is not None

    await eventually(served, what="Workload served")
    kind_rt = objects.registry.require(f"{WORKLOAD_GROUP}/v1alpha1", "Workload")
    placement = {"clusterAffinity": {"clusterNames": ["east", "west"]}, "replicaScheduling": HALVES}
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policy_rt, propagation_policy(
        "workloads", kind="Workload", api_version=f"{WORKLOAD_GROUP}/v1alpha1", placement=placement
    ))

    async def configured() -> bool:
        return webhooks.hook_for(f"{WORKLOAD_GROUP}/v1alpha1", "Workload", "InterpretReplica") is not None

    await eventually(configured, what="the watch to bring the configuration")
    binding_rt = objects.registry.require(WORK_API, "ResourceBinding")
    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks) as manager:
        await objects.create(kind_rt, workload(4))
        works = await eventually(lambda: _shares(objects, {"east": 2, "west": 2}), what="two Works with 2 replicas each")
        binding = await objects.get(binding_rt, namespace=NS, name="nginx-workload")
        assert binding["spec"]["replicas"] == 4
        assert binding["spec"]["replicaRequirements"]["resourceRequest"] == {"cpu": "500m", "nvidia.com/gpu": "1"}
        assert works["east"]["spec"]["workload"]["manifests"][0]["spec"]["paused"] is False  # the rest as it is
        revised = [c["request"]["desiredReplicas"] for c in server.received["/interpreter-workload"]
                   if c["request"]["operation"] == "ReviseReplica"]
        assert revised and set(revised) == {2}

        # AggregateStatus: the webhook sums the members' ready replicas into the hub's status.
        await report(objects, works["east"], {"readyReplicas": 2})
        await report(objects, works["west"], {"readyReplicas": 1})

        async def folded() -> dict[str, Any] | None:
            hub = await objects.get(kind_rt, namespace=NS, name="nginx")
            return hub if (hub.get("status") or {}).get("readyReplicas") == 3 else None

        hub = await eventually(folded, what="the members' 2 + 1 ready replicas on the hub")
        assert hub["status"] == {"readyReplicas": 3}
        sent = [c["request"] for c in server.received["/interpreter-workload"] if c["request"]["operation"] == "AggregateStatus"]
        assert {"clusterName": "west", "applied": True, "status": {"readyReplicas": 1}}.items() <= sent[-1]["aggregatedStatus"][1].items()

        # The webhook fails: the binding keeps its replicas, the workload gets Karmada's event.
        stored = await objects.get(config_rt, name="examples")
        await objects.update(config_rt, {**configuration(server, "/interpreter-failing"), "metadata": stored["metadata"]})

        async def failing() -> bool:
            hook = webhooks.hook_for(f"{WORKLOAD_GROUP}/v1alpha1", "Workload", "InterpretReplica")
            return hook is not None and bool(hook.url and hook.url.endswith("/interpreter-failing"))

        await eventually(failing, what="the watch to bring the failing webhook")
        current = copy.deepcopy(await objects.get(kind_rt, namespace=NS, name="nginx"))
        current["spec"]["replicas"] = 6
        await objects.update(kind_rt, current)

        async def reported() -> dict[str, Any] | None:
            events = await objects.list(objects.registry.require("v1", "Event"), namespace=NS)
            return next((e for e in events.items if e.get("reason") == "ApplyPolicyFailed"), None)

        event = await eventually(reported, what="the ApplyPolicyFailed event")
        assert event["type"] == "Warning" and event["involvedObject"]["name"] == "nginx"
        assert event["message"] == (
            "Apply policy(default/workloads) failed: Internal error occurred: failed calling webhook "
            '"examples/workloads.example.com": webhook call failed, get status code: 500, msg: workload unreadable'
        )
        binding = await objects.get(binding_rt, namespace=NS, name="nginx-workload")
        assert binding["spec"]["replicas"] == 4
        assert await _shares(objects, {"east": 2, "west": 2}) is not None
        assert manager.started.is_set()
