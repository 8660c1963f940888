"""The hub's own controllers read a CRD's objects in the version they watch, converted by its
conversion webhook as the HTTP API converts them: a real hub (its leader's controllers), a real
HTTPS conversion webhook, CronTabs stored as v1 (``spec.cronSpec``) while the storage version
moves to v2 (``spec.schedule``). The Work a member gets carries v2, the binding is kept, and a
webhook that fails holds the object back (retried) rather than sending it in v1's shape."""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.constants import LABEL_BINDING
from controlplane.apiserver import errors
from controlplane.apiserver.crd.client import ConvertedObjects
from controlplane.apiserver.crd.converted import WebhookConversions
from controlplane.apiserver.crd.converting import ConversionFailed
from controlplane.apiserver.webhooks.calling import WebhookClient
from controlplane.hub import Hub
from controlplane.objectclient import WatchEventType
from tests.apiserver import test_admission_webhooks as admission_webhooks
from tests.apiserver.test_admission_webhooks import Api
from tests.apiserver.test_crd_conversion_webhook import CRDS, V1, V2, crontab, served
from tests.controllers.fleet import eventually, node_shape, put_cluster
from tests.webhookserver import WebhookServer

hub, api, server = admission_webhooks.hub, admission_webhooks.api, admission_webhooks.server
CRD = f"{CRDS}/crontabs.stable.example.com"
GROUP = "stable.example.com"
BINDING = "nightly-crontab"
#: What the controllers would log reading a v1-shaped object through v2, or losing track of it.
WRONG_SHAPE = ("does not match the expected API version", "cannot be handled", "is gone; deleting its binding")


def _policy(*versions: str) -> dict[str, Any]:
    """Selects CronTabs by ``versions`` (default both: v1 while it is the storage version, v2 after)."""
    return {
        "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "crontabs", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": f"{GROUP}/{v}", "kind": "CronTab"} for v in versions or ("v1", "v2")],
            "placement": {"clusterAffinity": {"clusterNames": ["onprem"]}, "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
        },
    }


async def _store_as_v2(api: Api, client: dict[str, Any]) -> None:
    """Move the storage version to v2, converting through ``client``; wait until the hub does."""
    code, current, _ = await api.call("GET", CRD)
    assert code == 200, current
    changed = copy.deepcopy(current)
    for version in changed["spec"]["versions"]:
        version["storage"] = version["name"] == "v2"
    changed["spec"]["conversion"]["webhook"]["clientConfig"] = client
    code, updated, _ = await api.call("PUT", CRD, changed)
    assert code == 200, updated

    async def moved() -> bool:
        rt = api.hub.objects.registry.get(GROUP, "v2", "crontabs") if api.hub.objects else None
        webhook = rt.custom.conversion_webhook if rt is not None and rt.custom is not None else None
        return webhook is not None and webhook.url == client["url"]  # v1 objects remain: v2 reads convert

    await eventually(moved, what="the hub to store crontabs as v2, converting v1 objects")


async def _manifest(hub: Hub) -> dict[str, Any] | None:
    assert hub.objects is not None
    work_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "Work")
    listed = await hub.objects.list(work_rt, namespace="gpufed-es-onprem", label_selector=f"{LABEL_BINDING}={BINDING}")
    return listed.items[0]["spec"]["workload"]["manifests"][0] if listed.items else None


async def _binding_uid(hub: Hub) -> str:
    assert hub.objects is not None
    rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
    return str((await hub.objects.get(rt, namespace="default", name=BINDING))["metadata"]["uid"])


