"""kube's defaulting of apps/v1 kinds (``pkg/apis/apps/v1/defaults.go``).

Each workload's pod template gets the pod-spec defaults of :mod:`.defaults_core`; a new
object's status is the one kube's JSON encoding of an empty status struct gives (fields
without ``omitempty`` show as 0).
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube.defaults_core import pod_template_spec, pvc_spec
from controlplane.apis.kube.objects import child, ensure, items, set_default


def _replicas(spec: dict[str, Any]) -> None:
    if spec.get("replicas") is None:
        spec["replicas"] = 1


def _revision_history(spec: dict[str, Any]) -> None:
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10


def _status(obj: dict[str, Any], *zero_fields: str) -> None:
    status = ensure(obj, "status")
    if status is not None:
        for key in zero_fields:
            status.setdefault(key, 0)


def _rolling_update(spec: dict[str, Any], key: str, *, max_unavailable: int | str, max_surge: int | str) -> None:
    """A strategy defaulting to RollingUpdate, whose rolling parameters default when it is one."""
    strategy = ensure(spec, key)
    if strategy is None:
        return
    set_default(strategy, "type", "RollingUpdate")
    rolling = ensure(strategy, "rollingUpdate") if strategy["type"] == "RollingUpdate" else None
    if rolling is not None:
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = max_unavailable
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = max_surge


def deployment(obj: dict[str, Any]) -> None:
    """``SetDefaults_Deployment``: replicas 1, RollingUpdate 25%/25%, history 10, deadline 600."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    _replicas(spec)
    _rolling_update(spec, "strategy", max_unavailable="25%", max_surge="25%")
    _revision_history(spec)
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = 600
    pod_template_spec(child(spec, "template"))
    _status(obj)


def stateful_set(obj: dict[str, Any]) -> None:
    """``SetDefaults_StatefulSet`` (StatefulSetAutoDeletePVC is GA: the retention policy is set)."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    set_default(spec, "podManagementPolicy", "OrderedReady")
    strategy = ensure(spec, "updateStrategy")
    if strategy is not None:
        if strategy.get("type") in (None, ""):
            strategy["type"] = "RollingUpdate"
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
        rolling = child(strategy, "rollingUpdate")
        if strategy["type"] == "RollingUpdate" and rolling is not None and rolling.get("partition") is None:
            rolling["partition"] = 0
    retention = ensure(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        set_default(retention, "whenDeleted", "Retain")
        set_default(retention, "whenScaled", "Retain")
    _replicas(spec)
    _revision_history(spec)
    pod_template_spec(child(spec, "template"))
    for claim in items(spec, "volumeClaimTemplates"):
        pvc_spec(ensure(claim, "spec"))
        claim_status = ensure(claim, "status")
        if claim_status is not None:
            set_default(claim_status, "phase", "Pending")
    _status(obj, "replicas", "availableReplicas")


def daemon_set(obj: dict[str, Any]) -> None:
    """``SetDefaults_DaemonSet``: RollingUpdate with maxUnavailable 1 and maxSurge 0, history 10."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    _rolling_update(spec, "updateStrategy", max_unavailable=1, max_surge=0)
    _revision_history(spec)
    pod_template_spec(child(spec, "template"))
    _status(obj, "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady")


def replica_set(obj: dict[str, Any]) -> None:
    """``SetDefaults_ReplicaSet``: replicas 1."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    _replicas(spec)
    pod_template_spec(child(spec, "template"))
    _status(obj, "replicas")
