"""Field tables of ``k8s.io/api/core/v1`` (generated.proto): the kinds and the pod template.

Top-level kinds: Namespace, ConfigMap, Secret, ServiceAccount, Service. The pod
template (PodTemplateSpec, PodSpec, Container and what a container holds: ports, env,
envFrom, resources, volume mounts) is shared with Deployment and Job. Parts the hub
does not decode from protobuf (volumes, probes, affinity, security contexts, ...) are
listed as unsupported so that a body carrying them is refused, never silently thinned.
"""

from __future__ import annotations

from controlplane.apiserver.protobuf.meta_v1 import OBJECT_META
from controlplane.apiserver.protobuf.schema import (
    Message,
    boolean,
    bytes_map,
    int32,
    int64,
    int_or_string,
    nested,
    quantity,
    quantity_map,
    string,
    string_map,
    unsupported,
)

LOCAL_OBJECT_REFERENCE = Message("LocalObjectReference", {1: string("name")})

OBJECT_REFERENCE = Message(
    "ObjectReference",
    {
        1: string("kind"),
        2: string("namespace"),
        3: string("name"),
        4: string("uid"),
        5: string("apiVersion"),
        6: string("resourceVersion"),
        7: string("fieldPath"),
    },
)

# --- containers -------------------------------------------------------------------------

OBJECT_FIELD_SELECTOR = Message("ObjectFieldSelector", {1: string("apiVersion"), 2: string("fieldPath")})

RESOURCE_FIELD_SELECTOR = Message(
    "ResourceFieldSelector",
    {1: string("containerName"), 2: string("resource"), 3: quantity("divisor")},
)

CONFIG_MAP_KEY_SELECTOR = Message(
    "ConfigMapKeySelector",
    {
        1: nested("localObjectReference", LOCAL_OBJECT_REFERENCE, inline=True),
        2: string("key"),
        3: boolean("optional", pointer=True),
    },
)

SECRET_KEY_SELECTOR = Message(
    "SecretKeySelector",
    {
        1: nested("localObjectReference", LOCAL_OBJECT_REFERENCE, inline=True),
        2: string("key"),
        3: boolean("optional", pointer=True),
    },
)

ENV_VAR_SOURCE = Message(
    "EnvVarSource",
    {
        1: nested("fieldRef", OBJECT_FIELD_SELECTOR, pointer=True),
        2: nested("resourceFieldRef", RESOURCE_FIELD_SELECTOR, pointer=True),
        3: nested("configMapKeyRef", CONFIG_MAP_KEY_SELECTOR, pointer=True),
        4: nested("secretKeyRef", SECRET_KEY_SELECTOR, pointer=True),
        5: unsupported("fileKeyRef", pointer=True),
    },
)

ENV_VAR = Message(
    "EnvVar",
    {1: string("name"), 2: string("value"), 3: nested("valueFrom", ENV_VAR_SOURCE, pointer=True)},
)

CONFIG_MAP_ENV_SOURCE = Message(
    "ConfigMapEnvSource",
    {
        1: nested("localObjectReference", LOCAL_OBJECT_REFERENCE, inline=True),
        2: boolean("optional", pointer=True),
    },
)

SECRET_ENV_SOURCE = Message(
    "SecretEnvSource",
    {
        1: nested("localObjectReference", LOCAL_OBJECT_REFERENCE, inline=True),
        2: boolean("optional", pointer=True),
    },
)

ENV_FROM_SOURCE = Message(
    "EnvFromSource",
    {
        1: string("prefix"),
        2: nested("configMapRef", CONFIG_MAP_ENV_SOURCE, pointer=True),
        3: nested("secretRef", SECRET_ENV_SOURCE, pointer=True),
    },
)

CONTAINER_PORT = Message(
    "ContainerPort",
    {
        1: string("name"),
        2: int32("hostPort"),
        3: int32("containerPort"),
        4: string("protocol"),
        5: string("hostIP"),
    },
)

RESOURCE_CLAIM = Message("ResourceClaim", {1: string("name"), 2: string("request")})

