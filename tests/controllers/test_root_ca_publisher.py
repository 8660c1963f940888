"""Every namespace gets the ConfigMap ``kube-root-ca.crt`` with the hub's CA, as kube-controller-manager's
root CA publisher (pkg/controller/certificates/rootcacertpublisher) keeps it: created, created again
when deleted, its data and annotation put back when changed, none in a namespace being deleted; and
no policy propagates it, each member keeping its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controlplane.apiserver.objects import ObjectStore
from controlplane.controllers import detecting
from controlplane.controllers.manager import ControllerManager
from controlplane.controllers.rootcapublisher import DESCRIPTION, DESCRIPTION_ANNOTATION, RootCAPublisher
from controlplane.objectclient import errors

from .conftest import FAST
from .fleet import eventually, get_object, node_shape, propagation_policy, put_cluster

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
ROOT_CA = "kube-root-ca.crt"


@pytest.fixture
async def publisher(objects: ObjectStore) -> AsyncIterator[RootCAPublisher]:
    running = RootCAPublisher(objects, ca_pem=CA)
    task = asyncio.create_task(running.run())
    yield running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _root_ca(objects: ObjectStore, namespace: str) -> dict[str, Any] | None:
    return await get_object(objects, "v1", "ConfigMap", ROOT_CA, namespace)


async def test_every_namespace_gets_the_root_ca_and_keeps_it(
    objects: ObjectStore, publisher: RootCAPublisher
) -> None:
    namespaces = objects.registry.require("v1", "Namespace")
    config_maps = objects.registry.require("v1", "ConfigMap")
    await objects.create(namespaces, {"metadata": {"name": "team-a"}})
    created = await eventually(lambda: _root_ca(objects, "team-a"), what="the root CA ConfigMap of team-a")
    assert created["data"] == {"ca.crt": CA.decode()}
    assert created["metadata"]["annotations"] == {DESCRIPTION_ANNOTATION: DESCRIPTION}
    assert await eventually(lambda: _root_ca(objects, "kube-system"), what="one in kube-system too")

    # Changed: its data and annotation are put back, the rest of it kept.
    changed = {
        **created,
        "data": {"ca.crt": "mine", "extra": "x"},
        "metadata": {**created["metadata"], "annotations": {"note": "n"}, "labels": {"keep": "me"}},
    }
    await objects.update(config_maps, changed)

    async def put_back() -> dict[str, Any] | None:
        found = await _root_ca(objects, "team-a")
        return found if found is not None and found["data"] == {"ca.crt": CA.decode()} else None

    restored = await eventually(put_back, what="the root CA put back")
    assert restored["metadata"]["annotations"] == {"note": "n", DESCRIPTION_ANNOTATION: DESCRIPTION}
    assert restored["metadata"]["labels"] == {"keep": "me"}

    # Deleted: created again.
    assert (await objects.delete(config_maps, namespace="team-a", name=ROOT_CA)).deleted

    async def again() -> dict[str, Any] | None:
        found = await _root_ca(objects, "team-a")
        return found if found is not None and found["metadata"]["uid"] != created["metadata"]["uid"] else None

    await eventually(again, what="the root CA created again")


async def test_a_namespace_being_deleted_gets_none(objects: ObjectStore, publisher: RootCAPublisher) -> None:
    namespaces = objects.registry.require("v1", "Namespace")
    await objects.create(
        namespaces,
        {
            "metadata": {"name": "going", "finalizers": ["example.com/hold"]},
            "spec": {"finalizers": ["example.com/hold"]},
        },
    )
    await eventually(lambda: _root_ca(objects, "going"), what="the root CA of going")
    await objects.delete(namespaces, name="going")
    config_maps = objects.registry.require("v1", "ConfigMap")
    with contextlib.suppress(errors.NotFound):  # the namespace's content went first
        await objects.delete(config_maps, namespace="going", name=ROOT_CA)
    await objects.create(namespaces, {"metadata": {"name": "later"}})
    await eventually(lambda: _root_ca(objects, "later"), what="the root CA of a namespace made after")
    assert await _root_ca(objects, "going") is None


async def test_a_refused_create_is_retried(objects: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """kube's publisher gives up only on NotFound and the NamespaceTerminating cause; any other
    refusal (here a quota's 403) is requeued with backoff."""
    create = objects.create
    refused: list[str] = []

    async def refusing_once(rt: Any, body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if (
            body["metadata"].get("name") == ROOT_CA
            and body["metadata"].get("namespace") == "team-q"
            and not refused
        ):
            refused.append("quota")
            raise errors.Forbidden(f'configmaps "{ROOT_CA}" is forbidden: exceeded quota: q')
        return await create(rt, body, *args, **kwargs)

    monkeypatch.setattr(objects, "create", refusing_once)
    running = RootCAPublisher(objects, ca_pem=CA)
    task = asyncio.create_task(running.run())
    try:
        await objects.create(objects.registry.require("v1", "Namespace"), {"metadata": {"name": "team-q"}})
        await eventually(lambda: _root_ca(objects, "team-q"), what="the root CA of team-q after a refusal")
        assert refused == ["quota"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_no_policy_propagates_the_root_ca(objects: ObjectStore) -> None:
    await put_cluster(objects, "onprem", node_shape(1))
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policy_rt, propagation_policy("all-config", kind="ConfigMap", api_version="v1"))
    config_maps = objects.registry.require("v1", "ConfigMap")
    binding_rt = objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
    async with ControllerManager(objects, settings=FAST):
        await objects.create(
            config_maps,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": ROOT_CA, "namespace": "default"},
                "data": {"ca.crt": CA.decode()},
            },
        )
        await objects.create(
            config_maps,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"a": "1"},
            },
        )
        await eventually(
            lambda: get_object(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", "settings-configmap"),
            what="the other ConfigMap bound",
        )
        listed = await objects.list(binding_rt, namespace="default")
        assert [b["metadata"]["name"] for b in listed.items] == ["settings-configmap"]


async def test_a_binding_made_for_the_root_ca_before_is_deleted(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy that bound the hub's kube-root-ca.crt before the hub kept it out: its binding goes
    when the detector next reads it, so the hub's CA reaches no member's own ConfigMap."""
    await put_cluster(objects, "onprem", node_shape(1))
    policy_rt = objects.registry.require("policy.gpufed.io/v1alpha1", "PropagationPolicy")
    await objects.create(policy_rt, propagation_policy("all-config", kind="ConfigMap", api_version="v1"))
    config_maps = objects.registry.require("v1", "ConfigMap")
    root_ca = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ROOT_CA, "namespace": "default"}}
    binding_name = f"{ROOT_CA}-configmap"
    with monkeypatch.context() as before:  # the detector as it was: the root CA like any ConfigMap
        before.setattr(detecting, "is_root_ca_config_map", lambda _obj: False)
        async with ControllerManager(objects, settings=FAST):
            await objects.create(config_maps, {**root_ca, "data": {"ca.crt": CA.decode()}})
            await eventually(
                lambda: get_object(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", binding_name),
                what="the root CA bound as it was before",
            )
    async with ControllerManager(objects, settings=FAST):

        async def gone() -> bool | None:
            found = await get_object(objects, "work.gpufed.io/v1alpha1", "ResourceBinding", binding_name)
            return True if found is None else None

        await eventually(gone, what="the root CA's binding deleted")
