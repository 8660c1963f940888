"""Schemas of the Kubernetes SIGs' kinds the hub stores without a model: JobSet
(``jobset.x-k8s.io/v1alpha2``) and LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``).

These declare every field of the upstream CRDs' ``spec`` and ``status``, in the projects' own
terms, with the embedded kube types as kube's definitions, as the upstream CRDs embed them: a
replicated job's template is kube's ``JobTemplateSpec``, a leader or worker template kube's
``PodTemplateSpec``, a volume claim template kube's ``PersistentVolumeClaim``, so ``kubectl
explain`` reaches every container field. The hub checks the types, prunes the nulls and drops
(or, under ``fieldValidation=Strict``, refuses) the undeclared fields of these kinds' objects by
the schemas, as their CRDs do (:mod:`.structural`): nothing is kept open that the CRDs keep
closed (``tests/data/operator_crd_fields.txt`` lists the CRDs' fields).

Everything is in kube's OpenAPI v2 dialect, keyed by definition name.
Pure: constants and small builders.
"""

from __future__ import annotations

from typing import Any, Final

from controlplane.apiserver.openapi.extra_kinds import (
    CONDITION,
    array_of,
    checked,
    int32,
    kind_definition,
    ref,
    ruled,
    scalar,
    struct,
)
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, POD_TEMPLATE_SPEC, reachable

_JOB_TEMPLATE_SPEC = "io.k8s.api.batch.v1.JobTemplateSpec"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"

# --- JobSet (jobset.x-k8s.io/v1alpha2) --------------------------------------------------------

_JOBSET = "io.x-k8s.jobset.v1alpha2."
#: JobSet's rule of a field kept as created (a transition rule: it runs on an update whose old
#: object has the field too), on network, the policies and a replicated job's dependsOn.
_IMMUTABLE: Final = ("self == oldSelf", "Value is immutable")
_STARTUP_OR_DEPENDS_ON: Final = (
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "self.replicatedJobs.exists(x, has(x.dependsOn)))",
    "StartupPolicy and DependsOn APIs are mutually exclusive",
)

