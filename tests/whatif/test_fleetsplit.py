from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from simulator.profile import CsvNode, parse_fleet
from simulator.whatif.fleetsplit import CLOUD_PRICES, ONPREM_PRICES, SplitBy, SplitError, split_nodes

MODELS = ["G2"] * 6 + ["T4"] * 5 + ["P100"] * 3 + ["V100M32"] * 2


def nodes() -> list[CsvNode]:
    gpus = {"G2": 8, "T4": 2, "P100": 2, "V100M32": 4}
    return [
        CsvNode(name=f"n{i:02d}", cpuMilli=32000, memoryMiB=65536, gpuCount=gpus[m], model=m)
        for i, m in enumerate(MODELS)
    ]


def members(fleet: dict[str, Any]) -> dict[str, list[str]]:
    return {c["name"]: [n["name"] for n in c["nodeGroups"][0]["csvNodes"]] for c in fleet["clusters"]}


@pytest.mark.parametrize(
    ("by", "clusters"),
    [
        (SplitBy.MODEL, 1),
        (SplitBy.MODEL, 2),
        (SplitBy.MODEL, 4),
        (SplitBy.MODEL, 6),
        (SplitBy.RANDOM, 3),
        (SplitBy.ONPREM_CLOUD, 2),
        (SplitBy.ONPREM_CLOUD, 4),
    ],
)
def test_every_node_in_exactly_one_cluster(by: SplitBy, clusters: int) -> None:
    fleet = split_nodes(nodes(), clusters=clusters, by=by, seed=7, csv_path="nodes.csv")
    placed = [n for names in members(fleet).values() for n in names]
    assert len(fleet["clusters"]) == clusters
    assert sorted(placed) == sorted(n.name for n in nodes())
    assert all(names for names in members(fleet).values())
    parsed = parse_fleet(fleet)  # a valid fleet file, nodes kept by name
    assert sum(len(g.csvNodes) for c in parsed.clusters for g in c.nodeGroups) == len(MODELS)


@pytest.mark.parametrize("by", list(SplitBy))
def test_deterministic_for_a_seed(by: SplitBy) -> None:
    one = split_nodes(nodes(), clusters=3, by=by, seed=1, csv_path="x.csv")
    two = split_nodes(nodes(), clusters=3, by=by, seed=1, csv_path="x.csv")
    assert one == two


def test_random_seed_changes_the_split_and_keeps_sizes_even() -> None:
    one = members(split_nodes(nodes(), clusters=4, by=SplitBy.RANDOM, seed=1, csv_path="x"))
    two = members(split_nodes(nodes(), clusters=4, by=SplitBy.RANDOM, seed=2, csv_path="x"))
    assert one != two
    assert sorted(len(v) for v in one.values()) == [4, 4, 4, 4]


def test_by_model_keeps_models_together_when_clusters_are_fewer() -> None:
    fleet = split_nodes(nodes(), clusters=2, by=SplitBy.MODEL, seed=0, csv_path="x")
    by_model = {n.name: n.model for n in nodes()}
    for names in members(fleet).values():
        for model in {by_model[n] for n in names}:
            assert Counter(by_model[n] for n in names)[model] == MODELS.count(model)


def test_onprem_cloud_prices_and_tiers() -> None:
    fleet = split_nodes(nodes(), clusters=3, by=SplitBy.ONPREM_CLOUD, seed=3, csv_path="x")
    onprem, *clouds = fleet["clusters"]
    assert (onprem["name"], onprem["provider"], onprem["tier"]) == ("onprem", "onprem", 0)
    assert len(onprem["nodeGroups"][0]["csvNodes"]) == len(MODELS) // 2
    assert [c["provider"] for c in clouds] == ["aws", "gcp"]
    assert all(c["tier"] == 1 for c in clouds)
    for cluster, table in ((onprem, ONPREM_PRICES), *((c, CLOUD_PRICES) for c in clouds)):
        assert cluster["pricing"] and all(table[p] == v for p, v in cluster["pricing"].items())
    assert all(ONPREM_PRICES[p] < CLOUD_PRICES[p] for p in CLOUD_PRICES)


@pytest.mark.parametrize(
    ("by", "clusters", "message"),
    [
        (SplitBy.ONPREM_CLOUD, 1, "at least 2 clusters"),
        (SplitBy.RANDOM, 17, "cannot split 16 node(s)"),
        (SplitBy.MODEL, 0, "at least 1"),
    ],
)
def test_impossible_splits_say_why(by: SplitBy, clusters: int, message: str) -> None:
    with pytest.raises(SplitError, match=message.replace("(", r"\(").replace(")", r"\)")):
        split_nodes(nodes(), clusters=clusters, by=by, csv_path="x")


def with_cpu_only(count: int) -> list[CsvNode]:
    return nodes() + [
        CsvNode(name=f"c{i:02d}", cpuMilli=96000, memoryMiB=524288, gpuCount=0, model="") for i in range(count)
    ]


def test_by_model_deals_cpu_only_nodes_in_proportion_to_gpus() -> None:
    # GPUs: G2 48, T4 10, V100M32 8, P100 6 (72). Nine CPU-only nodes: quotas 6.0, 1.25, 1.0,
    # 0.75 -> 6, 1, 1, 0 and the one left to the largest remainder (P100's 0.75)
    fleet = split_nodes(with_cpu_only(9), clusters=4, by=SplitBy.MODEL, seed=5, csv_path="x")
    cpu_only = {name: sum(1 for n in names if n.startswith("c")) for name, names in members(fleet).items()}
    assert cpu_only == {"models-g2": 6, "models-t4": 1, "models-v100m32": 1, "models-p100": 1}
    placed = sorted(n for names in members(fleet).values() for n in names)
    assert placed == sorted(n.name for n in with_cpu_only(9))
    assert all(c["pricing"] for c in fleet["clusters"])  # priced by their GPU models only
    parse_fleet(fleet)


@pytest.mark.parametrize("by", [SplitBy.RANDOM, SplitBy.ONPREM_CLOUD])
def test_cpu_only_nodes_are_dealt_like_any_node(by: SplitBy) -> None:
    fleet = split_nodes(with_cpu_only(8), clusters=4, by=by, seed=5, csv_path="x")
    placed = [n for names in members(fleet).values() for n in names]
    assert sorted(placed) == sorted(n.name for n in with_cpu_only(8))
    parse_fleet(fleet)


def test_by_model_needs_gpu_nodes() -> None:
    cpu_only = [n for n in with_cpu_only(3) if not n.gpuCount]
    with pytest.raises(SplitError, match="every node is CPU-only"):
        split_nodes(cpu_only, clusters=1, by=SplitBy.MODEL, csv_path="x")
