"""kube's validation of a pod spec and a pod template (pkg/apis/core/validation).

``pod_template_errors`` is what every workload kind runs on ``spec.template``
(``ValidatePodTemplateSpec``); ``pod_spec_errors`` is ``ValidatePodSpec``: volumes,
containers and init containers (names, images, ports, env, mounts, resources, pull
policy), restart and DNS policy, node selector, tolerations and the deadline.

Fields kube's defaulting fills (``restartPolicy``, ``dnsPolicy``, a port's ``protocol``,
``imagePullPolicy``, ``terminationMessagePolicy``) are read as their default when absent or empty:
validation runs after defaulting in kube, and an absent field here is one kube would have
filled.
"""

from __future__ import annotations

from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import (
    dns_label_errors,
    dns_subdomain_errors,
    env_var_name_errors,
    inclusive_range_error,
    label_value_errors,
    port_name_errors,
    port_number_errors,
    qualified_name_errors,
)
from controlplane.apis.kube.validate_resources import requirements_errors

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_INT32 = 2**31 - 1
#: kube's ``TotalAnnotationSizeLimitB``: the most bytes an object's annotations (keys and values) hold.
MAX_ANNOTATIONS_BYTES = 256 * 1024

#: Every member of ``VolumeSource``, in the order kube's validateVolumeSource checks them: a volume
#: names exactly one, and each after the first is "forbidden".
VOLUME_TYPES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs", "iscsi",
    "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte", "downwardAPI", "fc",
    "flexVolume", "configMap", "azureFile", "vsphereVolume", "photonPersistentDisk", "portworxVolume",
    "azureDisk", "storageos", "projected", "scaleIO", "csi", "ephemeral", "image",
)
#: The field kube names in "may not specify more than 1 volume type" where it differs from the key.
_FORBIDDEN_FIELD = {"cephfs": "cephFS", "downwardAPI": "downwarAPI"}
#: The field of a volume source that names what it mounts, and must be set.
_VOLUME_REQUIRED = {
    "persistentVolumeClaim": "claimName",
    "secret": "secretName",
    "configMap": "name",
    "hostPath": "path",
}


def labels_errors(labels: Any, path: str) -> list[FieldError]:
    """``ValidateLabels``: qualified-name keys and label values, reported at the map's path."""
    errors: list[FieldError] = []
    for key, value in field.mapping(labels).items():
        errors += [field.invalid(path, key, msg) for msg in qualified_name_errors(key)]
        if not isinstance(value, str):
            errors.append(field.invalid(f"{path}[{key}]", value, "must be a string"))
            continue
        errors += [field.invalid(path, value, msg) for msg in label_value_errors(value)]
    return errors


def annotations_errors(annotations: Any, path: str) -> list[FieldError]:
    """``ValidateAnnotations``: keys qualified names whatever their case, and at most
    :data:`MAX_ANNOTATIONS_BYTES` (Go's ``len``: bytes) in all, reported at the map's path."""
    values = field.mapping(annotations)
    errors = [field.invalid(path, key, msg) for key in values for msg in qualified_name_errors(key.lower())]
    if sum(len(key.encode()) + len(str(value).encode()) for key, value in values.items()) > MAX_ANNOTATIONS_BYTES:
        errors.append(field.too_long(path, MAX_ANNOTATIONS_BYTES))
    return errors


def _name_errors(name: Any, path: str) -> list[FieldError]:
    """A required DNS-1123 label (container and volume names)."""
    if not name:
        return [field.required(path)]
    if not isinstance(name, str):
        return [field.invalid(path, name, "must be a string")]
    return [field.invalid(path, name, msg) for msg in dns_label_errors(name)]


def defaulted_enum_errors(value: Any, path: str, supported: tuple[str, ...]) -> list[FieldError]:
    """An enum field kube defaults: unset or empty is its default, anything else one of ``supported``."""
    if value is None or value == "" or value in supported:
        return []
    return [field.not_supported(path, value, supported)]


def volumes_errors(volumes: Any, path: str) -> tuple[set[str], list[FieldError]]:
    """``ValidateVolumes``: the valid volume names, and the errors."""
    errors: list[FieldError] = []
    names: set[str] = set()
    for index_path, volume in field.indexed(volumes, path):
        name = volume.get("name")
        found: list[FieldError] = []
        types = [t for t in VOLUME_TYPES if volume.get(t) is not None]
        if not types:
            found.append(field.required(index_path, "must specify a volume type"))
        found += [
            field.forbidden(f"{index_path}.{_FORBIDDEN_FIELD.get(t, t)}", "may not specify more than 1 volume type")
            for t in types[1:]
        ]
        for kind in types[:1]:
            needed = _VOLUME_REQUIRED.get(kind)
            if needed and not field.mapping(volume.get(kind)).get(needed):
                found.append(field.required(f"{index_path}.{kind}.{needed}"))
        found += _name_errors(name, f"{index_path}.name")
        if isinstance(name, str) and name in names:
            found.append(field.duplicate(f"{index_path}.name", name))
        if found:
            errors += found
        elif isinstance(name, str):
            names.add(name)
    return names, errors


