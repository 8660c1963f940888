"""What a pod's Dynamic Resource Allocation claims ask of NVIDIA GPUs, and what they hold, written
once for the hub, the agent, the simulated members and the reports.

A pod asks for devices through ``spec.resourceClaims[]``: each entry names a ResourceClaimTemplate
(``resourceClaimTemplateName``: one claim per pod) or a ResourceClaim (``resourceClaimName``: one
claim the pods share), and the claim's ``spec.devices.requests`` say how many devices of which
DeviceClass. gpufed acts on the requests for NVIDIA's two classes (k8s-dra-driver-gpu's chart
installs both on every cluster it runs on; its driver is ``gpu.nvidia.com``):

* :data:`GPU_DEVICE_CLASS` (``gpu.nvidia.com``, whole GPUs: ``device.attributes['gpu.nvidia.com'].type
  == 'gpu'``) counts as ``nvidia.com/gpu``;
* :data:`MIG_DEVICE_CLASS` (``mig.nvidia.com``, MIG devices: ``type == 'mig'``) counts as the MIG
  profile's device-plugin resource (``nvidia.com/mig-1g.10gb``) when a selector pins the profile
  (``device.attributes['gpu.nvidia.com'].profile == '1g.10gb'``, the attribute NVIDIA's driver
  publishes on each MIG device); a MIG request that leaves the profile open counts nothing before
  it is allocated (which slice it gets is the member's choice). Other classes (a NIC's) are left
  to the member: they add nothing the hub places;
* ``allocationMode: ExactCount`` counts ``count`` devices (1 when unset, as kube defaults it);
  ``All`` (every matching device of the node the pod lands on) counts :data:`ALL_DEVICES_ESTIMATE`
  GPUs, an 8-GPU HGX board, the nodes DRA GPU work is written for: the hub cannot know which node a
  member will pick, and 8 keeps such a pod from being packed beside others;
* a request's class is what its DeviceClass's selectors pin (:func:`class_selection`, a bounded
  subset of CEL: ``&&`` of equalities of ``device.driver`` and of NVIDIA's ``type``,
  ``productName`` and ``profile`` attributes): the hub's own DeviceClass of the name when the
  caller has one (:data:`ClassLookup`), else NVIDIA's published class of that name
  (:data:`NVIDIA_CLASSES`). A class with selectors outside the subset counts nothing, with the
  reason in :attr:`ClaimedGpus.unread` (never read as if it matched);
* a ``firstAvailable`` request counts its first subrequest that asks for one of the two classes
  (kube tries them in order; the first is what the author prefers);
* a CEL selector of the simple equality form ``device.attributes['gpu.nvidia.com'].productName ==
  'NVIDIA H100 80GB HBM3'`` (either quote, either operand order, alone or as one conjunct of
  ``&&``) restricts the GPU model (of a MIG device: its parent's, which the driver publishes as
  the MIG device's ``productName``): it becomes the node selector ``nvidia.com/gpu.product`` with
  the name as GPU Feature Discovery labels it (spaces as dashes: ``NVIDIA-H100-80GB-HBM3``). Any
  other expression (``||``, ``in``, ``matches``, a capacity comparison) leaves the model open; the
  ``profile`` equality is read the same way.

A claim the member has allocated says what it holds: :func:`allocated_devices` counts the
``status.allocation.devices.results`` of driver ``gpu.nvidia.com`` by the device names NVIDIA's
driver publishes (``gpu-<minor>`` a whole GPU, ``gpu-vfio-<n>`` one passed through whole,
``gpu-<minor>-mig-<profile>-<profile id>-<placement>`` a MIG device, the profile with its dots
dropped: ``1g10gb``), and by its request's class when a name is not one of those. A pod on a member
(:func:`pod_claimed_resources`) then counts its claims' allocated devices, and a claim not
allocated yet (or a template's claim not created yet) what its requests ask.

A claim shared through ``resourceClaimName`` holds its devices once, whatever number of pods it is
reserved for (kube allocates a claim once and lists its consumers in ``status.reservedFor``). On a
member, :func:`shared_claim_holders` picks the one pod of those naming it that counts its devices
(the first by name, so every report picks the same one while the pods stay); the others count
nothing for it. The devices then stay whole on one pod, as the waste report, which gives each
device to one pod, needs. The hub's placement reads a pod template's own claims per replica
(:func:`with_claimed_gpus` with ``shared=False``) and its shared claims once per cluster
(:func:`shared_claim_resources`: the binding's ``sharedResourceRequest``); the simulated member
allocates a shared claim once, on the node of the first pod placed (:mod:`simulator.scheduling.sharedclaims`).

:func:`with_claimed_gpus` turns a pod spec's claims into the ``nvidia.com/gpu`` and MIG requests
and product selector they stand for, so the interpreter's replica requirements (the hub's
feasibility and division) and the simulated member's scheduler read DRA GPU work as they read
device-plugin requests. It writes only a copy that is read, never the object sent to a member.

In: pod specs, pods, claims and claim specs as plain dicts. Out: :class:`ClaimedGpus`, resource
amounts, rewritten copies. Pure.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controlplane.apis.constants import LABEL_GPU_PRODUCT, RESOURCE_GPU, RESOURCE_MIG_PREFIX

#: The DeviceClass of whole GPUs NVIDIA's DRA driver (k8s-dra-driver-gpu) installs.
GPU_DEVICE_CLASS: Final = "gpu.nvidia.com"
#: The DeviceClass of MIG devices the same driver installs.
MIG_DEVICE_CLASS: Final = "mig.nvidia.com"
#: The driver name NVIDIA's GPU and MIG devices are published (and allocated) under.
GPU_DRIVER: Final = "gpu.nvidia.com"
#: What an ``All`` request of the GPU class is counted as (see the module docstring).
ALL_DEVICES_ESTIMATE: Final = 8
#: The API group of DRA's objects, and the version gpufed reads.
RESOURCE_GROUP: Final = "resource.k8s.io"
RESOURCE_API_VERSION: Final = f"{RESOURCE_GROUP}/v1"

_QUOTED = r"""(?:'([^'\\]*)'|"([^"\\]*)")"""


