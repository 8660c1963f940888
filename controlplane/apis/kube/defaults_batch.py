"""kube's defaulting of batch/v1 kinds (``pkg/apis/batch/v1/defaults.go``) and the selector
a new Job is given (``pkg/registry/batch/job/strategy.go``, ``generateSelector``).
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube.defaults_core import pod_template_spec
from controlplane.apis.kube.objects import child, drop_keys, ensure, items

#: The labels kube puts on a Job's pod template, and the one its generated selector matches.
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
_MAX_INT32 = 2**31 - 1


def job_spec(spec: dict[str, Any]) -> None:
    """``SetDefaults_Job`` on a Job's spec."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    failure_policy = child(spec, "podFailurePolicy")
    for rule in items(failure_policy, "rules"):
        for pattern in items(rule, "onPodConditions"):
            if pattern.get("status") in (None, ""):
                pattern["status"] = "True"
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if failure_policy is not None else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    pod_template_spec(child(spec, "template"))


def _generate_selector(obj: dict[str, Any], spec: dict[str, Any]) -> None:
    """kube's ``generateSelector``: job-name and controller-uid labels on the template, and a
    selector on ``batch.kubernetes.io/controller-uid`` (needs ``metadata.uid``)."""
    meta = child(obj, "metadata") or {}
    name, uid = meta.get("name"), meta.get("uid")
    template = ensure(spec, "template")
    template_meta = ensure(template, "metadata") if template is not None else None
    labels = ensure(template_meta, "labels") if template_meta is not None else None
    if not isinstance(uid, str) or not uid or labels is None:
        return
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, name)
    for key in CONTROLLER_UID_LABELS:
        labels.setdefault(key, uid)
    selector = ensure(spec, "selector")
    match_labels = ensure(selector, "matchLabels") if selector is not None else None
    if match_labels is not None:
        match_labels.setdefault(CONTROLLER_UID_LABEL, uid)


def job(obj: dict[str, Any]) -> None:
    """A new or updated Job as kube stores it: :func:`job_on_read` after the selector kube
    generates unless ``manualSelector``."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    if spec.get("manualSelector") is not True:
        _generate_selector(obj, spec)
    job_on_read(obj)


def job_on_read(obj: dict[str, Any]) -> None:
    """``SetDefaults_Job``: the Job's labels from its template's when it has none; ``status: {}``."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    job_spec(spec)
    labels = child(child(child(spec, "template"), "metadata"), "labels")
    meta = ensure(obj, "metadata")
    if labels is not None and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    ensure(obj, "status")


def cron_job(obj: dict[str, Any]) -> None:
    """``SetDefaults_CronJob``; the job template gets only the pod-spec defaults (kube's
    ``SetDefaults_Job`` takes a Job, not a JobTemplateSpec); ``status: {}``."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    if spec.get("concurrencyPolicy") in (None, ""):
        spec["concurrencyPolicy"] = "Allow"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1
    pod_template_spec(child(child(child(spec, "jobTemplate"), "spec"), "template"))
    ensure(obj, "status")


def without_generated_selector(obj: dict[str, Any]) -> None:
    """Drop, in place, what kube generated for a Job (``generateSelector``) from a copy that
    another cluster will create: that cluster generates its own from its own uid, and rejects
    a template labelled with another uid (Karmada prunes the same labels)."""
    spec = child(obj, "spec")
    if spec is None or spec.get("manualSelector") is True:
        return
    selector = child(spec, "selector")
    match_labels = child(selector, "matchLabels")
    if selector is not None and match_labels is not None:
        for key in CONTROLLER_UID_LABELS:
            match_labels.pop(key, None)
        if not match_labels:
            del selector["matchLabels"]
        if not selector:
            del spec["selector"]
    generated = (*JOB_NAME_LABELS, *CONTROLLER_UID_LABELS)
    template_meta = child(child(spec, "template"), "metadata")
    for meta in (template_meta, child(obj, "metadata")):
        drop_keys(meta, "labels", generated)
