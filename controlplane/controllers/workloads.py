"""What the hub's controllers share about workloads: which kinds propagate, keys, conditions.

In: the hub's :class:`Registry` and workload objects as dicts. Out: the propagatable
resource types (every namespaced kind but the hub's own, and the cluster-scoped kinds of
:data:`~policies.served.PROPAGATABLE_CLUSTER_KINDS`, whose bindings live in ``gpufed-system``), :class:`WorkloadRef` keys (a workload, and the name of its binding), the
``Propagated`` condition the detector sets on a hub workload's status, and a dict version
of ``set_condition`` for status conditions. Pure; no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from controlplane.apis.apiextensions import builtin
from controlplane.apis.constants import (
    ANNOTATION_RETAIN_REPLICAS_BY_HPA,
    CLUSTER_GROUP,
    CONDITION_PROPAGATED,
    COORDINATION_GROUP,
    KARMADA_POLICY_GROUP,
    POLICY_GROUP,
    REPORTS_GROUP,
    SYSTEM_NAMESPACE,
    WORK_GROUP,
)
from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apis.pods import scheduling_gated_condition
from controlplane.apis.views import BindingView, ObjectView
from controlplane.apis.work_v1alpha1 import binding_name
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.job import suspension_condition as job_suspension
from controlplane.interpreter.jobset import suspension_condition as jobset_suspension
from controlplane.interpreter.kubeflow import suspension_condition as kubeflow_suspension
from controlplane.interpreter.pruning import prune_for_member
from controlplane.interpreter.raycluster import suspension_status as raycluster_suspension
from controlplane.interpreter.rayjob import suspension_deployment_status as rayjob_suspension
from controlplane.interpreter.registry import group_of
from controlplane.interpreter.shape import InvalidObject, malformed
from controlplane.objectclient import Registry, ResourceType
from policies.claims import CLAIM_ANNOTATIONS, CLAIM_LABELS
from policies.served import PROPAGATABLE_CLUSTER_KINDS, KindStatus

#: API groups whose kinds are the hub's own machinery and never propagate: gpufed's and
#: Karmada's policy kinds, bindings, Works, clusters, reports, Leases, and the fleet's quotas (Kueue's kinds).
HUB_ONLY_GROUPS: frozenset[str] = frozenset(
    {
        CLUSTER_GROUP, POLICY_GROUP, KARMADA_POLICY_GROUP, WORK_GROUP, REPORTS_GROUP, COORDINATION_GROUP,
        "kueue.x-k8s.io",
        # Karmada's FederatedHPA and CronFederatedHPA scale workloads on the hub, as Karmada's control
        # plane keeps them (its detector skips the karmada.io groups).
        "autoscaling.karmada.io",
        # Karmada's MultiClusterService: its own controller places it, never a policy (Karmada's
        # detector skips networking.karmada.io too).
        "networking.karmada.io",
    }
)
#: Kinds that never propagate: Events describe hub objects (served as core v1 and events.k8s.io/v1).
#: Namespaced kinds that stay on the hub: Events, and ControllerRevisions, a StatefulSet's or
#: DaemonSet's history, which each member's own controllers write for their copies.
HUB_ONLY_KINDS: frozenset[tuple[str, str]] = frozenset(
    {("", "Event"), ("events.k8s.io", "Event"), ("apps", "ControllerRevision")}
)
#: Where the bindings of cluster-scoped objects (:data:`PROPAGATABLE_CLUSTER_KINDS`) live
#: (Karmada's ClusterResourceBinding, as a namespaced one).
CLUSTER_SCOPED_BINDING_NAMESPACE = SYSTEM_NAMESPACE


def binding_namespace(namespace: str | None) -> str:
    """The namespace of the binding of a workload in ``namespace`` (None or "": cluster-scoped)."""
    return namespace or CLUSTER_SCOPED_BINDING_NAMESPACE


def is_plain(api_version: str, kind: str) -> bool:
    """A kind without replicas: no interpreter, so the whole object goes to each chosen cluster
    (Karmada's default interpretation)."""
    return interpreter_for(api_version, kind) is None


#: The fields of the condition the detector writes (kube's metav1.Condition, less observedGeneration).
CONDITION_FIELDS: Final = frozenset({"type", "status", "reason", "message", "lastTransitionTime"})


def keeps_propagated_condition(rt: ResourceType) -> bool:
    """Whether the detector writes its ``Propagated`` condition into objects of ``rt``: a kind with
    replicas and a ``status`` subresource whose status keeps ``conditions`` (a custom kind's status
    schema declares them, each with the fields of :data:`CONDITION_FIELDS`, or keeps unknown fields;
    otherwise kube's pruning drops them, or a strict write refuses them: ``... cannot be handled as a
    CronTab: strict decoding error: unknown field "status.conditions"``, or ``"status.conditions[0].reason"``
    for a schema whose conditions have a type and a status only)."""
    if not rt.has_status or is_plain(rt.api_version, rt.kind):
        return False
    if rt.custom is None:
        return True
    schema = rt.custom.schema
    status = (schema.get("properties") or {}).get("status")
    if status is None:
        return bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if status.get("x-kubernetes-preserve-unknown-fields"):
        return True
    conditions = (status.get("properties") or {}).get("conditions")
    if not isinstance(conditions, dict):
        return False
    items = conditions.get("items")
    if not isinstance(items, dict) or items.get("x-kubernetes-preserve-unknown-fields"):
        return True
    return set(items.get("properties") or {}) >= CONDITION_FIELDS


def is_propagatable(rt: ResourceType) -> bool:
    """Whether a policy may propagate objects of ``rt``: any namespaced kind the hub serves that
    is not part of the hub's own machinery, and the cluster-scoped kinds of :data:`PROPAGATABLE_CLUSTER_KINDS`."""
    if not rt.namespaced:
        return (rt.group, rt.kind) in PROPAGATABLE_CLUSTER_KINDS
    return rt.group not in HUB_ONLY_GROUPS and (rt.group, rt.kind) not in HUB_ONLY_KINDS


def kind_status(registry: Registry, api_version: str, kind: str) -> KindStatus:
    """What ``registry`` says of a kind a policy selects (:data:`policies.served.KindLookup`)."""
    rt = registry.for_kind(api_version, kind)
    if rt is None:
        return KindStatus.UNSERVED
    if is_propagatable(rt):
        return KindStatus.PROPAGATABLE
    return KindStatus.HUB_ONLY if rt.namespaced else KindStatus.CLUSTER_SCOPED


class WorkloadConditionType(StrEnum):
    """Conditions the hub adds to a workload's status (besides the members' merged ones)."""

    PROPAGATED = CONDITION_PROPAGATED
    SCHEDULABLE = "Schedulable"
    """False (reason NeverFits) while no node of the fleet could hold one pod of the workload."""


class PropagatedReason(StrEnum):
    CLAIMED = "PolicyClaimed"
    """A policy claims the workload; it has a binding."""
    NO_POLICY_MATCHED = "NoPolicyMatched"
    """No policy selects the workload: it stays on the hub only."""
    POLICY_REMOVED = "PolicyRemoved"
    """The policy that claimed it no longer does; it keeps running where it was placed."""
    INVALID_OBJECT = "InvalidObject"
    """A field the hub must read has the wrong type: nothing is propagated until it is fixed."""
    WAITING_FOR_QUOTA = "WaitingForQuota"
    """Queued (label kueue.x-k8s.io/queue-name): held at the hub until its Workload is admitted."""
    RUNTIME_NOT_FOUND = "RuntimeNotFound"
    """A TrainJob whose TrainingRuntime or ClusterTrainingRuntime the hub does not have: nothing to
    place it by (its nodes and GPUs are the runtime's) until the runtime exists."""


@dataclass(frozen=True, slots=True, order=True)
class WorkloadRef:
    """A workload on the hub, the key of the detector's and deletion controller's queues."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def binding_name(self) -> str:
        return binding_name(self.name, self.kind)

    @property
    def binding_namespace(self) -> str:
        return binding_namespace(self.namespace)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> WorkloadRef:
        meta = ObjectView(obj).metadata
        return cls(str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta["name"]))

    def bound_by(self, binding: Mapping[str, Any]) -> bool:
        """Whether ``binding`` is this workload's (not another kind's sharing its name)."""
        resource = BindingView(binding).resource
        group = group_of(str(resource.get("apiVersion")))
        return bool(resource.get("kind") == self.kind and group == group_of(self.api_version))

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def shape_problem(rt: ResourceType, obj: Mapping[str, Any]) -> InvalidObject | None:
    """The first field of ``obj`` the hub cannot read (:func:`malformed`), or None. A custom
    kind's objects and CRDs are left to their own validation: the field names the shape check
    reads by name (``replicas``, ``containers``...) mean something else in them (a CRD's schema
    has them as property names)."""
    if rt.custom is not None or (rt.group, rt.kind) in PROPAGATABLE_CLUSTER_KINDS:
        return None
    return malformed(obj)


def propagatable_types(registry: Registry) -> list[ResourceType]:
    """Namespaced kinds the detector watches: every kind the hub serves that may propagate
    (:func:`is_propagatable`), with an interpreter or not. A custom kind served in several
    versions (``conversion: None``: one set of objects), or a built-in kind served in a version
    converted from another (autoscaling/v1 HorizontalPodAutoscaler), is watched once, in its
    storage version."""
    return [rt for rt in registry if is_propagatable(rt) and not rt.stored_in_version]


def is_deleting(obj: Mapping[str, Any] | None) -> bool:
    return ObjectView(obj).is_deleting


def find_condition(conditions: Sequence[Mapping[str, Any]] | None, ctype: str) -> Mapping[str, Any] | None:
    for cond in conditions or ():
        if cond.get("type") == ctype:
            return cond
    return None


def condition_is_true(obj: Mapping[str, Any] | None, ctype: str) -> bool:
    cond = ObjectView(obj).condition(ctype)
    return cond is not None and cond.get("status") == "True"


def with_condition(
    conditions: Sequence[Mapping[str, Any]] | None, condition: Mapping[str, Any], *, now: str
) -> list[dict[str, Any]]:
    """``conditions`` with ``condition`` set, as ``meta.set_condition`` does for models.

    ``lastTransitionTime`` moves to ``now`` only when the status changes; order is kept.
    """
    out: list[dict[str, Any]] = []
    replaced = False
    for existing in conditions or ():
        if existing.get("type") != condition.get("type"):
            out.append(dict(existing))
            continue
        replaced = True
        new = dict(condition)
        if existing.get("status") == condition.get("status") and existing.get("lastTransitionTime"):
            new["lastTransitionTime"] = existing["lastTransitionTime"]
        else:
            new["lastTransitionTime"] = now
        out.append(new)
    if not replaced:
        out.append({**condition, "lastTransitionTime": condition.get("lastTransitionTime") or now})
    return out


#: The ``Suspended`` condition of a job kind, as the controller that runs it keeps it (a gated
#: Pod's ``PodScheduled=False``, ``SchedulingGated``, as kube-scheduler keeps it).
_SUSPENSION_CONDITIONS: dict[tuple[str, str], Callable[[Mapping[str, Any]], dict[str, str] | None]] = {
    ("", "Pod"): scheduling_gated_condition,
    ("batch", "Job"): job_suspension,
    ("jobset.x-k8s.io", "JobSet"): jobset_suspension,
    **{(KUBEFLOW_GROUP, kind): kubeflow_suspension for kind in TRAINING_KINDS},
}


def with_job_suspension(rt: ResourceType, workload: Mapping[str, Any], status: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """``status`` with what the controller that runs a job kind says of its suspension, for a job
    the hub holds: no member runs it, so no member's status says it is suspended (``kubectl get
    jobs`` would say ``Running``). A Job's, a JobSet's or a ``kubeflow.org/v1`` job's ``Suspended``
    condition (kube's Job controller, :func:`~controlplane.interpreter.job.suspension_condition`;
    the JobSet controller, :func:`~controlplane.interpreter.jobset.suspension_condition`; the
    training operator, :func:`~controlplane.interpreter.kubeflow.suspension_condition`), a
    RayJob's ``jobDeploymentStatus`` (KubeRay, :func:`~controlplane.interpreter.rayjob.suspension_deployment_status`),
    a RayCluster's ``state`` and suspension conditions (KubeRay, :func:`~controlplane.interpreter.raycluster.suspension_status`),
    a gated Pod's ``PodScheduled`` (kube-scheduler, :func:`~controlplane.apis.pods.scheduling_gated_condition`).
    Other kinds' ``status`` comes back as it is."""
    out = dict(status)
    if (rt.group, rt.kind) == ("ray.io", "RayJob"):
        deployment = rayjob_suspension(workload)
        if deployment is not None:
            out["jobDeploymentStatus"] = deployment
        return out
    if (rt.group, rt.kind) == ("ray.io", "RayCluster"):
        state, conditions = raycluster_suspension(workload)
    else:
        condition_of = _SUSPENSION_CONDITIONS.get((rt.group, rt.kind))
        suspended = condition_of(workload) if condition_of is not None else None
        state, conditions = None, [suspended] if suspended else []
    if state is not None:
        out["state"] = state
    for condition in conditions:
        out["conditions"] = with_condition(out.get("conditions"), condition, now=now)
    return out


