"""What a ResourceQuota counts, as kube's quota evaluators count it (``pkg/quota/v1/evaluator/core``
and the generic object count evaluator of ``k8s.io/apiserver/pkg/quota/v1/generic``).

In: a kind (group and plural), its objects as dicts, a quota's hard resource names and scopes.
Out: usage as exact quantities (:data:`Usage`), which resource names a kind's evaluator
answers for, and :func:`check_request` -- the admission's arithmetic over a namespace's quotas,
which either returns the quotas whose ``status.used`` the write charges or raises
:class:`QuotaRefused` with kube's message. Pure: no I/O; the API server's admission and the
hub's resourcequota controller both call it.

Per kind, as kube's evaluators:

* every kind: ``count/<plural>[.<group>]`` (1 per object), and the legacy names of ConfigMaps,
  Secrets, ReplicationControllers and ResourceQuotas; charged on create only;
* Services: ``services``, ``services.loadbalancers``, ``services.nodeports`` (the ports of a
  NodePort or LoadBalancer Service), charged on create and update (a type change);
* PersistentVolumeClaims: ``persistentvolumeclaims``, ``requests.storage`` and the
  ``<class>.storageclass.storage.k8s.io/`` forms of both, on create and update;
* Pods: ``pods`` and compute (``requests.*``, ``limits.*``, bare ``cpu``/``memory``, extended
  resources as ``requests.<name>``) of pods not terminal, ``count/pods`` of all; on create.
  Scopes (Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass,
  CrossNamespacePodAffinity) select pods; a scoped quota matches no other kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from controlplane.apis.kube.field import mapping
from controlplane.apis.pods import pod_requests, requirement_matches
from controlplane.apis.quantity import (
    KubeQuantity,
    QuantityError,
    QuantityFormat,
    parse_kube_quantity,
    parse_quantity,
)
from controlplane.apis.timestamps import parse_time_or_none

#: Resource name -> quantity (exact value and the suffix family kube prints it in).
Usage = dict[str, KubeQuantity]
Kind = tuple[str, str]  # (group, plural)

PODS: Kind = ("", "pods")
SERVICES: Kind = ("", "services")
CLAIMS: Kind = ("", "persistentvolumeclaims")
#: ``ignoredResources``: never counted nor charged.
IGNORED: frozenset[Kind] = frozenset({("", "events"), ("events.k8s.io", "events")})
#: ``legacyObjectCountAliases``.
_LEGACY_COUNTS: dict[Kind, str] = {
    ("", "configmaps"): "configmaps",
    ("", "secrets"): "secrets",
    ("", "replicationcontrollers"): "replicationcontrollers",
    ("", "resourcequotas"): "resourcequotas",
}
_SERVICE_RESOURCES = ("services", "services.loadbalancers", "services.nodeports")
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
_CLAIM_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_POD_COMPUTE = (
    "pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
)
#: ``podConstraintsFunc``'s validation set: a quota on these needs every container to declare them.
_EXPLICIT = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
_BINARY_RESOURCES = ("memory", "ephemeral-storage", "storage")
_TERMINAL_PHASES = ("Succeeded", "Failed")
_ONE = KubeQuantity(Decimal(1), QuantityFormat.DECIMAL_SI)
_NANO = Decimal("1e9")
#: A pod's request or limit past this many base units (kube reads ``1e100000`` and
#: ``1e999999999``) counts as this many in quota usage: far beyond any real quantity (an
#: exbibyte is about 1.2e18 bytes), it keeps the sums small integers, where the exact value
#: would be an integer of a hundred thousand digits that takes seconds of the hub's event loop
#: to build, or, past Python's decimal range, a pod left out of its namespace's quota.
_COUNTED_MAX = Decimal("1e30")


class QuotaRefused(Exception):
    """A write the quotas refuse; ``message`` is kube's, after ``<resource> "<name>" is forbidden: ``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class ScopeRequirement:
    scope: str
    operator: str
    values: tuple[str, ...] = ()


