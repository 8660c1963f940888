"""One set of policies under two group names: a PropagationPolicy (and the other three policy
kinds) written as ``policy.karmada.io`` or ``policy.gpufed.io`` is one object, stored once and
served under either group with that group's apiVersion (reads, lists, watches, writes, deletes),
as kube serves an Event under ``v1`` and ``events.k8s.io``. Policies stored under the Karmada
group's own key before the two became one set are moved at startup, and none is lost."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apiserver import codec, errors
from controlplane.apiserver.app import create_app
from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.gpufed import gpufed_resources
from controlplane.apiserver.kinds.workloads import workload_resources
from controlplane.apiserver.objects import ObjectStore
from controlplane.apiserver.objects.aliases import MOVED_FROM_ANNOTATION, own_key_prefix
from controlplane.apiserver.objects.values import WatchEventType
from controlplane.apiserver.resources import Registry
from controlplane.storage import Store

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

GPUFED = "policy.gpufed.io/v1alpha1"
KARMADA = "policy.karmada.io/v1alpha1"
#: What Karmada's PropagationPolicy CRD fills in a spec that omits it.
KARMADA_SPEC_DEFAULTS = {"conflictResolution": "Abort", "preemption": "Never", "schedulerName": "default-scheduler"}
KINDS = ("PropagationPolicy", "ClusterPropagationPolicy", "OverridePolicy", "ClusterOverridePolicy")


def registry() -> Registry:
    return Registry(core_resources(), workload_resources(), gpufed_resources())


def policy(kind: str, name: str, *, api_version: str = KARMADA, priority: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if not kind.startswith("Cluster"):
        meta["namespace"] = "default"
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]}
    if "Propagation" in kind:
        spec["priority"] = priority
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def ns_of(kind: str) -> str | None:
    return None if kind.startswith("Cluster") else "default"


@pytest.fixture
async def objects_of(store: Store) -> ObjectStore:
    objects = ObjectStore(store, registry())
    await objects.bootstrap()
    return objects


@pytest.mark.parametrize("kind", KINDS)
async def test_one_object_served_under_both_groups(objects_of: ObjectStore, store: Store, kind: str) -> None:
    gpufed = objects_of.registry.require(GPUFED, kind)
    karmada = objects_of.registry.require(KARMADA, kind)
    namespace = ns_of(kind)
    created = await objects_of.create(karmada, policy(kind, "shared"))
    assert created["apiVersion"] == KARMADA

    through_gpufed = await objects_of.get(gpufed, namespace=namespace, name="shared")
    assert through_gpufed["apiVersion"] == GPUFED
    assert through_gpufed["metadata"]["uid"] == created["metadata"]["uid"]
    encoded = json.loads(await objects_of.get_encoded(gpufed, namespace=namespace, name="shared"))
    assert encoded["apiVersion"] == GPUFED
    assert encoded["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # Stored once, under gpufed's group and with its apiVersion.
    raw = await store.get(gpufed.key(namespace=namespace, name="shared"))
    assert json.loads(raw.value)["apiVersion"] == GPUFED
    assert (await store.list(own_key_prefix(karmada))).items == []

    for rt, api_version in ((gpufed, GPUFED), (karmada, KARMADA)):
        listed = await objects_of.list(rt)
        assert [(o["apiVersion"], o["metadata"]["name"]) for o in listed.items] == [(api_version, "shared")]
        encoded_list = await objects_of.list_encoded(rt)
        assert [json.loads(item)["apiVersion"] for item in encoded_list.items()] == [api_version]

    # The same name through the other group is the same object: AlreadyExists.
    with pytest.raises(errors.AlreadyExists):
        await objects_of.create(gpufed, policy(kind, "shared", api_version=GPUFED))

    # An update through gpufed's group changes what Karmada's group shows.
    through_gpufed["spec"]["resourceSelectors"][0]["name"] = "api"
    await objects_of.update(gpufed, through_gpufed)
    again = await objects_of.get(karmada, namespace=namespace, name="shared")
    assert again["apiVersion"] == KARMADA
    assert again["spec"]["resourceSelectors"][0]["name"] == "api"

    # Deleting through gpufed's group removes the object written as Karmada's.
    await objects_of.delete(gpufed, namespace=namespace, name="shared")
    with pytest.raises(errors.NotFound):
        await objects_of.get(karmada, namespace=namespace, name="shared")


async def test_watch_through_either_group_sees_writes_through_the_other(objects_of: ObjectStore) -> None:
    gpufed = objects_of.registry.require(GPUFED, "PropagationPolicy")
    karmada = objects_of.registry.require(KARMADA, "PropagationPolicy")
    start = (await objects_of.list(gpufed)).resource_version
    watches = {rt.api_version: objects_of.watch(rt, namespace="default", resource_version=start) for rt in (gpufed, karmada)}
    try:
        await objects_of.create(karmada, policy("PropagationPolicy", "a"))
        await objects_of.create(gpufed, policy("PropagationPolicy", "b", api_version=GPUFED))
        await objects_of.delete(karmada, namespace="default", name="b")
        for api_version, events in watches.items():
            seen = []
            async with asyncio.timeout(20):
                for _ in range(3):
                    event = await anext(events)
                    seen.append((event.type, event.object["apiVersion"], event.object["metadata"]["name"]))
            assert seen == [
                (WatchEventType.ADDED, api_version, "a"),
                (WatchEventType.ADDED, api_version, "b"),
                (WatchEventType.DELETED, api_version, "b"),
            ]
    finally:
        for events in watches.values():
            await events.aclose()  # type: ignore[attr-defined]


async def _store_as_before(store: Store, kind: str, name: str, *, api_version: str = KARMADA) -> dict[str, Any]:
    """Write ``name`` as the hub stored policies before the two groups were one set: under
    its own group's key."""
    rt = registry().require(api_version, kind)
    obj = policy(kind, name, api_version=api_version)
    obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp="2026-01-01T00:00:00Z", generation=1)
    namespace = ns_of(kind)
    key = f"{own_key_prefix(rt)}{namespace}/{name}" if namespace else f"{own_key_prefix(rt)}{name}"
    await store.create(key, codec.encode(obj))
    return obj


