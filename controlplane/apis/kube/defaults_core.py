"""kube's defaulting of core/v1 kinds and of every pod spec (``pkg/apis/core/v1/defaults.go``).

``pod_template_spec`` is what kube applies to the pod template of every workload kind
(``SetDefaults_PodSpec``, containers, volumes, probes, quantities); ``pod`` adds what only a
Pod gets (``SetDefaults_Pod``: requests from limits, ``enableServiceLinks``, host-network
ports). Status shapes a new object is returned with (``status: {}`` and friends) come from
kube's strategies and its JSON encoding of non-pointer structs.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Any

from controlplane.apis.kube.objects import (
    child,
    ensure,
    items,
    quantity,
    resource_list,
    resource_requirements,
    set_default,
)
from controlplane.apis.quantity import QuantityError, add_quantities, parse_quantity

# --- container images (k8s.io/kubernetes/pkg/util/parsers.ParseImageName) ---------------

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)


def image_tag(image: Any) -> str:
    """The tag kube reads from an image reference: the explicit one, ``latest`` when there is
    neither tag nor digest, and ``""`` for a digest-only or unparseable reference."""
    if not isinstance(image, str) or len(image) > _MAX_REFERENCE:
        return ""
    return _image_tag(image)


#: Longer than any valid reference (a 255-character name, a 128-character tag and a digest):
#: refused before the regular expression sees it.
_MAX_REFERENCE = 1024


@functools.lru_cache(maxsize=1024)  # pods of one workload share their images: parsed once
def _image_tag(image: str) -> str:
    match = _REFERENCE.match(image)
    if match is None:
        return ""
    domain = match.group("domain")
    if len(match.group("path")) + (len(domain) + 1 if domain else 0) > 255:  # docker's NameTotalLengthMax
        return ""
    tag, digest = match.group("tag"), match.group("digest")
    if not tag and not digest:
        return "latest"
    return tag or ""


# --- containers and pod specs ------------------------------------------------------------


def _http_get(handler: dict[str, Any] | None) -> None:
    action = child(handler, "httpGet")
    if action is not None:
        set_default(action, "path", "/")
        set_default(action, "scheme", "HTTP")


def _probe(probe: dict[str, Any] | None) -> None:
    if probe is None:
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        if probe.get(key) in (None, 0):
            probe[key] = value
    _http_get(probe)
    grpc = child(probe, "grpc")
    if grpc is not None and grpc.get("service") is None:
        grpc["service"] = ""  # GRPCAction.Service: +default=""


def container(spec: dict[str, Any]) -> None:
    """``SetDefaults_Container`` and the generated defaults of a container's parts."""
    if spec.get("imagePullPolicy") in (None, ""):
        spec["imagePullPolicy"] = "Always" if image_tag(spec.get("image")) == "latest" else "IfNotPresent"
    set_default(spec, "terminationMessagePath", "/dev/termination-log")
    set_default(spec, "terminationMessagePolicy", "File")
    for port in items(spec, "ports"):
        set_default(port, "protocol", "TCP")
    for env in items(spec, "env"):
        field_ref = child(child(env, "valueFrom"), "fieldRef")
        if field_ref is not None:
            set_default(field_ref, "apiVersion", "v1")
    # ResourceRequirements is a struct, not a pointer: kube always writes it.
    ensure(spec, "resources")
    resource_requirements(spec)
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(child(spec, key))
    lifecycle = child(spec, "lifecycle")
    for key in ("postStart", "preStop"):
        _http_get(child(lifecycle, key))


def _downward_items(source: dict[str, Any] | None) -> None:
    for item in items(source, "items"):
        field_ref = child(item, "fieldRef")
        if field_ref is not None:
            set_default(field_ref, "apiVersion", "v1")


def pvc_spec(spec: dict[str, Any] | None) -> None:
    """``SetDefaults_PersistentVolumeClaimSpec`` and its quantities."""
    if spec is None:
        return
    set_default(spec, "volumeMode", "Filesystem")
    resource_requirements(spec)


_VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
    "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)


