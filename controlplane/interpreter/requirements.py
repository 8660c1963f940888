"""Per-replica scheduling requirements, as the hub's scheduler and estimator consume them.

A workload's pod template (Deployment ``spec.template``, a PyTorchJob role's ``template``…)
goes in; a frozen, hashable :class:`ReplicaRequirements` comes out: resource requests as
integers in base units (cpu millicores, memory bytes, GPUs and MIG slices as counts), the
nodeSelector, the required node affinity, tolerations and the priority class. Being
hashable lets the estimator cache one answer per (cluster snapshot, requirements).

The same value converts to and from the ResourceBinding's ``spec.replicaRequirements``
(quantities as strings there, see docs/objects.md), and :func:`set_gpu_request` rewrites a pod
template's GPU request for the alternative-shape feature.

Pure functions over plain dicts; nothing here does I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.apis.gpus import is_gpu_resource
from controlplane.apis.pods import FrozenToleration, SelectorOperator, pod_requests, requirement_matches
from controlplane.apis.quantity import format_quantity, to_int
from controlplane.apis.untyped import Obj

"""A Kubernetes object (or part of one) as a JSON-compatible dict."""

RESOURCE_PODS = "pods"
"""The node resource that caps how many pods a node runs; every replica takes one."""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` entry of a required node affinity term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodeSelectorRequirement:
        return cls(
            key=str(raw["key"]),
            operator=str(raw["operator"]),
            values=tuple(str(v) for v in raw.get("values") or ()),
        )

    def to_dict(self) -> Obj:
        out: Obj = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_matches(self.operator, self.values, labels.get(self.key))

    def describe(self) -> str:
        if self.operator in (SelectorOperator.EXISTS, SelectorOperator.DOES_NOT_EXIST):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A required node affinity term: all expressions must hold (terms are ORed).

    ``matchFields`` (only ``metadata.name`` exists) name individual nodes, which the hub's
    grouped shapes do not know; a term that has them is kept as ``has_field_selector`` and
    treated as satisfiable, leaving the final word to the member's scheduler.
    """

    expressions: tuple[NodeSelectorRequirement, ...] = ()
    has_field_selector: bool = False
    raw_fields: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.has_field_selector:
            return False  # kube: an empty term matches no node
        return all(e.matches(labels) for e in self.expressions)

    def to_dict(self) -> Obj:
        out: Obj = {}
        if self.expressions:
            out["matchExpressions"] = [e.to_dict() for e in self.expressions]
        if self.raw_fields:
            out["matchFields"] = [
                {"key": k, "operator": op, "values": list(vals)} for k, op, vals in self.raw_fields
            ]
        return out


@dataclass(frozen=True, slots=True)
class ReplicaRequirements:
    """What one replica (pod) needs from a node, in base units. Hashable and immutable."""

    resources: tuple[tuple[str, int], ...] = ()
    """Sorted (resource, amount) pairs; only non-zero amounts."""
    node_selector: tuple[tuple[str, str], ...] = ()
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    """Required node affinity terms (ORed); empty means no constraint."""
    tolerations: tuple[FrozenToleration, ...] = ()
    priority_class_name: str | None = None
    shared: tuple[tuple[str, int], ...] = ()
    """Sorted (resource, amount) pairs the replicas in one cluster hold together, once: the devices
    of DRA ResourceClaims their pods name directly, allocated on one node all those pods share."""
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    _wants_gpu: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Hashing walks every nested tuple; the estimator hashes on its hot path, so do it once.
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.resources,
                    self.node_selector,
                    self.node_affinity,
                    self.tolerations,
                    self.priority_class_name,
                    self.shared,
                )
            ),
        )
        object.__setattr__(self, "_wants_gpu", any(is_gpu_resource(k) for k, _ in self.resources))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def build(
        cls,
        resources: Mapping[str, int] | None = None,
        *,
        node_selector: Mapping[str, str] | None = None,
        node_affinity: Iterable[NodeSelectorTerm] = (),
        tolerations: Iterable[FrozenToleration] = (),
        priority_class_name: str | None = None,
        shared: Mapping[str, int] | None = None,
    ) -> ReplicaRequirements:
        """Normalising constructor: sorts maps into tuples and drops zero amounts; interned."""
        return cls(
            resources=tuple(sorted((k, int(v)) for k, v in (resources or {}).items() if v)),
            node_selector=tuple(sorted((node_selector or {}).items())),
            node_affinity=tuple(node_affinity),
            tolerations=tuple(tolerations),
            priority_class_name=priority_class_name,
            shared=tuple(sorted((k, int(v)) for k, v in (shared or {}).items() if v)),
        ).interned()

    def interned(self) -> ReplicaRequirements:
        """The canonical instance equal to this one.

        Caches keyed by requirements (the estimator's) then hit by identity instead of
        comparing every field; equal requirements built from different bindings share one
        object. The table is bounded: it is emptied when it grows past its limit.
        """
        found = _INTERNED.get(self)
        if found is not None:
            return found
        if len(_INTERNED) >= _INTERN_LIMIT:
            _INTERNED.clear()
        _INTERNED[self] = self
        return self

    @property
    def resource_map(self) -> dict[str, int]:
        return dict(self.resources)

    @property
    def first_replica(self) -> dict[str, int]:
        """What the first replica placed in a cluster needs of its node: its own request and the
        devices the replicas there share (:attr:`shared`), which it brings."""
        out = dict(self.resources)
        for name, amount in self.shared:
            out[name] = out.get(name, 0) + amount
        return out

    @property
    def gpu_resources(self) -> dict[str, int]:
        """The GPU-like part of the request (``nvidia.com/gpu``, MIG slices, GPU shares)."""
        return {k: v for k, v in self.resources if is_gpu_resource(k)}

    @property
    def wants_gpu(self) -> bool:
        """Whether the request asks for any GPU resource (worked out once: asked on every reservation)."""
        return self._wants_gpu

    @property
    def node_selector_map(self) -> dict[str, str]:
        return dict(self.node_selector)

    def with_gpu_shape(self, shape: Mapping[str, int]) -> ReplicaRequirements:
        """The same requirements with the GPU part of the request replaced by ``shape``.

        Requirements without any GPU request are returned unchanged: an alternative GPU
        shape only rewrites pods that ask for a GPU (a PyTorchJob master without GPUs stays).
        """
        if not any(is_gpu_resource(k) for k, _ in self.resources):
            return self
        merged = {k: v for k, v in self.resources if not is_gpu_resource(k)}
        merged.update({k: int(v) for k, v in shape.items() if v})
        return ReplicaRequirements(
            resources=tuple(sorted(merged.items())),
            node_selector=self.node_selector,
            node_affinity=self.node_affinity,
            tolerations=self.tolerations,
            priority_class_name=self.priority_class_name,
            shared=self.shared,
        ).interned()

    def scaled(self, factor: int) -> dict[str, int]:
        """The resources of ``factor`` replicas."""
        return {k: v * factor for k, v in self.resources}

    def to_spec(self) -> Obj:
        """The ResourceBinding ``spec.replicaRequirements`` form (quantities as strings)."""
        out: Obj = {
            "resourceRequest": {k: format_quantity(k, v) for k, v in self.resources},
            "nodeSelector": dict(self.node_selector),
            "tolerations": [t.to_dict() for t in self.tolerations],
        }
        if self.node_affinity:
            out["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [t.to_dict() for t in self.node_affinity]
                }
            }
        if self.priority_class_name:
            out["priorityClassName"] = self.priority_class_name
        if self.shared:
            out["sharedResourceRequest"] = {k: format_quantity(k, v) for k, v in self.shared}
        return out

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> ReplicaRequirements:
        """Parse a ResourceBinding ``spec.replicaRequirements`` (the inverse of :meth:`to_spec`).

        ``nodeAffinity`` may be a full kube NodeAffinity or just ``{nodeSelectorTerms: [...]}``.
        """
        spec = spec or {}
        return cls.build(
            {k: to_int(k, v) for k, v in (spec.get("resourceRequest") or {}).items()},
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            node_affinity=parse_required_node_affinity(spec.get("nodeAffinity")),
            tolerations=[FrozenToleration.from_dict(t) for t in spec.get("tolerations") or ()],
            priority_class_name=spec.get("priorityClassName") or None,
            shared={k: to_int(k, v) for k, v in (spec.get("sharedResourceRequest") or {}).items()},
        )


