"""Trace variants of an openb pod list, in the manner of the FGD paper's evaluation (ATC '23, §6).

The paper evaluates on the default trace and on variants that stress one kind of demand;
Alibaba published 24 such pod lists, but not the generator. This module rebuilds them from
the default trace with a seeded generator, one kind at a time:

* ``gpushare X`` -- GPU-sharing tasks (a share of one GPU) bring X % of the GPU demand
  (thousandths of a GPU); the other GPU tasks bring the rest. Both groups are resampled
  from the trace with replacement until each reaches its share of the trace's own GPU
  demand, so the total GPU demand stays that of the trace. CPU-only tasks are kept.
* ``multigpu X`` -- the same with multi-GPU tasks (``num_gpu`` >= 2) against the others.
* ``gpuspec X`` -- X % of the GPU tasks (a seeded draw) must run on one GPU model, drawn
  per task from the node list's models weighted by their GPU counts (the trace's own
  constraints are cleared first, so X is exact).
* ``cpu X`` -- CPU-only tasks make up X/10 % of the tasks (the paper's file names:
  ``openb_pod_list_cpu050`` has 5 % CPU-only tasks, ``cpu250`` 25 %; the default trace has
  13.3 %), drawn from the trace's CPU-only tasks with replacement; the GPU tasks are kept.
  Alibaba's ``cpu050`` and ``cpu250`` lists hold 375 and 2,356 CPU-only tasks beside the
  default trace's 7,064 GPU tasks; this draws 372 and 2,355.

Resampled tasks keep their own times and get a ``-vN`` suffix when a task is drawn again.
In: :class:`~simulator.whatif.trace.Job` lists; out: jobs, and CSV text in the openb
format (:func:`to_openb_csv`). Pure; the seed makes the output reproducible.
"""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum

from simulator.profile import ALIBABA_MODELS
from simulator.whatif.trace import MILLI_PER_GPU, Job


class VariantKind(StrEnum):
    GPUSHARE = "gpushare"
    MULTIGPU = "multigpu"
    GPUSPEC = "gpuspec"
    CPU = "cpu"


#: The paper's ranges, in percent.
RANGES: Mapping[VariantKind, tuple[int, int]] = {
    VariantKind.GPUSHARE: (20, 100),
    VariantKind.MULTIGPU: (20, 50),
    VariantKind.GPUSPEC: (5, 33),
    VariantKind.CPU: (50, 250),
}
#: The variants the placement benchmark runs (the paper's, one low and one high per kind).
BENCH_VARIANTS: tuple[tuple[VariantKind, int], ...] = (
    (VariantKind.GPUSHARE, 40),
    (VariantKind.GPUSHARE, 100),
    (VariantKind.MULTIGPU, 20),
    (VariantKind.MULTIGPU, 50),
    (VariantKind.GPUSPEC, 10),
    (VariantKind.GPUSPEC, 33),
    (VariantKind.CPU, 50),
    (VariantKind.CPU, 250),
)


class VariantError(ValueError):
    """A variant that cannot be built from this trace."""


def check_percent(kind: VariantKind, percent: int) -> None:
    low, high = RANGES[kind]
    if not low <= percent <= high:
        raise VariantError(f"{kind} takes a percentage from {low} to {high}, not {percent}")


