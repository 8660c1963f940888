"""Karmada's resource interpreter webhooks for what the members report and what follows a
workload: InterpretStatus reflects each member's status and InterpretHealth judges its health
(the binding's ``aggregatedStatus`` shows their answers, not the agent's report), and
InterpretDependency names the objects ``propagateDeps`` sends along. The webhook is served over
TLS (:mod:`tests.interpreterwebhook`'s answers). A failing webhook leaves the previous result (a
failing InterpretHealth: the member's health ``Unknown``) and Karmada's Warning Event; a malformed workload is refused before any webhook is called."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controlplane.apiserver.crd.controller import CrdController
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.webhooks.interpreting import InterpreterWebhooks
from controlplane.controllers.manager import ControllerManager
from tests.webhookserver import WebhookServer

from .conftest import FAST
from .fleet import deployment, eventually, get_object, node_shape, propagation_policy, put_cluster
from .test_interpreter_webhook_propagation import (
    CONFIG_API,
    CRD,
    NS,
    WORK_API,
    WORKLOAD_GROUP,
    report,
    workload,
)

pytestmark = pytest.mark.waiting

KIND_API = f"{WORKLOAD_GROUP}/v1alpha1"
FAILED = (
    'Internal error occurred: failed calling webhook "examples/workloads.example.com": '
    "webhook call failed, get status code: 500, msg: workload unreadable"
)


def configuration(server: WebhookServer, path: str, operations: list[str], *, group: str = WORKLOAD_GROUP,
                  kind: str = "Workload", version: str = "v1alpha1") -> dict[str, Any]:
    return {"metadata": {"name": "examples"}, "webhooks": [{
        "name": "workloads.example.com",
        "rules": [{"operations": operations, "apiGroups": [group], "apiVersions": [version], "kinds": [kind]}],
        "clientConfig": server.client(path), "interpreterContextVersions": ["v1alpha1"], "timeoutSeconds": 3,
    }]}


async def _configure(objects: ObjectStore, webhooks: InterpreterWebhooks, config: dict[str, Any]) -> None:
    """Create or replace the configuration and wait until the hub follows it."""
    rt = objects.registry.require(CONFIG_API, "ResourceInterpreterWebhookConfiguration")
    stored = await get_object(objects, CONFIG_API, "ResourceInterpreterWebhookConfiguration", "examples", namespace="")
    if stored is None:
        await objects.create(rt, config)
    else:
        await objects.update(rt, {**config, "metadata": stored["metadata"]})
    webhook = config["webhooks"][0]
    rule = webhook["rules"][0]
    api_version = f"{rule['apiGroups'][0]}/{rule['apiVersions'][0]}"

    async def followed() -> bool:
        hook = webhooks.hook_for(api_version, rule["kinds"][0], rule["operations"][0])
        return hook is not None and hook.url == webhook["clientConfig"]["url"] and hook.rules == tuple(webhook["rules"])

    await eventually(followed, what="the watch to bring the configuration")


async def _serve_workloads(objects: ObjectStore, **policy: Any) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    await objects.create(objects.registry.require("apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD)

    async def served() -> bool:
        return objects.registry.for_kind(KIND_API, "Workload") is not None

    await eventually(served, what="Workload served")
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"), propagation_policy(
        "workloads", kind="Workload", api_version=KIND_API, placement={"clusterAffinity": {"clusterNames": ["east"]}},
        **policy,
    ))


async def runs_as_runner(objects: ObjectStore, *, replicas: int) -> dict[str, Any]:
    """A Workload whose pods run as the ServiceAccount ``runner`` (``runner`` and ``other`` created)."""
    accounts = objects.registry.require("v1", "ServiceAccount")
    for name in ("runner", "other"):
        await objects.create(accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NS}})
    uses_runner = workload(replicas)
    uses_runner["spec"]["template"]["spec"]["serviceAccountName"] = "runner"
    return uses_runner


async def _events(objects: ObjectStore, reason: str, namespace: str = NS) -> list[dict[str, Any]]:
    listed = await objects.list(objects.registry.require("v1", "Event"), namespace=namespace)
    return [e for e in listed.items if e.get("reason") == reason]


async def _aggregated(objects: ObjectStore, wanted: dict[str, Any]) -> dict[str, Any] | None:
    binding = await get_object(objects, WORK_API, "ResourceBinding", "nginx-workload")
    items = ((binding or {}).get("status") or {}).get("aggregatedStatus") or []
    return items[0] if items and items[0] == wanted else None


async def test_status_and_health_webhooks_interpret_what_a_member_reports(
    objects: ObjectStore, crds: CrdController, webhooks: InterpreterWebhooks, server: WebhookServer
) -> None:
    await _serve_workloads(objects)
    await _configure(objects, webhooks, configuration(server, "/interpreter-workload", ["InterpretStatus", "InterpretHealth"]))
    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks):
        await objects.create(objects.registry.require(KIND_API, "Workload"), workload(2))

        async def written() -> dict[str, Any] | None:
            return await get_object(objects, WORK_API, "Work", "default-nginx-workload", namespace="gpufed-es-east")

        work = await eventually(written, what="the Work in east")
        # The agent says Healthy by its own rules and reports the whole status; the webhooks say what the hub takes.
        await report(objects, work, {"readyReplicas": 1, "memberOnly": "x"}, health="Healthy")
        entry = {"clusterName": "east", "applied": True, "health": "Unhealthy", "status": {"readyReplicas": 1}}
        await eventually(lambda: _aggregated(objects, entry), what="the reflected status, judged unhealthy")
        sent = {c["request"]["operation"]: c["request"] for c in server.received["/interpreter-workload"]}
        assert set(sent) == {"InterpretStatus", "InterpretHealth"}
        observed = sent["InterpretStatus"]["object"]
        assert observed["spec"]["replicas"] == 2 and observed["metadata"]["name"] == "nginx"
        assert observed["status"] == {"readyReplicas": 1, "memberOnly": "x"}
        assert sent["InterpretHealth"]["object"]["status"] == {"readyReplicas": 1, "memberOnly": "x"}

        await report(objects, work, {"readyReplicas": 2, "memberOnly": "y"}, health="Healthy")
        entry = {"clusterName": "east", "applied": True, "health": "Healthy", "status": {"readyReplicas": 2}}
        await eventually(lambda: _aggregated(objects, entry), what="two ready replicas, healthy")

        # InterpretStatus fails: the binding keeps what it showed, the Work gets Karmada's event.
        await _configure(objects, webhooks, configuration(server, "/interpreter-failing", ["InterpretStatus"]))
        await report(objects, work, {"readyReplicas": 0}, health="Healthy")
        reflect = await eventually(lambda: _events(objects, "ReflectStatusFailed", "gpufed-es-east"), what="ReflectStatusFailed")
        assert reflect[0]["type"] == "Warning" and reflect[0]["involvedObject"]["kind"] == "Work"
        assert reflect[0]["message"] == f"Reflect status for object(Workload/{NS}/nginx) failed, err: {FAILED}."
        assert await _aggregated(objects, entry) is not None

        async def retried() -> list[dict[str, Any]] | None:
            found = await _events(objects, "ReflectStatusFailed", "gpufed-es-east")
            return found if len(found) == 1 and found[0]["count"] >= 2 else None

        # Each retry fails alike: one Event, its count growing (client-go's correlation).
        await eventually(retried, what="the retried failure counted on one Event")

        # InterpretHealth fails: Karmada's event in its words, and the member's health is Unknown (the
        # status, no longer reflected by a webhook, is the agent's report).
        await _configure(objects, webhooks, configuration(server, "/interpreter-failing", ["InterpretHealth"]))
        health = await eventually(lambda: _events(objects, "InterpretHealthFailed", "gpufed-es-east"), what="InterpretHealthFailed")
        assert health[0]["message"] == f"Interpret health of object(Workload/{NS}/nginx) failed, err: {FAILED}."
        entry = {"clusterName": "east", "applied": True, "health": "Unknown", "status": {"readyReplicas": 0}}
        await eventually(lambda: _aggregated(objects, entry), what="the member's health Unknown")


async def test_a_dependency_webhook_names_what_follows_the_workload(
    objects: ObjectStore, crds: CrdController, webhooks: InterpreterWebhooks, server: WebhookServer
) -> None:
    await _serve_workloads(objects, propagateDeps=True)
    await _configure(objects, webhooks, configuration(server, "/interpreter-workload", ["InterpretDependency"]))
    uses_runner = await runs_as_runner(objects, replicas=2)
    kind_rt = objects.registry.require(KIND_API, "Workload")

    async def attached(name: str) -> dict[str, Any] | None:
        binding = await get_object(objects, WORK_API, "ResourceBinding", f"{name}-serviceaccount")
        return binding if binding is not None and binding["spec"].get("clusters") else None

    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks):
        await objects.create(kind_rt, uses_runner)
        binding = await eventually(lambda: attached("runner"), what="the ServiceAccount the webhook names, attached")
        assert [c["name"] for c in binding["spec"]["clusters"]] == ["east"]
        assert any(c["request"]["operation"] == "InterpretDependency" for c in server.received["/interpreter-workload"])

        # The webhook fails: what followed stays, the workload gets Karmada's event (the error alone).
        await _configure(objects, webhooks, configuration(server, "/interpreter-failing", ["InterpretDependency"]))
        current = copy.deepcopy(await objects.get(kind_rt, namespace=NS, name="nginx"))
        current["spec"]["template"]["spec"]["serviceAccountName"] = "other"
        await objects.update(kind_rt, current)
        events = await eventually(lambda: _events(objects, "GetDependenciesFailed"), what="GetDependenciesFailed")
        assert events[0]["type"] == "Warning" and events[0]["involvedObject"]["name"] == "nginx"
        assert events[0]["message"] == FAILED
        assert await attached("runner") is not None and await attached("other") is None

    # A new term (a restarted hub) has no answer of the webhook yet: what followed still stays.
    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks):
        async def failures() -> int:  # each recorded again counts on its Event
            return sum(int(e.get("count") or 1) for e in await _events(objects, "GetDependenciesFailed"))

        before = await failures()

        async def failed_again() -> bool:
            return await failures() >= before + 2

        await eventually(failed_again, what="the parent tried again, twice")
        assert await attached("runner") is not None and await attached("other") is None

        # Answering again, the webhook's new answer is followed.
        await _configure(objects, webhooks, configuration(server, "/interpreter-workload", ["InterpretDependency"]))
        await eventually(lambda: attached("other"), what="the ServiceAccount now named, attached")

        async def runner_gone() -> bool:
            return await get_object(objects, WORK_API, "ResourceBinding", "runner-serviceaccount") is None

        await eventually(runner_gone, what="the ServiceAccount no longer named, left")


async def test_a_malformed_workload_is_refused_before_its_webhook_is_called(
    objects: ObjectStore, webhooks: InterpreterWebhooks, server: WebhookServer
) -> None:
    await put_cluster(objects, "east", node_shape(2, gpus=8))
    await _configure(objects, webhooks, configuration(
        server, "/interpreter-workload", ["InterpretReplica"], group="apps", kind="Deployment", version="v1"
    ))
    await objects.create(objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy"), propagation_policy("deployments"))
    deployments = objects.registry.require("apps/v1", "Deployment")
    async with ControllerManager(objects, settings=FAST, interpreter_webhooks=webhooks):
        bad = deployment("bad", replicas=2)
        bad["spec"]["template"] = True
        bad["metadata"].update(uid="uid-bad", creationTimestamp="2026-01-01T00:00:00Z", generation=1)
        # Stored past the API's validation, as an object kube would refuse can still be there.
        await objects.store.create(deployments.key(namespace=NS, name="bad"), json.dumps(bad).encode())

        async def refused() -> list[dict[str, Any]]:
            return [e for e in await _events(objects, "InvalidObject") if e["involvedObject"]["name"] == "bad"]

        await eventually(refused, what="the InvalidObject event")
        await objects.create(deployments, deployment("good", replicas=2))
        binding = await eventually(
            lambda: get_object(objects, WORK_API, "ResourceBinding", "good-deployment"), what="the good one's binding"
        )
        assert binding["spec"]["replicas"] == 2
        asked = [c["request"]["name"] for c in server.received["/interpreter-workload"]]
        assert "good" in asked and "bad" not in asked