def count_name(kind: Kind) -> str:
    """``ObjectCountQuotaResourceNameFor``: ``count/deployments.apps``, ``count/configmaps``."""
    group, plural = kind
    return f"count/{plural}.{group}" if group else f"count/{plural}"


def counted_kind(resource: str) -> Kind | None:
    """The kind whose objects ``resource`` (a quota's hard resource name) counts, if any."""
    if resource.startswith("count/"):
        plural, _, group = resource.removeprefix("count/").partition(".")
        return (group, plural) if plural else None
    for kind, legacy in _LEGACY_COUNTS.items():
        if resource == legacy:
            return kind
    if resource in _SERVICE_RESOURCES:
        return SERVICES
    if resource in ("persistentvolumeclaims", "requests.storage") or _STORAGE_CLASS_SUFFIX in resource:
        return CLAIMS
    if resource in _POD_COMPUTE or _is_pod_prefixed(resource):
        return PODS
    return None


def _is_pod_prefixed(resource: str) -> bool:
    """Hugepages (bare or ``requests.``/``limits.``) and ``requests.<extended resource>``."""
    bare = resource.removeprefix("requests.").removeprefix("limits.")
    if bare.startswith("hugepages-"):
        return True
    return resource.startswith("requests.") and _is_extended(bare)


def _is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: a qualified name outside kubernetes.io, not a request itself."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def handles(kind: Kind, operation: str) -> bool:
    """``Evaluator.Handles``: whether a write of ``operation`` (CREATE/UPDATE) may charge quota."""
    if kind in IGNORED:
        return False
    if kind in (SERVICES, CLAIMS):
        return operation in ("CREATE", "UPDATE")
    return operation == "CREATE"


def matching_resources(kind: Kind, names: Iterable[str]) -> list[str]:
    """``Evaluator.MatchingResources``: the names of ``names`` that ``kind``'s evaluator counts."""
    return sorted(name for name in names if counted_kind(name) == kind or name == count_name(kind))


# --- usage of one object --------------------------------------------------------------------


def object_usage(kind: Kind, obj: Mapping[str, Any], *, now: datetime) -> Usage:
    """``Evaluator.Usage``: what ``obj`` of ``kind`` consumes."""
    usage: Usage = {count_name(kind): _ONE}
    legacy = _LEGACY_COUNTS.get(kind)
    if legacy is not None:
        usage[legacy] = _ONE
    if kind == SERVICES:
        usage.update(_service_usage(obj))
    elif kind == CLAIMS:
        usage.update(_claim_usage(obj))
    elif kind == PODS and not _terminal(obj, now=now):
        usage.update(_pod_compute_usage(mapping(obj.get("spec"))))
    return usage


def _count(number: int) -> KubeQuantity:
    return KubeQuantity(Decimal(number), QuantityFormat.DECIMAL_SI)


def _service_usage(obj: Mapping[str, Any]) -> Usage:
    spec = mapping(obj.get("spec"))
    ports = [mapping(p) for p in spec.get("ports") or () if isinstance(p, dict)]
    kind = spec.get("type")
    node_ports = 0
    if kind == "NodePort" or (kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False):
        node_ports = len(ports)
    elif kind == "LoadBalancer":  # node ports not allocated: only those set explicitly
        node_ports = sum(1 for p in ports if p.get("nodePort"))
    return {
        "services": _ONE,
        "services.loadbalancers": _count(1 if kind == "LoadBalancer" else 0),
        "services.nodeports": _count(node_ports),
    }


def _claim_usage(obj: Mapping[str, Any]) -> Usage:
    spec = mapping(obj.get("spec"))
    usage: Usage = {"persistentvolumeclaims": _ONE}
    storage = _quantity(mapping(mapping(spec.get("resources")).get("requests")).get("storage"))
    if storage is not None:
        usage["requests.storage"] = storage
    annotations = mapping(mapping(obj.get("metadata")).get("annotations"))
    storage_class = spec.get("storageClassName") or annotations.get(_CLAIM_STORAGE_CLASS_ANNOTATION)
    if isinstance(storage_class, str) and storage_class:
        prefix = storage_class + _STORAGE_CLASS_SUFFIX
        usage[prefix + "persistentvolumeclaims"] = _ONE
        if storage is not None:
            usage[prefix + "requests.storage"] = storage
    return usage


