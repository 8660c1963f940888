"""Field tables of ``k8s.io/api/batch/v1`` (generated.proto): Job."""

from __future__ import annotations

from controlplane.apiserver.protobuf.core_v1 import POD_TEMPLATE_SPEC
from controlplane.apiserver.protobuf.meta_v1 import LABEL_SELECTOR, OBJECT_META
from controlplane.apiserver.protobuf.schema import (
    Message,
    boolean,
    int32,
    int64,
    nested,
    string,
    time,
    unsupported,
)

JOB_SPEC = Message(
    "JobSpec",
    {
        1: int32("parallelism", pointer=True),
        2: int32("completions", pointer=True),
        3: int64("activeDeadlineSeconds", pointer=True),
        11: unsupported("podFailurePolicy", pointer=True),
        16: unsupported("successPolicy", pointer=True),
        7: int32("backoffLimit", pointer=True),
        12: int32("backoffLimitPerIndex", pointer=True),
        13: int32("maxFailedIndexes", pointer=True),
        4: nested("selector", LABEL_SELECTOR, pointer=True),
        5: boolean("manualSelector", pointer=True),
        6: nested("template", POD_TEMPLATE_SPEC),
        8: int32("ttlSecondsAfterFinished", pointer=True),
        9: string("completionMode", pointer=True),
        10: boolean("suspend", pointer=True),
        14: string("podReplacementPolicy", pointer=True),
        15: string("managedBy", pointer=True),
    },
)

JOB_STATUS = Message(
    "JobStatus",
    {
        1: unsupported("conditions", repeated=True),
        2: time("startTime", pointer=True),
        3: time("completionTime", pointer=True),
        4: int32("active"),
        5: int32("succeeded"),
        6: int32("failed"),
        11: int32("terminating", pointer=True),
        7: string("completedIndexes"),
        10: string("failedIndexes", pointer=True),
        8: unsupported("uncountedTerminatedPods", pointer=True),
        9: int32("ready", pointer=True),
    },
)

JOB = Message(
    "Job",
    {1: nested("metadata", OBJECT_META), 2: nested("spec", JOB_SPEC), 3: nested("status", JOB_STATUS)},
)
