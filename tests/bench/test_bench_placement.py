"""The placement benchmark's own options: the node list, the seed and the traces it runs."""

from __future__ import annotations

import pytest

from bench import bench_placement_quality as placement
from bench.common import BenchmarkResult, Size
from policies.models import Placement

pytestmark = pytest.mark.skipif(
    not placement.ALL_NODES.exists() or not placement.TRACE.exists(), reason="the openb data files are not here"
)


def test_node_lists_and_their_sizes() -> None:
    gpu = placement.inputs(Size.QUICK, placement.NODES)
    every = placement.inputs(Size.QUICK, placement.ALL_NODES)
    assert gpu is not None and every is not None
    # every fourth of the 1,213 GPU nodes; with `all`, every fourth of the 310 CPU-only ones too
    assert (len(gpu[0]), sum(1 for n in gpu[0] if not n.gpuCount)) == (304, 0)
    assert (len(every[0]), sum(1 for n in every[0] if not n.gpuCount)) == (382, 78)
    assert sum(n.gpuCount for n in gpu[0]) == sum(n.gpuCount for n in every[0])


def test_options_reach_the_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[tuple[Size, str, int, tuple[str, ...], dict[str, object]]] = []
    real = placement.run

    def spy(
        size: Size, *, node_list: str, seed: int, only: tuple[str, ...], placement: Placement | None
    ) -> BenchmarkResult:
        tiered = placement.replica_scheduling.tiered_overflow if placement and placement.replica_scheduling else None
        seen.append((size, node_list, seed, only, tiered.model_dump(by_alias=True, exclude_none=True) if tiered else {}))
        return real(size, node_list=node_list, seed=seed, only=only, placement=placement)

    monkeypatch.setattr(placement, "run", spy)
    assert placement.main(["--size", "tiny", "--nodes", "all", "--seed", "7", "--traces", "cpu250"]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-scarcity-steering"]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-packing-hints"]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-share-remainder-hints"]) == 0
    hints = ["--packing-hints-scope", "AllMembers", "--packing-hints-multi-gpu-percent", "0"]
    assert placement.main(["--size", "tiny", "--traces", "cpu250", *hints]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-node-shape-scarcity"]) == 0
    both_off = ["--no-scarcity-steering", "--no-node-shape-scarcity"]
    assert placement.main(["--size", "tiny", "--traces", "cpu250", *both_off]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-node-shapes-by-member-scoring"]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-rare-node-steering"]) == 0
    assert placement.main(["--size", "tiny", "--traces", "cpu250", "--no-share-fit-ties"]) == 0
    assert seen == [
        (Size.TINY, "all", 7, ("cpu250",), {}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"scarcitySteering": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"packingHints": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"shareRemainderHints": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"packingHintsScope": "AllMembers", "packingHintsMultiGPUPercent": 0.0}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"nodeShapeScarcity": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"scarcitySteering": False, "nodeShapeScarcity": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"nodeShapesByMemberScoring": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"rareNodeSteering": False}),
        (Size.TINY, "gpu", 42, ("cpu250",), {"shareFitTies": False}),
    ]
    assert "| default |" not in capsys.readouterr().out  # tiny has only the default trace: nothing ran
    with pytest.raises(SystemExit):
        placement.main(["--nodes", "some"])
