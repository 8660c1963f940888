"""GPU job traces for the what-if replay: the Alibaba ``openb`` pod list and a simple generic CSV.

The what-if replays jobs, not Kubernetes objects, so a trace row becomes a small frozen
:class:`Job`: when it arrives, how long it runs, how many GPUs it takes (``num_gpu`` GPUs
of ``gpu_milli`` thousandths each, so a fractional request is ``num_gpu=1, gpu_milli<1000``),
its CPU and memory, the GPU products it accepts and, optionally, the cluster it is homed in.

Two formats, told apart by their header line:

* **openb** -- ``openb_pod_list_*.csv`` of Alibaba's clusterdata ``cluster-trace-gpu-v2023``
  (CC BY 4.0; Weng et al., "Beware of Fragmentation", USENIX ATC '23). Columns
  ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
  deletion_time,scheduled_time``. A job arrives at ``creation_time`` and runs for
  ``deletion_time - (scheduled_time or creation_time)`` seconds (at least 1); only the
  first five columns are required, and a list without the times
  (:attr:`TraceFormat.OPENB_UNTIMED`) serves the fill but not the replay. ``gpu_spec``
  lists acceptable model codes (``V100M16|V100M32``), mapped to GFD product labels with
  :data:`simulator.profile.ALIBABA_MODELS`.
* **generic** -- ``name,submit_s,duration_s,gpus`` and optionally ``cpu_milli,memory_mib,
  gpu_models,cluster,tenant``. ``gpus`` is a number: 0, a fraction below 1 (a share of one GPU,
  at most three decimals), or a whole number of GPUs. ``gpu_models`` is ``|``-separated GFD
  product labels (or Alibaba model codes); ``cluster`` names the job's home cluster for the
  static-partitioning strategy; ``tenant`` the namespace the job is submitted in, whose
  LocalQueue a replay with quotas puts it in (:mod:`simulator.whatif.quotas`). An openb pod
  list may carry a ``tenant`` column too.

In: lines of CSV text (:func:`parse_trace`) or a path (:func:`read_trace`, the only I/O).
Out: jobs sorted by arrival then name; a bad row raises :class:`TraceError` whose message
starts with ``line N:`` (N counts the header as line 1).
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from simulator.profile import ALIBABA_MODELS

logger = logging.getLogger(__name__)

MILLI_PER_GPU = 1000
"""A GPU counted in thousandths, as the Alibaba trace and its GPU-sharing scheduler count it."""

#: The columns every openb pod list has (the public multi-GPU variants have only these).
OPENB_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: Optional openb columns: accepted GPU models, and the times a replay needs.
OPENB_OPTIONAL = ("gpu_spec", "creation_time", "deletion_time", "scheduled_time", "tenant")
OPENB_TIME_COLUMNS = ("creation_time", "deletion_time")
GENERIC_COLUMNS = ("name", "submit_s", "duration_s", "gpus")
GENERIC_OPTIONAL = ("cpu_milli", "memory_mib", "gpu_models", "cluster", "tenant")


class TraceFormat(StrEnum):
    OPENB = "openb"
    #: An openb pod list without ``creation_time``/``deletion_time``: good for the fill only.
    OPENB_UNTIMED = "openb-untimed"
    GENERIC = "generic"

    @property
    def timed(self) -> bool:
        return self is not TraceFormat.OPENB_UNTIMED


class TraceError(ValueError):
    """A trace that cannot be read; the message names the line and the column."""


@dataclass(frozen=True, slots=True)
class Job:
    """One trace task: a single pod of ``num_gpu`` x ``gpu_milli``/1000 GPUs."""

    name: str
    submit_s: float
    duration_s: float
    num_gpu: int
    gpu_milli: int
    cpu_milli: int = 0
    memory_mib: int = 0
    #: Acceptable ``nvidia.com/gpu.product`` values; empty means any GPU.
    gpu_products: tuple[str, ...] = ()
    home_cluster: str | None = None
    #: The namespace the job is submitted in (the trace's ``tenant`` column, or a synthetic one).
    tenant: str | None = None
    #: Line of the trace file the job came from (0 for jobs made in code).
    line: int = 0

    @property
    def gpu_milli_total(self) -> int:
        """The job's whole GPU demand in thousandths of a GPU."""
        return self.num_gpu * self.gpu_milli

    @property
    def gpus(self) -> float:
        return self.gpu_milli_total / MILLI_PER_GPU

    @property
    def fractional(self) -> bool:
        """A share of one GPU (``gpu_milli`` below a whole GPU)."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI_PER_GPU

    @property
    def kind(self) -> str:
        """The job's kind in a placement diagnosis: ``cpu-only``, ``gpu-share`` or ``N-gpu``,
        with `` one-model`` when it accepts only some GPU models."""
        if not self.gpu_milli_total:
            return "cpu-only"
        kind = "gpu-share" if self.fractional else f"{self.num_gpu}-gpu"
        return f"{kind} one-model" if self.gpu_products else kind


def detect_format(header: Iterable[str]) -> TraceFormat:
    """The trace's format from its header; the error names the columns each format misses."""
    columns = {c.strip() for c in header}
    if set(OPENB_COLUMNS) <= columns:
        return TraceFormat.OPENB
    if set(GENERIC_COLUMNS) <= columns:
        return TraceFormat.GENERIC
    openb_missing = [c for c in OPENB_COLUMNS if c not in columns]
    generic_missing = [c for c in GENERIC_COLUMNS if c not in columns]
    if len(openb_missing) <= len(generic_missing):
        raise TraceError(
            f"line 1: the header lacks column(s) {','.join(openb_missing)} of an openb pod list "
            f"(needs {','.join(OPENB_COLUMNS)}; optional {','.join(OPENB_OPTIONAL)})"
        )
    raise TraceError(
        f"line 1: the header lacks column(s) {','.join(generic_missing)} of a generic trace "
        f"(needs {','.join(GENERIC_COLUMNS)}; optional {','.join(GENERIC_OPTIONAL)})"
    )


