"""kube's defaults of NetworkPolicy, StorageClass and HorizontalPodAutoscaler (autoscaling/v2),
through the hub's HTTP API: a minimal manifest comes back with what kube-apiserver sets."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.resources import Registry
from controlplane.hub import hub_registry

from .test_kube_defaults import create

Client = TestClient[Any, Any]
HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()


async def test_network_policy_defaults(api: Client) -> None:
    ingress_only = await create(api, "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "web"},
        "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]},
    })
    assert ingress_only["spec"]["policyTypes"] == ["Ingress"]
    assert ingress_only["spec"]["ingress"][0]["ports"] == [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]
    both = await create(api, "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "out"},
        "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 443}]}]},
    })
    assert both["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert both["spec"]["egress"][0]["ports"] == [{"port": 443, "protocol": "TCP"}]


async def test_storage_class_defaults(api: Client) -> None:
    created = await create(api, "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": "csi.example.com",
    })
    assert (created["reclaimPolicy"], created["volumeBindingMode"]) == ("Delete", "Immediate")


async def test_horizontal_pod_autoscaler_defaults(api: Client) -> None:
    plain = await create(api, HPAS, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": TARGET, "maxReplicas": 5},
    })
    assert plain["spec"] == {
        "scaleTargetRef": TARGET, "maxReplicas": 5, "minReplicas": 1,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
    }
    with_behavior = await create(api, HPAS, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "calm"},
        "spec": {"scaleTargetRef": TARGET, "maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}},
    })
    assert with_behavior["spec"]["behavior"] == {
        "scaleUp": {
            "stabilizationWindowSeconds": 0, "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 600, "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
    }


async def test_status_fields_kube_always_writes_are_served_at_zero(api: Client) -> None:
    """kube's Go types write these status fields even at zero (no ``omitempty``), and typed
    clients require them: the official Python client reads ``status.disruptions_allowed`` and
    ``status.desired_replicas`` of a new object."""
    budget = await create(api, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    })
    assert budget["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    autoscaler = await create(api, HPAS, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "zero"},
        "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3},
    })
    assert autoscaler["status"] == {"desiredReplicas": 0, "currentMetrics": None}
    written = await api.put(f"{HPAS}/zero/status", json={**autoscaler, "status": {"currentReplicas": 2}})
    assert written.status == 200, await written.text()
    assert (await written.json())["status"] == {"currentReplicas": 2, "desiredReplicas": 0, "currentMetrics": None}