_JOBSET_DEFINITIONS: dict[str, Any] = {
    _JOBSET + "JobSetSpec": ruled(struct("JobSetSpec defines the desired state of JobSet.", {
        "replicatedJobs": {
            **array_of("replicatedJobs is the group of jobs that will form the set.",
                       {"$ref": DEFINITIONS_PREFIX + _JOBSET + "ReplicatedJob"}),
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name",
        },
        "network": ruled(struct("network defines the networking options for the jobset.", {
            "enableDNSHostnames": scalar("enableDNSHostnames allows pods to be reached via their hostnames.", "boolean"),
            "subdomain": scalar("subdomain is an explicit choice for a network subdomain name; defaults to the JobSet's name."),
            "publishNotReadyAddresses": scalar(
                "publishNotReadyAddresses makes the headless service publish the pods' addresses before they are ready.",
                "boolean",
            ),
        }), _IMMUTABLE),
        "successPolicy": ruled(struct(
            "successPolicy configures when to declare the JobSet as succeeded. The JobSet is always declared "
            "succeeded if all jobs in the set finished with status complete.", {
                "operator": checked(scalar("operator determines either All or Any of the selected jobs should succeed."),
                                    enum=["All", "Any"]),
                "targetReplicatedJobs": array_of(
                    "targetReplicatedJobs are the names of the replicated jobs the operator applies to; empty: all.",
                    {"type": "string"},
                ),
            }, required=("operator",)), _IMMUTABLE),
        "failurePolicy": ruled(struct(
            "failurePolicy configures when to declare the JobSet as failed. The JobSet is always declared failed "
            "if any job in the set finished with status failed.", {
                "maxRestarts": int32("maxRestarts defines the limit on the number of JobSet restarts."),
                "restartStrategy": checked(scalar("restartStrategy defines how Jobs are recreated: Recreate or BlockingRecreate."),
                                           enum=["Recreate", "BlockingRecreate"], default="Recreate"),
                "rules": array_of("rules pick the action to take when a child Job fails, by its failure reason.",
                                  struct("FailurePolicyRule defines the action to take when a child Job fails for a listed reason.", {
                                      "name": scalar("name of the rule; defaults to failurePolicyRuleN, N its index."),
                                      "action": checked(
                                          scalar("action to take if the rule matches: FailJobSet, RestartJobSet or "
                                                 "RestartJobSetAndIgnoreMaxRestarts."),
                                          enum=["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]),
                                      "onJobFailureReasons": array_of(
                                          "onJobFailureReasons: the rule matches a Job failed for one of them (empty: any).",
                                          {"type": "string"}),
                                      "onJobFailureMessagePatterns": array_of(
                                          "onJobFailureMessagePatterns: the rule matches a Job whose failure message matches one.",
                                          {"type": "string"}),
                                      "targetReplicatedJobs": array_of(
                                          "targetReplicatedJobs are the replicated jobs the rule applies to; empty: all.",
                                          {"type": "string"}),
                                  }, required=("action",))),
            }), _IMMUTABLE),
        "startupPolicy": ruled(struct("startupPolicy configures in what order jobs must be started (deprecated: use dependsOn).", {
            "startupPolicyOrder": checked(scalar("startupPolicyOrder: AnyOrder or InOrder."), enum=["AnyOrder", "InOrder"]),
        }, required=("startupPolicyOrder",)), _IMMUTABLE),
        "suspend": scalar("suspend suspends all running child Jobs when set to true.", "boolean"),
        "coordinator": struct(
            "coordinator names the pod whose stable network endpoint every Job and pod of the JobSet gets as an annotation.", {
                "replicatedJob": scalar("replicatedJob is the name of the replicated job holding the coordinator pod."),
                "jobIndex": int32("jobIndex is the index of the Job holding the coordinator pod."),
                "podIndex": int32("podIndex is the index of the coordinator pod in its Job."),
            }, required=("replicatedJob",)),
        "managedBy": scalar("managedBy is the controller that reconciles the JobSet; empty means the built-in JobSet controller."),
        "ttlSecondsAfterFinished": checked(int32(
            "ttlSecondsAfterFinished limits the lifetime of a JobSet that has finished execution (either Complete or Failed)."
        ), minimum=0),
    }), _STARTUP_OR_DEPENDS_ON),
    _JOBSET + "ReplicatedJob": struct("ReplicatedJob is a group of identical Jobs.", {
        "name": scalar("name is the name of the entry and will be used as a suffix for the Job name."),
        "groupName": checked(scalar('groupName defines the name of the group this ReplicatedJob belongs to. Defaults to "default".'),
                             default="default"),
        "template": ref(_JOB_TEMPLATE_SPEC, "template defines the template of the Job that will be created."),
        "replicas": checked(int32("replicas is the number of jobs that will be created from this ReplicatedJob's template."),
                            default=1),
        "dependsOn": ruled(checked(array_of(
            "dependsOn lists the preceding ReplicatedJobs this one waits for: it is created only once they reach "
            "the given status.", struct("DependsOn defines the dependency on the previous ReplicatedJob status.", {
                "name": scalar("name of the previous ReplicatedJob."),
                "status": checked(scalar("status defines the condition for the ReplicatedJob: Ready or Complete."),
                                  enum=["Ready", "Complete"]),
            }, required=("name", "status"))), maxItems=5), _IMMUTABLE),
    }, required=("name", "template")),
    _JOBSET + "JobSetStatus": struct("JobSetStatus defines the observed state of JobSet.", {
        "conditions": array_of("conditions track status.", {"$ref": DEFINITIONS_PREFIX + CONDITION}),
        "restarts": int32("restarts tracks the number of times the JobSet has been globally restarted."),
        "restartsCountTowardsMax": int32(
            "restartsCountTowardsMax tracks the number of global restarts that count towards the maximum."
        ),
        "terminalState": scalar("terminalState tracks the state of the JobSet when it finishes: Completed or Failed."),
        "replicatedJobsStatus": array_of(
            "replicatedJobsStatus tracks the number of JobsReady for each replicatedJob.",
            struct("ReplicatedJobStatus defines the observed ReplicatedJobs Readiness.", {
                "name": scalar("name of the ReplicatedJob."),
                **{field: int32(text) for field, text in (
                    ("ready", "ready is the number of child Jobs whose ready and completed pods reach the expected count."),
                    ("succeeded", "succeeded is the number of successfully completed child Jobs."),
                    ("failed", "failed is the number of failed child Jobs."),
                    ("active", "active is the number of child Jobs with at least 1 pod running or pending."),
                    ("suspended", "suspended is the number of child Jobs which are in a suspended state."),
                )},
            }, required=("active", "failed", "name", "ready", "succeeded", "suspended"))),
    }),
}

#: JobSet's definitions, for the kinds that embed a JobSet's spec (Kubeflow Trainer's runtimes).
JOBSET_DEFINITIONS: Final = _JOBSET_DEFINITIONS

# --- LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) ---------------------------------------------

_LWS = "io.x-k8s.leaderworkerset.v1."

_LWS_DEFINITIONS: dict[str, Any] = {
    _LWS + "LeaderWorkerSetSpec": struct("LeaderWorkerSetSpec defines the desired state of a LeaderWorkerSet.", {
        "replicas": checked(int32("replicas is the number of groups (a leader and its workers) to run. Defaults to 1."), default=1),
        "leaderWorkerTemplate": ref(
            _LWS + "LeaderWorkerTemplate", "leaderWorkerTemplate defines the template of each group's leader and workers."
        ),
        "rolloutStrategy": struct("rolloutStrategy defines how groups are replaced when the template changes.", {
            "type": checked(scalar("type of the rollout strategy: RollingUpdate."), enum=["RollingUpdate"], default="RollingUpdate"),
            "rollingUpdateConfiguration": struct("rollingUpdateConfiguration bounds a rolling update.", {
                "partition": checked(int32("partition: only groups with an index at or above it are updated."), default=0),
                "maxUnavailable": checked(ref(_INT_OR_STRING, "maxUnavailable is how many groups may be unavailable during "
                                                              "the update."), default=1),
                "maxSurge": checked(ref(_INT_OR_STRING, "maxSurge is how many groups may be created above replicas during "
                                                        "the update."), default=0),
            }),
        }, required=("type",)),
        "startupPolicy": checked(scalar("startupPolicy: LeaderCreated (workers start with the leader pod) or LeaderReady."),
                                 enum=["LeaderCreated", "LeaderReady"], default="LeaderCreated"),
        "networkConfig": struct("networkConfig defines the groups' network names.", {
            "subdomainPolicy": checked(scalar("subdomainPolicy: Shared (one subdomain for all groups) or UniquePerReplica."),
                                       enum=["Shared", "UniquePerReplica"]),
        }, required=("subdomainPolicy",)),
    }, required=("leaderWorkerTemplate",)),
    _LWS + "LeaderWorkerTemplate": struct("LeaderWorkerTemplate defines the template of a group's pods.", {
        "leaderTemplate": ref(
            POD_TEMPLATE_SPEC, "leaderTemplate defines the pod template of the leader; the workerTemplate when unset."
        ),
        "workerTemplate": ref(POD_TEMPLATE_SPEC, "workerTemplate defines the pod template of the workers."),
        "size": checked(int32("size is the number of pods in each group, the leader included. Defaults to 1."), default=1),
        "restartPolicy": checked(scalar("restartPolicy: RecreateGroupOnPodRestart (the default) or None."),
                                 enum=["Default", "RecreateGroupOnPodRestart", "None"], default="RecreateGroupOnPodRestart"),
        "subGroupPolicy": struct("subGroupPolicy splits each group into subgroups of pods.", {
            "subGroupPolicyType": checked(scalar("subGroupPolicyType: LeaderWorker (the leader in the first subgroup, the "
                                                 "default) or LeaderExcluded (the leader in none)."),
                                          enum=["LeaderWorker", "LeaderExcluded"], default="LeaderWorker"),
            "subGroupSize": int32("subGroupSize is the number of pods in each subgroup."),
        }),
        "volumeClaimTemplates": array_of(
            "volumeClaimTemplates are the claims each group's pods may mount, by name, as a StatefulSet's.",
            {"$ref": DEFINITIONS_PREFIX + "io.k8s.api.core.v1.PersistentVolumeClaim"},
        ),
        "persistentVolumeClaimRetentionPolicy": ref(
            "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
            "persistentVolumeClaimRetentionPolicy says what becomes of the claims made from volumeClaimTemplates.",
        ),
    }, required=("workerTemplate",)),
    _LWS + "LeaderWorkerSetStatus": struct("LeaderWorkerSetStatus defines the observed state of a LeaderWorkerSet.", {
        "conditions": array_of("conditions track the condition of the LeaderWorkerSet.",
                               {"$ref": DEFINITIONS_PREFIX + CONDITION}),
        "readyReplicas": int32("readyReplicas is the number of groups whose pods are all ready."),
        "updatedReplicas": int32("updatedReplicas is the number of groups updated to the latest template."),
        "replicas": int32("replicas is the number of groups that exist."),
        "hpaPodSelector": scalar("hpaPodSelector selects the leader pods, for the HorizontalPodAutoscaler."),
    }),
}

#: (group, version, kind, definition prefix, description) of each kind listed here.
_KINDS: tuple[tuple[str, str, str, str, str], ...] = (
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", _JOBSET,
     "JobSet runs a group of Jobs as one unit: each replicated job's Jobs from one template (Kubernetes SIGs' kind)."),
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", _LWS,
     "LeaderWorkerSet runs groups of pods, each a leader and its workers, as one unit of replication "
     "(Kubernetes SIGs' kind)."),
)


def sigs_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions (the kind's and its parts') of a kind listed here."""
    for kind_group, kind_version, name, prefix, description in _KINDS:
        if (kind_group, kind_version, name) == (group, version, kind):
            schema = kind_definition(name, prefix, description)
            return prefix + name, {prefix + name: schema, **reachable([schema], {**_JOBSET_DEFINITIONS, **_LWS_DEFINITIONS})}
    return None
