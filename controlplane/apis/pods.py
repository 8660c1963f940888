"""Kubernetes pod semantics, written once: requests, taints and tolerations, node selectors.

The hub's interpreter (what a replica needs), the member agent (what a node has left), the
simulated member's scheduler (where a pod goes) and the reports all ask the same questions
about a pod; they import the answers from here so they cannot drift apart. Every rule
follows kube, and names the kube function it mirrors:

* :func:`pod_requests` — ``PodRequests`` (``k8s.io/component-helpers/resource``): the sum
  over app containers and restartable ("sidecar", ``restartPolicy: Always``) init
  containers, element-wise max with each one-shot init container plus the sidecars started
  before it, plus ``spec.overhead``. A container's missing request takes its limit, as the
  API server's defaulting does. Zero amounts are left out.
* :func:`pod_held` — what a pod holds on a member: :func:`pod_requests` plus the NVIDIA GPUs and
  MIG devices its Dynamic Resource Allocation claims hold (allocated) or ask for (not yet),
  counted as ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>`` (:mod:`controlplane.apis.dra`),
  so a pod holding 2 GPUs through a claim counts as a pod requesting 2 GPUs does.
* :func:`tolerates` — ``Toleration.ToleratesTaint`` (``k8s.io/api/core/v1``): an empty
  effect matches every effect, an empty key every key; ``Exists`` matches any value,
  ``Equal`` (or an empty operator) compares values — also when the key is empty; any other
  operator tolerates nothing.
* :func:`unschedulable_condition` — the ``PodScheduled`` condition kube-scheduler sets False
  (reason ``Unschedulable``) on a pod it could not place: an unbound pod not yet finished
  (phase neither ``Succeeded`` nor ``Failed``) that carries it.
* :func:`pod_claims` — the PersistentVolumeClaims a pod's volumes name; :func:`missing_claim` and
  :func:`waits_for_unbound_claims` read kube-scheduler's VolumeBinding words for a pod whose
  claim does not exist (``persistentvolumeclaim "data" not found``) or is not bound yet (``pod
  has unbound immediate PersistentVolumeClaims``, which names no claim).
* :func:`stuck_container` — a container of a bound pod waiting for a reason that does not pass
  by itself (kubelet's ``CreateContainerConfigError``, the runtime's ``ErrImagePull``,
  ``CrashLoopBackOff``...): the pod needs something in the cluster or its spec changed.
* :func:`requirement_matches` / :func:`node_selector_matches` — node affinity's
  ``matchExpressions`` operators and ``nodeSelector`` (``k8s.io/component-helpers/
  scheduling/corev1/nodeaffinity``); an empty selector term matches no node.

In: plain dicts as the Kubernetes API returns them, or small frozen values; out: plain
values. Pure: nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from controlplane.apis.dra import ObjectKey, ObjectLookup, pod_claimed_resources
from controlplane.apis.quantity import to_int
from controlplane.apis.untyped import Obj
from controlplane.apis.views import ObjectView

"""A Kubernetes object (or part of one) as a JSON-compatible dict."""


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


#: Pod phases after which nothing runs or is placed again.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def unschedulable_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``PodScheduled`` False condition of a pod the member's scheduler could not place
    (unbound and not finished), or None when the pod is bound, finished or not yet tried."""
    status = pod.get("status") or {}
    if (pod.get("spec") or {}).get("nodeName") or status.get("phase") in TERMINAL_PHASES:
        return None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return cond  # type: ignore[no-any-return]
    return None


#: kube-scheduler's ``PodScheduled`` reason for a pod that still has scheduling gates (``v1.PodReasonSchedulingGated``).
REASON_SCHEDULING_GATED = "SchedulingGated"


def scheduling_gated_condition(pod: Mapping[str, Any]) -> dict[str, str] | None:
    """The ``PodScheduled`` condition kube-scheduler gives a pod whose ``spec.schedulingGates`` is
    not empty (False, ``SchedulingGated``), for a pod held where no scheduler runs (the hub);
    None for an ungated pod."""
    if not (pod.get("spec") or {}).get("schedulingGates"):
        return None
    return {"type": "PodScheduled", "status": "False", "reason": REASON_SCHEDULING_GATED,
            "message": "Scheduling is blocked due to non-empty scheduling gates"}