def _equality(attribute: str) -> tuple[re.Pattern[str], ...]:
    """``device.attributes['gpu.nvidia.com'].<attribute> == '<value>'``, in either operand order."""
    name = rf"""device\.attributes\[\s*(?:'gpu\.nvidia\.com'|"gpu\.nvidia\.com")\s*\]\.{attribute}"""
    return (re.compile(rf"^\s*{name}\s*==\s*{_QUOTED}\s*$"), re.compile(rf"^\s*{_QUOTED}\s*==\s*{name}\s*$"))


_PRODUCT_EQUALS: Final = _equality("productName")
_PROFILE_EQUALS: Final = _equality("profile")
#: The device names NVIDIA's driver publishes: a whole GPU, one passed through to a VM, a MIG device.
_WHOLE_GPU_NAME: Final = re.compile(r"^gpu-(?:vfio-)?\d+$")
_MIG_NAME: Final = re.compile(r"^gpu-\d+-mig-(.+)-\d+-\d+$")
#: A profile as the MIG device's name carries it (dots dropped, ``+`` as ``-``): ``1g10gb``, ``1g10gb-me``.
_NAMED_PROFILE: Final = re.compile(r"^(\d+)g(\d+)gb(-me)?$")

#: The spec of a claim template (its ``spec.spec``) or a claim (its ``spec``) by kind and name in the
#: pod's namespace; None: not known (not created yet).
ClaimLookup = Callable[[str, str], Mapping[str, Any] | None]
TEMPLATE: Final = "ResourceClaimTemplate"
_NOT_POD_SPECS: Final = frozenset({"metadata", "status"})
CLAIM: Final = "ResourceClaim"


