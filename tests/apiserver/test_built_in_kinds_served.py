"""Every built-in kind users propagate is served by the hub, with a status subresource exactly
where kube serves one (LeaderWorkerSet and JobSet as their CRDs declare it). Their schemas are
kube's (``test_openapi``), their defaults and validation kube's (``test_kube_defaults``,
``test_kube_validation``)."""

from __future__ import annotations

import pytest

from controlplane.hub import hub_registry

WITH_STATUS = [
    ("v1", "Service"), ("v1", "PersistentVolumeClaim"), ("v1", "Pod"), ("v1", "ResourceQuota"), ("v1", "Node"),
    ("apps/v1", "ReplicaSet"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"), ("batch/v1", "CronJob"), ("networking.k8s.io/v1", "Ingress"),
    ("policy/v1", "PodDisruptionBudget"), ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
]
WITHOUT_STATUS = [
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "LimitRange"),
    ("networking.k8s.io/v1", "IngressClass"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass"), ("storage.k8s.io/v1", "StorageClass"),
    ("discovery.k8s.io/v1", "EndpointSlice"), ("node.k8s.io/v1", "RuntimeClass"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
]
REGISTRY = hub_registry()


@pytest.mark.parametrize(("api_version", "kind", "has_status"), [(*k, True) for k in WITH_STATUS] + [(*k, False) for k in WITHOUT_STATUS])
def test_the_kind_is_served_with_kubes_status_subresource(api_version: str, kind: str, has_status: bool) -> None:
    rt = REGISTRY.for_kind(api_version, kind)
    assert rt is not None, f"{kind} ({api_version}) is not served"
    assert rt.has_status is has_status
    assert rt.columns, "kubectl get shows its columns"
