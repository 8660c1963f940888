"""Schemas of the kinds the hub stores without a model: Kubeflow's training jobs, Karmada's
autoscalers, WasteReport; the builders the other operators' schemas share (:mod:`.sigs_kinds`,
:mod:`.trainer_kinds`, :mod:`.ray_kinds`).

The Kubeflow training jobs (``kubeflow.org/v1``: PyTorchJob, TFJob, XGBoostJob, PaddleJob,
JAXJob, MPIJob) are another project's CRDs; no maintained package ships their schemas, so these
write them out in the operator's own terms, with each pod template as kube's
``PodTemplateSpec`` (so ``kubectl explain`` reaches every container field), every field of the
CRDs declared (:func:`struct`: nothing else is kept). The hub checks the types, prunes the nulls
and drops (refuses under ``fieldValidation=Strict``) the undeclared fields of these kinds' objects
by the schemas, as their CRDs do (:mod:`.structural`).
Karmada's FederatedHPA and CronFederatedHPA (``autoscaling.karmada.io/v1alpha1``) are
HorizontalPodAutoscaler parts (kube's own definitions) and Karmada's rules.
``WasteReport`` (``reports.gpufed.io/v1alpha1``) is computed, never stored: its schema
documents what ``kubectl get wastereport -o yaml`` shows.

Everything is in kube's OpenAPI v2 dialect, keyed by definition name.
Pure: constants and small builders.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.autoscaling_karmada_v1alpha1 import (
    DEFAULT_HISTORY_LIMIT,
    MAX_HISTORY_LIMIT,
    RULE_NAME_MAX_LENGTH,
)
from controlplane.apis.kubeflow import GROUP as KUBEFLOW_GROUP
from controlplane.apis.kubeflow import TRAINING_KINDS
from controlplane.apiserver.openapi.models import type_meta_properties
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, POD_TEMPLATE_SPEC, reachable

_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
CONDITION = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"


def scalar(description: str, type_: str = "string", **extra: Any) -> dict[str, Any]:
    return {"description": description, "type": type_, **extra}


def int32(description: str) -> dict[str, Any]:
    return scalar(description, "integer", format="int32")


def ref(name: str, description: str) -> dict[str, Any]:
    return {"$ref": DEFINITIONS_PREFIX + name, "description": description}


def object_of(description: str, properties: dict[str, Any]) -> dict[str, Any]:
    """An object whose unlisted fields are kept (a computed report's free-form parts, Karmada's executions)."""
    return {
        "description": description, "type": "object", "properties": properties,
        "x-kubernetes-preserve-unknown-fields": True,
    }


def struct(description: str, properties: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object of exactly these fields, as the operators' CRDs declare their own types: a field
    it does not list is dropped (refused under ``fieldValidation=Strict``); ``required``: the
    fields its CRD requires (``Required value`` when left out, once the CRD's defaults are in)."""
    out: dict[str, Any] = {"description": description, "type": "object", "properties": properties}
    return {**out, "required": list(required)} if required else out


def checked(node: dict[str, Any], **checks: Any) -> dict[str, Any]:
    """``node`` with a CRD's value checks and default (``enum``, ``default``, ``minimum``,
    ``maxLength``, ``maxItems``...), as controller-gen writes them from the Go type's markers."""
    return {**node, **checks}


def ruled(node: dict[str, Any], *rules: tuple[str, str]) -> dict[str, Any]:
    """``node`` with a CRD's CEL rules (``x-kubernetes-validations``), each (rule, message), as
    controller-gen writes them from the Go type's ``+kubebuilder:validation:XValidation`` markers;
    the hub runs them as kube runs a CRD's (:func:`.structural.rule_errors`)."""
    return {**node, "x-kubernetes-validations": [{"message": message, "rule": rule} for rule, message in rules]}


def map_of(description: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "type": "object", "additionalProperties": values}


def array_of(description: str, items: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "type": "array", "items": items}


# --- Kubeflow training jobs (kubeflow.org/v1) ------------------------------------------------

_KUBEFLOW = "org.kubeflow.v1."
_LABEL_SELECTOR = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
_METRICS = array_of(
    "Metrics the HPA of the job's workers scales them by (the largest replica count any of them asks wins).",
    {"$ref": DEFINITIONS_PREFIX + "io.k8s.api.autoscaling.v2.MetricSpec"},
)