async def test_policies_stored_under_the_karmada_key_are_moved_at_startup(store: Store) -> None:
    old = {kind: await _store_as_before(store, kind, "legacy") for kind in KINDS}
    # A name both groups used: both objects are kept; the Karmada one moves under a free name.
    taken = await _store_as_before(store, "PropagationPolicy", "both", api_version=GPUFED)
    clashing = await _store_as_before(store, "PropagationPolicy", "both")
    # A move an earlier start began and did not finish: the object is at both keys.
    half = await _store_as_before(store, "OverridePolicy", "half")
    gpufed_op = registry().require(GPUFED, "OverridePolicy")
    await store.create(gpufed_op.key(namespace="default", name="half"), codec.encode({**half, "apiVersion": GPUFED}))

    objects = ObjectStore(store, registry())
    await objects.bootstrap()
    await objects.bootstrap()  # idempotent
    for kind, obj in old.items():
        for api_version in (GPUFED, KARMADA):
            found = await objects.get(objects.registry.require(api_version, kind), namespace=ns_of(kind), name="legacy")
            assert found["apiVersion"] == api_version
            assert found["metadata"]["uid"] == obj["metadata"]["uid"]
            # Read back with the CRD's structural defaults, as kube defaults what it decodes
            # (the webhook's defaults, such as the selectors' namespace, are a write's only).
            defaulted = {**obj["spec"], **(KARMADA_SPEC_DEFAULTS if "Propagation" in kind else {})}
            assert found["spec"] == defaulted
        assert (await store.list(own_key_prefix(objects.registry.require(KARMADA, kind)))).items == []

    pp = objects.registry.require(KARMADA, "PropagationPolicy")
    names = {o["metadata"]["name"]: o for o in (await objects.list(pp, namespace="default")).items}
    assert set(names) == {"legacy", "both", "both-policy"}
    assert names["both"]["metadata"]["uid"] == taken["metadata"]["uid"]
    renamed = names["both-policy"]
    assert renamed["metadata"]["uid"] == clashing["metadata"]["uid"]
    assert renamed["metadata"]["annotations"][MOVED_FROM_ANNOTATION] == f"{KARMADA} default/both"
    ops = (await objects.list(gpufed_op, namespace="default")).items
    assert sorted(o["metadata"]["name"] for o in ops) == ["half", "legacy"]