def _quantity(raw: Any) -> KubeQuantity | None:
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        return None
    try:
        return parse_kube_quantity(raw)
    except (QuantityError, ValueError):
        return None


def _terminal(pod: Mapping[str, Any], *, now: datetime) -> bool:
    """Not ``QuotaV1Pod``: terminal, or past its deletion's grace period."""
    if mapping(pod.get("status")).get("phase") in _TERMINAL_PHASES:
        return True
    meta = mapping(pod.get("metadata"))
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if isinstance(grace, int) and (moment := parse_time_or_none(deleted, naive_as_utc=True)) is not None:
        return now > moment + timedelta(seconds=grace)
    return False


def _nano_quantities(raw: Mapping[str, Any]) -> dict[str, int]:
    """A resource list in nano units (exact for every quantity up to :data:`_COUNTED_MAX`, which
    larger ones count as); malformed ones left out."""
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            amount = parse_quantity(value)
        except (QuantityError, ValueError, TypeError, ArithmeticError):
            continue
        out[str(name)] = int(max(-_COUNTED_MAX, min(amount, _COUNTED_MAX)) * _NANO)
    return out


def _from_nano(name: str, amount: int) -> KubeQuantity:
    value = Decimal(amount) / _NANO
    binary = name in _BINARY_RESOURCES or name.startswith("hugepages-")
    whole = value == value.to_integral_value()
    fmt = QuantityFormat.BINARY_SI if binary and whole and int(value) % 1024 == 0 else QuantityFormat.DECIMAL_SI
    return KubeQuantity(value, fmt)


