"""kube's validation of built-in kinds, through the hub's HTTP API on a real etcd.

Each case is a valid manifest and one change that breaks it. The broken manifest is refused
with 422 ``Invalid`` and a cause at kube's field path with kube's message; the manifest as
it was is accepted. Updates that kube forbids (immutable fields) are refused the same way.
"""

from __future__ import annotations

import copy
import io
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.apis.kube.validation import for_kind, for_status
from controlplane.apiserver.app import create_app
from controlplane.apiserver.objects import ObjectStore
from controlplane.hub import hub_registry
from controlplane.storage.etcd import EtcdStore

from .test_real_clients import kubectl, needs_kubectl

Obj = dict[str, Any]
Client = TestClient[Any, Any]

PLURALS = {
    "Deployment": "/apis/apps/v1/namespaces/default/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/default/statefulsets",
    "Job": "/apis/batch/v1/namespaces/default/jobs",
    "Service": "/api/v1/namespaces/default/services",
    "ConfigMap": "/api/v1/namespaces/default/configmaps",
    "Secret": "/api/v1/namespaces/default/secrets",
    "PersistentVolumeClaim": "/api/v1/namespaces/default/persistentvolumeclaims",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
    "Ingress": "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
    "IngressClass": "/apis/networking.k8s.io/v1/ingressclasses",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
    "LimitRange": "/api/v1/namespaces/default/limitranges",
    "ResourceQuota": "/api/v1/namespaces/default/resourcequotas",
}
API_VERSIONS = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


@pytest.fixture
async def hub(etcd_endpoint: str) -> AsyncIterator[Client]:
    """The hub's API (everything it serves) over a fresh prefix of the session's etcd."""
    registry = hub_registry()
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/kube-validation-{time.monotonic_ns()}") as store:
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        async with TestClient(TestServer(create_app(objects, registry))) as client:
            yield client


def container(**extra: Any) -> Obj:
    return {"name": "main", "image": "trainer:1", **extra}


def pod_template(*, restart: str | None = None, **spec: Any) -> Obj:
    body: Obj = {"containers": [container()], **spec}
    if restart:
        body["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": "x"}}, "spec": body}


def workload(kind: str, name: str = "x", **spec: Any) -> Obj:
    if kind == "Job":
        body: Obj = {"template": pod_template(restart="Never"), **spec}
    else:
        body = {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": pod_template(), **spec}
    return {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": {"name": name}, "spec": body}


def core(kind: str, name: str = "x", **fields: Any) -> Obj:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, **fields}


def deployment() -> Obj:
    return workload("Deployment")


def service() -> Obj:
    return core("Service", spec={"selector": {"app": "x"}, "ports": [{"port": 80, "targetPort": 8080}]})


def claim() -> Obj:
    return core(
        "PersistentVolumeClaim",
        spec={"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    )


def budget() -> Obj:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
    }


def priority_class(name: str = "x", value: int = 1000) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def storage_class() -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "x"},
        "provisioner": "csi.example.com", "parameters": {"type": "ssd"},
    }


def autoscaler() -> Obj:
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "x"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}, "maxReplicas": 4,
            "metrics": [cpu],
        },
    }


def ingress() -> Obj:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "x"},
        "spec": {
            "ingressClassName": "nginx",
            "rules": [{"host": "gpu.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}],
            "tls": [{"hosts": ["gpu.example.com"], "secretName": "tls"}],
        },
    }


def ingress_class() -> Obj:
    params = {"apiGroup": "k8s.example.com", "kind": "Params", "name": "lb", "scope": "Namespace", "namespace": "default"}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "x"},
        "spec": {"controller": "example.com/ingress", "parameters": params},
    }


def network_policy() -> Obj:
    peer = {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "x"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "x"}},
            "ingress": [{"from": [peer], "ports": [{"protocol": "TCP", "port": 8080, "endPort": 8090}]}],
        },
    }


def limit_range() -> Obj:
    return core("LimitRange", spec={"limits": [{
        "type": "Container", "max": {"cpu": "2", GPU: "4"}, "min": {"cpu": "100m"},
        "default": {"cpu": "1", GPU: "1"}, "defaultRequest": {"cpu": "500m", GPU: "1"},
        "maxLimitRequestRatio": {"cpu": "4"},
    }]})


def quota() -> Obj:
    return core("ResourceQuota", spec={
        "hard": {"pods": "10", "requests.cpu": "16", f"requests.{GPU}": "8"}, "scopes": ["NotBestEffort"],
    })


def pod_limits(obj: Obj) -> None:
    limit = obj["spec"]["limits"][0]
    limit["type"] = "Pod"
    del limit["maxLimitRequestRatio"]


def ctr(obj: Obj, index: int = 0) -> Obj:
    """The ``index``-th container of a workload's pod template."""
    containers: list[Obj] = obj["spec"]["template"]["spec"]["containers"]
    return containers[index]


def res(obj: Obj, **resources: Any) -> None:
    ctr(obj)["resources"] = resources


def setting(*keys: str | int, value: Any) -> Callable[[Obj], None]:
    """A change that sets the value at ``keys`` (a path of dict keys and list indexes)."""

    def change(obj: Obj) -> None:
        node: Any = obj
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return change


def removing(*keys: str) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        node: Any = obj
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return change


