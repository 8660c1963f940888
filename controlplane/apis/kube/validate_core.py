"""kube's validation of core/v1 kinds: Pod, Service, ConfigMap, Secret, PersistentVolumeClaim.

As pkg/apis/core/validation: a Pod's spec (:mod:`.validate_pod`); a Service's type,
ports (required, unique, in range, named when several, a valid target port) and cluster IP
fields (:func:`~controlplane.apis.kube.services.cluster_ip_fields_errors`); ConfigMap
and Secret keys (``[-._a-zA-Z0-9]+``), their total size (1 MiB), the keys a typed Secret
needs, and ``immutable``; a PVC's access modes and storage request, and on update a spec
that changes only its storage request (bound claims), never below the previous one.
"""

from __future__ import annotations

from typing import Any

import orjson

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.gobase64 import CorruptInput, std_decode
from controlplane.apis.kube.names import (
    config_key_errors,
    dns_label_errors,
    port_name_errors,
    port_number_errors,
)
from controlplane.apis.kube.serviceaccounttokens import ACCOUNT_NAME_ANNOTATION, SECRET_TYPE
from controlplane.apis.kube.services import cluster_ip_fields_errors
from controlplane.apis.kube.validate_pod import (
    PROTOCOLS,
    added_scheduling_gates_errors,
    defaulted_enum_errors,
    labels_errors,
    pod_spec_errors,
)
from controlplane.apis.kube.validate_resources import quantity_errors, shown
from controlplane.apis.untyped import Obj
from controlplane.gojson import go_quote

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
MAX_SECRET_SIZE = 1024 * 1024