def _kubeflow_job_definitions(kind: str, specs_field: str, roles: str, extra_spec: dict[str, Any]) -> dict[str, Any]:
    spec = struct(
        f"{kind}Spec is the desired state of the {kind}.",
        {
            specs_field: map_of(
                f"{specs_field} maps each role ({roles}) to its ReplicaSpec. The job is a gang: gpufed "
                "places all of its pods in one cluster or none.",
                {"$ref": DEFINITIONS_PREFIX + _KUBEFLOW + "ReplicaSpec"},
            ),
            "runPolicy": ref(_KUBEFLOW + "RunPolicy", "RunPolicy encapsulates the runtime policies of the job."),
            **extra_spec,
        },
        required=(specs_field,),
    )
    status = struct(
        f"{kind}Status is the observed state of the {kind}, summed over the member clusters that run it.",
        {
            "conditions": array_of(
                "Conditions of the job: Created, Running, Restarting, Succeeded, Failed.",
                {"$ref": DEFINITIONS_PREFIX + _KUBEFLOW + "JobCondition"},
            ),
            "replicaStatuses": map_of(
                "ReplicaStatuses maps each role to how many of its pods are active, succeeded and failed.",
                struct(
                    "ReplicaStatus counts the pods of one role.",
                    {
                        "active": int32("The number of running pods."),
                        "succeeded": int32("The number of pods that completed successfully."),
                        "failed": int32("The number of pods that failed."),
                        "labelSelector": ref(_LABEL_SELECTOR, "Deprecated: use selector."),
                        "selector": scalar("The role's pods' label selector, in its string form."),
                    },
                ),
            ),
            "startTime": ref(_TIME, "When the job was acknowledged by the job controller."),
            "completionTime": ref(_TIME, "When the job completed."),
            "lastReconcileTime": ref(_TIME, "When the job was last reconciled by the job controller."),
        },
    )
    return {
        _KUBEFLOW + f"{kind}Spec": spec,
        _KUBEFLOW + f"{kind}Status": status,
    }


#: The spec fields of a Kubeflow kind besides its replica specs and ``runPolicy``, by kind.
_KUBEFLOW_SPEC_FIELDS: dict[str, dict[str, Any]] = {
    "PyTorchJob": {
        "nprocPerNode": scalar("The number of processes per node (torchrun --nproc-per-node): auto, cpu, gpu or a number."),
        "elasticPolicy": struct("ElasticPolicy runs the job as an elastic torchrun job, its workers scaled by an HPA.", {
            "minReplicas": int32("The lower limit of workers the job can scale down to."),
            "maxReplicas": int32("The upper limit of workers the autoscaler can set."),
            "rdzvBackend": scalar("The rendezvous backend: c10d, etcd or etcd-v2."),
            "rdzvPort": int32("The rendezvous port."),
            "rdzvHost": scalar("The rendezvous host."),
            "rdzvId": scalar("The rendezvous ID."),
            "rdzvConf": array_of("Additional rendezvous configuration, as key-value pairs.", struct(
                "One rendezvous setting.", {"key": scalar("The setting's key."), "value": scalar("The setting's value.")})),
            "standalone": scalar("Standalone starts a local C10d rendezvous backend on port 29400.", "boolean"),
            "nProcPerNode": int32("Deprecated: use spec.nprocPerNode."),
            "maxRestarts": int32("The limit of worker group restarts."),
            "metrics": _METRICS,
        }),
    },
    "TFJob": {
        "successPolicy": scalar(
            "SuccessPolicy says when a TFJob without a Chief or Master has succeeded: \"\" (the default) when "
            "worker 0 has, AllWorkers when all workers have."
        ),
        "enableDynamicWorker": scalar("EnableDynamicWorker lets the job go on when some of its workers fail.", "boolean"),
    },
    "PaddleJob": {
        "elasticPolicy": struct("ElasticPolicy holds the elastic policy of the PaddleJob.", {
            "minReplicas": int32("The lower limit of workers the job can scale down to."),
            "maxReplicas": int32("The upper limit of workers the job can scale up to."),
            "maxRestarts": int32("The limit of pod restarts in elastic mode."),
            "metrics": _METRICS,
        }),
    },
    "MPIJob": {
        "slotsPerWorker": int32("SlotsPerWorker is the number of MPI slots per worker pod. Defaults to 1."),
        "cleanPodPolicy": scalar("Deprecated: use runPolicy.cleanPodPolicy."),
        "mainContainer": scalar("MainContainer is the name of the container that runs the MPI program."),
    },
}

