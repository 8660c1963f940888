"""``metadata.finalizers`` as kube-apiserver checks them, on create, update, patch and apply: a
built-in kind refuses a name without a ``/`` unless it is a standard one (at its index), every
kind refuses a name that is not a qualified one (at ``metadata.finalizers``) and ``orphan`` with
``foregroundDeletion``, a custom resource (a CRD's kind, Kueue's) is only warned about an
unqualified name it adds, and an object being deleted gains none."""

from __future__ import annotations

from typing import Any

import yaml
from aiohttp.test_utils import TestClient

from .test_crd_apply import GATEWAY_SCHEMA, crd, install

Client = TestClient[Any, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
FLAVORS = "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"
GATEWAYS = "/apis/net.example.com/v1/namespaces/default/gateways"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}
QUALIFIED = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
NOT_QUALIFIED = "name is neither a standard finalizer name nor is it fully qualified"


def configmap(*finalizers: str, name: str = "c") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": list(finalizers)}}


def flavor(*finalizers: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
            "metadata": {"name": "f", "finalizers": list(finalizers)}}


async def refused(response: Any) -> tuple[str, list[tuple[str, str, str]]]:
    status = await response.json()
    assert (response.status, status["reason"]) == (422, "Invalid"), status
    return status["message"], [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


async def test_a_built_in_kind_refuses_unqualified_finalizers_as_kube(hub: Client) -> None:
    message, causes = await refused(await hub.post(CONFIGMAPS, json=configmap("example.com/ok", "foo", "Bad Name!", "orphan")))
    assert causes == [
        ("FieldValueInvalid", "metadata.finalizers", f'Invalid value: "Bad Name!": {QUALIFIED}'),
        ("FieldValueInvalid", "metadata.finalizers[1]", f'Invalid value: "foo": {NOT_QUALIFIED}'),
        ("FieldValueInvalid", "metadata.finalizers[2]", f'Invalid value: "Bad Name!": {NOT_QUALIFIED}'),
    ]
    assert message == (
        f'ConfigMap "c" is invalid: [metadata.finalizers: Invalid value: "Bad Name!": {QUALIFIED}, '
        f'metadata.finalizers[1]: Invalid value: "foo": {NOT_QUALIFIED}, '
        f'metadata.finalizers[2]: Invalid value: "Bad Name!": {NOT_QUALIFIED}]'
    )
    _, causes = await refused(await hub.post(CONFIGMAPS, json=configmap("foregroundDeletion", "orphan")))
    assert causes == [("FieldValueInvalid", "metadata.finalizers", 'Invalid value: []string{"foregroundDeletion", "orphan"}: '
                       "finalizer orphan and foregroundDeletion cannot be both set")]
    created = await hub.post(CONFIGMAPS, json=configmap("kubernetes", "orphan", "example.com/hold"))
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning", []) == []


async def test_updates_patches_and_applies_are_checked_too(hub: Client) -> None:
    stored = await (await hub.post(CONFIGMAPS, json=configmap())).json()
    unqualified = [("FieldValueInvalid", "metadata.finalizers[0]", f'Invalid value: "foo": {NOT_QUALIFIED}')]
    put = {**stored, "metadata": {**stored["metadata"], "finalizers": ["foo"]}}
    assert (await refused(await hub.put(f"{CONFIGMAPS}/c", json=put)))[1] == unqualified
    patch = await hub.patch(f"{CONFIGMAPS}/c", json={"metadata": {"finalizers": ["foo"]}}, headers=MERGE)
    assert (await refused(patch))[1] == unqualified
    apply = await hub.patch(f"{CONFIGMAPS}/c?fieldManager=me", data=yaml.safe_dump(configmap("foo")), headers=APPLY)
    assert (await refused(apply))[1] == unqualified
    applied_new = await hub.patch(f"{CONFIGMAPS}/new?fieldManager=me", data=yaml.safe_dump(configmap("foo", name="new")),
                                  headers=APPLY)
    assert (await refused(applied_new))[1] == unqualified


async def test_an_object_being_deleted_gains_no_finalizer(hub: Client) -> None:
    await hub.post(CONFIGMAPS, json=configmap("example.com/hold"))
    assert (await hub.delete(f"{CONFIGMAPS}/c")).status == 200
    held = await (await hub.get(f"{CONFIGMAPS}/c")).json()
    more = {**held, "metadata": {**held["metadata"], "finalizers": ["example.com/hold", "z.io/b", "a.io/a"]}}
    message, causes = await refused(await hub.put(f"{CONFIGMAPS}/c", json=more))
    detail = 'no new finalizers can be added if the object is being deleted, found new finalizers []string{"a.io/a", "z.io/b"}'
    assert causes == [("FieldValueForbidden", "metadata.finalizers", f"Forbidden: {detail}")]
    assert message == f'ConfigMap "c" is invalid: metadata.finalizers: Forbidden: {detail}'
    # kube's order: the checks of every kind (this one among them), then the built-in kind's own.
    unqualified = {**held, "metadata": {**held["metadata"], "finalizers": ["example.com/hold", "foo"]}}
    _, causes = await refused(await hub.put(f"{CONFIGMAPS}/c", json=unqualified))
    assert causes == [
        ("FieldValueForbidden", "metadata.finalizers",
         'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"foo"}'),
        ("FieldValueInvalid", "metadata.finalizers[1]", f'Invalid value: "foo": {NOT_QUALIFIED}'),
    ]
    released = {**held, "metadata": {**held["metadata"], "finalizers": []}}
    assert (await hub.put(f"{CONFIGMAPS}/c", json=released)).status == 200
    assert (await hub.get(f"{CONFIGMAPS}/c")).status == 404


async def test_a_custom_resource_is_warned_about_the_unqualified_finalizers_it_adds(hub: Client) -> None:
    created = await hub.post(FLAVORS, json=flavor("kueue.x-k8s.io/resource-in-use", "hold", "hold.example.com", "orphan"))
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning") == [
        '299 - "metadata.finalizers: \\"hold\\": prefer a domain-qualified finalizer name to avoid accidental '
        'conflicts with other finalizer writers"',
        '299 - "metadata.finalizers: \\"hold.example.com\\": prefer a domain-qualified finalizer name including a '
        'path (/) to avoid accidental conflicts with other finalizer writers"',
    ]
    stored = await created.json()
    again = {**stored, "metadata": {**stored["metadata"], "finalizers": ["hold", "other"]}}
    updated = await hub.put(f"{FLAVORS}/f", json=again)
    assert updated.status == 200, await updated.text()
    assert updated.headers.getall("Warning") == [
        '299 - "metadata.finalizers: \\"other\\": prefer a domain-qualified finalizer name to avoid accidental '
        'conflicts with other finalizer writers"',
    ]
    patch = await hub.patch(f"{FLAVORS}/f", json={"metadata": {"finalizers": ["Bad Name!"]}}, headers=MERGE)
    _, causes = await refused(patch)
    assert causes == [("FieldValueInvalid", "metadata.finalizers", f'Invalid value: "Bad Name!": {QUALIFIED}')]


async def test_a_crd_kind_is_warned_not_refused(hub: Client) -> None:
    await install(hub, crd("net.example.com", "Gateway", "gateways", GATEWAY_SCHEMA), GATEWAYS)
    body = {"apiVersion": "net.example.com/v1", "kind": "Gateway", "metadata": {"name": "g", "finalizers": ["hold"]}}
    created = await hub.post(GATEWAYS, json=body)
    assert created.status == 201, await created.text()
    assert created.headers.getall("Warning") == [
        '299 - "metadata.finalizers: \\"hold\\": prefer a domain-qualified finalizer name to avoid accidental '
        'conflicts with other finalizer writers"',
    ]
    both = {**body, "metadata": {"name": "h", "finalizers": ["orphan", "foregroundDeletion"]}}
    _, causes = await refused(await hub.post(GATEWAYS, json=both))
    assert causes == [("FieldValueInvalid", "metadata.finalizers", 'Invalid value: []string{"orphan", "foregroundDeletion"}: '
                       "finalizer orphan and foregroundDeletion cannot be both set")]
