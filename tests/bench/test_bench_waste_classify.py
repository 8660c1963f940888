"""The waste classification benchmark runs at its smallest size and reports each figure (no
speed asserted), with the states its fleet's GPUs end in."""

from __future__ import annotations

from bench import bench_waste_classify
from bench.common import Size, Status


def test_waste_classify_benchmark_reports_its_figures() -> None:
    plan = bench_waste_classify.PLANS[Size.TINY]
    result = bench_waste_classify.run(Size.TINY)
    assert result.status is Status.OK
    assert [figure.name.split(":")[0] for figure in result.figures] == [
        f"{variant}{step}" for variant in ("matched", "one demand waiting")
        for step in ("", ", longest step of a first pass", ", longest step of a next pass")
    ]
    # CPU time advances in the kernel's accounting steps: one short step of the tiny size can read 0.
    assert all(figure.value is not None and figure.value >= 0 for figure in result.figures)
    assert sum(figure.value or 0 for figure in result.figures) > 0
    runs = result.details["cpu_seconds"]
    assert all(len(values) == (1 if "first pass" in name else plan.repeats) for name, values in runs.items())
    states = result.details["gpus_by_state"]
    gpus = plan.clusters * plan.nodes * bench_waste_classify.GPUS_PER_NODE
    # Every demand matched (1 or 2 replicas of one GPU each); with the one that fits no node,
    # every other free GPU is stranded.
    assert states["matched"]["unmet demands"] == 0
    assert plan.demands <= states["matched"]["free-needed"] <= 2 * plan.demands
    assert states["one demand waiting"]["unmet demands"] == 1
    assert states["one demand waiting"]["free-spare"] == 0
    assert sum(v for k, v in states["matched"].items() if k != "unmet demands") == gpus