def validate_pod(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidatePodCreate``: the pod spec, and no ``nodeName`` while scheduling gates remain;
    an update is checked the same way, and may only remove scheduling gates (kube's other pod
    update rules are not checked)."""
    spec = field.mapping(obj.get("spec"))
    errors = pod_spec_errors(spec, "spec")
    if spec.get("nodeName") and field.items(spec.get("schedulingGates")):
        errors.append(field.forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    if old is not None:
        errors += added_scheduling_gates_errors(spec, old.get("spec"), "spec.schedulingGates")
    return errors


def _target_port_errors(value: Any, path: str) -> list[FieldError]:
    """``ValidatePortNumOrName``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [field.invalid(path, value, msg) for msg in port_name_errors(value)]
    if isinstance(value, bool) or not isinstance(value, int):
        return [field.invalid(path, value, "must be an integer or a port name")]
    return [field.invalid(path, value, msg) for msg in port_number_errors(value)]


def _service_port_key(port: Obj) -> GoValue:
    """``%#v`` of the ``core.ServicePort{Protocol, Port}`` kube reports a duplicate as."""
    return GoValue(
        f'core.ServicePort{{Name:"", Protocol:{go_quote(str(port.get("protocol") or "TCP"))}, '
        f'AppProtocol:(*string)(nil), Port:{port.get("port")}, '
        f'TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:""}}, NodePort:0}}'
    )


def _service_ports_errors(spec: Obj) -> list[FieldError]:
    ports = field.items(spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    kind = spec.get("type") or "ClusterIP"
    errors: list[FieldError] = []
    if not ports and not headless and kind != "ExternalName":
        errors.append(field.required("spec.ports"))
    names: set[str] = set()
    seen: set[tuple[str, Any]] = set()
    node_ports: set[tuple[str, Any]] = set()
    for i, port in enumerate(ports):
        port = field.mapping(port)
        path = f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            errors.append(field.required(f"{path}.name"))
        elif isinstance(name, str) and name:
            errors += [field.invalid(f"{path}.name", name, msg) for msg in dns_label_errors(name)]
            if name in names:
                errors.append(field.duplicate(f"{path}.name", name))
            names.add(name)
        number = port.get("port", 0)
        if isinstance(number, bool) or not isinstance(number, int):
            errors.append(field.invalid(f"{path}.port", number, "must be an integer"))
        else:
            errors += [field.invalid(f"{path}.port", number, msg) for msg in port_number_errors(number)]
        protocol = port.get("protocol")
        errors += defaulted_enum_errors(protocol, f"{path}.protocol", PROTOCOLS)
        if port.get("targetPort") not in (None, 0, ""):  # unset: kube defaults it to the port
            errors += _target_port_errors(port.get("targetPort"), f"{path}.targetPort")
        if kind == "ClusterIP" and port.get("nodePort"):
            errors.append(field.forbidden(f"{path}.nodePort", "may not be used when `type` is 'ClusterIP'"))
        key = (str(protocol or "TCP"), number)
        if key in seen:
            errors.append(field.duplicate(path, _service_port_key(port)))
        seen.add(key)
        node_port = port.get("nodePort")
        if node_port:
            if (str(protocol or "TCP"), node_port) in node_ports:
                errors.append(field.duplicate(f"{path}.nodePort", node_port))
            node_ports.add((str(protocol or "TCP"), node_port))
    return errors


def validate_service(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateService`` (type, ports, selector) and ``clusterIP`` immutability on update."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    kind = spec.get("type")
    if kind and kind not in SERVICE_TYPES:
        errors.append(field.not_supported("spec.type", kind, SERVICE_TYPES))
    if kind == "ExternalName" and not spec.get("externalName"):
        errors.append(field.required("spec.externalName"))
    errors += _service_ports_errors(spec)
    errors += cluster_ip_fields_errors(spec)
    if kind != "ExternalName":
        errors += labels_errors(spec.get("selector"), "spec.selector")
    if old is not None:
        old_ip = field.mapping(old.get("spec")).get("clusterIP")
        new_ip = spec.get("clusterIP")
        if old_ip and new_ip and new_ip != old_ip and kind != "ExternalName":
            errors.append(field.invalid("spec.clusterIP", new_ip, field.IMMUTABLE))
    return errors


def _data_errors(data: Any, path: str, *, decode: bool) -> tuple[int, list[FieldError]]:
    """Keys of a ``data`` map and the bytes its values hold (base64-decoded for Secret data)."""
    size = 0
    errors: list[FieldError] = []
    for key, value in field.mapping(data).items():
        errors += [field.invalid(f"{path}[{key}]", key, msg) for msg in config_key_errors(key)]
        text = value if isinstance(value, str) else ""
        if decode:
            try:
                size += len(std_decode(text))
            except CorruptInput:
                errors.append(field.invalid(f"{path}[{key}]", "<secret contents redacted>", "illegal base64 data"))
        else:
            size += len(text.encode())
    return size, errors


def _immutable_data_errors(obj: Obj, old: Obj | None, keys: tuple[str, ...]) -> list[FieldError]:
    """Once ``immutable: true``, the flag and the data stay as they are."""
    if old is None or old.get("immutable") is not True:
        return []
    errors: list[FieldError] = []
    if obj.get("immutable") is not True:
        errors.append(field.forbidden("immutable", "field is immutable when `immutable` is set"))
    for key in keys:
        if (obj.get(key) or {}) != (old.get(key) or {}):
            errors.append(field.forbidden(key, "field is immutable when `immutable` is set"))
    return errors


def validate_config_map(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateConfigMap`` / ``ValidateConfigMapUpdate``."""
    data, binary = field.mapping(obj.get("data")), field.mapping(obj.get("binaryData"))
    size, errors = _data_errors(data, "data", decode=False)
    for key in data:
        if key in binary:
            errors.append(field.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    binary_size, found = _data_errors(binary, "binaryData", decode=True)
    errors += found
    if size + binary_size > MAX_SECRET_SIZE:
        errors.append(field.too_long("[]", MAX_SECRET_SIZE))  # field.NewPath(""), as Go prints it
    return errors + _immutable_data_errors(obj, old, ("data", "binaryData"))


#: Keys each Secret type requires in ``data`` (``ValidateSecret``).
_SECRET_TYPE_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


_DOCKER_CONFIG_TYPES = frozenset({"kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"})


def _docker_config_errors(data: Obj, strings: Obj, key: str) -> list[FieldError]:
    """A registry Secret's config must be a JSON object (kube unmarshals it into a map)."""
    if key in strings:
        content = str(strings[key] or "").encode()
    elif key in data:
        try:
            content = std_decode(str(data[key] or ""))
        except CorruptInput:
            return []  # named already, as undecodable data
    else:
        return []
    error = _not_a_json_object(content)
    return [] if error is None else [field.invalid(f"data[{key}]", "<secret contents redacted>", error)]


def _not_a_json_object(content: bytes) -> str | None:
    """Why ``content`` does not unmarshal into a map as kube's ``json.Unmarshal`` does, or None
    (``null`` does). Not JSON: the parser's own words, not Go's syntax messages."""
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    if value is None or isinstance(value, dict):
        return None
    found = {list: "array", str: "string", bool: "bool"}.get(type(value), "number")
    return f"json: cannot unmarshal {found} into Go value of type map[string]interface {{}}"


def validate_secret(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateSecret`` / ``ValidateSecretUpdate`` (``stringData`` counts as data, as kube merges it)."""
    data = field.mapping(obj.get("data"))
    size, errors = _data_errors(data, "data", decode=True)
    strings = field.mapping(obj.get("stringData"))
    string_size, found = _data_errors(strings, "data", decode=False)
    errors += found
    if size + string_size > MAX_SECRET_SIZE:
        errors.append(field.too_long("data", MAX_SECRET_SIZE))
    present = set(data) | set(strings)
    kind = obj.get("type") or "Opaque"
    if kind == SECRET_TYPE:
        annotations = field.mapping(field.mapping(obj.get("metadata")).get("annotations"))
        if not annotations.get(ACCOUNT_NAME_ANNOTATION):
            errors.append(field.required(f"metadata.annotations[{ACCOUNT_NAME_ANNOTATION}]"))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in present and "password" not in present:
            errors += [field.required("data[username]"), field.required("data[password]")]
    else:
        errors += [field.required(f"data[{key}]") for key in _SECRET_TYPE_KEYS.get(kind, ()) if key not in present]
        if kind in _DOCKER_CONFIG_TYPES:
            errors += _docker_config_errors(data, strings, _SECRET_TYPE_KEYS[kind][0])
    if old is not None:
        errors += field.immutable(kind, old.get("type") or "Opaque", "type")
    return errors + _immutable_data_errors(obj, old, ("data",))


def _storage(spec: Obj) -> Any:
    return field.mapping(field.mapping(spec.get("resources")).get("requests")).get("storage")


def validate_persistent_volume_claim(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidatePersistentVolumeClaim`` / ``ValidatePersistentVolumeClaimUpdate``."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    modes = field.items(spec.get("accessModes"))
    if not modes and not spec.get("dataSourceRef"):
        errors.append(field.required("spec.accessModes", "at least 1 access mode is required"))
    for mode in modes:
        if mode not in ACCESS_MODES:
            errors.append(field.not_supported("spec.accessModes", mode, ACCESS_MODES))
    storage = _storage(spec)
    if storage is None:
        errors.append(field.required("spec.resources[storage]"))
    else:
        value, found = quantity_errors("storage", storage, "spec.resources[storage]")
        if value is not None and value <= 0:
            found = [field.invalid("spec.resources[storage]", shown(storage, value), "must be greater than zero")]
        errors += found
    volume_mode = spec.get("volumeMode")
    if volume_mode is not None and volume_mode not in VOLUME_MODES:
        errors.append(field.not_supported("spec.volumeMode", volume_mode, VOLUME_MODES))
    if old is not None:
        errors += _claim_update_errors(obj, old)
    return errors


def _claim_update_errors(obj: Obj, old: Obj) -> list[FieldError]:
    spec, old_spec = field.mapping(obj.get("spec")), field.mapping(old.get("spec"))
    bound = field.mapping(obj.get("status")).get("phase") == "Bound"
    mutable = {"volumeName"} if not old_spec.get("volumeName") else set()
    if bound:
        mutable |= {"volumeAttributesClassName"}

    def comparable(s: Obj) -> Obj:
        out = {k: v for k, v in s.items() if k not in mutable}
        if bound:
            resources = dict(field.mapping(out.get("resources")))
            resources["requests"] = {
                k: v for k, v in field.mapping(resources.get("requests")).items() if k != "storage"
            }
            out["resources"] = resources
        return out

    errors: list[FieldError] = []
    if comparable(spec) != comparable(old_spec):
        errors.append(field.forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ))
    new_size, old_size = _storage(spec), _storage(old_spec)
    new_value, _ = quantity_errors("storage", new_size, "spec.resources[storage]")
    old_value, _ = quantity_errors("storage", old_size, "spec.resources[storage]")
    if new_value is not None and old_value is not None and new_value < old_value:
        errors.append(field.forbidden("spec.resources.requests.storage", "field can not be less than previous value"))
    return errors
