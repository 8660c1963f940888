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

import re
import zoneinfo
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.label_selectors import normalized, selector_errors, shown, template_match_errors
from controlplane.apis.kube.validate_pod import pod_template_errors, restart_policy

Obj = dict[str, Any]

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


_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
#: (name, low, high, names) of the five fields of a cron schedule, as robfig/cron reads them.
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}),
)
_EVERY = re.compile(r"^@every\s+\S+\Z")


def _cron_number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise ValueError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def _cron_field_error(text: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """robfig/cron's ``getRange`` error for one comma-separated field, if any."""
    for part in text.split(","):
        span, _, step = part.partition("/")
        try:
            if span in ("*", "?"):
                start, end = low, high
            else:
                first, dash, last = span.partition("-")
                start = _cron_number(first, names)
                end = _cron_number(last, names) if dash else start
            if step and _cron_number(step, {}) == 0:
                return f"step of range should be a positive number: {part}"
        except ValueError as exc:
            return str(exc)
        if start < low:
            return f"beginning of range ({start}) below minimum ({low}): {part}"
        if end > high:
            return f"end of range ({end}) above maximum ({high}): {part}"
        if start > end:
            return f"beginning of range ({start}) beyond end of range ({end}): {part}"
    return None


def schedule_error(schedule: str) -> str | None:
    """Why ``schedule`` is not a standard cron schedule (robfig/cron's parser), or None."""
    text = schedule.strip()
    if text in _MACROS or _EVERY.match(text):
        return None
    if text.startswith("@"):
        return f"unrecognized descriptor: {text}"
    fields = text.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"  # Go prints the []string
    for part, (_, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        error = _cron_field_error(part, low, high, names)
        if error:
            return error
    return None


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