TEMPLATE_SPEC = ("spec", "template", "spec")
DNS_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
GPU = "nvidia.com/gpu"
RES = "spec.template.spec.containers[0].resources"
#: (id, valid manifest, the change that breaks it, field path, kube's message)
CASES: list[tuple[str, Callable[[], Obj], Callable[[Obj], None], str, str]] = [
    ("replicas-negative", deployment, setting("spec", "replicas", value=-2),
     "spec.replicas", "Invalid value: -2: must be greater than or equal to 0"),
    ("selector-missing", deployment, removing("spec", "selector"), "spec.selector", "Required value"),
    ("selector-mismatch", deployment, setting("spec", "selector", "matchLabels", value={"app": "y"}),
     "spec.template.metadata.labels",
     'Invalid value: map[string]string{"app":"x"}: `selector` does not match template `labels`'),
    ("selector-empty", deployment, setting("spec", "selector", value={}),
     "spec.selector",
     "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
     "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"),
    ("selector-bad-operator", deployment,
     setting("spec", "selector", value={"matchExpressions": [{"key": "app", "operator": "Is", "values": ["x"]}]}),
     "spec.selector.matchExpressions[0].operator", 'Invalid value: "Is": not a valid selector operator'),
    ("selector-in-without-values", deployment,
     setting("spec", "selector", value={"matchExpressions": [{"key": "app", "operator": "In"}]}),
     "spec.selector.matchExpressions[0].values",
     "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    ("no-containers", deployment, setting(*TEMPLATE_SPEC, "containers", value=[]),
     "spec.template.spec.containers", "Required value"),
    ("duplicate-container", deployment,
     setting(*TEMPLATE_SPEC, "containers", value=[container(name="a"), container(name="a")]),
     "spec.template.spec.containers[1].name", 'Duplicate value: "a"'),
    ("container-name-invalid", deployment, lambda o: ctr(o).update(name="Main_1"),
     "spec.template.spec.containers[0].name",
     "Invalid value: \"Main_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
     "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
     "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ("image-missing", deployment, lambda o: ctr(o).pop("image"),
     "spec.template.spec.containers[0].image", "Required value"),
    ("gpu-fraction", deployment, lambda o: res(o, limits={GPU: "500m"}),
     f"{RES}.limits[{GPU}]", 'Invalid value: "500m": must be an integer'),
    ("gpu-number-fraction", deployment, lambda o: res(o, limits={GPU: 0.5}),
     f"{RES}.limits[{GPU}]", 'Invalid value: "500m": must be an integer'),
    ("gpu-request-without-limit", deployment, lambda o: res(o, requests={GPU: 1}),
     f"{RES}.limits", "Required value: Limit must be set for non overcommitable resources"),
    ("gpu-request-not-limit", deployment, lambda o: res(o, requests={GPU: 1}, limits={GPU: 2}),
     f"{RES}.requests", 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
    ("cpu-request-over-limit", deployment, lambda o: res(o, requests={"cpu": "2"}, limits={"cpu": "1"}),
     f"{RES}.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ("memory-negative", deployment, lambda o: res(o, requests={"memory": "-1Gi"}),
     f"{RES}.requests[memory]", 'Invalid value: "-1Gi": must be greater than or equal to 0'),
    ("resource-not-standard", deployment, lambda o: res(o, limits={"gpu": 1}),
     f"{RES}.limits[gpu]", 'Invalid value: "gpu": must be a standard resource type or fully qualified'),
    ("port-out-of-range", deployment, lambda o: ctr(o).update(ports=[{"containerPort": 70000}]),
     "spec.template.spec.containers[0].ports[0].containerPort",
     "Invalid value: 70000: must be between 1 and 65535, inclusive"),
    ("port-missing", deployment, lambda o: ctr(o).update(ports=[{"name": "http"}]),
     "spec.template.spec.containers[0].ports[0].containerPort", "Required value"),
    ("port-name-uppercase", deployment, lambda o: ctr(o).update(ports=[{"containerPort": 80, "name": "HTTP"}]),
     "spec.template.spec.containers[0].ports[0].name",
     'Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)'),
    ("port-name-too-long", deployment,
     lambda o: ctr(o).update(ports=[{"containerPort": 80, "name": "a-very-long-port-name"}]),
     "spec.template.spec.containers[0].ports[0].name",
     'Invalid value: "a-very-long-port-name": must be no more than 15 characters'),
    ("port-protocol", deployment, lambda o: ctr(o).update(ports=[{"containerPort": 80, "protocol": "HTTP"}]),
     "spec.template.spec.containers[0].ports[0].protocol",
     'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
    ("port-name-duplicate", deployment,
     lambda o: ctr(o).update(ports=[{"containerPort": 80, "name": "web"}, {"containerPort": 81, "name": "web"}]),
     "spec.template.spec.containers[0].ports[1].name", 'Duplicate value: "web"'),
    ("env-name", deployment, lambda o: ctr(o).update(env=[{"name": "A=B", "value": "1"}]),
     "spec.template.spec.containers[0].env[0].name",
     "Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII "
     "characters other than '='"),
    ("env-two-sources", deployment, lambda o: ctr(o).update(env=[{
        "name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"},
                                   "secretKeyRef": {"name": "s", "key": "k"}}}]),
     "spec.template.spec.containers[0].env[0].valueFrom",
     'Invalid value: "": may not have more than one field specified at a time'),
    ("pull-policy", deployment, lambda o: ctr(o).update(imagePullPolicy="Sometimes"),
     "spec.template.spec.containers[0].imagePullPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"'),
    ("volume-duplicate", deployment, setting(*TEMPLATE_SPEC, "volumes", value=[
        {"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]),
     "spec.template.spec.volumes[1].name", 'Duplicate value: "data"'),
    # A volume with no type is not refused: kube's defaulting makes it an emptyDir.
    ("volume-two-types", deployment,
     setting(*TEMPLATE_SPEC, "volumes", value=[{"name": "data", "emptyDir": {}, "hostPath": {"path": "/d"}}]),
     "spec.template.spec.volumes[0].hostPath", "Forbidden: may not specify more than 1 volume type"),
    ("mount-unknown-volume", deployment, lambda o: ctr(o).update(volumeMounts=[{"name": "data", "mountPath": "/d"}]),
     "spec.template.spec.containers[0].volumeMounts[0].name", 'Not found: "data"'),
    ("deployment-restart-never", deployment, setting(*TEMPLATE_SPEC, "restartPolicy", value="Never"),
     "spec.template.spec.restartPolicy", 'Unsupported value: "Never": supported values: "Always"'),
    ("restart-unknown", deployment, setting(*TEMPLATE_SPEC, "restartPolicy", value="Sometimes"),
     "spec.template.spec.restartPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ("dns-policy", deployment, setting(*TEMPLATE_SPEC, "dnsPolicy", value="Google"),
     "spec.template.spec.dnsPolicy",
     'Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'),
    ("toleration-operator", deployment,
     setting(*TEMPLATE_SPEC, "tolerations", value=[{"key": "gpu", "operator": "Maybe"}]),
     "spec.template.spec.tolerations[0].operator",
     'Unsupported value: "Maybe": supported values: "Equal", "Exists"'),
    ("strategy-type", deployment, setting("spec", "strategy", value={"type": "BlueGreen"}),
     "spec.strategy",
     'Unsupported value: apps.DeploymentStrategy{Type:"BlueGreen", '
     'RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: "Recreate", "RollingUpdate"'),
    ("strategy-percent", deployment,
     setting("spec", "strategy", value={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "120%"}}),
     "spec.strategy.rollingUpdate.maxSurge",
     'Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"120%"}: must not be greater than 100%'),
    ("progress-deadline", deployment, lambda o: o["spec"].update(minReadySeconds=30, progressDeadlineSeconds=10),
     "spec.progressDeadlineSeconds", "Invalid value: 10: must be greater than minReadySeconds"),
    ("statefulset-replicas", lambda: workload("StatefulSet"), setting("spec", "replicas", value=-1),
     "spec.replicas", "Invalid value: -1: must be greater than or equal to 0"),
    ("statefulset-pod-management", lambda: workload("StatefulSet"),
     setting("spec", "podManagementPolicy", value="Random"),
     "spec.podManagementPolicy", "Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"),
    ("job-completions", lambda: workload("Job"), setting("spec", "completions", value=-1),
     "spec.completions", "Invalid value: -1: must be greater than or equal to 0"),
    ("job-parallelism", lambda: workload("Job"), setting("spec", "parallelism", value=-3),
     "spec.parallelism", "Invalid value: -3: must be greater than or equal to 0"),
    ("job-backoff", lambda: workload("Job"), setting("spec", "backoffLimit", value=-1),
     "spec.backoffLimit", "Invalid value: -1: must be greater than or equal to 0"),
    ("job-restart-always", lambda: workload("Job"), removing(*TEMPLATE_SPEC, "restartPolicy"),
     "spec.template.spec.restartPolicy", 'Unsupported value: "Always": supported values: "OnFailure", "Never"'),
    # With parallelism set, kube's defaulting leaves completions unset.
    ("job-indexed-without-completions", lambda: workload("Job"),
     lambda o: o["spec"].update(completionMode="Indexed", parallelism=2),
     "spec.completions", "Required value: when completion mode is Indexed"),
    ("job-gpu-fraction", lambda: workload("Job"),
     lambda o: res(o, requests={GPU: "1.5"}, limits={GPU: "1.5"}),
     f"{RES}.limits[{GPU}]", 'Invalid value: "1500m": must be an integer'),
    ("service-no-ports", service, setting("spec", "ports", value=[]), "spec.ports", "Required value"),
    ("service-port-range", service, setting("spec", "ports", 0, "port", value=0),
     "spec.ports[0].port", "Invalid value: 0: must be between 1 and 65535, inclusive"),
    ("service-unnamed-ports", service, setting("spec", "ports", value=[{"port": 80}, {"port": 81}]),
     "spec.ports[0].name", "Required value"),
    ("service-duplicate-port-name", service,
     setting("spec", "ports", value=[{"port": 80, "name": "web"}, {"port": 81, "name": "web"}]),
     "spec.ports[1].name", 'Duplicate value: "web"'),
    ("service-target-port-name", service, setting("spec", "ports", 0, "targetPort", value="Web_Port"),
     "spec.ports[0].targetPort",
     'Invalid value: "Web_Port": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)'),
    ("service-type", service, setting("spec", "type", value="Internal"),
     "spec.type",
     'Unsupported value: "Internal": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"'),
    ("configmap-key", lambda: core("ConfigMap", data={"ok": "1"}), setting("data", value={"bad key": "1"}),
     "data[bad key]",
     "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
     "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"),
    ("secret-key", lambda: core("Secret", data={"ok": "MQ=="}), setting("data", value={"..": "MQ=="}),
     "data[..]", "Invalid value: \"..\": must not be '..'"),
    ("secret-too-big", lambda: core("Secret", data={"ok": "MQ=="}),
     setting("stringData", value={"blob": "x" * (1024 * 1024 + 1)}),
     "data", "Too long: may not be more than 1048576 bytes"),
    # ValidateConfigMap names the root, ``field.NewPath("")``, which prints ``[]``.
    ("configmap-too-big", lambda: core("ConfigMap", data={"ok": "1"}),
     setting("data", value={"blob": "x" * (1024 * 1024 + 1)}),
     "[]", "Too long: may not be more than 1048576 bytes"),
    ("secret-tls-keys", lambda: core("Secret", type="kubernetes.io/tls", data={"tls.crt": "MQ==", "tls.key": "MQ=="}),
     removing("data", "tls.key"), "data[tls.key]", "Required value"),
    ("pvc-access-modes", claim, setting("spec", "accessModes", value=[]),
     "spec.accessModes", "Required value: at least 1 access mode is required"),
    ("pvc-storage", claim, setting("spec", "resources", "requests", "storage", value="0"),
     "spec.resources[storage]", 'Invalid value: "0": must be greater than zero'),
    ("pdb-both-bounds", budget, setting("spec", "maxUnavailable", value=1), "spec",
     'Invalid value: {"maxUnavailable":1,"minAvailable":1,"selector":{"matchLabels":{"app":"x"}}}: '
     "minAvailable and maxUnavailable cannot be both set"),
    ("pdb-negative", budget, setting("spec", "minAvailable", value=-1), "spec.minAvailable",
     "Invalid value: -1: must be greater than or equal to 0"),
    ("pdb-over-100-percent", budget, setting("spec", "minAvailable", value="120%"), "spec.minAvailable",
     'Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"120%"}: must not be greater than 100%'),
    ("pdb-selector-operator", budget,
     setting("spec", "selector", value={"matchExpressions": [{"key": "app", "operator": "Near"}]}),
     "spec.selector.matchExpressions[0].operator", 'Invalid value: "Near": not a valid selector operator'),
    ("pdb-eviction-policy", budget, setting("spec", "unhealthyPodEvictionPolicy", value="Sometimes"),
     "spec.unhealthyPodEvictionPolicy",
     'Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget"'),
    ("priority-too-high", priority_class, setting("value", value=1_000_000_001), "value",
     "Forbidden: maximum allowed value of a user defined priority is 1000000000"),
    ("priority-preemption", priority_class, setting("preemptionPolicy", value="Always"), "preemptionPolicy",
     'Unsupported value: "Always": supported values: "Never", "PreemptLowerPriority"'),
    ("storageclass-provisioner", storage_class, setting("provisioner", value=""), "provisioner", "Required value"),
    ("storageclass-reclaim", storage_class, setting("reclaimPolicy", value="Recycle"), "reclaimPolicy",
     'Unsupported value: "Recycle": supported values: "Delete", "Retain"'),
    ("storageclass-binding-mode", storage_class, setting("volumeBindingMode", value="Later"), "volumeBindingMode",
     'Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"'),
    ("hpa-min-zero", autoscaler, setting("spec", "minReplicas", value=0), "spec.minReplicas",
     "Invalid value: 0: must be greater than or equal to 1"),
    ("hpa-max-below-min", autoscaler, setting("spec", "minReplicas", value=5), "spec.maxReplicas",
     "Invalid value: 4: must be greater than or equal to `minReplicas`"),
    ("hpa-no-target-name", autoscaler, setting("spec", "scaleTargetRef", "name", value=""),
     "spec.scaleTargetRef.name", "Required value"),
    ("hpa-target-slash", autoscaler, setting("spec", "scaleTargetRef", "name", value="a/b"),
     "spec.scaleTargetRef.name", "Invalid value: \"a/b\": may not contain '/'"),
    ("hpa-metric-type", autoscaler, setting("spec", "metrics", value=[{"type": "Memory"}]), "spec.metrics[0].type",
     'Unsupported value: "Memory": supported values: "Object", "Pods", "Resource", "External", "ContainerResource"'),
    ("hpa-metric-source-of-another-type", autoscaler, setting("spec", "metrics", 0, "type", value="Pods"),
     "spec.metrics[0].pods", "Required value: must populate information for the given metric source (pods)"),
    ("hpa-pods-average-value", autoscaler,
     setting("spec", "metrics", value=[{"type": "Pods", "pods": {"metric": {"name": "qps"},
                                                                 "target": {"type": "Value", "value": "10"}}}]),
     "spec.metrics[0].pods.target.averageValue", "Required value: must specify a positive target averageValue"),
    ("hpa-utilization-zero", autoscaler,
     setting("spec", "metrics", 0, "resource", "target", value={"type": "Utilization", "averageUtilization": 0}),
     "spec.metrics[0].resource.target.averageUtilization", "Invalid value: 0: must be greater than 0"),
    ("hpa-target-type", autoscaler,
     setting("spec", "metrics", 0, "resource", "target", value={"type": "Percent", "averageUtilization": 50}),
     "spec.metrics[0].resource.target.type",
     'Invalid value: "Percent": must be either Utilization, Value, or AverageValue'),
    ("hpa-external-value-and-average", autoscaler,
     setting("spec", "metrics", value=[{"type": "External", "external": {
         "metric": {"name": "queue"}, "target": {"type": "Value", "value": "10", "averageValue": "2"}}}]),
     "spec.metrics[0].external.target.value",
     "Forbidden: may not set both a target value for metric and a per-pod target"),
    ("hpa-stabilization-window", autoscaler,
     setting("spec", "behavior", value={"scaleDown": {"stabilizationWindowSeconds": 4000}}),
     "spec.behavior.scaleDown.stabilizationWindowSeconds", "Invalid value: 4000: must be less than or equal to 3600"),
    ("hpa-select-policy", autoscaler, setting("spec", "behavior", value={"scaleUp": {"selectPolicy": "Average"}}),
     "spec.behavior.scaleUp.selectPolicy", 'Unsupported value: "Average": supported values: "Max", "Min", "Disabled"'),
    ("hpa-policy-period", autoscaler,
     setting("spec", "behavior", value={"scaleUp": {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 3600}]}}),
     "spec.behavior.scaleUp.policies[0].periodSeconds", "Invalid value: 3600: must be less than or equal to 1800"),
    ("hpa-policy-type", autoscaler,
     setting("spec", "behavior", value={"scaleUp": {"policies": [{"type": "Nodes", "value": 4, "periodSeconds": 60}]}}),
     "spec.behavior.scaleUp.policies[0].type", 'Unsupported value: "Nodes": supported values: "Pods", "Percent"'),
    ("ingress-no-rules", ingress, removing("spec", "rules"), "spec",
     "Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"),
    ("ingress-host-ip", ingress, setting("spec", "rules", 0, "host", value="10.0.0.1"), "spec.rules[0].host",
     'Invalid value: "10.0.0.1": must be a DNS name, not an IP address'),
    ("ingress-host-wildcard", ingress, setting("spec", "rules", 0, "host", value="gpu.*.com"), "spec.rules[0].host",
     "Invalid value: \"gpu.*.com\": a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS "
     "subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric "
     "character (e.g. '*.example.com', regex used for validation is "
     "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("ingress-path-relative", ingress, setting("spec", "rules", 0, "http", "paths", 0, "path", value="api"),
     "spec.rules[0].http.paths[0].path", 'Invalid value: "api": must be an absolute path'),
    ("ingress-path-traversal", ingress, setting("spec", "rules", 0, "http", "paths", 0, "path", value="/a/../b"),
     "spec.rules[0].http.paths[0].path", "Invalid value: \"/a/../b\": must not contain '/../'"),
    ("ingress-path-type", ingress, setting("spec", "rules", 0, "http", "paths", 0, "pathType", value="Regex"),
     "spec.rules[0].http.paths[0].pathType",
     'Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", "Prefix"'),
    ("ingress-two-backends", ingress,
     setting("spec", "rules", 0, "http", "paths", 0, "backend", "resource", value={"kind": "Bucket", "name": "b"}),
     "spec.rules[0].http.paths[0].backend", 'Invalid value: "": cannot set both resource and service backends'),
    ("ingress-port-name-and-number", ingress,
     setting("spec", "rules", 0, "http", "paths", 0, "backend", "service", "port", value={"number": 80, "name": "http"}),
     "spec.rules[0].http.paths[0].backend", 'Invalid value: "": cannot set both port name & port number'),
    ("ingress-service-port", ingress,
     setting("spec", "rules", 0, "http", "paths", 0, "backend", "service", "port", value={"number": 70000}),
     "spec.rules[0].http.paths[0].backend.service.port.number",
     "Invalid value: 70000: must be between 1 and 65535, inclusive"),
    ("ingress-tls-host", ingress, setting("spec", "tls", 0, "hosts", 0, value="GPU.example.com"), "spec.tls[0].hosts[0]",
     'Invalid value: "GPU.example.com": ' + DNS_SUBDOMAIN),
    ("ingress-class-annotation", ingress,
     setting("metadata", "annotations", value={"kubernetes.io/ingress.class": "other"}),
     "annotations.kubernetes.io/ingress.class",
     'Invalid value: "other": must match `ingressClassName` when both are specified'),
    ("ingressclass-controller", ingress_class, setting("spec", "controller", value="nginx"), "spec.controller",
     'Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")'),
    ("ingressclass-scope", ingress_class, setting("spec", "parameters", "scope", value="Global"),
     "spec.parameters.scope", 'Unsupported value: "Global": supported values: "Cluster", "Namespace"'),
    ("ingressclass-cluster-namespace", ingress_class, setting("spec", "parameters", "scope", value="Cluster"),
     "spec.parameters.namespace", "Forbidden: `parameters.scope` is set to 'Cluster'"),
    ("netpol-cidr", network_policy, setting("spec", "ingress", 0, "from", 0, "ipBlock", "cidr", value="10.0.0.0"),
     "spec.ingress[0].from[0].ipBlock.cidr",
     'Invalid value: "10.0.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'),
    ("netpol-except-outside", network_policy,
     setting("spec", "ingress", 0, "from", 0, "ipBlock", "except", value=["192.168.0.0/24"]),
     "spec.ingress[0].from[0].ipBlock.except[0]", 'Invalid value: "192.168.0.0/24": must be a strict subset of `cidr`'),
    ("netpol-ipblock-and-selector", network_policy,
     setting("spec", "ingress", 0, "from", 0, "podSelector", value={"matchLabels": {"app": "y"}}),
     "spec.ingress[0].from[0]", "Forbidden: may not specify both ipBlock and another peer"),
    ("netpol-empty-peer", network_policy, setting("spec", "ingress", 0, "from", value=[{}]),
     "spec.ingress[0].from[0]", "Required value: must specify a peer"),
    ("netpol-end-port-below-port", network_policy, setting("spec", "ingress", 0, "ports", 0, "endPort", value=8000),
     "spec.ingress[0].ports[0].endPort", "Invalid value: 8080: must be greater than or equal to `port`"),
    ("netpol-protocol", network_policy, setting("spec", "ingress", 0, "ports", 0, "protocol", value="ICMP"),
     "spec.ingress[0].ports[0].protocol", 'Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"'),
    ("netpol-policy-type", network_policy, setting("spec", "policyTypes", value=["Ingress", "Both"]),
     "spec.policyTypes[1]", 'Unsupported value: "Both": supported values: "Ingress", "Egress"'),
    ("limitrange-type", limit_range, setting("spec", "limits", 0, "type", value="Node"), "spec.limits[0].type",
     'Invalid value: "Node": must be a standard limit type or fully qualified'),
    ("limitrange-min-over-max", limit_range, setting("spec", "limits", 0, "min", "cpu", value="3"),
     "spec.limits[0].min[cpu]", 'Invalid value: "3": min value 3 is greater than max value 2'),
    ("limitrange-request-over-default", limit_range, setting("spec", "limits", 0, "defaultRequest", "cpu", value="1500m"),
     "spec.limits[0].defaultRequest[cpu]",
     'Invalid value: "1500m": default request value 1500m is greater than default limit value 1'),
    ("limitrange-gpu-default-request", limit_range, setting("spec", "limits", 0, "default", GPU, value="2"),
     f"spec.limits[0].defaultRequest[{GPU}]",
     f'Invalid value: "1": default value 2 must equal to defaultRequest value 1 in {GPU}'),
    ("limitrange-ratio-below-one", limit_range, setting("spec", "limits", 0, "maxLimitRequestRatio", "cpu", value="500m"),
     "spec.limits[0].maxLimitRequestRatio[cpu]", 'Invalid value: "500m": ratio 500m is less than 1'),
    ("limitrange-ratio-over-max-min", limit_range, setting("spec", "limits", 0, "maxLimitRequestRatio", "cpu", value="30"),
     "spec.limits[0].maxLimitRequestRatio[cpu]", 'Invalid value: "30": ratio 30 is greater than max/min = 20.000000'),
    ("limitrange-container-resource", limit_range, setting("spec", "limits", 0, "max", "pods", value="1"),
     "spec.limits[0].max[pods]", 'Invalid value: "pods": must be a standard resource for containers'),
    ("limitrange-pod-default", limit_range, pod_limits, "spec.limits[0].default",
     "Forbidden: may not be specified when `type` is 'Pod'"),
    ("quota-resource-name", quota, setting("spec", "hard", "gpu", value="1"), "spec.hard[gpu]",
     'Invalid value: "gpu": must be a standard resource type or fully qualified'),
    ("quota-storage", quota, setting("spec", "hard", "storage", value="1Gi"), "spec.hard[storage]",
     'Invalid value: "storage": must be a standard resource for quota'),
    ("quota-negative", quota, setting("spec", "hard", "pods", value="-1"), "spec.hard[pods]",
     'Invalid value: "-1": must be greater than or equal to 0'),
    ("quota-unknown-scope", quota, setting("spec", "scopes", value=["Weekend"]), "spec.scopes",
     'Invalid value: []core.ResourceQuotaScope{"Weekend"}: unsupported scope'),
    ("quota-scope-for-resource", quota, setting("spec", "scopes", value=["BestEffort"]), "spec.scopes",
     'Invalid value: []core.ResourceQuotaScope{"BestEffort"}: unsupported scope applied to resource'),
    ("quota-conflicting-scopes", quota, setting("spec", "scopes", value=["Terminating", "NotTerminating"]),
     "spec.scopes", 'Invalid value: []core.ResourceQuotaScope{"Terminating", "NotTerminating"}: conflicting scopes'),
    ("quota-selector-values", quota,
     setting("spec", "scopeSelector", value={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}),
     "spec.scopeSelector.matchExpressions.values",
     "Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"),
    ("quota-selector-exists-only", quota,
     setting("spec", "scopeSelector", value={"matchExpressions": [
         {"scopeName": "NotTerminating", "operator": "In", "values": ["x"]}]}),
     "spec.scopeSelector.matchExpressions.operator",
     "Invalid value: \"In\": must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
     "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or "
     "ResourceQuotaScopeCrossNamespacePodAffinity"),
]


async def post(hub: Client, path: str, obj: Obj) -> tuple[int, Obj]:
    """POST ``obj`` as JSON (a stream: aiohttp warns on a megabyte of bytes)."""
    body = io.BytesIO(json.dumps(obj).encode())
    response = await hub.post(path, data=body, headers={"Content-Type": "application/json"})
    status: Obj = await response.json()
    return response.status, status


def cause_list(status: Obj) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c["message"]) for c in status["details"]["causes"]]


