"""batch/v1 CronJob, as kube serves it (printers.go ``cronJobColumnDefinitions``)."""

from __future__ import annotations

from controlplane.apiserver.kinds import cells
from controlplane.apiserver.resources import AGE, ResourceType, TableColumn

_POD_SPEC = ("spec", "jobTemplate", "spec", "template", "spec")

CRONJOB = ResourceType(
    "batch", "v1", "CronJob", "cronjobs", "cronjob", namespaced=True,
    short_names=("cj",), categories=("all",), has_status=True, strategic_merge=True,
    columns=(
        TableColumn("Schedule", cells.text_at("spec", "schedule", none=""),
                    description="The schedule in Cron format."),
        TableColumn("Timezone", cells.text_at("spec", "timeZone"),
                    description="The time zone name for the given schedule."),
        TableColumn("Suspend", cells.bool_title_at("spec", "suspend"), type="boolean",
                    description="Whether the controller suspends subsequent executions."),
        TableColumn("Active", cells.cronjob_active, type="integer",
                    description="A list of pointers to currently running jobs."),
        TableColumn("Last Schedule", cells.cronjob_last_schedule,
                    description="Information when was the last time the job was successfully scheduled."),
        AGE,
        TableColumn("Containers", cells.containers_at(*_POD_SPEC, field="name"), priority=1),
        TableColumn("Images", cells.containers_at(*_POD_SPEC, field="image"), priority=1),
        TableColumn("Selector", cells.label_selector_at("spec", "jobTemplate", "spec", "selector"), priority=1),
    ),
)
