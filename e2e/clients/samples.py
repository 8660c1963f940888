"""A minimal valid object of every kind the hub serves (or is likely to serve), for the
real-clients suite.

:func:`sample` builds one by kind; a served kind missing here makes :func:`sample` raise
:class:`MissingSample`, so a kind added to the hub fails the suite with a message saying to
add its sample here instead of being skipped. Workload samples ask for resources in the
form kube-apiserver returns them (``"1"``, ``"24Gi"``), as the README's GPU Deployment does.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

Builder = Callable[[str], dict[str, Any]]


#: The ClusterTrainingRuntime the suite stores first (:func:`training_runtime`): a TrainJob is
#: refused, as by Kubeflow Trainer's webhook, unless the runtime it names is stored.
TRAINING_RUNTIME = "clients-runtime"


class MissingSample(LookupError):
    """A served kind the suite has no sample object for."""


def _pod_template(
    name: str, *, restart_policy: str | None = None, gpus: bool = False, container_name: str = "main"
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": container_name, "image": "registry.acme.internal/ml/server:1.0"}
    if gpus:
        container["resources"] = {
            "requests": {"cpu": "4", "memory": "24Gi", "nvidia.com/gpu": "1"},
            "limits": {"memory": "24Gi", "nvidia.com/gpu": "1"},
        }
    spec: dict[str, Any] = {"containers": [container]}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {"metadata": {"labels": {"app": name}}, "spec": spec}


def _selected(name: str, **template: Any) -> dict[str, Any]:
    return {"selector": {"matchLabels": {"app": name}}, "template": _pod_template(name, **template)}


def _replica_specs(name: str, container: str, *roles: str) -> dict[str, Any]:
    """A training job's roles, each pod with ``container``: the name the kind's operator requires."""
    return {
        role: {"replicas": 1, "restartPolicy": "OnFailure", "template": _pod_template(name, gpus=True, container_name=container)}
        for role in roles
    }


def _policy_spec(name: str) -> dict[str, Any]:
    return {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}]}


def _override_spec(name: str) -> dict[str, Any]:
    return {
        **_policy_spec(name),
        "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"tier": "gpu"}}]}}],
    }


def _crd_spec(name: str) -> dict[str, Any]:
    """A CRD named ``<plural>.<group>`` (see :func:`sample`), its group its own so that clients
    creating one each at once never clash on the kind."""
    plural, group = name.split(".", 1)
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}
    return {
        "group": group,
        "scope": "Namespaced",
        "names": {"plural": plural, "singular": plural, "kind": "Widget", "listKind": "WidgetList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
    }


_ROLE_RULES = [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}]
#: Admission samples match no write of the shared hub: a group nobody serves, and a label no
#: object carries. A rule's ``scope`` is given: the list of rules is atomic, so a rule that
#: leaves it to the default (``*``) differs from the stored one, and a server-side apply after a
#: client-side one would conflict on it, as against kube.
_MATCH_NOTHING = [{"apiGroups": ["nothing.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["nothings"], "scope": "*"}]
_NO_OBJECT = {"matchLabels": {"e2e.gpufed.io/admission-sample": "never"}}


def _webhooks(name: str) -> dict[str, Any]:
    return {"webhooks": [{
        "name": f"{name}.nothing.example.com", "clientConfig": {"url": "https://127.0.0.1:9/admit"},
        "rules": _MATCH_NOTHING, "objectSelector": _NO_OBJECT, "failurePolicy": "Ignore",
        "sideEffects": "None", "admissionReviewVersions": ["v1"],
    }]}


#: A PEM certificate request for /CN=clients-suite/O=team-a (P-256), base64 as a CSR's spec.request carries it.
_CLIENT_CSR = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIa01JR0xBZ0VBTUNreEZqQVVCZ05WQkFNTURXTnNhV1Z1ZEhNdGMzVnBk"
    "R1V4RHpBTkJnTlZCQW9NQm5SbApZVzB0WVRCWk1CTUdCeXFHU000OUFnRUdDQ3FHU000OUF3RUhBMElBQkEyTUg1TnprOW1qa2oyV2xqQXV0"
    "WFJlCkVWZmxnSTlUOXdPZ0xSbGlEK3hSVkpYL3hNa1ZLSUlSa3ZHMDA0MVhHZ2FzSmNKT3FRNEw4MFhNcm03ajNwR2cKQURBS0JnZ3Foa2pP"
    "UFFRREFnTklBREJGQWlFQTlKRkdFci9GMW03SWU5WTVzbmtMRXN1QmEvT3Z6Vm95Z045NgpvanE1K01VQ0lIbnJzZ0pZS0hQQThjL2JuNTRU"
    "YTZwaEtncG5hQ3dKdHRCb05oM2hraS90Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo="
)


#: (group, kind) -> the object's body without apiVersion, kind and metadata.
_ONE_DEVICE = {"allocationMode": "ExactCount", "count": 1}

SPECS: dict[tuple[str, str], Builder] = {
    ("", "Namespace"): lambda name: {},
    ("", "ConfigMap"): lambda name: {"data": {"model": "mistral-7b"}},
    ("", "Secret"): lambda name: {"type": "Opaque", "data": {"token": base64.b64encode(b"s3cret").decode()}},
    ("", "ServiceAccount"): lambda name: {},
    ("", "Service"): lambda name: {
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8000}]}
    },
    ("", "PersistentVolumeClaim"): lambda name: {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    },
    ("", "Endpoints"): lambda name: {
        "subsets": [{"addresses": [{"ip": "10.0.0.7"}], "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}]}]
    },
    ("", "PersistentVolume"): lambda name: {
        "spec": {
            "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/data/{name}"},
        }
    },
    ("", "ReplicationController"): lambda name: {
        "spec": {"replicas": 1, "selector": {"app": name}, "template": _pod_template(name)}
    },
    ("", "Event"): lambda name: {
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"},
        "reason": "Tested", "message": "a test event", "type": "Normal", "count": 1,
        "source": {"component": "clients-suite"},
    },
    ("events.k8s.io", "Event"): lambda name: {
        "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"},
        "reason": "Tested", "note": "a test event", "type": "Normal", "action": "Testing",
        # Not a whole second: the official client writes a datetime back with Python's
        # isoformat, which drops a zero fraction, and a MicroTime needs its six digits.
        "eventTime": "2026-12-05T00:00:00.250000Z",
        "reportingController": "gpufed.io/clients-suite", "reportingInstance": "clients-suite-1",
    },
    ("", "ResourceQuota"): lambda name: {"spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": "10"}}},
    ("", "LimitRange"): lambda name: {
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}}]}
    },
    ("", "Pod"): lambda name: {"spec": _pod_template(name, gpus=True)["spec"]},
    ("", "Node"): lambda name: {"spec": {"podCIDR": "10.244.1.0/24"}},
    ("discovery.k8s.io", "EndpointSlice"): lambda name: {
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
    },
    ("node.k8s.io", "RuntimeClass"): lambda name: {"handler": "nvidia"},
    ("certificates.k8s.io", "CertificateSigningRequest"): lambda name: {"spec": {
        "request": _CLIENT_CSR, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"],
        "expirationSeconds": 3600,
    }},
    # A local APIService of a group nothing serves (an aggregated one would need a server behind it).
    ("apiregistration.k8s.io", "APIService"): lambda name: {"spec": {
        "group": f"{name}.example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
    }},
    ("scheduling.k8s.io", "PriorityClass"): lambda name: {"value": 1000, "description": "clients suite"},
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): lambda name: {"spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {
            "type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 20}}},
    }},
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): lambda name: {"spec": {
        "priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 5000,
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "clients-suite"}}],
                   "resourceRules": [{"verbs": ["list"], "apiGroups": ["batch"], "resources": ["jobs"], "namespaces": ["*"]}]}],
    }},
    ("coordination.k8s.io", "Lease"): lambda name: {"spec": {"holderIdentity": "clients-suite", "leaseDurationSeconds": 40}},
    ("apps", "Deployment"): lambda name: {"spec": {"replicas": 2, **_selected(name, gpus=True)}},
    ("apps", "StatefulSet"): lambda name: {"spec": {"replicas": 1, "serviceName": name, **_selected(name, gpus=True)}},
    ("apps", "DaemonSet"): lambda name: {"spec": _selected(name)},
    ("apps", "ReplicaSet"): lambda name: {"spec": {"replicas": 1, **_selected(name)}},
    ("apps", "ControllerRevision"): lambda name: {"data": {"spec": {"template": _pod_template(name)}}, "revision": 1},
    ("batch", "Job"): lambda name: {
        "spec": {"backoffLimit": 2, "template": _pod_template(name, restart_policy="Never", gpus=True)}
    },
    ("batch", "CronJob"): lambda name: {
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": _pod_template(name, restart_policy="OnFailure")}},
        }
    },
    ("networking.k8s.io", "Ingress"): lambda name: {
        "spec": {
            "ingressClassName": "nginx",
            "rules": [{
                "host": "llm.acme.internal",
                "http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": name, "port": {"number": 80}}},
                }]},
            }],
        }
    },
    ("networking.k8s.io", "IngressClass"): lambda name: {"spec": {"controller": "acme.internal/ingress-controller"}},
    ("networking.k8s.io", "NetworkPolicy"): lambda name: {
        "spec": {
            "podSelector": {"matchLabels": {"app": name}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"protocol": "TCP", "port": 8000}]}],
        }
    },
    ("policy", "PodDisruptionBudget"): lambda name: {
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}
    },
    ("autoscaling", "HorizontalPodAutoscaler"): lambda name: {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1, "maxReplicas": 4,
            "metrics": [{
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }],
        }
    },
    ("storage.k8s.io", "StorageClass"): lambda name: {
        "provisioner": "csi.acme.internal", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer",
    },
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): lambda name: {
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": _pod_template(name, gpus=True)},
        }
    },
    ("jobset.x-k8s.io", "JobSet"): lambda name: {
        "spec": {
            "replicatedJobs": [{
                "name": "workers", "replicas": 1,
                "template": {"spec": {"backoffLimit": 0, "template": _pod_template(name, restart_policy="Never", gpus=True)}},
            }],
        }
    },
    ("trainer.kubeflow.org", "TrainJob"): lambda name: {
        "spec": {"runtimeRef": {"name": TRAINING_RUNTIME}, "trainer": {"numNodes": 1}},
    },
    ("trainer.kubeflow.org", "TrainingRuntime"): lambda name: _training_runtime_spec(name),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): lambda name: _training_runtime_spec(name),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): _webhooks,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): _webhooks,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): lambda name: {"spec": {
        "matchConstraints": {"resourceRules": _MATCH_NOTHING, "objectSelector": _NO_OBJECT},
        "validations": [{"expression": "true", "message": "never refuses"}], "failurePolicy": "Ignore",
    }},
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): lambda name: {"spec": {
        "policyName": f"{name}-policy", "validationActions": ["Warn"], "matchResources": {"objectSelector": _NO_OBJECT},
    }},
    ("rbac.authorization.k8s.io", "Role"): lambda name: {"rules": _ROLE_RULES},
    ("rbac.authorization.k8s.io", "ClusterRole"): lambda name: {"rules": _ROLE_RULES},
    ("rbac.authorization.k8s.io", "RoleBinding"): lambda name: {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}],
    },
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): lambda name: {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}],
    },
    ("kubeflow.org", "PyTorchJob"): lambda name: {"spec": {"pytorchReplicaSpecs": _replica_specs(name, "pytorch", "Master", "Worker")}},
    ("kubeflow.org", "MPIJob"): lambda name: {"spec": {"mpiReplicaSpecs": _replica_specs(name, "main", "Launcher", "Worker")}},
    ("kubeflow.org", "TFJob"): lambda name: {"spec": {"tfReplicaSpecs": _replica_specs(name, "tensorflow", "PS", "Worker")}},
    ("kubeflow.org", "XGBoostJob"): lambda name: {"spec": {"xgbReplicaSpecs": _replica_specs(name, "xgboost", "Master", "Worker")}},
    ("kubeflow.org", "PaddleJob"): lambda name: {"spec": {"paddleReplicaSpecs": _replica_specs(name, "paddle", "Master", "Worker")}},
    ("kubeflow.org", "JAXJob"): lambda name: {"spec": {"jaxReplicaSpecs": _replica_specs(name, "jax", "Worker")}},
    # A worker group as KubeRay's samples write it: its CRD requires minReplicas and maxReplicas (and
    # defaults them), which kubectl checks itself in a List's items; and workerGroupSpecs is an atomic
    # list, so a client-side apply's copy with the CRD's defaults (numOfHosts...) filled in would
    # conflict, as on a cluster, with a server-side apply of a manifest that leaves them out.
    ("ray.io", "RayJob"): lambda name: {
        "spec": {
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": _pod_template(name)},
                "workerGroupSpecs": [
                    {"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "numOfHosts": 1, "rayStartParams": {},
                     "template": _pod_template(name, gpus=True)}
                ],
            },
        }
    },
    ("ray.io", "RayCluster"): lambda name: {
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": _pod_template(name)},
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "numOfHosts": 1, "rayStartParams": {},
                 "template": _pod_template(name, gpus=True)}
            ],
        }
    },
    ("apiextensions.k8s.io", "CustomResourceDefinition"): lambda name: {"spec": _crd_spec(name)},
    ("config.karmada.io", "ResourceInterpreterCustomization"): lambda name: {
        "spec": {
            # One customization per target and hook: each sample its own target kind.
            "target": {"apiVersion": "clients.example.com/v1", "kind": "Widget" + name.replace("-", "")},
            "customizations": {
                "healthInterpretation": {"luaScript": "function InterpretHealth(observedObj)\n  return true\nend\n"},
            },
        }
    },
    ("config.karmada.io", "ResourceInterpreterWebhookConfiguration"): lambda name: {
        "webhooks": [
            {
                "name": "workloads.example.com",
                "clientConfig": {"url": "https://webhook.example.com:443/interpreter-workload"},
                "rules": [
                    {"operations": ["InterpretReplica"], "apiGroups": ["clients.example.com"],
                     "apiVersions": ["v1"], "kinds": ["Widget"]}
                ],
                "interpreterContextVersions": ["v1alpha1"],
                "timeoutSeconds": 3,
            }
        ]
    },
    ("apps.karmada.io", "WorkloadRebalancer"): lambda name: {
        "spec": {"workloads": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"}]}
    },
    ("policy.karmada.io", "FederatedResourceQuota"): lambda name: {
        "spec": {"overall": {"cpu": "100"}, "staticAssignments": [{"clusterName": "member1", "hard": {"cpu": "20"}}]}
    },
    # Dynamic Resource Allocation: NVIDIA's GPU class, a claim and a template of one GPU. A claim's
    # requests are an atomic list, so kube's defaults (ExactCount, 1) are written out: else a
    # server-side apply after a client-side one conflicts on the whole list, as on any kube.
    ("resource.k8s.io", "DeviceClass"): lambda name: {
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}
    },
    ("resource.k8s.io", "ResourceClaim"): lambda name: {
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **_ONE_DEVICE}}]}}
    },
    ("resource.k8s.io", "ResourceClaimTemplate"): lambda name: {
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **_ONE_DEVICE}}]}}}
    },
    ("resource.k8s.io", "ResourceSlice"): lambda name: {
        "spec": {"driver": "gpu.nvidia.com", "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}
    },
    ("multicluster.x-k8s.io", "ServiceExport"): lambda name: {},
    ("multicluster.x-k8s.io", "ServiceImport"): lambda name: {
        "spec": {"type": "ClusterSetIP", "ports": [{"port": 80, "protocol": "TCP"}]}
    },
    ("networking.karmada.io", "MultiClusterIngress"): lambda name: {
        "spec": {"defaultBackend": {"service": {"name": name, "port": {"number": 80}}}}
    },
    ("networking.karmada.io", "MultiClusterService"): lambda name: {
        "spec": {"types": ["CrossCluster"], "providerClusters": [{"name": "no-such-cluster"}]}
    },
    ("autoscaling.karmada.io", "FederatedHPA"): lambda name: {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": "DCGM_FI_DEV_GPU_UTIL"},
                                                  "target": {"type": "AverageValue", "averageValue": "50"}}}],
        }
    },
    ("autoscaling.karmada.io", "CronFederatedHPA"): lambda name: {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            # The CRD's defaults written out: ``rules`` is an atomic list, so a default filled in
            # an item would make the live list differ from the applied one (an apply conflict
            # after a client-side apply, as against kube with Karmada's CRD).
            "rules": [{"name": "nightly", "schedule": "0 22 * * *", "targetReplicas": 1, "suspend": False,
                       "successfulHistoryLimit": 3, "failedHistoryLimit": 3}],
        }
    },
    ("kueue.x-k8s.io", "ResourceFlavor"): lambda name: {"spec": {"nodeLabels": {"cluster.gpufed.io/tier": "0"}}},
    ("kueue.x-k8s.io", "ClusterQueue"): lambda name: {
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": name, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}
            ],
        }
    },
    ("kueue.x-k8s.io", "LocalQueue"): lambda name: {"spec": {"clusterQueue": name}},
    ("kueue.x-k8s.io", "AdmissionCheck"): lambda name: {"spec": {"controllerName": "example.com/" + name}},
    ("kueue.x-k8s.io", "ProvisioningRequestConfig"): lambda name: {
        # The CRD's retryStrategy defaults written out, as CronFederatedHPA's rules above.
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "managedResources": ["nvidia.com/gpu"],
                 "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}},
    },
    ("policy.karmada.io", "ClusterTaintPolicy"): lambda name: {
        # Its taint a key no other sample's policy uses, so that no cluster of the shared hub is tainted.
        "spec": {"targetClusters": {"clusterNames": ["no-such-cluster"]},
                 "addOnConditions": [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}],
                 "taints": [{"key": "clients.example.com/" + name, "effect": "NoSchedule"}]}
    },
    ("kueue.x-k8s.io", "Topology"): lambda name: {
        "spec": {"levels": [{"nodeLabel": "cloud.example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}
    },
    ("kueue.x-k8s.io", "MultiKueueConfig"): lambda name: {"spec": {"clusters": [name]}},
    # The CRD's locationType default written out; v1beta2's clusterSource in VERSIONED_SPECS.
    ("kueue.x-k8s.io", "MultiKueueCluster"): lambda name: {
        "spec": {"kubeConfig": {"location": name + "-kubeconfig", "locationType": "Secret"}},
    },
    ("kueue.x-k8s.io", "Cohort"): lambda name: {"spec": {"fairSharing": {"weight": "2"}}},
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): lambda name: {"value": 1000, "description": "clients suite"},
    ("kueue.x-k8s.io", "Workload"): lambda name: {
        "spec": {"queueName": name, "podSets": [{"name": "main", "count": 1, "template": _pod_template(name, gpus=True)}]}
    },
    ("cluster.gpufed.io", "Cluster"): lambda name: {"spec": {"provider": "onprem", "region": "eu-west", "tier": 0}},
    ("work.gpufed.io", "ResourceBinding"): lambda name: {
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"}}
    },
    ("work.gpufed.io", "Work"): lambda name: {"spec": {"workload": {"manifests": []}}},
    ("policy.gpufed.io", "PropagationPolicy"): lambda name: {"spec": _policy_spec(name)},
    ("policy.gpufed.io", "ClusterPropagationPolicy"): lambda name: {"spec": _policy_spec(name)},
    ("policy.gpufed.io", "OverridePolicy"): lambda name: {"spec": _override_spec(name)},
    ("policy.gpufed.io", "ClusterOverridePolicy"): lambda name: {"spec": _override_spec(name)},
}
# Karmada's group serves the same policies.
SPECS.update({("policy.karmada.io", kind): SPECS[("policy.gpufed.io", kind)] for _, kind in list(SPECS) if _ == "policy.gpufed.io"})


#: (apiVersion, kind) -> the body, for a kind served in versions whose bodies differ (one stored
#: object, converted: autoscaling/v1 says with one field what v2 says with a metric).
VERSIONED_SPECS: dict[tuple[str, str], Builder] = {
    ("autoscaling/v1", "HorizontalPodAutoscaler"): lambda name: {
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1, "maxReplicas": 4, "targetCPUUtilizationPercentage": 80,
        }
    },
    ("kueue.x-k8s.io/v1beta2", "MultiKueueCluster"): lambda name: {
        "spec": {"clusterSource": {"kubeConfig": {"location": name + "-kubeconfig", "locationType": "Secret"}}},
    },
}


def _training_runtime_spec(name: str) -> dict[str, Any]:
    job = {"spec": {"template": _pod_template(name, restart_policy="Never", container_name="node")}}
    return {"spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [{"name": "node", "template": job}]}}}}


def training_runtime() -> dict[str, Any]:
    """The ClusterTrainingRuntime the TrainJob samples name."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": TRAINING_RUNTIME}, **_training_runtime_spec(TRAINING_RUNTIME)}


