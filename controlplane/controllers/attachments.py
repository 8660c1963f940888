"""The pure side of ``propagateDeps`` (:mod:`controlplane.controllers.dependencies`): what an
attached binding is and says.

In: bindings and hub objects as plain dicts, the interpreter's :class:`Dependency` values.
Out: :class:`DependencyKey` (the dependencies queue's key), :class:`BindingSnapshot` (one parent
and its clusters, ``spec.requiredBy`` on the wire), the spec of an attached binding
(:func:`attached_spec`), the tests that tell attached, parent and independent bindings apart,
and the parent's ``DependenciesPropagated`` condition with its messages. No I/O happens here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.apis.views import BindingView, ObjectView
from controlplane.apis.work_v1alpha1 import ConditionType, DependenciesReason, HoldReason, binding_name
from controlplane.controllers.failover import PurgeMode, evicting_clusters
from controlplane.controllers.workloads import is_deleting
from controlplane.controllers.works import preserves
from controlplane.interpreter.dependencies import Dependency
from controlplane.interpreter.registry import group_of


@dataclass(frozen=True, slots=True, order=True)
class DependencyKey:
    """An object some workload's pods reference: the key of the dependencies queue."""

    namespace: str
    kind: str
    name: str
    api_version: str = "v1"

    @property
    def binding_name(self) -> str:
        return binding_name(self.name, self.kind)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @classmethod
    def of(cls, namespace: str, dependency: Dependency) -> DependencyKey:
        return cls(namespace, dependency.kind, dependency.name, dependency.api_version)


@dataclass(frozen=True, slots=True, order=True)
class BindingSnapshot:
    """One parent of an attached binding and the clusters it runs in (Karmada's BindingSnapshot)."""

    namespace: str
    name: str
    clusters: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "clusters": [{"name": c} for c in sorted(self.clusters)]}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> BindingSnapshot:
        clusters = tuple(
            sorted(str(c.get("name")) for c in data.get("clusters") or () if isinstance(c, Mapping) and c.get("name"))
        )
        return cls(str(data.get("namespace") or ""), str(data.get("name") or ""), clusters)


def required_by(binding: Mapping[str, Any] | None) -> list[BindingSnapshot] | None:
    """The parents an attached binding records, or None when ``binding`` records none."""
    data = BindingView(binding).spec.get("requiredBy")
    if data is None:
        return None
    return [BindingSnapshot.from_wire(item) for item in data if isinstance(item, Mapping)]


def encode_required_by(parents: Sequence[BindingSnapshot]) -> list[dict[str, Any]]:
    """``spec.requiredBy`` for ``parents``, in a stable order (so an unchanged list writes nothing)."""
    return [p.to_wire() for p in sorted(parents)]