@dataclass(frozen=True, slots=True)
class ClaimedGpus:
    """The whole NVIDIA GPUs one pod's claims ask for, the MIG devices by profile, and the model
    they pin (None: any)."""

    count: int = 0
    product: str | None = None
    mig: Mapping[str, int] = field(default_factory=dict)
    #: Why requests were not counted: a DeviceClass selector outside what gpufed reads (:func:`class_selection`).
    unread: tuple[str, ...] = ()

    def resources(self) -> dict[str, int]:
        """The device-plugin resources these devices stand for (``nvidia.com/gpu``, ``nvidia.com/mig-<profile>``)."""
        out = {mig_resource(profile): amount for profile, amount in self.mig.items() if amount > 0}
        if self.count > 0:
            out[RESOURCE_GPU] = self.count
        return out

    def plus(self, other: ClaimedGpus) -> ClaimedGpus:
        """Both counts together (the first product named wins)."""
        mig = dict(self.mig)
        for profile, amount in other.mig.items():
            mig[profile] = mig.get(profile, 0) + amount
        unread = self.unread + tuple(u for u in other.unread if u not in self.unread)
        return ClaimedGpus(self.count + other.count, self.product or other.product, mig, unread)


def mig_resource(profile: str) -> str:
    """The device plugin's resource of a MIG profile (its ``mixed`` strategy): ``nvidia.com/mig-1g.10gb``."""
    return f"{RESOURCE_MIG_PREFIX}{profile}"


def _equal_to(expression: str, patterns: tuple[re.Pattern[str], ...]) -> str | None:
    if "||" in expression or "?" in expression:
        return None  # a disjunction or a conditional may not pin the value
    for term in expression.split("&&"):
        for pattern in patterns:
            if found := pattern.match(term):
                return next(group for group in found.groups() if group is not None)
    return None


def product_of_selector(expression: str) -> str | None:
    """The GPU model a CEL selector pins, when it is the simple equality form (or a ``&&`` of terms
    one of which is); None otherwise."""
    return _equal_to(expression, _PRODUCT_EQUALS)


def profile_of_selector(expression: str) -> str | None:
    """The MIG profile a CEL selector pins (``device.attributes['gpu.nvidia.com'].profile ==
    '1g.10gb'``, read as :func:`product_of_selector` reads the model); None otherwise."""
    return _equal_to(expression, _PROFILE_EQUALS)


def product_label(product: str) -> str:
    """A DRA ``productName`` as GPU Feature Discovery writes it into ``nvidia.com/gpu.product``."""
    return "-".join(product.split())


#: A DeviceClass's spec by name (None: the hub holds none of that name).
ClassLookup = Callable[[str], Mapping[str, Any] | None]
DEVICE_CLASS: Final = "DeviceClass"
_DRIVER_EQUALS: Final = (
    re.compile(rf"^\s*device\.driver\s*==\s*{_QUOTED}\s*$"), re.compile(rf"^\s*{_QUOTED}\s*==\s*device\.driver\s*$"),
)
#: The attributes of NVIDIA's devices a class selector may pin: the device type, the model, the MIG profile.
_CLASS_ATTRIBUTES: Final = {name: _equality(name) for name in ("type", "productName", "profile")}
#: What makes a selector more than a conjunction of terms (outside its strings).
_EITHER: Final = re.compile(r"\|\||\?")


@dataclass(frozen=True, slots=True)
class DeviceSelection:
    """What a DeviceClass's selectors pin of a device: its driver, NVIDIA's ``type`` attribute
    (``gpu``, ``mig``, ``vfio``), model and MIG profile (None: open); ``unread``: why they were not
    read (then nothing of the class is counted)."""

    driver: str | None = None
    type: str | None = None
    product: str | None = None
    profile: str | None = None
    unread: str | None = None


#: NVIDIA's classes as its chart publishes them, read so when the hub holds no DeviceClass of the name.
NVIDIA_CLASSES: Final = {
    GPU_DEVICE_CLASS: DeviceSelection(GPU_DRIVER, "gpu"),
    MIG_DEVICE_CLASS: DeviceSelection(GPU_DRIVER, "mig"),
}


def _pinned(term: str) -> tuple[str, str] | None:
    """``(field, value)`` a selector term pins: ``driver``, or an attribute of :data:`_CLASS_ATTRIBUTES`."""
    for name, patterns in (("driver", _DRIVER_EQUALS), *_CLASS_ATTRIBUTES.items()):
        for pattern in patterns:
            if found := pattern.match(term):
                return name, next(group for group in found.groups() if group is not None)
    return None


