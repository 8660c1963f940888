"""kube's validation of batch/v1: Job and CronJob.

As pkg/apis/batch/validation: counts and durations are not negative, the completion mode
is known (Indexed needs completions), a set selector is valid and selects the template,
the pod template is valid and restarts ``OnFailure`` or ``Never``. On update a Job's
template is immutable (but for scheduling directives of a suspended Job that never
started), as are its completions, selector and completion mode. A CronJob's schedule is a
five-field cron expression (or a ``@`` macro), its time zone known, its job template a
valid Job spec whose selector is left to the server.
"""

from __future__ import annotations

import zoneinfo
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.cronschedule import schedule_error
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.label_selectors import normalized, selector_errors, shown, template_match_errors
from controlplane.apis.kube.validate_pod import pod_template_errors, restart_policy
from controlplane.apis.untyped import Obj

JOB_RESTART_POLICIES = ("OnFailure", "Never")
COMPLETION_MODES = ("NonIndexed", "Indexed")
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
#: Template fields a suspended Job that never ran may change (``AllowMutableSchedulingDirectives``).
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def job_spec_errors(spec: Any, path: str) -> list[FieldError]:
    """``validateJobSpec`` (a missing selector is the server's to generate)."""
    spec = field.mapping(spec)
    errors: list[FieldError] = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        errors += field.nonnegative(spec.get(key), f"{path}.{key}")
    mode = spec.get("completionMode")
    if mode and mode not in COMPLETION_MODES:
        errors.append(field.not_supported(f"{path}.completionMode", mode, COMPLETION_MODES))
    if mode == "Indexed" and spec.get("completions") is None:
        errors.append(field.required(f"{path}.completions", "when completion mode is Indexed"))
    selector = spec.get("selector")
    template = spec.get("template")
    if selector is not None:
        found = selector_errors(selector, f"{path}.selector")
        errors += found
        if not found:
            errors += template_match_errors(selector, template, f"{path}.template")
    errors += pod_template_errors(template, f"{path}.template")
    policy = restart_policy(template)
    if policy not in JOB_RESTART_POLICIES:
        errors.append(field.not_supported(f"{path}.template.spec.restartPolicy", policy, JOB_RESTART_POLICIES))
    return errors


def _scheduling_free(template: Any) -> Any:
    """A template without what a suspended, never-started Job may still change."""
    template = field.mapping(template)
    meta = {k: v for k, v in field.mapping(template.get("metadata")).items() if k not in ("labels", "annotations")}
    spec = {k: v for k, v in field.mapping(template.get("spec")).items() if k not in _SCHEDULING_DIRECTIVES}
    return {**template, "metadata": meta, "spec": spec}


def _job_update_errors(spec: Obj, old: Obj) -> list[FieldError]:
    """``ValidateJobSpecUpdate``."""
    old_spec = field.mapping(old.get("spec"))
    errors: list[FieldError] = []
    template, old_template = spec.get("template"), old_spec.get("template")
    never_started = old_spec.get("suspend") is True and not field.mapping(old.get("status")).get("startTime")
    if never_started:
        same = _scheduling_free(template) == _scheduling_free(old_template)
    else:
        same = template == old_template
    if not same:
        errors.append(field.invalid("spec.template", template, field.IMMUTABLE))
    errors += field.immutable(spec.get("completions"), old_spec.get("completions"), "spec.completions")
    if normalized(spec.get("selector")) != normalized(old_spec.get("selector")) and "selector" in old_spec:
        errors.append(field.invalid("spec.selector", shown(spec.get("selector")), field.IMMUTABLE))
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        if key in old_spec:
            errors += field.immutable(spec.get(key), old_spec.get(key), f"spec.{key}")
    return errors


def validate_job(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateJob`` / ``ValidateJobUpdate``."""
    spec = field.mapping(obj.get("spec"))
    errors = job_spec_errors(spec, "spec")
    if old is not None:
        errors += _job_update_errors(spec, old)
    return errors


def validate_cron_job(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateCronJobCreate`` / ``ValidateCronJobUpdate``."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    schedule = spec.get("schedule")
    if not schedule:
        errors.append(field.required("spec.schedule"))
    elif not isinstance(schedule, str):
        errors.append(field.invalid("spec.schedule", schedule, "must be a string"))
    elif "TZ" in schedule:
        errors.append(field.invalid(
            "spec.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        ))
    else:
        error = schedule_error(schedule)
        if error:
            errors.append(field.invalid("spec.schedule", schedule, error))
    zone = spec.get("timeZone")
    if isinstance(zone, str) and zone:
        try:
            zoneinfo.ZoneInfo(zone)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError):
            errors.append(field.invalid("spec.timeZone", zone, f"unknown time zone {zone}"))
    policy = spec.get("concurrencyPolicy")
    if policy and policy not in CONCURRENCY_POLICIES:
        errors.append(field.not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        errors += field.nonnegative(spec.get(key), f"spec.{key}")
    job_template = field.mapping(spec.get("jobTemplate"))
    job_spec = field.mapping(job_template.get("spec"))
    errors += job_spec_errors(job_spec, "spec.jobTemplate.spec")
    if job_spec.get("selector") is not None:
        errors.append(field.invalid(
            "spec.jobTemplate.spec.selector", shown(job_spec.get("selector")), "`selector` will be auto-generated"
        ))
    if job_spec.get("manualSelector") is True:
        errors.append(field.not_supported("spec.jobTemplate.spec.manualSelector", True, ("nil", "false")))
    return errors
