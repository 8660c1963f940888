"""Kueue's ``equivalentToWorkload`` as a pure function: a job matches its Workload while each pod
set asks for the same count, minCount and requests (and tolerations, until admitted); a Workload
holding quota is compared with the pods the job runs with (a partial admission's count)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.admission.matching import equivalent

GPU = "nvidia.com/gpu"


def pod_set(count: int, *, gpus: str = "1", min_count: int | None = None, tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": {GPU: gpus}}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    out: dict[str, Any] = {"name": "main", "count": count, "template": {"spec": spec}}
    if min_count is not None:
        out["minCount"] = min_count
    return out


def workload(spec_set: dict[str, Any], *, admitted_count: int | None = None, admitted: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if admitted_count is not None:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": admitted_count}]}
        status["conditions"] = [{"type": "QuotaReserved", "status": "True"}] + (
            [{"type": "Admitted", "status": "True"}] if admitted else [])
    return {"spec": {"podSets": [spec_set]}, "status": status}


TAINTED = [{"key": "spot", "operator": "Exists"}]


@pytest.mark.parametrize(("job", "wl", "suspended", "matches"), [
    (pod_set(4), workload(pod_set(4)), True, True),
    (pod_set(3), workload(pod_set(4)), True, False),
    (pod_set(4, gpus="2"), workload(pod_set(4)), True, False),
    (pod_set(3), workload(pod_set(4), admitted_count=4, admitted=True), False, False),
    (pod_set(4, gpus="1000m"), workload(pod_set(4), admitted_count=4, admitted=True), False, True),
    # Partially admitted: the Job runs with the admitted count; at its minCount it has none of its own.
    (pod_set(3, min_count=2), workload(pod_set(4, min_count=2), admitted_count=3, admitted=True), False, True),
    (pod_set(2), workload(pod_set(4, min_count=2), admitted_count=2, admitted=True), False, True),
    # Its own pods, suspended again with its quota: they still match.
    (pod_set(4, min_count=2), workload(pod_set(4, min_count=2), admitted_count=3), True, True),
    (pod_set(4, min_count=2), workload(pod_set(4, min_count=2), admitted_count=3), False, False),
    # A check's podSetUpdates add tolerations once admitted; before, they are the job's own.
    (pod_set(4, tolerations=TAINTED), workload(pod_set(4), admitted_count=4, admitted=True), False, True),
    (pod_set(4, tolerations=TAINTED), workload(pod_set(4)), True, False),
])
def test_a_job_matches_its_workload(job: dict[str, Any], wl: dict[str, Any], suspended: bool, matches: bool) -> None:
    assert equivalent([job], wl, suspended=suspended) is matches