RESOURCE_REQUIREMENTS = Message(
    "ResourceRequirements",
    {
        1: quantity_map("limits"),
        2: quantity_map("requests"),
        3: nested("claims", RESOURCE_CLAIM, repeated=True),
    },
)

VOLUME_MOUNT = Message(
    "VolumeMount",
    {
        1: string("name"),
        2: boolean("readOnly"),
        7: string("recursiveReadOnly", pointer=True),
        3: string("mountPath"),
        4: string("subPath"),
        5: string("mountPropagation", pointer=True),
        6: string("subPathExpr"),
    },
)

VOLUME_DEVICE = Message("VolumeDevice", {1: string("name"), 2: string("devicePath")})

CONTAINER_RESIZE_POLICY = Message(
    "ContainerResizePolicy", {1: string("resourceName"), 2: string("restartPolicy")}
)

CONTAINER = Message(
    "Container",
    {
        1: string("name"),
        2: string("image"),
        3: string("command", repeated=True),
        4: string("args", repeated=True),
        5: string("workingDir"),
        6: nested("ports", CONTAINER_PORT, repeated=True),
        19: nested("envFrom", ENV_FROM_SOURCE, repeated=True),
        7: nested("env", ENV_VAR, repeated=True),
        8: nested("resources", RESOURCE_REQUIREMENTS),
        23: nested("resizePolicy", CONTAINER_RESIZE_POLICY, repeated=True),
        24: string("restartPolicy", pointer=True),
        25: unsupported("restartPolicyRules", repeated=True),
        9: nested("volumeMounts", VOLUME_MOUNT, repeated=True),
        21: nested("volumeDevices", VOLUME_DEVICE, repeated=True),
        10: unsupported("livenessProbe", pointer=True),
        11: unsupported("readinessProbe", pointer=True),
        22: unsupported("startupProbe", pointer=True),
        12: unsupported("lifecycle", pointer=True),
        13: string("terminationMessagePath"),
        20: string("terminationMessagePolicy"),
        14: string("imagePullPolicy"),
        15: unsupported("securityContext", pointer=True),
        16: boolean("stdin"),
        17: boolean("stdinOnce"),
        18: boolean("tty"),
    },
)

# --- pods -------------------------------------------------------------------------------

TOLERATION = Message(
    "Toleration",
    {
        1: string("key"),
        2: string("operator"),
        3: string("value"),
        4: string("effect"),
        5: int64("tolerationSeconds", pointer=True),
    },
)

POD_SPEC = Message(
    "PodSpec",
    {
        1: unsupported("volumes", repeated=True),
        20: nested("initContainers", CONTAINER, repeated=True),
        2: nested("containers", CONTAINER, repeated=True),
        34: unsupported("ephemeralContainers", repeated=True),
        3: string("restartPolicy"),
        4: int64("terminationGracePeriodSeconds", pointer=True),
        5: int64("activeDeadlineSeconds", pointer=True),
        6: string("dnsPolicy"),
        7: string_map("nodeSelector"),
        8: string("serviceAccountName"),
        9: string("serviceAccount"),
        21: boolean("automountServiceAccountToken", pointer=True),
        10: string("nodeName"),
        11: boolean("hostNetwork"),
        12: boolean("hostPID"),
        13: boolean("hostIPC"),
        27: boolean("shareProcessNamespace", pointer=True),
        14: unsupported("securityContext", pointer=True),
        15: nested("imagePullSecrets", LOCAL_OBJECT_REFERENCE, repeated=True),
        16: string("hostname"),
        17: string("subdomain"),
        18: unsupported("affinity", pointer=True),
        19: string("schedulerName"),
        22: nested("tolerations", TOLERATION, repeated=True),
        23: unsupported("hostAliases", repeated=True),
        24: string("priorityClassName"),
        25: int32("priority", pointer=True),
        26: unsupported("dnsConfig", pointer=True),
        28: unsupported("readinessGates", repeated=True),
        29: string("runtimeClassName", pointer=True),
        30: boolean("enableServiceLinks", pointer=True),
        31: string("preemptionPolicy", pointer=True),
        32: quantity_map("overhead"),
        33: unsupported("topologySpreadConstraints", repeated=True),
        35: boolean("setHostnameAsFQDN", pointer=True),
        36: unsupported("os", pointer=True),
        37: boolean("hostUsers", pointer=True),
        38: unsupported("schedulingGates", repeated=True),
        39: unsupported("resourceClaims", repeated=True),
        40: nested("resources", RESOURCE_REQUIREMENTS, pointer=True),
        41: string("hostnameOverride", pointer=True),
        42: unsupported("workloadRef", pointer=True),
    },
)