def class_selection(class_spec: Mapping[str, Any] | None) -> DeviceSelection:
    """A DeviceClass spec's selectors read as the subset gpufed evaluates: each a ``&&`` of
    equalities of ``device.driver`` or of ``device.attributes['gpu.nvidia.com']``'s ``type``,
    ``productName`` or ``profile`` with a string (either quote, either operand order), as NVIDIA's
    classes write them. A class pinning another driver is not NVIDIA's, whatever else it says. Any
    other expression in a class that may select NVIDIA's devices, or one that does not pin their
    ``type``, is not guessed at: ``unread`` says why."""
    pinned: dict[str, str] = {}
    unread: str | None = None
    for selector in _items(_mapping(class_spec).get("selectors")):
        expression = _mapping(selector.get("cel")).get("expression")
        if not isinstance(expression, str) or _EITHER.search(re.sub(_QUOTED, "''", expression)):
            unread = unread or f"selector {expression!r} is not a conjunction gpufed reads"
            continue
        for term in expression.split("&&"):
            found = _pinned(term)
            if found is None:
                unread = unread or f"selector term {term.strip()!r} is not one gpufed reads"
            elif pinned.setdefault(found[0], found[1]) != found[1]:
                unread = unread or f"selectors ask {found[0]} to be both {pinned[found[0]]!r} and {found[1]!r}"
    driver = pinned.get("driver") or (GPU_DRIVER if "type" in pinned else None)
    if driver is not None and driver != GPU_DRIVER:
        return DeviceSelection(driver)  # another driver's devices: not counted, whatever else it selects
    if unread is None and driver is None:
        unread = "selectors pin neither device.driver nor device.attributes['gpu.nvidia.com'].type"
    if unread is None and "type" not in pinned:
        unread = "selectors do not pin device.attributes['gpu.nvidia.com'].type (gpu or mig)"
    if unread is not None:
        return DeviceSelection(unread=unread)
    return DeviceSelection(driver, pinned.get("type"), pinned.get("productName"), pinned.get("profile"))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _selected(request: Mapping[str, Any], read: Callable[[str], str | None]) -> str | None:
    """The first value ``read`` finds in one of a request's CEL selectors."""
    for selector in _items(request.get("selectors")):
        expression = _mapping(selector.get("cel")).get("expression")
        if isinstance(expression, str) and (value := read(expression)) is not None:
            return value
    return None


def _class_of(name: str, classes: ClassLookup | None) -> DeviceSelection | None:
    """What the DeviceClass ``name`` selects: the hub's object when ``classes`` has it, else NVIDIA's
    published class of that name; None for another class the hub does not hold."""
    found = classes(name) if classes is not None else None
    return class_selection(found) if found is not None else NVIDIA_CLASSES.get(name)


def _exact_gpus(request: Mapping[str, Any], classes: ClassLookup | None = None) -> ClaimedGpus | None:
    """What one exact request (or subrequest) of a class of NVIDIA's GPUs or MIG devices asks; None
    for another class (a :class:`ClaimedGpus` with ``unread`` for a class whose selectors are not read)."""
    device_class = str(request.get("deviceClassName") or "")
    selection = _class_of(device_class, classes)
    if selection is not None and selection.unread is not None:
        return ClaimedGpus(unread=(f"DeviceClass {device_class}: {selection.unread}",))
    if selection is None or selection.driver != GPU_DRIVER or selection.type not in ("gpu", "mig"):
        return None
    if request.get("allocationMode") == "All":
        count = ALL_DEVICES_ESTIMATE
    else:
        raw = request.get("count")
        count = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 1
    product = _selected(request, product_of_selector) or selection.product
    if selection.type == "gpu":
        return ClaimedGpus(count, product)
    profile = _selected(request, profile_of_selector) or selection.profile
    return ClaimedGpus(0, product, {profile: count} if profile is not None else {})