def is_attached(binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` exists only because workloads need its object (``propagateDeps``):
    it records parents and has no placement or policy of its own. The scheduler skips these;
    their clusters are their parents'."""
    spec = BindingView(binding).spec
    return required_by(binding) is not None and spec.get("placement") is None and not spec.get("policy")


def is_parent_candidate(binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` is claimed by a policy (only those can propagate dependencies) and
    alive, or being deleted while it preserves (its objects stay until it is gone)."""
    spec = BindingView(binding).spec
    return bool(spec.get("policy")) and (not is_deleting(binding) or preserves(binding))


def propagates_deps(binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` carries ``spec.propagateDeps: true`` (copied from its policy by the detector)."""
    return BindingView(binding).propagate_deps


def parent_clusters(binding: Mapping[str, Any]) -> tuple[str, ...]:
    """Where a parent's pods run: its chosen clusters plus those keeping an evicted copy for now."""
    spec = BindingView(binding).spec
    names = {str(t.get("name")) for t in spec.get("clusters") or () if isinstance(t, Mapping) and t.get("name")}
    return tuple(sorted(names | set(evicting_clusters(spec))))


def held_clusters(binding: Mapping[str, Any] | None) -> set[str]:
    """The clusters whose Works an attached binding holds for a deleted, preserved parent."""
    tasks = BindingView(binding).eviction_tasks
    return {
        str(task.get("fromCluster"))
        for task in tasks
        if isinstance(task, Mapping) and task.get("reason") == HoldReason.PRESERVED_WORKLOAD_DELETED and task.get("fromCluster")
    }


def attached_spec(
    key: DependencyKey, obj: Mapping[str, Any], parents: Sequence[BindingSnapshot], *, holds: Sequence[str] = ()
) -> dict[str, Any]:
    """The spec of the attached binding of ``obj`` needed by ``parents``; ``holds``: clusters
    no parent needs whose Works must stay untouched until deleted here (a ``purgeMode: Never``
    graceful eviction task each, which the binding controller and the eviction controller
    leave alone)."""
    resource: dict[str, Any] = {
        "apiVersion": str(obj.get("apiVersion") or key.api_version),
        "kind": key.kind,
        "namespace": key.namespace,
        "name": key.name,
    }
    uid = ObjectView(obj).metadata.get("uid")
    if uid:
        resource["uid"] = uid
    clusters = sorted({c for parent in parents for c in parent.clusters})
    return {
        "resource": resource,
        "replicas": 0,
        "gang": False,
        "clusters": [{"name": c} for c in clusters],
        "requiredBy": encode_required_by(parents),
        **(
            {
                "gracefulEvictionTasks": [
                    {
                        "fromCluster": cluster,
                        "purgeMode": str(PurgeMode.NEVER),
                        "reason": str(HoldReason.PRESERVED_WORKLOAD_DELETED),
                        "message": f"the copy in {cluster} stays with a deleted workload that preserves it",
                    }
                    for cluster in sorted(set(holds))
                ]
            }
            if holds
            else {}
        ),
    }


def binding_is_for(binding: Mapping[str, Any] | None, key: DependencyKey) -> bool:
    resource = BindingView(binding).resource
    return bool(
        resource.get("kind") == key.kind
        and resource.get("name") == key.name
        and group_of(str(resource.get("apiVersion"))) == group_of(key.api_version)
    )


def describe_parents(parents: Sequence[BindingSnapshot]) -> str:
    parts = [f"{p.name} ({', '.join(p.clusters) or 'not scheduled yet'})" for p in sorted(parents)]
    return "follows the bindings that need it: " + "; ".join(parts)


def describe_policy(policy: Mapping[str, Any]) -> str:
    kind, name, namespace = policy.get("kind"), policy.get("name"), policy.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def missing_text(missing: Sequence[Dependency]) -> str:
    """What the parent's condition and Event say about referenced objects not on the hub."""
    one = len(missing) == 1
    return (
        ", ".join(str(d) for d in missing)
        + (" is" if one else " are")
        + " referenced by the pod template but not on the hub; the workload propagates without "
        + ("it" if one else "them")
        + " (create "
        + ("it" if one else "them")
        + " on the hub and "
        + ("it follows" if one else "they follow")
        + ")"
    )


def dependencies_condition(
    following: Sequence[Dependency],
    missing: Sequence[Dependency],
    independent: Mapping[Dependency, str],
) -> dict[str, Any] | None:
    """The parent's ``DependenciesPropagated`` condition (None when it references nothing).

    ``independent`` maps an object that a policy selects directly to that policy's description.
    """
    if not following and not missing and not independent:
        return None
    parts: list[str] = []
    if missing:
        parts.append(missing_text(missing))
    if following:
        parts.append("following the workload to its clusters: " + ", ".join(str(d) for d in following))
    for dependency, policy in sorted(independent.items()):
        parts.append(f"{dependency} is placed by its own policy {policy}, not by this workload's placement")
    return {
        "type": str(ConditionType.DEPENDENCIES_PROPAGATED),
        "status": "False" if missing else "True",
        "reason": str(DependenciesReason.MISSING if missing else DependenciesReason.PROPAGATED),
        "message": "; ".join(parts),
    }


__all__ = [
    "BindingSnapshot",
    "DependencyKey",
    "attached_spec",
    "binding_is_for",
    "dependencies_condition",
    "describe_parents",
    "describe_policy",
    "encode_required_by",
    "held_clusters",
    "is_attached",
    "is_parent_candidate",
    "missing_text",
    "parent_clusters",
    "propagates_deps",
    "required_by",
]