_REPLICA_SPEC = struct(
    "ReplicaSpec is the description of one role of the job: how many pods it runs and from which template.",
    {
        "replicas": int32("Replicas is the number of pods of this role. Defaults to 1."),
        "template": ref(
            POD_TEMPLATE_SPEC,
            "Template is the pod template of this role. gpufed reads its containers' resource requests "
            "(GPUs, MIG slices, CPU, memory) to find clusters where every replica fits.",
        ),
        "restartPolicy": scalar(
            "RestartPolicy of this role's pods: Always, OnFailure, Never or ExitCode. Defaults to "
            + "; ".join(
                f"{policy} for " + ", ".join(t.kind for t in TRAINING_KINDS.values() if t.default_restart_policy == policy)
                for policy in sorted({t.default_restart_policy for t in TRAINING_KINDS.values()}, reverse=True)
            ) + "."
        ),
    },
)

_KUBEFLOW_SHARED: dict[str, Any] = {
    _KUBEFLOW + "ReplicaSpec": _REPLICA_SPEC,
    _KUBEFLOW + "RunPolicy": struct(
        "RunPolicy encapsulates the runtime policies of a distributed training job.",
        {
            "cleanPodPolicy": scalar(
                "CleanPodPolicy says which pods to delete when the job finishes: All, Running or None."
            ),
            "ttlSecondsAfterFinished": int32("Seconds after the job finishes before it is deleted."),
            "activeDeadlineSeconds": scalar(
                "Seconds the job may stay active before the system tries to end it.", "integer", format="int64"
            ),
            "backoffLimit": int32("The number of retries before the job is marked failed."),
            "suspend": scalar(
                "Suspend stops the job's pods (and keeps it from creating new ones) while true.", "boolean", default=False
            ),
            "schedulingPolicy": struct(
                "SchedulingPolicy passes gang-scheduling parameters to the member cluster's batch scheduler.",
                {
                    "minAvailable": int32("The number of pods that must be able to start together."),
                    "queue": scalar("The batch scheduler's queue for the job."),
                    "priorityClass": scalar("The PriorityClass of the job's pod group."),
                    "scheduleTimeoutSeconds": int32("How long the pod group may wait to be scheduled."),
                    "minResources": map_of("The resources the pod group needs to start, by resource name.",
                                           {"$ref": DEFINITIONS_PREFIX + "io.k8s.apimachinery.pkg.api.resource.Quantity"}),
                },
            ),
            "managedBy": scalar("The controller that reconciles the job; empty means the Kubeflow training operator."),
        },
    ),
    _KUBEFLOW + "JobCondition": struct(
        "JobCondition describes the state of the job at one point.",
        {
            "type": scalar("Type of the condition: Created, Running, Restarting, Succeeded or Failed."),
            "status": scalar("Status of the condition: True, False or Unknown."),
            "reason": scalar("A one-word CamelCase reason for the condition's last transition."),
            "message": scalar("A human-readable message about the last transition."),
            "lastUpdateTime": ref(_TIME, "The last time this condition was updated."),
            "lastTransitionTime": ref(_TIME, "The last time the condition moved from one status to another."),
        },
        required=("status", "type"),
    ),
}

# --- WasteReport (reports.gpufed.io/v1alpha1) --------------------------------------------------

_REPORTS = "io.gpufed.reports.v1alpha1."
_STATE_HOURS = {
    state: scalar(f"GPU-hours in the {state} state.", "number")
    for state in ("busy", "idle-allocated", "unmeasured", "free-needed", "free-fragmented", "free-spare", "unavailable")
}

