"""A Karmada resource interpreter webhook, called over TLS with the admission webhooks' client:
the ResourceInterpreterContext it gets and how its answers are read (replicas, JSONPatches,
status, health, dependencies), and the failures Karmada reports (a refused call, another uid,
a CA that does not sign the server)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.apiserver.webhooks.calling import CallFailed, WebhookClient
from controlplane.interpreter.webhook_context import (
    HookFailed,
    InterpreterHook,
    apply_patch,
    first_hook,
    hooks_of,
    interpreter_context,
    verify_response,
)
from controlplane.storage import MemoryStore
from tests.controllers.fleet import hub_objects
from tests.webhookserver import WebhookServer, webhook_server

WORKLOAD: dict[str, Any] = {
    "apiVersion": "workload.example.io/v1alpha1", "kind": "Workload",
    "metadata": {"name": "nginx", "namespace": "default"},
    "spec": {"replicas": 5, "paused": False, "template": {"spec": {
        "serviceAccountName": "runner",
        "containers": [{"name": "nginx", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "1"}}}],
    }}},
}


def _configuration(server: WebhookServer, path: str = "/interpreter-workload", **client: Any) -> dict[str, Any]:
    return {"metadata": {"name": "examples"}, "webhooks": [{
        "name": "workloads.example.com",
        "rules": [{"operations": ["*"], "apiGroups": ["workload.example.io"], "apiVersions": ["v1alpha1"],
                   "kinds": ["Workload"]}],
        "clientConfig": {**server.client(path), **client},
        "interpreterContextVersions": ["v1alpha1"], "timeoutSeconds": 3,
    }]}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[WebhookServer]:
    async with webhook_server(tmp_path / "webhook") as running:
        yield running


@pytest.fixture
async def client() -> AsyncIterator[WebhookClient]:
    calls = WebhookClient(await hub_objects(MemoryStore()))
    yield calls
    await calls.close()


async def _call(client: WebhookClient, hook: InterpreterHook, operation: str, obj: dict[str, Any], **extra: Any) -> dict[str, Any]:
    uid = str(uuid.uuid4())
    body = orjson.dumps(interpreter_context(hook, uid, operation, obj, **extra))
    try:
        raw = await client.post(hook, body)
    except CallFailed as exc:
        raise HookFailed(f"failed to call webhook: {exc}") from None
    return verify_response(raw, uid, operation)


async def test_a_karmada_workload_webhook_interprets_over_tls(client: WebhookClient, server: WebhookServer) -> None:
    hook = first_hook(hooks_of([_configuration(server)]), "workload.example.io/v1alpha1", "Workload", "InterpretReplica")
    assert hook is not None and hook.uid == "examples/workloads.example.com"

    replicas = await _call(client, hook, "InterpretReplica", WORKLOAD)
    assert (replicas["replicas"], replicas["replicaRequirements"]) == (
        5, {"resourceRequest": {"cpu": "500m", "nvidia.com/gpu": "1"}}
    )
    sent = server.received["/interpreter-workload"][0]
    assert (sent["apiVersion"], sent["kind"]) == ("config.karmada.io/v1alpha1", "ResourceInterpreterContext")
    assert sent["request"]["kind"] == {"group": "workload.example.io", "version": "v1alpha1", "kind": "Workload"}
    assert (sent["request"]["name"], sent["request"]["namespace"]) == ("nginx", "default")

    revised = apply_patch(WORKLOAD, await _call(client, hook, "ReviseReplica", WORKLOAD, desired_replicas=2))
    assert revised["spec"]["replicas"] == 2 and WORKLOAD["spec"]["replicas"] == 5

    observed = {**WORKLOAD, "spec": {**WORKLOAD["spec"], "paused": True}}
    retained = apply_patch(WORKLOAD, await _call(client, hook, "Retain", WORKLOAD, observed=observed))
    assert retained["spec"]["paused"] is True

    members = [{"clusterName": "member1", "applied": True, "status": {"readyReplicas": 2}},
               {"clusterName": "member2", "applied": True, "status": {"readyReplicas": 3}}]
    aggregated = apply_patch(WORKLOAD, await _call(client, hook, "AggregateStatus", WORKLOAD, aggregated_status=members))
    assert aggregated["status"] == {"readyReplicas": 5}

    member = {**WORKLOAD, "status": {"readyReplicas": 5, "observedGeneration": 3}}
    assert (await _call(client, hook, "InterpretStatus", member))["rawStatus"] == {"readyReplicas": 5}
    assert (await _call(client, hook, "InterpretHealth", member))["healthy"] is True
    assert (await _call(client, hook, "InterpretHealth", WORKLOAD))["healthy"] is False
    dependencies = (await _call(client, hook, "InterpretDependency", WORKLOAD))["dependencies"]
    assert dependencies == [{"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "default", "name": "runner"}]


async def test_failed_calls_are_reported_in_karmadas_words(client: WebhookClient, server: WebhookServer) -> None:
    def hook(path: str, **client_config: Any) -> InterpreterHook:
        return hooks_of([_configuration(server, path, **client_config)])[0]

    with pytest.raises(HookFailed) as failed:
        await _call(client, hook("/interpreter-failing"), "InterpretReplica", WORKLOAD)
    assert failed.value.internal_error(hook("/interpreter-failing")) == (
        'Internal error occurred: failed calling webhook "examples/workloads.example.com": '
        "webhook call failed, get status code: 500, msg: workload unreadable"
    )
    with pytest.raises(HookFailed, match=r'reveived invalid webhook response: expected response.uid ".*", got "not-the-request"'):
        await _call(client, hook("/interpreter-wrong-uid"), "InterpretReplica", WORKLOAD)

    untrusted = hook("/interpreter-workload", caBundle=None)
    with pytest.raises(HookFailed, match="x509: certificate signed by unknown authority"):
        await _call(client, untrusted, "InterpretReplica", WORKLOAD)


def test_the_first_matching_webhook_by_configuration_and_name_is_called() -> None:
    def config(name: str, hook: str, operations: list[str], kinds: list[str]) -> dict[str, Any]:
        return {"metadata": {"name": name}, "webhooks": [{
            "name": hook, "clientConfig": {"url": f"https://{hook}/"}, "interpreterContextVersions": ["v1alpha1"],
            "rules": [{"operations": operations, "apiGroups": ["*"], "apiVersions": ["*"], "kinds": kinds}],
        }]}

    hooks = hooks_of([
        config("b", "all.example.com", ["*"], ["*"]),
        config("a", "retain.example.com", ["Retain"], ["Workload"]),
    ])
    assert [h.uid for h in hooks] == ["a/retain.example.com", "b/all.example.com"]
    assert hooks[1].timeout_seconds == 10  # Karmada's default
    picked = first_hook(hooks, "workload.example.io/v1alpha1", "Workload", "Retain")
    assert picked is not None and picked.uid == "a/retain.example.com"
    picked = first_hook(hooks, "workload.example.io/v1alpha1", "Workload", "InterpretReplica")
    assert picked is not None and picked.uid == "b/all.example.com"
    assert first_hook(hooks[:1], "v1", "ConfigMap", "Retain") is None


@pytest.mark.parametrize(
    ("operation", "response", "message"),
    [
        ("InterpretReplica", {}, "reveived invalid webhook response: webhook returned nil response.replicas"),
        ("InterpretHealth", {}, "reveived invalid webhook response: webhook returned nil response.healthy"),
        ("InterpretStatus", {}, "reveived invalid webhook response: webhook returned nill response.rawStatus"),
        ("Retain", {"patch": "W10="}, "reveived invalid webhook response: webhook returned nil response.patchType"),
        ("Retain", {"patchType": "JSONPatch"}, "reveived invalid webhook response: webhook returned empty response.patch"),
        ("Retain", {"patch": "W10=", "patchType": "MergePatch"},
         'reveived invalid webhook response: webhook returned invalid response.patchType of "MergePatch"'),
    ],
)
def test_unusable_answers_are_refused(operation: str, response: dict[str, Any], message: str) -> None:
    raw = orjson.dumps({"response": {"uid": "u", "successful": True, **response}})
    with pytest.raises(HookFailed) as failed:
        verify_response(raw, "u", operation)
    assert str(failed.value) == message


def test_a_webhook_without_v1alpha1_is_not_called() -> None:
    hook = InterpreterHook("examples", "old.example.com", url="https://old.example.com/", context_versions=("v1beta9",))
    with pytest.raises(HookFailed, match="webhook does not accept known ResourceInterpreterContext versions"):
        interpreter_context(hook, "u", "Retain", WORKLOAD)