def _ports_errors(ports: Any, path: str) -> list[FieldError]:
    """``validateContainerPorts``."""
    errors: list[FieldError] = []
    names: set[str] = set()
    for index_path, port in field.indexed(ports, path):
        name = port.get("name")
        if isinstance(name, str) and name:
            messages = port_name_errors(name)
            errors += [field.invalid(f"{index_path}.name", name, msg) for msg in messages]
            if not messages and name in names:
                errors.append(field.duplicate(f"{index_path}.name", name))
            names.add(name)
        number = port.get("containerPort")
        if not number:
            errors.append(field.required(f"{index_path}.containerPort"))
        elif isinstance(number, bool) or not isinstance(number, int):
            errors.append(field.invalid(f"{index_path}.containerPort", number, "must be an integer"))
        else:
            errors += [field.invalid(f"{index_path}.containerPort", number, m) for m in port_number_errors(number)]
        host_port = port.get("hostPort")
        if isinstance(host_port, int) and not isinstance(host_port, bool) and host_port != 0:
            errors += [field.invalid(f"{index_path}.hostPort", host_port, m) for m in port_number_errors(host_port)]
        errors += defaulted_enum_errors(port.get("protocol"), f"{index_path}.protocol", PROTOCOLS)
    return errors


def _env_errors(env: Any, path: str) -> list[FieldError]:
    """``ValidateEnv``: names (kube 1.32's relaxed rule) and one source of each value."""
    errors: list[FieldError] = []
    for index_path, var in field.indexed(env, path):
        name = var.get("name")
        if not name:
            errors.append(field.required(f"{index_path}.name"))
        if isinstance(name, str):
            errors += [field.invalid(f"{index_path}.name", name, msg) for msg in env_var_name_errors(name)]
        source = var.get("valueFrom")
        if source is None:
            continue
        count = sum(
            field.mapping(source).get(k) is not None
            for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
        )
        source_path = f"{index_path}.valueFrom"
        if not count:
            errors.append(field.invalid(
                source_path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
            ))
        elif var.get("value"):
            errors.append(field.invalid(source_path, "", "may not be specified when `value` is not empty"))
        elif count > 1:
            errors.append(field.invalid(source_path, "", "may not have more than one field specified at a time"))
    return errors


def _mounts_errors(mounts: Any, volumes: set[str], path: str) -> list[FieldError]:
    """``ValidateVolumeMounts``: each names a volume of the pod, at a unique path."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index_path, mount in field.indexed(mounts, path):
        name, mount_path = mount.get("name"), mount.get("mountPath")
        if not name:
            errors.append(field.required(f"{index_path}.name"))
        if name not in volumes:
            errors.append(field.not_found(f"{index_path}.name", name if name is not None else ""))
        if not mount_path:
            errors.append(field.required(f"{index_path}.mountPath"))
        elif isinstance(mount_path, str):
            if mount_path in seen:
                errors.append(field.invalid(f"{index_path}.mountPath", mount_path, "must be unique"))
            seen.add(mount_path)
    return errors


def _container_errors(container: dict[str, Any], volumes: set[str], path: str) -> list[FieldError]:
    """``validateContainerCommon``: what every kind of container is checked for."""
    errors = _name_errors(container.get("name"), f"{path}.name")
    image = container.get("image")
    if not image:
        errors.append(field.required(f"{path}.image"))
    errors += defaulted_enum_errors(
        container.get("terminationMessagePolicy"), f"{path}.terminationMessagePolicy", TERMINATION_MESSAGE_POLICIES
    )
    errors += _ports_errors(container.get("ports"), f"{path}.ports")
    errors += _env_errors(container.get("env"), f"{path}.env")
    errors += _mounts_errors(container.get("volumeMounts"), volumes, f"{path}.volumeMounts")
    errors += defaulted_enum_errors(container.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES)
    errors += requirements_errors(container.get("resources"), f"{path}.resources")
    return errors


def containers_errors(spec: dict[str, Any], volumes: set[str], path: str) -> list[FieldError]:
    """``validateContainers`` and ``validateInitContainers``: at least one container; names
    unique across both lists; only init containers take a ``restartPolicy`` (``Always``)."""
    containers = spec.get("containers")
    errors: list[FieldError] = []
    if not field.items(containers):
        errors.append(field.required(f"{path}.containers"))
    names: set[str] = set()
    for index_path, container in field.indexed(containers, f"{path}.containers"):
        errors += _container_errors(container, volumes, index_path)
        name = container.get("name")
        if isinstance(name, str) and name in names:
            errors.append(field.duplicate(f"{index_path}.name", name))
        elif isinstance(name, str):
            names.add(name)
        if container.get("restartPolicy") is not None:
            errors.append(field.forbidden(f"{index_path}.restartPolicy", "may not be set for non-init containers"))
    for index_path, container in field.indexed(spec.get("initContainers"), f"{path}.initContainers"):
        errors += _container_errors(container, volumes, index_path)
        policy = container.get("restartPolicy")
        if policy is not None and policy != "Always":
            errors.append(field.not_supported(f"{index_path}.restartPolicy", policy, ("Always",)))
        name = container.get("name")
        if isinstance(name, str) and name in names:
            errors.append(field.duplicate(f"{index_path}.name", name))
        elif isinstance(name, str) and name:
            names.add(name)
    return errors


def tolerations_errors(tolerations: Any, path: str) -> list[FieldError]:
    """``ValidateTolerations``."""
    errors: list[FieldError] = []
    for index_path, toleration in field.indexed(tolerations, path):
        key, operator = toleration.get("key") or "", toleration.get("operator") or ""
        value, effect = toleration.get("value") or "", toleration.get("effect") or ""
        if key:
            errors += [field.invalid(f"{index_path}.key", key, msg) for msg in qualified_name_errors(str(key))]
        if not key and operator != "Exists":
            errors.append(field.invalid(
                f"{index_path}.operator", operator,
                'operator must be Exists when `key` is empty, which means "match all values and all keys"',
            ))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(field.invalid(
                f"{index_path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"
            ))
        if operator in ("Equal", ""):
            errors += [field.invalid(f"{index_path}.operator", value, msg) for msg in label_value_errors(str(value))]
        elif operator == "Exists":
            if value:
                errors.append(field.invalid(
                    f"{index_path}.operator", toleration, "value must be empty when `operator` is 'Exists'"
                ))
        else:
            errors.append(field.not_supported(f"{index_path}.operator", operator, ("Equal", "Exists")))
        if effect and effect not in TAINT_EFFECTS:
            errors.append(field.not_supported(f"{index_path}.effect", effect, TAINT_EFFECTS))
    return errors


def _gate_names(spec: Any) -> list[Any]:
    return [field.mapping(gate).get("name") for gate in field.items(field.mapping(spec).get("schedulingGates"))]


def scheduling_gates_errors(spec: Any, path: str) -> list[FieldError]:
    """``validateSchedulingGates``: each gate's name a qualified name, none twice."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, name in enumerate(_gate_names(spec)):
        text = name if isinstance(name, str) else ""
        errors += [field.invalid(f"{path}[{i}]", text, msg) for msg in qualified_name_errors(text)]
        if text in seen:
            errors.append(field.duplicate(f"{path}[{i}]", text))
        seen.add(text)
    return errors