def sample(api_version: str, kind: str, name: str, *, namespace: str | None) -> dict[str, Any]:
    """A minimal valid ``kind`` named ``name`` (in ``namespace`` when the kind is namespaced); a
    CustomResourceDefinition's name must be ``<plural>.<group>``, so it is named from ``name``:
    read the name from the sample (an APIService's is ``v1.<name>.example.com``, kube's ``<version>.<group>``)."""
    group = api_version.rpartition("/")[0]
    builder = VERSIONED_SPECS.get((api_version, kind)) or SPECS.get((group, kind))
    if builder is None:
        raise MissingSample(
            f"the hub serves {kind} ({api_version}) but e2e/clients/samples.py has no sample of it: add one to SPECS"
        )
    built = name  # what the builder is given
    if (group, kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
        name = built = f"{name}.{name}.example.com"  # kube's rule: <plural>.<group>
    elif (group, kind) == ("apiregistration.k8s.io", "APIService"):
        name = f"v1.{name}.example.com"  # kube's rule: <version>.<group>
    metadata: dict[str, Any] = {"name": name, "labels": {"suite": "clients"}}
    if namespace:
        metadata["namespace"] = namespace
    body = builder(built)
    for about in ("involvedObject", "regarding"):  # an Event is about an object of its own namespace
        if namespace and about in body:
            body[about] = {**body[about], "namespace": namespace}
    spec = body.get("spec")
    if namespace and isinstance(spec, dict) and "resourceSelectors" in spec:
        # Written as Karmada's webhook (and the hub) stores a namespaced policy's selectors: an
        # apply of the list without them after a client-side one conflicts, as on Karmada.
        spec["resourceSelectors"] = [{**sel, "namespace": namespace} for sel in spec["resourceSelectors"]]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}
