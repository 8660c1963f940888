"""The pod view of a workload (controlplane.apis.podview): status words, GPU requests, the devices
DCGM reports per pod, and the table read back from the hub's pod list."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apis.podview import (
    GpuDevice,
    PodRow,
    devices_by_pod,
    gpu_request,
    pod_rows,
    pod_status,
    render_pod_list,
    restart_count,
)
from controlplane.apis.utilization import NodeUtilization, PodAllocation, encode_utilization


def _pod(name: str = "infer-7d9f-abcde", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": "n1", "containers": [
            {"name": "server", "resources": {"limits": {"nvidia.com/mig-3g.40gb": 1}, "requests": {"cpu": "1"}}},
            {"name": "sidecar"},
        ]},
        "status": {"phase": "Running", **status},
    }


@pytest.mark.parametrize(("status", "meta", "expected"), [
    ({}, {}, "Running"),
    ({"containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}, {}, "CrashLoopBackOff"),
    ({"containerStatuses": [{"state": {"terminated": {"reason": "Completed"}}}], "phase": "Succeeded"}, {}, "Succeeded"),
    ({"containerStatuses": [{"state": {"terminated": {"reason": "Error"}}}], "phase": "Failed"}, {}, "Error"),
    ({}, {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "Terminating"),
])
def test_status_is_worded_as_kubectl_words_it(status: dict[str, Any], meta: dict[str, Any], expected: str) -> None:
    pod = _pod(**status)
    pod["metadata"].update(meta)
    assert pod_status(pod) == expected


def test_restarts_add_up_over_containers_and_gpu_requests_name_the_resource() -> None:
    pod = _pod(containerStatuses=[{"restartCount": 2}, {"restartCount": 3}])
    assert restart_count(pod) == 5
    assert gpu_request(pod) == "nvidia.com/mig-3g.40gb=1"
    assert gpu_request({"spec": {"containers": [{"name": "c"}]}}) == "-"
    assert gpu_request({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "x"}}}]}}) == "?"


def test_a_pods_dra_claims_show_in_its_gpu_request_as_the_hubs_claims_ask() -> None:
    """Each claim entry the hub knows shows what it asks after the containers' requests; a shared
    claim (``resourceClaimName``) says so; a claim the hub does not hold, or one of another class, adds nothing."""
    def asks(device_class: str, count: int, selector: str | None = None) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
        if selector:
            exactly["selectors"] = [{"cel": {"expression": selector}}]
        return {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}

    specs = {
        ("ResourceClaimTemplate", "two-gpus"): asks("gpu.nvidia.com", 2),
        ("ResourceClaim", "slices"): asks("mig.nvidia.com", 3, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"),
        ("ResourceClaimTemplate", "nic"): asks("rdma.example.com", 1),
    }
    pod = _pod()
    pod["spec"]["resourceClaims"] = [
        {"name": "gpus", "resourceClaimTemplateName": "two-gpus"},
        {"name": "mig", "resourceClaimName": "slices"},
        {"name": "net", "resourceClaimTemplateName": "nic"},
        {"name": "later", "resourceClaimTemplateName": "not-yet"},
    ]
    shown = gpu_request(pod, lambda kind, name: specs.get((kind, name)))
    assert shown == ("nvidia.com/mig-3g.40gb=1,nvidia.com/gpu=2 (DRA claim gpus),"
                     "nvidia.com/mig-1g.10gb=3 (DRA claim mig, shared)")
    assert gpu_request(pod) == "nvidia.com/mig-3g.40gb=1"  # claims not looked up
    only_claims = {"spec": {"containers": [{"name": "c"}], "resourceClaims": pod["spec"]["resourceClaims"][:1]}}
    assert pod_rows("onprem", [only_claims], {}, lambda kind, name: specs.get((kind, name)))[0].gpu_request == (
        "nvidia.com/gpu=2 (DRA claim gpus)")


def test_devices_come_from_the_agents_dcgm_report_with_mig_profiles_and_utilization() -> None:
    node = NodeUtilization(
        name="n1", product="NVIDIA-A100-SXM4-80GB", ready=True, schedulable=True, shared_replicas=1, labels={},
        devices=[
            {"gpu": 0, "uuid": "MIG-a", "profile": "3g.40gb", "instance": 1, "pod": "infer-7d9f-abcde",
             "namespace": "ml", "utilization": 0.42},
            {"gpu": 0, "uuid": "MIG-b", "profile": "3g.40gb", "instance": 2, "utilization": 0.0},
            {"gpu": 1, "uuid": "GPU-c", "pod": "train-0", "namespace": "ml", "utilization": 0.9},
        ],
        pods=[PodAllocation("ml", "infer-7d9f-abcde", {"nvidia.com/mig-3g.40gb": 1}, "Deployment", "infer"),
              PodAllocation("ml", "train-0", {"nvidia.com/gpu": 1})],
    )
    devices = devices_by_pod(encode_utilization([node], sample_time=None))
    assert devices == {
        ("ml", "infer-7d9f-abcde"): [GpuDevice("0", "3g.40gb", 0.42)],
        ("ml", "train-0"): [GpuDevice("1", None, 0.9)],
    }
    assert devices_by_pod(None) == {}


def test_the_hubs_pod_list_reads_back_into_the_same_table_with_what_could_not_be_shown() -> None:
    devices = {("ml", "infer-7d9f-abcde"): [GpuDevice("0", "3g.40gb", 0.42)]}
    rows = pod_rows("onprem", [_pod(containerStatuses=[{"restartCount": 1}])], devices)
    assert rows == [PodRow("onprem", "ml", "infer-7d9f-abcde", "Running", "n1", "nvidia.com/mig-3g.40gb=1",
                           (GpuDevice("0", "3g.40gb", 0.42),), 1)]
    answer = {"clusters": [
        {"name": "onprem", "pods": [row.as_json() for row in rows]},
        {"name": "cloud", "pods": [], "forbidden": 'User "tess" cannot get clusters/proxy'},
        {"name": "spot", "pods": [], "error": "cluster spot's agent is not connected"},
    ]}
    lines = render_pod_list(answer)
    assert lines[0].split() == ["CLUSTER", "NAME", "STATUS", "NODE", "GPU", "REQUEST", "DEVICES", "GPU", "UTIL",
                                "RESTARTS"]
    assert lines[1].split() == ["onprem", "infer-7d9f-abcde", "Running", "n1", "nvidia.com/mig-3g.40gb=1",
                                "gpu0/3g.40gb", "42%", "1"]
    assert lines[2] == 'cluster cloud: pods not shown: User "tess" cannot get clusters/proxy'
    assert lines[3] == "cluster spot: cluster spot's agent is not connected"
    assert render_pod_list({"clusters": []}) == []
