"""Trace variants in the manner of the FGD paper: each kind reaches its share, seeded."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufed.cli import main
from simulator.whatif.trace import Job, parse_trace
from simulator.whatif.variants import VariantError, VariantKind, demand_summary, make_variant, to_openb_csv


def trace() -> list[Job]:
    jobs = []
    for i in range(40):
        jobs.append(Job(f"w{i}", i, 100, 1, 1000, cpu_milli=8000, memory_mib=1024))
        jobs.append(Job(f"s{i}", i, 100, 1, 250 + 10 * i, cpu_milli=4000))
    for i in range(5):
        jobs.append(Job(f"m{i}", i, 100, 4, 1000, cpu_milli=32000))
        jobs.append(Job(f"c{i}", i, 100, 0, 0, cpu_milli=16000))
    return jobs


@pytest.mark.parametrize(
    ("kind", "percent"),
    [(VariantKind.GPUSHARE, 20), (VariantKind.GPUSHARE, 100), (VariantKind.MULTIGPU, 50), (VariantKind.CPU, 250)],
)
def test_variant_reaches_its_share_and_keeps_gpu_demand(kind: VariantKind, percent: int) -> None:
    jobs = trace()
    variant = make_variant(jobs, kind, percent, seed=7)
    summary = demand_summary(variant)
    # resampling stops once the share is reached: within one task's worth of the target;
    # cpu X is X/10 % of the tasks (the paper's file names)
    target = percent if kind is not VariantKind.CPU else percent / 10
    assert summary[str(kind)] == pytest.approx(target, abs=4 if kind is not VariantKind.CPU else 1)
    if kind is not VariantKind.CPU:
        assert summary["gpus"] == pytest.approx(demand_summary(jobs)["gpus"], rel=0.05)
    else:
        assert sorted(j.name for j in variant if j.num_gpu) == sorted(j.name for j in jobs if j.num_gpu)
    assert len({j.name for j in variant}) == len(variant)
    assert variant == make_variant(jobs, kind, percent, seed=7)
    assert variant != make_variant(jobs, kind, percent, seed=8)


def test_gpuspec_constrains_that_share_of_gpu_tasks() -> None:
    variant = make_variant(trace(), VariantKind.GPUSPEC, 33, seed=1, model_gpus={"Tesla-T4": 30, "A10": 10})
    gpu = [j for j in variant if j.num_gpu]
    constrained = [j for j in gpu if j.gpu_products]
    assert len(constrained) == round(len(gpu) * 0.33)
    assert {p for j in constrained for p in j.gpu_products} <= {"Tesla-T4", "A10"}


def test_out_of_range_is_an_error() -> None:
    with pytest.raises(VariantError, match="multigpu takes a percentage from 20 to 50, not 60"):
        make_variant(trace(), VariantKind.MULTIGPU, 60, seed=1)


def test_variant_round_trips_through_openb_csv() -> None:
    variant = make_variant(trace(), VariantKind.GPUSHARE, 60, seed=3)
    fmt, parsed = parse_trace(to_openb_csv(variant).splitlines(keepends=True))
    assert str(fmt) == "openb"
    assert [(j.name, j.num_gpu, j.gpu_milli, j.cpu_milli) for j in parsed] == [
        (j.name, j.num_gpu, j.gpu_milli, j.cpu_milli) for j in variant
    ]


def test_variant_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "t.csv"
    source.write_text(to_openb_csv(trace()))
    assert main(["whatif", "variant", str(source), "--kind", "cpu", "--percent", "100", "--seed", "2"]) == 0
    _, jobs = parse_trace(capsys.readouterr().out.splitlines(keepends=True))
    assert demand_summary(jobs)["cpu"] == pytest.approx(10, abs=1)
    assert main(["whatif", "variant", str(source), "--kind", "gpuspec", "--percent", "10"]) == 1
    assert "pass the nodes CSV" in capsys.readouterr().err


DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "data" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"


@pytest.mark.skipif(not DEFAULT_TRACE.exists(), reason="the default openb trace is not shipped here")
@pytest.mark.parametrize(("percent", "published"), [(50, 375), (250, 2356)])
def test_cpu_variant_matches_alibabas_published_lists(percent: int, published: int) -> None:
    # Alibaba's openb_pod_list_cpu050 / cpu250 keep the default trace's 7,064 GPU tasks and
    # hold 375 / 2,356 CPU-only tasks (5 % / 25 % of the tasks)
    _, jobs = parse_trace(DEFAULT_TRACE.read_text().splitlines(keepends=True))
    variant = make_variant(jobs, VariantKind.CPU, percent, seed=42)
    cpu_only = sum(1 for j in variant if not j.num_gpu)
    assert sum(1 for j in variant if j.num_gpu) == 7064
    assert cpu_only == pytest.approx(published, abs=4)
