"""What a pod's Dynamic Resource Allocation claims ask of NVIDIA GPUs, written once for the hub and the
simulated members.

A pod asks for devices through ``spec.resourceClaims[]``: each entry names a ResourceClaimTemplate
(``resourceClaimTemplateName``: one claim per pod) or a ResourceClaim (``resourceClaimName``: one
claim the pods share), and the claim's ``spec.devices.requests`` say how many devices of which
DeviceClass. gpufed acts on the requests for whole NVIDIA GPUs:

* a request counts when its ``deviceClassName`` is :data:`GPU_DEVICE_CLASS` (``gpu.nvidia.com``,
  the class NVIDIA's DRA driver publishes for whole GPUs: ``device.attributes['gpu.nvidia.com'].type
  == 'gpu'``). Other classes (``mig.nvidia.com``, a NIC's) are left to the member: they add nothing
  the hub places;
* ``allocationMode: ExactCount`` counts ``count`` GPUs (1 when unset, as kube defaults it);
  ``All`` (every matching device of the node the pod lands on) counts :data:`ALL_DEVICES_ESTIMATE`
  GPUs, an 8-GPU HGX board, the nodes DRA GPU work is written for: the hub cannot know which node a
  member will pick, and 8 keeps such a pod from being packed beside others;
* a ``firstAvailable`` request counts its first subrequest that asks for the GPU class (kube tries
  them in order; the first is what the author prefers);
* a CEL selector of the simple equality form ``device.attributes['gpu.nvidia.com'].productName ==
  'NVIDIA H100 80GB HBM3'`` (either quote, either operand order, alone or as one conjunct of
  ``&&``) restricts the GPU model: it becomes the node selector ``nvidia.com/gpu.product`` with the
  name as GPU Feature Discovery labels it (spaces as dashes: ``NVIDIA-H100-80GB-HBM3``). Any other
  expression (``||``, ``in``, ``matches``, a capacity comparison) leaves the model open.

A claim shared through ``resourceClaimName`` is counted for every pod that names it, as a claim per
pod is: the hub places replicas, and a shared claim's devices sit on one node anyway.

:func:`with_claimed_gpus` turns a pod spec's claims into the ``nvidia.com/gpu`` requests and
product selector they stand for, so the interpreter's replica requirements (the hub's feasibility
and division) and the simulated member's scheduler read DRA GPU work as they read device-plugin
requests. It writes only a copy that is read, never the object sent to a member.

In: pod specs and claim specs as plain dicts. Out: :class:`ClaimedGpus`, rewritten copies. Pure.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU

#: The DeviceClass of whole GPUs NVIDIA's DRA driver (k8s-dra-driver-gpu) installs.
GPU_DEVICE_CLASS: Final = "gpu.nvidia.com"
#: What an ``All`` request of the GPU class is counted as (see the module docstring).
ALL_DEVICES_ESTIMATE: Final = 8
RESOURCE_API_VERSION: Final = "resource.k8s.io/v1"

_QUOTED = r"""(?:'([^'\\]*)'|"([^"\\]*)")"""
_ATTRIBUTE = r"""device\.attributes\[\s*(?:'gpu\.nvidia\.com'|"gpu\.nvidia\.com")\s*\]\.productName"""
_PRODUCT_EQUALS: Final = (
    re.compile(rf"^\s*{_ATTRIBUTE}\s*==\s*{_QUOTED}\s*$"),
    re.compile(rf"^\s*{_QUOTED}\s*==\s*{_ATTRIBUTE}\s*$"),
)

#: The spec of a claim template (its ``spec.spec``) or a claim (its ``spec``) by kind and name in the
#: pod's namespace; None: not known (not created yet).
ClaimLookup = Callable[[str, str], Mapping[str, Any] | None]
TEMPLATE: Final = "ResourceClaimTemplate"
_NOT_POD_SPECS: Final = frozenset({"metadata", "status"})
CLAIM: Final = "ResourceClaim"


@dataclass(frozen=True, slots=True)
class ClaimedGpus:
    """The whole NVIDIA GPUs one pod's claims ask for, and the model they pin (None: any)."""

    count: int = 0
    product: str | None = None


def product_of_selector(expression: str) -> str | None:
    """The GPU model a CEL selector pins, when it is the simple equality form (or a ``&&`` of terms
    one of which is); None otherwise."""
    if "||" in expression or "?" in expression:
        return None  # a disjunction or a conditional may not pin the model
    for term in expression.split("&&"):
        for pattern in _PRODUCT_EQUALS:
            if found := pattern.match(term):
                return next(group for group in found.groups() if group is not None)
    return None


