"""kube's validation of EndpointSlice (``pkg/apis/discovery/validation``): the address type
(required, one of IPv4/IPv6/FQDN, immutable), at most 1000 endpoints of 1 to 100 addresses in
the slice's address format, at most 100 ports with unique names and a known protocol, node
names, host names and zone hints."""

from __future__ import annotations

import ipaddress
from typing import Any

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError
from controlplane.apis.kube.names import (
    dns_label_errors,
    dns_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)
from controlplane.apis.kube.validate_pod import labels_errors
from controlplane.apis.untyped import Obj

ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 100
MAX_TOPOLOGY_LABELS = 16
MAX_ZONE_HINTS = 8


def validate_endpoint_slice(obj: Obj, old: Obj | None) -> list[FieldError]:
    """``ValidateEndpointSlice`` / ``ValidateEndpointSliceUpdate``."""
    address_type = obj.get("addressType") or ""
    errors: list[FieldError] = []
    if not address_type:
        errors.append(field.required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        errors.append(field.not_supported("addressType", address_type, ADDRESS_TYPES))
    errors += _endpoints_errors(obj.get("endpoints"), str(address_type))
    errors += _ports_errors(obj.get("ports"))
    if old is not None:
        errors += field.immutable(address_type, old.get("addressType") or "", "addressType")
    return errors


def _endpoints_errors(endpoints: Any, address_type: str) -> list[FieldError]:
    listed = field.items(endpoints)
    if len(listed) > MAX_ENDPOINTS:
        return [field.too_many("endpoints", len(listed), MAX_ENDPOINTS)]
    errors: list[FieldError] = []
    for path, endpoint in field.indexed(listed, "endpoints"):
        addresses = field.items(endpoint.get("addresses"))
        if not addresses:
            errors.append(field.required(f"{path}.addresses", "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            errors.append(field.too_many(f"{path}.addresses", len(addresses), MAX_ADDRESSES))
        for i, address in enumerate(addresses):
            errors += _address_errors(str(address), address_type, f"{path}.addresses[{i}]")
        node_name = endpoint.get("nodeName")
        if node_name is not None:
            errors += [field.invalid(f"{path}.nodeName", node_name, m) for m in dns_subdomain_errors(str(node_name))]
        topology = field.mapping(endpoint.get("deprecatedTopology"))
        if len(topology) > MAX_TOPOLOGY_LABELS:
            errors.append(field.too_many(f"{path}.deprecatedTopology", len(topology), MAX_TOPOLOGY_LABELS))
        errors += labels_errors(topology, f"{path}.deprecatedTopology")
        hostname = endpoint.get("hostname")
        if hostname is not None:
            errors += [field.invalid(f"{path}.hostname", hostname, m) for m in dns_label_errors(str(hostname))]
        hints = endpoint.get("hints")
        if isinstance(hints, dict):
            errors += _hints_errors(hints, f"{path}.hints")
    return errors


def _address_errors(address: str, address_type: str, path: str) -> list[FieldError]:
    """``IsValidIPv4Address``/``IsValidIPv6Address`` and ``ValidateEndpointIP``, or
    ``IsFullyQualifiedDomainName``; an address type kube does not know is not checked."""
    if address_type == "FQDN":
        return fully_qualified_domain_name_errors(address, path)
    if address_type not in ("IPv4", "IPv6"):
        return []
    ip = parse_ip(address)
    errors: list[FieldError] = []
    if ip is None or (ip.version == 4) != (address_type == "IPv4"):
        errors.append(field.invalid(path, address, f"must be a valid {address_type} address"))
    return errors + endpoint_ip_errors(address, ip, path)


def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Go's ``ParseIPSloppy``: IPv4 octets may have leading zeros (read as decimal); an
    IPv4-mapped IPv6 address is the IPv4 address."""
    try:
        if "." in text and ":" not in text:
            octets = text.split(".")
            if len(octets) == 4 and all(o.isdigit() and len(o) <= 3 for o in octets):
                return ipaddress.IPv4Address(".".join(str(int(o)) for o in octets))
            return None
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def endpoint_ip_errors(
    address: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, path: str
) -> list[FieldError]:
    """``ValidateEndpointIP``: no unspecified, loopback or link-local address."""
    if ip is None:
        return [field.invalid(path, address, "must be a valid IP address")]
    problems = []
    if ip.is_unspecified:
        problems.append(f"may not be unspecified ({address})")
    if ip.is_loopback:
        problems.append("may not be in the loopback range (127.0.0.0/8, ::1/128)")
    if ip.is_link_local:
        problems.append("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
    if _is_link_local_multicast(ip):
        problems.append("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")
    return [field.invalid(path, address, problem) for problem in problems]


def _is_link_local_multicast(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Go's ``IP.IsLinkLocalMulticast``: 224.0.0.0/24, or an IPv6 multicast address of
    link-local scope (``ffX2::``, whatever its flags)."""
    packed = ip.packed
    if ip.version == 4:
        return packed[:3] == bytes((224, 0, 0))
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02


def fully_qualified_domain_name_errors(name: str, path: str) -> list[FieldError]:
    """``IsFullyQualifiedDomainName``: a DNS subdomain of at least two labels (a trailing dot
    allowed); the first problem only."""
    if not name:
        return [field.required(path)]
    name = name.removesuffix(".")
    messages = dns_subdomain_errors(name)
    if messages:
        return [field.invalid(path, name, ",".join(messages))]
    labels = name.split(".")
    if len(labels) < 2:
        return [field.invalid(path, name, "should be a domain with at least two segments separated by dots")]
    for label in labels:
        messages = dns_label_errors(label)
        if messages:
            return [field.invalid(path, label, ",".join(messages))]
    return []


def _ports_errors(ports: Any) -> list[FieldError]:
    listed = field.items(ports)
    if len(listed) > MAX_PORTS:
        return [field.too_many("ports", len(listed), MAX_PORTS)]
    errors: list[FieldError] = []
    names: set[str] = set()
    for path, port in field.indexed(listed, "ports"):
        name = str(port.get("name") or "")
        if name:
            errors += [field.invalid(f"{path}.name", name, m) for m in dns_label_errors(name)]
        if name in names:
            errors.append(field.duplicate(f"{path}.name", name))
        names.add(name)
        protocol = port.get("protocol")
        if protocol is None:
            errors.append(field.required(f"{path}.protocol"))
        elif protocol not in _PROTOCOLS:
            errors.append(field.not_supported(f"{path}.protocol", protocol, _PROTOCOLS))
        app_protocol = port.get("appProtocol")
        if app_protocol is not None:
            errors += [
                field.invalid(f"{path}.appProtocol", app_protocol, m) for m in qualified_name_errors(str(app_protocol))
            ]
    return errors


def _hints_errors(hints: Obj, path: str) -> list[FieldError]:
    """``validateHints``: at most 8 zones, each named once, each a label value."""
    zones = field.items(hints.get("forZones"))
    if len(zones) > MAX_ZONE_HINTS:
        return [field.too_many(f"{path}.forZones", len(zones), MAX_ZONE_HINTS)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for zone_path, zone in field.indexed(zones, f"{path}.forZones"):
        name = str(zone.get("name") or "")
        if name in seen:
            errors.append(field.duplicate(f"{zone_path}.name", name))
        seen.add(name)
        errors += [field.invalid(f"{zone_path}.name", name, m) for m in label_value_errors(name)]
    return errors
