"""`gpufed describe` and `gpufed top`: the pure rendering, and the simulated metrics API's usage model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controlplane.apis.podview import GpuDevice
from gpufed.commands.describe import (
    hub_claim_specs,
    hub_device_classes,
    render_hub,
    render_member,
    render_pod,
    status_fields,
)
from gpufed.commands.top import mebibytes, millicores, node_table, pod_table
from gpufed.hubclient import HubError
from simulator.podmetrics import IDLE_CPU_MILLI, SYSTEM_CPU_MILLI, container_usage, node_usage

WORKLOAD = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "infer", "namespace": "ml", "labels": {"app": "infer"}, "creationTimestamp": "T0"},
    "status": {"replicas": 3, "readyReplicas": 2, "conditions": [{"type": "Available"}]},
}
BINDING = {
    "spec": {"clusters": [{"name": "onprem", "replicas": 2}, {"name": "cloud", "replicas": 1}]},
    "status": {"conditions": [{"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok"}]},
}

#: "now" for the cells that show a time since (a pod's last restart).
NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)


def _fields(lines: list[str]) -> dict[str, str]:
    return {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines if ":" in line}


def test_describe_shows_the_hub_object_its_placement_and_each_members_copy() -> None:
    hub = _fields(render_hub(WORKLOAD, BINDING))
    assert hub["Kind"] == "Deployment (apps/v1)" and hub["Labels"] == "app=infer"
    assert hub["Hub status"] == "readyReplicas=2, replicas=3"  # plain fields only, by name
    assert hub["Placement"] == "onprem=2, cloud=1"
    assert any(line.split()[:3] == ["Scheduled", "True", "Success"] for line in render_hub(WORKLOAD, BINDING))
    assert "no ResourceBinding" in _fields(render_hub(WORKLOAD, None))["Placement"]
    member = render_member("onprem", {"status": {"replicas": 2, "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}}, None)
    assert member[0] == "Cluster onprem:" and _fields(member[1:2]) == {"Status": "replicas=2"}
    assert member[-1].split() == ["Available", "True", "MinimumReplicasAvailable"]
    assert "not in this cluster" in render_member("cloud", None, None)[1]
    assert render_member("spot", None, "cluster spot's agent is not connected")[1].endswith("not connected")
    assert status_fields({"phase": "Running", "ok": True, "nested": {}}) == "phase=Running"


def test_describe_pod_shows_gpu_devices_containers_and_events() -> None:
    pod = {
        "metadata": {"name": "infer-0", "namespace": "ml", "ownerReferences": [{"kind": "ReplicaSet", "name": "infer-7d"}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "server", "image": "infer:1",
                                                   "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "server", "restartCount": 4, "ready": True, "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 137, "finishedAt": "2026-01-01T00:55:00Z"}}}]},
    }
    event = {"involvedObject": {"kind": "Pod", "name": "infer-0"}, "reason": "Scheduled", "type": "Normal",
             "lastTimestamp": "2026-01-01T00:00:00Z", "message": "assigned"}
    lines = render_pod("onprem", pod, [GpuDevice("3", None, 0.5)], [("onprem", event)], now=NOW)
    fields = _fields(lines)
    assert fields["Cluster"] == "onprem" and fields["Node"] == "n1" and fields["Controlled By"] == "ReplicaSet/infer-7d"
    assert fields["GPU request"] == "nvidia.com/gpu=1" and fields["GPU devices"] == "gpu3 (50% busy)"
    # Ready, Status and the pod's Restarts as kubectl get pods shows them, then the container's own count.
    assert (fields["Ready"], fields["Status"]) == ("1/1", "Running")
    assert [line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("Restarts:")] == [
        "4 (5m ago)", "4"]
    assert fields["State"] == "running"
    assert lines[-1].split()[:4] == ["2026-01-01T00:00:00Z", "onprem", "Normal", "Scheduled"]


def test_describe_pod_counts_the_gpus_its_dra_claims_ask() -> None:
    pod = {"metadata": {"name": "train-0", "namespace": "ml"},
           "spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two"}]}}
    two = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}
    fields = _fields(render_pod("onprem", pod, [], [], lambda kind, name: two if name == "two" else None, now=NOW))
    assert fields["GPU request"] == "nvidia.com/gpu=2 (DRA claim gpus)"


async def test_describe_pod_reads_the_claims_a_pod_names_from_the_hub() -> None:
    """Templates and claims at the hub's paths; one the user may not read counts nothing and is
    named as not readable."""
    two = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}
    base = "/apis/resource.k8s.io/v1/namespaces/ml"

    class Hub:
        async def get_or_none(self, path: str) -> dict[str, Any] | None:
            if path == f"{base}/resourceclaimtemplates/two":
                return {"spec": {"spec": two}}
            if path == f"{base}/resourceclaims/pool":
                return {"spec": two}
            raise HubError("forbidden", status=403)

    pod = {"spec": {"resourceClaims": [{"name": "a", "resourceClaimTemplateName": "two"},
                                       {"name": "b", "resourceClaimName": "pool"},
                                       {"name": "c", "resourceClaimName": "secret"}]}}
    lookup, unreadable = await hub_claim_specs(Hub(), "ml", pod)  # type: ignore[arg-type]
    assert (lookup("ResourceClaimTemplate", "two"), lookup("ResourceClaim", "pool"),
            lookup("ResourceClaim", "secret")) == (two, two, None)
    assert unreadable == {("ResourceClaim", "secret")}
    fields = _fields(render_pod("onprem", {"metadata": {"name": "p"}, **pod}, [], [], lookup, unreadable, now=NOW))
    assert fields["GPU request"] == (
        "nvidia.com/gpu=2 (DRA claim a),nvidia.com/gpu=2 (DRA claim b, shared),(DRA claim c: not readable)"
    )


async def test_describe_pod_reads_the_device_classes_its_claims_ask_from_the_hub() -> None:
    """A class the hub holds and the user may read counts by its selectors; one refused (403) or
    not held (404) is NVIDIA's published class of the name: a GPU for NVIDIA's, nothing for another."""
    def claim(class_name: str, count: int) -> dict[str, Any]:
        return {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": class_name, "count": count}}]}}

    specs = {"own": claim("h100.example.com", 3), "hidden": claim("secret.example.com", 5),
             "nvidia": claim("gpu.nvidia.com", 2)}
    h100 = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                 "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}
    asked: list[str] = []

    class Hub:
        async def get_or_none(self, path: str) -> dict[str, Any] | None:
            asked.append(path)
            if path == "/apis/resource.k8s.io/v1/deviceclasses/h100.example.com":
                return {"kind": "DeviceClass", "spec": h100}
            if path == "/apis/resource.k8s.io/v1/deviceclasses/secret.example.com":
                raise HubError("forbidden", status=403)
            return None

    pod = {"metadata": {"name": "p"}, "spec": {"resourceClaims": [
        {"name": name, "resourceClaimName": name} for name in ("own", "hidden", "nvidia")]}}
    def lookup(_kind: str, name: str) -> dict[str, Any] | None:
        return specs.get(name)

    classes = await hub_device_classes(Hub(), pod, lookup)  # type: ignore[arg-type]
    assert sorted(asked) == [f"/apis/resource.k8s.io/v1/deviceclasses/{name}"
                             for name in ("gpu.nvidia.com", "h100.example.com", "secret.example.com")]
    assert (classes("h100.example.com"), classes("secret.example.com"), classes("gpu.nvidia.com")) == (h100, None, None)
    fields = _fields(render_pod("onprem", pod, [], [], lookup, (), classes, now=NOW))
    assert fields["GPU request"] == "nvidia.com/gpu=3 (DRA claim own, shared),nvidia.com/gpu=2 (DRA claim nvidia, shared)"
    assert _fields(render_pod("onprem", pod, [], [], lookup, now=NOW))["GPU request"] == "nvidia.com/gpu=2 (DRA claim nvidia, shared)"


def test_top_pods_has_a_cluster_column_and_gpu_columns_from_dcgm() -> None:
    listing = {"items": [
        {"metadata": {"name": "b", "namespace": "ml"}, "containers": [
            {"usage": {"cpu": "1500000000n", "memory": "2097152Ki"}}, {"usage": {"cpu": "500m", "memory": "1Mi"}}]},
        {"metadata": {"name": "a", "namespace": "ml"}, "containers": [{"usage": {"cpu": "0", "memory": "0"}}]},
    ]}
    devices = {("ml", "b"): [GpuDevice("0", None, 0.8), GpuDevice("1", None, 0.4)]}
    lines = pod_table([("onprem", listing, devices)], all_namespaces=False)
    assert [line.split() for line in lines] == [
        ["CLUSTER", "NAME", "CPU(cores)", "MEMORY(bytes)", "GPUS", "GPU", "DEVICES", "GPU", "UTIL"],
        ["onprem", "a", "0m", "0Mi", "0", "-", "-"],
        ["onprem", "b", "2000m", "2049Mi", "2", "gpu0,gpu1", "60%"],
    ]
    assert pod_table([("onprem", {"items": []}, {})], all_namespaces=True) == []


def test_top_nodes_shows_use_against_allocatable_and_gpus_in_use() -> None:
    listing = {"items": [{"metadata": {"name": "n1"}, "usage": {"cpu": "8", "memory": "32Gi"}}]}
    nodes: dict[str, Any] = {"n1": {"status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}}
    utilization = {"nodes": [{"name": "n1", "devices": [
        {"gpu": 0, "pod": "p", "namespace": "ml", "utilization": 0.5}, {"gpu": 1, "utilization": 0.0}]}]}
    lines = node_table([("onprem", listing, nodes, utilization)])
    assert lines[1].split() == ["onprem", "n1", "8000m", "12%", "32768Mi", "12%", "1/2", "50%"]
    assert millicores("250m") == 250 and millicores("1000000n") == 1 and mebibytes("1Gi") == 1024


def test_simulated_usage_grows_with_gpu_utilization_within_the_request() -> None:
    container = {"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    idle, busy = container_usage(container, 0.0), container_usage(container, 1.0)
    assert idle[0] < busy[0] <= 2000 and idle[1] < busy[1] <= 1024**3
    assert container_usage({}, 1.0)[0] == IDLE_CPU_MILLI
    assert node_usage([idle, busy])[0] == SYSTEM_CPU_MILLI + idle[0] + busy[0]
