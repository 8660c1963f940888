"""What is stored is what was validated: an object whose unknown fields are dropped
(``fieldValidation=Warn`` or ``Ignore``) is validated again without them, and refused with
``422 Invalid`` and field causes when dropping them left it invalid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.resources import Registry
from controlplane.storage import MemoryStore

POLICIES = "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies"


def policy(failover: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "failover": failover,
            **spec,
        },
    }


@pytest.fixture
async def hub() -> AsyncIterator[TestClient[Any, Any]]:
    async with MemoryStore() as memory:
        objects = ObjectStore(memory, Registry(core_resources(), workload_resources(), gpufed_resources()))
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, objects.registry))) as client:
            yield client


async def test_the_object_as_sent_without_the_unknown_field_is_invalid(hub: TestClient[Any, Any]) -> None:
    # Karmada's CRD requires an application failover's decisionConditions.
    direct = await hub.post(POLICIES, json=policy({"application": {}}))
    body = await direct.json()
    assert direct.status == 422, body
    assert "spec.failover.application.decisionConditions: Required value" in body["message"], body


@pytest.mark.parametrize("validation", ["Warn", "Ignore"])
async def test_dropping_an_unknown_field_cannot_store_an_invalid_object(
    hub: TestClient[Any, Any], validation: str
) -> None:
    response = await hub.post(
        POLICIES, json=policy({"application": {"bogus": 1}}), params={"fieldValidation": validation}
    )
    status = await response.json()
    assert response.status == 422, status
    assert status["reason"] == "Invalid"
    assert any(c["field"].startswith("spec.failover") for c in status["details"]["causes"]), status
    # kube warns as it decodes, before it validates: the refusal carries the warning.
    warned = ['299 - "unknown field \\"spec.failover.application.bogus\\""'] if validation == "Warn" else []
    assert response.headers.getall("Warning", []) == warned
    assert (await hub.get(f"{POLICIES}/p")).status == 404


async def test_a_valid_object_with_an_unknown_field_is_stored_with_a_warning(hub: TestClient[Any, Any]) -> None:
    sent = policy({"application": {"decisionConditions": {"tolerationSeconds": 30}, "bogus": 1}}, propagateDeps=True)
    response = await hub.post(POLICIES, json=sent, params={"fieldValidation": "Warn"})
    assert response.status == 201, await response.text()
    assert 'unknown field \\"spec.failover.application.bogus\\"' in response.headers["Warning"]
    stored = await (await hub.get(f"{POLICIES}/p")).json()
    assert stored["spec"]["failover"]["application"] == {
        "decisionConditions": {"tolerationSeconds": 30}, "purgeMode": "Graciously"
    }
