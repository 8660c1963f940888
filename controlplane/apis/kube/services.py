"""kube's rules for a Service's allocated fields (``pkg/registry/core/service``): which types
get a cluster IP, node ports or a health check node port, and what a write keeps or drops.

* :func:`normalize_cluster_ips` keeps ``clusterIP`` and ``clusterIPs`` in step (the strategy's
  ``NormalizeClusterIPs``);
* :func:`prepare_update` is what an update does before it is validated: the allocated values
  a request leaves out are the stored ones (``patchAllocatedValues``), and those a type change
  leaves without a use are dropped when the request did not change them
  (``dropTypeDependentFields``);
* :func:`init_ip_families` fills ``ipFamilyPolicy`` and ``ipFamilies`` as kube does on a
  single-stack cluster, with kube's errors for what such a cluster cannot serve
  (``initIPFamilyFields``).

In: Service objects as dicts, changed in place. Pure; no I/O. The allocation itself (which
address or port is free) is the API server's (:mod:`controlplane.apiserver.serviceallocation`).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Final

from controlplane.apis.kube import field
from controlplane.apis.kube.field import FieldError, GoValue, go_strings
from controlplane.apis.kube.objects import child, items
from controlplane.apis.untyped import Obj

CLUSTER_IP_NONE: Final = "None"
SINGLE_STACK: Final = "SingleStack"
PREFER_DUAL_STACK: Final = "PreferDualStack"
REQUIRE_DUAL_STACK: Final = "RequireDualStack"
IP_FAMILY_POLICIES: Final = (PREFER_DUAL_STACK, REQUIRE_DUAL_STACK, SINGLE_STACK)
IPV4: Final = "IPv4"
IPV6: Final = "IPv6"
IP_FAMILIES: Final = (IPV4, IPV6)


def _spec(obj: Obj | None) -> Obj:
    spec = child(obj, "spec")
    return spec if spec is not None else {}


def service_type(spec: Obj) -> str:
    kind = spec.get("type")
    return kind if isinstance(kind, str) and kind else "ClusterIP"


def needs_cluster_ip(spec: Obj) -> bool:
    """Every type but ExternalName has cluster IPs (``None`` for a headless Service)."""
    return service_type(spec) != "ExternalName"


def needs_node_ports(spec: Obj) -> bool:
    return service_type(spec) in ("NodePort", "LoadBalancer")


def allocates_node_ports(spec: Obj) -> bool:
    """``shouldAllocateNodePorts``: a NodePort Service, or a LoadBalancer unless it sets
    ``allocateLoadBalancerNodePorts: false`` (ports it names are still allocated)."""
    kind = service_type(spec)
    return kind == "NodePort" or (kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)


def needs_health_check_node_port(spec: Obj) -> bool:
    """``NeedsHealthCheck``: a LoadBalancer with ``externalTrafficPolicy: Local``."""
    return service_type(spec) == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def is_headless(spec: Obj) -> bool:
    ips = spec.get("clusterIPs")
    first = ips[0] if isinstance(ips, list) and ips else spec.get("clusterIP")
    return first == CLUSTER_IP_NONE


def cluster_ips(spec: Obj) -> list[str]:
    """The addresses a Service holds (none for a headless or ExternalName one)."""
    if not needs_cluster_ip(spec) or is_headless(spec):
        return []
    ips = spec.get("clusterIPs")
    if isinstance(ips, list) and ips:
        return [ip for ip in ips if isinstance(ip, str) and ip]
    ip = spec.get("clusterIP")
    return [ip] if isinstance(ip, str) and ip else []


def node_ports(spec: Obj) -> list[int]:
    """``collectServiceNodePorts`` and the health check node port: every port number the Service
    holds on the nodes, each once (one number may serve a port's TCP and UDP)."""
    out: list[int] = []
    for port in items(spec, "ports"):
        number = port.get("nodePort")
        if isinstance(number, int) and not isinstance(number, bool) and number and number not in out:
            out.append(number)
    health = spec.get("healthCheckNodePort")
    if isinstance(health, int) and not isinstance(health, bool) and health and health not in out:
        out.append(health)
    return out


def go_cluster_ips(values: Any) -> GoValue:
    """``clusterIPs`` as kube shows them in its errors: none (or not a list) as a nil slice."""
    return go_strings(values if isinstance(values, list) and values else None)


def normalize_cluster_ips(obj: Obj) -> None:
    """A request that names ``clusterIP`` alone (an older client) names ``clusterIPs`` too."""
    spec = child(obj, "spec")
    if spec is None:
        return
    ip = spec.get("clusterIP")
    if isinstance(ip, str) and ip and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [ip]


def prepare_update(new: Obj, old: Obj) -> None:
    """What kube's Service update does before validation: ``patchAllocatedValues``, the update
    half of ``NormalizeClusterIPs`` and ``dropTypeDependentFields``."""
    spec, old_spec = child(new, "spec"), _spec(old)
    if spec is None:
        return
    _patch_allocated_values(spec, old_spec)
    if spec.get("clusterIP") != old_spec.get("clusterIP") and spec.get("clusterIPs") == old_spec.get("clusterIPs"):
        # The singular changed, the plural did not: the plural follows.
        ip = spec.get("clusterIP")
        if not ip:
            spec.pop("clusterIPs", None)
        elif isinstance(spec.get("clusterIPs"), list) and spec["clusterIPs"]:
            spec["clusterIPs"] = [ip, *spec["clusterIPs"][1:]]
    _drop_type_dependent_fields(spec, old_spec)


def _patch_allocated_values(spec: Obj, old_spec: Obj) -> None:
    """The allocated values a request leaves out are the stored ones (kube's ``kubectl replace``
    of a file without ``clusterIP`` or ``nodePort`` keeps them)."""
    if needs_cluster_ip(old_spec) and needs_cluster_ip(spec):
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
        # initIPFamilyFields takes the stored policy, and the families follow the kept addresses.
        for key in ("ipFamilyPolicy", "ipFamilies"):
            if spec.get(key) is None and old_spec.get(key) is not None:
                spec[key] = old_spec[key] if isinstance(old_spec[key], str) else list(old_spec[key])
    if needs_node_ports(old_spec) and needs_node_ports(spec):
        new_ports, old_ports = list(items(spec, "ports")), list(items(old_spec, "ports"))
        used = {p.get("nodePort") for p in old_ports} & {p.get("nodePort") for p in new_ports}
        by_name = {p.get("name") or "": p.get("nodePort") for p in old_ports}
        for port in new_ports:
            if not port.get("nodePort"):
                kept = by_name.get(port.get("name") or "")
                if kept and kept not in used:
                    port["nodePort"] = kept
    both_health_checked = needs_health_check_node_port(old_spec) and needs_health_check_node_port(spec)
    if both_health_checked and not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def _drop_type_dependent_fields(spec: Obj, old_spec: Obj) -> None:
    """Values a type change leaves without a use, dropped where the request kept them as stored
    (a value the user changed stays, for validation to judge)."""
    old_type, new_type = service_type(old_spec), service_type(spec)
    cluster_ip_gone = needs_cluster_ip(old_spec) and not needs_cluster_ip(spec)
    if cluster_ip_gone and spec.get("clusterIPs") == old_spec.get("clusterIPs"):
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    _drop_kept(spec, old_spec, "ipFamilies", when=cluster_ip_gone)
    _drop_kept(spec, old_spec, "ipFamilyPolicy", when=cluster_ip_gone)
    if needs_node_ports(old_spec) and not needs_node_ports(spec):
        new_ports = [p.get("nodePort") for p in items(spec, "ports")]
        if new_ports == [p.get("nodePort") for p in items(old_spec, "ports")]:
            for port in items(spec, "ports"):
                port.pop("nodePort", None)
    health_gone = needs_health_check_node_port(old_spec) and not needs_health_check_node_port(spec)
    _drop_kept(spec, old_spec, "healthCheckNodePort", when=health_gone)
    load_balancer_gone = old_type == "LoadBalancer" and new_type != "LoadBalancer"
    _drop_kept(spec, old_spec, "allocateLoadBalancerNodePorts", when=load_balancer_gone)
    external = ("NodePort", "LoadBalancer")
    external_gone = old_type in external and new_type not in external and not spec.get("externalIPs")
    _drop_kept(spec, old_spec, "externalTrafficPolicy", when=external_gone)


def _drop_kept(spec: Obj, old_spec: Obj, key: str, *, when: bool) -> None:
    if when and spec.get(key) == old_spec.get(key):
        spec.pop(key, None)


def family_of(ip: str) -> str:
    return IPV6 if ":" in ip else IPV4


def init_ip_families(spec: Obj, *, family: str) -> list[FieldError]:
    """``initIPFamilyFields`` on a cluster whose only service IP family is ``family``: the
    policy (SingleStack; RequireDualStack for a headless Service without selector), the
    families from the addresses, and kube's errors for what one family cannot serve."""
    if not needs_cluster_ip(spec):
        return []
    headless_selectorless = is_headless(spec) and not spec.get("selector")
    if spec.get("ipFamilyPolicy") is None:
        spec["ipFamilyPolicy"] = REQUIRE_DUAL_STACK if headless_selectorless else SINGLE_STACK
    policy = spec["ipFamilyPolicy"]
    ips: list[Any] = field.items(spec.get("clusterIPs"))
    families: list[Any] = field.items(spec.get("ipFamilies"))
    errors: list[FieldError] = []
    if policy == SINGLE_STACK:
        if len(ips) == 2:
            errors.append(field.invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
        if len(families) == 2:
            errors.append(field.invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
    inferred = list(families)
    for i, ip in enumerate(ips):
        if ip == CLUSTER_IP_NONE:
            break
        if i >= len(inferred):
            ip_family = family_of(str(ip))
            if ip_family != family:
                errors.append(field.invalid(f"spec.clusterIPs[{i}]", go_cluster_ips(ips), f"{ip_family} is not configured on this cluster"))
            else:
                inferred.append(ip_family)
    if errors:
        return errors
    if headless_selectorless:
        inferred = inferred or [family]
        if len(inferred) < 2 and policy != SINGLE_STACK:
            inferred.append(IPV6 if inferred[0] == IPV4 else IPV4)
        spec["ipFamilies"] = inferred
        return []
    if policy == REQUIRE_DUAL_STACK:
        errors.append(field.invalid("spec.ipFamilyPolicy", policy, "this cluster is not configured for dual-stack services"))
    errors += [
        field.invalid(f"spec.ipFamilies[{i}]", f, "not configured on this cluster")
        for i, f in enumerate(inferred)
        if f != family
    ]
    if not errors:
        spec["ipFamilies"] = inferred or [family]
    return errors


def cluster_ip_fields_errors(spec: Obj) -> list[FieldError]:
    """``ValidateServiceClusterIPsRelatedFields``: ``clusterIP`` and ``clusterIPs`` in step,
    well-formed addresses, supported families and policy; and what ``ValidateService`` says of
    them per type (none for ExternalName, never ``None`` for NodePort or LoadBalancer)."""
    kind = service_type(spec)
    if kind == "ExternalName":
        named = [key for key in ("clusterIPs", "ipFamilies") if spec.get(key)]
        named += ["ipFamilyPolicy"] if spec.get("ipFamilyPolicy") is not None else []
        return [field.forbidden(f"spec.{key}", "may not be set for ExternalName services") for key in named]
    errors: list[FieldError] = []
    if kind in ("NodePort", "LoadBalancer") and is_headless(spec) and field.items(spec.get("clusterIPs")):
        errors.append(field.invalid("spec.clusterIPs[0]", CLUSTER_IP_NONE, f"may not be set to 'None' for {kind} services"))
    ip, ips = spec.get("clusterIP"), spec.get("clusterIPs")
    ips = ips if isinstance(ips, list) else []
    if ip:
        if not ips:
            errors.append(field.required("spec.clusterIPs"))
        elif ips[0] != ip:
            errors.append(field.invalid("spec.clusterIPs", go_cluster_ips(ips), "first value must match `clusterIP`"))
    elif ips:
        errors.append(field.invalid("spec.clusterIPs", go_cluster_ips(ips), "must be empty when `clusterIP` is not specified"))
    seen: set[Any] = set()
    for i, family in enumerate(field.items(spec.get("ipFamilies"))):
        if family not in IP_FAMILIES:
            errors.append(field.not_supported(f"spec.ipFamilies[{i}]", family, IP_FAMILIES))
        if family in seen:
            errors.append(field.duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in IP_FAMILY_POLICIES:
        errors.append(field.not_supported("spec.ipFamilyPolicy", policy, IP_FAMILY_POLICIES))
    for i, value in enumerate(ips):
        if i == 0 and value == CLUSTER_IP_NONE:
            if len(ips) > 1:
                errors.append(field.invalid("spec.clusterIPs", go_cluster_ips(ips), "'None' must be the first and only value"))
            continue
        if not _valid_ip(value):
            errors.append(field.invalid(f"spec.clusterIPs[{i}]", value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
    if len(ips) > 2:
        errors.append(field.invalid("spec.clusterIPs", go_cluster_ips(ips), "may only hold up to 2 values"))
    return errors


def _valid_ip(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
