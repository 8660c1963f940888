"""An update without ``metadata.resourceVersion``, or with ``0``, as kube's ``Store.Update`` takes
it: unconditional where the kind's strategy allows it (a built-in kind such as a ConfigMap), and
for a custom resource, whose strategy does not, kube's 422 naming the resourceVersion (what
``kubectl replace -f`` of a custom resource without one shows)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.resources import Registry

from .test_crd_apply import GATEWAY_SCHEMA, GATEWAYS, crd, gateway, install

Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def api_registry() -> Registry:
    return DynamicRegistry(core_resources(), [crd_resource_type()])


@pytest.mark.parametrize("version", [None, "", "0"])
async def test_a_configmap_update_without_a_resource_version_is_unconditional(api: Client, version: str | None) -> None:
    created = await api.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert created.status == 201, await created.text()
    changed = await api.put(f"{CONFIGMAPS}/cm", json={"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
                                                        "metadata": {"name": "cm", "resourceVersion": version}})
    assert changed.status == 200, await changed.text()
    assert (await changed.json())["data"] == {"k": "v"}


@pytest.mark.parametrize("version", [None, "", "0"])
async def test_a_custom_resource_update_without_a_resource_version_is_kubes_422(api: Client, version: str | None) -> None:
    await install(api, crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA), GATEWAYS)
    created = await api.post(GATEWAYS, json=gateway(hosts=["a"]))
    assert created.status == 201, await created.text()
    body = {**gateway(hosts=["b"]), "metadata": {"name": "g", "resourceVersion": version}}
    answer = await api.put(f"{GATEWAYS}/g", json=body)
    status = await answer.json()
    assert (answer.status, status["reason"]) == (422, "Invalid"), status
    assert status["message"] == (
        'gateways.net.example.com "g" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        "must be specified for an update"
    )
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                                            "message": "Invalid value: 0x0: must be specified for an update"}]
    assert (await (await api.get(f"{GATEWAYS}/g")).json())["spec"] == {"hosts": ["a"]}
    # With the stored resourceVersion it is an update like any other.
    body["metadata"]["resourceVersion"] = (await created.json())["metadata"]["resourceVersion"]
    assert (await api.put(f"{GATEWAYS}/g", json=body)).status == 200