@pytest.mark.parametrize(("manifest", "breaking", "field_path", "message"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
async def test_invalid_manifest_is_refused_and_the_valid_one_accepted(
    hub: Client, manifest: Callable[[], Obj], breaking: Callable[[Obj], None], field_path: str, message: str
) -> None:
    valid = manifest()
    broken = copy.deepcopy(valid)
    breaking(broken)
    path = PLURALS[valid["kind"]]
    code, status = await post(hub, path, broken)
    assert code == 422, status
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    assert (field_path, message) in cause_list(status), status
    assert f"{field_path}: {message}" in status["message"]
    assert status["details"]["kind"] == valid["kind"] and status["details"]["name"] == "x"
    code, created = await post(hub, path, valid)
    assert code == 201, created


def test_the_table_covers_forty_manifests() -> None:
    assert len(CASES) >= 40
    assert len({case[0] for case in CASES}) == len(CASES)


def test_causes_are_one_per_field_in_kube_order() -> None:
    """Several problems in one manifest are all reported, each at its own field."""
    broken = deployment()
    broken["spec"]["replicas"] = -2
    del broken["spec"]["selector"]
    res(broken, limits={GPU: "abc"})
    validator = for_kind("apps", "Deployment")
    assert validator is not None
    fields = [e.field for e in validator(broken, None)]
    assert fields == [
        "spec.replicas", "spec.selector", "spec.template.metadata.labels", f"{RES}.limits[{GPU}]",
    ]


def test_a_service_account_is_checked_by_its_metadata_only() -> None:
    """kube's ValidateServiceAccount checks only the metadata (the API server's name check); its
    secrets and image pull secrets are free references."""
    validator = for_kind("", "ServiceAccount")
    assert validator is not None
    account = core("ServiceAccount", secrets=[{"name": "token"}], imagePullSecrets=[{"name": "registry"}])
    assert validator(account, None) == []
    assert validator(account, core("ServiceAccount")) == []


def test_limit_range_bounds_are_all_reported() -> None:
    """A LimitRange whose bounds contradict each other gets one cause per broken comparison."""
    broken = limit_range()
    broken["spec"]["limits"][0]["min"]["cpu"] = "3"
    broken["spec"]["limits"][0]["defaultRequest"]["cpu"] = "2500m"
    validator = for_kind("", "LimitRange")
    assert validator is not None
    causes = [(e.field.removeprefix("spec.limits[0]."), e.message) for e in validator(broken, None)]
    assert causes == [
        ("min[cpu]", 'Invalid value: "3": min value 3 is greater than max value 2'),
        ("defaultRequest[cpu]", 'Invalid value: "2500m": min value 3 is greater than default request value 2500m'),
        ("defaultRequest[cpu]", 'Invalid value: "2500m": default request value 2500m is greater than max value 2'),
        ("defaultRequest[cpu]",
         'Invalid value: "2500m": default request value 2500m is greater than default limit value 1'),
        ("default[cpu]", 'Invalid value: "3": min value 3 is greater than default value 1'),
        ("maxLimitRequestRatio[cpu]", 'Invalid value: "4": ratio 4 is greater than max/min = 0.666667'),
    ]


async def _created(hub: Client, obj: Obj) -> Obj:
    code, body = await post(hub, PLURALS[obj["kind"]], obj)
    assert code == 201, body
    return body


async def _replace(hub: Client, obj: Obj) -> tuple[int, Obj]:
    url = f"{PLURALS[obj['kind']]}/{obj['metadata']['name']}"
    response = await hub.put(url, json=obj)
    body: Obj = await response.json()
    return response.status, body


UPDATES: list[tuple[str, Callable[[], Obj], Callable[[Obj], None], str, str]] = [
    ("deployment-selector", deployment, lambda o: (
        o["spec"]["selector"]["matchLabels"].update(app="y"),
        o["spec"]["template"]["metadata"]["labels"].update(app="y")),
     "spec.selector",
     'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"y"}, '
     "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"),
    ("statefulset-service-name", lambda: workload("StatefulSet", serviceName="a"),
     setting("spec", "serviceName", value="b"),
     "spec",
     "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
     "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"),
    ("job-template", lambda: workload("Job"), lambda o: ctr(o).update(image="trainer:2"),
     "spec.template", "field is immutable"),
    ("job-completions", lambda: workload("Job", completions=2), setting("spec", "completions", value=3),
     "spec.completions", "Invalid value: 3: field is immutable"),
    ("pvc-spec", claim, setting("spec", "accessModes", value=["ReadWriteMany"]),
     "spec",
     "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName "
     "for bound claims"),
    ("secret-type", lambda: core("Secret", type="Opaque", data={"a": "MQ=="}),
     setting("type", value="kubernetes.io/ssh-auth"),
     "type", 'Invalid value: "kubernetes.io/ssh-auth": field is immutable'),
    ("configmap-immutable", lambda: core("ConfigMap", immutable=True, data={"a": "1"}),
     setting("data", value={"a": "2"}),
     "data", "Forbidden: field is immutable when `immutable` is set"),
    ("priorityclass-value", priority_class, setting("value", value=2000),
     "value", "Forbidden: may not be changed in an update."),
    ("storageclass-parameters", storage_class, setting("parameters", value={"type": "hdd"}),
     "parameters", "Forbidden: updates to parameters are forbidden."),
    ("storageclass-binding-mode", storage_class, setting("volumeBindingMode", value="WaitForFirstConsumer"),
     "volumeBindingMode", 'Invalid value: "WaitForFirstConsumer": field is immutable'),
    ("ingressclass-controller", ingress_class, setting("spec", "controller", value="example.com/other"),
     "spec.controller", 'Invalid value: "example.com/other": field is immutable'),
    ("quota-scopes", quota, setting("spec", "scopes", value=["NotTerminating"]),
     "spec.scopes", 'Invalid value: []core.ResourceQuotaScope{"NotTerminating"}: field is immutable'),
]


@pytest.mark.parametrize(("manifest", "changing", "field_path", "message"),
                         [case[1:] for case in UPDATES], ids=[case[0] for case in UPDATES])
async def test_updates_kube_forbids_are_refused(
    hub: Client, manifest: Callable[[], Obj], changing: Callable[[Obj], None], field_path: str, message: str
) -> None:
    stored = await _created(hub, manifest())
    changed = copy.deepcopy(stored)
    changing(changed)
    code, status = await _replace(hub, changed)
    assert code == 422, status
    causes = cause_list(status)
    assert any(f == field_path and m.endswith(message) for f, m in causes), causes


async def test_allowed_updates_pass(hub: Client) -> None:
    """What kube lets change does change: replicas and template of a StatefulSet, a Job's parallelism."""
    stateful = await _created(hub, workload("StatefulSet", serviceName="a"))
    stateful["spec"]["replicas"] = 3
    ctr(stateful)["image"] = "trainer:2"
    code, body = await _replace(hub, stateful)
    assert code == 200, body
    job = await _created(hub, workload("Job", parallelism=1))
    job["spec"]["parallelism"] = 4
    code, body = await _replace(hub, job)
    assert code == 200, body


async def test_system_priority_class_names_are_kubes_own(hub: Client) -> None:
    await _created(hub, priority_class("system-cluster-critical", 2_000_000_000))
    code, status = await post(hub, PLURALS["PriorityClass"], priority_class("system-x"))
    assert code == 422, status
    assert cause_list(status) == [(
        "metadata.name",
        "Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: system-x is not a known system priority class",
    )]


@pytest.fixture
async def hub_kubeconfig(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Path]:
    """The hub's API on a real socket over etcd, and a kubeconfig for it."""
    registry = hub_registry()
    async with EtcdStore([etcd_endpoint], prefix=f"/gpufed-test/kube-validation-{time.monotonic_ns()}") as store:
        objects = ObjectStore(store, registry)
        await objects.bootstrap()
        runner = web.AppRunner(create_app(objects, registry))
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            path = tmp_path / "kubeconfig"
            path.write_text(yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": "hub", "cluster": {"server": url}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "me", "namespace": "default"}}],
                "current-context": "hub",
            }))
            yield path
        finally:
            await runner.cleanup()


