"""The objects a pod template needs on the cluster it runs in: its dependencies.

A pod starts only where the ConfigMaps, Secrets, ServiceAccount and PersistentVolumeClaims it
references exist. With ``propagateDeps: true`` the hub sends them along with the workload
(Karmada's dependencies distributor); this module finds them. In: one pod template (or a
whole pod spec) as a plain dict. Out: :class:`Dependency` values, one per referenced object,
in a stable order.

Reference sites, as Kubernetes' own ``VisitPodSecretNames``/``VisitPodConfigmapNames`` walk
them, over every container (``containers``, ``initContainers``, ``ephemeralContainers``):

* volumes: ``configMap.name``, ``secret.secretName``, ``projected.sources[].configMap.name``
  and ``.secret.name``, ``persistentVolumeClaim.claimName``, and the ``secretRef`` /
  ``secretName`` / ``nodePublishSecretRef`` of the volume plugins that take credentials
  (azureFile, cephfs, cinder, csi, flexVolume, iscsi, rbd, scaleIO, storageos);
* ``env[].valueFrom.configMapKeyRef.name`` and ``.secretKeyRef.name``;
  ``envFrom[].configMapRef.name`` and ``.secretRef.name``;
* ``imagePullSecrets[].name``;
* ``serviceAccountName`` (or the deprecated ``serviceAccount``) other than ``default``, which
  every namespace has;
* ``resourceClaims[].resourceClaimTemplateName`` and ``.resourceClaimName`` (Dynamic Resource
  Allocation, resource.k8s.io/v1): the ResourceClaimTemplate each pod's claim is stamped from, or
  the ResourceClaim the pods share (each cluster then holds its own copy of it, allocated there).
  The DeviceClass a claim names is not one: the DRA driver installed in the member publishes its
  own (``gpu.nvidia.com``), and a ClusterPropagationPolicy can send others.

:func:`pod_spec_references` gives each reference site on its own (:class:`Reference`: the
volume or container that names the object, whether it is ``optional``, the keys it reads): what a
member's kubelet resolves before it starts a pod (the simulated kubelet reads it so).

The ConfigMap ``kube-root-ca.crt`` is not a dependency either: kube's root CA publisher keeps one
in every namespace of every cluster (a pod's ``kube-api-access-*`` projected volume, as
``kubectl get pod -o yaml`` shows it, names it), and the member's own must not be replaced by the
hub's: no policy propagates it either (:func:`is_root_ca_config_map`).

Pure; no I/O. Inputs are never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DEPENDENCY_KINDS",
    "Dependency",
    "DependencyKind",
    "Reference",
    "is_dependency",
    "is_root_ca_config_map",
    "pod_spec_dependencies",
    "pod_spec_references",
    "pod_template_dependencies",
    "sorted_dependencies",
]

CORE_API_VERSION = "v1"
#: Dynamic Resource Allocation's API version (ResourceClaim, ResourceClaimTemplate).
RESOURCE_API_VERSION = "resource.k8s.io/v1"
DEFAULT_SERVICE_ACCOUNT = "default"
#: The ConfigMap of the cluster's root CA in every namespace (kube's root CA publisher).
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"


def is_root_ca_config_map(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a namespace's root CA ConfigMap, which each cluster keeps its own of: never
    propagated, by a policy or as a dependency."""
    if obj.get("kind") != "ConfigMap" or obj.get("apiVersion") != CORE_API_VERSION:
        return False
    return (obj.get("metadata") or {}).get("name") == ROOT_CA_CONFIG_MAP


class DependencyKind(StrEnum):
    """The kinds a pod template can depend on (the core group's ``v1``, and resource.k8s.io's claims)."""

    CONFIG_MAP = "ConfigMap"
    SECRET = "Secret"
    SERVICE_ACCOUNT = "ServiceAccount"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"


DEPENDENCY_KINDS: frozenset[str] = frozenset(str(kind) for kind in DependencyKind)
_RESOURCE_KINDS: frozenset[str] = frozenset({DependencyKind.RESOURCE_CLAIM, DependencyKind.RESOURCE_CLAIM_TEMPLATE})


#: Kinds of other groups a workload depends on: a TrainJob's TrainingRuntime (the member's
#: trainer resolves it there), by (group, kind).
OTHER_DEPENDENCY_KINDS: frozenset[tuple[str, str]] = frozenset({("trainer.kubeflow.org", "TrainingRuntime")})


def is_dependency(api_version: str, kind: str) -> bool:
    """Whether objects of ``kind`` (in ``api_version``'s group) are what workloads depend on."""
    group = api_version.rpartition("/")[0]
    if kind in _RESOURCE_KINDS:
        return group == "resource.k8s.io"
    if (group, kind) in OTHER_DEPENDENCY_KINDS:
        return True
    return kind in DEPENDENCY_KINDS and group == ""


@dataclass(frozen=True, slots=True, order=True)
class Dependency:
    """One object a workload's pods reference, in the workload's own namespace."""

    kind: str
    name: str
    api_version: str = CORE_API_VERSION

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


#: Volume sources whose credentials are a Secret: (volume source key, ref field, name field).
#: ``ref field`` None means the Secret's name sits directly in the source under ``name field``.
_SECRET_VOLUME_REFS: tuple[tuple[str, str | None, str], ...] = (
    ("azureFile", None, "secretName"),
    ("cephfs", "secretRef", "name"),
    ("cinder", "secretRef", "name"),
    ("csi", "nodePublishSecretRef", "name"),
    ("flexVolume", "secretRef", "name"),
    ("iscsi", "secretRef", "name"),
    ("rbd", "secretRef", "name"),
    ("scaleIO", "secretRef", "name"),
    ("storageos", "secretRef", "name"),
)

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, Mapping):
                yield item


