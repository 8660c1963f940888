"""A Karmada resource interpreter webhook, configured by a stored ResourceInterpreterWebhookConfiguration
(followed by a watch) and called over TLS with the admission webhooks' client: the
ResourceInterpreterContext it gets and how its answers are read (replicas, JSONPatches, status,
health, dependencies), and the failures Karmada reports (a refused call, another uid, a CA that
does not sign the server)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.apis.kube.jsonpatches import MAX_JSON_PATCH_COPY_BYTES
from controlplane.apiserver import errors
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.webhooks.interpreting import InterpreterWebhookFailed, InterpreterWebhooks
from controlplane.interpreter.customized import Customization, CustomizedInterpreter
from controlplane.interpreter.dependencies import Dependency
from controlplane.interpreter.registry import set_customized
from controlplane.interpreter.webhook_calls import webhook_interprets
from controlplane.interpreter.webhook_context import (
    HookFailed,
    InterpreterHook,
    apply_patch,
    dependencies_of,
    first_hook,
    healthy_of,
    hooks_of,
    interpreter_context,
    raw_status_of,
    verify_response,
)
from controlplane.storage import MemoryStore
from tests.controllers.fleet import eventually, hub_objects
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
async def hub() -> AsyncIterator[tuple[ObjectStore, InterpreterWebhooks]]:
    objects = await hub_objects(MemoryStore())
    webhooks = InterpreterWebhooks(objects)
    stop = asyncio.Event()
    following = asyncio.create_task(webhooks.run(stop))
    await webhooks.wait_synced()
    yield objects, webhooks
    stop.set()
    following.cancel()
    await webhooks.close()


async def _configure(objects: ObjectStore, config: dict[str, Any]) -> None:
    rt = objects.registry.require("config.karmada.io/v1alpha1", "ResourceInterpreterWebhookConfiguration")
    await objects.create(rt, config)


Hub = tuple[ObjectStore, InterpreterWebhooks]


async def test_a_karmada_workload_webhook_interprets_over_tls(hub: Hub, server: WebhookServer) -> None:
    objects, webhooks = hub
    assert await webhooks.interpret("InterpretReplica", WORKLOAD) is None  # no webhook for it yet
    await _configure(objects, _configuration(server))

    async def configured() -> bool:
        return webhooks.hook_for("workload.example.io/v1alpha1", "Workload", "InterpretReplica") is not None

    await eventually(configured, what="the watch to bring the configuration")
    call = webhooks.interpret

    replicas = await call("InterpretReplica", WORKLOAD)
    assert (replicas["replicas"], replicas["replicaRequirements"]) == (
        5, {"resourceRequest": {"cpu": "500m", "nvidia.com/gpu": "1"}}
    )
    sent = server.received["/interpreter-workload"][0]
    assert (sent["apiVersion"], sent["kind"]) == ("config.karmada.io/v1alpha1", "ResourceInterpreterContext")
    assert sent["request"]["kind"] == {"group": "workload.example.io", "version": "v1alpha1", "kind": "Workload"}
    assert (sent["request"]["name"], sent["request"]["namespace"]) == ("nginx", "default")

    revised = apply_patch(WORKLOAD, await call("ReviseReplica", WORKLOAD, desired_replicas=2))
    assert revised["spec"]["replicas"] == 2 and WORKLOAD["spec"]["replicas"] == 5

    observed = {**WORKLOAD, "spec": {**WORKLOAD["spec"], "paused": True}}
    retained = apply_patch(WORKLOAD, await call("Retain", WORKLOAD, observed=observed))
    assert retained["spec"]["paused"] is True

    members = [{"clusterName": "member1", "applied": True, "status": {"readyReplicas": 2}},
               {"clusterName": "member2", "applied": True, "status": {"readyReplicas": 3}}]
    aggregated = apply_patch(WORKLOAD, await call("AggregateStatus", WORKLOAD, aggregated_status=members))
    assert aggregated["status"] == {"readyReplicas": 5}

    member = {**WORKLOAD, "status": {"readyReplicas": 5, "observedGeneration": 3}}
    assert (await call("InterpretStatus", member))["rawStatus"] == {"readyReplicas": 5}
    assert (await call("InterpretHealth", member))["healthy"] is True
    assert (await call("InterpretHealth", WORKLOAD))["healthy"] is False
    dependencies = (await call("InterpretDependency", WORKLOAD))["dependencies"]
    assert dependencies == [{"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "default", "name": "runner"}]


async def test_failed_calls_are_reported_in_karmadas_words(hub: Hub, server: WebhookServer) -> None:
    objects, webhooks = hub
    rt = objects.registry.require("config.karmada.io/v1alpha1", "ResourceInterpreterWebhookConfiguration")

    async def failure(path: str, **client_config: Any) -> str:
        config = _configuration(server, path, **client_config)
        try:
            stored = await objects.get(rt, name="examples")
        except errors.NotFound:
            await objects.create(rt, config)
        else:
            await objects.update(rt, {**config, "metadata": stored["metadata"]})
        wanted = hooks_of([config])

        async def seen() -> bool:
            return list(webhooks.hooks) == wanted

        await eventually(seen, what="the watch to bring the configuration")
        with pytest.raises(InterpreterWebhookFailed) as failed:
            await webhooks.interpret("InterpretReplica", WORKLOAD)
        return str(failed.value)

    prefix = 'Internal error occurred: failed calling webhook "examples/workloads.example.com": '
    assert await failure("/interpreter-failing") == (
        prefix + "webhook call failed, get status code: 500, msg: workload unreadable"
    )
    assert (await failure("/interpreter-wrong-uid")).startswith(prefix + "reveived invalid webhook response: expected response.uid")
    untrusted = await failure("/interpreter-workload", caBundle=None)
    assert untrusted.startswith(prefix + 'failed to call webhook: Post "https://127.0.0.1:')
    assert untrusted.endswith("x509: certificate signed by unknown authority")


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


def test_a_patch_whose_copies_double_the_workload_stops_at_3_mib() -> None:
    """The hub bounds an interpreter webhook's JSONPatch as kube-apiserver bounds every JSON patch
    (Karmada applies it unbounded): its copies may add 3 MiB, where each copy of a list into itself
    doubles it (a few dozen: gigabytes)."""
    doubling = [{"op": "add", "path": "/spec/padding", "value": ["y" * 1024]},
                *[{"op": "copy", "from": "/spec/padding", "path": "/spec/padding/-"}] * 14]
    encoded = base64.b64encode(orjson.dumps(doubling)).decode()
    with pytest.raises(HookFailed) as failed:
        apply_patch(WORKLOAD, {"patch": encoded, "patchType": "JSONPatch"})
    assert str(failed.value).startswith("Unable to complete the copy, the accumulated size increase of copy is ")
    assert str(failed.value).endswith(f", exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}")


def test_a_patch_is_applied_as_karmada_applies_it_with_json_patch_v5() -> None:
    """Karmada's webhook interpreter applies the answer with evanphx/json-patch v5
    (pkg/resourceinterpreter/customized/webhook/customized.go), where a replace of a missing key
    fails (kube-apiserver's v4 would add it)."""
    encoded = base64.b64encode(orjson.dumps([{"op": "replace", "path": "/spec/suspend", "value": True}])).decode()
    with pytest.raises(HookFailed) as failed:
        apply_patch(WORKLOAD, {"patch": encoded, "patchType": "JSONPatch"})
    assert str(failed.value) == "replace operation does not apply: doc is missing key: /spec/suspend: missing value"


def test_a_webhook_without_v1alpha1_is_not_called() -> None:
    hook = InterpreterHook("examples", "old.example.com", url="https://old.example.com/", context_versions=("v1beta9",))
    with pytest.raises(HookFailed, match="webhook does not accept known ResourceInterpreterContext versions"):
        interpreter_context(hook, "u", "Retain", WORKLOAD)


async def test_a_lua_customization_of_the_same_operation_wins_over_the_webhook(hub: Hub, server: WebhookServer) -> None:
    objects, webhooks = hub
    await _configure(objects, _configuration(server))

    async def configured() -> bool:
        return webhooks.hook_for("workload.example.io/v1alpha1", "Workload", "InterpretReplica") is not None

    await eventually(configured, what="the watch to bring the configuration")
    assert webhook_interprets(webhooks, WORKLOAD, "InterpretReplica")
    assert not webhook_interprets(None, WORKLOAD, "InterpretReplica")
    replicas = Customization(
        "workloads", "workload.example.io/v1alpha1", "Workload",
        {"replicaResource": "function GetReplicas(obj) return obj.spec.replicas, {} end"},
    )
    set_customized("workload.example.io/v1alpha1", "Workload", CustomizedInterpreter(replicas, None))
    try:
        assert not webhook_interprets(webhooks, WORKLOAD, "InterpretReplica")  # the script's operation
        assert webhook_interprets(webhooks, WORKLOAD, "ReviseReplica")  # no script for it: the webhook's
        assert webhook_interprets(webhooks, WORKLOAD, "AggregateStatus")
    finally:
        set_customized("workload.example.io/v1alpha1", "Workload", None)
    assert webhook_interprets(webhooks, WORKLOAD, "InterpretReplica")
    member_side = Customization(
        "workloads", "workload.example.io/v1alpha1", "Workload",
        {hook: "function F(obj) return obj end" for hook in ("dependencyInterpretation", "statusReflection")},
    )
    set_customized("workload.example.io/v1alpha1", "Workload", CustomizedInterpreter(member_side, None))
    try:
        assert not webhook_interprets(webhooks, WORKLOAD, "InterpretDependency")
        assert not webhook_interprets(webhooks, WORKLOAD, "InterpretStatus")
        assert webhook_interprets(webhooks, WORKLOAD, "InterpretHealth")
    finally:
        set_customized("workload.example.io/v1alpha1", "Workload", None)
    assert webhook_interprets(webhooks, WORKLOAD, "InterpretDependency")


def test_dependencies_status_and_health_answers_are_read() -> None:
    answer = {"dependencies": [
        {"apiVersion": "v1", "kind": "Secret", "name": "token"},
        {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "settings"},
    ]}
    assert dependencies_of(answer, "default") == [Dependency("ConfigMap", "settings"), Dependency("Secret", "token")]
    assert raw_status_of({"rawStatus": {"ready": 1}}) == {"ready": 1}
    assert healthy_of({"healthy": False}) is False


@pytest.mark.parametrize(
    ("read", "response", "message"),
    [
        (lambda r: dependencies_of(r, "default"), {"dependencies": [{"apiVersion": "v1", "kind": "Secret", "namespace": "kube-system", "name": "t"}]},
         'dependencies[0]: namespace "kube-system" is not the workload\'s namespace "default": '
         "dependencies follow a workload in its own namespace"),
        (lambda r: dependencies_of(r, "default"), {"dependencies": [{"apiVersion": "v1", "kind": "Secret", "labelSelector": {}}]},
         "dependencies[0]: name is required (a labelSelector is not supported)"),
        (raw_status_of, {"rawStatus": [1]}, "response.rawStatus must be an object, not [1]"),
        (healthy_of, {"healthy": "yes"}, 'response.healthy must be a boolean, not "yes"'),
    ],
)
def test_unreadable_dependencies_status_and_health_are_refused(read: Any, response: dict[str, Any], message: str) -> None:
    with pytest.raises(HookFailed) as failed:
        read(response)
    assert str(failed.value) == message
