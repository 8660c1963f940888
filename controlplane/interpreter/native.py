"""Status interpretation of built-in kinds that have no replicas: DaemonSet, CronJob, Service,
Ingress, PodDisruptionBudget, PersistentVolumeClaim; and a Pod's (one replica, :mod:`controlplane.interpreter.pod`).

A kind without a :class:`~controlplane.interpreter.base.KindInterpreter` has no replicas: the
whole object goes to every chosen cluster and its member statuses are collected into the
binding's ``aggregatedStatus`` (Karmada's default interpreter). For the kinds here the hub
object's own ``.status`` is also folded from the members', as Karmada's native interpreter
does (``pkg/resourceinterpreter/default/native/aggregatestatus.go``):

* DaemonSet: the node counts summed; ``observedGeneration`` the hub object's generation once
  every member observed its own;
* CronJob: ``active`` Job references of every member (names prefixed with the cluster, as
  Karmada does, so two members' Jobs of one name stay apart), the latest ``lastScheduleTime``
  and ``lastSuccessfulTime``;
* Service (LoadBalancer) and Ingress: every member's ``loadBalancer.ingress`` points, in
  cluster name order, as the members reported them, without repeats;
* PodDisruptionBudget: the pod counts summed, ``disruptionsAllowed`` summed;
* PersistentVolumeClaim: ``Bound`` while every member that reported has its claim bound, else the
  phase of one that has not, ``Lost`` first (Karmada's ``aggregatePersistentVolumeClaimStatus``);
  a claim is healthy whatever its phase (one waits for its first consumer);
* Pod: the worst phase (Failed, then Pending -- a member that has not reported counts as
  Pending --, then Running, then Succeeded) and every member's container statuses, each its
  ``ready`` and ``state`` (Karmada's ``aggregatePodStatus``) with its name, image and restart
  count, so ``kubectl get pods`` on the hub says what the members' copies do.

Each also judges a member copy's health (``health_of``, as the agent and the hub do): a
DaemonSet's updated and available daemon pods at the current generation, a LoadBalancer
Service's or an Ingress's load balancer points, a PodDisruptionBudget's healthy pods; a CronJob
is always healthy; :func:`pod_health` judges a Pod.

:data:`StatusInterpreter` is the part of the kind contract the status controller needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from controlplane.apis.untyped import Obj, as_int
from controlplane.interpreter.base import (
    FinishedPhase,
    Health,
    MemberStatuses,
    extreme_time,
    put_conditions,
    reported,
    sum_fields,
)
from controlplane.interpreter.health import (
    conditions_of,
    generic_health,
    observed_generation_behind,
    spec_of,
    status_of,
)

HealthRule = Callable[[Obj], Health]
"""Health of a member object from the observed object (:mod:`controlplane.interpreter.health`)."""


class StatusInterpreter(Protocol):
    """How the hub folds the members' statuses of one kind into the hub object's status."""

    group: str
    kind: str

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj: ...

    def health_of(self, observed: Obj) -> Health:
        """Health of one member's copy from the observed object (what is known of it)."""
        ...

    def health(self, status: Mapping[str, Any] | None) -> Health:
        """Health of one member's copy from its ``.status`` alone."""
        ...

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None: ...


class _NeverFinishes:
    group = ""
    kind = ""

    def finished(self, status: Mapping[str, Any] | None) -> FinishedPhase | None:
        return None

    def health_of(self, observed: Obj) -> Health:
        return generic_health(observed)

    def health(self, status: Mapping[str, Any] | None) -> Health:
        return Health.UNKNOWN if status is None else self.health_of({"kind": self.kind, "status": status})


def _observed(obj: Obj, member_statuses: MemberStatuses, out: Obj) -> None:
    """``observedGeneration`` = the hub object's generation once every member reported."""
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is not None and member_statuses and all(s is not None for _, s in member_statuses):
        out["observedGeneration"] = generation


DAEMONSET_FIELDS = (
    "currentNumberScheduled",
    "desiredNumberScheduled",
    "numberAvailable",
    "numberMisscheduled",
    "numberReady",
    "updatedNumberScheduled",
    "numberUnavailable",
)


class SummedStatus(_NeverFinishes):
    """A kind whose hub status is its members' counts summed, conditions merged."""

    fields: tuple[str, ...] = ()
    #: Fields left out of the hub status while their sum is 0 (kube omits them then).
    omitted_when_zero: frozenset[str] = frozenset()

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = reported(member_statuses)
        if not present:
            return {}
        sums = sum_fields(present, self.fields)
        out: Obj = {k: v for k, v in sums.items() if v or k not in self.omitted_when_zero}
        _observed(obj, member_statuses, out)
        put_conditions(out, member_statuses)
        return out


class DaemonSetStatus(SummedStatus):
    group = "apps"
    kind = "DaemonSet"
    fields = DAEMONSET_FIELDS
    omitted_when_zero = frozenset({"numberUnavailable"})

    def health_of(self, observed: Obj) -> Health:
        """Unknown without a status or while it is about an earlier generation (a status without
        ``observedGeneration`` counts as generation 0); Healthy when every scheduled daemon pod
        is updated and available."""
        status = status_of(observed)
        if not status or observed_generation_behind(observed, missing=0):
            return Health.UNKNOWN
        desired = as_int(status.get("desiredNumberScheduled"))
        updated = as_int(status.get("updatedNumberScheduled"))
        available = as_int(status.get("numberAvailable"))
        return Health.HEALTHY if updated == desired and available >= updated else Health.UNHEALTHY