def make_variant(
    jobs: Sequence[Job], kind: VariantKind, percent: int, *, seed: int, model_gpus: Mapping[str, int] | None = None
) -> list[Job]:
    """The ``kind`` variant of ``jobs`` at ``percent`` (see the module docstring)."""
    check_percent(kind, percent)
    rng = random.Random(f"{seed}:{kind}:{percent}")
    if kind is VariantKind.GPUSPEC:
        return _constrain(jobs, percent, rng, model_gpus or {})
    cpu_only = [j for j in jobs if not j.num_gpu]
    gpu = [j for j in jobs if j.num_gpu]
    if kind is VariantKind.CPU:
        if not cpu_only:
            raise VariantError("the trace has no CPU-only tasks to sample")
        share = percent / 1000
        count = round(share * len(gpu) / (1 - share))
        return _sorted(gpu + _draw(cpu_only, count, lambda j: 1, rng, Counter()))
    chosen: Callable[[Job], bool] = (lambda j: j.fractional) if kind is VariantKind.GPUSHARE else (lambda j: j.num_gpu >= 2)
    group = [j for j in gpu if chosen(j)]
    rest = [j for j in gpu if not chosen(j)]
    if not group or (percent < 100 and not rest):
        raise VariantError(f"the trace lacks the tasks a {kind} variant resamples")
    total = sum(j.gpu_milli_total for j in gpu)
    drawn: Counter[str] = Counter()
    out = list(cpu_only)
    out += _draw(group, percent / 100 * total, lambda j: j.gpu_milli_total, rng, drawn)
    if percent < 100:
        out += _draw(rest, (100 - percent) / 100 * total, lambda j: j.gpu_milli_total, rng, drawn)
    return _sorted(out)


def _draw(pool: Sequence[Job], target: float, weight: Callable[[Job], int], rng: random.Random, drawn: Counter[str]) -> list[Job]:
    out: list[Job] = []
    amount = 0.0
    while amount < target:
        job = pool[rng.randrange(len(pool))]
        drawn[job.name] += 1
        count = drawn[job.name]
        out.append(job if count == 1 else replace(job, name=f"{job.name}-v{count - 1}"))
        amount += max(weight(job), 1)
    return out


def _constrain(jobs: Sequence[Job], percent: int, rng: random.Random, model_gpus: Mapping[str, int]) -> list[Job]:
    models = sorted(m for m, n in model_gpus.items() if n > 0)
    if not models:
        raise VariantError("gpuspec needs the node list's GPU models (pass the nodes CSV)")
    weights = [model_gpus[m] for m in models]
    gpu_names = [j.name for j in jobs if j.num_gpu]
    picked = set(rng.sample(gpu_names, round(len(gpu_names) * percent / 100)))
    out = []
    for job in jobs:
        if job.name in picked:
            out.append(replace(job, gpu_products=(rng.choices(models, weights)[0],)))
        elif job.gpu_products:
            out.append(replace(job, gpu_products=()))
        else:
            out.append(job)
    return out


def _sorted(jobs: list[Job]) -> list[Job]:
    return sorted(jobs, key=lambda j: (j.submit_s, j.name))


_CODES = {labels[0]: code for code, labels in ALIBABA_MODELS.items()}


def to_openb_csv(jobs: Sequence[Job]) -> str:
    """The jobs as an openb pod list (model labels back to the trace's model codes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time", "deletion_time", "scheduled_time"]
    )
    for job in jobs:
        spec = "|".join(_CODES.get(p, p) for p in job.gpu_products)
        created = int(job.submit_s)
        writer.writerow(
            [
                job.name,
                job.cpu_milli,
                job.memory_mib,
                job.num_gpu,
                job.gpu_milli if job.num_gpu else 0,
                spec,
                created,
                created + int(job.duration_s),
                created,
            ]
        )
    return out.getvalue()


def demand_summary(jobs: Sequence[Job]) -> dict[str, float]:
    """Shares that characterise a variant, in percent (for checks and documentation)."""
    gpu = [j for j in jobs if j.num_gpu]
    total = sum(j.gpu_milli_total for j in gpu) or 1
    return {
        "gpushare": 100 * sum(j.gpu_milli_total for j in gpu if j.fractional) / total,
        "multigpu": 100 * sum(j.gpu_milli_total for j in gpu if j.num_gpu >= 2) / total,
        "gpuspec": 100 * sum(1 for j in gpu if j.gpu_products) / max(len(gpu), 1),
        "cpu": 100 * sum(1 for j in jobs if not j.num_gpu) / max(len(jobs), 1),
        "gpus": total / MILLI_PER_GPU,
    }
