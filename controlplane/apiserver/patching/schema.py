"""How each field of a built-in kind merges: the patch and apply metadata of the Kubernetes types.

Kubernetes carries this knowledge as struct tags on its Go types: ``patchStrategy`` and
``patchMergeKey`` drive strategic merge patch, ``+listType``/``+listMapKey``/``+mapType``/
``+structType`` drive server-side apply. The hub stores plain dicts, so this module
writes the same facts down as a small tree of :class:`FieldSchema` nodes, one tree per
kind, covering the fields ``kubectl`` and controllers touch. Everything not described
here falls back to the defaults both algorithms use for unknown fields: objects merge
key by key, lists are replaced whole (atomic).

In: a built-in kind's group and name. Out: the root :class:`FieldSchema` of that kind
(ObjectMeta only for the kinds it does not describe: gpufed's own kinds). A custom
resource's schema comes from its CRD instead (:mod:`.structural`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class ListType(StrEnum):
    """How server-side apply treats a list (``+listType`` in the Kubernetes types)."""

    ATOMIC = "atomic"  # one value, owned and replaced whole
    MAP = "map"  # associative: items identified by the key fields
    SET = "set"  # a set of scalars, each value owned on its own


_EMPTY: Mapping[str, FieldSchema] = MappingProxyType({})
_NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, eq=False)
class FieldSchema:
    """Merge metadata for one field (and, through ``fields``/``values``/``item``, its contents).

    ``merge_key`` set (or ``merge_primitives``) means strategic merge patch merges the list
    instead of replacing it. ``list_type``/``keys`` are what server-side apply uses; they
    differ from the patch tags for a few fields (Job conditions merge by ``type`` in a patch
    but are atomic for apply; container ports merge by ``containerPort`` in a patch but are
    keyed by ``containerPort`` and ``protocol`` for apply).
    """

    fields: Mapping[str, FieldSchema] = field(default_factory=lambda: _EMPTY)
    values: FieldSchema | None = None  # set for map-typed fields (labels, data, limits)
    item: FieldSchema | None = None  # element schema of a list
    merge_key: str | None = None  # strategic merge patch: list of objects merged by this key
    merge_primitives: bool = False  # strategic merge patch: list of scalars merged as a set
    list_type: ListType = ListType.ATOMIC
    keys: tuple[str, ...] = ()  # server-side apply: key fields of an associative list
    key_defaults: Mapping[str, Any] = field(
        default_factory=lambda: _NO_DEFAULTS
    )  # API defaults of key fields
    atomic: bool = False  # server-side apply: object/map owned and replaced whole

    def child(self, name: str) -> FieldSchema:
        """The schema of member ``name`` of this object or map."""
        found = self.fields.get(name)
        if found is not None:
            return found
        if self.values is not None:
            return self.values
        return UNKNOWN

    def element(self) -> FieldSchema:
        """The schema of this list's elements."""
        return self.item if self.item is not None else UNKNOWN

    @property
    def patch_merges(self) -> bool:
        """Whether strategic merge patch merges this list rather than replacing it."""
        return self.merge_key is not None or self.merge_primitives

    @property
    def is_map_typed(self) -> bool:
        """A map with arbitrary keys (labels, data) rather than an object with named fields."""
        return self.values is not None


UNKNOWN = FieldSchema()
_SCALAR = UNKNOWN


def _deduced() -> FieldSchema:
    node = FieldSchema()
    object.__setattr__(node, "values", node)  # its members are deduced too, however deep
    return node


DEDUCED = _deduced()
"""A value that no schema describes, as kube deduces it (``x-kubernetes-preserve-unknown-fields``):
objects merge key by key, each key owned on its own, and lists are atomic."""


def _struct(**fields: FieldSchema) -> FieldSchema:
    return FieldSchema(fields=MappingProxyType(dict(fields)))


def _map(*, atomic: bool = False) -> FieldSchema:
    return FieldSchema(values=_SCALAR, atomic=atomic)


def _atomic() -> FieldSchema:
    return FieldSchema(atomic=True)


