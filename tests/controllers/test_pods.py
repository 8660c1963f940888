"""Counting a binding's bound pods in a member's capacity report."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.pods import bound_pods_by_owner, gpu_utilization_by_owner, owner_key
from controlplane.reports.aggregated import aggregate
from controlplane.reports.fleet import DeviceSample, NodeSample, PodRef

from .fleet import bound_pod


def cluster(utilization: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "status": {"utilization": utilization}}


@pytest.mark.parametrize(
    ("utilization", "expected"),
    [
        (None, None),  # an agent that sends no per-pod list
        ({"nodes": []}, None),  # no node listed: nothing can be said about any pod
        ({"nodes": [{"name": "n0", "devices": [], "pods": []}]}, {}),
        (
            {"nodes": [
                {"name": "n0", "pods": [bound_pod("train", index=0), bound_pod("train", index=1)]},
                {"name": "n1", "pods": [bound_pod("train", index=2), bound_pod("eval", kind="Job"),
                                        {"pod": "bare", "namespace": "default", "resources": {"nvidia.com/gpu": 1}}]},
            ]},
            {("default", "Deployment", "train"): 3, ("default", "Job", "eval"): 1},
        ),
        (
            {"nodes": [{"name": "n0", "pods": [bound_pod("train", namespace="a"), bound_pod("train", namespace="b")]}]},
            {("a", "Deployment", "train"): 1, ("b", "Deployment", "train"): 1},
        ),
    ],
)
def test_bound_pods_by_owner(utilization: Any, expected: dict[tuple[str, str, str], int] | None) -> None:
    counted = bound_pods_by_owner(cluster(utilization))
    assert (dict(counted) if counted is not None else None) == expected


def test_bound_pods_by_owner_from_an_aggregated_report() -> None:
    """The current agents' report counts pods per workload, also those no device series names yet."""
    held = DeviceSample("0", "", allocated_to=PodRef("default", "train-abc-x", "Deployment", "train"))
    node = NodeSample("n0", "A100", (held, DeviceSample("1", "")))
    bound = [("default", "Deployment", "train")] * 2 + [("default", "Job", "eval"), ("default", None, None)]
    counted = bound_pods_by_owner(cluster(aggregate([node], bound, sample_time=None)))
    assert counted == {("default", "Deployment", "train"): 2, ("default", "Job", "eval"): 1}
    assert bound_pods_by_owner(cluster(aggregate([], [], sample_time=None))) is None  # no node listed


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ({"kind": "Deployment", "namespace": "ml", "name": "train"}, ("ml", "Deployment", "train")),
        ({"kind": "PyTorchJob", "namespace": "ml", "name": "bert"}, ("ml", "PyTorchJob", "bert")),
        ({"kind": "RayJob", "namespace": "ml", "name": "tune"}, None),  # its pods belong to a RayCluster
        ({"kind": "Deployment", "namespace": "ml"}, None),
    ],
)
def test_owner_key(resource: dict[str, Any], expected: tuple[str, str, str] | None) -> None:
    assert owner_key(resource) == expected


def test_gpu_utilization_by_owner_from_a_per_device_report() -> None:
    """Each pod's utilization is the mean over its devices (percent); pods of two namespaces with
    one name are told apart; a pod no device series names yet has no sample; a pod's labels are
    those the report gives."""
    def device(gpu: int, pod: str, namespace: str, utilization: float | None) -> dict[str, Any]:
        entry: dict[str, Any] = {"gpu": gpu, "uuid": f"GPU-{gpu}", "pod": pod, "namespace": namespace}
        if utilization is not None:
            entry["utilization"] = utilization
        return entry

    report = {"nodes": [{
        "name": "n0",
        "pods": [{**bound_pod("web", namespace="a"), "labels": {"app": "web"}}, bound_pod("web", namespace="b"),
                 bound_pod("web", index=1, namespace="a")],
        "devices": [device(0, "web-0", "a", 0.8), device(1, "web-0", "a", 0.6), device(2, "web-0", "b", 0.1),
                    device(3, "web-1", "a", None)],
    }]}
    found = {owner: (names, {pod: round(value, 6) for pod, value in samples.items()}, labels)
             for owner, (names, samples, labels) in gpu_utilization_by_owner(cluster(report)).items()}
    assert found == {("a", "Deployment", "web"): (["web-0", "web-1"], {"web-0": 70.0}, {"web-0": {"app": "web"}}),
                     ("b", "Deployment", "web"): (["web-0"], {"web-0": 10.0}, {})}


def test_gpu_utilization_by_owner_from_an_aggregated_report() -> None:
    """Without per-device entries, each of a workload's pods gets its measured devices' mean."""
    owner = PodRef("default", "train-abc-x", "Deployment", "train")
    node = NodeSample("n0", "A100", (DeviceSample("0", "", allocated_to=owner, utilization=0.9),
                                     DeviceSample("1", "", allocated_to=owner, utilization=0.5)))
    found = gpu_utilization_by_owner(cluster(aggregate([node], [("default", "Deployment", "train")] * 2, sample_time=None)))
    names, samples, labels = found[("default", "Deployment", "train")]
    assert labels == {}
    assert len(names) == 2 and {pod: round(value, 6) for pod, value in samples.items()} == dict.fromkeys(names, 70.0)
