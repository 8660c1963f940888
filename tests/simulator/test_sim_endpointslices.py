"""The simulated member's EndpointSlice controller: the slices a Service's pods give (pure), and
the loop that keeps them as pods come and go (a simulated cluster in virtual time)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from simulator.controllers.endpointslice import desired_slices, endpoint_ports, reconcile_endpointslices
from tests.simulator.test_sim_cluster import WHOLE, Sim, _sim

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "infer", "namespace": "default", "uid": "svc-uid", "labels": {"team": "ml"}},
    "spec": {
        "selector": {"app": "infer"},
        "ports": [
            {"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "protocol": "TCP"},
        ],
    },
}


def _pod(
    name: str,
    ip: str | None,
    *,
    ready: bool = True,
    web: int = 8080,
    deleting: bool = False,
    phase: str = "Running",
    restart: str = "Always",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "labels": labels or {"app": "infer"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if ip:
        status["podIP"] = ip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": "n1",
            "restartPolicy": restart,
            "containers": [{"name": "c", "ports": [{"name": "web", "containerPort": web}]}],
        },
        "status": status,
    }


def test_a_named_target_port_resolves_through_the_container_ports() -> None:
    assert endpoint_ports(SERVICE, _pod("a", "10.0.0.1", web=8081)) == (
        ("http", 8081, "TCP", None),
        ("metrics", 9090, "TCP", None),
    )
    unnamed = {**_pod("b", "10.0.0.2"), "spec": {"containers": [{"name": "c"}]}}
    assert endpoint_ports(SERVICE, unnamed) == (
        ("metrics", 9090, "TCP", None),
    )  # kube's FindPort fails: port left out


def test_endpoints_hold_pods_with_an_ip_and_their_conditions() -> None:
    pods = [
        _pod("b", "10.0.0.2", ready=False),
        _pod("a", "10.0.0.1"),
        _pod("c", "10.0.0.3", deleting=True),
        _pod("pending", None),
        _pod("done", "10.0.0.4", phase="Succeeded", restart="Never"),
        _pod("other", "10.0.0.5", labels={"app": "else"}),
    ]
    [(ports, endpoints)] = desired_slices(SERVICE, pods)
    assert ports == (("http", 8080, "TCP", None), ("metrics", 9090, "TCP", None))
    assert endpoints == [
        {
            "addresses": ["10.0.0.1"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": "n1",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"},
        },
        {
            "addresses": ["10.0.0.2"],
            "conditions": {"ready": False, "serving": False, "terminating": False},
            "nodeName": "n1",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": "b", "uid": "uid-b"},
        },
        {
            "addresses": ["10.0.0.3"],
            "conditions": {"ready": False, "serving": True, "terminating": True},
            "nodeName": "n1",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": "c", "uid": "uid-c"},
        },
    ]


def test_slices_split_by_ports_and_at_100_endpoints() -> None:
    pods = [_pod(f"p{i:03}", f"10.0.{i // 200}.{i % 200 + 1}") for i in range(150)] + [
        _pod("z", "10.1.0.1", web=9000)
    ]
    slices = desired_slices(SERVICE, pods)
    assert [(ports[0][1] if ports else None, len(eps)) for ports, eps in slices] == [
        (8080, 100),
        (8080, 50),
        (9000, 1),
    ]


def test_a_service_without_endpoints_keeps_one_placeholder_slice() -> None:
    changes = reconcile_endpointslices(SERVICE, [], [], rng=random.Random(1))
    [created] = changes.create
    assert created["metadata"]["generateName"] == "infer-"
    assert (
        created["metadata"]["name"].startswith("infer-")
        and len(created["metadata"]["name"]) == len("infer-") + 5
    )
    assert created["metadata"]["labels"] == {
        "team": "ml",
        "kubernetes.io/service-name": "infer",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    assert created["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "name": "infer",
            "uid": "svc-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert created["addressType"] == "IPv4" and created["endpoints"] == [] and "ports" not in created


def test_existing_slices_are_updated_in_place_and_extras_deleted() -> None:
    first = reconcile_endpointslices(SERVICE, [_pod("a", "10.0.0.1")], [], rng=random.Random(1)).create[0]
    stored = {**first, "metadata": {**first["metadata"], "resourceVersion": "7"}}
    placeholder = reconcile_endpointslices(SERVICE, [], [], rng=random.Random(2)).create[0]
    assert (
        reconcile_endpointslices(SERVICE, [_pod("a", "10.0.0.1")], [stored], rng=random.Random(3)).update
        == []
    )
    changes = reconcile_endpointslices(
        SERVICE, [_pod("a", "10.0.0.1"), _pod("b", "10.0.0.2")], [stored, placeholder], rng=random.Random(3)
    )
    [updated] = changes.update
    assert (
        updated["metadata"]["name"] == first["metadata"]["name"]
        and updated["metadata"]["resourceVersion"] == "7"
    )
    assert [e["addresses"] for e in updated["endpoints"]] == [["10.0.0.1"], ["10.0.0.2"]]
    assert changes.create == [] and changes.delete == [placeholder["metadata"]["name"]]


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    async for value in _sim([WHOLE]):
        yield value


async def _slices(sim: Sim) -> list[dict[str, Any]]:
    rt = sim.rt("discovery.k8s.io/v1", "EndpointSlice")
    return (
        await sim.objects.list(rt, namespace="default", label_selector="kubernetes.io/service-name=infer")
    ).items


async def test_a_deployments_pods_become_the_endpoints_of_its_service(sim: Sim) -> None:
    template = {
        "metadata": {"labels": {"app": "infer"}},
        "spec": {
            "containers": [{"name": "c", "image": "i", "ports": [{"name": "web", "containerPort": 8080}]}]
        },
    }
    await sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "infer", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "infer"}}, "template": template},
        }
    )
    service = await sim.create({**SERVICE, "metadata": {"name": "infer", "namespace": "default"}})

    async def ready_endpoints() -> list[str] | None:
        slices = await _slices(sim)
        ips = sorted(
            e["addresses"][0] for s in slices for e in s.get("endpoints") or [] if e["conditions"]["ready"]
        )
        return ips if len(ips) == 2 else None

    ips = await sim.until(ready_endpoints)
    pods = await sim.pods()
    assert ips == sorted(p["status"]["podIP"] for p in pods)
    [eps] = await _slices(sim)
    assert eps["ports"] == [
        {"name": "http", "port": 8080, "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "protocol": "TCP"},
    ]
    assert eps["metadata"]["ownerReferences"][0]["uid"] == service["metadata"]["uid"]

    deployment = await sim.get("apps/v1", "Deployment", "infer")
    deployment["spec"]["replicas"] = 1
    await sim.objects.update(sim.rt("apps/v1", "Deployment"), deployment)

    async def one_endpoint() -> bool:
        return [len(s.get("endpoints") or []) for s in await _slices(sim)] == [1]

    await sim.until(one_endpoint)
    await sim.objects.delete(sim.rt("v1", "Service"), namespace="default", name="infer")

    async def no_slices() -> bool:
        return not await _slices(sim)

    await sim.until(no_slices)