def _keyed(
    item: FieldSchema,
    merge_key: str,
    *,
    apply_keys: tuple[str, ...] | None = None,
    key_defaults: Mapping[str, Any] | None = None,
    apply_atomic: bool = False,
) -> FieldSchema:
    """A list of objects merged by ``merge_key`` (patch) and keyed by ``apply_keys`` (apply)."""
    if apply_atomic:
        return FieldSchema(item=item, merge_key=merge_key, list_type=ListType.ATOMIC)
    return FieldSchema(
        item=item,
        merge_key=merge_key,
        list_type=ListType.MAP,
        keys=apply_keys or (merge_key,),
        key_defaults=MappingProxyType(dict(key_defaults or {})),
    )


def _apply_keyed(item: FieldSchema, *keys: str) -> FieldSchema:
    """Associative for apply only; a strategic merge patch replaces it (no patch tags)."""
    return FieldSchema(item=item, list_type=ListType.MAP, keys=keys)


def _set() -> FieldSchema:
    """A list of scalars merged as a set (``patchStrategy=merge`` on a primitive list)."""
    return FieldSchema(merge_primitives=True, list_type=ListType.SET)


OBJECT_META = _struct(
    labels=_map(),
    annotations=_map(),
    finalizers=_set(),
    ownerReferences=_keyed(UNKNOWN, "uid"),
    managedFields=FieldSchema(),
)

_CONDITIONS = _keyed(UNKNOWN, "type")

_CONTAINER = _struct(
    ports=_keyed(
        UNKNOWN,
        "containerPort",
        apply_keys=("containerPort", "protocol"),
        key_defaults={"protocol": "TCP"},
    ),
    env=_keyed(UNKNOWN, "name"),
    volumeMounts=_keyed(UNKNOWN, "mountPath"),
    volumeDevices=_keyed(UNKNOWN, "devicePath"),
    resources=_struct(
        limits=_map(),
        requests=_map(),
        claims=_apply_keyed(UNKNOWN, "name"),
    ),
)

_POD_SPEC = _struct(
    volumes=_keyed(UNKNOWN, "name"),
    initContainers=_keyed(_CONTAINER, "name"),
    containers=_keyed(_CONTAINER, "name"),
    ephemeralContainers=_keyed(_CONTAINER, "name"),
    imagePullSecrets=_keyed(UNKNOWN, "name"),
    hostAliases=_keyed(UNKNOWN, "ip"),
    topologySpreadConstraints=_keyed(UNKNOWN, "topologyKey", apply_keys=("topologyKey", "whenUnsatisfiable")),
    schedulingGates=_keyed(UNKNOWN, "name"),
    resourceClaims=_keyed(UNKNOWN, "name"),
    nodeSelector=_map(atomic=True),
    overhead=_map(),
    affinity=_struct(nodeAffinity=_struct(requiredDuringSchedulingIgnoredDuringExecution=_atomic())),
)

_POD_TEMPLATE = _struct(metadata=OBJECT_META, spec=_POD_SPEC)

_WORKLOAD_STATUS = _struct(conditions=_CONDITIONS)

#: Deployment, StatefulSet, ReplicaSet, DaemonSet: a selector (LabelSelector, ``+structType=atomic``)
#: and a pod template; conditions keyed by ``type``.
_POD_CONTROLLER = _struct(
    metadata=OBJECT_META,
    spec=_struct(selector=_atomic(), template=_POD_TEMPLATE),
    status=_WORKLOAD_STATUS,
)

_JOB_SPEC = _struct(selector=_atomic(), template=_POD_TEMPLATE)

_METADATA_ONLY = _struct(metadata=OBJECT_META)