_REPORT_DEFINITIONS: dict[str, Any] = {
    _REPORTS + "WasteReportSpec": object_of(
        "WasteReportSpec is what the report was asked for (the object's name and the request's query).",
        {
            "since": scalar("Since is the length of the window (24h, 7d, ...), ending at the last complete bucket of "
                      "the hub's waste accounting (a minute by default)."),
            "from": scalar("From is the start of a custom window (RFC 3339)."),
            "to": scalar("To is the end of a custom window (RFC 3339)."),
            "by": array_of("By lists the dimensions the report is grouped by (cluster, namespace, ...).", {"type": "string"}),
            "top": int32("Top is how many of the idlest workloads are listed."),
            "step": scalar("Step is the length of each point of the time series, when one was asked for."),
        },
    ),
    _REPORTS + "WasteReportStatus": object_of(
        "WasteReportStatus is the report: GPU-hours and their cost in each state over the window.",
        {
            "window": object_of(
                "Window is the time the report covers.",
                {
                    "from": scalar("The start of the window (RFC 3339).", format="date-time"),
                    "to": scalar("The end of the window (RFC 3339).", format="date-time"),
                    "observed_hours": scalar("Hours of the window for which samples exist.", "number"),
                    "unobserved_hours": scalar("Hours of the window without samples.", "number"),
                },
            ),
            "by": array_of("The dimensions of groups.", {"type": "string"}),
            "totals": object_of(
                "Totals over the whole fleet: GPU-hours and cost per state, and the waste.",
                {
                    "gpu_hours": object_of("GPU-hours per state.", dict(_STATE_HOURS)),
                    "cost_usd": object_of("The cost of the GPU-hours of each state, in US dollars.", {}),
                    "waste_pct": scalar("The share of available, measured GPU-hours that were wasted, in percent.", "number"),
                    "gpu_hours_total": scalar("GPU-hours of all states.", "number"),
                    "cost_usd_total": scalar("The cost of all GPU-hours, in US dollars.", "number"),
                    "waste_gpu_hours": scalar(
                        "GPU-hours wasted: idle-allocated, free-needed and free-fragmented.", "number"
                    ),
                    "waste_cost_usd": scalar("The cost of the wasted GPU-hours, in US dollars.", "number"),
                },
            ),
            "groups": array_of(
                "Groups are the totals per value of the `by` dimensions.",
                object_of("The totals of one group; `key` maps each dimension to its value.", {}),
            ),
            "top_idle_workloads": array_of(
                "The workloads whose allocated GPUs were idle longest, idlest first.",
                object_of(
                    "One workload's GPU use over the window.",
                    {
                        "namespace": scalar("The workload's namespace."),
                        "workload": scalar("The workload's name."),
                        "gpus_now": scalar("GPUs the workload holds now.", "number"),
                        "idle_gpu_hours": scalar("Allocated GPU-hours with no measured utilization.", "number"),
                        "idle_cost_usd": scalar("The cost of the idle GPU-hours, in US dollars.", "number"),
                        "mean_utilization": scalar("Mean GPU utilization, 0 to 1, where measured.", "number"),
                    },
                ),
            ),
            "recommendations": array_of(
                "What to change to waste less, with the daily saving.",
                object_of(
                    "One recommendation.",
                    {
                        "kind": scalar("The kind of change (right-size, scale down, ...)."),
                        "text": scalar("The recommendation in words."),
                        "savings_usd_per_day": scalar("The saving, in US dollars per day.", "number"),
                    },
                ),
            ),
            "series": array_of(
                "The time series (with ?step=): mean GPUs per state in each step.", object_of("One step.", {})
            ),
        },
    ),
}


# --- Karmada's autoscalers (autoscaling.karmada.io/v1alpha1) ---------------------------------

_KARMADA = "com.github.karmada-io.karmada.pkg.apis.autoscaling.v1alpha1."
_HPA = "io.k8s.api.autoscaling.v2."
_MICRO_TIME_NOTE = "RFC 3339, as metav1.Time."

