"""Node, EndpointSlice (discovery.k8s.io/v1) and RuntimeClass (node.k8s.io/v1) on the hub, as
kube-apiserver serves them, over HTTP on a real etcd and with the real kubectl.

Before, ``kubectl get nodes`` answered ``the server doesn't have a resource type "nodes"`` (and
RBAC rules naming nodes could not be written with kubectl), ``kubectl describe service`` and
``describe ingress`` asked for the Service's EndpointSlices and got 404, and a GPU chart's
``nvidia`` RuntimeClass could not be applied (``no matches for kind "RuntimeClass"``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient

from .test_kube_validation import hub, hub_kubeconfig  # noqa: F401 (fixtures)
from .test_real_clients import kubectl, needs_kubectl

Client = TestClient[Any, Any]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
RUNTIME_CLASSES = "/apis/node.k8s.io/v1/runtimeclasses"

SERVICE = {
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm"},
    "spec": {"selector": {"app": "llm"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]},
}
SLICE = {
    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
    "metadata": {"name": "llm-abcde", "labels": {"kubernetes.io/service-name": "llm"}},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": True}},
                  {"addresses": ["10.0.0.8"], "conditions": {"ready": True}}],
    "ports": [{"name": "http", "port": 8000}],
}
INGRESS = {
    "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "llm"},
    "spec": {"rules": [{"host": "llm.acme.internal", "http": {"paths": [{
        "path": "/", "pathType": "Prefix", "backend": {"service": {"name": "llm", "port": {"name": "http"}}},
    }]}}]},
}
RUNTIME_CLASS = {
    "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
    "handler": "nvidia",
    "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
}


def manifests(*objects: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objects)


async def test_the_hub_lists_no_nodes_until_someone_creates_one(hub: Client) -> None:  # noqa: F811
    listed = await hub.get("/api/v1/nodes")
    assert listed.status == 200, await listed.text()
    body = await listed.json()
    assert body["kind"] == "NodeList" and body["items"] == []


async def test_endpoint_slices_are_defaulted_validated_and_found_by_service(hub: Client) -> None:  # noqa: F811
    created = await hub.post(SLICES, json=SLICE)
    assert created.status == 201, await created.text()
    assert (await created.json())["ports"] == [{"name": "http", "port": 8000, "protocol": "TCP"}]
    found = await hub.get(SLICES, params={"labelSelector": "kubernetes.io/service-name=llm"})
    assert [item["metadata"]["name"] for item in (await found.json())["items"]] == ["llm-abcde"]

    broken = {**SLICE, "metadata": {"name": "broken"}, "addressType": "IPv6"}
    refused = await hub.post(SLICES, json=broken)
    assert refused.status == 422
    causes = [(c["field"], c["message"]) for c in (await refused.json())["details"]["causes"]]
    assert ("endpoints[0].addresses[0]", 'Invalid value: "10.0.0.7": must be a valid IPv6 address') in causes

    changed = await hub.patch(f"{SLICES}/llm-abcde", json={"addressType": "FQDN"},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert changed.status == 422
    assert "addressType: Invalid value: \"FQDN\": field is immutable" in (await changed.json())["message"]


async def test_runtime_class_table_is_kubes(hub: Client) -> None:  # noqa: F811
    created = await hub.post(RUNTIME_CLASSES, json=RUNTIME_CLASS)
    assert created.status == 201, await created.text()
    table = await (await hub.get(RUNTIME_CLASSES, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Handler", "Age"]
    assert table["rows"][0]["cells"][:2] == ["nvidia", "nvidia"]
    immutable = await hub.patch(f"{RUNTIME_CLASSES}/nvidia", json={"handler": "runc"},
                                headers={"Content-Type": "application/merge-patch+json"})
    assert immutable.status == 422
    assert "handler: Invalid value: \"runc\": field is immutable" in (await immutable.json())["message"]


@needs_kubectl
async def test_kubectl_get_nodes_and_rbac_rules_naming_them(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(hub_kubeconfig, "get", "nodes")
    assert code == 0, err
    assert out == "" and err.strip() == "No resources found"

    code, out, err = await kubectl(
        hub_kubeconfig, "create", "clusterrole", "node-reader", "--verb=get,list,watch",
        "--resource=nodes,endpointslices,runtimeclasses",
    )
    assert code == 0, err
    code, out, err = await kubectl(hub_kubeconfig, "get", "clusterrole", "node-reader", "-o", "json")
    assert code == 0, err
    (rule, *rest) = json.loads(out)["rules"]
    groups = {(r["apiGroups"][0], resource) for r in (rule, *rest) for resource in r["resources"]}
    assert groups == {("", "nodes"), ("discovery.k8s.io", "endpointslices"), ("node.k8s.io", "runtimeclasses")}

    code, out, err = await kubectl(hub_kubeconfig, "auth", "can-i", "list", "nodes")
    assert "doesn't have a resource type" not in err, err


@needs_kubectl
async def test_kubectl_describe_finds_the_services_endpoint_slices(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=manifests(SERVICE, SLICE, INGRESS))
    assert code == 0, err

    code, out, err = await kubectl(hub_kubeconfig, "describe", "service", "llm", "-v=6")
    assert code == 0, err
    requests = [line for line in err.splitlines() if "round_trippers" in line]
    assert any("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices" in line for line in requests), requests
    assert not [line for line in requests if " 200 OK " not in line], requests
    (endpoints,) = [line for line in out.splitlines() if line.startswith("Endpoints:")]
    assert endpoints.split() == ["Endpoints:", "10.0.0.7:8000,10.0.0.8:8000"]

    code, out, err = await kubectl(hub_kubeconfig, "describe", "ingress", "llm")
    assert code == 0, err
    assert "<error:" not in out, out
    assert "llm:http (10.0.0.7:8000,10.0.0.8:8000)" in out, out

    code, out, err = await kubectl(hub_kubeconfig, "get", "endpointslices")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert row.split()[:4] == ["llm-abcde", "IPv4", "8000", "10.0.0.7,10.0.0.8"]


@needs_kubectl
async def test_kubectl_apply_of_a_gpu_charts_runtime_class(hub_kubeconfig: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=manifests(RUNTIME_CLASS))
    assert code == 0, err
    assert out.strip() == "runtimeclass.node.k8s.io/nvidia created"
    code, out, err = await kubectl(hub_kubeconfig, "get", "runtimeclass")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NAME", "HANDLER", "AGE"]
    assert row.split()[:2] == ["nvidia", "nvidia"]

    bad = {**RUNTIME_CLASS, "metadata": {"name": "bad"}, "handler": "NVIDIA"}
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=manifests(bad))
    assert code != 0
    assert 'The RuntimeClass "bad" is invalid: handler: Invalid value: "NVIDIA": a lowercase RFC 1123 label' in err