_KINDS: Mapping[tuple[str, str], FieldSchema] = MappingProxyType(
    {
        ("apps", "Deployment"): _POD_CONTROLLER,
        ("apps", "StatefulSet"): _POD_CONTROLLER,
        ("apps", "ReplicaSet"): _POD_CONTROLLER,
        ("apps", "DaemonSet"): _POD_CONTROLLER,
        ("apps", "ControllerRevision"): _METADATA_ONLY,
        ("batch", "Job"): _struct(
            metadata=OBJECT_META,
            spec=_JOB_SPEC,
            status=_struct(conditions=_keyed(UNKNOWN, "type", apply_atomic=True)),
        ),
        # CronJobStatus.active is ``+listType=atomic`` without patch tags: replaced whole.
        ("batch", "CronJob"): _struct(metadata=OBJECT_META, spec=_struct(jobTemplate=_struct(metadata=OBJECT_META, spec=_JOB_SPEC))),
        # Ingress rules/tls, NetworkPolicy ingress/egress/policyTypes, LimitRange limits and
        # StorageClass mountOptions/allowedTopologies are ``+listType=atomic``: the defaults.
        ("networking.k8s.io", "Ingress"): _METADATA_ONLY,
        ("networking.k8s.io", "IngressClass"): _METADATA_ONLY,
        ("networking.k8s.io", "NetworkPolicy"): _struct(metadata=OBJECT_META, spec=_struct(podSelector=_atomic())),
        ("policy", "PodDisruptionBudget"): _struct(
            metadata=OBJECT_META,
            spec=_struct(selector=_atomic()),
            status=_struct(conditions=_CONDITIONS, disruptedPods=_map()),
        ),
        # HorizontalPodAutoscaler (autoscaling/v2): metrics and currentMetrics are atomic.
        ("autoscaling", "HorizontalPodAutoscaler"): _struct(metadata=OBJECT_META, status=_struct(conditions=_CONDITIONS)),
        ("", "LimitRange"): _METADATA_ONLY,
        ("", "ResourceQuota"): _struct(
            metadata=OBJECT_META, spec=_struct(hard=_map()), status=_struct(hard=_map(), used=_map())
        ),
        ("storage.k8s.io", "StorageClass"): _struct(metadata=OBJECT_META, parameters=_map()),
        # Webhooks merge by name (``patchMergeKey=name``, ``listType=map``); their lists are atomic.
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): _struct(
            metadata=OBJECT_META, webhooks=_keyed(UNKNOWN, "name")
        ),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): _struct(
            metadata=OBJECT_META, webhooks=_keyed(UNKNOWN, "name")
        ),
        # A policy's matchConditions merge by name; its validations, variables and rules are atomic.
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): _struct(
            metadata=OBJECT_META, spec=_struct(matchConditions=_keyed(UNKNOWN, "name")),
        ),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): _METADATA_ONLY,
        # RuntimeClass scheduling.tolerations is ``+listType=atomic``, its nodeSelector ``+mapType=atomic``.
        ("node.k8s.io", "RuntimeClass"): _struct(
            metadata=OBJECT_META, overhead=_struct(podFixed=_map()), scheduling=_struct(nodeSelector=_map(atomic=True))
        ),
        # EndpointSlice endpoints and ports are ``+listType=atomic``.
        ("discovery.k8s.io", "EndpointSlice"): _METADATA_ONLY,
        # resource.k8s.io/v1: requests, selectors, configs and a slice's devices are ``+listType=atomic``; a
        # claim's status merges its consumers by uid and (apply only) its devices by driver, device, pool, shareID.
        ("resource.k8s.io", "DeviceClass"): _METADATA_ONLY,
        ("resource.k8s.io", "ResourceClaim"): _struct(
            metadata=OBJECT_META,
            status=_struct(
                reservedFor=_keyed(UNKNOWN, "uid"),
                devices=_apply_keyed(_struct(conditions=_apply_keyed(UNKNOWN, "type")), "driver", "device", "pool", "shareID"),
            ),
        ),
        ("resource.k8s.io", "ResourceClaimTemplate"): _struct(metadata=OBJECT_META, spec=_struct(metadata=OBJECT_META)),
        ("resource.k8s.io", "ResourceSlice"): _METADATA_ONLY,
        # RBAC: rules, subjects and aggregationRule.clusterRoleSelectors are ``+listType=atomic``.
        ("rbac.authorization.k8s.io", "Role"): _METADATA_ONLY,
        ("rbac.authorization.k8s.io", "ClusterRole"): _METADATA_ONLY,
        ("rbac.authorization.k8s.io", "RoleBinding"): _METADATA_ONLY,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _METADATA_ONLY,
        ("", "Pod"): _struct(
            metadata=OBJECT_META,
            spec=_POD_SPEC,
            status=_struct(
                conditions=_CONDITIONS,
                podIPs=_keyed(UNKNOWN, "ip"),
                hostIPs=_keyed(UNKNOWN, "ip"),
                resourceClaimStatuses=_keyed(UNKNOWN, "name"),
            ),
        ),
        ("", "Service"): _struct(
            metadata=OBJECT_META,
            spec=_struct(
                ports=_keyed(
                    UNKNOWN, "port", apply_keys=("port", "protocol"), key_defaults={"protocol": "TCP"}
                ),
                selector=_map(atomic=True),
            ),
            status=_struct(conditions=_CONDITIONS),
        ),
        ("", "ConfigMap"): _struct(metadata=OBJECT_META, data=_map(), binaryData=_map()),
        ("", "Secret"): _struct(metadata=OBJECT_META, data=_map(), stringData=_map()),
        ("", "Namespace"): _struct(metadata=OBJECT_META, status=_struct(conditions=_CONDITIONS)),
        ("", "Node"): _struct(
            metadata=OBJECT_META,
            spec=_struct(podCIDRs=_set()),
            status=_struct(
                conditions=_CONDITIONS,
                addresses=_keyed(UNKNOWN, "type"),
                capacity=_map(),
                allocatable=_map(),
            ),
        ),
        ("coordination.k8s.io", "Lease"): _struct(metadata=OBJECT_META),
        ("", "Event"): _struct(metadata=OBJECT_META),
        ("events.k8s.io", "Event"): _struct(metadata=OBJECT_META),
        ("", "ServiceAccount"): _struct(metadata=OBJECT_META, secrets=_keyed(UNKNOWN, "name")),
        ("scheduling.k8s.io", "PriorityClass"): _struct(metadata=OBJECT_META),
        # CertificateSigningRequest: usages and groups are ``+listType=atomic``; its conditions are
        # ``+listType=map`` by type without patch tags (strategic merge replaces them whole).
        ("certificates.k8s.io", "CertificateSigningRequest"): _struct(
            metadata=OBJECT_META, spec=_struct(extra=_map()), status=_struct(conditions=_apply_keyed(UNKNOWN, "type")),
        ),
        # APIService conditions: ``+patchMergeKey=type +patchStrategy=merge +listType=map``.
        ("apiregistration.k8s.io", "APIService"): _struct(metadata=OBJECT_META, status=_struct(conditions=_CONDITIONS)),
        # flowcontrol's rules, subjects and rule lists are ``+listType=atomic``; conditions merge by type.
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"): _struct(metadata=OBJECT_META, status=_struct(conditions=_CONDITIONS)),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): _struct(
            metadata=OBJECT_META, status=_struct(conditions=_CONDITIONS),
        ),
        # Endpoints subsets are ``+listType=atomic``.
        ("", "Endpoints"): _METADATA_ONLY,
        ("", "PersistentVolume"): _struct(metadata=OBJECT_META, spec=_struct(capacity=_map())),
        ("", "ReplicationController"): _struct(
            metadata=OBJECT_META,
            spec=_struct(selector=_map(atomic=True), template=_POD_TEMPLATE),
            status=_struct(conditions=_CONDITIONS),
        ),
        ("", "PersistentVolumeClaim"): _struct(
            metadata=OBJECT_META,
            spec=_struct(resources=_struct(requests=_map(), limits=_map())),
            status=_struct(conditions=_CONDITIONS, capacity=_map(), allocatedResources=_map()),
        ),
    }
)

GENERIC_OBJECT = _struct(metadata=OBJECT_META)
"""Root for kinds without built-in metadata: only ObjectMeta is known, lists are atomic."""

_STRATEGIC: Mapping[str, FieldSchema] = MappingProxyType({kind: schema for (_, kind), schema in _KINDS.items()})


def builtin_apply_schema(group: str, kind: str) -> FieldSchema:
    """The schema server-side apply uses for the built-in ``kind`` of ``group`` (ObjectMeta only
    for a kind this module does not describe: another group's kind of the same name is not it)."""
    return _KINDS.get((group, kind), GENERIC_OBJECT)


def strategic_schema(kind: str) -> FieldSchema | None:
    """The schema strategic merge patch uses for ``kind``, or ``None`` when it has none.

    Only built-in kinds take strategic merge patch, and their kind names are unique."""
    return _STRATEGIC.get(kind)


def supported_strategic_kinds() -> frozenset[str]:
    """Kinds that accept ``application/strategic-merge-patch+json``."""
    return frozenset(_STRATEGIC)
