"""kube's validation of the networking kinds (``pkg/apis/networking/validation``): Ingress
(rules, hosts, paths and their ``pathType``, backends, TLS, the class name), IngressClass
(controller, parameters reference) and NetworkPolicy (selectors, ports, peers, CIDRs, policy
types). Ingress status (load balancer addresses) is not checked here.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue
from controlplane.apis.kube.label_selectors import selector_errors
from controlplane.apis.kube.names import (
    dns_1035_errors,
    dns_label_errors,
    dns_subdomain_errors,
    path_segment_errors,
    port_name_errors,
    port_number_errors,
    regex_error,
)
from controlplane.apis.untyped import Obj

_WILDCARD_FMT = "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_WILDCARD = re.compile(f"^{_WILDCARD_FMT}\\Z")
_WILDCARD_MESSAGE = regex_error(
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
    "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
    _WILDCARD_FMT,
    "*.example.com",
)
_HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = re.compile(f"^{_HTTP_PATH_FMT}\\Z")
_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")
_PARAMETER_SCOPES = ("Cluster", "Namespace")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_POLICY_TYPES = ("Ingress", "Egress")
_CIDR_MESSAGE = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
MAX_CONTROLLER_LENGTH = 250


def _host_errors(host: str, path: str) -> list[FieldError]:
    """``IsWildcardDNS1123Subdomain`` for a host with ``*``, else ``IsDNS1123Subdomain``."""
    if "*" in host:
        messages = ["must be no more than 253 characters"] if len(host) > 253 else []
        messages += [] if _WILDCARD.match(host) else [_WILDCARD_MESSAGE]
    else:
        messages = dns_subdomain_errors(host)
    return [field.invalid(path, host, message) for message in messages]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _path_segment_errors(value: Any, path: str, what: str) -> list[FieldError]:
    """Required, then ``IsValidPathSegmentName`` (kind and name of a typed reference)."""
    if not value:
        return [field.required(path, f"{what} is required")]
    text = str(value)
    return [field.invalid(path, text, message) for message in path_segment_errors(text)]


def _typed_reference_errors(ref: Obj, path: str) -> list[FieldError]:
    """``validateIngressTypedLocalObjectReference``."""
    errors: list[FieldError] = []
    group = ref.get("apiGroup")
    if group is not None:
        errors += [field.invalid(f"{path}.apiGroup", group, m) for m in dns_subdomain_errors(str(group))]
    errors += _path_segment_errors(ref.get("kind"), f"{path}.kind", "kind")
    errors += _path_segment_errors(ref.get("name"), f"{path}.name", "name")
    return errors


def _backend_errors(backend: Obj, path: str) -> list[FieldError]:
    """``validateIngressBackend``: exactly one of a resource and a service; a service port by
    name or by number."""
    resource, service = backend.get("resource"), backend.get("service")
    if resource is not None and service is not None:
        return [field.invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        return _typed_reference_errors(field.mapping(resource), f"{path}.resource")
    if service is None:
        return [field.invalid(path, "", "resource or service backend is required")]
    service = field.mapping(service)
    errors: list[FieldError] = []
    name = str(service.get("name") or "")
    if not name:
        errors.append(field.required(f"{path}.service.name"))
    else:
        errors += [field.invalid(f"{path}.service.name", name, m) for m in dns_1035_errors(name)]
    port = field.mapping(service.get("port"))
    port_name, number = str(port.get("name") or ""), port.get("number") or 0
    if port_name and number:
        errors.append(field.invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        errors += [field.invalid(f"{path}.service.port.name", port_name, m) for m in port_name_errors(port_name)]
    elif number:
        shown = number if isinstance(number, int) else 0
        errors += [field.invalid(f"{path}.service.port.number", number, m) for m in port_number_errors(shown)]
    else:
        errors.append(field.required(path, "port name or number is required"))
    return errors


def _http_path_errors(entry: Obj, path: str) -> list[FieldError]:
    """``validateHTTPIngressPath``."""
    path_type, value = entry.get("pathType"), str(entry.get("path") or "")
    if path_type is None:
        return [field.required(f"{path}.pathType", "pathType must be specified")]
    errors: list[FieldError] = []
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            errors.append(field.invalid(f"{path}.path", value, "must be an absolute path"))
        errors += [
            field.invalid(f"{path}.path", value, f"must not contain '{bad}'")
            for bad in _INVALID_PATH_SEQUENCES if bad in value
        ]
        errors += [
            field.invalid(f"{path}.path", value, f"cannot end with '{bad}'")
            for bad in _INVALID_PATH_SUFFIXES if value.endswith(bad)
        ]
    elif path_type == "ImplementationSpecific":
        if value and not value.startswith("/"):
            errors.append(field.invalid(f"{path}.path", value, "must be an absolute path"))
    else:
        errors.append(field.not_supported(f"{path}.pathType", path_type, _PATH_TYPES))
    return errors + _backend_errors(field.mapping(entry.get("backend")), f"{path}.backend")


def _rules_errors(rules: list[Any], path: str) -> list[FieldError]:
    """``validateIngressRules`` (kube checks each rule's ``http`` at the path of the first rule)."""
    errors: list[FieldError] = []
    for index_path, rule in field.indexed(rules, path):
        host = str(rule.get("host") or "")
        if host and _is_ip(host):
            errors.append(field.invalid(f"{index_path}.host", host, "must be a DNS name, not an IP address"))
        if host:
            errors += _host_errors(host, f"{index_path}.host")
        http = rule.get("http")
        if http is not None:
            http_path = f"{path}[0].http"
            paths = field.items(field.mapping(http).get("paths"))
            if not paths:
                errors.append(field.required(f"{http_path}.paths"))
            for entry_path, entry in field.indexed(paths, f"{http_path}.paths"):
                errors += _http_path_errors(entry, entry_path)
    return errors


def _tls_errors(tls: Any, path: str) -> list[FieldError]:
    """``validateIngressTLS``: hosts (wildcards allowed) and the secret's name."""
    errors: list[FieldError] = []
    for index_path, entry in field.indexed(tls, path):
        for i, host in enumerate(field.items(entry.get("hosts"))):
            errors += _host_errors(str(host), f"{index_path}.hosts[{i}]")
        secret = str(entry.get("secretName") or "")
        if secret:
            errors += [field.invalid(f"{index_path}.secretName", secret, m) for m in dns_subdomain_errors(secret)]
    return errors


def validate_ingress(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateIngressCreate`` / ``ValidateIngressUpdate`` (networking/v1)."""
    spec = field.mapping(obj.get("spec"))
    errors: list[FieldError] = []
    class_name = spec.get("ingressClassName")
    annotations = field.mapping(field.mapping(obj.get("metadata")).get("annotations"))
    annotated = annotations.get(INGRESS_CLASS_ANNOTATION)
    if old is None and annotated is not None and class_name is not None and annotated != class_name:
        errors.append(field.invalid(
            f"annotations.{INGRESS_CLASS_ANNOTATION}", annotated, "must match `ingressClassName` when both are specified"
        ))
    return [*errors, *ingress_spec_errors(spec)]


def ingress_spec_errors(spec: Obj, *, rules_type: str = "networking.IngressRule") -> list[FieldError]:
    """``ValidateIngressSpec`` at ``spec`` (wildcard hosts and secret names checked): an Ingress's,
    and a Karmada MultiClusterIngress's, whose webhook lifts it (``rules_type``: the Go type its
    missing rules are printed as, ``v1.IngressRule`` there)."""
    errors: list[FieldError] = []
    class_name = spec.get("ingressClassName")
    rules = field.items(spec.get("rules"))
    default_backend = spec.get("defaultBackend")
    if not rules and default_backend is None:
        errors.append(field.invalid(
            "spec", GoValue(f"[]{rules_type}(nil)"), "either `defaultBackend` or `rules` must be specified"
        ))
    if default_backend is not None:
        errors += _backend_errors(field.mapping(default_backend), "spec.defaultBackend")
    if rules:
        errors += _rules_errors(rules, "spec.rules")
    errors += _tls_errors(spec.get("tls"), "spec.tls")
    if class_name is not None:
        errors += [
            field.invalid("spec.ingressClassName", class_name, m) for m in dns_subdomain_errors(str(class_name))
        ]
    return errors


def _controller_errors(controller: str, path: str) -> list[FieldError]:
    """The length limit, then ``IsDomainPrefixedPath``."""
    errors = [field.too_long(path, MAX_CONTROLLER_LENGTH)] if len(controller) > MAX_CONTROLLER_LENGTH else []
    if not controller:
        return [*errors, field.required(path)]
    host, slash, rest = controller.partition("/")
    if not slash or not host or not rest:
        return [*errors, field.invalid(path, controller, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors += [field.invalid(path, host, m) for m in dns_subdomain_errors(host)]
    if not _HTTP_PATH.match(rest):
        errors.append(field.invalid(path, rest, regex_error("Invalid path", _HTTP_PATH_FMT)))
    return errors


def _parameters_errors(params: Obj, path: str) -> list[FieldError]:
    """``validateIngressClassParametersReference``."""
    errors = _typed_reference_errors(params, path)
    scope = params.get("scope")
    if scope is None:
        return [*errors, field.required(f"{path}.scope")]
    namespace = params.get("namespace")
    if scope not in _PARAMETER_SCOPES:
        errors.append(field.not_supported(f"{path}.scope", scope, _PARAMETER_SCOPES))
    elif scope == "Namespace":
        if namespace is None:
            errors.append(field.required(f"{path}.namespace", "`parameters.scope` is set to 'Namespace'"))
        else:
            errors += [field.invalid(f"{path}.namespace", namespace, m) for m in dns_label_errors(str(namespace))]
    elif namespace is not None:
        errors.append(field.forbidden(f"{path}.namespace", "`parameters.scope` is set to 'Cluster'"))
    return errors


def validate_ingress_class(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateIngressClass`` / ``ValidateIngressClassUpdate`` (the controller is immutable)."""
    spec = field.mapping(obj.get("spec"))
    controller = str(spec.get("controller") or "")
    errors = _controller_errors(controller, "spec.controller")
    params = spec.get("parameters")
    if params is not None:
        errors += _parameters_errors(field.mapping(params), "spec.parameters")
    if old is not None:
        errors += field.immutable(controller, str(field.mapping(old.get("spec")).get("controller") or ""),
                                  "spec.controller")
    return errors


def _port_errors(port: Obj, path: str) -> list[FieldError]:
    """``ValidateNetworkPolicyPort``."""
    errors: list[FieldError] = []
    protocol = port.get("protocol")
    if protocol is not None and protocol not in _PROTOCOLS:
        errors.append(field.not_supported(f"{path}.protocol", protocol, _PROTOCOLS))
    number, end = port.get("port"), port.get("endPort")
    if number is None:
        if end is not None:
            errors.append(field.invalid(f"{path}.endPort", end, "may not be specified when `port` is not specified"))
    elif isinstance(number, int) and not isinstance(number, bool):
        errors += [field.invalid(f"{path}.port", number, m) for m in port_number_errors(number)]
        if isinstance(end, int):
            if end < number:
                errors.append(field.invalid(f"{path}.endPort", number, "must be greater than or equal to `port`"))
            errors += [field.invalid(f"{path}.endPort", end, m) for m in port_number_errors(end)]
    else:
        if end is not None:
            errors.append(field.invalid(f"{path}.endPort", end, "may not be specified when `port` is non-numeric"))
        errors += [field.invalid(f"{path}.port", number, m) for m in port_name_errors(str(number))]
    return errors


def _network(text: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(str(text), strict=False) if isinstance(text, str) and "/" in text else None
    except ValueError:
        return None


def _ip_block_errors(block: Obj, path: str) -> list[FieldError]:
    """``ValidateIPBlock``: a CIDR (``IsValidCIDR``), and exceptions strictly inside it."""
    cidr = block.get("cidr")
    if not cidr:
        return [field.required(f"{path}.cidr")]
    network = _network(cidr)
    if network is None:
        return [field.invalid(f"{path}.cidr", cidr, _CIDR_MESSAGE)]
    errors: list[FieldError] = []
    for i, text in enumerate(field.items(block.get("except"))):
        except_path = f"{path}.except[{i}]"
        inner = _network(text)
        if inner is None:
            errors.append(field.invalid(except_path, text, _CIDR_MESSAGE))
        elif inner.version != network.version or inner.network_address not in network \
                or network.prefixlen >= inner.prefixlen:
            errors.append(field.invalid(except_path, text, "must be a strict subset of `cidr`"))
    return errors


def _peer_errors(peer: Obj, path: str) -> list[FieldError]:
    """``ValidateNetworkPolicyPeer``: at least one peer; an ipBlock alone."""
    errors: list[FieldError] = []
    count = 0
    for key in ("podSelector", "namespaceSelector"):
        if peer.get(key) is not None:
            count += 1
            errors += selector_errors(peer.get(key), f"{path}.{key}")
    block = peer.get("ipBlock")
    if block is not None:
        count += 1
        errors += _ip_block_errors(field.mapping(block), f"{path}.ipBlock")
    if count == 0:
        errors.append(field.required(path, "must specify a peer"))
    elif count > 1 and block is not None:
        errors.append(field.forbidden(path, "may not specify both ipBlock and another peer"))
    return errors


def validate_network_policy(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateNetworkPolicySpec`` (the whole spec may change on update)."""
    spec = field.mapping(obj.get("spec"))
    errors = selector_errors(spec.get("podSelector"), "spec.podSelector")
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for rule_path, rule in field.indexed(spec.get(direction), f"spec.{direction}"):
            for port_path, port in field.indexed(rule.get("ports"), f"{rule_path}.ports"):
                errors += _port_errors(port, port_path)
            for peer_path, peer in field.indexed(rule.get(peers), f"{rule_path}.{peers}"):
                errors += _peer_errors(peer, peer_path)
    types = field.items(spec.get("policyTypes"))
    if len(types) > len(_POLICY_TYPES):
        return [*errors, field.invalid("spec.policyTypes", types, "may not specify more than two policyTypes")]
    for i, policy_type in enumerate(types):
        if policy_type not in _POLICY_TYPES:
            errors.append(field.not_supported(f"spec.policyTypes[{i}]", policy_type, _POLICY_TYPES))
    return errors
