"""A hollow member serves EndpointSlices as the full simulated member's controller makes them:
a Service with a selector gets slices of its Running pods (each with an IP), kept as pods are
placed and removed and as the Service changes, and followed by the agent's slice informer. The
slices are rebuilt only for the Services a change touches, from endpoints kept by pod."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.controllers.endpointslice import desired_slices
from simulator.hollow.api import HollowKubeApi
from simulator.hollow.endpointslices import HollowEndpointSlices

from .test_hollow_member import apply, deployment, member, pods

pytestmark = pytest.mark.waiting

SERVICES = "/api/v1/namespaces/ml/services"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/ml/endpointslices"
MANAGED = {"labelSelector": "endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"}


def service(name: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"tier": "web"}},
        "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


async def _slices(api: HollowKubeApi) -> list[dict[str, Any]]:
    items, _ = await api.list_all(SLICES, query=MANAGED)
    return sorted(
        items, key=lambda s: (s["metadata"]["labels"]["kubernetes.io/service-name"], -len(s["endpoints"]))
    )


async def _namespace(api: HollowKubeApi) -> None:
    await api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})


async def test_a_services_slices_follow_its_pods() -> None:
    hollow = member(nodes=40)
    api = HollowKubeApi(hollow)
    await _namespace(api)
    await api.create(SERVICES, service("infer", "infer"))
    [placeholder] = await _slices(api)
    assert placeholder["endpoints"] == [] and "ports" not in placeholder

    await apply(api, deployment("infer", 150, 1))
    running = [p for p in await pods(api) if p["metadata"]["labels"].get("app") == "infer"]
    assert len({p["status"]["podIP"] for p in running}) == 150
    slices = await _slices(api)
    # What the full member's builder makes of the same pods.
    assert [(s["ports"], s["endpoints"]) for s in slices] == [
        ([{"name": "", "port": 8080, "protocol": "TCP"}], endpoints)
        for _, endpoints in desired_slices(service("infer", "infer"), running)
    ]
    assert [len(s["endpoints"]) for s in slices] == [100, 50]
    first = slices[0]
    assert first["metadata"]["name"].startswith("infer-") and first["metadata"]["generateName"] == "infer-"
    assert first["metadata"]["labels"] == {
        "tier": "web",
        "kubernetes.io/service-name": "infer",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Service"

    await apply(api, deployment("infer", 30, 1))
    assert [len(s["endpoints"]) for s in await _slices(api)] == [30]

    # A slice of the controller's deleted by hand is written again.
    [kept] = await _slices(api)
    await api.delete(f"{SLICES}/{kept['metadata']['name']}")
    assert [len(s["endpoints"]) for s in await _slices(api)] == [30]

    await api.delete(f"{SERVICES}/infer")
    assert await _slices(api) == []


async def test_the_agents_slice_informer_sees_them_through_a_watch() -> None:
    hollow = member(nodes=10)
    api = HollowKubeApi(hollow)
    await _namespace(api)
    await api.create(SERVICES, service("infer", "infer"))
    _, rv = await api.list_all(SLICES, query=MANAGED)
    await apply(api, deployment("infer", 3, 1))
    events = []
    async for event in api.watch(SLICES, resource_version=rv, timeout_seconds=30, query=MANAGED):
        events.append((event["type"], len(event["object"].get("endpoints") or [])))
        if len(events) == 2:
            break
    # The three pods placed at once: one slice of them, and the placeholder gone.
    assert events == [("ADDED", 3), ("DELETED", 0)]


def test_a_pod_change_rebuilds_only_the_services_that_select_it() -> None:
    tracker = HollowEndpointSlices(seed=1)
    web = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "uid": "w"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
    }
    db = {
        **web,
        "metadata": {"name": "db", "uid": "d"},
        "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]},
    }
    tracker.service_changed("ml", "web", web)
    tracker.service_changed("ml", "db", db)
    assert [key for key, _ in tracker.changes()] == [("ml", "db"), ("ml", "web")]
    pod = {
        "metadata": {"name": "web-1", "namespace": "ml", "labels": {"app": "web"}},
        "spec": {"nodeName": "n"},
        "status": {"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    tracker.pod_changed("ml", "web-1", {"app": "web"}, pod)
    [(key, changes)] = tracker.changes()
    assert key == ("ml", "web")
    [created] = changes.create  # the placeholder (no ports) gives way to a slice with ports
    assert created["endpoints"][0]["addresses"] == ["10.0.0.1"] and len(changes.delete) == 1
    ready = {**pod, "status": {**pod["status"], "conditions": [{"type": "Ready", "status": "False"}]}}
    tracker.pod_changed("ml", "web-1", {"app": "web"}, ready)
    [(_, changes)] = tracker.changes()
    assert [u["endpoints"][0]["conditions"]["ready"] for u in changes.update] == [False]
    tracker.pod_changed("ml", "web-1", {"app": "web"}, ready)  # the same: nothing to write
    assert tracker.changes() == []
    tracker.pod_changed("ml", "web-1", {"app": "web"}, None)
    [(key, changes)] = tracker.changes()
    assert key == ("ml", "web") and changes.create[0]["endpoints"] == [] and len(changes.delete) == 1
    assert [obj["endpoints"] for obj in tracker.owned[("ml", "web")].values()] == [[]]


async def test_a_service_written_again_unchanged_walks_no_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent re-applies its Services; one written again as it was keeps its slices, without
    reading the member's pods again (a changed one is rebuilt)."""
    hollow = member(nodes=8)
    api = HollowKubeApi(hollow)
    await _namespace(api)
    await api.create(SERVICES, service("infer", "infer"))
    await apply(api, deployment("infer", 4, 1))
    before = await _slices(api)
    rebuilt: list[str] = []
    changed = hollow.endpoint_slices.service_changed
    monkeypatch.setattr(
        hollow.endpoint_slices,
        "service_changed",
        lambda ns, name, *rest: (rebuilt.append(name), changed(ns, name, *rest)),
    )
    stored = await api.get(f"{SERVICES}/infer")
    await api.replace(f"{SERVICES}/infer", stored)
    assert rebuilt == [] and await _slices(api) == before
    stored = await api.get(f"{SERVICES}/infer")
    stored["spec"]["ports"] = [{"port": 81, "targetPort": 8080}]
    await api.replace(f"{SERVICES}/infer", stored)
    assert rebuilt == ["infer"]
