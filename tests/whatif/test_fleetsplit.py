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
