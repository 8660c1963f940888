"""Split the Alibaba ``openb`` node list into a fleet of member clusters for the what-if.

``gpufed whatif split NODES.csv --clusters N --by model|random|onprem-cloud`` writes a fleet
YAML (the format of :mod:`simulator.profile`). Each cluster gets one node group that keeps
the trace's own nodes (``fromCsv`` naming the source file, ``csvNodes`` listing exactly the
nodes of that cluster, so node names stay the trace's ``sn``):

* ``model`` -- GPU nodes grouped by GPU model. With fewer clusters than models, models are
  packed largest first onto the cluster with the fewest GPUs; with more, the cluster with
  the most GPUs is halved (its nodes in a seeded order) until there are N. CPU-only nodes
  (``openb_node_list_all_node.csv`` has 310) have no model: they are dealt, in a seeded
  order, to the clusters in proportion to their GPUs (largest remainder), so each cluster
  keeps about the fleet's CPU-only nodes per GPU.
* ``random`` -- nodes (GPU and CPU-only alike) in a seeded random order dealt round-robin:
  N clusters of equal size (within one node), each a sample of the whole fleet.
* ``onprem-cloud`` -- one on-prem cluster (``provider: onprem``, tier 0) with half of the
  nodes (GPU and CPU-only alike) drawn at random, and N-1 cloud clusters (``aws``, ``gcp``,
  ``azure`` in turn, tier 1) sharing the rest round-robin. Needs N >= 2.

Prices ($ per GPU-hour, :data:`CLOUD_PRICES` / :data:`ONPREM_PRICES`) are assumptions to
edit: cloud prices near public on-demand list prices for one GPU of the model, on-prem
prices an amortised cost of about a third of that. The trace's G2/G3 models are undisclosed;
they are priced like a V100.

Source data: Alibaba clusterdata ``cluster-trace-gpu-v2023`` (CC BY 4.0), Weng et al.,
"Beware of Fragmentation", USENIX ATC '23.

In: the node rows (:func:`simulator.profile.read_alibaba_nodes`). Out: a fleet document
(a dict ready for ``yaml.safe_dump``). Deterministic for a seed; every node lands in exactly
one cluster. Pure; no I/O.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Final

from simulator.profile import ALIBABA_MODELS, CsvNode

CLOUD_PROVIDERS: Final = ("aws", "gcp", "azure")

#: $ per GPU-hour on demand, by GFD product label (assumptions; see the module docstring).
CLOUD_PRICES: Final[dict[str, float]] = {
    "Tesla-T4": 0.53,
    "Tesla-P100-PCIE-16GB": 1.46,
    "Tesla-V100-SXM2-16GB": 3.06,
    "Tesla-V100-SXM2-32GB": 3.90,
    "NVIDIA-A10": 1.01,
    "Alibaba-G2": 3.06,
    "Alibaba-G3": 3.06,
}
#: Amortised on-prem $ per GPU-hour (assumptions).
ONPREM_PRICES: Final[dict[str, float]] = {
    product: round(price / 3, 2) for product, price in CLOUD_PRICES.items()
}


class SplitBy(StrEnum):
    MODEL = "model"
    RANDOM = "random"
    ONPREM_CLOUD = "onprem-cloud"


class SplitError(ValueError):
    """A split that cannot be made (too few nodes or clusters for the mode)."""


def _pricing(nodes: Sequence[CsvNode], prices: dict[str, float]) -> dict[str, float]:
    products = sorted({ALIBABA_MODELS[n.model][0] for n in nodes if n.gpuCount})
    return {p: prices[p] for p in products if p in prices}


def _cluster(
    name: str, nodes: Sequence[CsvNode], *, csv_path: str, provider: str, tier: int, prices: dict[str, float]
) -> dict[str, Any]:
    return {
        "name": name,
        "provider": provider,
        "tier": tier,
        "pricing": _pricing(nodes, prices),
        "nodeGroups": [
            {
                "name": "nodes",
                "fromCsv": {"path": csv_path},
                "csvNodes": [n.model_dump(mode="json") for n in sorted(nodes, key=lambda n: n.name)],
            }
        ],
    }


def _gpus(nodes: Sequence[CsvNode]) -> int:
    return sum(n.gpuCount for n in nodes)


def _by_model(nodes: Sequence[CsvNode], clusters: int, rng: random.Random) -> list[tuple[str, list[CsvNode]]]:
    cpu_only = [n for n in nodes if not n.gpuCount]
    if len(cpu_only) == len(nodes):
        raise SplitError("--by model needs GPU nodes: every node is CPU-only")
    groups = _by_gpu_model([n for n in nodes if n.gpuCount], clusters, rng)
    _deal_by_gpus(groups, cpu_only, rng)
    return groups


def _deal_by_gpus(groups: Sequence[tuple[str, list[CsvNode]]], nodes: Sequence[CsvNode], rng: random.Random) -> None:
    """Deal ``nodes`` (in a seeded order) to ``groups`` in proportion to their GPUs, largest
    remainder first (ties to the earlier group)."""
    order = list(nodes)
    rng.shuffle(order)
    total = sum(_gpus(members) for _, members in groups)
    quotas = [len(order) * _gpus(members) / total for _, members in groups]
    counts = [int(q) for q in quotas]
    for index in sorted(range(len(groups)), key=lambda i: (counts[i] - quotas[i], i))[: len(order) - sum(counts)]:
        counts[index] += 1
    start = 0
    for (_, members), count in zip(groups, counts, strict=True):
        members.extend(order[start : start + count])
        start += count


def _by_gpu_model(nodes: Sequence[CsvNode], clusters: int, rng: random.Random) -> list[tuple[str, list[CsvNode]]]:
    by_model: dict[str, list[CsvNode]] = defaultdict(list)
    for node in nodes:
        by_model[node.model].append(node)
    models = sorted(by_model, key=lambda m: (-_gpus(by_model[m]), m))
    if clusters <= len(models):
        bins: list[tuple[list[str], list[CsvNode]]] = [([], []) for _ in range(clusters)]
        for model in models:
            target = min(bins, key=lambda b: (_gpus(b[1]), len(b[0])))
            target[0].append(model)
            target[1].extend(by_model[model])
        return [("models-" + "-".join(m.lower() for m in names), members) for names, members in bins]
    groups: list[tuple[str, list[CsvNode]]] = [(f"model-{m.lower()}", list(by_model[m])) for m in models]
    while len(groups) < clusters:
        groups.sort(key=lambda g: (-_gpus(g[1]), g[0]))
        name, members = groups[0]
        if len(members) < 2:
            raise SplitError(f"cannot make {clusters} clusters by model: every cluster is down to one node")
        members = sorted(members, key=lambda n: n.name)
        rng.shuffle(members)
        half = len(members) // 2
        groups[0] = (f"{name}-a", members[:half])
        groups.append((f"{name}-b", members[half:]))
    return sorted(groups, key=lambda g: g[0])


def split_nodes(
    nodes: Sequence[CsvNode], *, clusters: int, by: SplitBy, seed: int = 0, csv_path: str
) -> dict[str, Any]:
    """The fleet document for ``nodes`` split into ``clusters`` clusters (see the module docstring)."""
    if clusters < 1:
        raise SplitError("--clusters must be at least 1")
    if len(nodes) < clusters:
        raise SplitError(f"cannot split {len(nodes)} node(s) into {clusters} clusters")
    rng = random.Random(seed)
    ordered = sorted(nodes, key=lambda n: n.name)
    out: list[dict[str, Any]] = []
    if by is SplitBy.MODEL:
        for name, members in _by_model(ordered, clusters, rng):
            out.append(
                _cluster(name, members, csv_path=csv_path, provider="onprem", tier=0, prices=ONPREM_PRICES)
            )
    elif by is SplitBy.RANDOM:
        rng.shuffle(ordered)
        width = len(str(clusters - 1))
        for index in range(clusters):
            members = ordered[index::clusters]
            out.append(
                _cluster(
                    f"cluster-{index:0{width}d}",
                    members,
                    csv_path=csv_path,
                    provider="onprem",
                    tier=0,
                    prices=ONPREM_PRICES,
                )
            )
    else:
        if clusters < 2:
            raise SplitError("--by onprem-cloud needs at least 2 clusters (one on-prem, the rest cloud)")
        rng.shuffle(ordered)
        half = len(ordered) // 2
        onprem, cloud = ordered[:half], ordered[half:]
        out.append(
            _cluster("onprem", onprem, csv_path=csv_path, provider="onprem", tier=0, prices=ONPREM_PRICES)
        )
        clouds = clusters - 1
        for index in range(clouds):
            provider = CLOUD_PROVIDERS[index % len(CLOUD_PROVIDERS)]
            out.append(
                _cluster(
                    f"cloud-{provider}-{index + 1}",
                    cloud[index::clouds],
                    csv_path=csv_path,
                    provider=provider,
                    tier=1,
                    prices=CLOUD_PRICES,
                )
            )
    return {"clusters": out}