def has_times(header: Iterable[str]) -> bool:
    """Whether an openb header carries the times a replay needs."""
    columns = {c.strip() for c in header}
    return set(OPENB_TIME_COLUMNS) <= columns


def _int(row: Mapping[str, str | None], column: str, line: int, *, default: int | None = None) -> int:
    raw = (row.get(column) or "").strip()
    if not raw:
        if default is not None:
            return default
        raise TraceError(f"line {line}: column {column} is empty")
    try:
        value = int(raw)
    except ValueError:
        try:
            as_float = float(raw)
        except ValueError:
            raise TraceError(f"line {line}: column {column}: {raw!r} is not a number") from None
        if not as_float.is_integer():
            raise TraceError(f"line {line}: column {column}: {raw!r} is not a whole number") from None
        value = int(as_float)
    if value < 0:
        raise TraceError(f"line {line}: column {column}: {raw!r} is negative")
    return value


def _float(row: Mapping[str, str | None], column: str, line: int) -> float:
    raw = (row.get(column) or "").strip()
    if not raw:
        raise TraceError(f"line {line}: column {column} is empty")
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(f"line {line}: column {column}: {raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"line {line}: column {column}: {raw!r} must be a non-negative number")
    return value


def _products(raw: str, line: int, column: str) -> tuple[str, ...]:
    out: list[str] = []
    for part in raw.split("|"):
        name = part.strip()
        if not name:
            continue
        if name in ALIBABA_MODELS:
            name = ALIBABA_MODELS[name][0]
        elif column == "gpu_spec":
            known = ", ".join(ALIBABA_MODELS)
            raise TraceError(f"line {line}: column gpu_spec: unknown GPU model {name!r} (known: {known})")
        out.append(name)
    return tuple(sorted(set(out)))


#: A namespace name (DNS-1123 label), as kube checks it.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _tenant(row: Mapping[str, str | None], line: int) -> str | None:
    raw = (row.get("tenant") or "").strip()
    if not raw:
        return None
    if not _NAMESPACE.fullmatch(raw):
        raise TraceError(
            f"line {line}: column tenant: {raw!r} is not a namespace name (lowercase letters, digits "
            "and '-', starting and ending with a letter or digit, at most 63 characters)"
        )
    return raw


def _gpu_request(num_gpu: int, gpu_milli: int, line: int) -> tuple[int, int]:
    if num_gpu == 0 or gpu_milli == 0:
        return 0, 0
    if gpu_milli > MILLI_PER_GPU:
        raise TraceError(f"line {line}: gpu_milli {gpu_milli} is more than one GPU ({MILLI_PER_GPU})")
    if gpu_milli < MILLI_PER_GPU and num_gpu > 1:
        raise TraceError(
            f"line {line}: a share of a GPU (gpu_milli {gpu_milli}) is only possible with num_gpu 1, got {num_gpu}"
        )
    return num_gpu, gpu_milli


def _openb_job(row: Mapping[str, str | None], line: int) -> Job:
    name = (row.get("name") or "").strip()
    if not name:
        raise TraceError(f"line {line}: column name is empty")
    timed = "creation_time" in row or "deletion_time" in row
    created = _int(row, "creation_time", line) if timed else 0
    deleted = _int(row, "deletion_time", line) if timed else 1
    started = _int(row, "scheduled_time", line, default=created)
    if deleted < created:
        raise TraceError(f"line {line}: deletion_time {deleted} is before creation_time {created}")
    num_gpu, gpu_milli = _gpu_request(_int(row, "num_gpu", line), _int(row, "gpu_milli", line), line)
    return Job(
        name=name,
        submit_s=float(created),
        duration_s=float(max(deleted - max(started, created), 1)),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        cpu_milli=_int(row, "cpu_milli", line),
        memory_mib=_int(row, "memory_mib", line),
        gpu_products=_products(row.get("gpu_spec") or "", line, "gpu_spec"),
        tenant=_tenant(row, line),
        line=line,
    )


def _generic_job(row: Mapping[str, str | None], line: int) -> Job:
    name = (row.get("name") or "").strip()
    if not name:
        raise TraceError(f"line {line}: column name is empty")
    gpus = _float(row, "gpus", line)
    if gpus > 1 and not gpus.is_integer():
        raise TraceError(f"line {line}: column gpus: {gpus:g} GPUs; more than one GPU must be a whole number")
    if gpus >= 1:
        num_gpu, gpu_milli = int(gpus), MILLI_PER_GPU
    else:
        milli = gpus * MILLI_PER_GPU
        if abs(milli - round(milli)) > 1e-6:
            raise TraceError(f"line {line}: column gpus: {gpus:g} has more than three decimals")
        num_gpu, gpu_milli = (1, round(milli)) if milli else (0, 0)
    duration = _float(row, "duration_s", line)
    if duration <= 0:
        raise TraceError(f"line {line}: column duration_s must be more than 0")
    cluster = (row.get("cluster") or "").strip() or None
    return Job(
        name=name,
        submit_s=_float(row, "submit_s", line),
        duration_s=duration,
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        cpu_milli=_int(row, "cpu_milli", line, default=0),
        memory_mib=_int(row, "memory_mib", line, default=0),
        gpu_products=_products(row.get("gpu_models") or "", line, "gpu_models"),
        home_cluster=cluster,
        tenant=_tenant(row, line),
        line=line,
    )


def parse_trace(lines: Iterable[str]) -> tuple[TraceFormat, list[Job]]:
    """Parse CSV text (header first). Jobs come back sorted by arrival, then name."""
    reader = csv.DictReader(iter(lines))
    if reader.fieldnames is None:
        raise TraceError("line 1: the trace is empty (no header line)")
    fmt = detect_format(reader.fieldnames)
    make = _generic_job if fmt is TraceFormat.GENERIC else _openb_job
    if fmt is TraceFormat.OPENB and not has_times(reader.fieldnames):
        fmt = TraceFormat.OPENB_UNTIMED
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if None in row:
            raise TraceError(f"line {line}: more fields than the header has columns")
        if not any((value or "").strip() for value in row.values()):
            continue
        job = make(row, line)
        if job.name in seen:
            raise TraceError(
                f"line {line}: job name {job.name!r} is used again (first on line {seen[job.name]})"
            )
        seen[job.name] = line
        jobs.append(job)
    jobs.sort(key=lambda j: (j.submit_s, j.name))
    return fmt, jobs


def read_trace(path: str | Path) -> tuple[TraceFormat, list[Job]]:
    """Read a trace file; errors are prefixed with the file name."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            fmt, jobs = parse_trace(handle)
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
    except TraceError as exc:
        raise TraceError(f"{path}: {exc}") from exc
    logger.debug("trace read", extra={"path": str(path), "format": str(fmt), "jobs": len(jobs)})
    return fmt, jobs