def _requests(
    claim_spec: Mapping[str, Any] | None, classes: ClassLookup | None = None
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each request of a claim spec that counts, by the name an allocation result gives it (``<request>``,
    ``<request>/<subrequest>`` for the ``firstAvailable`` subrequest that counts), with what it asks."""
    for request in _items(_mapping(_mapping(claim_spec).get("devices")).get("requests")):
        name = str(request.get("name") or "")
        if (exactly := request.get("exactly")) is not None:
            yield name, _mapping(exactly)
        else:
            for sub in _items(request.get("firstAvailable")):
                if _exact_gpus(sub, classes) is not None:
                    yield f"{name}/{sub.get('name') or ''}", sub
                    break


def claim_spec_gpus(claim_spec: Mapping[str, Any] | None, classes: ClassLookup | None = None) -> ClaimedGpus:
    """The devices of one claim spec: the sum of its requests of NVIDIA's classes (the first product
    named wins); ``classes``: the DeviceClasses the hub holds (NVIDIA's own are known without)."""
    total = ClaimedGpus()
    for _name, request in _requests(claim_spec, classes):
        if (found := _exact_gpus(request, classes)) is not None:
            total = total.plus(found)
    return total


def classes_asked(claim_specs: Iterable[Mapping[str, Any] | None]) -> set[str]:
    """The names of the DeviceClasses counting ``claim_specs`` may read (every subrequest's class
    included), so that a caller reads those alone before it counts them."""
    asked: set[str] = set()

    def ask(class_name: str) -> None:  # records the class, reading none
        asked.add(class_name)

    for spec in claim_specs:
        claim_spec_gpus(spec, ask)
    return asked


def claim_spec_of(kind: str, obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The claim spec of a ResourceClaimTemplate (its ``spec.spec``) or a ResourceClaim (its ``spec``)."""
    spec = _mapping(obj).get("spec")
    if kind == TEMPLATE and isinstance(spec, Mapping):
        spec = spec.get("spec")
    return spec if isinstance(spec, Mapping) else None


def claim_entries(pod_spec: Mapping[str, Any] | None) -> Iterator[tuple[str, str, str]]:
    """Each ``resourceClaims`` entry of a pod spec that names a template or a claim: the entry's
    name, the kind it names (:data:`TEMPLATE`, :data:`CLAIM`) and the object's name."""
    for entry in _items(_mapping(pod_spec).get("resourceClaims")):
        if isinstance(name := entry.get("resourceClaimTemplateName"), str) and name:
            yield str(entry.get("name") or ""), TEMPLATE, name
        elif isinstance(name := entry.get("resourceClaimName"), str) and name:
            yield str(entry.get("name") or ""), CLAIM, name


def pod_claimed_gpus(
    pod_spec: Mapping[str, Any] | None, lookup: ClaimLookup, *, shared: bool = True, classes: ClassLookup | None = None
) -> ClaimedGpus:
    """The devices all of a pod spec's ``resourceClaims`` ask for (claims not known yet count nothing);
    with ``shared=False`` only its templates' claims, the pod's own (a shared claim's model still pins it)."""
    total = ClaimedGpus()
    for _entry, kind, name in claim_entries(pod_spec):
        found = claim_spec_gpus(lookup(kind, name), classes)
        total = total.plus(found if shared or kind != CLAIM else ClaimedGpus(0, found.product, unread=found.unread))
    return total


def shared_claims(
    pod_spec: Mapping[str, Any] | None, lookup: ClaimLookup, classes: ClassLookup | None = None
) -> dict[str, ClaimedGpus]:
    """The devices of each ResourceClaim a pod spec names directly (``resourceClaimName``), by the
    claim's name: what every pod naming it shares (claims not known yet ask nothing)."""
    return {
        name: claim_spec_gpus(lookup(kind, name), classes)
        for _entry, kind, name in claim_entries(pod_spec) if kind == CLAIM
    }


def pod_specs(obj: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec that names claims in ``obj`` (a workload, a pod or a pod spec), outermost first."""
    if isinstance(obj, dict):
        if isinstance(obj.get("resourceClaims"), list) and isinstance(obj.get("containers"), list):
            yield obj
        for value in obj.values():
            yield from pod_specs(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from pod_specs(value)


def shared_claim_resources(
    obj: Mapping[str, Any], lookup: ClaimLookup, classes: ClassLookup | None = None
) -> dict[str, int]:
    """The device-plugin resources of the ResourceClaims ``obj``'s pod specs name directly, each claim
    once however many pod specs (or roles) name it: the devices a workload's pods share in a cluster."""
    claims: dict[str, ClaimedGpus] = {}
    for spec in pod_specs(obj):
        claims.update(shared_claims(spec, lookup, classes))
    total = ClaimedGpus()
    for found in claims.values():
        total = total.plus(found)
    return total.resources()


def _named_profile(device: str) -> str | None:
    """The MIG profile a device name of NVIDIA's driver carries (``gpu-0-mig-1g10gb-19-0``: ``1g.10gb``)."""
    if (mig := _MIG_NAME.match(device)) is None or (found := _NAMED_PROFILE.match(mig.group(1))) is None:
        return None
    return f"{found.group(1)}g.{found.group(2)}gb" + ("+me" if found.group(3) else "")


def allocated_devices(claim: Mapping[str, Any]) -> ClaimedGpus | None:
    """What an allocated ResourceClaim holds of NVIDIA's driver (``status.allocation.devices.results``,
    read as the module docstring says); None when the claim is not allocated."""
    allocation = _mapping(_mapping(claim.get("status")).get("allocation"))
    if not allocation:
        return None
    requests = dict(_requests(_mapping(claim.get("spec"))))
    total = ClaimedGpus()
    for result in _items(_mapping(allocation.get("devices")).get("results")):
        device = str(result.get("device") or "")
        if result.get("driver") != GPU_DRIVER or result.get("adminAccess") is True:
            continue  # another driver's device, or one only watched (admin access holds nothing)
        if _WHOLE_GPU_NAME.match(device):
            total = total.plus(ClaimedGpus(1))
        elif (profile := _named_profile(device)) is not None:
            total = total.plus(ClaimedGpus(0, None, {profile: 1}))
        elif (asked := requests.get(str(result.get("request") or ""))) is not None and (
            found := _exact_gpus(asked)
        ) is not None:  # a name of another form: the request's class and profile say what it is
            total = total.plus(ClaimedGpus(1) if found.count else ClaimedGpus(0, None, {p: 1 for p in found.mig}))
    return total


#: A member's claim or claim template by kind (:data:`CLAIM`, :data:`TEMPLATE`), namespace and name,
#: or its DeviceClass (:data:`DEVICE_CLASS`, namespace ``""``), the whole object; None: not known.
ObjectLookup = Callable[[str, str, str], Mapping[str, Any] | None]
#: A claim (or a pod) by namespace and name.
ObjectKey = tuple[str, str]


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    metadata = _mapping(obj.get("metadata"))
    return str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")


def shared_claim_holders(pods: Iterable[Mapping[str, Any]]) -> dict[ObjectKey, str]:
    """For each ResourceClaim that ``pods`` name directly (``resourceClaimName``), the name of the
    pod that counts its devices: the first by name of those naming it (a claim and its pods share a
    namespace)."""
    holders: dict[ObjectKey, str] = {}
    for pod in pods:
        namespace, name = _key(pod)
        for entry in _items(_mapping(pod.get("spec")).get("resourceClaims")):
            if isinstance(claim := entry.get("resourceClaimName"), str) and claim:
                held = holders.get((namespace, claim))
                if held is None or name < held:
                    holders[(namespace, claim)] = name
    return holders


def pod_claimed_resources(
    pod: Mapping[str, Any], lookup: ObjectLookup, holders: Mapping[ObjectKey, str] | None = None
) -> dict[str, int]:
    """The device-plugin resources a pod's DRA claims stand for on a member: each claim's allocated
    devices (:func:`allocated_devices`), or, while it is not allocated, what its requests ask; the
    claim of a template entry is the one ``status.resourceClaimStatuses`` names (kube's resourceclaim
    controller's; an entry there without a claim name needs none), or, before that controller has
    made it, the template's. A claim the pod names directly counts only when ``holders``
    (:func:`shared_claim_holders` of the pods counted together) gives it to this pod, or does not
    know it. A request's class is the member's DeviceClass ``lookup`` finds, else NVIDIA's published one."""
    spec, status = _mapping(pod.get("spec")), _mapping(pod.get("status"))

    def classes(name: str) -> Mapping[str, Any] | None:
        found = lookup(DEVICE_CLASS, "", name)
        return None if found is None else _mapping(found.get("spec"))

    namespace, pod_name = _key(pod)
    generated = {
        str(entry.get("name")): str(entry.get("resourceClaimName") or "")
        for entry in _items(status.get("resourceClaimStatuses"))
    }
    total = ClaimedGpus()
    for entry in _items(spec.get("resourceClaims")):
        template = entry.get("resourceClaimTemplateName")
        if template and generated.get(str(entry.get("name"))) == "":
            continue  # the controller found no claim needed (kube: the entry "can be ignored")
        shared = entry.get("resourceClaimName")
        if shared and holders is not None and holders.get((namespace, str(shared)), pod_name) != pod_name:
            continue  # another pod counts the devices this claim holds for both
        name = shared or generated.get(str(entry.get("name")))
        claim = lookup(CLAIM, namespace, str(name)) if name else None
        if claim is not None:
            held = allocated_devices(claim)
            total = total.plus(held if held is not None else claim_spec_gpus(_mapping(claim.get("spec")), classes))
        elif isinstance(template, str) and template and (found := lookup(TEMPLATE, namespace, template)) is not None:
            total = total.plus(claim_spec_gpus(_mapping(_mapping(found.get("spec")).get("spec")), classes))
    return total.resources()


def _with_gpus_in_place(pod_spec: dict[str, Any], claimed: ClaimedGpus) -> None:
    """Adds ``claimed`` to the first container's GPU and MIG requests and limits, and pins its product."""
    containers = [c for c in pod_spec.get("containers") or () if isinstance(c, dict)]
    amounts_claimed = claimed.resources()
    if not containers or not amounts_claimed:
        return
    resources = containers[0].setdefault("resources", {})
    parts = {part: resources.get(part) if isinstance(resources.get(part), dict) else {} for part in ("requests", "limits")}
    for resource, amount in amounts_claimed.items():
        # An extended resource's request is its limit (kube defaults it so): the claimed devices add to that.
        held = parts["requests"].get(resource, parts["limits"].get(resource, 0))
        try:
            total = int(str(held)) + amount
        except ValueError:
            total = amount
        for amounts in parts.values():
            amounts[resource] = str(total)
    for part, amounts in parts.items():
        resources[part] = amounts
    if claimed.product is not None:
        selector = pod_spec.get("nodeSelector")
        if not isinstance(selector, dict):
            selector = pod_spec["nodeSelector"] = {}
        selector.setdefault(LABEL_GPU_PRODUCT, product_label(claimed.product))


def unread_classes(obj: Mapping[str, Any], lookup: ClaimLookup, classes: ClassLookup | None = None) -> tuple[str, ...]:
    """Why some of the claims ``obj``'s pod specs name count nothing: their DeviceClass's selectors
    are not ones gpufed reads (:func:`class_selection`), one message per class."""
    total = ClaimedGpus()
    for spec in pod_specs(obj):
        total = total.plus(pod_claimed_gpus(spec, lookup, classes=classes))
    return total.unread


def with_claimed_gpus(
    obj: Mapping[str, Any], lookup: ClaimLookup, *, shared: bool = True, classes: ClassLookup | None = None
) -> dict[str, Any]:
    """A copy of ``obj`` (a workload, a pod or a pod spec) in which every pod spec with DRA claims of
    NVIDIA's classes asks for those devices as ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>``
    (its first container) and, when a selector pins the model, selects ``nvidia.com/gpu.product``. ``obj`` itself is never changed;
    a pod spec without claims is left as it is. ``shared=False`` leaves out the devices of the claims
    named directly (:func:`shared_claims`: held once for all the pods, not by each)."""
    out = copy.deepcopy(dict(obj))
    for spec in list(pod_specs(out)):
        _with_gpus_in_place(spec, pod_claimed_gpus(spec, lookup, shared=shared, classes=classes))
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
