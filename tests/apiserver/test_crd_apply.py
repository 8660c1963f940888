"""Server-side apply of custom resources over HTTP and with the real kubectl: list and map
semantics come from the CRD's structural schema, as kube-apiserver builds them, never from a
built-in kind that shares the kind's name."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.resources import Registry

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

Client = TestClient[Any, Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GATEWAYS = "/apis/net.example.com/v1/namespaces/default/gateways"
OTHER_DEPLOYMENTS = "/apis/rollouts.example.com/v1/namespaces/default/deployments"
APPLY = {"Content-Type": "application/apply-patch+yaml"}

_LISTENER = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}
GATEWAY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "listeners": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": _LISTENER},
        "hosts": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "addresses": {"type": "array", "items": {"type": "string"}},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
    }},
    "status": {"type": "object", "properties": {"conditions": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "status": {"type": "string"}}},
    }}},
}}
# A kind named Deployment in another group: its containers list has no list type (atomic).
OTHER_DEPLOYMENT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "template": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "containers": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "image": {"type": "string"},
        }}},
    }}}},
}}}}


def crd(group: str, kind: str, plural: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": schema}}],
        },
    }


@pytest.fixture
def api_registry() -> Registry:
    return DynamicRegistry(core_resources(), workload_resources(), [crd_resource_type()])


async def until(ready: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(20):
        while True:
            if await ready():
                return
            await asyncio.sleep(0.05)


async def install(api: Client, definition: dict[str, Any], collection: str) -> None:
    """Create ``definition`` and wait until its kind is served."""
    created = await api.post(CRDS, json=definition)
    assert created.status == 201, await created.text()

    async def served() -> bool:
        return (await api.get(collection)).status == 200

    await until(served)


async def install_with_kubectl(config: Path) -> None:
    """``kubectl apply`` the Gateway CRD and wait until kubectl finds its kind."""
    definition = yaml.safe_dump(crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA))
    code, _, err = await kubectl(config, "apply", "-f", "-", stdin=definition)
    assert code == 0, err

    async def served() -> bool:
        return (await kubectl(config, "get", "gateways.net.example.com"))[0] == 0

    await until(served)


def gateway(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "net.example.com/v1", "kind": "Gateway", "metadata": {"name": "g"}, "spec": spec}


async def apply(api: Client, path: str, body: dict[str, Any], manager: str, *, force: bool = False) -> Any:
    query = f"fieldManager={manager}" + ("&force=true" if force else "")
    return await api.patch(f"{path}?{query}", data=yaml.safe_dump(body), headers=APPLY)


async def applied(api: Client, path: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
    answer = await apply(api, path, body, manager)
    assert answer.status in (200, 201), await answer.text()
    result: dict[str, Any] = await answer.json()
    return result


def fields_of(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    [entry] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == manager]
    fields: dict[str, Any] = entry["fieldsV1"]
    return fields


async def test_two_managers_keep_their_own_items_of_a_list_type_map_and_a_set(api: Client) -> None:
    await install(api, crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA), GATEWAYS)
    await applied(api, f"{GATEWAYS}/g", gateway(listeners=[{"name": "http", "port": 80}], hosts=["a.example.com"]), "a")
    result = await applied(api, f"{GATEWAYS}/g", gateway(listeners=[{"name": "grpc", "port": 9090}], hosts=["b.example.com"]), "b")

    assert result["spec"]["listeners"] == [{"name": "http", "port": 80}, {"name": "grpc", "port": 9090}]
    assert result["spec"]["hosts"] == ["a.example.com", "b.example.com"]
    assert fields_of(result, "a") == {"f:spec": {
        "f:hosts": {'v:"a.example.com"': {}},
        "f:listeners": {'k:{"name":"http"}': {".": {}, "f:name": {}, "f:port": {}}},
    }}
    assert fields_of(result, "b") == {"f:spec": {
        "f:hosts": {'v:"b.example.com"': {}},
        "f:listeners": {'k:{"name":"grpc"}': {".": {}, "f:name": {}, "f:port": {}}},
    }}

    # Each manager's items are its own: "a" dropping its listener leaves "b"'s.
    result = await applied(api, f"{GATEWAYS}/g", gateway(hosts=["a.example.com"]), "a")
    assert result["spec"]["listeners"] == [{"name": "grpc", "port": 9090}]


async def test_status_conditions_of_two_controllers_merge_by_type(api: Client) -> None:
    await install(api, crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA), GATEWAYS)
    await applied(api, f"{GATEWAYS}/g", gateway(), "creator")
    for manager, condition in (("a", "Accepted"), ("b", "Programmed")):
        body = {**gateway(), "status": {"conditions": [{"type": condition, "status": "True"}]}}
        await applied(api, f"{GATEWAYS}/g/status", body, manager)

    stored = await (await api.get(f"{GATEWAYS}/g")).json()
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Accepted", "Programmed"]
    assert fields_of(stored, "b") == {"f:status": {"f:conditions": {
        'k:{"type":"Programmed"}': {".": {}, "f:status": {}, "f:type": {}},
    }}}


async def test_an_atomic_list_conflicts_and_an_atomic_map_is_replaced_whole(api: Client) -> None:
    await install(api, crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA), GATEWAYS)
    await applied(api, f"{GATEWAYS}/g", gateway(addresses=["10.0.0.1"], selector={"app": "web"}), "a")

    refused = await apply(api, f"{GATEWAYS}/g", gateway(addresses=["10.0.0.2"], selector={"tier": "front"}), "b")
    assert refused.status == 409
    status = await refused.json()
    assert sorted(cause["field"] for cause in status["details"]["causes"]) == [".spec.addresses", ".spec.selector"]

    forced = await apply(api, f"{GATEWAYS}/g", gateway(addresses=["10.0.0.2"], selector={"tier": "front"}), "b", force=True)
    assert forced.status == 200, await forced.text()
    result = await forced.json()
    assert result["spec"] == {"addresses": ["10.0.0.2"], "selector": {"tier": "front"}}
    assert fields_of(result, "b") == {"f:spec": {"f:addresses": {}, "f:selector": {}}}


async def test_a_custom_kind_named_deployment_does_not_get_apps_rules(api: Client) -> None:
    await install(api, crd("rollouts.example.com", "Deployment", "deployments", OTHER_DEPLOYMENT_SCHEMA), OTHER_DEPLOYMENTS)

    def rollout(container: str) -> dict[str, Any]:
        return {"apiVersion": "rollouts.example.com/v1", "kind": "Deployment", "metadata": {"name": "r"},
                "spec": {"template": {"spec": {"containers": [{"name": container, "image": "busybox"}]}}}}

    created = await applied(api, f"{OTHER_DEPLOYMENTS}/r", rollout("main"), "a")
    # Its containers list is atomic, as its schema says (apps/v1 Deployment's is keyed by name).
    assert fields_of(created, "a") == {"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}
    refused = await apply(api, f"{OTHER_DEPLOYMENTS}/r", rollout("sidecar"), "b")
    assert refused.status == 409
    assert [c["field"] for c in (await refused.json())["details"]["causes"]] == [".spec.template.spec.containers"]

    # kube answers a strategic merge patch of a custom resource with 415.
    patched = await api.patch(
        f"{OTHER_DEPLOYMENTS}/r", json={"spec": {}}, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert patched.status == 415
    assert (await patched.json())["reason"] == "UnsupportedMediaType"


@needs_kubectl
async def test_kubectl_server_side_applies_of_two_managers_keep_both_items(
    kubeconfig: Path,  # noqa: F811
) -> None:
    await install_with_kubectl(kubeconfig)

    for manager, name, port in (("a", "http", 80), ("b", "grpc", 9090)):
        body = yaml.safe_dump(gateway(listeners=[{"name": name, "port": port}]))
        code, out, err = await kubectl(
            kubeconfig, "apply", "--server-side", f"--field-manager={manager}", "-f", "-", stdin=body
        )
        assert code == 0, err
        assert out.strip() == "gateway.net.example.com/g serverside-applied"

    code, out, err = await kubectl(kubeconfig, "get", "gateway", "g", "-o", "yaml", "--show-managed-fields")
    assert code == 0, err
    live = yaml.safe_load(out)
    assert live["spec"]["listeners"] == [{"name": "http", "port": 80}, {"name": "grpc", "port": 9090}]
    assert list(fields_of(live, "a")["f:spec"]["f:listeners"]) == ['k:{"name":"http"}']
    assert list(fields_of(live, "b")["f:spec"]["f:listeners"]) == ['k:{"name":"grpc"}']


@needs_kubectl
async def test_kubectl_applies_two_controllers_conditions_through_the_status_subresource(
    kubeconfig: Path,  # noqa: F811
) -> None:
    await install_with_kubectl(kubeconfig)
    code, _, err = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(gateway()))
    assert code == 0, err

    for manager, condition in (("a", "Accepted"), ("b", "Programmed")):
        body = yaml.safe_dump({**gateway(), "status": {"conditions": [{"type": condition, "status": "True"}]}})
        code, _, err = await kubectl(
            kubeconfig, "apply", "--server-side", "--subresource=status", f"--field-manager={manager}", "-f", "-",
            stdin=body,
        )
        assert code == 0, err

    code, out, err = await kubectl(kubeconfig, "get", "gateway", "g", "-o", "yaml", "--show-managed-fields")
    assert code == 0, err
    live = yaml.safe_load(out)
    assert live["status"]["conditions"] == [{"type": "Accepted", "status": "True"}, {"type": "Programmed", "status": "True"}]
    entries = {e["manager"]: e for e in live["metadata"]["managedFields"]}
    assert entries["b"]["subresource"] == "status"
    assert list(entries["b"]["fieldsV1"]["f:status"]["f:conditions"]) == ['k:{"type":"Programmed"}']
