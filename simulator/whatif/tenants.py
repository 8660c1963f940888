"""Tenants in the what-if: synthetic tenants for traces without them, and per-tenant figures.

* :func:`assign_synthetic_tenants` gives every job without a tenant one of ``team-1`` ..
  ``team-N``, reproducibly: a job's tenant depends only on the seed and its name (a SHA-256 of
  ``"<seed>:<name>"`` read as a number in [0, 1)), drawn with Zipf weights ``1/k`` so that
  ``team-1`` submits the most and demand is uneven, as teams' demand is.
* :class:`TenantTally` collects, per tenant, what a replay with quotas did: jobs submitted
  and admitted, waits (submit to start), GPU-hours held, and the GPU-hours held while the
  tenant had work waiting for quota; :func:`jain_index` turns those into Jain's fairness
  index (formula in :meth:`TenantTally.fairness_values`).

In: jobs, numbers from the engine. Out: jobs with tenants, the tally's JSON. Pure; no I/O.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from simulator.whatif.metrics import percentile
from simulator.whatif.trace import Job

SYNTHETIC_PREFIX = "team-"


def synthetic_tenant(name: str, *, count: int, seed: int) -> str:
    """The synthetic tenant of a job named ``name``: ``team-k`` with probability ~ ``1/k``."""
    if count < 1:
        raise ValueError("the number of synthetic tenants must be at least 1")
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    weights = [1 / k for k in range(1, count + 1)]
    mark = draw * math.fsum(weights)
    total = 0.0
    for k, weight in enumerate(weights, 1):
        total += weight
        if mark < total:
            return f"{SYNTHETIC_PREFIX}{k}"
    return f"{SYNTHETIC_PREFIX}{count}"


def assign_synthetic_tenants(jobs: Iterable[Job], *, count: int, seed: int) -> list[Job]:
    """Jobs with a tenant keep it; the others get :func:`synthetic_tenant`."""
    return [
        job if job.tenant is not None else replace(job, tenant=synthetic_tenant(job.name, count=count, seed=seed))
        for job in jobs
    ]


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 when all ``x`` are equal, ``1/n``
    when one takes everything. None for no values or all zero (undefined)."""
    squares = math.fsum(x * x for x in values)
    if not values or squares == 0:
        return None
    return math.fsum(values) ** 2 / (len(values) * squares)


@dataclass
class TenantFigures:
    queue: str
    #: The tenant's fair share: its ClusterQueue's fairSharing.weight / the tenants sharing it.
    share: float
    jobs: int = 0
    admitted: int = 0
    #: Times one of its running (or admitted) jobs was preempted.
    preempted: int = 0
    waits_s: list[float] = field(default_factory=list)
    gpu_hours: float = 0.0
    #: Hours during which the tenant had at least one job waiting for quota.
    backlogged_hours: float = 0.0
    #: GPU-hours the tenant held during those hours.
    backlogged_gpu_hours: float = 0.0


@dataclass
class TenantTally:
    """Per-tenant figures of one replay with quotas; the engine feeds it as time passes."""

    fair_sharing: bool
    tenants: dict[str, TenantFigures]
    held: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_tenants(cls, queues: Mapping[str, str], shares: Mapping[str, float], *, fair_sharing: bool) -> TenantTally:
        """``queues``: tenant -> ClusterQueue; ``shares``: tenant -> its share."""
        return cls(fair_sharing, {t: TenantFigures(q, shares[t]) for t, q in sorted(queues.items())})

    def hold(self, tenant: str, gpus: float) -> None:
        """The tenant now holds ``gpus`` more (less, when negative)."""
        self.held[tenant] = self.held.get(tenant, 0.0) + gpus

    def advance(self, seconds: float, waiting: Mapping[str, int]) -> None:
        """``seconds`` passed with ``held`` GPUs and ``waiting`` jobs per tenant waiting for quota."""
        if seconds <= 0:
            return
        hours = seconds / 3600
        for tenant, gpus in self.held.items():
            figures = self.tenants[tenant]
            figures.gpu_hours += gpus * hours
            if waiting.get(tenant, 0):
                figures.backlogged_gpu_hours += gpus * hours
        for tenant, count in waiting.items():
            if count:
                self.tenants[tenant].backlogged_hours += hours

    def fairness_values(self) -> dict[str, float]:
        """Per tenant that waited for quota and has a share: the GPUs it held on average while it
        waited, divided by its share, ``x_i = (backlogged GPU-hours_i / backlogged hours_i) / share_i``.
        Jain's index is taken over these: a tenant held back by quota while others run more than
        their share pulls it below 1."""
        return {
            tenant: f.backlogged_gpu_hours / f.backlogged_hours / f.share
            for tenant, f in self.tenants.items()
            if f.backlogged_hours > 0 and f.share > 0
        }

    def to_json(self) -> dict[str, Any]:
        values = self.fairness_values()
        jain = jain_index(list(values.values()))
        return {
            "fair_sharing": self.fair_sharing,
            "jain_index": round(jain, 4) if jain is not None else None,
            "tenants": {
                tenant: {
                    "cluster_queue": f.queue,
                    "share": round(f.share, 4),
                    "jobs": f.jobs,
                    "jobs_admitted": f.admitted,
                    "preempted": f.preempted,
                    "wait_mean_s": round(math.fsum(f.waits_s) / len(f.waits_s), 3) if f.waits_s else 0.0,
                    "wait_p99_s": round(percentile(f.waits_s, 99), 3),
                    "gpu_hours": round(f.gpu_hours, 3),
                    "quota_wait_hours": round(f.backlogged_hours, 3),
                    "gpus_per_share_while_waiting": round(values[tenant], 4) if tenant in values else None,
                }
                for tenant, f in self.tenants.items()
            },
        }