def product_label(product: str) -> str:
    """A DRA ``productName`` as GPU Feature Discovery writes it into ``nvidia.com/gpu.product``."""
    return "-".join(product.split())


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _exact_gpus(request: Mapping[str, Any]) -> ClaimedGpus | None:
    """What one exact request (or subrequest) of the GPU class asks; None for another class."""
    if request.get("deviceClassName") != GPU_DEVICE_CLASS:
        return None
    if request.get("allocationMode") == "All":
        count = ALL_DEVICES_ESTIMATE
    else:
        raw = request.get("count")
        count = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 1
    product = None
    for selector in _items(request.get("selectors")):
        expression = _mapping(selector.get("cel")).get("expression")
        if isinstance(expression, str) and (product := product_of_selector(expression)) is not None:
            break
    return ClaimedGpus(count, product)


def claim_spec_gpus(claim_spec: Mapping[str, Any] | None) -> ClaimedGpus:
    """The GPUs of one claim spec: the sum of its requests of the GPU class (the first product named wins)."""
    count, product = 0, None
    for request in _items(_mapping(_mapping(claim_spec).get("devices")).get("requests")):
        found = None
        if (exactly := request.get("exactly")) is not None:
            found = _exact_gpus(_mapping(exactly))
        else:
            found = next((g for sub in _items(request.get("firstAvailable")) if (g := _exact_gpus(sub))), None)
        if found is not None:
            count += found.count
            product = product or found.product
    return ClaimedGpus(count, product)


def pod_claimed_gpus(pod_spec: Mapping[str, Any] | None, lookup: ClaimLookup) -> ClaimedGpus:
    """The GPUs all of a pod spec's ``resourceClaims`` ask for (claims not known yet count nothing)."""
    count, product = 0, None
    for entry in _items(_mapping(pod_spec).get("resourceClaims")):
        if isinstance(name := entry.get("resourceClaimTemplateName"), str) and name:
            found = claim_spec_gpus(lookup(TEMPLATE, name))
        elif isinstance(name := entry.get("resourceClaimName"), str) and name:
            found = claim_spec_gpus(lookup(CLAIM, name))
        else:
            continue
        count += found.count
        product = product or found.product
    return ClaimedGpus(count, product)


def _with_gpus_in_place(pod_spec: dict[str, Any], claimed: ClaimedGpus) -> None:
    """Adds ``claimed`` to the first container's GPU requests and limits, and pins its product."""
    containers = [c for c in pod_spec.get("containers") or () if isinstance(c, dict)]
    if not containers or claimed.count <= 0:
        return
    resources = containers[0].setdefault("resources", {})
    parts = {part: resources.get(part) if isinstance(resources.get(part), dict) else {} for part in ("requests", "limits")}
    # An extended resource's request is its limit (kube defaults it so): the claimed GPUs add to that.
    held = parts["requests"].get(RESOURCE_GPU, parts["limits"].get(RESOURCE_GPU, 0))
    try:
        total = int(str(held)) + claimed.count
    except ValueError:
        total = claimed.count
    for part, amounts in parts.items():
        amounts[RESOURCE_GPU] = str(total)
        resources[part] = amounts
    if claimed.product is not None:
        selector = pod_spec.get("nodeSelector")
        if not isinstance(selector, dict):
            selector = pod_spec["nodeSelector"] = {}
        selector.setdefault(LABEL_GPU_PRODUCT, product_label(claimed.product))


def with_claimed_gpus(obj: Mapping[str, Any], lookup: ClaimLookup) -> dict[str, Any]:
    """A copy of ``obj`` (a workload, a pod or a pod spec) in which every pod spec with DRA claims of
    the GPU class asks for those GPUs as ``nvidia.com/gpu`` (its first container) and, when a
    selector pins the model, selects ``nvidia.com/gpu.product``. ``obj`` itself is never changed;
    a pod spec without claims is left as it is."""
    out = copy.deepcopy(dict(obj))

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("resourceClaims"), list) and isinstance(node.get("containers"), list):
                _with_gpus_in_place(node, pod_claimed_gpus(node, lookup))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


def references_claims(obj: Mapping[str, Any]) -> bool:
    """Whether any pod spec in ``obj`` names a DRA claim (cheap test before :func:`with_claimed_gpus`)."""
    stack: list[Any] = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if node.get("resourceClaims") and isinstance(node.get("containers"), list):
                return True
            # A pod spec never sits in metadata or status (the larger parts of a stored object).
            stack.extend(value for key, value in node.items() if key not in _NOT_POD_SPECS)
        elif isinstance(node, list):
            stack.extend(node)
    return False
