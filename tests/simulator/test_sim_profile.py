"""Fleet/profile validation: what loads, what is refused and how the error names the field."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from simulator.profile import (
    ClusterProfile,
    CsvNode,
    MigStrategy,
    ProfileError,
    UtilizationDistribution,
    load_fleet,
    parse_fleet,
    read_alibaba_nodes,
)
from simulator.scheduling.model import Scoring

ALIBABA_CSV = Path(__file__).resolve().parents[2] / "data" / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
ALIBABA_ALL_CSV = ALIBABA_CSV.with_name("openb_node_list_all_node.csv")


def _cluster(gpu: dict[str, Any] | None, **group: Any) -> dict[str, Any]:
    node_group: dict[str, Any] = {"name": "g", "count": 1, "cpu": 8, "memoryGiB": 64, **group}
    if gpu is not None:
        node_group["gpu"] = gpu
    return {"clusters": [{"name": "c1", "nodeGroups": [node_group]}]}


def test_brief_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        """
clusters:
  - name: onprem-a100
    provider: onprem
    region: eu-west
    labels: {tier: onprem}
    pricing: {NVIDIA-A100-SXM4-80GB: 1.20}
    nodeGroups:
      - name: a100-mig
        count: 4
        cpu: 96
        memoryGiB: 1024
        gpu: {product: NVIDIA-A100-SXM4-80GB, count: 8, memoryMiB: 81920,
              mig: {strategy: mixed, layout: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}}
      - name: a100-whole
        count: 4
        cpu: 96
        memoryGiB: 1024
        gpu: {product: NVIDIA-A100-SXM4-80GB, count: 8, memoryMiB: 81920}