@needs_kubectl
async def test_kubectl_apply_of_an_invalid_deployment_prints_kubes_error(hub_kubeconfig: Path) -> None:
    broken = deployment()
    broken["metadata"]["name"] = "bad"
    broken["spec"]["replicas"] = -2
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(broken))
    assert code != 0, out
    assert (
        'The Deployment "bad" is invalid: spec.replicas: Invalid value: -2: must be greater than or equal to 0'
        in err
    ), err
    broken["spec"]["replicas"] = 2
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(broken))
    assert code == 0, err
    assert "deployment.apps/bad created" in out


def replica_set() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "x"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": pod_template()}}


def daemon_set() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod_template()}}


STATUS_PLURALS = {
    **PLURALS,
    "ReplicaSet": "/apis/apps/v1/namespaces/default/replicasets",
    "DaemonSet": "/apis/apps/v1/namespaces/default/daemonsets",
}
DEPLOYED = {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1}
ROLLED = {"replicas": 3, "readyReplicas": 3, "currentReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3}

#: (id, manifest, a status kube accepts, a change of it that kube's status strategy refuses,
#: field path, message).
STATUS_CASES: list[tuple[str, Callable[[], Obj], Obj, Obj, str, str]] = [
    ("deployment-negative", deployment, DEPLOYED, {"replicas": -1, "updatedReplicas": 0, "readyReplicas": 0,
                                                   "availableReplicas": 0},
     "status.replicas", "Invalid value: -1: must be greater than or equal to 0"),
    ("deployment-ready-over-replicas", deployment, DEPLOYED, {"readyReplicas": 4, "availableReplicas": 2},
     "status.readyReplicas", "Invalid value: 4: cannot be greater than status.replicas"),
    ("deployment-available-over-ready", deployment, DEPLOYED, {"availableReplicas": 3},
     "status.availableReplicas", "Invalid value: 3: cannot be greater than readyReplicas"),
    ("deployment-observed-generation", deployment, DEPLOYED, {"observedGeneration": -3},
     "status.observedGeneration", "Invalid value: -3: must be greater than or equal to 0"),
    ("replicaset-fully-labeled", replica_set, {"replicas": 1, "fullyLabeledReplicas": 1},
     {"fullyLabeledReplicas": 2}, "status.fullyLabeledReplicas",
     "Invalid value: 2: cannot be greater than status.replicas"),
    ("statefulset-current-over-replicas", lambda: workload("StatefulSet", serviceName="a"), ROLLED,
     {"currentReplicas": 5}, "status.currentReplicas", "Invalid value: 5: cannot be greater than status.replicas"),
    ("statefulset-available-over-ready", lambda: workload("StatefulSet", serviceName="a"), ROLLED,
     {"readyReplicas": 2}, "status.availableReplicas",
     "Invalid value: 3: cannot be greater than status.readyReplicas"),
    ("daemonset-negative", daemon_set, {"desiredNumberScheduled": 2, "numberReady": 1},
     {"numberReady": -1}, "status.numberReady", "Invalid value: -1: must be greater than or equal to 0"),
    ("job-negative", lambda: workload("Job"), {"active": 1}, {"failed": -2},
     "status.failed", "Invalid value: -2: must be greater than or equal to 0"),
    ("pdb-negative", budget, {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 1},
     {"disruptionsAllowed": -1}, "status.disruptionsAllowed", "Invalid value: -1: must be greater than or equal to 0"),
    # kube's path for desiredReplicas has kept a typo: ``status.desiredReplicasa``.
    ("hpa-negative", autoscaler, {"currentReplicas": 1, "desiredReplicas": 1}, {"desiredReplicas": -1},
     "status.desiredReplicasa", "Invalid value: -1: must be greater than or equal to 0"),
]


async def _write_status(hub: Client, obj: Obj, status: Obj) -> tuple[int, Obj]:
    url = f"{STATUS_PLURALS[obj['kind']]}/{obj['metadata']['name']}/status"
    response = await hub.put(url, json={**obj, "status": status})
    body: Obj = await response.json()
    return response.status, body


@pytest.mark.parametrize(("manifest", "good", "change", "field_path", "message"),
                         [case[1:] for case in STATUS_CASES], ids=[case[0] for case in STATUS_CASES])
async def test_a_status_kube_refuses_is_refused_and_nothing_is_written(
    hub: Client, manifest: Callable[[], Obj], good: Obj, change: Obj, field_path: str, message: str
) -> None:
    """kube's status strategies (ValidateDeploymentStatusUpdate and the like) on a PUT of the
    status subresource: 422 with the cause at its field, the stored status unchanged; the status
    before the change is accepted."""
    obj = manifest()
    code, created = await post(hub, STATUS_PLURALS[obj["kind"]], obj)
    assert code == 201, created
    code, written = await _write_status(hub, created, good)
    assert code == 200, written
    assert {k: written["status"][k] for k in good} == good
    code, status = await _write_status(hub, written, {**good, **change})
    assert code == 422, status
    assert (status["kind"], status["reason"]) == ("Status", "Invalid")
    assert (field_path, message) in cause_list(status), status
    response = await hub.get(f"{STATUS_PLURALS[obj['kind']]}/x")
    stored: Obj = await response.json()
    assert stored["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


async def test_a_collision_count_is_never_decremented(hub: Client) -> None:
    created = await _created(hub, deployment())
    code, written = await _write_status(hub, created, {**DEPLOYED, "collisionCount": 2})
    assert code == 200, written
    for lowered, shown in (({"collisionCount": 1}, 1), ({}, 0)):
        code, status = await _write_status(hub, written, {**DEPLOYED, **lowered})
        assert code == 422, status
        assert ("status.collisionCount", f"Invalid value: {shown}: cannot be decremented") in cause_list(status)
    code, raised = await _write_status(hub, written, {**DEPLOYED, "collisionCount": 3})
    assert code == 200, raised


def test_a_status_stored_before_it_was_validated_can_still_be_written() -> None:
    """As for spec writes, an update is refused only for errors the stored object lacks: the
    status controller can still write a status whose other counts changed."""
    validate = for_status("apps", "Deployment")
    assert validate is not None
    old = {**deployment(), "status": {"replicas": 1, "readyReplicas": 2}}
    assert validate({**old, "status": {"replicas": 1, "readyReplicas": 2, "updatedReplicas": 1}}, old) == []
    assert [e.field for e in validate({**old, "status": {"replicas": -1}}, old)] == [
        "status.replicas", "status.updatedReplicas", "status.readyReplicas", "status.availableReplicas",
    ], "each count is then more than the replicas, as kube reports it"
    assert for_status("", "ConfigMap") is None


@needs_kubectl
async def test_kubectl_patch_of_a_bad_status_prints_kubes_error(hub_kubeconfig: Path) -> None:
    code, out, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(deployment()))
    assert code == 0, err
    patch = json.dumps({"status": {"replicas": 1, "readyReplicas": 2}})
    code, out, err = await kubectl(
        hub_kubeconfig, "patch", "deployment", "x", "--subresource=status", "--type=merge", "-p", patch
    )
    assert code != 0, out
    assert (
        'The Deployment "x" is invalid: status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas'
        in err
    ), err
    patch = json.dumps({"status": {"replicas": 2, "readyReplicas": 2}})
    code, out, err = await kubectl(
        hub_kubeconfig, "patch", "deployment", "x", "--subresource=status", "--type=merge", "-p", patch
    )
    assert code == 0, err


async def test_a_version_not_served_names_the_one_that_is(hub: Client) -> None:
    """A 404 for a resource asked for in another version than the served one says which is served
    (old manifests' batch/v1beta1 and autoscaling/v2beta2); other 404s are kube's."""
    response = await hub.post("/apis/autoscaling/v2beta2/namespaces/default/horizontalpodautoscalers", json={})
    status: Obj = await response.json()
    assert (response.status, status["reason"]) == (404, "NotFound")
    assert status["message"] == (
        "the server could not find the requested resource: autoscaling/v2beta2 horizontalpodautoscalers are not "
        "served; this server serves them as autoscaling/v1, autoscaling/v2"
    )
    response = await hub.get("/apis/batch/v1beta1/namespaces/default/cronjobs")
    assert "this server serves them as batch/v1" in (await response.json())["message"]
    response = await hub.get("/apis/batch/v1/namespaces/default/nothings")
    assert (await response.json())["message"] == "the server could not find the requested resource"


@needs_kubectl
async def test_kubectl_is_told_which_version_to_write(hub_kubeconfig: Path) -> None:
    manifest = {"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "x"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": pod_template(restart="Never")}}}}
    code, out, err = await kubectl(hub_kubeconfig, "create", "--raw", "/apis/batch/v1beta1/namespaces/default/cronjobs",
                                   "-f", "-", stdin=json.dumps(manifest))
    assert code != 0, out
    assert "this server serves them as batch/v1" in err, err


