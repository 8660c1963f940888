"""Schemas of KubeRay's kinds (``ray.io/v1``) the hub stores without a model: RayJob and RayCluster.

As in :mod:`.sigs_kinds`, these declare every field of the CRDs' ``spec`` and ``status``, in
KubeRay's own terms, with the embedded kube types by reference as the CRDs embed them: a group's
template is kube's ``PodTemplateSpec``, the head's Service kube's ``Service``, a network policy's
rules kube's ``NetworkPolicyIngressRule`` and ``NetworkPolicyEgressRule``. The fields of KubeRay's
releases are all declared (``deletionPolicy`` beside the ``deletionStrategy`` that replaced it), so
that a RayJob written for any of them is kept as written. A RayJob's ``status.conditions`` is the
hub's own (Propagated, Schedulable). Whatever else a RayJob or a RayCluster holds is pruned as the
CRDs prune it: dropped with a warning, refused under ``fieldValidation=Strict``.

Kube's OpenAPI v2 dialect, keyed by definition name; pure constants and one lookup.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.openapi import extra_kinds as k
from controlplane.apiserver.openapi.upstream import DEFINITIONS_PREFIX, POD_TEMPLATE_SPEC, reachable

_RAY = "io.ray.v1."
_CORE = "io.k8s.api.core.v1."
_NETWORKING = "io.k8s.api.networking.v1."
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
#: KubeRay's two rules of a RayCluster's (and a RayJob's) ``managedBy``: kept as created, and one
#: of the two controllers.
_MANAGED_BY: tuple[tuple[str, str], ...] = (
    ("self == oldSelf", "the managedBy field is immutable"),
    ("self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
     "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"),
)
_STRINGS = {"type": "string"}


def _list_of(description: str, definition: str) -> dict[str, Any]:
    return k.array_of(description, {"$ref": DEFINITIONS_PREFIX + definition})


def _group_fields(who: str) -> dict[str, Any]:
    """The fields a head group and a worker group share."""
    return {
        "rayStartParams": k.map_of(f"rayStartParams are the flags passed to `ray start` in the {who} pods "
                                 "(num-cpus, num-gpus, ...).", _STRINGS),
        "template": k.ref(POD_TEMPLATE_SPEC, f"template is the pod template of the {who} pods; gpufed reads its "
                                           "resource requests."),
        "resources": k.map_of(f"resources are the Ray resources of the {who} group, over rayStartParams'.", _STRINGS),
        "labels": k.map_of(f"labels are the Ray node labels of the {who} group, also put on its pods.", _STRINGS),
    }


def _redis_credential(what: str) -> dict[str, Any]:
    return k.struct(f"The Redis {what}, or where to read it.", {
        "value": k.scalar(f"The Redis {what}."),
        "valueFrom": k.ref(_CORE + "EnvVarSource", f"Where to read the Redis {what} from."),
    })


_POLICY_RULES = {
    "ingressRules": _list_of("ingressRules are appended to the base policy's ingress rules.",
                             _NETWORKING + "NetworkPolicyIngressRule"),
    "egressRules": _list_of("egressRules are appended to the base policy's egress rules (add DNS under "
                            "DenyAll or DenyAllEgress).", _NETWORKING + "NetworkPolicyEgressRule"),
}
_DELETION_POLICY = k.struct("DeletionPolicy is the legacy single-stage deletion policy (deprecated).", {
    "policy": k.scalar("policy: DeleteCluster, DeleteWorkers, DeleteSelf or DeleteNone."),
})

_DEFINITIONS: dict[str, Any] = {
    _RAY + "RayClusterSpec": k.struct(
        "RayClusterSpec is the desired state of a Ray cluster: one head group and any number of worker groups.", {
            "upgradeStrategy": k.struct("upgradeStrategy says how the cluster's pods are replaced on a change.", {
                "type": k.scalar("type: Recreate or None."),
            }),
            "authOptions": k.struct("authOptions configures the cluster's authentication.", {
                "enableK8sTokenAuth": k.scalar("enableK8sTokenAuth delegates authentication to the Kubernetes API server.",
                                             "boolean"),
                "secretName": k.scalar("secretName names the Secret holding the token (key auth_token)."),
                "mode": k.scalar("mode: disabled or token (the default)."),
            }),
            "suspend": k.scalar("suspend deletes the cluster's pods while true.", "boolean"),
            "managedBy": k.ruled(k.scalar("managedBy is the controller that reconciles the cluster: ray.io/kuberay-operator "
                                          "(the default) or kueue.x-k8s.io/multikueue."), *_MANAGED_BY),
            "autoscalerOptions": k.struct("autoscalerOptions configures the Ray autoscaler's container.", {
                "resources": k.ref(_CORE + "ResourceRequirements", "resources of the autoscaler container."),
                "image": k.scalar("image overrides the autoscaler's image."),
                "imagePullPolicy": k.scalar("imagePullPolicy overrides the autoscaler's image pull policy."),
                "securityContext": k.ref(_CORE + "SecurityContext", "securityContext of the autoscaler container."),
                "idleTimeoutSeconds": k.int32("idleTimeoutSeconds before an idle worker is scaled down. Defaults to 60."),
                "upscalingMode": k.checked(k.scalar("upscalingMode: Default, Aggressive or Conservative."),
                                           enum=["Default", "Aggressive", "Conservative"]),
                "version": k.scalar("version of the autoscaler: v1 or v2."),
                "env": _list_of("env of the autoscaler container.", _CORE + "EnvVar"),
                "envFrom": _list_of("envFrom of the autoscaler container.", _CORE + "EnvFromSource"),
                "volumeMounts": _list_of("volumeMounts of the autoscaler container.", _CORE + "VolumeMount"),
                "command": k.array_of("command overrides the autoscaler container's command.", _STRINGS),
                "args": k.array_of("args overrides the autoscaler container's arguments.", _STRINGS),
            }),
            "headServiceAnnotations": k.map_of("headServiceAnnotations are put on the head's Service.", _STRINGS),
            "enableInTreeAutoscaling": k.scalar(
                "enableInTreeAutoscaling runs the Ray autoscaler, which scales worker groups between "
                "their minReplicas and maxReplicas.", "boolean",
            ),
            "gcsFaultToleranceOptions": k.struct("gcsFaultToleranceOptions enables GCS fault tolerance.", {
                "backend": k.scalar("backend of the GCS store: redis (the default) or rocksdb."),
                "redisUsername": _redis_credential("username"),
                "redisPassword": _redis_credential("password"),
                "externalStorageNamespace": k.scalar("externalStorageNamespace isolates the cluster's GCS data in Redis."),
                "redisAddress": k.scalar("redisAddress is the address of the external Redis."),
                "storage": k.struct("storage configures the volume of the embedded RocksDB store.", {
                    "claimName": k.scalar("claimName names an existing PersistentVolumeClaim to use."),
                    "size": k.ref(_QUANTITY, "size of the claim the operator makes. Defaults to 1Gi."),
                    "storageClassName": k.scalar("storageClassName of the claim the operator makes."),
                    "accessModes": k.array_of("accessModes of the claim the operator makes.", _STRINGS),
                    "subPath": k.scalar("subPath mounts a subdirectory of the volume."),
                    "deletionPolicy": k.scalar("deletionPolicy of the claim the operator makes: DeleteWithCluster or Retain."),
                }),
            }),
            "historyServerOptions": k.struct("historyServerOptions configures the history server.", {
                "collectorOptions": k.struct("collectorOptions configures the collector sidecar.", {
                    "image": k.scalar("image of the collector."),
                    "imagePullPolicy": k.scalar("imagePullPolicy of the collector image."),
                    "resources": k.ref(_CORE + "ResourceRequirements", "resources of the collector container."),
                    "env": _list_of("env of the collector container.", _CORE + "EnvVar"),
                }),
            }),
            "networkPolicy": k.struct("networkPolicy isolates the cluster's pods by NetworkPolicies.", {
                "mode": k.scalar("mode: DenyAll (the default), DenyAllIngress or DenyAllEgress."),
                "head": k.struct("head's rules, added to the head pod's policy.", dict(_POLICY_RULES)),
                "worker": k.struct("worker's rules, added to every worker group's policy.", dict(_POLICY_RULES)),
                "workerGroups": k.array_of("workerGroups' rules replace worker's for one group, by name.", k.struct(
                    "One worker group's rules.", {"groupName": k.scalar("groupName of the worker group."), **_POLICY_RULES})),
            }),
            "tlsOptions": k.struct("tlsOptions configures mTLS between the cluster's pods.", {
                "enabled": k.scalar("enabled turns mTLS on.", "boolean"),
            }),
            "headGroupSpec": k.ref(_RAY + "HeadGroupSpec", "headGroupSpec describes the Ray head pod."),
            "rayVersion": k.scalar("rayVersion is the version of Ray the pods run."),
            "workerGroupSpecs": k.array_of(
                "workerGroupSpecs are the groups of Ray worker pods. gpufed places the head and every "
                "worker of the cluster in one member cluster.",
                {"$ref": DEFINITIONS_PREFIX + _RAY + "WorkerGroupSpec"},
            ),
        }, required=("headGroupSpec",)),
    _RAY + "HeadGroupSpec": k.struct("HeadGroupSpec describes the Ray head pod.", {
        **_group_fields("head"),
        "headService": k.ref(_CORE + "Service", "headService is the head pod's Service."),
        "enableIngress": k.scalar("enableIngress makes an Ingress for the head's Service.", "boolean"),
        "ingressOptions": k.struct("ingressOptions configures the head's Ingress.", {
            "host": k.scalar("host the Ingress routes to the dashboard."),
            "path": k.scalar("path the Ingress routes to the dashboard. Defaults to /."),
            "pathType": k.scalar("pathType: Exact, Prefix (the default) or ImplementationSpecific."),
            "tls": _list_of("tls configures the Ingress's TLS termination.", _NETWORKING + "IngressTLS"),
        }),
        "serviceType": k.scalar("serviceType of the head's Service: ClusterIP, NodePort or LoadBalancer."),
    }, required=("rayStartParams", "template")),
    _RAY + "WorkerGroupSpec": k.struct("WorkerGroupSpec describes one group of identical Ray worker pods.", {
        **_group_fields("group's worker"),
        "suspend": k.scalar("suspend deletes the group's pods while true.", "boolean"),
        "groupName": k.scalar("groupName is the unique name of the group in the cluster."),
        "replicas": k.checked(k.int32("replicas is the number of worker pods (of hosts, with numOfHosts) wanted now."),
                              default=0),
        "minReplicas": k.checked(k.int32("minReplicas is the fewest workers the autoscaler keeps. Defaults to 0."), default=0),
        "maxReplicas": k.checked(k.int32("maxReplicas is the most workers the autoscaler creates. Defaults to 2147483647."),
                                 default=2147483647),
        "idleTimeoutSeconds": k.int32("idleTimeoutSeconds before the autoscaler (v2) removes an idle worker of the group."),
        "priority": k.int32("priority: the autoscaler (v2) prefers groups of a higher one. Defaults to 0."),
        "scaleStrategy": k.struct("scaleStrategy says which workers to remove.", {
            "workersToDelete": k.array_of("workersToDelete names the worker pods to remove.", _STRINGS),
        }),
        "numOfHosts": k.checked(k.int32("numOfHosts is the number of pods per replica (multi-host workers). Defaults to 1."),
                                default=1),
    }, required=("groupName", "maxReplicas", "minReplicas", "rayStartParams", "template")),
    _RAY + "RayJobSpec": k.struct(
        "RayJobSpec is the desired state of a RayJob: the program to run and the Ray cluster to run it on.", {
            "activeDeadlineSeconds": k.int32("activeDeadlineSeconds the job may run before it is marked failed."),
            "backoffLimit": k.checked(k.int32("backoffLimit is the number of retries (each on a new Ray cluster) before "
                                              "the job is marked failed."), default=0),
            "rayClusterSpec": k.ref(_RAY + "RayClusterSpec", "rayClusterSpec is the Ray cluster created to run the job."),
            "submitterPodTemplate": k.ref(POD_TEMPLATE_SPEC,
                                        "submitterPodTemplate is the pod template of the job that submits the program."),
            "metadata": k.map_of("metadata is stored with the Ray job.", _STRINGS),
            "clusterSelector": k.map_of("clusterSelector selects an existing RayCluster by labels instead of creating one.",
                                      _STRINGS),
            "submitterConfig": k.struct("submitterConfig configures the submitter Job.", {
                "backoffLimit": k.int32("backoffLimit of the submitter Job."),
            }),
            "managedBy": k.ruled(k.scalar("managedBy is the controller that reconciles the job: ray.io/kuberay-operator "
                                          "(the default) or kueue.x-k8s.io/multikueue."), *_MANAGED_BY),
            "deletionPolicy": k.ruled(k.scalar("deletionPolicy (KubeRay 1.3; replaced by deletionStrategy): DeleteCluster, "
                                               "DeleteWorkers, DeleteSelf or DeleteNone."), (
                "self in ['DeleteCluster', 'DeleteWorkers', 'DeleteSelf', 'DeleteNone']",
                "the deletionPolicy field value must be either 'DeleteCluster', 'DeleteWorkers', 'DeleteSelf', or 'DeleteNone'",
            )),
            "deletionStrategy": k.struct("deletionStrategy deletes the job's resources after it finishes.", {
                "onSuccess": _DELETION_POLICY,
                "onFailure": _DELETION_POLICY,
                "deletionRules": k.array_of("deletionRules: each deletes by its policy once its condition holds.", k.struct(
                    "One deletion rule.", {
                        "policy": k.scalar("policy: DeleteCluster, DeleteWorkers, DeleteSelf or DeleteNone."),
                        "condition": k.struct("condition that triggers the rule.", {
                            "jobStatus": k.scalar("jobStatus: SUCCEEDED or FAILED."),
                            "jobDeploymentStatus": k.scalar("jobDeploymentStatus: Failed."),
                            "ttlSeconds": k.int32("ttlSeconds after the status is reached before the rule applies."),
                        }),
                    })),
            }),
            "submitterFinishedTimeoutSeconds": k.int32("submitterFinishedTimeoutSeconds the operator waits for the "
                                                     "submitter to finish."),
            "entrypoint": k.scalar("entrypoint is the command that starts the job (for example `python train.py`)."),
            "runtimeEnvYAML": k.scalar("runtimeEnvYAML is the job's Ray runtime environment, as YAML."),
            "jobId": k.scalar("jobId is the submission ID of the job; generated when empty."),
            "submissionMode": k.checked(k.scalar("submissionMode: K8sJobMode (the default), HTTPMode, InteractiveMode or "
                                                 "SidecarMode."), default="K8sJobMode"),
            "entrypointResources": k.scalar("entrypointResources are the custom resources reserved for the entrypoint, "
                                          "as JSON."),
            "entrypointNumCpus": k.scalar("entrypointNumCpus is the number of CPUs reserved for the entrypoint.", "number",
                                        format="float"),
            "entrypointNumGpus": k.scalar("entrypointNumGpus is the number of GPUs reserved for the entrypoint.", "number",
                                        format="float"),
            "ttlSecondsAfterFinished": k.checked(k.int32("ttlSecondsAfterFinished before the job's Ray cluster is deleted."),
                                                 default=0),
            "shutdownAfterJobFinishes": k.scalar("shutdownAfterJobFinishes deletes the Ray cluster when the job finishes.",
                                               "boolean"),
            "suspend": k.scalar("suspend deletes the job's Ray cluster and keeps the job waiting while true.", "boolean"),
        }),
    _RAY + "RayJobStatus": k.struct("RayJobStatus is the observed state of the RayJob in the member cluster that runs it.", {
        "rayJobInfo": k.struct("rayJobInfo is what the Ray dashboard says of the job.", {
            "startTime": k.ref(_TIME, "When Ray started the job."),
            "endTime": k.ref(_TIME, "When Ray ended the job."),
        }),
        "jobId": k.scalar("jobId is the submission ID of the job."),
        "rayClusterName": k.scalar("rayClusterName is the name of the Ray cluster that runs the job."),
        "dashboardURL": k.scalar("dashboardURL is the address of the Ray dashboard."),
        "jobStatus": k.scalar("jobStatus is Ray's status of the job: PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED."),
        "jobDeploymentStatus": k.scalar(
            "jobDeploymentStatus is the operator's phase of the job: Initializing, Running, Complete, "
            "Failed, Suspending, Suspended, Retrying, Waiting or ValidationFailed."
        ),
        "reason": k.scalar("reason the job failed: SubmissionFailed, DeadlineExceeded, AppFailed, ..."),
        "message": k.scalar("message explains the job's current status."),
        "startTime": k.ref(_TIME, "When the job started."),
        "submitterFinishedTime": k.ref(_TIME, "When the submitter finished."),
        "endTime": k.ref(_TIME, "When the job ended."),
        "succeeded": k.checked(k.int32("The number of times the job succeeded."), default=0),
        "failed": k.checked(k.int32("The number of times the job failed."), default=0),
        "rayClusterStatus": k.ref(_RAY + "RayClusterStatus", "The status of the job's Ray cluster."),
        "observedGeneration": k.scalar("observedGeneration is the generation the operator last saw.", "integer",
                                     format="int64"),
        "conditions": k.array_of("Conditions of the job: the hub's Propagated and Schedulable.",
                               {"$ref": DEFINITIONS_PREFIX + k.CONDITION}),
    }),
    _RAY + "RayClusterStatus": k.struct(
        "RayClusterStatus is the observed state of the Ray cluster in the member cluster that runs it.", {
            "state": k.scalar("state of the cluster: ready, suspended or failed (deprecated: see conditions)."),
            **{f"desired{what}": k.ref(_QUANTITY, f"The {what}s the cluster asks for in all.") for what in
               ("CPU", "Memory", "GPU", "TPU")},
            "lastUpdateTime": k.ref(_TIME, "When the status was last updated."),
            "stateTransitionTimes": k.map_of("When the cluster last entered each state.",
                                           {"$ref": DEFINITIONS_PREFIX + _TIME}),
            "endpoints": k.map_of("The head Service's ports, by name.", _STRINGS),
            "head": k.struct("head is where the head pod and its Service are.", {
                "podIP": k.scalar("podIP of the head pod."),
                "serviceIP": k.scalar("serviceIP of the head's Service."),
                "podName": k.scalar("podName of the head pod."),
                "serviceName": k.scalar("serviceName of the head's Service."),
            }),
            "reason": k.scalar("reason explains the state."),
            "conditions": k.array_of("Conditions of the cluster (HeadPodReady, RayClusterProvisioned, ...).",
                                   {"$ref": DEFINITIONS_PREFIX + k.CONDITION}),
            "readyWorkerReplicas": k.int32("The number of worker pods ready."),
            "availableWorkerReplicas": k.int32("The number of worker pods running."),
            "desiredWorkerReplicas": k.int32("The number of worker pods wanted across all groups."),
            "minWorkerReplicas": k.int32("The sum of the groups' minReplicas times numOfHosts."),
            "maxWorkerReplicas": k.int32("The sum of the groups' maxReplicas times numOfHosts."),
            "observedGeneration": k.scalar("observedGeneration is the generation the operator last saw.", "integer",
                                         format="int64"),
        }),
}

_KINDS = {
    "RayJob": "RayJob runs one program on a Ray cluster created for it (KubeRay).",
    "RayCluster": "RayCluster represents a Ray cluster: a head pod and groups of workers (KubeRay).",
}


def ray_kind_definitions(group: str, version: str, kind: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The definition name and definitions (the kind's and its parts') of a KubeRay kind."""
    if (group, version) != ("ray.io", "v1") or kind not in _KINDS:
        return None
    schema = k.kind_definition(kind, _RAY, _KINDS[kind])
    return _RAY + kind, {_RAY + kind: schema, **reachable([schema], _DEFINITIONS)}