def volume(spec: dict[str, Any]) -> None:
    """``SetDefaults_Volume`` and the defaults of each volume source."""
    if not any(spec.get(source) is not None for source in _VOLUME_SOURCES):
        spec["emptyDir"] = {}
    host_path = child(spec, "hostPath")
    if host_path is not None and host_path.get("type") is None:
        host_path["type"] = ""
    for source in ("secret", "configMap", "downwardAPI", "projected"):
        value = child(spec, source)
        if value is not None and value.get("defaultMode") is None:
            value["defaultMode"] = 0o644
    _downward_items(child(spec, "downwardAPI"))
    for projection in items(child(spec, "projected"), "sources"):
        _downward_items(child(projection, "downwardAPI"))
        token = child(projection, "serviceAccountToken")
        if token is not None and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
    quantity(child(spec, "emptyDir"), "sizeLimit")
    pvc_spec(child(child(child(spec, "ephemeral"), "volumeClaimTemplate"), "spec"))
    iscsi = child(spec, "iscsi")
    if iscsi is not None:
        set_default(iscsi, "iscsiInterface", "default")
    rbd = child(spec, "rbd")
    if rbd is not None:
        set_default(rbd, "pool", "rbd")
        set_default(rbd, "user", "admin")
        set_default(rbd, "keyring", "/etc/ceph/keyring")


def pod_spec(spec: dict[str, Any] | None) -> None:
    """``SetDefaults_PodSpec`` and everything generated under a PodSpec."""
    if spec is None:
        return
    set_default(spec, "dnsPolicy", "ClusterFirst")
    set_default(spec, "restartPolicy", "Always")
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    set_default(spec, "schedulerName", "default-scheduler")
    for item in items(spec, "volumes"):
        volume(item)
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for item in items(spec, key):
            container(item)
    resource_list(spec, "overhead")
    resource_requirements(spec)


def pod_template_spec(template: dict[str, Any] | None) -> None:
    """The defaults kube gives the pod template of a workload (no Pod-only defaults)."""
    pod_spec(child(template, "spec"))


# --- Pod ---------------------------------------------------------------------------------

_QOS_RESOURCES = ("cpu", "memory")


def _amount(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value) if isinstance(value, str | int | float) else None
    except QuantityError:
        return None


def qos_class(spec: dict[str, Any]) -> str:
    """The pod's QoS class (``pkg/apis/core/helper/qos.GetPodQOS``), after requests are defaulted."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    pod_level = child(spec, "resources")
    if pod_level is not None and (child(pod_level, "requests") or child(pod_level, "limits")):
        sources = [pod_level]
    else:
        sources = [child(c, "resources") or {} for key in ("containers", "initContainers") for c in items(spec, key)]
    for resources in sources:
        for name, value in (child(resources, "requests") or {}).items():
            amount = _amount(value)
            if name in _QOS_RESOURCES and amount is not None and amount > 0:
                requests[name] = add_quantities(requests.get(name, Decimal(0)), amount)
        found = set()
        for name, value in (child(resources, "limits") or {}).items():
            amount = _amount(value)
            if name in _QOS_RESOURCES and amount is not None and amount > 0:
                found.add(name)
                limits[name] = add_quantities(limits.get(name, Decimal(0)), amount)
        if not found.issuperset(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    matched = all(limits.get(name) == amount for name, amount in requests.items())
    if guaranteed and matched and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def pod(obj: dict[str, Any]) -> None:
    """``SetObjectDefaults_Pod``, and a new pod's status as kube's strategy writes it
    (``phase: Pending`` and its QoS class)."""
    spec = _pod_defaults(obj)
    status = ensure(obj, "status")
    if spec is not None and status is not None and not status:
        status["phase"] = "Pending"
        status["qosClass"] = qos_class(spec)


def pod_on_read(obj: dict[str, Any]) -> None:
    """``SetObjectDefaults_Pod``."""
    _pod_defaults(obj)


def _pod_defaults(obj: dict[str, Any]) -> dict[str, Any] | None:
    """``SetObjectDefaults_Pod``; returns the pod's spec (None when malformed)."""
    spec = ensure(obj, "spec")
    if spec is None:
        return None
    for key in ("containers", "initContainers"):
        for item in items(spec, key):
            resources = child(item, "resources")
            limits = child(resources, "limits")
            if resources is None or limits is None:
                continue
            requests = ensure(resources, "requests")
            if requests is not None:
                for name, value in limits.items():
                    requests.setdefault(name, value)
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    if spec.get("hostNetwork") is True:
        for key in ("containers", "initContainers"):
            for item in items(spec, key):
                for port in items(item, "ports"):
                    if port.get("hostPort") in (None, 0):
                        port["hostPort"] = port.get("containerPort")
    pod_spec(spec)
    return spec


# --- other core kinds --------------------------------------------------------------------