class CronJobStatus(_NeverFinishes):
    group = "batch"
    kind = "CronJob"

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = [(name, s) for name, s in member_statuses if s is not None]
        if not present:
            return {}
        active = [
            {**ref, "name": f"{name}/{ref.get('name')}"}
            for name, status in sorted(present, key=lambda p: p[0])
            for ref in status.get("active") or ()
            if isinstance(ref, Mapping)
        ]
        out: Obj = {}
        if active:
            out["active"] = active
        for field in ("lastScheduleTime", "lastSuccessfulTime"):
            value = extreme_time([s.get(field) for _, s in present], max)
            if value:
                out[field] = value
        return out


def load_balancer_points(statuses: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """Every member's ``loadBalancer.ingress`` entries, in member order, without repeats."""
    out: list[Obj] = []
    for status in statuses:
        for point in (status.get("loadBalancer") or {}).get("ingress") or ():
            if isinstance(point, Mapping) and dict(point) not in out:
                out.append(dict(point))
    return out


class LoadBalancerStatus(_NeverFinishes):
    """Service and Ingress: the members' load balancer points, merged."""

    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        present = [s for _, s in sorted(member_statuses, key=lambda p: p[0]) if s is not None]
        if not present:
            return {}
        points = load_balancer_points(present)
        out: Obj = {"loadBalancer": {"ingress": points} if points else {}}
        put_conditions(out, member_statuses)
        return out

    def health_of(self, observed: Obj) -> Health:
        """Healthy once the load balancer has an ingress point (Karmada's rule), Unhealthy before;
        a Service of another ``spec.type`` (ClusterIP by default) is always healthy. A Service
        whose spec is not known is judged as a load balancer."""
        spec = spec_of(observed)
        if self.kind == "Service" and spec is not None and spec.get("type") != "LoadBalancer":
            return Health.HEALTHY
        return Health.HEALTHY if (status_of(observed).get("loadBalancer") or {}).get("ingress") else Health.UNHEALTHY


PDB_FIELDS = ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")


class PodDisruptionBudgetStatus(SummedStatus):
    group = "policy"
    kind = "PodDisruptionBudget"
    fields = PDB_FIELDS

    def health_of(self, observed: Obj) -> Health:
        """Unknown without a status; Healthy while at least the desired pods are healthy."""
        status = status_of(observed)
        if not status:
            return Health.UNKNOWN
        healthy = as_int(status.get("currentHealthy")) >= as_int(status.get("desiredHealthy"))
        return Health.HEALTHY if healthy else Health.UNHEALTHY


class PersistentVolumeClaimStatus(_NeverFinishes):
    group = ""
    kind = "PersistentVolumeClaim"

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        phases = [s.get("phase") for s in reported(member_statuses)]
        if not phases:
            return {}
        if "Lost" in phases:
            return {"phase": "Lost"}
        return {"phase": next((str(p) for p in reversed(phases) if p != "Bound"), "Bound")}


#: A Pod's phases, the one that wins the hub status first (Karmada's order; Unknown is ignored).
POD_PHASES = ("Failed", "Pending", "Running", "Succeeded")
#: What a member's container status keeps besides ``ready`` and ``state`` (Karmada's two): the
#: fields kube always serialises, so ``kubectl get pods`` counts restarts and names containers.
_CONTAINER_STATUS_KEYS = ("name", "image", "imageID", "restartCount")


def pod_health(observed: Obj) -> Health:
    """A Pod: Unhealthy once Failed, Healthy once Succeeded or Running and Ready, Unknown before."""
    status = status_of(observed)
    phase = status.get("phase")
    if phase == "Failed":
        return Health.UNHEALTHY
    if phase == "Succeeded" or (phase == "Running" and conditions_of(status).get("Ready") == "True"):
        return Health.HEALTHY
    return Health.UNKNOWN


class PodStatus(_NeverFinishes):
    group = ""
    kind = "Pod"

    def aggregate_status(self, obj: Obj, member_statuses: MemberStatuses) -> Obj:
        phases = {"Pending" if s is None else s.get("phase") for _, s in member_statuses}
        out: Obj = {}
        phase = next((p for p in POD_PHASES if p in phases), None)
        if phase is not None:
            out["phase"] = phase
        containers = [
            {**{k: c[k] for k in _CONTAINER_STATUS_KEYS if k in c}, "ready": bool(c.get("ready")), "state": c.get("state") or {}}
            for s in reported(member_statuses)
            for c in s.get("containerStatuses") or ()
            if isinstance(c, Mapping)
        ]
        if containers:
            out["containerStatuses"] = containers
        return out

    def health_of(self, observed: Obj) -> Health:
        return pod_health(observed)


_STATUS_INTERPRETERS: dict[tuple[str, str], StatusInterpreter] = {
    (i.group, i.kind): i
    for i in (
        DaemonSetStatus(),
        CronJobStatus(),
        LoadBalancerStatus("", "Service"),
        LoadBalancerStatus("networking.k8s.io", "Ingress"),
        PodDisruptionBudgetStatus(),
        PersistentVolumeClaimStatus(),
    )
}


def status_interpreter_for(group: str, kind: str) -> StatusInterpreter | None:
    """How the hub status of a kind without replicas is folded; None: it is left as it is."""
    return _STATUS_INTERPRETERS.get((group, kind))


#: The health rules of the built-in kinds here: those of the status interpreters.
_HEALTH_RULES: dict[tuple[str, str], HealthRule] = {key: i.health_of for key, i in _STATUS_INTERPRETERS.items()}


def native_health_rule(group: str, kind: str) -> HealthRule | None:
    """The health rule of a built-in kind without replicas, None when it has none of its own."""
    return _HEALTH_RULES.get((group, kind))


def native_health_rules() -> list[tuple[tuple[str, str], HealthRule]]:
    """Every (group, kind) with a health rule here, and its rule."""
    return sorted(_HEALTH_RULES.items(), key=lambda item: item[0])
