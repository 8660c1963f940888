"""Small fleets for the what-if tests, built in code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simulator.profile import Fleet, parse_fleet


def t4_cluster(name: str, *, nodes: int, gpus: int, provider: str = "onprem", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "provider": provider,
        "pricing": {"Tesla-T4": 1.0 if provider == "onprem" else 3.0},
        "nodeGroups": [
            {
                "name": "gpu",
                "count": nodes,
                "cpu": 32,
                "memoryGiB": 128,
                "gpu": {"product": "Tesla-T4", "count": gpus},
            }
        ],
        "simulation": {"scoring": "best-fit"},
        **extra,
    }


def make_fleet(*clusters: dict[str, Any]) -> Fleet:
    return parse_fleet({"clusters": list(clusters)})


MIG_CLUSTER: dict[str, Any] = {
    "name": "mig",
    "nodeGroups": [
        {
            "name": "a100",
            "count": 1,
            "cpu": 64,
            "memoryGiB": 512,
            "gpu": {
                "product": "NVIDIA-A100-SXM4-80GB",
                "count": 1,
                "mig": {"strategy": "mixed", "layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
            },
        }
    ],
}


def run_files(directory: Path, *, trace: str, quotas: list[dict[str, Any]]) -> tuple[Path, Path, Path]:
    """The files of a ``gpufed whatif run`` with quotas: one 4-GPU T4 node, the trace CSV, the quotas YAML."""
    fleet, trace_csv, quotas_yaml = directory / "fleet.yaml", directory / "trace.csv", directory / "quotas.yaml"
    fleet.write_text(yaml.safe_dump({"clusters": [t4_cluster("onprem", nodes=1, gpus=4)]}))
    trace_csv.write_text(trace)
    quotas_yaml.write_text(yaml.safe_dump_all(quotas))
    return fleet, trace_csv, quotas_yaml
