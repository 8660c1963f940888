"""The pod view of a workload (controlplane.apis.podview): READY, STATUS and RESTARTS as kubectl's, GPU requests, the devices
DCGM reports per pod, and the table read back from the hub's pod list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controlplane.apis.podstatus import pod_cells
from controlplane.apis.podview import (
    GpuDevice,
    PodRow,
    devices_by_pod,
    gpu_request,
    pod_rows,
    render_pod_list,
    row_from_json,
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


NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
RUNNING = {"state": {"running": {}}, "ready": True}


@pytest.mark.parametrize(("status", "meta", "expected"), [
    ({"containerStatuses": [RUNNING, RUNNING]}, {}, ("2/2", "Running", "0")),
    ({"containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}, RUNNING]}, {},
     ("1/2", "CrashLoopBackOff", "0")),
    # kubectl says Completed (the container's reason), not the phase.
    ({"containerStatuses": [{"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}] * 2,
      "phase": "Succeeded"}, {}, ("0/2", "Completed", "0")),
    # A completed container beside one still running: the pod is Running.
    ({"containerStatuses": [RUNNING, {"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}],
      "conditions": [{"type": "Ready", "status": "True"}]}, {}, ("1/2", "Running", "0")),
    ({"containerStatuses": [{"state": {"terminated": {"reason": "Error"}}}], "phase": "Failed"}, {}, ("0/2", "Error", "0")),
    # A container killed without a reason: its exit code; its restart with the time since.
    ({"containerStatuses": [RUNNING, {"restartCount": 3, "state": {"terminated": {"exitCode": 137}},
                                      "lastState": {"terminated": {"finishedAt": "2026-01-01T00:55:00Z"}}}]},
     {}, ("1/2", "ExitCode:137", "3 (5m ago)")),
    # An init container in a crash loop: kubectl says so, and counts its restarts while the pod initializes.
    ({"phase": "Pending", "initContainerStatuses": [
        {"name": "setup", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"finishedAt": "2026-01-01T00:58:00Z"}}}],
      "containerStatuses": [{"state": {"waiting": {"reason": "PodInitializing"}}}]},
     {}, ("0/2", "Init:CrashLoopBackOff", "2 (2m ago)")),
    ({"containerStatuses": [RUNNING, RUNNING]}, {"deletionTimestamp": "2026-01-01T00:00:00Z"},
     ("2/2", "Terminating", "0")),
])
def test_a_pods_row_reads_as_kubectl_get_pods_shows_it(
    status: dict[str, Any], meta: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    """READY, STATUS and RESTARTS of a workload's pod are kubectl's cells (printPod) for it."""
    pod = _pod(**status)
    pod["metadata"].update(meta)
    if "initContainerStatuses" in status:
        pod["spec"]["initContainers"] = [{"name": "setup"}]
    [row] = pod_rows("onprem", [pod], {}, NOW)
    assert (row.ready, row.status, row.restarts) == expected
    assert tuple(pod_cells(pod, NOW))[:3] == expected  # what `kubectl get pods` on the hub shows
    # The hub's pod list serves the number of restarts as before, and kubectl's cell beside it.
    served = row.as_json()
    assert (served["restarts"], served["restartsShown"]) == (int(expected[2].split()[0]), expected[2])
    assert row_from_json("onprem", served).restarts == expected[2]


def test_gpu_requests_name_the_resource() -> None:
    pod = _pod()
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
    assert pod_rows("onprem", [only_claims], {}, NOW, lambda kind, name: specs.get((kind, name)))[0].gpu_request == (
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
    restarted = {"restartCount": 1, "lastState": {"terminated": {"finishedAt": "2026-01-01T00:00:00Z"}}}
    rows = pod_rows("onprem", [_pod(containerStatuses=[RUNNING, {**RUNNING, **restarted}])], devices, NOW)
    assert rows == [PodRow("onprem", "ml", "infer-7d9f-abcde", "2/2", "Running", "n1", "nvidia.com/mig-3g.40gb=1",
                           (GpuDevice("0", "3g.40gb", 0.42),), "1 (60m ago)", 1)]
    answer = {"clusters": [
        {"name": "onprem", "pods": [row.as_json() for row in rows]},
        {"name": "cloud", "pods": [], "forbidden": 'User "tess" cannot get clusters/proxy'},
        {"name": "spot", "pods": [], "error": "cluster spot's agent is not connected"},
    ]}
    lines = render_pod_list(answer)
    assert lines[0].split() == ["CLUSTER", "NAME", "READY", "STATUS", "NODE", "GPU", "REQUEST", "DEVICES", "GPU",
                                "UTIL", "RESTARTS"]
    assert lines[1].split() == ["onprem", "infer-7d9f-abcde", "2/2", "Running", "n1", "nvidia.com/mig-3g.40gb=1",
                                "gpu0/3g.40gb", "42%", "1", "(60m", "ago)"]
    assert lines[2] == 'cluster cloud: pods not shown: User "tess" cannot get clusters/proxy'
    assert lines[3] == "cluster spot: cluster spot's agent is not connected"
    assert render_pod_list({"clusters": []}) == []
