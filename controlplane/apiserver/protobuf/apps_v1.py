"""Field tables of ``k8s.io/api/apps/v1`` (generated.proto): Deployment."""

from __future__ import annotations

from controlplane.apiserver.protobuf.core_v1 import POD_TEMPLATE_SPEC
from controlplane.apiserver.protobuf.meta_v1 import LABEL_SELECTOR, OBJECT_META
from controlplane.apiserver.protobuf.schema import (
    Message,
    boolean,
    int32,
    int64,
    int_or_string,
    nested,
    string,
    unsupported,
)

ROLLING_UPDATE_DEPLOYMENT = Message(
    "RollingUpdateDeployment",
    {1: int_or_string("maxUnavailable", pointer=True), 2: int_or_string("maxSurge", pointer=True)},
)

DEPLOYMENT_STRATEGY = Message(
    "DeploymentStrategy",
    {1: string("type"), 2: nested("rollingUpdate", ROLLING_UPDATE_DEPLOYMENT, pointer=True)},
)

DEPLOYMENT_SPEC = Message(
    "DeploymentSpec",
    {
        1: int32("replicas", pointer=True),
        2: nested("selector", LABEL_SELECTOR, pointer=True),
        3: nested("template", POD_TEMPLATE_SPEC),
        4: nested("strategy", DEPLOYMENT_STRATEGY),
        5: int32("minReadySeconds"),
        6: int32("revisionHistoryLimit", pointer=True),
        7: boolean("paused"),
        9: int32("progressDeadlineSeconds", pointer=True),
        10: string("podReplacementPolicy", pointer=True),
    },
)

DEPLOYMENT_STATUS = Message(
    "DeploymentStatus",
    {
        1: int64("observedGeneration"),
        2: int32("replicas"),
        3: int32("updatedReplicas"),
        7: int32("readyReplicas"),
        4: int32("availableReplicas"),
        5: int32("unavailableReplicas"),
        9: int32("terminatingReplicas", pointer=True),
        6: unsupported("conditions", repeated=True),
        8: int32("collisionCount", pointer=True),
    },
)

DEPLOYMENT = Message(
    "Deployment",
    {
        1: nested("metadata", OBJECT_META),
        2: nested("spec", DEPLOYMENT_SPEC),
        3: nested("status", DEPLOYMENT_STATUS),
    },
)