_KARMADA_AUTOSCALING_DEFINITIONS: dict[str, Any] = {
    _KARMADA + "FederatedHPASpec": {
        "description": "FederatedHPASpec describes the desired functionality of the FederatedHPA "
                       "(a HorizontalPodAutoscaler's spec, over the pods of every member cluster).",
        "type": "object",
        "required": ["scaleTargetRef", "maxReplicas"],
        "properties": {
            "scaleTargetRef": ref(_HPA + "CrossVersionObjectReference", "ScaleTargetRef points to the target resource to scale."),
            "minReplicas": int32("minReplicas is the lower limit for the number of replicas. It defaults to 1 pod."),
            "maxReplicas": int32("maxReplicas is the upper limit for the number of replicas."),
            "metrics": array_of("Metrics to compute the desired replica count from (the largest count wins).",
                              {"$ref": DEFINITIONS_PREFIX + _HPA + "MetricSpec"}),
            "behavior": ref(_HPA + "HorizontalPodAutoscalerBehavior", "Behavior configures the scaling behavior "
                             "of the target in both Up and Down directions."),
        },
    },
    _KARMADA + "FederatedHPAStatus": ref(_HPA + "HorizontalPodAutoscalerStatus",
                                          "The current status of the FederatedHPA (a HorizontalPodAutoscaler's)."),
    _KARMADA + "CronFederatedHPASpec": {
        "description": "CronFederatedHPASpec is the specification of the CronFederatedHPA.",
        "type": "object",
        "required": ["scaleTargetRef", "rules"],
        "properties": {
            "scaleTargetRef": ref(_HPA + "CrossVersionObjectReference",
                                   "ScaleTargetRef points to the resource to scale: a workload or a FederatedHPA."),
            "rules": array_of("Rules declare when and how the target is scaled.",
                            {"$ref": DEFINITIONS_PREFIX + _KARMADA + "CronFederatedHPARule"}),
        },
    },
    _KARMADA + "CronFederatedHPARule": {
        "description": "CronFederatedHPARule declares a schedule as well as scale actions.",
        "type": "object",
        "required": ["name", "schedule"],
        "properties": {
            "name": scalar("Name of the rule, unique in the CronFederatedHPA.", minLength=1,
                           maxLength=RULE_NAME_MAX_LENGTH),
            "schedule": scalar("Schedule is the cron expression that represents a periodical time."),
            "targetReplicas": int32("TargetReplicas to set on a workload."),
            "targetMinReplicas": int32("TargetMinReplicas to set on a FederatedHPA."),
            "targetMaxReplicas": int32("TargetMaxReplicas to set on a FederatedHPA."),
            "suspend": scalar("Suspend tells the controller to suspend subsequent executions.", "boolean", default=False),
            "timeZone": scalar("TimeZone for the given schedule (the hub's when unset)."),
            "successfulHistoryLimit": {**int32("How many successful executions are kept. Defaults to 3."),
                                       "default": DEFAULT_HISTORY_LIMIT, "minimum": 1, "maximum": MAX_HISTORY_LIMIT},
            "failedHistoryLimit": {**int32("How many failed executions are kept. Defaults to 3."),
                                   "default": DEFAULT_HISTORY_LIMIT, "minimum": 0, "maximum": MAX_HISTORY_LIMIT},
        },
    },
    _KARMADA + "CronFederatedHPAStatus": object_of("CronFederatedHPAStatus represents the current status.", {
        "executionHistories": array_of("The execution histories of the rules.", object_of("One rule's history.", {
            "ruleName": scalar("The name of the rule."),
            "nextExecutionTime": scalar("The next time to execute; unset while the rule is suspended. " + _MICRO_TIME_NOTE,
                                        format="date-time"),
            "successfulExecutions": array_of("Successful executions.", object_of("One execution.", {})),
            "failedExecutions": array_of("Failed executions.", object_of("One execution.", {})),
        })),
    }),
}


def kind_definition(kind: str, prefix: str, description: str) -> dict[str, Any]:
    properties: dict[str, Any] = {
        **type_meta_properties(),
        "spec": ref(prefix + f"{kind}Spec", f"Spec is the desired state of the {kind}."),
        "status": ref(prefix + f"{kind}Status", f"Status is the observed state of the {kind}."),
    }
    return {"description": description, "type": "object", "properties": properties}


#: (group, version, kind, definition prefix, description) of each kind listed here.
_KINDS: tuple[tuple[str, str, str, str, str], ...] = (
    *((KUBEFLOW_GROUP, "v1", t.kind, _KUBEFLOW, t.description) for t in TRAINING_KINDS.values()),
    ("reports.gpufed.io", "v1alpha1", "WasteReport", _REPORTS,
     "WasteReport tells, in GPU-hours and dollars, where the fleet's GPUs were busy, idle while "
     "allocated, or free, over a window of time. Computed on request; read-only."),
    ("autoscaling.karmada.io", "v1alpha1", "FederatedHPA", _KARMADA,
     "FederatedHPA scales a propagated workload from the metrics of its pods in every member cluster "
     "(Karmada's kind); the hub answers the GPU utilization the members report."),
    ("autoscaling.karmada.io", "v1alpha1", "CronFederatedHPA", _KARMADA,
     "CronFederatedHPA scales a workload, or a FederatedHPA's bounds, on cron schedules (Karmada's kind)."),
)


def _kinds() -> dict[tuple[str, str, str], tuple[str, dict[str, Any]]]:
    return {
        (group, version, kind): (prefix + kind, kind_definition(kind, prefix, description))
        for group, version, kind, prefix, description in _KINDS
    }


def _parts() -> dict[str, Any]:
    parts: dict[str, Any] = {
        **_KUBEFLOW_SHARED, **_REPORT_DEFINITIONS, **_KARMADA_AUTOSCALING_DEFINITIONS,
    }
    for t in TRAINING_KINDS.values():
        parts.update(_kubeflow_job_definitions(t.kind, t.specs_field, ", ".join(t.roles), _KUBEFLOW_SPEC_FIELDS.get(t.kind, {})))
    return parts


def extra_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions (the kind's and its parts') of a kind listed here."""
    entry = _kinds().get((group, version, kind))
    if entry is None:
        return None
    name, schema = entry
    return name, {name: schema, **reachable([schema], _parts())}