POD_TEMPLATE_SPEC = Message("PodTemplateSpec", {1: nested("metadata", OBJECT_META), 2: nested("spec", POD_SPEC)})

# --- kinds ------------------------------------------------------------------------------

NAMESPACE = Message(
    "Namespace",
    {
        1: nested("metadata", OBJECT_META),
        2: nested("spec", Message("NamespaceSpec", {1: string("finalizers", repeated=True)})),
        3: nested(
            "status",
            Message("NamespaceStatus", {1: string("phase"), 2: unsupported("conditions", repeated=True)}),
        ),
    },
)

CONFIG_MAP = Message(
    "ConfigMap",
    {
        1: nested("metadata", OBJECT_META),
        4: boolean("immutable", pointer=True),
        2: string_map("data"),
        3: bytes_map("binaryData"),
    },
)

SECRET = Message(
    "Secret",
    {
        1: nested("metadata", OBJECT_META),
        5: boolean("immutable", pointer=True),
        2: bytes_map("data"),
        4: string_map("stringData"),
        3: string("type"),
    },
)

SERVICE_ACCOUNT = Message(
    "ServiceAccount",
    {
        1: nested("metadata", OBJECT_META),
        2: nested("secrets", OBJECT_REFERENCE, repeated=True),
        3: nested("imagePullSecrets", LOCAL_OBJECT_REFERENCE, repeated=True),
        4: boolean("automountServiceAccountToken", pointer=True),
    },
)

SERVICE_PORT = Message(
    "ServicePort",
    {
        1: string("name"),
        2: string("protocol"),
        6: string("appProtocol", pointer=True),
        3: int32("port"),
        4: int_or_string("targetPort"),
        5: int32("nodePort"),
    },
)

SESSION_AFFINITY_CONFIG = Message(
    "SessionAffinityConfig",
    {1: nested("clientIP", Message("ClientIPConfig", {1: int32("timeoutSeconds", pointer=True)}), pointer=True)},
)

SERVICE_SPEC = Message(
    "ServiceSpec",
    {
        1: nested("ports", SERVICE_PORT, repeated=True),
        2: string_map("selector"),
        3: string("clusterIP"),
        18: string("clusterIPs", repeated=True),
        4: string("type"),
        5: string("externalIPs", repeated=True),
        7: string("sessionAffinity"),
        8: string("loadBalancerIP"),
        9: string("loadBalancerSourceRanges", repeated=True),
        10: string("externalName"),
        11: string("externalTrafficPolicy"),
        12: int32("healthCheckNodePort"),
        13: boolean("publishNotReadyAddresses"),
        14: nested("sessionAffinityConfig", SESSION_AFFINITY_CONFIG, pointer=True),
        19: string("ipFamilies", repeated=True),
        17: string("ipFamilyPolicy", pointer=True),
        20: boolean("allocateLoadBalancerNodePorts", pointer=True),
        21: string("loadBalancerClass", pointer=True),
        22: string("internalTrafficPolicy", pointer=True),
        23: string("trafficDistribution", pointer=True),
    },
)

SERVICE_STATUS = Message(
    "ServiceStatus",
    {
        1: nested("loadBalancer", Message("LoadBalancerStatus", {1: unsupported("ingress", repeated=True)})),
        2: unsupported("conditions", repeated=True),
    },
)

SERVICE = Message(
    "Service",
    {1: nested("metadata", OBJECT_META), 2: nested("spec", SERVICE_SPEC), 3: nested("status", SERVICE_STATUS)},
)
