"""HorizontalPodAutoscaler served at autoscaling/v1 and autoscaling/v2, one stored object, as kube
serves it: every read, write, patch, list, watch and table of either version converts (through the
hub's HTTP API on a real etcd, and with the real kubectl, whose ``kubectl autoscale`` posts an
autoscaling/v1 HPA as protobuf)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from controlplane.apis.kube.convert_autoscaling import CURRENT_METRICS_ANNOTATION, METRICS_ANNOTATION
from controlplane.controllers.workloads import propagatable_types
from controlplane.hub import hub_registry

from .test_kube_validation import Client, hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, kubectl_streaming, needs_kubectl

Obj = dict[str, Any]
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def hpa_v1(name: str = "web", **spec: Any) -> Obj:
    return {
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"scaleTargetRef": REF, "maxReplicas": 5, **spec},
    }


def hpa_v2(name: str = "web", **spec: Any) -> Obj:
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"scaleTargetRef": REF, "maxReplicas": 5, **spec},
    }


def cpu(utilization: int) -> Obj:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}}


MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}


async def ok(response: Any, status: int = 200) -> Obj:
    body: Obj = await response.json()
    assert response.status == status, body
    return body


async def test_one_object_served_in_both_versions(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(V1, json=hpa_v1(targetCPUUtilizationPercentage=70)), 201)
    assert created["apiVersion"] == "autoscaling/v1"
    assert created["spec"] == {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}
    assert created["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    stored = await ok(await hub.get(f"{V2}/web"))
    assert stored["apiVersion"] == "autoscaling/v2"
    assert stored["spec"]["metrics"] == [cpu(70)]
    assert "annotations" not in stored["metadata"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert (await ok(await hub.get(f"{V1}/web")))["spec"] == created["spec"]
    listed = await ok(await hub.get(V1))
    assert listed["apiVersion"] == "autoscaling/v1" and listed["kind"] == "HorizontalPodAutoscalerList"
    assert [i["apiVersion"] for i in listed["items"]] == ["autoscaling/v1"]


async def test_a_v1_hpa_without_a_target_is_stored_with_kubes_80_percent(hub: Client) -> None:  # noqa: F811
    created = await ok(await hub.post(V1, json=hpa_v1()), 201)
    assert created["spec"]["targetCPUUtilizationPercentage"] == 80
    assert (await ok(await hub.get(f"{V2}/web")))["spec"]["metrics"] == [cpu(80)]


async def test_v1_is_validated_as_kube_validates_it_at_v2_paths(hub: Client) -> None:  # noqa: F811
    response = await hub.post(V1, json=hpa_v1(targetCPUUtilizationPercentage=0))
    status = await ok(response, 422)
    assert status["message"] == (
        'HorizontalPodAutoscaler.autoscaling "web" is invalid: '
        "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"
    )
    assert status["details"]["causes"][0]["field"] == "spec.metrics[0].resource.target.averageUtilization"
    assert (await hub.get(f"{V2}/web")).status == 404


async def test_v2_metrics_v1_cannot_say_are_read_through_annotations(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(V2, json=hpa_v2(metrics=[MEMORY, cpu(60)])), 201)
    read = await ok(await hub.get(f"{V1}/web"))
    assert read["spec"]["targetCPUUtilizationPercentage"] == 60
    assert read["metadata"]["annotations"] == {
        METRICS_ANNOTATION: '[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1Gi"}}]',
    }
    # A v1 update of what it read keeps the memory metric (kube puts the CPU target last).
    read["spec"]["maxReplicas"] = 8
    updated = await ok(await hub.put(f"{V1}/web", json=read))
    assert "generation" not in updated["metadata"]  # kube (v1.32) keeps none for an HPA
    stored = await ok(await hub.get(f"{V2}/web"))
    assert stored["spec"]["metrics"] == [MEMORY, cpu(60)]
    assert stored["spec"]["maxReplicas"] == 8
    assert "annotations" not in stored["metadata"]


async def test_the_four_patch_types_through_v1(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(V2, json=hpa_v2(metrics=[MEMORY, cpu(60)])), 201)
    patches = [
        ("application/merge-patch+json", {"spec": {"targetCPUUtilizationPercentage": 65}}),
        ("application/strategic-merge-patch+json", {"spec": {"maxReplicas": 7}}),
        ("application/json-patch+json", [{"op": "replace", "path": "/spec/minReplicas", "value": 2}]),
    ]
    for content_type, patch in patches:
        patched = await ok(await hub.patch(f"{V1}/web", data=json.dumps(patch), headers={"Content-Type": content_type}))
        assert patched["apiVersion"] == "autoscaling/v1"
    stored = await ok(await hub.get(f"{V2}/web"))
    assert stored["spec"]["metrics"] == [MEMORY, cpu(65)]
    assert (stored["spec"]["minReplicas"], stored["spec"]["maxReplicas"]) == (2, 7)
    applied = await ok(await hub.patch(
        f"{V1}/web", params={"fieldManager": "ci", "force": "true"},
        data=yaml.safe_dump(hpa_v1(targetCPUUtilizationPercentage=75, maxReplicas=9)),
        headers={"Content-Type": "application/apply-patch+yaml"},
    ))
    assert applied["spec"]["targetCPUUtilizationPercentage"] == 75
    assert [e["apiVersion"] for e in applied["metadata"]["managedFields"] if e["manager"] == "ci"] == ["autoscaling/v1"]
    assert (await ok(await hub.get(f"{V2}/web")))["spec"]["metrics"] == [MEMORY, cpu(75)]


async def test_status_through_v1(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(V1, json=hpa_v1(targetCPUUtilizationPercentage=70)), 201)
    read = await ok(await hub.get(f"{V1}/web"))
    read["status"] = {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 55}
    written = await ok(await hub.put(f"{V1}/web/status", json=read))
    assert written["status"] == read["status"]
    status = (await ok(await hub.get(f"{V2}/web")))["status"]
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55}}}]
    assert (status["currentReplicas"], status["desiredReplicas"]) == (2, 3)
    # The main resource keeps the stored status, whatever a v1 body says of it (annotations included).
    again = await ok(await hub.get(f"{V1}/web"))
    assert CURRENT_METRICS_ANNOTATION in again["metadata"]["annotations"]
    again["status"] = {"currentReplicas": 9, "desiredReplicas": 9}
    del again["metadata"]["annotations"]
    again["spec"]["maxReplicas"] = 6
    await ok(await hub.put(f"{V1}/web", json=again))
    after = (await ok(await hub.get(f"{V2}/web")))["status"]
    assert after["currentMetrics"] == status["currentMetrics"]
    assert after["currentReplicas"] == 2


async def test_table_watch_and_delete_through_v1(hub: Client) -> None:  # noqa: F811
    await ok(await hub.post(V2, json=hpa_v2(metrics=[MEMORY, cpu(60)])), 201)
    table = await ok(await hub.get(V1, headers={"Accept": TABLE}))
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"]
    assert table["rows"][0]["cells"][1:6] == ["Deployment/web", "memory: <unknown>/1Gi, cpu: <unknown>/60%", 1, 5, 0]
    watch = await hub.get(V1, params={"watch": "true", "resourceVersion": "0"})
    first = json.loads(await asyncio.wait_for(watch.content.readline(), 10))
    assert (first["type"], first["object"]["apiVersion"]) == ("ADDED", "autoscaling/v1")
    await ok(await hub.patch(f"{V2}/web", json={"spec": {"maxReplicas": 4}}, headers={"Content-Type": "application/merge-patch+json"}))
    modified = json.loads(await asyncio.wait_for(watch.content.readline(), 10))
    assert (modified["type"], modified["object"]["spec"]["maxReplicas"]) == ("MODIFIED", 4)
    assert modified["object"]["spec"]["targetCPUUtilizationPercentage"] == 60
    deleted = await ok(await hub.delete(f"{V1}/web"))
    assert (deleted["kind"], deleted["status"]) == ("Status", "Success")
    gone = json.loads(await asyncio.wait_for(watch.content.readline(), 10))
    assert (gone["type"], gone["object"]["apiVersion"]) == ("DELETED", "autoscaling/v1")
    watch.close()


async def test_discovery_prefers_v2_and_lists_v1(hub: Client) -> None:  # noqa: F811
    groups = (await ok(await hub.get("/apis")))["groups"]
    autoscaling = next(g for g in groups if g["name"] == "autoscaling")
    assert [v["version"] for v in autoscaling["versions"]] == ["v2", "v1"]
    assert autoscaling["preferredVersion"]["version"] == "v2"
    resources = (await ok(await hub.get("/apis/autoscaling/v1")))["resources"]
    assert [r["name"] for r in resources] == ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]
    v2 = (await ok(await hub.get("/apis/autoscaling/v2")))["resources"][0]
    assert resources[0]["storageVersionHash"] == v2["storageVersionHash"]  # one stored object
    # A version served by neither still gets the 404 naming both.
    status = await ok(await hub.get("/apis/autoscaling/v2beta2/namespaces/default/horizontalpodautoscalers"), 404)
    assert status["message"].endswith("this server serves them as autoscaling/v1, autoscaling/v2")


def test_controllers_and_namespace_deletion_see_the_storage_version_only() -> None:
    registry = hub_registry()
    hpas = [rt.api_version for rt in propagatable_types(registry) if rt.kind == "HorizontalPodAutoscaler"]
    assert hpas == ["autoscaling/v2"]
    assert [rt.api_version for rt in registry.namespaced_types() if rt.kind == "HorizontalPodAutoscaler"] == ["autoscaling/v2"]


@needs_kubectl
async def test_kubectl_autoscale_and_v1_manifests(hub_kubeconfig: Path) -> None:  # noqa: F811
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}},
    }
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(deployment))
    assert code == 0, err
    # kubectl autoscale posts an autoscaling/v1 HPA as protobuf.
    code, out, err = await kubectl(hub_kubeconfig, "autoscale", "deployment", "web", "--max=5", "--cpu-percent=70")
    assert code == 0, err
    assert out.strip() == "horizontalpodautoscaler.autoscaling/web autoscaled"
    code, out, err = await kubectl(hub_kubeconfig, "get", "hpa", "web", "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out)["spec"]["metrics"] == [cpu(70)]
    # kubectl drops the version of a short name (hpa.v1.autoscaling asks for v2): the long name keeps it.
    code, out, err = await kubectl(hub_kubeconfig, "get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "yaml")
    assert code == 0, err
    v1 = yaml.safe_load(out)
    assert (v1["apiVersion"], v1["spec"]["targetCPUUtilizationPercentage"]) == ("autoscaling/v1", 70)

    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(hpa_v1("chart", targetCPUUtilizationPercentage=55)))
    assert (code, out.strip()) == (0, "horizontalpodautoscaler.autoscaling/chart created"), err
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(hpa_v1("chart", targetCPUUtilizationPercentage=55)))
    assert (code, out.strip()) == (0, "horizontalpodautoscaler.autoscaling/chart unchanged"), err
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(hpa_v2("mem", metrics=[MEMORY])))
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "horizontalpodautoscalers.v1.autoscaling", "mem", "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out)["metadata"]["annotations"][METRICS_ANNOTATION] == (
        '[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1Gi"}}]'
    )
    code, out, err = await kubectl(
        hub_kubeconfig, "patch", "horizontalpodautoscalers.v1.autoscaling", "mem", "-p", '{"spec":{"targetCPUUtilizationPercentage":65}}',
    )
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "hpa", "mem", "-o", "json")
    assert json.loads(out)["spec"]["metrics"] == [MEMORY, cpu(65)]
    code, out, err = await kubectl(hub_kubeconfig, "get", "horizontalpodautoscalers.v1.autoscaling")
    assert code == 0, err
    assert "memory: <unknown>/1Gi, cpu: <unknown>/65%" in out, out
    code, out, err = await kubectl(hub_kubeconfig, "explain", "hpa.spec.targetCPUUtilizationPercentage", "--api-version=autoscaling/v1")
    assert code == 0 and "FIELD: targetCPUUtilizationPercentage <integer>" in out, err
    code, out, err = await kubectl(hub_kubeconfig, "delete", "horizontalpodautoscalers.v1.autoscaling", "chart", "mem", "web")
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "hpa", "-o", "name")
    assert (code, out) == (0, ""), err


@needs_kubectl
async def test_kubectl_watch_of_v1_sees_a_v1_write(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, _, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(hpa_v1("chart", targetCPUUtilizationPercentage=55)))
    assert code == 0, err
    events: list[tuple[str, str, str, int]] = []
    async with kubectl_streaming(
        hub_kubeconfig, "get", "horizontalpodautoscalers.v1.autoscaling", "-w", "--output-watch-events", "-o", "json",
    ) as stream:
        decoder, text = json.JSONDecoder(), ""

        async def next_event() -> None:
            """Read kubectl's output until it holds one more whole event."""
            nonlocal text
            while True:
                text = text.lstrip()
                try:
                    event, end = decoder.raw_decode(text)
                except json.JSONDecodeError:
                    chunk = await stream.read(65536)
                    assert chunk, f"kubectl's watch ended: {text!r}"
                    text += chunk.decode()
                    continue
                text, obj = text[end:], event["object"]
                events.append((event["type"], obj["apiVersion"], obj["metadata"]["name"],
                               obj["spec"]["targetCPUUtilizationPercentage"]))
                return

        await next_event()  # listed: the watch from the list's revision sees every later change
        code, _, err = await kubectl(hub_kubeconfig, "patch", "horizontalpodautoscalers.v1.autoscaling", "chart", "-p",
                                     '{"spec":{"targetCPUUtilizationPercentage":45}}')
        assert code == 0, err
        await next_event()
    assert events == [("ADDED", "autoscaling/v1", "chart", 55), ("MODIFIED", "autoscaling/v1", "chart", 45)]
