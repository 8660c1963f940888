"""The pod set templates of a queued job: Kueue's ``RunWithPodSetsInfo`` and
``RestorePodSetsInfo`` for every kind the hub starts and stops by its suspend flag.

In: a job (wire dict) of a kind Kueue suspends (:data:`~controlplane.apis.kueue_jobs.SUSPEND_PATHS`:
batch/v1 Job, JobSet, the Kubeflow jobs, RayJob, RayCluster, TrainJob) whose interpreter knows where each
role's pod template lives (:meth:`~controlplane.interpreter.base.PodTemplateKind.pod_set_slots`),
and its Workload. Out: the job with every pod set's template started (its flavor's node labels
and the Ready checks' ``podSetUpdates`` merged in, :func:`controlplane.admission.checks.start_pod_template`)
or restored (its own labels, annotations, nodeSelector and tolerations back, from the Workload's
pod set). A TrainJob has no pod template of its own (its runtime's are): Kueue writes what it
adds to each pod set in its runtime patch instead (:func:`_trainjob_start`) and empties that
patch on stop. Pure; the input is never changed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.admission import checks
from controlplane.apis import kueue_jobs
from controlplane.apis.trainer import is_train_job
from controlplane.apis.trainer_runtime import with_kueue_patch
from controlplane.interpreter.base import PodSetSlot, PodTemplateKind
from controlplane.interpreter.registry import builtin_interpreter_for


def pod_set_name(role: str) -> str:
    """A role's pod set name in its Workload (Kueue's: the role's name, lower case)."""
    return role.lower()[:63]


def startable(obj: Mapping[str, Any]) -> bool:
    """Whether the hub starts and stops this job by its suspend flag, as Kueue's integration of
    the kind does (the flag's path is known and so are its pod sets' templates)."""
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    return kueue_jobs.suspend_path(api_version, kind) is not None and _kind(api_version, kind) is not None


def suspended(obj: Mapping[str, Any]) -> bool:
    """Whether a startable job is suspended (its flag true)."""
    return kueue_jobs.job_suspend(obj) is True


def _kind(api_version: str, kind: str) -> PodTemplateKind | None:
    interpreter = builtin_interpreter_for(api_version, kind)
    return interpreter if isinstance(interpreter, PodTemplateKind) else None


def _slots(obj: dict[str, Any]) -> list[PodSetSlot]:
    kind = _kind(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    return kind.pod_set_slots(obj) if kind is not None else []


def templates(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each pod set's template, by its Workload pod set name."""
    return {
        pod_set_name(role): parent[key] for role, (parent, key) in _slots(dict(obj)) if isinstance(parent.get(key), dict)
    }


def _pod_sets(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        str(ps.get("name") or "main"): ps
        for ps in (workload.get("spec") or {}).get("podSets") or () if isinstance(ps, Mapping)
    }


def start(obj: Mapping[str, Any], workload: Mapping[str, Any], node_labels: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """``obj`` as it starts: each pod set's template with its flavor's node labels
    (``node_labels``, by pod set) and its checks' ``podSetUpdates`` merged in. Raises
    :class:`~controlplane.admission.checks.PodSetUpdateConflict`."""
    if is_train_job(obj):
        return _trainjob_start(obj, workload, node_labels)
    out = copy.deepcopy(dict(obj))
    states = checks.states_of(workload)
    for role, (parent, key) in _slots(out):
        name = pod_set_name(role)
        parent[key] = checks.start_pod_template(parent.get(key) or {}, name, node_labels.get(name, {}), states)
    return out


def restore(obj: Mapping[str, Any], workload: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` as it stops: each pod set's template with the labels, annotations, nodeSelector and
    tolerations of its Workload pod set (the job's own, as it was queued); a TrainJob with Kueue's
    runtime patch emptied."""
    if is_train_job(obj):
        return with_kueue_patch(obj, None)
    out = copy.deepcopy(dict(obj))
    own = _pod_sets(workload)
    for role, (parent, key) in _slots(out):
        pod_set = own.get(pod_set_name(role))
        if pod_set is not None:
            parent[key] = checks.restore_pod_template(parent.get(key) or {}, pod_set.get("template") or {})
    return out


def with_own_templates(obj: Mapping[str, Any], pod_sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A startable job's Workload ``pod_sets`` with each template carrying the job's own labels,
    annotations, nodeSelector and tolerations (as Kueue's Workload carries the job's pod templates),
    which :func:`restore` gives back; other kinds' pod sets as they are."""
    if not startable(obj):
        return pod_sets
    own = templates(obj)
    return [
        {**ps, "template": checks.restore_pod_template(ps.get("template") or {}, own[ps["name"]])} if ps.get("name") in own else ps
        for ps in pod_sets
    ]


def _added(started: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in started.items() if own.get(k) != v}


def _trainjob_start(obj: Mapping[str, Any], workload: Mapping[str, Any], node_labels: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Kueue's ``RunWithPodSetsInfo`` of a TrainJob: its runtime patch (manager
    ``kueue.x-k8s.io/manager``) gets one ``replicatedJobs`` entry per Workload pod set, with the
    labels, annotations and nodeSelector the admission adds to the pod set's own (its flavor's
    node labels, its checks' ``podSetUpdates``) and, when the checks add tolerations, the whole
    merged list (the trainer replaces a patched list whole)."""
    states = checks.states_of(workload)
    entries: list[dict[str, Any]] = []
    for name, pod_set in _pod_sets(workload).items():
        own = pod_set.get("template") or {}
        started = checks.start_pod_template(own, name, node_labels.get(name, {}), states)
        own_meta, meta = own.get("metadata") or {}, started.get("metadata") or {}
        own_spec, spec = own.get("spec") or {}, started.get("spec") or {}
        patch_meta = {key: added for key in ("labels", "annotations")
                      if (added := _added(meta.get(key) or {}, own_meta.get(key) or {}))}
        patch_spec: dict[str, Any] = {}
        if selector := _added(spec.get("nodeSelector") or {}, own_spec.get("nodeSelector") or {}):
            patch_spec["nodeSelector"] = selector
        if (spec.get("tolerations") or []) != (own_spec.get("tolerations") or []):
            patch_spec["tolerations"] = copy.deepcopy(spec.get("tolerations") or [])
        pod: dict[str, Any] = {**({"metadata": patch_meta} if patch_meta else {}), **({"spec": patch_spec} if patch_spec else {})}
        entries.append({"name": name, "template": {"spec": {"template": pod}}})
    return with_kueue_patch(obj, entries)
