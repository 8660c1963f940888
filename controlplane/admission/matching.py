"""Whether a queued job still matches its Workload: Kueue's ``equivalentToWorkload``
(``jobframework/reconciler.go``) and the pod group's (``pod_controller.go``).

Kueue updates the Workload of a suspended job that holds no quota when the job's pod sets change
(the hub's ``UpdatedWorkload``); a Workload that holds quota and no longer matches is deleted
(``DeletedWorkload``) and made again. In: the job's pod sets as its Workload would have them
(:func:`controlplane.admission.objects.pod_sets`) and the Workload (wire dicts). Out: whether they
match. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.admission.objects import admission_of, is_finished, is_true, pod_set_requests
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kueue_views import WorkloadView, pod_set_assignments

NOT_MATCHING: Final = "No matching Workload; restoring pod templates according to existent Workload"
"""The message of the Event ``Stopped`` on a started job whose Workload no longer matches it."""


def _tolerations(pod_set: Mapping[str, Any]) -> list[Any]:
    return list(((pod_set.get("template") or {}).get("spec") or {}).get("tolerations") or [])


def _same(job: Sequence[Mapping[str, Any]], workload: Sequence[Mapping[str, Any]], *, ignore_tolerations: bool) -> bool:
    """Kueue's ``ComparePodSetSlices``: as many pod sets, each with the same count, minCount and
    requests per pod (and tolerations, unless admitted: a check's podSetUpdates add some)."""
    if len(job) != len(workload):
        return False
    mine, theirs = pod_set_requests({"spec": {"podSets": job}}), pod_set_requests({"spec": {"podSets": workload}})
    for a, b, raw_a, raw_b in zip(mine, theirs, job, workload, strict=True):
        if (a.count, a.min_count, dict(a.per_pod)) != (b.count, b.min_count, dict(b.per_pod)):
            return False
        if not ignore_tolerations and _tolerations(raw_a) != _tolerations(raw_b):
            return False
    return True


def _running(pod_sets: Sequence[Mapping[str, Any]], admission: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Kueue's ``expectedRunningPodSets``: a pod set with ``minCount`` runs with its admitted count
    (partial admission). Its ``minCount`` is then read as the job's own is: only below the count."""
    admitted = {str(a.get("name") or "main"): a.get("count") for a in pod_set_assignments(admission)}
    out = []
    for ps in pod_sets:
        running = dict(ps)
        count = admitted.get(str(ps.get("name") or "main"))
        if isinstance(ps.get("minCount"), int) and isinstance(count, int):
            running["count"] = count
            if ps["minCount"] >= count:
                running.pop("minCount")
        out.append(running)
    return out


def equivalent(job_pod_sets: Sequence[Mapping[str, Any]], workload: Mapping[str, Any], *, suspended: bool) -> bool:
    """Kueue's ``equivalentToWorkload``: a Workload holding quota matches the pods the job runs
    with (a suspended job's own pods also do); one that holds none, the job's own pods."""
    spec_sets = list(WorkloadView(workload).pod_sets)
    admitted = is_true(workload, kueue.COND_ADMITTED)
    admission = admission_of(workload)
    if admission is not None:
        if _same(job_pod_sets, _running(spec_sets, admission), ignore_tolerations=admitted):
            return True
        return suspended and _same(job_pod_sets, spec_sets, ignore_tolerations=admitted)
    return _same(job_pod_sets, spec_sets, ignore_tolerations=admitted)


def group_equivalent(group_pod_sets: Sequence[Mapping[str, Any]], workload: Mapping[str, Any]) -> bool:
    """The pod group's ``equivalentToWorkload``: every role of the group's pods (their pod sets by
    role hash, in name order) is one of the Workload's, in the same order, with no more pods than
    it counts (a finished Workload: the roles alone)."""
    finished = is_finished(workload)
    spec_sets = list(WorkloadView(workload).pod_sets)
    if not finished and len(spec_sets) < len(group_pod_sets):
        return False
    j = -1
    for ps in group_pod_sets:
        j += 1
        while j < len(spec_sets) and spec_sets[j].get("name") != ps.get("name"):
            j += 1
        if j == len(spec_sets):
            return False
        if not finished and int(spec_sets[j].get("count", 1)) < int(ps.get("count", 1)):
            return False
    return True


__all__ = ["NOT_MATCHING", "equivalent", "group_equivalent"]
