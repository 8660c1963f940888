"""Kueue's objects (wire dicts) to the admission core's values and back. Pure.

* a queued workload (a Job, Deployment, PyTorchJob ... with the label
  ``kueue.x-k8s.io/queue-name``; a Deployment's may be on its pod template alone) → the spec of its Workload: one pod set per role the
  interpreter reads (count and per-pod requests; the pod template holds those requests);
* Workloads, ClusterQueues, LocalQueues, ResourceFlavors → :func:`controlplane.admission.core.decide`'s input;
* a decision → the Workload's ``status.admission`` and conditions, and the queues' counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from controlplane.admission import checks, podsets
from controlplane.admission.core import (
    DEFAULT_WEIGHT,
    Admission,
    Admitted,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPreference,
    Pending,
    PodSetRequest,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    Quota,
    ResourceGroup,
    WhenCanBorrow,
    WhenCanPreempt,
)
from controlplane.admission.core.quota import FlavorResource
from controlplane.apis import kueue_conversion
from controlplane.apis import kueue_v1beta1 as kueue
from controlplane.apis.kube.names import label_value_errors
from controlplane.apis.kueue_status import MAX_LOCAL_QUEUE_USAGE_ITEMS
from controlplane.apis.kueue_views import ClusterQueueView, CohortView, WorkloadView, pod_set_assignments
from controlplane.apis.meta import LabelSelector
from controlplane.apis.quantity import QuantityError, format_quantity, milli_value, parse_quantity, to_int
from controlplane.apis.trainer import is_train_job
from controlplane.apis.trainer_runtime import replicated_jobs, resolved_runtime, without_kueue_patch
from controlplane.apis.untyped import Obj
from controlplane.apis.views import ObjectView
from controlplane.gojson import parse_bool
from controlplane.interpreter import interpreter_for
from controlplane.interpreter.registry import group_of
from controlplane.interpreter.requirements import ReplicaRequirements, requirements

_HASH_LENGTH: Final = 5
#: A Workload name's longest prefix: 253 characters less the hash and its ``-`` (Kueue's maxPrefixLength).
_MAX_PREFIX: Final = 253 - 1 - _HASH_LENGTH
#: What Go's ``strconv.Atoi`` reads as an int32.
_INT: Final = re.compile(r"[+-]?[0-9]{1,10}")


def queue_name(workload: Mapping[str, Any]) -> str | None:
    """The LocalQueue a workload asks for: its label ``kueue.x-k8s.io/queue-name``, or, for a
    Deployment without one, its pod template's (Kueue's Deployment sample: every Pod the Deployment
    makes carries the label, and Kueue's pod integration queues each)."""
    value = _queue_label(workload)
    if value is None and workload.get("apiVersion") == "apps/v1" and workload.get("kind") == "Deployment":
        spec = workload.get("spec")
        template = spec.get("template") if isinstance(spec, Mapping) else None
        value = _queue_label(template) if isinstance(template, Mapping) else None
    return value


def template_queued(workload: Mapping[str, Any]) -> bool:
    """Whether a workload is queued by its pod template's label alone (:func:`queue_name`)."""
    return _queue_label(workload) is None and queue_name(workload) is not None


def _queue_label(obj: Mapping[str, Any]) -> str | None:
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    value = labels.get(kueue.LABEL_QUEUE_NAME) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) and value else None


def workload_name(name: str, uid: str, *, kind: str, group: str) -> str:
    """Kueue's ``GetWorkloadNameForOwnerWithGVK``: ``<lowercase kind>-<name>`` (cut to fit 253
    characters with the suffix) ``-`` the first 5 hex digits of the SHA-1 of the owner's kind,
    group, name and UID (one per line), so a recreated job of the same name gets another name."""
    prefix = f"{kind.lower()}-{name}"[:_MAX_PREFIX]
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode(), usedforsecurity=False).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def workload_name_of(workload: Mapping[str, Any]) -> str:
    """The name of the Workload Kueue makes for a queued workload (:func:`workload_name`)."""
    view = ObjectView(workload)
    return workload_name(view.name, view.uid or "", kind=view.kind, group=group_of(view.api_version))


