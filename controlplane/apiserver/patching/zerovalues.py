"""What a built-in kind's Go object holds before any write: the old value kube's field manager
compares a write with.

kube records an ordinary write (create, update, patch) as the fields it added or changed, and an
object or list the write adds where the old value had none is owned itself (FieldsV1's
``.: {}``). kube holds a built-in kind in a Go struct, whose nested structs (not pointers) always
exist and whose lists without ``omitempty`` marshal as ``null``: a Deployment's ``spec``,
``strategy`` and ``template`` exist in its zero value, so its creator owns their fields but not
them; its ``rollingUpdate`` (a pointer) does not, so the creator owns it too; its ``containers``
are ``null``, so the creator owns each container but not the list. A custom resource is
unstructured: its zero value is empty, and a writer owns every object it adds (``f:spec:
{.: {}, ...}``).

In: a built-in kind's group and name. Out: its zero value as JSON, containers only (scalars do
not change what a write owns), ``None`` for a ``null`` list. Kinds not listed here have a
``spec`` and a ``status`` struct, as most built-in kinds do. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

#: The zero value of an unstructured object (a custom resource): nothing exists before a write.
UNSTRUCTURED: Final[Mapping[str, Any]] = MappingProxyType({})

_POD_TEMPLATE: dict[str, Any] = {"metadata": {}, "spec": {"containers": None}}
_SPEC_STATUS: dict[str, Any] = {"spec": {}, "status": {}}
_NONE: dict[str, Any] = {}

_KINDS: Mapping[tuple[str, str], Mapping[str, Any]] = MappingProxyType({
    ("apps", "Deployment"): {"spec": {"selector": None, "template": _POD_TEMPLATE, "strategy": {}}, "status": {}},
    ("apps", "ReplicaSet"): {"spec": {"selector": None, "template": _POD_TEMPLATE}, "status": {}},
    ("apps", "StatefulSet"): {
        "spec": {"selector": None, "template": _POD_TEMPLATE, "updateStrategy": {}}, "status": {},
    },
    ("apps", "DaemonSet"): {"spec": {"selector": None, "template": _POD_TEMPLATE, "updateStrategy": {}}, "status": {}},
    ("apps", "ControllerRevision"): {"data": None},
    ("batch", "Job"): {"spec": {"template": _POD_TEMPLATE}, "status": {}},
    ("batch", "CronJob"): {"spec": {"jobTemplate": {"metadata": {}, "spec": {"template": _POD_TEMPLATE}}}, "status": {}},
    ("", "Pod"): {"spec": {"containers": None}, "status": {}},
    ("", "PodTemplate"): {"template": _POD_TEMPLATE},
    ("", "Service"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("", "PersistentVolumeClaim"): {"spec": {"resources": {}}, "status": {}},
    ("", "Node"): {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {}}, "nodeInfo": {}}},
    ("", "LimitRange"): {"spec": {"limits": None}},
    ("", "Event"): {"involvedObject": {}, "source": {}},
    ("", "ConfigMap"): _NONE,
    ("", "Secret"): _NONE,
    ("", "ServiceAccount"): _NONE,
    ("", "Endpoints"): _NONE,
    ("events.k8s.io", "Event"): {"regarding": {}, "deprecatedSource": {}},
    ("networking.k8s.io", "Ingress"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("networking.k8s.io", "NetworkPolicy"): {"spec": {"podSelector": {}}},
    ("networking.k8s.io", "IngressClass"): {"spec": {}},
    ("discovery.k8s.io", "EndpointSlice"): {"endpoints": None, "ports": None},
    ("autoscaling", "HorizontalPodAutoscaler"): {"spec": {"scaleTargetRef": {}}, "status": {}},
    ("rbac.authorization.k8s.io", "Role"): {"rules": None},
    ("rbac.authorization.k8s.io", "ClusterRole"): {"rules": None},
    ("rbac.authorization.k8s.io", "RoleBinding"): {"roleRef": {}},
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): {"roleRef": {}},
    ("scheduling.k8s.io", "PriorityClass"): _NONE,
    ("storage.k8s.io", "StorageClass"): _NONE,
    ("node.k8s.io", "RuntimeClass"): _NONE,
    ("resource.k8s.io", "DeviceClass"): {"spec": {}},
    ("resource.k8s.io", "ResourceClaimTemplate"): {"spec": {"metadata": {}, "spec": {"devices": {}}}},
    ("resource.k8s.io", "ResourceSlice"): {"spec": {}},
    ("coordination.k8s.io", "Lease"): {"spec": {}},
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): _NONE,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): _NONE,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): {"spec": {}},
    ("certificates.k8s.io", "CertificateSigningRequest"): {"spec": {"request": None}, "status": {}},
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): {"spec": {"priorityLevelConfiguration": {}}, "status": {}},
    ("apiextensions.k8s.io", "CustomResourceDefinition"): {
        "spec": {"names": {}, "versions": None}, "status": {"acceptedNames": {}, "storedVersions": None},
    },
})


def zero_value(group: str, kind: str) -> Mapping[str, Any]:
    """The zero value of the built-in ``kind`` of ``group`` (containers only, see the module)."""
    return _KINDS.get((group, kind), _SPEC_STATUS)