# --- over HTTP, with the real kubectl ------------------------------------------------------


@pytest.fixture
def api_registry() -> Registry:
    """The ``objects``, ``server_url`` and ``kubeconfig`` fixtures serve the hub's policy kinds."""
    return registry()


async def test_http_get_list_and_watch_answer_with_the_asked_group(objects: ObjectStore) -> None:
    app = create_app(objects, objects.registry)
    async with TestClient(TestServer(app)) as client:
        created = await client.post(
            "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies",
            json=policy("PropagationPolicy", "p"),
        )
        assert created.status == 201, await created.text()
        assert (await created.json())["apiVersion"] == KARMADA
        for api_version in (GPUFED, KARMADA):
            base = f"/apis/{api_version}/namespaces/default/propagationpolicies"
            got = await client.get(f"{base}/p")
            assert (await got.json())["apiVersion"] == api_version
            listed = await (await client.get(base)).json()
            assert [i["apiVersion"] for i in listed["items"]] == [api_version]
            assert listed["apiVersion"] == api_version and listed["kind"] == "PropagationPolicyList"
        clash = await client.post(
            "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies",
            json=policy("PropagationPolicy", "p", api_version=GPUFED),
        )
        assert clash.status == 409
        body = await clash.json()
        assert body["reason"] == "AlreadyExists"
        async with client.get(
            "/apis/policy.gpufed.io/v1alpha1/propagationpolicies", params={"watch": "1", "timeoutSeconds": "5"}
        ) as watch:
            line = await asyncio.wait_for(watch.content.readline(), 20)
        event = json.loads(line)
        assert event["type"] == "ADDED" and event["object"]["apiVersion"] == GPUFED


@needs_kubectl
async def test_kubectl_sees_one_set_of_policies(kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "policies.yaml"
    manifest.write_text(yaml.safe_dump_all([
        policy("PropagationPolicy", "from-karmada", priority=3),
        policy("PropagationPolicy", "from-gpufed", api_version=GPUFED, priority=1),
    ]))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert code == 0, err
    assert out.splitlines() == [
        "propagationpolicy.policy.karmada.io/from-karmada created",
        "propagationpolicy.policy.gpufed.io/from-gpufed created",
    ]
    for resource in ("pp", "pp.policy.gpufed.io", "propagationpolicies.policy.karmada.io"):
        code, out, err = await kubectl(kubeconfig, "get", resource, "-A")
        assert code == 0, err
        rows = [line.split()[:4] for line in out.splitlines()[1:]]
        assert rows == [["default", "from-gpufed", "Abort", "1"], ["default", "from-karmada", "Abort", "3"]], resource
    code, out, err = await kubectl(kubeconfig, "get", "pp", "from-karmada", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["apiVersion"] == GPUFED

    # Same name, other group: the object exists.
    clash = policy("PropagationPolicy", "from-karmada", api_version=GPUFED)
    manifest.write_text(yaml.safe_dump(clash))
    code, _, err = await kubectl(kubeconfig, "create", "-f", str(manifest))
    assert code != 0
    assert 'propagationpolicies.policy.gpufed.io "from-karmada" already exists' in err

    code, out, err = await kubectl(kubeconfig, "delete", "pp", "--all")
    assert code == 0, err
    assert sorted(out.splitlines()) == [
        'propagationpolicy.policy.gpufed.io "from-gpufed" deleted',
        'propagationpolicy.policy.gpufed.io "from-karmada" deleted',
    ]
    code, out, err = await kubectl(kubeconfig, "get", "propagationpolicies.policy.karmada.io", "-A")
    assert code == 0, err
    assert "No resources found" in err
