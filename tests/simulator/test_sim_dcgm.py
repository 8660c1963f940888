"""The simulated dcgm-exporter page parses as Prometheus text and carries the exporter's labels."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simulator.dcgm import PodDevice, render_metrics
from simulator.devices import NodeInventory
from simulator.nodes import build_inventory
from simulator.profile import parse_fleet


def _inventory(gpu: dict[str, Any]) -> NodeInventory:
    profile = parse_fleet(
        {"clusters": [{"name": "c", "nodeGroups": [{"name": "g", "cpu": 8, "memoryGiB": 64, "gpu": gpu}]}]}
    ).clusters[0]
    return next(iter(build_inventory(profile).values()))


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge"
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_whole_gpus_with_and_without_pods() -> None:
    inventory = _inventory({"product": "NVIDIA-A100-SXM4-80GB", "count": 2})
    gpu0 = inventory.devices["nvidia.com/gpu"][0]
    text = render_metrics(
        [inventory], [PodDevice(inventory.node, gpu0.id, "ml", "train-0", "main")], {"ml/train-0": 0.75}
    )
    samples = _samples(text)
    util = {labels["gpu"]: (labels, value) for labels, value in samples["DCGM_FI_DEV_GPU_UTIL"]}
    assert util["0"][1] == 75 and util["1"][1] == 0
    labels0 = util["0"][0]
    assert labels0["pod"] == "train-0" and labels0["namespace"] == "ml" and labels0["container"] == "main"
    assert labels0["modelName"] == "NVIDIA A100-SXM4-80GB"
    assert labels0["Hostname"] == inventory.node
    assert labels0["UUID"] == gpu0.id
    assert "pod" not in util["1"][0]
    active = {labels["gpu"]: value for labels, value in samples["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]}
    assert active == {"0": pytest.approx(0.75), "1": 0.0}
    used = {labels["gpu"]: value for labels, value in samples["DCGM_FI_DEV_FB_USED"]}
    free = {labels["gpu"]: value for labels, value in samples["DCGM_FI_DEV_FB_FREE"]}
    assert used["0"] > 0 and used["1"] == 0
    assert used["0"] + free["0"] == 81920


def test_exact_line_format() -> None:
    inventory = _inventory({"product": "Tesla-T4", "count": 1})
    device = inventory.devices["nvidia.com/gpu"][0]
    text = render_metrics([inventory], [PodDevice(inventory.node, device.id, "ns", "p", "c")], {"ns/p": 0.5})
    lines = text.splitlines()
    assert lines[0] == "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %)."
    assert lines[1] == "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"
    assert lines[2] == (
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{device.id}",pci_bus_id="00000000:07:00.0",device="nvidia0",'
        f'modelName="Tesla T4",Hostname="{inventory.node}",DCGM_FI_DRIVER_VERSION="550.90.07",'
        'container="c",namespace="ns",pod="p"} 50'
    )
    assert 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0"' in text and text.rstrip().endswith("} 0.500000")
    assert text.endswith("\n")


def test_mig_instances_have_their_own_series_and_no_gpu_util() -> None:
    inventory = _inventory(
        {
            "product": "NVIDIA-H100-80GB-HBM3",
            "count": 1,
            "mig": {"strategy": "mixed", "layout": ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]},
        }
    )
    three = inventory.devices["nvidia.com/mig-3g.40gb"][0]
    text = render_metrics([inventory], [PodDevice(inventory.node, three.id, "ns", "p", "c")], {"ns/p": 0.4})
    samples = _samples(text)
    assert samples.get("DCGM_FI_DEV_GPU_UTIL", []) == []
    active = samples["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert sorted(labels["GPU_I_PROFILE"] for labels, _ in active) == [
        "1g.10gb",
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
    ]
    assert all(labels["UUID"] == inventory.gpus[0].uuid for labels, _ in active)
    by_profile = {labels["GPU_I_PROFILE"]: (labels, value) for labels, value in active}
    labels, value = by_profile["3g.40gb"]
    assert value == pytest.approx(0.4) and labels["pod"] == "p"
    assert labels["GPU_I_ID"] == str(three.mig.gi_id if three.mig else "")
    assert "pod" not in by_profile["2g.20gb"][0]


def test_time_sliced_gpu_reports_each_sharing_pod() -> None:
    inventory = _inventory({"product": "Tesla-T4", "count": 1, "sharing": {"replicas": 4}})
    devices = inventory.devices["nvidia.com/gpu"]
    uses = [PodDevice(inventory.node, devices[i].id, "ns", f"p{i}", "c") for i in range(2)]
    text = render_metrics([inventory], uses, {"ns/p0": 0.3, "ns/p1": 0.5})
    samples = _samples(text)["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert sorted(labels["pod"] for labels, _ in samples) == ["p0", "p1"]
    assert {labels["vgpu"] for labels, _ in samples} == {"0", "1"}
    assert all(value == pytest.approx(0.8) for _, value in samples)


def test_empty_inventory_still_renders_headers() -> None:
    samples = list(text_string_to_metric_families(render_metrics([], [], {})))
    assert {f.name for f in samples} == {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    }
