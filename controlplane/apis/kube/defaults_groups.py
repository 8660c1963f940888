"""kube's defaulting of the kinds of the networking, discovery, node, storage and autoscaling
groups that users propagate: NetworkPolicy (``pkg/apis/networking/v1/defaults.go``), EndpointSlice
(``pkg/apis/discovery/v1/defaults.go``), RuntimeClass (its overhead's quantities, as kube decodes
them), StorageClass (``pkg/apis/storage/v1/defaults.go``) and HorizontalPodAutoscaler
(``pkg/apis/autoscaling/v2/defaults.go``, and ``v1/defaults.go`` for the version converted from it), and
resource.k8s.io/v1's ResourceClaim and ResourceClaimTemplate (``pkg/apis/resource/v1/defaults.go``).
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.apis.kube.objects import child, ensure, items, resource_list

#: ``defaultHPAScaleUpRules``: the older HPA's behaviour (4 pods or double, every 15 s).
_SCALE_UP_RULES: dict[str, Any] = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
#: ``defaultHPAScaleDownRules``: no stabilization window (the controller's flag decides it).
_SCALE_DOWN_RULES: dict[str, Any] = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}
#: ``autoscaling.DefaultCPUUtilization``.
_DEFAULT_CPU_UTILIZATION = 80


def network_policy(obj: dict[str, Any]) -> None:
    """``SetDefaults_NetworkPolicy`` and ``SetDefaults_NetworkPolicyPort``: policy types implied by
    the rules, each port's protocol TCP."""
    spec = child(obj, "spec")
    if spec is None:
        return
    for direction in ("ingress", "egress"):
        for rule in items(spec, direction):
            for port in items(rule, "ports"):
                if port.get("protocol") is None:
                    port["protocol"] = "TCP"
    if not spec.get("policyTypes"):
        egress = spec.get("egress")
        spec["policyTypes"] = ["Ingress", "Egress"] if isinstance(egress, list) and egress else ["Ingress"]


def endpoint_slice(obj: dict[str, Any]) -> None:
    """``SetDefaults_EndpointPort``: each port's name empty and protocol TCP when unset."""
    for port in items(obj, "ports"):
        if port.get("name") is None:
            port["name"] = ""
        if port.get("protocol") is None:
            port["protocol"] = "TCP"


def runtime_class(obj: dict[str, Any]) -> None:
    """No ``SetDefaults`` in node/v1: the pod overhead's quantities in kube's canonical form."""
    resource_list(child(obj, "overhead"), "podFixed")


def storage_class(obj: dict[str, Any]) -> None:
    """``SetDefaults_StorageClass``."""
    if obj.get("reclaimPolicy") is None:
        obj["reclaimPolicy"] = "Delete"
    if obj.get("volumeBindingMode") is None:
        obj["volumeBindingMode"] = "Immediate"


def zero_status(obj: dict[str, Any], fields: dict[str, Any]) -> None:
    """The status fields kube's Go type always writes (no ``omitempty``), at their zero values
    until a controller sets them: kube serves a new PodDisruptionBudget with
    ``disruptionsAllowed: 0`` and an HPA with ``desiredReplicas: 0``, which typed clients require."""
    status = ensure(obj, "status")
    if status is not None:
        for key, zero in fields.items():
            status.setdefault(key, zero)


def pod_disruption_budget(obj: dict[str, Any]) -> None:
    zero_status(obj, {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})


def horizontal_pod_autoscaler_v1(obj: dict[str, Any]) -> None:
    """autoscaling/v1 ``SetDefaults_HorizontalPodAutoscaler``: one minimum replica. Its 80 % CPU is
    applied by the conversion to v2 (which sees the metrics annotation), not here, as in kube."""
    spec = child(obj, "spec")
    if spec is not None and spec.get("minReplicas") is None:
        spec["minReplicas"] = 1


def horizontal_pod_autoscaler(obj: dict[str, Any]) -> None:
    """autoscaling/v2 ``SetDefaults_HorizontalPodAutoscaler`` (:func:`horizontal_pod_autoscaler_spec`),
    with the status fields kube's Go type always writes."""
    zero_status(obj, {"desiredReplicas": 0, "currentMetrics": None})
    horizontal_pod_autoscaler_spec(obj)


def horizontal_pod_autoscaler_spec(obj: dict[str, Any]) -> None:
    """autoscaling/v2 ``SetDefaults_HorizontalPodAutoscaler``: one minimum replica, 80 % CPU when
    no metric is given, and a given ``behavior``'s unset rules and fields filled."""
    spec = child(obj, "spec")
    if spec is None:
        return
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": _DEFAULT_CPU_UTILIZATION}},
        }]
    behavior = child(spec, "behavior")
    if behavior is None:
        return
    for key, rules in (("scaleUp", _SCALE_UP_RULES), ("scaleDown", _SCALE_DOWN_RULES)):
        given = behavior.get(key)
        if given is None:
            behavior[key] = copy.deepcopy(rules)
        elif isinstance(given, dict):
            for field, value in rules.items():
                if given.get(field) is None:
                    given[field] = copy.deepcopy(value)


def resource_claim(obj: dict[str, Any]) -> None:
    """resource.k8s.io/v1's ``SetDefaults_ExactDeviceRequest`` and ``SetDefaults_DeviceSubRequest`` over a
    ResourceClaim's requests: ``allocationMode: ExactCount``, then ``count: 1`` for ExactCount, each
    toleration's ``operator: Equal``."""
    _claim_spec(child(obj, "spec"))


def resource_claim_template(obj: dict[str, Any]) -> None:
    """:func:`resource_claim`'s defaults on the claim spec a ResourceClaimTemplate stamps out."""
    _claim_spec(child(child(obj, "spec"), "spec"))


def _claim_spec(spec: dict[str, Any] | None) -> None:
    for request in items(child(spec, "devices"), "requests"):
        if (exactly := child(request, "exactly")) is not None:
            _exact_request(exactly)
        for sub in items(request, "firstAvailable"):
            _exact_request(sub)


def _exact_request(request: dict[str, Any]) -> None:
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in items(request, "tolerations"):
        if not toleration.get("operator"):
            toleration["operator"] = "Equal"
