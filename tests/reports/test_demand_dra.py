"""Pending demand of workloads whose pods ask GPUs through DRA claims, read as placement reads them:
the per-pod claims of templates in every waiting pod, the devices of a claim the pods share once,
with the first waiting one, and a request's DeviceClass as the hub holds it."""

from __future__ import annotations

from typing import Any

from controlplane.reports.snapshot import sample_from_cluster_statuses

from .builders import H100, T0

H100_CLASS = ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && "
              "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'")


def _claim(kind: str, name: str, count: int, device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count}}]}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def _work(pod_claims: list[dict[str, str]], pods: int) -> dict[str, Any]:
    pod = {"resourceClaims": pod_claims, "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "ml"},
                "spec": {"replicas": pods, "template": {"spec": pod}}}
    identifier = {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "ml", "name": "infer", "ordinal": 0}
    return {"metadata": {"namespace": "gpufed-es-cloud", "name": "ml-infer-deployment"},
            "spec": {"workload": {"manifests": [manifest]}},
            "status": {"manifestStatuses": [{"identifier": identifier, "unschedulable": {"pods": pods}}]}}


def test_a_works_pending_pods_ask_their_claim_templates_gpus_and_a_shared_claims_once() -> None:
    work = _work([{"name": "own", "resourceClaimTemplateName": "two"}, {"name": "pool", "resourceClaimName": "pool"}], 3)
    claims = [_claim("ResourceClaimTemplate", "two", 2), _claim("ResourceClaim", "pool", 4)]
    fleet = sample_from_cluster_statuses([], [], [work], now=T0, claims=claims)
    assert [(d.replicas, d.gpu_requests, d.excluded_clusters) for d in fleet.pending] == [
        (1, {"nvidia.com/gpu": 6}, frozenset({"cloud"})), (2, {"nvidia.com/gpu": 2}, frozenset({"cloud"})),
    ]
    # Without the hub's claims the same pods ask nothing of a GPU (what the report read before).
    unread = sample_from_cluster_statuses([], [], [work], now=T0)
    assert [d.gpu_requests for d in unread.pending] == [{}]


def test_a_works_pending_pods_read_a_device_class_of_the_hubs_own() -> None:
    """The template asks a class the hub holds that pins H100 GPUs: the demand is for H100s."""
    work = _work([{"name": "own", "resourceClaimTemplateName": "h100"}], 2)
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100.example.com"},
                    "spec": {"selectors": [{"cel": {"expression": H100_CLASS}}]}}
    claims = [_claim("ResourceClaimTemplate", "h100", 1, "h100.example.com"), device_class]
    [demand] = sample_from_cluster_statuses([], [], [work], now=T0, claims=claims).pending
    assert (demand.replicas, demand.gpu_requests, demand.products) == (2, {"nvidia.com/gpu": 1}, frozenset({H100}))


def test_a_bindings_shared_devices_come_once_with_its_first_unplaced_replica() -> None:
    binding = {"metadata": {"namespace": "ml", "name": "infer-deployment"}, "spec": {
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "infer"},
        "replicas": 3,
        "replicaRequirements": {"resourceRequest": {"nvidia.com/gpu": "1"}, "sharedResourceRequest": {"nvidia.com/gpu": "4"}},
    }}
    fleet = sample_from_cluster_statuses([], [binding], [], now=T0)
    assert [(d.replicas, d.gpu_requests) for d in fleet.pending] == [(1, {"nvidia.com/gpu": 5}), (2, {"nvidia.com/gpu": 1})]


def test_a_multi_role_jobs_shared_devices_come_once_whatever_number_of_roles_name_them() -> None:
    """Both roles carry the claim (as a binding written elsewhere may); the job waits whole and asks
    it once, as its top-level requirements say."""
    role = {"resourceRequest": {"nvidia.com/gpu": "1"}, "sharedResourceRequest": {"nvidia.com/gpu": "4"}}
    binding = {"metadata": {"namespace": "ml", "name": "train-jobset"}, "spec": {
        "resource": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "namespace": "ml", "name": "train"},
        "replicas": 3,
        "replicaRequirements": role,
        "components": [{"name": "leader", "replicas": 1, "replicaRequirements": role},
                       {"name": "workers", "replicas": 2, "replicaRequirements": role}],
    }}
    fleet = sample_from_cluster_statuses([], [binding], [], now=T0)
    assert [(d.replicas, d.gpu_requests) for d in fleet.pending] == [(1, {"nvidia.com/gpu": 5}), (2, {"nvidia.com/gpu": 1})]
