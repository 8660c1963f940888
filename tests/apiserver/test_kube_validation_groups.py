"""kube's validation of PodDisruptionBudget, PriorityClass and HorizontalPodAutoscaler through the
hub's HTTP API: each broken manifest is refused with 422 ``Invalid`` and a cause at kube's field
path with kube's message, the valid one is accepted; a PriorityClass's value cannot change."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apiserver.resources import Registry
from controlplane.hub import hub_registry

Obj = dict[str, Any]
Client = TestClient[Any, Any]
PATHS = {
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
}


@pytest.fixture
def api_registry() -> Registry:
    return hub_registry()


def budget() -> Obj:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }


def priority_class(name: str = "x", value: int = 1000) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def autoscaler() -> Obj:
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "x"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 4},
    }


def setting(*keys: str, value: Any) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        target = obj
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


CASES: list[tuple[str, Callable[[], Obj], Callable[[Obj], None], str, str]] = [
    ("pdb-both-bounds", budget, setting("spec", "maxUnavailable", value=1), "spec",
     "minAvailable and maxUnavailable cannot be both set"),
    ("pdb-negative", budget, setting("spec", "minAvailable", value=-1), "spec.minAvailable",
     "Invalid value: -1: must be greater than or equal to 0"),
    ("pdb-over-100-percent", budget, setting("spec", "minAvailable", value="120%"), "spec.minAvailable",
     'Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"120%"}: must not be greater than 100%'),
    ("pdb-selector-operator", budget,
     setting("spec", "selector", value={"matchExpressions": [{"key": "app", "operator": "Near"}]}),
     "spec.selector.matchExpressions[0].operator", 'Invalid value: "Near": not a valid selector operator'),
    ("pdb-eviction-policy", budget, setting("spec", "unhealthyPodEvictionPolicy", value="Sometimes"),
     "spec.unhealthyPodEvictionPolicy",
     'Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget"'),
    ("priority-too-high", priority_class, setting("value", value=1_000_000_001), "value",
     "Forbidden: maximum allowed value of a user defined priority is 1000000000"),
    ("priority-system-prefix", priority_class, setting("metadata", "name", value="system-x"), "metadata.name",
     "Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
     "error: system-x is not a known system priority class"),
    ("priority-preemption", priority_class, setting("preemptionPolicy", value="Always"), "preemptionPolicy",
     'Unsupported value: "Always": supported values: "Never", "PreemptLowerPriority"'),
    ("hpa-min-zero", autoscaler, setting("spec", "minReplicas", value=0), "spec.minReplicas",
     "Invalid value: 0: must be greater than or equal to 1"),
    ("hpa-max-below-min", autoscaler, setting("spec", "minReplicas", value=5), "spec.maxReplicas",
     "Invalid value: 4: must be greater than or equal to `minReplicas`"),
    ("hpa-no-target-name", autoscaler, setting("spec", "scaleTargetRef", "name", value=""), "spec.scaleTargetRef.name",
     "Required value"),
    ("hpa-target-slash", autoscaler, setting("spec", "scaleTargetRef", "name", value="a/b"), "spec.scaleTargetRef.name",
     "Invalid value: \"a/b\": may not contain '/'"),
]


@pytest.mark.parametrize(("manifest", "breaking", "field_path", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_invalid_manifest_is_refused_and_the_valid_one_accepted(
    api: Client, manifest: Callable[[], Obj], breaking: Callable[[Obj], None], field_path: str, message: str
) -> None:
    valid = manifest()
    broken = copy.deepcopy(valid)
    breaking(broken)
    path = PATHS[valid["kind"]]
    response = await api.post(path, json=broken)
    status = await response.json()
    assert response.status == 422, status
    assert (status["kind"], status["reason"]) == ("Status", "Invalid")
    causes = [(c.get("field", ""), c["message"]) for c in status["details"]["causes"]]
    assert any(f == field_path and m.endswith(message) for f, m in causes), causes
    created = await api.post(path, json=valid)
    assert created.status == 201, await created.text()


async def test_a_known_system_priority_class_is_accepted_and_a_value_cannot_change(api: Client) -> None:
    path = PATHS["PriorityClass"]
    system = await api.post(path, json=priority_class("system-cluster-critical", 2_000_000_000))
    assert system.status == 201, await system.text()
    created = await api.post(path, json=priority_class("batch", 100))
    stored = await created.json()
    changed = await api.put(f"{path}/batch", json={**stored, "value": 200})
    status = await changed.json()
    assert changed.status == 422, status
    assert ("value", "Forbidden: may not be changed in an update.") in [
        (c.get("field"), c["message"]) for c in status["details"]["causes"]
    ]