def pod_claims(pod_spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The PersistentVolumeClaims the volumes of ``pod_spec`` name (``persistentVolumeClaim.claimName``), in order."""
    return tuple(
        str(claim["claimName"])
        for volume in pod_spec.get("volumes") or ()
        if isinstance(volume, Mapping)
        and isinstance(claim := volume.get("persistentVolumeClaim"), Mapping)
        and claim.get("claimName")
    )


#: VolumeBinding's PreFilter status for a pod whose claim does not exist (the claim lister's NotFound).
_MISSING_CLAIM: Final = re.compile(r'(?:^|: )persistentvolumeclaim "([^"]+)" not found')
#: VolumeBinding's PreFilter status for a pod with a claim of immediate binding mode not bound yet.
UNBOUND_IMMEDIATE_CLAIMS: Final = "pod has unbound immediate PersistentVolumeClaims"


def missing_claim(message: str) -> str | None:
    """The claim a scheduling message says does not exist (``0/3 nodes are available:
    persistentvolumeclaim "data" not found. preemption: ...``), or None."""
    found = _MISSING_CLAIM.search(message)
    return found.group(1) if found else None


def waits_for_unbound_claims(message: str) -> bool:
    """Whether a scheduling message says the pod waits for a claim to be bound."""
    return UNBOUND_IMMEDIATE_CLAIMS in message


#: Waiting reasons of a container that will not start until something changes: its
#: configuration cannot be built (a ConfigMap, Secret or key missing), its image cannot be
#: pulled, it keeps crashing. ``ContainerCreating`` and ``PodInitializing`` pass by themselves.
STUCK_WAITING_REASONS = frozenset({
    "CreateContainerConfigError",
    "CreateContainerError",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
    "RunContainerError",
})


def stuck_container(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``waiting`` state (reason, message) of the first container of a bound, unfinished
    pod that waits for a reason in :data:`STUCK_WAITING_REASONS` (init containers first), or
    None."""
    status = pod.get("status") or {}
    if not (pod.get("spec") or {}).get("nodeName") or status.get("phase") in TERMINAL_PHASES:
        return None
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or ():
            waiting = (entry.get("state") or {}).get("waiting") if isinstance(entry, Mapping) else None
            if isinstance(waiting, Mapping) and waiting.get("reason") in STUCK_WAITING_REASONS:
                return waiting
    return None


#: The effects kube-scheduler's TaintToleration filter checks (PreferNoSchedule only scores).
FILTERED_EFFECTS = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class SelectorOperator(StrEnum):
    """Operators of a node selector requirement (``nodeAffinity`` match expressions)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


# ---------------------------------------------------------------------------------------------
# Taints and tolerations
# ---------------------------------------------------------------------------------------------


class TaintLike(Protocol):
    """Anything with a taint's fields (the frozen :class:`FrozenTaint`, the API model :class:`controlplane.apis.meta.Taint`)."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str: ...


class TolerationLike(Protocol):
    """Anything with a toleration's fields (the frozen :class:`FrozenToleration`, the API model
    :class:`controlplane.apis.meta.Toleration`)."""

    @property
    def key(self) -> str | None: ...
    @property
    def operator(self) -> str | None: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str | None: ...


def tolerates(toleration: TolerationLike, taint: TaintLike) -> bool:
    """Whether ``toleration`` tolerates ``taint``: kube's ``Toleration.ToleratesTaint``."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or TolerationOperator.EQUAL
    if operator == TolerationOperator.EXISTS:
        return True
    if operator == TolerationOperator.EQUAL:
        return (toleration.value or "") == (taint.value or "")
    return False


def untolerated(taints: Iterable[FrozenTaint], tolerations: Iterable[TolerationLike]) -> tuple[FrozenTaint, ...]:
    """Taints with a scheduling effect (NoSchedule, NoExecute) that no toleration covers."""
    tols = tuple(tolerations)
    return tuple(
        t for t in taints if t.effect in FILTERED_EFFECTS and not any(tolerates(tol, t) for tol in tols)
    )


@dataclass(frozen=True, slots=True)
class FrozenTaint:
    """A node's or cluster's taint as the pure semantics compare it: a hashable value read once from
    the object (the pydantic API model is :class:`controlplane.apis.meta.Taint`)."""

    key: str
    value: str = ""
    effect: str = TaintEffect.NO_SCHEDULE

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> FrozenTaint:
        return cls(
            key=str(raw.get("key", "")),
            value=str(raw.get("value") or ""),
            effect=str(raw.get("effect") or TaintEffect.NO_SCHEDULE),
        )

    def describe(self) -> str:
        """The taint as kube-scheduler prints it in reasons: ``{key: value}``."""
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class FrozenToleration:
    """A pod's toleration as the pure semantics compare it: a hashable value read once from the
    object (the pydantic API model is :class:`controlplane.apis.meta.Toleration`)."""

    key: str = ""
    operator: str = TolerationOperator.EQUAL
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> FrozenToleration:
        seconds = raw.get("tolerationSeconds")
        return cls(
            key=str(raw.get("key") or ""),
            operator=str(raw.get("operator") or TolerationOperator.EQUAL),
            value=str(raw.get("value") or ""),
            effect=str(raw.get("effect") or ""),
            toleration_seconds=int(seconds) if seconds is not None else None,
        )

    def to_dict(self) -> Obj:
        out: Obj = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out

    def tolerates(self, taint: TaintLike) -> bool:
        """Kubernetes toleration semantics (:func:`tolerates`)."""
        return tolerates(self, taint)


# ---------------------------------------------------------------------------------------------
# Node selectors
# ---------------------------------------------------------------------------------------------


def requirement_matches(operator: str, values: Sequence[str], value: str | None) -> bool:
    """Whether a label ``value`` (None: the node lacks the label) satisfies one requirement."""
    if operator == SelectorOperator.IN:
        return value is not None and value in values
    if operator == SelectorOperator.NOT_IN:
        return value is None or value not in values
    if operator == SelectorOperator.EXISTS:
        return value is not None
    if operator == SelectorOperator.DOES_NOT_EXIST:
        return value is None
    if operator in (SelectorOperator.GT, SelectorOperator.LT):
        if value is None or len(values) != 1:
            return False
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == SelectorOperator.GT else have < bound
    return False


def node_selector_matches(selector: Iterable[tuple[str, str]], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` carry every ``nodeSelector`` pair (as ``(key, value)`` items)."""
    return all(labels.get(key) == value for key, value in selector)


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------

QuantityReader = Callable[[Mapping[str, Any]], dict[str, int]]
"""Turns a resource list (``{name: quantity}``) into integers in base units."""


def read_quantities(raw: Mapping[str, Any]) -> dict[str, int]:
    """Every quantity of a resource list in base units; a malformed one raises QuantityError."""
    return {name: to_int(name, qty) for name, qty in raw.items()}


def container_requests(
    container: Mapping[str, Any], *, read: QuantityReader = read_quantities
) -> dict[str, int]:
    """A container's effective requests: limits fill in missing requests, as the API server does."""
    res = container.get("resources") or {}
    requests = dict(res.get("requests") or {})
    for name, qty in (res.get("limits") or {}).items():
        requests.setdefault(name, qty)
    return read(requests)


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def pod_requests(pod_spec: Mapping[str, Any], *, read: QuantityReader = read_quantities) -> dict[str, int]:
    """A pod's effective requests (its ``spec``), computed as kube's ``PodRequests`` does.

    ``read`` parses each resource list; the default parses every resource and raises on a
    malformed quantity, the agent passes one that keeps only what it tracks.
    """
    total: dict[str, int] = {}
    for c in pod_spec.get("containers") or ():
        _add(total, container_requests(c, read=read))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod_spec.get("initContainers") or ():
        req = container_requests(c, read=read)
        if c.get("restartPolicy") == "Always":
            _add(total, req)
            _add(sidecars, req)
            during = dict(sidecars)
        else:
            during = dict(req)
            _add(during, sidecars)
        for k, v in during.items():
            init_peak[k] = max(init_peak.get(k, 0), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    _add(total, read(pod_spec.get("overhead") or {}))
    return {k: v for k, v in total.items() if v}


def pod_held(
    pod: Mapping[str, Any],
    claims: ObjectLookup | None,
    *,
    read: QuantityReader = read_quantities,
    holders: Mapping[ObjectKey, str] | None = None,
) -> dict[str, int]:
    """What ``pod`` (a whole pod: its claims' names are in its status) takes from its member:
    :func:`pod_requests` of its spec plus its DRA claims' GPU and MIG devices (:func:`~controlplane.
    apis.dra.pod_claimed_resources`), ``claims`` finding the member's claims and claim templates
    (None: the pod's claims are not known, they count nothing); a claim shared with other pods
    counts only on the pod ``holders`` names (:func:`~controlplane.apis.dra.shared_claim_holders`)."""
    requests = pod_requests(pod.get("spec") or {}, read=read)
    if claims is not None and (pod.get("spec") or {}).get("resourceClaims"):
        _add(requests, pod_claimed_resources(pod, claims, holders))
    return requests


class PodView(ObjectView):
    """A Pod as stored or as a member lists it (see :mod:`controlplane.apis.views`)."""

    __slots__ = ()

    @property
    def phase(self) -> str | None:
        """``status.phase`` (None when not reported yet)."""
        phase = self.status.get("phase")
        return str(phase) if phase else None

    @property
    def containers(self) -> Sequence[Mapping[str, Any]]:
        return self.spec.get("containers") or ()

    @property
    def init_containers(self) -> Sequence[Mapping[str, Any]]:
        return self.spec.get("initContainers") or ()

    @property
    def pod_level_requests(self) -> Mapping[str, Any]:
        """``spec.resources.requests``: the pod-level requests (kube's PodLevelResources), as written."""
        return (self.spec.get("resources") or {}).get("requests") or {}