def added_scheduling_gates_errors(spec: Any, old_spec: Any, path: str) -> list[FieldError]:
    """``validateOnlyDeletedSchedulingGates``: after create a Pod's gates may only be removed."""
    before = set(_gate_names(old_spec))
    return [
        field.forbidden(f"{path}[{i}].name", f"only deletion is allowed, but found new scheduling gate '{name}'")
        for i, name in enumerate(_gate_names(spec)) if name not in before
    ]


def pod_spec_errors(spec: Any, path: str) -> list[FieldError]:
    """``ValidatePodSpec``."""
    spec = field.mapping(spec)
    volumes, errors = volumes_errors(spec.get("volumes"), f"{path}.volumes")
    errors += containers_errors(spec, volumes, path)
    errors += defaulted_enum_errors(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES)
    errors += defaulted_enum_errors(spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES)
    errors += labels_errors(spec.get("nodeSelector"), f"{path}.nodeSelector")
    for key, check in (("serviceAccountName", dns_subdomain_errors), ("nodeName", dns_subdomain_errors),
                       ("hostname", dns_label_errors), ("subdomain", dns_label_errors)):
        value = spec.get(key)
        if isinstance(value, str) and value:
            errors += [field.invalid(f"{path}.{key}", value, msg) for msg in check(value)]
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, int) or not 1 <= deadline <= MAX_INT32
    ):
        errors.append(field.invalid(f"{path}.activeDeadlineSeconds", deadline, inclusive_range_error(1, MAX_INT32)))
    errors += field.nonnegative(spec.get("terminationGracePeriodSeconds"), f"{path}.terminationGracePeriodSeconds")
    errors += tolerations_errors(spec.get("tolerations"), f"{path}.tolerations")
    errors += scheduling_gates_errors(spec, f"{path}.schedulingGates")
    return errors


def restart_policy(template: Any) -> str:
    """A template's pod restart policy, ``Always`` when unset (kube's default)."""
    value = field.mapping(field.mapping(template).get("spec")).get("restartPolicy")
    return value if isinstance(value, str) and value else "Always"


def template_metadata_errors(template: dict[str, Any], path: str) -> list[FieldError]:
    """A template's labels and annotations (reported at ``<template>.labels``, as kube does)."""
    meta = field.mapping(template.get("metadata"))
    errors = labels_errors(meta.get("labels"), f"{path}.labels")
    for key in field.mapping(meta.get("annotations")):
        errors += [field.invalid(f"{path}.annotations", key, msg) for msg in qualified_name_errors(key.lower())]
    return errors


def pod_template_errors(template: Any, path: str) -> list[FieldError]:
    """``ValidatePodTemplateSpec``: the template's labels and annotations, then its pod spec."""
    template = field.mapping(template)
    return template_metadata_errors(template, path) + pod_spec_errors(template.get("spec"), f"{path}.spec")
