"""kube's validation of a write of the status subresource of built-in kinds.

As the registry's status strategies (``ValidateDeploymentStatusUpdate``, ``ValidateReplicaSetStatusUpdate``,
``ValidateStatefulSetStatusUpdate``, ``ValidateDaemonSetStatusUpdate``,
``ValidatePodDisruptionBudgetStatusUpdate``, ``ValidateHorizontalPodAutoscalerStatusUpdate``, and
the counts of ``ValidateJobUpdateStatus``): the counts a controller reports are not negative, the
parts are not more than the whole (ready, available, updated replicas within ``status.replicas``;
available within ready) and ``status.collisionCount`` is never decremented. A status write keeps the stored spec,
so nothing outside ``status`` is checked here (metadata is checked by the API server for every kind).

The hub writes the status of a propagated workload as the sum of its members' statuses, each of
which a member's own API server has validated with these rules; sums keep them.
"""

from __future__ import annotations

from collections.abc import Callable

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.untyped import Obj

#: (object to be stored, stored object on update or None) → field errors.
StatusValidator = Callable[[Obj, Obj | None], list[FieldError]]

NOT_MORE_THAN_REPLICAS = "cannot be greater than status.replicas"


def _count(status: Obj, name: str) -> int:
    """The integer count ``name`` of ``status`` (absent, or not an integer: 0; the latter is
    reported by :func:`_nonnegative`)."""
    value = status.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _nonnegative(status: Obj, names: tuple[str, ...]) -> list[FieldError]:
    """``ValidateNonnegativeField`` of each of ``names`` that is set, in that order."""
    errors: list[FieldError] = []
    for name in names:
        errors += field.nonnegative(status.get(name), f"status.{name}")
    return errors


def _not_more_than(status: Obj, parts: tuple[str, ...], whole: str, message: str) -> list[FieldError]:
    """An Invalid error for each of ``parts`` whose count exceeds that of ``whole``."""
    limit = _count(status, whole)
    return [
        field.invalid(f"status.{part}", _count(status, part), message)
        for part in parts
        if _count(status, part) > limit
    ]


def _collision_count_kept(new: Obj, old: Obj | None) -> list[FieldError]:
    """``IsDecremented``: a ``collisionCount`` the stored status has may not go down or away."""
    if old is None:
        return []
    before = field.mapping(old.get("status")).get("collisionCount")
    after = field.mapping(new.get("status")).get("collisionCount")
    if not isinstance(before, int) or isinstance(before, bool):
        return []
    if after is None or (isinstance(after, int) and after < before):
        return [field.invalid("status.collisionCount", after or 0, "cannot be decremented")]
    return []


def validate_deployment_status(new: Obj, old: Obj | None) -> list[FieldError]:
    status = field.mapping(new.get("status"))
    errors = _nonnegative(status, (
        "observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
        "unavailableReplicas", "terminatingReplicas", "collisionCount",
    ))
    errors += _not_more_than(status, ("updatedReplicas", "readyReplicas", "availableReplicas"), "replicas",
                             NOT_MORE_THAN_REPLICAS)
    errors += _not_more_than(status, ("availableReplicas",), "readyReplicas", "cannot be greater than readyReplicas")
    return errors + _collision_count_kept(new, old)


def validate_replica_set_status(new: Obj, old: Obj | None) -> list[FieldError]:
    status = field.mapping(new.get("status"))
    errors = _nonnegative(status, (
        "replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration",
        "terminatingReplicas",
    ))
    errors += _not_more_than(status, ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"), "replicas",
                             NOT_MORE_THAN_REPLICAS)
    return errors + _not_more_than(status, ("availableReplicas",), "readyReplicas",
                                   "cannot be greater than readyReplicas")


def validate_stateful_set_status(new: Obj, old: Obj | None) -> list[FieldError]:
    status = field.mapping(new.get("status"))
    errors = _nonnegative(status, (
        "replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas",
        "observedGeneration", "collisionCount",
    ))
    errors += _not_more_than(status, ("readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"),
                             "replicas", NOT_MORE_THAN_REPLICAS)
    errors += _not_more_than(status, ("availableReplicas",), "readyReplicas",
                             "cannot be greater than status.readyReplicas")
    return errors + _collision_count_kept(new, old)


def validate_daemon_set_status(new: Obj, old: Obj | None) -> list[FieldError]:
    status = field.mapping(new.get("status"))
    errors = _nonnegative(status, (
        "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
        "observedGeneration", "updatedNumberScheduled", "numberAvailable", "numberUnavailable", "collisionCount",
    ))
    return errors + _collision_count_kept(new, old)


def validate_job_status(new: Obj, old: Obj | None) -> list[FieldError]:
    """The counts of ``validateJobStatus`` (kube also checks the transitions of the conditions and
    the uncounted pods, with options that depend on the stored Job; those are not checked here)."""
    return _nonnegative(field.mapping(new.get("status")), ("active", "succeeded", "failed", "ready", "terminating"))


def validate_pod_disruption_budget_status(new: Obj, old: Obj | None) -> list[FieldError]:
    """The counts (kube also checks that the conditions are well-formed ``metav1.Condition`` values;
    not made here: a merged condition has no transition time when no member gave one)."""
    status = field.mapping(new.get("status"))
    return _nonnegative(status, ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"))


def validate_horizontal_pod_autoscaler_status(new: Obj, old: Obj | None) -> list[FieldError]:
    """As kube, whose path for ``desiredReplicas`` carries a typo kube has kept: ``desiredReplicasa``."""
    status = field.mapping(new.get("status"))
    return (
        field.nonnegative(status.get("currentReplicas"), "status.currentReplicas")
        + field.nonnegative(status.get("desiredReplicas"), "status.desiredReplicasa")
    )


_STATUS_VALIDATORS: dict[tuple[str, str], StatusValidator] = {
    ("apps", "Deployment"): validate_deployment_status,
    ("apps", "ReplicaSet"): validate_replica_set_status,
    ("apps", "StatefulSet"): validate_stateful_set_status,
    ("apps", "DaemonSet"): validate_daemon_set_status,
    ("batch", "Job"): validate_job_status,
    ("policy", "PodDisruptionBudget"): validate_pod_disruption_budget_status,
    ("autoscaling", "HorizontalPodAutoscaler"): validate_horizontal_pod_autoscaler_status,
}


def for_kind(group: str, kind: str) -> StatusValidator | None:
    """The validator of a status write of ``kind`` in API group ``group``, if kube has one."""
    return _STATUS_VALIDATORS.get((group, kind))