#: Annotations that mean something on the hub only and never reach a member's copy: kubectl's
#: record of the hub apply, the hpa-scale-target-marker's note that it set the retain-replicas
#: label (the label itself goes on: the agent reads it), and the claiming policy's name
#: (:mod:`policies.claims`; Karmada copies its claim marks, but so a claim, a release or a
#: preemption would rewrite every Work of the workload and apply it again in each member).
HUB_ONLY_ANNOTATIONS: frozenset[str] = frozenset(
    {"kubectl.kubernetes.io/last-applied-configuration", ANNOTATION_RETAIN_REPLICAS_BY_HPA, *CLAIM_ANNOTATIONS}
)
#: Labels that never reach a member's copy: the claiming policy's permanent id, as its name above.
#: And the mark of a CRD the hub lists for a kind it serves built in (its user's copy propagates).
HUB_ONLY_LABELS: frozenset[str] = frozenset({*CLAIM_LABELS, builtin.LABEL})


def without_server_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a hub object fit to create in a member: no status, no server-owned metadata, no
    :data:`HUB_ONLY_ANNOTATIONS` nor :data:`HUB_ONLY_LABELS`, and none of what its kind carries of one cluster only
    (:func:`prune_for_member`: a Service's clusterIP, a Job's generated selector and its TTL…)."""
    # Copied field by field: the status and the metadata left out (managedFields: a field set
    # per writer) are never copied.
    out = {key: value if key == "metadata" else copy.deepcopy(value) for key, value in obj.items() if key != "status"}
    meta = ObjectView(out).metadata
    kept = {
        key: copy.deepcopy(meta[key])
        for key in ("name", "namespace", "labels", "annotations")
        if meta.get(key) not in (None, {}, [])
    }
    for key, hub_only in (("annotations", HUB_ONLY_ANNOTATIONS), ("labels", HUB_ONLY_LABELS)):
        marks = kept.get(key)
        if isinstance(marks, dict):
            marks = {k: v for k, v in marks.items() if k not in hub_only}
            if marks:
                kept[key] = marks
            else:
                kept.pop(key)
    out["metadata"] = kept
    prune_for_member(out)
    return out