_INTERNED: dict[ReplicaRequirements, ReplicaRequirements] = {}
_INTERN_LIMIT = 65_536


def parse_required_node_affinity(node_affinity: Mapping[str, Any] | None) -> tuple[NodeSelectorTerm, ...]:
    """The required terms of a pod's ``affinity.nodeAffinity`` (preferred terms do not filter)."""
    if not node_affinity:
        return ()
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution", node_affinity)
    terms: list[NodeSelectorTerm] = []
    for term in (required or {}).get("nodeSelectorTerms") or ():
        fields = tuple(
            (str(f["key"]), str(f["operator"]), tuple(str(v) for v in f.get("values") or ()))
            for f in term.get("matchFields") or ()
        )
        terms.append(
            NodeSelectorTerm(
                expressions=tuple(
                    NodeSelectorRequirement.from_dict(e) for e in term.get("matchExpressions") or ()
                ),
                has_field_selector=bool(fields),
                raw_fields=fields,
            )
        )
    return tuple(terms)


def requirements(pod_template: Mapping[str, Any] | None) -> ReplicaRequirements:
    """Per-replica requirements of a pod template (``{metadata, spec}``) or a bare pod spec."""
    template = pod_template or {}
    spec: Mapping[str, Any] = template.get("spec", template)
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    return ReplicaRequirements.build(
        pod_requests(spec),
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        node_affinity=parse_required_node_affinity(affinity),
        tolerations=[FrozenToleration.from_dict(t) for t in spec.get("tolerations") or ()],
        priority_class_name=spec.get("priorityClassName") or None,
    )


def set_gpu_request(pod_template: Mapping[str, Any], resources: Mapping[str, int | str]) -> Obj:
    """A copy of ``pod_template`` whose GPU containers request ``resources`` instead.

    Every container (and init container) that requests or limits a GPU-like resource has
    all its GPU-like requests and limits removed and replaced by ``resources`` (written as
    both request and limit: extended resources cannot be overcommitted, so kube requires
    them equal). Containers without a GPU are untouched. The shape is therefore per GPU
    container; for the usual pod with one GPU container that is the per-replica request.
    """
    out: Obj = copy.deepcopy(dict(pod_template))
    spec = out.get("spec", out)
    wanted = {k: format_quantity(k, to_int(k, v)) for k, v in resources.items()}
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            res = container.get("resources") or {}
            names = set(res.get("requests") or {}) | set(res.get("limits") or {})
            if not any(is_gpu_resource(n) for n in names):
                continue
            for part in ("requests", "limits"):
                current = {k: v for k, v in (res.get(part) or {}).items() if not is_gpu_resource(k)}
                current.update(wanted)
                res[part] = current
            container["resources"] = res
    return out