def _limits_only(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with each container's requests dropped: its effective requests are its limits."""
    def only_limits(containers: Any) -> list[dict[str, Any]]:
        return [
            {**c, "resources": {"limits": mapping(mapping(c.get("resources")).get("limits"))}}
            for c in containers or () if isinstance(c, dict)
        ]
    return {**spec, "containers": only_limits(spec.get("containers")), "initContainers": only_limits(spec.get("initContainers"))}


def _pod_compute_usage(spec: Mapping[str, Any]) -> Usage:
    """``podComputeUsageHelper`` of the pod's ``PodRequests`` and ``PodLimits``."""
    requests = {k: _from_nano(k, v) for k, v in pod_requests(spec, read=_nano_quantities).items()}
    limits = {k: _from_nano(k, v) for k, v in pod_requests(_limits_only(spec), read=_nano_quantities).items()}
    return _compute_usage(requests, limits)


def _compute_usage(requests: Mapping[str, KubeQuantity], limits: Mapping[str, KubeQuantity]) -> Usage:
    usage: Usage = {"pods": _ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            usage[name] = usage["requests." + name] = requests[name]
        if name in limits:
            usage["limits." + name] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage["requests." + name] = amount
        elif _is_extended(name):
            usage["requests." + name] = amount
    return usage


# --- scopes ---------------------------------------------------------------------------------


def scope_requirements(quota: Mapping[str, Any]) -> list[ScopeRequirement]:
    """``getScopeSelectorsFromQuota``: ``spec.scopes`` (as Exists) and the scope selector."""
    spec = mapping(quota.get("spec"))
    out = [ScopeRequirement(str(scope), "Exists") for scope in spec.get("scopes") or ()]
    for req in mapping(spec.get("scopeSelector")).get("matchExpressions") or ():
        req = mapping(req)
        out.append(ScopeRequirement(
            str(req.get("scopeName") or ""), str(req.get("operator") or ""),
            tuple(str(v) for v in req.get("values") or ()),
        ))
    return out


def matches_scopes(kind: Kind, requirements: Sequence[ScopeRequirement], obj: Mapping[str, Any]) -> bool:
    """Every requirement holds for ``obj``; no kind but pods matches any (``MatchesNoScopeFunc``)."""
    if not requirements:
        return True
    return kind == PODS and all(_pod_in_scope(req, obj) for req in requirements)


def _pod_in_scope(req: ScopeRequirement, pod: Mapping[str, Any]) -> bool:
    """``podMatchesScopeFunc``."""
    spec = mapping(pod.get("spec"))
    if req.scope == "Terminating":
        return isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] >= 0
    if req.scope == "NotTerminating":
        return not (isinstance(spec.get("activeDeadlineSeconds"), int) and spec["activeDeadlineSeconds"] >= 0)
    if req.scope == "BestEffort":
        return _best_effort(spec)
    if req.scope == "NotBestEffort":
        return not _best_effort(spec)
    if req.scope == "PriorityClass":
        name = str(spec.get("priorityClassName") or "")
        if req.operator == "Exists":
            return bool(name)
        return requirement_matches(req.operator, req.values, name)
    if req.scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(spec)
    return False


def _best_effort(spec: Mapping[str, Any]) -> bool:
    """QoS BestEffort: no container asks for or limits cpu or memory."""
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = mapping(mapping(container).get("resources"))
        for part in ("requests", "limits"):
            if any(name in ("cpu", "memory") for name in mapping(resources.get(part))):
                return False
    return True


def _cross_namespace_affinity(spec: Mapping[str, Any]) -> bool:
    """``usesCrossNamespacePodAffinity``: a pod (anti-)affinity term with namespaces or a namespace selector."""
    affinity = mapping(spec.get("affinity"))
    for part in ("podAffinity", "podAntiAffinity"):
        rules = mapping(affinity.get(part))
        terms = [mapping(t) for t in rules.get("requiredDuringSchedulingIgnoredDuringExecution") or ()]
        terms += [
            mapping(mapping(t).get("podAffinityTerm"))
            for t in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        ]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


# --- resource lists -------------------------------------------------------------------------


def read_list(raw: Any) -> Usage:
    """A stored resource list (``status.hard``/``used``); unreadable quantities left out."""
    out: Usage = {}
    for name, value in mapping(raw).items():
        quantity = _quantity(value)
        if quantity is not None:
            out[str(name)] = quantity
    return out


def written_list(usage: Mapping[str, KubeQuantity]) -> dict[str, str]:
    return {name: str(quantity) for name, quantity in sorted(usage.items())}


def add(a: Mapping[str, KubeQuantity], b: Mapping[str, KubeQuantity]) -> Usage:
    """``quota.Add``: the sum keeps ``a``'s format where ``a`` has the resource."""
    out = dict(a)
    for name, amount in b.items():
        mine = out.get(name)
        out[name] = amount if mine is None else KubeQuantity(mine.value + amount.value, mine.format)
    return out


def equal(a: Mapping[str, KubeQuantity], b: Mapping[str, KubeQuantity]) -> bool:
    """``quota.Equals``: the same names with the same values (whatever their format)."""
    return a.keys() == b.keys() and all(a[name].value == b[name].value for name in a)


def _subtract_non_negative(a: Usage, b: Usage) -> Usage:
    out: Usage = {}
    for name, amount in a.items():
        other = b.get(name)
        value = amount.value - (other.value if other is not None else 0)
        out[name] = KubeQuantity(max(value, Decimal(0)), amount.format)
    return out


def _pretty(usage: Mapping[str, KubeQuantity]) -> str:
    """``prettyPrint``: ``name=value`` sorted by name, comma-joined."""
    return ",".join(f"{name}={usage[name]}" for name in sorted(usage))


def usage_stats(
    kind: Kind, objects: Iterable[Mapping[str, Any]], *, resources: Sequence[str],
    requirements: Sequence[ScopeRequirement], now: datetime,
) -> Usage:
    """``UsageStats``: what the objects of ``kind`` in the scopes use of ``resources`` (zero when none)."""
    wanted = matching_resources(kind, resources)
    total: Usage = {name: _count(0) for name in wanted}
    for obj in objects:
        if matches_scopes(kind, requirements, obj):
            usage = object_usage(kind, obj, now=now)
            total = add(total, {name: amount for name, amount in usage.items() if name in total})
    return total


# --- admission ------------------------------------------------------------------------------


def _constraints(kind: Kind, resources: Sequence[str], obj: Mapping[str, Any]) -> str | None:
    """``podConstraintsFunc``: a quota on cpu or memory needs every container to declare it."""
    required = [name for name in resources if name in _EXPLICIT]
    if kind != PODS or not required:
        return None
    spec = mapping(obj.get("spec"))
    missing: dict[str, set[str]] = {}
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        container = mapping(container)
        resources_of = mapping(container.get("resources"))
        limits = mapping(resources_of.get("limits"))
        # The API's defaulting makes a limit the request where none is given.
        requests = {**limits, **mapping(resources_of.get("requests"))}
        declared = _compute_usage(read_list(requests), read_list(limits))
        for name in required:
            if name not in declared:
                missing.setdefault(name, set()).add(str(container.get("name") or ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def check_request(
    quotas: Sequence[Mapping[str, Any]], kind: Kind, *, operation: str, obj: Mapping[str, Any],
    old: Mapping[str, Any] | None, now: datetime,
) -> dict[int, Usage]:
    """``CheckRequest``: the new ``status.used`` of each quota (by index) the write charges.

    Raises :class:`QuotaRefused` when a quota it matches has no usage for a resource yet, or
    when the write would take a resource past its hard limit. A quota is read by its status
    (``status.hard``), as kube's admission reads it: one the controller has not seen yet limits
    nothing.
    """
    if not handles(kind, operation):
        return {}
    interesting: list[int] = []
    for index, quota in enumerate(quotas):
        status = mapping(quota.get("status"))
        hard_names = list(mapping(status.get("hard")))
        restricted = matching_resources(kind, hard_names)
        if not restricted or not matches_scopes(kind, scope_requirements(quota), obj):
            continue
        name = mapping(quota.get("metadata")).get("name")
        failed = _constraints(kind, restricted, obj)
        if failed is not None:
            raise QuotaRefused(f"failed quota: {name}: {failed}")
        used = mapping(status.get("used"))
        if any(resource not in used for resource in restricted):
            raise QuotaRefused(f"status unknown for quota: {name}, resources: {','.join(sorted(restricted))}")
        interesting.append(index)
    if not interesting:
        return {}
    usage = object_usage(kind, obj, now=now)
    deltas = {index: usage for index in interesting}
    if operation == "UPDATE" and old is not None:
        previous = object_usage(kind, old, now=now)
        delta = _subtract_non_negative(usage, previous)
        for index in interesting:
            if matches_scopes(kind, scope_requirements(quotas[index]), old):
                deltas[index] = delta
    out: dict[int, Usage] = {}
    for index, delta in deltas.items():
        delta = {name: amount for name, amount in delta.items() if amount.value != 0}
        quota = quotas[index]
        status = mapping(quota.get("status"))
        hard, used = read_list(status.get("hard")), read_list(status.get("used"))
        requested = {name: amount for name, amount in delta.items() if name in hard}
        if not requested:
            continue
        new_used = add(used, requested)
        exceeded = sorted(name for name in requested if new_used[name].value > hard[name].value)
        if exceeded:
            raise QuotaRefused(
                f"exceeded quota: {mapping(quota.get('metadata')).get('name')}, "
                f"requested: {_pretty({n: requested[n] for n in exceeded})}, "
                f"used: {_pretty({n: used[n] for n in exceeded if n in used})}, "
                f"limited: {_pretty({n: hard[n] for n in exceeded})}"
            )
        out[index] = new_used
    return out