REJECTED = "the server rejected our request due to an error in our request"


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([{"op": "replace", "path": "/spec/nope/x", "value": 1}],
         "replace operation does not apply: doc is missing path: /spec/nope/x: missing value"),
        ([{"op": "replace", "path": "/spec/template/spec/containers/5", "value": {}}],
         "replace operation does not apply: doc is missing key: /spec/template/spec/containers/5: missing value"),
        ([{"op": "add", "path": "/spec/nope/x", "value": 1}],
         'add operation does not apply: doc is missing path: "/spec/nope/x": missing value'),
        ([{"op": "test", "path": "/spec/replicas", "value": 7}], "testing value /spec/replicas failed: test failed"),
        ([{"op": "move", "from": "/spec/nope/x", "path": "/spec/x"}],
         "move operation does not apply: doc is missing from path: /spec/nope/x: missing value"),
        ([{"op": "move", "from": "/spec/nope", "path": "/spec/x"}],
         "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value"),
        ([{"op": "remove", "path": "/spec/template/spec/containers/3"}],
         "error in remove for path: '/spec/template/spec/containers/3': Unable to access invalid index: 3: "
         "invalid index referenced"),
        ([{"op": "frobnicate", "path": "/spec"}], "Unexpected kind: frobnicate"),
        # The first operation applies; the second is the one named.
        ([{"op": "add", "path": "/spec/paused", "value": True}, {"op": "remove", "path": "/spec/gone"}],
         "error in remove for path: '/spec/gone': Unable to remove nonexistent key: gone: missing value"),
    ],
)
async def test_a_json_patch_that_does_not_apply_gets_kubes_422_and_names_the_failing_operation(
    hub: Client, operations: list[Obj], message: str
) -> None:
    """kube's patch handler answers with ``NewGenericServerResponse`` (its message and reason, no
    kind or name); the failing operation, in evanphx/json-patch's words and never the object, is
    the one cause at ``patch``, and nothing is written."""
    assert (await hub.post(PLURALS["Deployment"], json=deployment())).status == 201
    response = await hub.patch(
        f"{PLURALS['Deployment']}/x", json=operations, headers={"Content-Type": "application/json-patch+json"}
    )
    assert response.status == 422
    assert await response.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": REJECTED, "reason": "Invalid", "details": {"causes": [{"message": message, "field": "patch"}]},
        "code": 422,
    }
    stored = await (await hub.get(f"{PLURALS['Deployment']}/x")).json()
    assert "paused" not in stored["spec"]