def workload_labels(workload: Mapping[str, Any]) -> dict[str, str]:
    """The labels Kueue's ``constructWorkload`` gives the Workload of a queued workload: its UID
    under ``kueue.x-k8s.io/job-uid`` when the UID is a valid label value (else none, as Kueue
    logs and goes on)."""
    uid = str((workload.get("metadata") or {}).get("uid") or "")
    return {kueue.LABEL_JOB_UID: uid} if not label_value_errors(uid) else {}


def controller_owner(workload: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """(group, kind, name, uid) of the controller owner of a Workload: the workload it queues,
    whatever the Workload's name (one made before the hub named them as Kueue does included)."""
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") and ref.get("name"):
            return (
                group_of(str(ref.get("apiVersion") or "")),
                str(ref["kind"]),
                str(ref["name"]),
                str(ref.get("uid") or ""),
            )
    return None


def queues_for(wl: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    """Whether the Workload ``wl`` is the one of ``workload``: its controller owner is that kind,
    group and name (and, when both say, that UID)."""
    owner = controller_owner(wl)
    view = ObjectView(workload)
    if owner is None or ObjectView(wl).namespace != view.namespace:
        return False
    uid = view.uid or ""
    group, kind, name, owner_uid = owner
    return (group, kind, name) == (group_of(view.api_version), view.kind, view.name) and (
        not uid or not owner_uid or uid == owner_uid
    )


def _template(req: ReplicaRequirements) -> Obj:
    requests = {r: format_quantity(r, v) for r, v in req.resources if r != "pods"}
    spec: Obj = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if req.node_selector:
        spec["nodeSelector"] = dict(req.node_selector)
    return {"spec": spec}


def queued_kind(workload: Mapping[str, Any]) -> bool:
    """Whether the hub's queueing (Kueue's Workloads) takes workloads of this kind: those with an interpreter."""
    return interpreter_for(str(workload.get("apiVersion")), str(workload.get("kind"))) is not None


def pod_sets(workload: Mapping[str, Any]) -> list[Obj] | None:
    """The Workload ``spec.podSets`` of a workload (None: a kind the hub's queueing does not
    take, or a TrainJob read without its runtime: :func:`trainjob_pod_sets`)."""
    interpreter = interpreter_for(str(workload.get("apiVersion")), str(workload.get("kind")))
    if interpreter is None:
        return None
    obj = dict(workload)
    if is_train_job(obj):
        return trainjob_pod_sets(obj)
    components = interpreter.components(obj)
    # As Kueue's: each pod template's labels, annotations, nodeSelector and tolerations, which
    # the job gets back when it is stopped (:func:`controlplane.admission.podsets.restore`).
    if components:
        return podsets.with_own_templates(
            obj,
            [
                {
                    "name": podsets.pod_set_name(c.name),
                    "count": c.replicas,
                    "template": _template(c.requirements),
                }
                for c in components
            ],
        )
    count = interpreter.replicas(obj)
    main: Obj = {"name": "main", "count": count, "template": _template(interpreter.replica_requirements(obj))}
    if (min_count := job_min_count(workload, count)) is not None:
        main["minCount"] = min_count
    return podsets.with_own_templates(obj, [main])


def trainjob_pod_sets(trainjob: Mapping[str, Any]) -> list[Obj] | None:
    """A TrainJob's pod sets, as Kueue's TrainJob integration builds them from the JobSet the
    trainer would make: one per replicated Job of its runtime, in the runtime's order (the
    initializers' too), named by the replicated Job, its count the pods it runs (the trainer
    step's: the node count), its template's requests (``resourcesPerNode`` on the trainer step)
    and its labels, annotations, nodeSelector and tolerations, the TrainJob's own runtime patches
    applied but not Kueue's (what it wrote on admission). None for a copy without its runtime
    (:func:`~controlplane.apis.trainer_runtime.with_runtime`): Kueue makes no Workload for a
    TrainJob whose runtime it cannot read."""
    runtime = resolved_runtime(trainjob)
    if runtime is None:
        return None
    return [
        {
            "name": podsets.pod_set_name(job.name),
            "count": job.count,
            "template": checks.restore_pod_template(_template(requirements(job.template)), job.template),
        }
        for job in replicated_jobs(without_kueue_patch(trainjob), runtime)
    ]


def _is_job(obj: Mapping[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) == ("batch/v1", "Job")


def _annotation(obj: Mapping[str, Any], key: str) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def job_min_count(job: Mapping[str, Any], count: int) -> int | None:
    """A batch/v1 Job's annotation ``kueue.x-k8s.io/job-min-parallelism`` as its pod set's
    ``minCount``; None without it, or when it is not an integer from 1 to ``count`` - 1 (values
    Kueue's Job webhook rejects)."""
    raw = _annotation(job, kueue.ANNOTATION_JOB_MIN_PARALLELISM) if _is_job(job) else None
    if raw is None or _INT.fullmatch(raw) is None:
        return None
    value = int(raw)
    return value if 0 < value < count else None


def set_job_count(job: dict[str, Any], count: int | None) -> bool:
    """Kueue's ``RunWithPodSetsInfo`` / ``RestorePodSetsInfo`` for a Job that allows partial
    admission, in place: ``parallelism`` becomes ``count`` (and ``completions`` too with the
    annotation ``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``). Whether it changed;
    a Job without ``kueue.x-k8s.io/job-min-parallelism`` (or no ``count``) is left as it is."""
    if count is None or not _is_job(job) or _annotation(job, kueue.ANNOTATION_JOB_MIN_PARALLELISM) is None:
        return False
    spec = job.setdefault("spec", {})
    before = (spec.get("parallelism"), spec.get("completions"))
    spec["parallelism"] = count
    if parse_bool(_annotation(job, kueue.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM)) is True:
        spec["completions"] = count
    return (spec.get("parallelism"), spec.get("completions")) != before


def pod_count(workload: Mapping[str, Any], *, admitted: bool) -> int | None:
    """The pods a single-pod-set Workload's job runs with: admitted, its admission's count (fewer
    when partially admitted); else what it asks for (``spec.podSets[0].count``), which an evicted
    Job gets back. None for several pod sets, or no count."""
    pod_sets_ = pod_set_assignments(admission_of(workload)) if admitted else WorkloadView(workload).pod_sets
    count = pod_sets_[0].get("count") if len(pod_sets_) == 1 else None
    return count if isinstance(count, int) else None


def _int(resource: str, value: Any) -> int:
    try:
        return to_int(resource, value)
    except (QuantityError, TypeError, ValueError):
        return 0


def pod_set_requests(workload: Mapping[str, Any]) -> tuple[PodSetRequest, ...]:
    """A Workload's pod sets as the core reads them (requests summed over containers)."""
    out: list[PodSetRequest] = []
    for ps in (workload.get("spec") or {}).get("podSets") or ():
        spec = (ps.get("template") or {}).get("spec") or {}
        per_pod: dict[str, int] = {"pods": 1}
        for container in spec.get("containers") or ():
            for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
                per_pod[resource] = per_pod.get(resource, 0) + _int(resource, value)
        selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        min_count = ps.get("minCount")
        out.append(
            PodSetRequest(
                str(ps.get("name") or "main"),
                int(ps.get("count", 1)),
                per_pod,
                selector,
                min_count if isinstance(min_count, int) else None,
            )
        )
    return tuple(out)


def condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    """The status condition of type ``ctype`` of a Workload (or any wire object), None when it has none."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == ctype:
            return cond
    return None


def is_true(obj: Mapping[str, Any], ctype: str) -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def is_finished(workload: Mapping[str, Any]) -> bool:
    return is_true(workload, kueue.COND_FINISHED)


def admission_of(workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``status.admission`` of a Workload that holds quota (and has not finished)."""
    admission = WorkloadView(workload).admission
    return (
        admission
        if admission is not None and admission.get("clusterQueue") and not is_finished(workload)
        else None
    )


def local_queue_of(workload: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a Workload's LocalQueue (``spec.queueName``)."""
    view = WorkloadView(workload)
    return str(view.metadata.get("namespace")), view.queue_name


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _quota(raw: Mapping[str, Any]) -> Quota:
    name = str(raw.get("name"))
    borrow, lend = raw.get("borrowingLimit"), raw.get("lendingLimit")
    return Quota(
        _int(name, raw.get("nominalQuota", 0)),
        _int(name, borrow) if borrow is not None else None,
        _int(name, lend) if lend is not None else None,
    )


def _groups(resource_groups: Iterable[Mapping[str, Any]]) -> tuple[ResourceGroup, ...]:
    return tuple(
        ResourceGroup(
            tuple(str(r) for r in group.get("coveredResources") or ()),
            tuple(
                FlavorQuotas(
                    str(fq.get("name")), {str(r.get("name")): _quota(r) for r in fq.get("resources") or ()}
                )
                for fq in group.get("flavors") or ()
            ),
        )
        for group in resource_groups
    )


def fair_weight(spec: Mapping[str, Any]) -> int:
    """``spec.fairSharing.weight`` in thousandths, rounded up as kube's MilliValue (absent: 1)."""
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is None:
        return DEFAULT_WEIGHT
    try:
        return max(0, milli_value(parse_quantity(weight)))
    except (QuantityError, TypeError, ValueError):
        return DEFAULT_WEIGHT


def cohort(obj: Mapping[str, Any]) -> Cohort:
    """A ``kueue.x-k8s.io`` Cohort as the core reads it."""
    view = CohortView(obj)
    return Cohort(
        str(view.metadata.get("name")),
        view.parent_name,
        _groups(view.resource_groups),
        fair_weight(view.spec),
    )


def deactivate_cycles(queues: Mapping[str, ClusterQueue], cycles: Iterable[str]) -> dict[str, ClusterQueue]:
    """The queues, those whose cohort is in a cycle of parents inactive (as Kueue disables them)."""
    looping = set(cycles)
    return {
        name: dataclasses.replace(q, inactive_reason=f"Cohort {q.cohort} is in a cycle of parentName")
        if q.cohort in looping and q.inactive_reason is None
        else q
        for name, q in queues.items()
    }


def deactivate_unusable_checks(
    queues: Mapping[str, ClusterQueue], unusable: Mapping[str, tuple[list[str], list[str]]]
) -> dict[str, ClusterQueue]:
    """The queues, those naming a missing or inactive AdmissionCheck (``unusable``: by queue,
    :func:`controlplane.admission.checks.unusable_checks`) inactive, as Kueue holds them."""
    return {
        name: dataclasses.replace(q, inactive_reason="references missing or inactive AdmissionCheck(s)")
        if q.inactive_reason is None and any(unusable.get(name, ((), ())))
        else q
        for name, q in queues.items()
    }


def named_flavors(obj: Mapping[str, Any]) -> list[str]:
    """The ResourceFlavors a ClusterQueue names, in order, each once."""
    return list(
        dict.fromkeys(
            str(fq.get("name"))
            for g in ClusterQueueView(obj).resource_groups
            for fq in g.get("flavors") or ()
        )
    )


def missing_flavors(obj: Mapping[str, Any], flavors: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The ResourceFlavors a ClusterQueue names that do not exist, in the order it names them."""
    return [f for f in named_flavors(obj) if f not in flavors]


def cluster_queue(obj: Mapping[str, Any], flavors: Mapping[str, Mapping[str, str]]) -> ClusterQueue:
    """A ClusterQueue as the core reads it; inactive when it is being deleted, is held or names a
    missing flavor."""
    view = ClusterQueueView(obj)
    groups = _groups(view.resource_groups)
    missing = sorted(missing_flavors(obj, flavors))
    inactive = None
    if view.is_deleting:
        inactive = "clusterQueue is terminating"  # held by its finalizer while workloads hold quota in it
    elif view.stop_policy in ("Hold", "HoldAndDrain"):
        inactive = f"stopPolicy is {view.stop_policy}"
    elif missing:
        inactive = f"ResourceFlavor {', '.join(missing)} not found"
    fungibility = view.flavor_fungibility
    policies = view.preemption
    borrow_within = policies.get("borrowWithinCohort") or {}
    threshold = borrow_within.get("maxPriorityThreshold")
    preemption = Preemption(
        PreemptionPolicy(policies.get("withinClusterQueue") or "Never"),
        PreemptionPolicy(policies.get("reclaimWithinCohort") or "Never"),
        PreemptionPolicy(borrow_within.get("policy") or "Never"),
        threshold if isinstance(threshold, int) else None,
    )
    return ClusterQueue(
        name=str(view.metadata.get("name")),
        groups=groups,
        cohort=view.cohort,
        strategy=QueueingStrategy(view.queueing_strategy or QueueingStrategy.BEST_EFFORT_FIFO),
        fungibility=FlavorFungibility(
            WhenCanBorrow(fungibility.get("whenCanBorrow") or WhenCanBorrow.BORROW),
            WhenCanPreempt(fungibility.get("whenCanPreempt") or WhenCanPreempt.TRY_NEXT_FLAVOR),
            _preference(view),
        ),
        inactive_reason=inactive,
        preemption=preemption,
        fair_weight=fair_weight(view.spec),
    )


def _preference(view: ClusterQueueView) -> FungibilityPreference:
    """``flavorFungibility.preference``: v1beta2's field, which the stored (v1beta1) ClusterQueue
    carries in its annotation of v1beta2 fields (a v1beta2 object, as the what-if may read,
    in its spec); absent: borrowing over preemption, as Kueue reads it."""
    kept = kueue_conversion.v1beta2_fields(view.raw).get("flavorFungibility")
    for fungibility in (view.flavor_fungibility, kept):
        if isinstance(fungibility, Mapping) and fungibility.get("preference") in tuple(FungibilityPreference):
            return FungibilityPreference(fungibility["preference"])
    return FungibilityPreference.BORROWING_OVER_PREEMPTION


def flavor_labels(flavors: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    return {
        str((f.get("metadata") or {}).get("name")): {
            str(k): str(v) for k, v in ((f.get("spec") or {}).get("nodeLabels") or {}).items()
        }
        for f in flavors
    }


def namespace_allowed(cq: Mapping[str, Any], namespace_labels: Mapping[str, str]) -> bool:
    """Whether a ClusterQueue's ``namespaceSelector`` admits a namespace (absent selects none, as in Kueue)."""
    selector = ClusterQueueView(cq).namespace_selector
    if selector is None:
        return False
    return LabelSelector.model_validate(selector).matches(namespace_labels)


def pending_of(workload: Mapping[str, Any], cluster_queue_name: str) -> Pending:
    view = WorkloadView(workload)
    return Pending(
        key_of(workload),
        cluster_queue_name,
        pod_set_requests(workload),
        view.priority,
        view.creation_timestamp,
        "/".join(local_queue_of(workload)),
    )


def reclaimable_pods(workload: Mapping[str, Any] | None) -> dict[Any, int]:
    """A Workload's ``status.reclaimablePods``: per pod set, how many of its Pods need their quota no more."""
    return {
        r.get("name"): r["count"]
        for r in WorkloadView(workload).reclaimable_pods
        if isinstance(r, Mapping) and isinstance(r.get("count"), int)
    }


def _counts_after_reclaim(workload: Mapping[str, Any]) -> dict[Any, tuple[int, int]]:
    """Per pod set of a Workload, its count and Kueue's ``podSetsCountsAfterReclaim``: the count
    less its reclaimable Pods."""
    reclaim = reclaimable_pods(workload)
    out: dict[Any, tuple[int, int]] = {}
    for ps in WorkloadView(workload).pod_sets:
        count = raw if isinstance(raw := ps.get("count"), int) else 1
        out[ps.get("name")] = (count, count - (reclaim.get(ps.get("name")) or 0))
    return out


def admitted_of(workload: Mapping[str, Any]) -> Admitted | None:
    admission = admission_of(workload)
    if admission is None:
        return None
    usage: dict[tuple[str, str], int] = {}
    counts = _counts_after_reclaim(workload)
    for psa in pod_set_assignments(admission):
        flavors = psa.get("flavors") or {}
        count = raw if isinstance(raw := psa.get("count"), int) else counts.get(psa.get("name"), (0, 0))[0]
        after = counts.get(psa.get("name"), (count, count))[1]
        for resource, amount in (psa.get("resourceUsage") or {}).items():
            if resource in flavors:
                fr = (str(flavors[resource]), str(resource))
                used = _int(resource, amount)
                if (
                    0 <= after < count
                ):  # Kueue's totalRequestsFromAdmission: scaled down to the Pods not yet reclaimable
                    used = used // count * after
                usage[fr] = usage.get(fr, 0) + used
    view = WorkloadView(workload)
    reserved = condition(workload, kueue.COND_QUOTA_RESERVED) or {}
    return Admitted(
        key_of(workload),
        str(admission["clusterQueue"]),
        usage,
        view.priority,
        view.creation_timestamp,
        str(reserved.get("lastTransitionTime") or ""),
    )


def admission_status(decision: Admission) -> Obj:
    """``status.admission`` of an admitted Workload."""
    return {
        "clusterQueue": decision.queue,
        "podSetAssignments": [
            {
                "name": a.pod_set,
                "flavors": dict(a.flavors),
                "resourceUsage": {r: format_quantity(r, v) for r, v in a.usage.items()},
                "count": a.count,
            }
            for a in decision.assignments
        ],
    }


def flavors_usage(queue: ClusterQueue, used: Callable[[FlavorResource], int]) -> list[Obj]:
    """``status.flavorsReservation`` or ``flavorsUsage`` of a ClusterQueue as Kueue's cache's
    ``getUsage`` fills them: per flavor and resource, the total ``used`` (the quota its workloads
    reserve, or what its admitted ones hold) and, in a cohort, how much of it is beyond the nominal
    quota (borrowed)."""
    out: list[Obj] = []
    for group in queue.groups:
        for fq in group.flavors:
            resources = []
            for resource in group.covered:
                fr = (fq.flavor, resource)
                total = used(fr)
                nominal = quota.nominal if (quota := queue.quota(fr)) is not None else 0
                borrowed = max(0, total - nominal) if queue.cohort is not None else 0
                resources.append(
                    {
                        "name": resource,
                        "total": format_quantity(resource, total),
                        "borrowed": format_quantity(resource, borrowed),
                    }
                )
            out.append({"name": fq.flavor, "resources": resources})
    return out


def local_queue_flavors(queue: ClusterQueue, amounts: Mapping[tuple[str, str], int]) -> list[Obj]:
    """A LocalQueue's ``status.flavorsReservation`` or ``flavorUsage`` as Kueue's cache fills them
    (``filterLocalQueueUsage``): every flavor and resource of its ClusterQueue, in order, with the
    ``total`` its workloads hold (``amounts``, per flavor and resource), within the LocalQueue's
    bounds of 16 flavors and 16 resources each."""
    out: list[Obj] = []
    for group in queue.groups:
        for fq in group.flavors:
            resources = [
                {"name": resource, "total": format_quantity(resource, amounts.get((fq.flavor, resource), 0))}
                for resource in group.covered[:MAX_LOCAL_QUEUE_USAGE_ITEMS]
            ]
            out.append({"name": fq.flavor, "resources": resources})
    return out[:MAX_LOCAL_QUEUE_USAGE_ITEMS]


def flavor_constraints(
    admission: Mapping[str, Any], flavors: Mapping[str, Mapping[str, str]], cluster_label_keys: Iterable[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The admitted flavors' node labels split into (cluster labels, node labels): a key some
    member Cluster carries as a label selects clusters, any other key selects nodes."""
    cluster_keys = set(cluster_label_keys)
    on_clusters: dict[str, str] = {}
    on_nodes: dict[str, str] = {}
    for psa in pod_set_assignments(admission):
        for flavor in set((psa.get("flavors") or {}).values()):
            for key, value in flavors.get(str(flavor), {}).items():
                (on_clusters if key in cluster_keys else on_nodes)[key] = value
    return on_clusters, on_nodes


def node_labels_by_pod_set(
    admission: Mapping[str, Any], flavors: Mapping[str, Mapping[str, str]], cluster_label_keys: Iterable[str]
) -> dict[str, dict[str, str]]:
    """Per pod set of an admission, its flavors' node labels that select nodes (not clusters,
    :func:`flavor_constraints`): what goes into that pod set's nodeSelector as its job starts."""
    cluster_keys = set(cluster_label_keys)
    out: dict[str, dict[str, str]] = {}
    for psa in pod_set_assignments(admission):
        labels = out.setdefault(str(psa.get("name") or "main"), {})
        for flavor in sorted(set((psa.get("flavors") or {}).values())):
            labels.update({k: v for k, v in flavors.get(str(flavor), {}).items() if k not in cluster_keys})
    return out
