"""Under ``fieldValidation=Strict`` an unknown field is refused as kube's decoder refuses it,
before any admission runs: the handlers decode the body first (``create.go``, ``update.go``; a
custom resource's unknown fields are found by apiextensions' ``schemaCoercingDecoder``), so a
write that a kind's own webhook (Karmada's, here) would also deny is the decoder's 400, not the
webhook's 403. Under Warn the unknown field is dropped with a warning and the webhook denies.
A patch's unknown fields are refused by kube's patcher, and a server-side apply's by its field
manager, both before admission too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage import MemoryStore
from controlplane.storage.recent import RecentStore

Client = TestClient[Any, Any]

POLICIES = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"
MCS = "/apis/networking.karmada.io/v1alpha1/namespaces/default/multiclusterservices"
STRICT, WARN = "?fieldValidation=Strict", "?fieldValidation=Warn"
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def policy(name: str, **spec: Any) -> dict[str, Any]:
    selectors = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name},
        "spec": {"resourceSelectors": selectors, **spec},
    }


def mcs(name: str, types: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.karmada.io/v1alpha1",
        "kind": "MultiClusterService",
        "metadata": {"name": name},
        "spec": {"types": types, **spec},
    }


async def refusal(response: Any) -> tuple[int, str]:
    body = await response.json()
    return response.status, body["message"]


def strict_error(kind: str, version: str = "v1alpha1") -> str:
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: unknown field "spec.bogus"'


async def test_a_create_the_kinds_webhook_denies_is_the_decoders_400_first(hub: Client) -> None:
    long_name = "p" * 64
    sent = policy(long_name, bogus=1)
    assert await refusal(await hub.post(POLICIES + STRICT, json=sent)) == (
        400,
        strict_error("PropagationPolicy"),
    )
    status, message = await refusal(await hub.post(POLICIES + WARN, json=sent))
    assert (status, message) == (
        400,
        'admission webhook "propagationpolicy.karmada.io" denied the request: '
        "PropagationPolicy's name should be no more than 63 characters",
    )
    assert (await hub.get(f"{POLICIES}/{long_name}")).status == 404


async def test_an_update_the_kinds_webhook_denies_is_the_decoders_400_first(hub: Client) -> None:
    created = await hub.post(MCS, json=mcs("web", ["CrossCluster"]))
    assert created.status == 201, await created.text()
    stored = await created.json()
    changed = {**stored, "spec": {**stored["spec"], "types": ["LoadBalancer"], "bogus": 1}}
    strict = strict_error("MultiClusterService")
    assert await refusal(await hub.put(f"{MCS}/web{STRICT}", json=changed)) == (400, strict)
    status, message = await refusal(await hub.put(f"{MCS}/web{WARN}", json=changed))
    assert status == 403 and "MultiClusterService types are immutable" in message, message

    # A patch's and an apply's unknown fields: kube's patcher (422 naming the patch) and its field
    # manager refuse them, before admission too.
    patched = await hub.patch(
        f"{MCS}/web{STRICT}", json={"spec": {"types": ["LoadBalancer"], "bogus": 1}}, headers=MERGE
    )
    status, message = await refusal(patched)
    assert status == 422 and message.endswith('strict decoding error: unknown field "spec.bogus"'), message
    applied = await hub.patch(
        f"{MCS}/web{STRICT}&fieldManager=m", json=mcs("web", ["LoadBalancer"], bogus=1), headers=APPLY
    )
    status, message = await refusal(applied)
    assert status == 422 and message.endswith(".spec.bogus: field not declared in schema"), message
    assert (await (await hub.get(f"{MCS}/web")).json())["spec"]["types"] == ["CrossCluster"]


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str, **extra: Any) -> dict[str, Any]:
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
        **extra,
    }


async def test_an_unknown_field_in_the_status_a_write_drops_is_refused_too(hub: Client) -> None:
    """kube decodes the whole body: a status a create or a main-resource update sends (and drops)
    is decoded strictly too, with no webhook configuration in the hub."""
    unknown = 'strict decoding error: unknown field "status.bogus"'
    refused = f'Deployment in version "v1" cannot be handled as a Deployment: {unknown}'
    bogus = {"replicas": 0, "bogus": 1}
    assert await refusal(await hub.post(DEPLOYMENTS + STRICT, json=deployment("web", status=bogus))) == (
        400,
        refused,
    )
    created = await hub.post(DEPLOYMENTS + WARN, json=deployment("web", status=bogus))
    assert created.status == 201, await created.text()
    stored = await created.json()
    assert await refusal(await hub.put(f"{DEPLOYMENTS}/web{STRICT}", json={**stored, "status": bogus})) == (
        400,
        refused,
    )
    status, message = await refusal(
        await hub.patch(f"{DEPLOYMENTS}/web{STRICT}", json={"status": bogus}, headers=MERGE)
    )
    assert status == 422 and message.endswith(unknown), message
    updated = await hub.put(f"{DEPLOYMENTS}/web{WARN}", json={**stored, "status": bogus})
    assert updated.status == 200, await updated.text()


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
SERVICES = "/api/v1/namespaces/default/services"
CLUSTER_QUEUES = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "s"},
    "spec": {"ports": [{"port": 80}]},
}
CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq"},
    "spec": {},
}


def handled(kind: str, *paths: str, version: str = "v1") -> str:
    unknown = ", ".join(f'unknown field "{path}"' for path in paths)
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {unknown}'


def warned(*paths: str) -> list[str]:
    return [f'299 - "unknown field \\"{path}\\""' for path in paths]


async def created(hub: Client, url: str, obj: dict[str, Any]) -> dict[str, Any]:
    response = await hub.post(url, json=obj)
    assert response.status == 201, await response.text()
    return dict(await response.json())


async def stale_update_refused(hub: Client) -> dict[str, Any]:
    """A Deployment ``web`` changed since it was created: an update made from the created one with
    an unknown field is the decoder's 400 under Strict, the store's 409 under Warn, as is one
    without. Returns the created (stale) object."""
    stale = await created(hub, DEPLOYMENTS, deployment("web"))
    changed = await hub.patch(f"{DEPLOYMENTS}/web", json={"spec": {"paused": True}}, headers=MERGE)
    assert changed.status == 200, await changed.text()
    sent = {**stale, "spec": {**stale["spec"], "bogus": 1}}
    refused = await hub.put(f"{DEPLOYMENTS}/web{STRICT}", json=sent)
    assert await refusal(refused) == (400, handled("Deployment", "spec.bogus"))
    assert (await hub.put(f"{DEPLOYMENTS}/web{WARN}", json=sent)).status == 409
    assert (await hub.put(f"{DEPLOYMENTS}/web{STRICT}", json=stale)).status == 409
    return stale


async def test_a_stale_update_with_an_unknown_field_is_the_decoders_400_not_the_stores_409(
    hub: Client,
) -> None:
    """kube decodes the body before its store reads the object and compares resourceVersions: under
    Strict an unknown field anywhere in a stale update (in the status it would not store too), or
    in one of an object that does not exist, is the 400; under Warn the store's answer stands."""
    stale = await stale_update_refused(hub)
    refused = await hub.put(f"{DEPLOYMENTS}/web{STRICT}", json={**stale, "status": {"bogus": 1}})
    assert await refusal(refused) == (400, handled("Deployment", "status.bogus"))
    # A patch naming the stale resourceVersion: kube's patcher decodes its result first (its 422).
    patch = {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}, "spec": {"bogus": 1}}
    status, message = await refusal(await hub.patch(f"{DEPLOYMENTS}/web{STRICT}", json=patch, headers=MERGE))
    assert status == 422 and message.endswith('strict decoding error: unknown field "spec.bogus"'), message

    config = await created(
        hub, CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    )
    assert (await hub.put(f"{CONFIGMAPS}/c", json={**config, "data": {"a": "b"}})).status == 200
    assert await refusal(await hub.put(f"{CONFIGMAPS}/c{STRICT}", json={**config, "bogus": 1})) == (
        400,
        handled("ConfigMap", "bogus"),
    )
    missing = {**config, "metadata": {"name": "missing"}, "bogus": 1}
    assert await refusal(await hub.put(f"{CONFIGMAPS}/missing{STRICT}", json=missing)) == (
        400,
        handled("ConfigMap", "bogus"),
    )
    assert (await hub.put(f"{CONFIGMAPS}/missing{WARN}", json=missing)).status == 404

    # Kinds with a schema of their own (Kueue's and Karmada's CRDs), a policy with its own webhook.
    stale = await created(hub, CLUSTER_QUEUES, CLUSTER_QUEUE)
    assert (
        await hub.patch(f"{CLUSTER_QUEUES}/cq", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    ).status == 200
    refused = await hub.put(f"{CLUSTER_QUEUES}/cq{STRICT}", json={**stale, "spec": {"bogus": 1}})
    assert await refusal(refused) == (400, handled("ClusterQueue", "spec.bogus", version="v1beta1"))
    # Kueue's kinds take no update without a resourceVersion: the store's 422 comes after too.
    unversioned = {**CLUSTER_QUEUE, "spec": {"bogus": 1}}
    refused = await hub.put(f"{CLUSTER_QUEUES}/cq{STRICT}", json=unversioned)
    assert await refusal(refused) == (400, handled("ClusterQueue", "spec.bogus", version="v1beta1"))
    assert (await hub.put(f"{CLUSTER_QUEUES}/cq{WARN}", json=unversioned)).status == 422
    stale = await created(hub, POLICIES, policy("p"))
    assert (
        await hub.patch(f"{POLICIES}/p", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    ).status == 200
    refused = await hub.put(f"{POLICIES}/p{STRICT}", json={**stale, "spec": {**stale["spec"], "bogus": 1}})
    assert await refusal(refused) == (400, strict_error("PropagationPolicy"))


async def test_a_status_write_is_decoded_whole(hub: Client) -> None:
    """kube's status handler decodes the whole object its body holds, not its status alone: an
    unknown field in its spec or metadata (which a status write does not store) is the 400 under
    Strict and a warning under Warn, before the status's own, in the body's order; a merge patch of
    the status is decoded as the object it makes (kube's 422 under Strict)."""
    stored = await created(hub, DEPLOYMENTS, deployment("web"))
    sent = {**stored, "spec": {**stored["spec"], "bogus": 1}, "status": {"replicas": 0, "ready": 1}}
    refused = await hub.put(f"{DEPLOYMENTS}/web/status{STRICT}", json=sent)
    assert await refusal(refused) == (400, handled("Deployment", "spec.bogus", "status.ready"))
    written = await hub.put(f"{DEPLOYMENTS}/web/status{WARN}", json=sent)
    assert written.status == 200, await written.text()
    assert written.headers.getall("Warning") == warned("spec.bogus", "status.ready")
    assert "bogus" not in (await written.json())["spec"]
    status, message = await refusal(
        await hub.patch(f"{DEPLOYMENTS}/web/status{STRICT}", json={"spec": {"bogus": 1}}, headers=MERGE)
    )
    assert status == 422 and message.endswith('strict decoding error: unknown field "spec.bogus"'), message
    patched = await hub.patch(
        f"{DEPLOYMENTS}/web/status{WARN}", json={"metadata": {"bogus": 1}}, headers=MERGE
    )
    assert patched.status == 200, await patched.text()
    assert patched.headers.getall("Warning") == warned("metadata.bogus")

    service = await created(hub, SERVICES, SERVICE)
    sent = {**service, "spec": {**service["spec"], "bogus": 1}}
    assert await refusal(await hub.put(f"{SERVICES}/s/status{STRICT}", json=sent)) == (
        400,
        handled("Service", "spec.bogus"),
    )

    queue = await created(hub, CLUSTER_QUEUES, CLUSTER_QUEUE)
    sent = {**queue, "spec": {"bogus": 1}}
    refused = await hub.put(f"{CLUSTER_QUEUES}/cq/status{STRICT}", json=sent)
    assert await refusal(refused) == (400, handled("ClusterQueue", "spec.bogus", version="v1beta1"))
    written = await hub.put(f"{CLUSTER_QUEUES}/cq/status{WARN}", json=sent)
    assert written.status == 200, await written.text()
    assert written.headers.getall("Warning") == warned("spec.bogus")

    stored = await created(hub, POLICIES, policy("p"))
    refused = await hub.put(
        f"{POLICIES}/p/status{STRICT}", json={**stored, "spec": {**stored["spec"], "bogus": 1}}
    )
    assert await refusal(refused) == (400, strict_error("PropagationPolicy"))


async def test_the_status_a_write_drops_is_warned_about_under_warn(hub: Client) -> None:
    """kube's decoder warns of an unknown field wherever the body has it, the status a create or a
    main-resource update sends (and does not store) included, after the spec's; under Strict one
    400 names them all."""
    both = deployment("web", status={"replicas": 0, "bogus": 1})
    both["spec"]["bogus"] = 1
    assert await refusal(await hub.post(DEPLOYMENTS + STRICT, json=both)) == (
        400,
        handled("Deployment", "spec.bogus", "status.bogus"),
    )
    response = await hub.post(DEPLOYMENTS + WARN, json=both)
    assert response.status == 201, await response.text()
    assert response.headers.getall("Warning") == warned("spec.bogus", "status.bogus")
    stored = await response.json()
    updated = await hub.put(f"{DEPLOYMENTS}/web{WARN}", json={**stored, "status": {"bogus": 2}})
    assert updated.status == 200, await updated.text()
    assert updated.headers.getall("Warning") == warned("status.bogus")
    patched = await hub.patch(f"{DEPLOYMENTS}/web{WARN}", json={"status": {"bogus": 3}}, headers=MERGE)
    assert patched.status == 200, await patched.text()
    assert patched.headers.getall("Warning") == warned("status.bogus")

    service = {**SERVICE, "status": {"bogus": 1}}
    assert await refusal(await hub.post(SERVICES + STRICT, json=service)) == (
        400,
        handled("Service", "status.bogus"),
    )
    response = await hub.post(SERVICES + WARN, json=service)
    assert response.status == 201, await response.text()
    assert response.headers.getall("Warning") == warned("status.bogus")


@pytest.fixture
async def remembering_hub() -> AsyncIterator[Client]:
    """``hub`` over a store that remembers the values it has seen, as the hub's does: an update
    it knows to be stale is refused without a read."""
    registry = hub_registry()
    async with MemoryStore() as memory:
        objects = ObjectStore(RecentStore(memory), registry)
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client


async def test_an_update_known_to_be_stale_is_decoded_first_too(remembering_hub: Client) -> None:
    """The hub's refusal of an update it has seen go stale, without reading the object, comes after
    the decoder's too."""
    await stale_update_refused(remembering_hub)