@pytest.mark.parametrize(
    ("content_type", "body", "query", "message"),
    [
        ("application/json-patch+json", {"op": "add"}, "",
         "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"),
        ("application/json-patch+json", {"op": "add"}, "?fieldValidation=Ignore",
         "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("application/json-patch+json", [1], "",
         "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp"),
        ("application/merge-patch+json", [1], "",
         "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"),
        ("application/strategic-merge-patch+json", "x", "",
         "json: cannot unmarshal string into Go value of type map[string]interface {}"),
    ],
)
async def test_a_patch_body_of_the_wrong_json_type_gets_gos_words(
    hub: Client, content_type: str, body: Any, query: str, message: str
) -> None:
    assert (await hub.post(PLURALS["Deployment"], json=deployment())).status == 201
    response = await hub.patch(f"{PLURALS['Deployment']}/x{query}", json=body, headers={"Content-Type": content_type})
    assert response.status == 400
    assert (await response.json())["message"] == message


@needs_kubectl
async def test_kubectl_patch_of_a_failing_test_operation_says_which_failed(hub_kubeconfig: Path) -> None:
    code, _, err = await kubectl(hub_kubeconfig, "apply", "-f", "-", stdin=json.dumps(deployment()))
    assert code == 0, err
    test = '[{"op":"test","path":"/spec/replicas","value":5},{"op":"replace","path":"/spec/replicas","value":3}]'
    code, out, err = await kubectl(hub_kubeconfig, "patch", "deployment", "x", "--type", "json", "-p", test)
    assert code != 0, out
    # kubectl prints an Invalid error's causes in place of its message: the operation that failed
    assert err.strip() == "The request is invalid: patch: testing value /spec/replicas failed: test failed", err
