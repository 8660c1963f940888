"""Under ``fieldValidation=Strict`` an unknown field is refused as kube's decoder refuses it,
before any admission runs: the handlers decode the body first (``create.go``, ``update.go``; a
custom resource's unknown fields are found by apiextensions' ``schemaCoercingDecoder``), so a
write that a kind's own webhook (Karmada's, here) would also deny is the decoder's 400, not the
webhook's 403. Under Warn the unknown field is dropped with a warning and the webhook denies.
A patch's unknown fields are refused by kube's patcher, and a server-side apply's by its field
manager, both before admission too."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

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
        403,
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