def _name(source: Mapping[str, Any], field: str = "name") -> str | None:
    value = source.get(field)
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Reference:
    """One place a pod spec names a ConfigMap, Secret or PersistentVolumeClaim: what a
    member's kubelet resolves before it starts the pod's containers."""

    dependency: Dependency
    #: The volume that names it (None: a container's environment).
    volume: str | None = None
    #: The container whose environment names it (None: a volume).
    container: str | None = None
    #: ``optional: true``: a missing object (or key) is no error.
    optional: bool = False
    #: The keys of the object the reference reads (``configMapKeyRef.key``, a volume's
    #: ``items[].key``); empty: the whole object.
    keys: tuple[str, ...] = ()
    #: The environment variable a key reference sets.
    env: str | None = None


def _optional(source: Mapping[str, Any]) -> bool:
    return source.get("optional") is True


def _item_keys(source: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(key for item in _items(source.get("items")) if isinstance(key := item.get("key"), str))


def _volume_refs(volume: Mapping[str, Any]) -> Iterator[Reference]:
    at = _name(volume)
    if name := _name(source := _mapping(volume.get("configMap"))):
        yield Reference(Dependency(DependencyKind.CONFIG_MAP, name), volume=at, optional=_optional(source),
                        keys=_item_keys(source))
    if name := _name(source := _mapping(volume.get("secret")), "secretName"):
        yield Reference(Dependency(DependencyKind.SECRET, name), volume=at, optional=_optional(source),
                        keys=_item_keys(source))
    if name := _name(_mapping(volume.get("persistentVolumeClaim")), "claimName"):
        yield Reference(Dependency(DependencyKind.PERSISTENT_VOLUME_CLAIM, name), volume=at)
    for projected in _items(_mapping(volume.get("projected")).get("sources")):
        if name := _name(source := _mapping(projected.get("configMap"))):
            yield Reference(Dependency(DependencyKind.CONFIG_MAP, name), volume=at, optional=_optional(source),
                            keys=_item_keys(source))
        if name := _name(source := _mapping(projected.get("secret"))):
            yield Reference(Dependency(DependencyKind.SECRET, name), volume=at, optional=_optional(source),
                            keys=_item_keys(source))
    for key, ref_field, name_field in _SECRET_VOLUME_REFS:
        source = _mapping(volume.get(key))
        holder = _mapping(source.get(ref_field)) if ref_field else source
        if name := _name(holder, name_field):
            yield Reference(Dependency(DependencyKind.SECRET, name), volume=at)


def _container_refs(container: Mapping[str, Any]) -> Iterator[Reference]:
    at = _name(container)
    for env in _items(container.get("env")):
        value_from = _mapping(env.get("valueFrom"))
        for field, kind in (("configMapKeyRef", DependencyKind.CONFIG_MAP), ("secretKeyRef", DependencyKind.SECRET)):
            if name := _name(source := _mapping(value_from.get(field))):
                key = source.get("key")
                yield Reference(Dependency(kind, name), container=at, optional=_optional(source),
                                keys=(key,) if isinstance(key, str) else (), env=_name(env))
    for env_from in _items(container.get("envFrom")):
        for field, kind in (("configMapRef", DependencyKind.CONFIG_MAP), ("secretRef", DependencyKind.SECRET)):
            if name := _name(source := _mapping(env_from.get(field))):
                yield Reference(Dependency(kind, name), container=at, optional=_optional(source))


def pod_spec_references(pod_spec: Mapping[str, Any] | None) -> Iterator[Reference]:
    """Where one pod spec names a ConfigMap, Secret or claim: its volumes, then each
    container's environment (init containers first, as the kubelet starts them)."""
    spec = _mapping(pod_spec)
    for volume in _items(spec.get("volumes")):
        yield from _volume_refs(volume)
    for key in _CONTAINER_LISTS:
        for container in _items(spec.get(key)):
            yield from _container_refs(container)


def pod_spec_dependencies(pod_spec: Mapping[str, Any] | None) -> set[Dependency]:
    """The objects one pod spec references (see the module docstring for where they are)."""
    spec = _mapping(pod_spec)
    found = {reference.dependency for reference in pod_spec_references(spec)}
    for secret in _items(spec.get("imagePullSecrets")):
        if name := _name(secret):
            found.add(Dependency(DependencyKind.SECRET, name))
    account = _name(spec, "serviceAccountName") or _name(spec, "serviceAccount")
    if account and account != DEFAULT_SERVICE_ACCOUNT:
        found.add(Dependency(DependencyKind.SERVICE_ACCOUNT, account))
    for claim in _items(spec.get("resourceClaims")):
        if name := _name(claim, "resourceClaimTemplateName"):
            found.add(Dependency(DependencyKind.RESOURCE_CLAIM_TEMPLATE, name, RESOURCE_API_VERSION))
        elif name := _name(claim, "resourceClaimName"):
            found.add(Dependency(DependencyKind.RESOURCE_CLAIM, name, RESOURCE_API_VERSION))
    found.discard(Dependency(DependencyKind.CONFIG_MAP, ROOT_CA_CONFIG_MAP))
    return found


def pod_template_dependencies(template: Mapping[str, Any] | None) -> set[Dependency]:
    """The objects a pod template (``{metadata, spec}``) references."""
    return pod_spec_dependencies(_mapping(_mapping(template).get("spec")))


def sorted_dependencies(found: Iterable[Dependency]) -> list[Dependency]:
    """Unique, ordered by kind then name: the form every interpreter returns."""
    return sorted(set(found))