""",
        encoding="utf-8",
    )
    fleet = load_fleet(path)
    cluster = fleet.cluster("onprem-a100")
    assert cluster.provider == "onprem"
    assert cluster.region == "eu-west"
    assert cluster.pricing == {"NVIDIA-A100-SXM4-80GB": 1.2}
    mig = cluster.nodeGroups[0].gpu
    assert mig is not None and mig.mig_strategy is MigStrategy.MIXED
    assert cluster.simulation.scoring is Scoring.LEAST_ALLOCATED


@pytest.mark.parametrize(
    ("gpu", "fragment"),
    [
        (
            {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 1,
                "mig": {"strategy": "mixed", "layout": ["4g.40gb", "4g.40gb"]},
            },
            "at most 1 x 4g.40gb",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 1,
                "mig": {"strategy": "mixed", "layout": ["4g.40gb", "3g.40gb", "1g.10gb"]},
            },
            "8 compute slices, more than the 7",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 1,
                "mig": {"strategy": "mixed", "layout": ["3g.40gb", "3g.40gb", "1g.10gb"]},
            },
            "9 memory slices, more than the 8",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 1,
                "mig": {"strategy": "mixed", "layout": ["1g.5gb"]},
            },
            "has no MIG profile '1g.5gb'",
        ),
        (
            {"product": "Tesla-T4", "count": 1, "mig": {"strategy": "mixed", "layout": ["1g.10gb"]}},
            "is not MIG-capable",
        ),
        ({"product": "Acme-X1", "count": 1}, "memoryMiB is required"),
        (
            {
                "product": "NVIDIA-H100-80GB-HBM3",
                "count": 1,
                "mig": {"strategy": "none", "layout": ["1g.10gb"]},
            },
            "mig.strategy is none",
        ),
        (
            {
                "product": "NVIDIA-A100-SXM4-40GB",
                "count": 1,
                "mig": {"strategy": "mixed", "layout": ["1g.5gb+me", "1g.5gb+me"]},
            },
            "at most 1 x 1g.5gb+me",
        ),
    ],
)
def test_invalid_gpu_names_field(gpu: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_fleet(_cluster(gpu))
    message = str(info.value)
    assert message.startswith("clusters.0.nodeGroups.0.gpu:")
    assert fragment in message


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"clusters": [{"name": "c1", "nodeGroups": [{"name": "g", "cpu": 4}]}]}, "clusters.0.nodeGroups.0"),
        (
            {
                "clusters": [
                    {"name": "c1", "nodeGroups": [{"name": "g", "cpu": 4, "memoryGiB": 8, "cuont": 2}]}
                ]
            },
            "clusters.0.nodeGroups.0.cuont",
        ),
        ({"clusters": [{"name": "Bad_Name"}]}, "clusters.0.name"),
        ({"clusters": [{"name": "a"}, {"name": "a"}]}, "clusters"),
        (
            {"clusters": [{"name": "a", "simulation": {"scoring": "worst-fit"}}]},
            "clusters.0.simulation.scoring",
        ),
        ({"clusters": []}, "clusters"),
    ],
)
def test_invalid_documents_name_the_field(document: dict[str, Any], path: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_fleet(document)
    assert str(info.value).split(":")[0] == path


@pytest.mark.parametrize(
    ("layout", "invalid"),
    [(["1g.10gb"] * 7, False), (["3g.40gb", "1g.10gb"], True)],
)
def test_single_strategy_with_mixed_layout_warns(layout: list[str], invalid: bool) -> None:
    fleet = parse_fleet(
        _cluster(
            {"product": "NVIDIA-H100-80GB-HBM3", "count": 2, "mig": {"strategy": "single", "layout": layout}}
        )
    )
    cluster = fleet.clusters[0]
    gpu = cluster.nodeGroups[0].gpu
    assert gpu is not None and gpu.mig_invalid is invalid
    assert any("MIG-INVALID" in w for w in cluster.warnings()) is invalid


@pytest.mark.parametrize(
    ("models", "limit", "expected_models", "expected_count"),
    [
        (["T4"], None, {"T4"}, 404),
        (["G2", "V100M32"], None, {"G2", "V100M32"}, 549 + 30),
        (None, 10, {"P100"}, 10),
        (None, None, {"T4", "P100", "V100M16", "V100M32", "A10", "G2", "G3"}, 1213),
    ],
)
def test_from_csv(
    tmp_path: Path,
    models: list[str] | None,
    limit: int | None,
    expected_models: set[str],
    expected_count: int,
) -> None:
    source: dict[str, Any] = {"path": str(ALIBABA_CSV)}
    if models is not None:
        source["models"] = models
    if limit is not None:
        source["limit"] = limit
    fleet = parse_fleet({"clusters": [{"name": "ali", "nodeGroups": [{"name": "openb", "fromCsv": source}]}]})
    nodes = fleet.clusters[0].nodeGroups[0].csvNodes
    assert len(nodes) == expected_count
    assert {n.model for n in nodes} == expected_models


def test_from_csv_relative_path_and_unknown_model(tmp_path: Path) -> None:
    csv_path = tmp_path / "nodes.csv"
    csv_path.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,32768,2,T4\nn2,8000,32768,1,X9\n", encoding="utf-8"
    )
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(
        "clusters:\n- name: a\n  nodeGroups:\n  - {name: g, fromCsv: {path: nodes.csv, limit: 1}}\n",
        encoding="utf-8",
    )
    fleet = load_fleet(fleet_path)
    assert [n.name for n in fleet.clusters[0].nodeGroups[0].csvNodes] == ["n1"]
    fleet_path.write_text(
        "clusters:\n- name: a\n  nodeGroups:\n  - {name: g, fromCsv: {path: nodes.csv}}\n", encoding="utf-8"
    )
    with pytest.raises(ProfileError, match="unknown model 'X9'"):
        load_fleet(fleet_path)


def test_all_node_list_is_the_gpu_list_and_310_cpu_only_nodes() -> None:
    every = read_alibaba_nodes(ALIBABA_ALL_CSV)
    cpu_only = [n for n in every if not n.gpuCount]
    assert (len(every), len(cpu_only)) == (1523, 310)
    assert all(n.model == "" for n in cpu_only)

    def shape(n: CsvNode) -> tuple[int, int, int, str]:
        return n.cpuMilli, n.memoryMiB, n.gpuCount, n.model

    # the GPU rows, in order, are the GPU-node list's (which numbers its nodes afresh)
    assert [shape(n) for n in every if n.gpuCount] == [shape(n) for n in read_alibaba_nodes(ALIBABA_CSV)]
    assert len(read_alibaba_nodes(ALIBABA_ALL_CSV, models=["T4"])) == len(read_alibaba_nodes(ALIBABA_CSV, models=["T4"]))


def test_a_gpu_node_needs_a_model(tmp_path: Path) -> None:
    csv_path = tmp_path / "nodes.csv"
    csv_path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,8000,32768,0,\nn2,8000,32768,2,\n", encoding="utf-8")
    with pytest.raises(ValueError, match="row n2: unknown model ''"):
        read_alibaba_nodes(csv_path)
    csv_path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,8000,32768,0,\n", encoding="utf-8")
    assert [(n.name, n.gpuCount, n.model) for n in read_alibaba_nodes(csv_path)] == [("n1", 0, "")]


def test_load_fleet_reports_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read fleet file"):
        load_fleet(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [\n", encoding="utf-8")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_fleet(bad)


def test_single_cluster_document_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("name: solo\nprovider: aws\n", encoding="utf-8")
    assert load_fleet(path).clusters[0].provider == "aws"


@pytest.mark.parametrize(
    ("spec", "low", "high"),
    [
        ({"mean": 0.6, "stddev": 0.0}, 0.6, 0.6),
        ({"mean": 0.9, "stddev": 0.5}, 0.0, 1.0),
        ({"buckets": [{"min": 0.0, "max": 0.05, "weight": 1}]}, 0.0, 0.05),
        (
            {"buckets": [{"min": 0.0, "max": 0.1, "weight": 1}, {"min": 0.8, "max": 0.9, "weight": 3}]},
            0.0,
            0.9,
        ),
    ],
)
def test_utilization_draws_stay_in_range(spec: dict[str, Any], low: float, high: float) -> None:
    distribution = UtilizationDistribution.model_validate(spec)
    rng = random.Random(7)
    draws = [distribution.draw(rng) for _ in range(200)]
    assert all(low <= d <= high for d in draws)


def test_bucket_weights_shape_the_draws() -> None:
    distribution = UtilizationDistribution.model_validate(
        {"buckets": [{"min": 0.0, "max": 0.1, "weight": 1}, {"min": 0.8, "max": 0.9, "weight": 9}]}
    )
    rng = random.Random(1)
    draws = [distribution.draw(rng) for _ in range(1000)]
    high = sum(1 for d in draws if d >= 0.8)
    assert 800 < high < 980


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({}, "either mean"),
        ({"mean": 0.5, "buckets": [{"min": 0, "max": 1, "weight": 1}]}, "either mean"),
        ({"buckets": []}, "must not be empty"),
        ({"buckets": [{"min": 0.5, "max": 0.1, "weight": 1}]}, "max must be >= min"),
    ],
)
def test_utilization_needs_exactly_one_form(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        UtilizationDistribution.model_validate(spec)


def test_defaults() -> None:
    cluster = ClusterProfile(name="c")
    assert cluster.simulation.startupDelaySeconds == 2.0
    assert cluster.simulation.jobDurationSeconds == 300.0
    assert cluster.simulation.kubernetesVersion.startswith("v1.30.")
