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
  every namespace has.

The ConfigMap ``kube-root-ca.crt`` is not a dependency either: kube's root CA publisher keeps one
in every namespace of every cluster (a pod's ``kube-api-access-*`` projected volume, as
``kubectl get pod -o yaml`` shows it, names it), and the member's own must not be replaced by the
hub's.

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
    "pod_spec_dependencies",
    "pod_template_dependencies",
    "sorted_dependencies",
]

CORE_API_VERSION = "v1"
DEFAULT_SERVICE_ACCOUNT = "default"
#: The ConfigMap of the cluster's root CA in every namespace (kube's root CA publisher).
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"


class DependencyKind(StrEnum):
    """The kinds a pod template can depend on (all in the core group, ``v1``)."""

    CONFIG_MAP = "ConfigMap"
    SECRET = "Secret"
    SERVICE_ACCOUNT = "ServiceAccount"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"


DEPENDENCY_KINDS: frozenset[str] = frozenset(str(kind) for kind in DependencyKind)


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


def _volume_refs(volume: Mapping[str, Any]) -> Iterator[Dependency]:
    if name := _name(_mapping(volume.get("configMap"))):
        yield Dependency(DependencyKind.CONFIG_MAP, name)
    if name := _name(_mapping(volume.get("secret")), "secretName"):
        yield Dependency(DependencyKind.SECRET, name)
    if name := _name(_mapping(volume.get("persistentVolumeClaim")), "claimName"):
        yield Dependency(DependencyKind.PERSISTENT_VOLUME_CLAIM, name)
    for source in _items(_mapping(volume.get("projected")).get("sources")):
        if name := _name(_mapping(source.get("configMap"))):
            yield Dependency(DependencyKind.CONFIG_MAP, name)
        if name := _name(_mapping(source.get("secret"))):
            yield Dependency(DependencyKind.SECRET, name)
    for key, ref_field, name_field in _SECRET_VOLUME_REFS:
        source = _mapping(volume.get(key))
        holder = _mapping(source.get(ref_field)) if ref_field else source
        if name := _name(holder, name_field):
            yield Dependency(DependencyKind.SECRET, name)


def _container_refs(container: Mapping[str, Any]) -> Iterator[Dependency]:
    for env in _items(container.get("env")):
        value_from = _mapping(env.get("valueFrom"))
        if name := _name(_mapping(value_from.get("configMapKeyRef"))):
            yield Dependency(DependencyKind.CONFIG_MAP, name)
        if name := _name(_mapping(value_from.get("secretKeyRef"))):
            yield Dependency(DependencyKind.SECRET, name)
    for source in _items(container.get("envFrom")):
        if name := _name(_mapping(source.get("configMapRef"))):
            yield Dependency(DependencyKind.CONFIG_MAP, name)
        if name := _name(_mapping(source.get("secretRef"))):
            yield Dependency(DependencyKind.SECRET, name)


def pod_spec_dependencies(pod_spec: Mapping[str, Any] | None) -> set[Dependency]:
    """The objects one pod spec references (see the module docstring for where they are)."""
    spec = _mapping(pod_spec)
    found: set[Dependency] = set()
    for volume in _items(spec.get("volumes")):
        found.update(_volume_refs(volume))
    for key in _CONTAINER_LISTS:
        for container in _items(spec.get(key)):
            found.update(_container_refs(container))
    for secret in _items(spec.get("imagePullSecrets")):
        if name := _name(secret):
            found.add(Dependency(DependencyKind.SECRET, name))
    account = _name(spec, "serviceAccountName") or _name(spec, "serviceAccount")
    if account and account != DEFAULT_SERVICE_ACCOUNT:
        found.add(Dependency(DependencyKind.SERVICE_ACCOUNT, account))
    found.discard(Dependency(DependencyKind.CONFIG_MAP, ROOT_CA_CONFIG_MAP))
    return found


def pod_template_dependencies(template: Mapping[str, Any] | None) -> set[Dependency]:
    """The objects a pod template (``{metadata, spec}``) references."""
    return pod_spec_dependencies(_mapping(_mapping(template).get("spec")))


def sorted_dependencies(found: Iterable[Dependency]) -> list[Dependency]:
    """Unique, ordered by kind then name: the form every interpreter returns."""
    return sorted(set(found))
