"""An update without ``metadata.resourceVersion``, or with ``0``, as kube's ``Store.Update`` takes
it: unconditional where the kind's strategy allows it (a built-in kind such as a ConfigMap), and
where it does not, kube's 422 naming the resourceVersion, once the object is read: a custom
resource (what ``kubectl replace -f`` of one without a resourceVersion shows) and the built-in
kinds whose strategy says ``AllowUnconditionalUpdate() bool { return false }``, through their
status subresource too. A patch reads the stored object and keeps its resourceVersion; one whose
result has none is such an update."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from controlplane.apiserver.admission import WriteAttributes
from controlplane.apiserver.crd.registry import DynamicRegistry
from controlplane.apiserver.crd.types import crd_resource_type
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.objects.store import ObjectStore
from controlplane.apiserver.resources import Registry

from .test_crd_apply import CRDS, GATEWAY_SCHEMA, GATEWAYS, crd, gateway, install

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


ADMISSION = "/apis/admissionregistration.k8s.io/v1"
_RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]
_WEBHOOK = {"name": "w.example.com", "clientConfig": {"url": "https://hooks.example.com/w"}, "rules": _RULES,
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}

#: kube's built-in kinds whose registry strategy refuses an unconditional update
#: (``AllowUnconditionalUpdate() bool { return false }``): (collection, object, status subresource served).
CONDITIONAL_ONLY: dict[str, tuple[str, dict[str, Any], bool]] = {
    "validatingwebhookconfigurations": (f"{ADMISSION}/validatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "x"}, "webhooks": [_WEBHOOK]}, False),
    "mutatingwebhookconfigurations": (f"{ADMISSION}/mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "x"}, "webhooks": [_WEBHOOK]}, False),
    "validatingadmissionpolicies": (f"{ADMISSION}/validatingadmissionpolicies", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "x"},
        "spec": {"matchConstraints": {"resourceRules": _RULES}, "validations": [{"expression": "true"}]}}, True),
    "validatingadmissionpolicybindings": (f"{ADMISSION}/validatingadmissionpolicybindings", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "x"}, "spec": {"policyName": "p", "validationActions": ["Deny"]}}, False),
    "apiservices": ("/apis/apiregistration.k8s.io/v1/apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.x.example.com"},
        "spec": {"group": "x.example.com", "version": "v1", "groupPriorityMinimum": 500, "versionPriority": 5}}, True),
    "customresourcedefinitions": (CRDS, crd("x.example.com", "Gadget", "gadgets", GATEWAY_SCHEMA), True),
    "leases": ("/apis/coordination.k8s.io/v1/namespaces/default/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"},
        "spec": {"holderIdentity": "a"}}, False),
    "runtimeclasses": ("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "x"}, "handler": "nvidia"}, False),
    "poddisruptionbudgets": ("/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"},
        "spec": {"minAvailable": 1}}, True),
}
_GROUPS = {"leases": "coordination.k8s.io", "runtimeclasses": "node.k8s.io", "poddisruptionbudgets": "policy",
           "apiservices": "apiregistration.k8s.io", "customresourcedefinitions": "apiextensions.k8s.io"}


def _must_be_specified(plural: str, name: str) -> str:
    qualified = f"{plural}.{_GROUPS.get(plural, 'admissionregistration.k8s.io')}"
    return (f'{qualified} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
            "must be specified for an update")


async def _created(hub: Client, plural: str) -> tuple[str, dict[str, Any], bool]:
    collection, body, has_status = CONDITIONAL_ONLY[plural]
    answer = await hub.post(collection, json=body)
    assert answer.status == 201, await answer.text()
    return f"{collection}/{body['metadata']['name']}", await answer.json(), has_status


def _without_version(obj: dict[str, Any], version: str | None, **labels: str) -> dict[str, Any]:
    meta = {**obj["metadata"], "resourceVersion": version, "labels": labels}
    if version is None:
        del meta["resourceVersion"]
    return {**obj, "metadata": meta}


async def _refused(answer: Any, plural: str, name: str) -> None:
    status = await answer.json()
    assert (answer.status, status["reason"]) == (422, "Invalid"), status
    assert status["message"] == _must_be_specified(plural, name)
    assert status["details"]["kind"] == plural
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                                            "message": "Invalid value: 0x0: must be specified for an update"}]


@pytest.mark.parametrize("version", [None, "", "0"])
@pytest.mark.parametrize("plural", sorted(CONDITIONAL_ONLY))
async def test_a_built_in_kind_whose_strategy_refuses_an_unconditional_update_answers_kubes_422(
    hub: Client, plural: str, version: str | None
) -> None:
    path, obj, _ = await _created(hub, plural)
    name = obj["metadata"]["name"]
    await _refused(await hub.put(path, json=_without_version(obj, version, changed="yes")), plural, name)
    assert "labels" not in (await (await hub.get(path)).json())["metadata"]
    # With the stored resourceVersion it is an update like any other (a CRD's is its controller's by now).
    stored = await (await hub.get(path)).json()
    assert (await hub.put(path, json=_without_version(stored, stored["metadata"]["resourceVersion"], changed="yes"))).status == 200


@pytest.mark.parametrize("plural", sorted(p for p, (_, _, has_status) in CONDITIONAL_ONLY.items() if has_status))
async def test_their_status_subresource_refuses_it_too(hub: Client, plural: str) -> None:
    path, obj, _ = await _created(hub, plural)
    await _refused(await hub.put(f"{path}/status", json=_without_version(obj, None)), plural, obj["metadata"]["name"])
    assert (await hub.put(f"{path}/status", json=await (await hub.get(path)).json())).status == 200


@pytest.mark.parametrize("plural", sorted(CONDITIONAL_ONLY))
async def test_a_patch_without_a_resource_version_reads_the_stored_one(hub: Client, plural: str) -> None:
    """kube patches the stored object, whose resourceVersion the patched one keeps: no refusal."""
    path, _, _ = await _created(hub, plural)
    patch = {"metadata": {"labels": {"changed": "yes"}}}
    answer = await hub.patch(path, json=patch, headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status == 200, await answer.text()
    assert (await answer.json())["metadata"]["labels"] == {"changed": "yes"}


@pytest.mark.parametrize("plural", sorted(CONDITIONAL_ONLY))
async def test_a_patch_that_removes_the_resource_version_is_refused_as_an_update_without_one(
    hub: Client, plural: str
) -> None:
    path, obj, _ = await _created(hub, plural)
    patch = {"metadata": {"resourceVersion": None, "labels": {"changed": "yes"}}}
    answer = await hub.patch(path, json=patch, headers={"Content-Type": "application/merge-patch+json"})
    await _refused(answer, plural, obj["metadata"]["name"])


@pytest.mark.parametrize("patch", [{"resourceVersion": None}, {"resourceVersion": "0"}])
async def test_a_configmap_patch_without_a_resource_version_in_its_result_is_unconditional(
    hub: Client, patch: dict[str, Any]
) -> None:
    created = await hub.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert created.status == 201, await created.text()
    body = {"metadata": patch, "data": {"k": "v"}}
    answer = await hub.patch(f"{CONFIGMAPS}/cm", json=body, headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status == 200, await answer.text()
    assert (await answer.json())["data"] == {"k": "v"}


@pytest.mark.parametrize("plural", ["validatingwebhookconfigurations", "poddisruptionbudgets"])
async def test_an_update_of_a_missing_object_is_not_found_before_its_resource_version_is_read(
    hub: Client, plural: str
) -> None:
    """kube's store reads the object first: a missing one is its 404 (for a kind whose strategy
    creates none on update; a Lease is created, see test_create_on_update.py)."""
    collection, body, _ = CONDITIONAL_ONLY[plural]
    answer = await hub.put(f"{collection}/x", json=body)
    assert (answer.status, (await answer.json())["reason"]) == (404, "NotFound")


async def test_a_missing_custom_resource_is_not_found_before_its_resource_version_is_read(api: Client) -> None:
    await install(api, crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA), GATEWAYS)
    answer = await api.put(f"{GATEWAYS}/g", json=gateway(hosts=["a"]))
    assert (answer.status, (await answer.json())["reason"]) == (404, "NotFound")


async def test_a_server_side_apply_without_a_resource_version_changes_a_lease(hub: Client) -> None:
    path, _, _ = await _created(hub, "leases")
    applied = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"},
               "spec": {"holderIdentity": "b"}}
    answer = await hub.patch(f"{path}?fieldManager=m&force=true", data=yaml.safe_dump(applied),
                             headers={"Content-Type": "application/apply-patch+yaml"})
    assert answer.status == 200, await answer.text()
    assert (await answer.json())["spec"]["holderIdentity"] == "b"


async def test_an_unconditional_update_that_loses_a_race_is_made_again_on_the_object_read_anew(
    api: Client, objects: ObjectStore, api_registry: Registry
) -> None:
    """kube's store re-reads the object and tries again when its compare-and-swap loses to another
    write (``GuaranteedUpdate``): an update naming no resourceVersion lands on the newer object; one
    naming the revision it read is a Conflict."""
    created = await api.post(CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert created.status == 201, await created.text()
    configmaps = api_registry.require("v1", "ConfigMap")
    raced: list[str] = []

    async def race(write: WriteAttributes) -> None:
        # Another writer changes the object after an update read it, once per value of ``k``.
        if write.old is not None and (write.new.get("data") or {}).get("k", "") not in ("", *raced):
            raced.append(write.new["data"]["k"])
            await objects.update(configmaps, {**write.old, "metadata": {"name": "cm", "namespace": "default"},
                                              "data": {"other": raced[-1]}})

    objects.admit_writes(race)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}
    changed = await api.put(f"{CONFIGMAPS}/cm", json=body)
    assert changed.status == 200, await changed.text()
    assert (await changed.json())["data"] == {"k": "v"}
    assert raced == ["v"]
    read = await (await api.get(f"{CONFIGMAPS}/cm")).json()
    conditional = {**body, "metadata": read["metadata"], "data": {"k": "w"}}
    answer = await api.put(f"{CONFIGMAPS}/cm", json=conditional)
    assert (answer.status, (await answer.json())["reason"]) == (409, "Conflict")
    assert raced == ["v", "w"]