async def test_the_controllers_send_a_crontab_stored_as_v1_in_v2_once_v2_is_stored(
    api: Api, server: WebhookServer, caplog: pytest.LogCaptureFixture
) -> None:
    hub = api.hub
    assert hub.objects is not None
    await eventually(lambda: _started(hub), what="the leader's controllers")
    await put_cluster(hub.objects, "onprem", node_shape(2, gpus=8), report_time=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    await served(api, server.client("/convert"))  # its status schema has no conditions: the detector writes none
    code, created, _ = await api.call("POST", "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies", _policy())
    assert code == 201, created
    code, created, _ = await api.call("POST", V1, crontab("v1", "nightly", cronSpec="1 * * * *"))
    assert code == 201, created

    async def in_v1() -> dict[str, Any] | None:
        manifest = await _manifest(hub)
        return manifest if manifest is not None and manifest["apiVersion"] == f"{GROUP}/v1" else None

    manifest = await eventually(in_v1, what="the Work carrying the v1 CronTab")
    assert (manifest["spec"]["cronSpec"], "schedule" in manifest["spec"]) == ("1 * * * *", False)
    uid = await _binding_uid(hub)

    # v2 becomes the storage version, its webhook failing: the controllers' v2 reads fail with
    # kube's error and are retried; the member keeps the v1 copy, nothing goes out in v1's shape.
    caplog.set_level(logging.INFO)
    await _store_as_v2(api, server.client("/convert-fail"))
    await eventually(lambda: _received(server, "/convert-fail"), what="the controllers to ask the failing webhook")
    assert (await _manifest(hub) or {})["spec"]["cronSpec"] == "1 * * * *"
    # Logged once with kube's message (the informer retries quietly until the webhook is back).
    failed = [r.getMessage() for r in caplog.records if "cronSpec cannot be parsed" in r.getMessage()]
    assert failed == [
        "watch of crontabs interrupted: conversion webhook for stable.example.com/v2, Kind=CronTabList failed: "
        "cronSpec cannot be parsed; retrying"
    ]

    # The webhook converts again: the controllers read the object as v2 and the member gets v2.
    await served(api, server.client("/convert"))

    async def in_v2() -> dict[str, Any] | None:
        manifest = await _manifest(hub)
        return manifest if manifest is not None and manifest["apiVersion"] == f"{GROUP}/v2" else None

    manifest = await eventually(in_v2, what="the Work carrying the CronTab as v2")
    assert (manifest["spec"]["schedule"], "cronSpec" in manifest["spec"]) == ("1 * * * *", False)
    assert manifest["metadata"]["labels"]["converted-to"] == "v2"  # the webhook's conversion, not a relabel
    assert await _binding_uid(hub) == uid  # the same binding: the workload was never taken for gone
    binding_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")

    async def bound_as_v2() -> bool:
        binding = await hub.objects.get(binding_rt, namespace="default", name=BINDING)
        return bool(binding["spec"]["resource"]["apiVersion"] == f"{GROUP}/v2")

    await eventually(bound_as_v2, what="the binding to name the CronTab's v2")
    wrong = [r.getMessage() for r in caplog.records if any(text in r.getMessage() for text in WRONG_SHAPE)]
    assert wrong == []


async def _started(hub: Hub) -> bool:
    return hub.controllers is not None and hub.controllers.started.is_set()


async def _received(server: WebhookServer, path: str) -> bool:
    return bool(server.received[path])


async def test_the_in_process_client_converts_reads_watches_and_writes(api: Api, server: WebhookServer) -> None:
    """:class:`ConvertedObjects` as the controllers use it: a v2 read of a v1-stored object is the
    webhook's v2, a status write through v2 stores the object whole as v2, and a watch's events
    come converted; a failing webhook is kube's 500, never the stored shape."""
    hub = api.hub
    assert hub.objects is not None
    await served(api, server.client("/convert"))
    code, created, _ = await api.call("POST", V1, crontab("v1", "hourly", cronSpec="0 * * * *"))
    assert code == 201, created
    await _store_as_v2(api, server.client("/convert"))
    registry = hub.objects.registry
    v2 = registry.require(f"{GROUP}/v2", "CronTab")
    client = WebhookClient(hub.objects)
    try:
        objects = ConvertedObjects(hub.objects, WebhookConversions(client, registry))
        got = await objects.get(v2, namespace="default", name="hourly")
        assert (got["apiVersion"], got["spec"]) == (f"{GROUP}/v2", {"schedule": "0 * * * *"})
        assert (await hub.objects.get(v2, namespace="default", name="hourly"))["apiVersion"] == f"{GROUP}/v1"

        watch = objects.watch(v2, namespace="default", resource_version=got["metadata"]["resourceVersion"])
        written = await objects.update_status(v2, {**got, "status": {"replicas": 2}})
        assert (written["apiVersion"], written["spec"], written["status"]) == (
            f"{GROUP}/v2", {"schedule": "0 * * * *"}, {"replicas": 2}
        )
        stored = await hub.objects.get(v2, namespace="default", name="hourly")
        assert (stored["apiVersion"], stored["spec"], stored["status"]) == (
            f"{GROUP}/v2", {"schedule": "0 * * * *"}, {"replicas": 2}
        )
        event = await anext(aiter(watch))
        assert (event.type, event.object["apiVersion"], event.object["spec"]) == (
            WatchEventType.MODIFIED, f"{GROUP}/v2", {"schedule": "0 * * * *"}
        )
        await watch.aclose()  # type: ignore[attr-defined]

        # v1 reads of it (now stored as v2) convert back; through a failing webhook they fail.
        v1 = registry.require(f"{GROUP}/v1", "CronTab")
        listed = await objects.list(v1, namespace="default")
        assert [(o["apiVersion"], o["spec"]) for o in listed.items] == [(f"{GROUP}/v1", {"cronSpec": "0 * * * *"})]
        await _store_as_v2(api, server.client("/convert-fail"))
        v1 = registry.require(f"{GROUP}/v1", "CronTab")
        with pytest.raises(ConversionFailed) as caught:
            await objects.get(v1, namespace="default", name="hourly")
        assert caught.value.message == (
            f"conversion webhook for {GROUP}/v2, Kind=CronTab failed: cronSpec cannot be parsed"
        )
        assert isinstance(caught.value, errors.ApiError)
    finally:
        await client.close()


async def test_a_selector_naming_a_served_version_other_than_the_storage_one_selects_the_kind(
    api: Api, server: WebhookServer
) -> None:
    """A policy naming only v1 while v2 is the storage version claims the CronTabs, and an
    OverridePolicy naming v1 applies: a selector names the kind in any served version. The objects
    are bound and sent in the storage version."""
    hub = api.hub
    assert hub.objects is not None
    await eventually(lambda: _started(hub), what="the leader's controllers")
    await put_cluster(hub.objects, "onprem", node_shape(2, gpus=8), report_time=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    await served(api, server.client("/convert"))
    await _store_as_v2(api, server.client("/convert"))
    code, created, _ = await api.call("POST", "/apis/policy.gpufed.io/v1alpha1/namespaces/default/propagationpolicies", _policy("v1"))
    assert code == 201, created
    override = {
        "apiVersion": "policy.gpufed.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "crontabs", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": f"{GROUP}/v1", "kind": "CronTab"}],
            "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"tier": "gpu"}}]}}],
        },
    }
    code, created, _ = await api.call("POST", "/apis/policy.gpufed.io/v1alpha1/namespaces/default/overridepolicies", override)
    assert code == 201, created
    code, created, _ = await api.call("POST", V2, crontab("v2", "nightly", schedule="5 * * * *"))
    assert code == 201, created

    async def overridden() -> dict[str, Any] | None:
        manifest = await _manifest(hub)
        return manifest if manifest is not None and manifest["metadata"].get("labels", {}).get("tier") == "gpu" else None

    manifest = await eventually(overridden, what="the Work carrying the CronTab with the override's label")
    assert (manifest["apiVersion"], manifest["spec"]["schedule"]) == (f"{GROUP}/v2", "5 * * * *")
    binding_rt = hub.objects.registry.require("work.gpufed.io/v1alpha1", "ResourceBinding")
    binding = await hub.objects.get(binding_rt, namespace="default", name=BINDING)
    assert binding["spec"]["resource"]["apiVersion"] == f"{GROUP}/v2"
    assert binding["spec"]["policy"]["name"] == "crontabs"