def service(obj: dict[str, Any]) -> None:
    """``SetDefaults_Service``; a new Service's status is ``{loadBalancer: {}}``."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    set_default(spec, "sessionAffinity", "None")
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = child(child(spec, "sessionAffinityConfig"), "clientIP")
        if client_ip is None or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    set_default(spec, "type", "ClusterIP")
    for port in items(spec, "ports"):
        set_default(port, "protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    service_type = spec["type"]
    external = service_type in ("NodePort", "LoadBalancer") or (
        service_type == "ClusterIP" and bool(spec.get("externalIPs"))
    )
    if external:
        set_default(spec, "externalTrafficPolicy", "Cluster")
    if spec.get("internalTrafficPolicy") is None and service_type in ("NodePort", "LoadBalancer", "ClusterIP"):
        spec["internalTrafficPolicy"] = "Cluster"
    if service_type == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True
    status = ensure(obj, "status")
    if status is not None:
        ensure(status, "loadBalancer")
        if service_type == "LoadBalancer":
            for ingress in items(child(status, "loadBalancer"), "ingress"):
                if ingress.get("ip") and ingress.get("ipMode") is None:
                    ingress["ipMode"] = "VIP"


def persistent_volume_claim(obj: dict[str, Any]) -> None:
    """``SetObjectDefaults_PersistentVolumeClaim``: volumeMode, quantities, ``status.phase: Pending``."""
    pvc_spec(ensure(obj, "spec"))
    status = ensure(obj, "status")
    if status is not None:
        set_default(status, "phase", "Pending")
        resource_list(status, "capacity")
        resource_list(status, "allocatedResources")


def persistent_volume(obj: dict[str, Any]) -> None:
    spec = ensure(obj, "spec")
    if spec is not None:
        set_default(spec, "persistentVolumeReclaimPolicy", "Retain")
        set_default(spec, "volumeMode", "Filesystem")
        resource_list(spec, "capacity")
        host_path = child(spec, "hostPath")
        if host_path is not None and host_path.get("type") is None:
            host_path["type"] = ""
    status = ensure(obj, "status")
    if status is not None:
        set_default(status, "phase", "Pending")


def secret(obj: dict[str, Any]) -> None:
    set_default(obj, "type", "Opaque")


def namespace(obj: dict[str, Any]) -> None:
    """``SetDefaults_Namespace``: the ``kubernetes.io/metadata.name`` label; phase Active."""
    meta = child(obj, "metadata")
    name = meta.get("name") if meta is not None else None
    if meta is not None and isinstance(name, str) and name:
        labels = ensure(meta, "labels")
        if labels is not None:
            labels["kubernetes.io/metadata.name"] = name
    status = ensure(obj, "status")
    if status is not None:
        set_default(status, "phase", "Active")


def node(obj: dict[str, Any]) -> None:
    """``SetDefaults_NodeStatus``: allocatable defaults to capacity; both canonical."""
    status = child(obj, "status")
    if status is None:
        return
    if status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])
    resource_list(status, "capacity")
    resource_list(status, "allocatable")


def limit_range(obj: dict[str, Any]) -> None:
    """``SetDefaults_LimitRangeItem``: container defaults from max and min; quantities canonical."""
    for item in items(child(obj, "spec"), "limits"):
        keys = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
        if item.get("type") == "Container":
            default, default_request = ensure(item, "default"), ensure(item, "defaultRequest")
            if default is not None and default_request is not None:
                for name, value in (child(item, "max") or {}).items():
                    default.setdefault(name, value)
                for name, value in default.items():
                    default_request.setdefault(name, value)
                for name, value in (child(item, "min") or {}).items():
                    default_request.setdefault(name, value)
            for key in ("default", "defaultRequest"):
                if item.get(key) == {}:
                    del item[key]  # empty maps are omitted, as kube's JSON does
        for key in keys:
            resource_list(item, key)


def resource_quota(obj: dict[str, Any]) -> None:
    resource_list(child(obj, "spec"), "hard")
    status = child(obj, "status")
    resource_list(status, "hard")
    resource_list(status, "used")


def pod_template(obj: dict[str, Any]) -> None:
    pod_template_spec(child(obj, "template"))


def replication_controller(obj: dict[str, Any]) -> None:
    """``SetDefaults_ReplicationController``: selector and labels from the template; replicas 1."""
    spec = ensure(obj, "spec")
    if spec is None:
        return
    template = child(spec, "template")
    labels = child(child(template, "metadata"), "labels")
    if labels is not None:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = ensure(obj, "metadata")
        if meta is not None and not meta.get("labels"):
            meta["labels"] = dict(labels)
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    pod_template_spec(template)
    status = ensure(obj, "status")
    if status is not None:
        status.setdefault("replicas", 0)


def priority_class(obj: dict[str, Any]) -> None:
    """scheduling/v1 ``SetDefaults_PriorityClass``."""
    if obj.get("preemptionPolicy") is None:
        obj["preemptionPolicy"] = "PreemptLowerPriority"
