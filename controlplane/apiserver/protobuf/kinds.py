"""Which kinds the hub decodes from protobuf: the ones kubectl's imperative commands send.

``kubectl create namespace|configmap|secret|serviceaccount|service|deployment|job|role|
clusterrole|rolebinding|clusterrolebinding`` and ``kubectl auth can-i|whoami`` use typed clients that write ``application/vnd.kubernetes.protobuf`` bodies; manifests
(``kubectl apply -f``) always go as JSON, so no other kind needs a table here. Keys
are ``(apiVersion, kind)`` as the envelope names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.apiserver.protobuf.schema import Message
from controlplane.apiserver.protobuf.tables import MESSAGES

_KINDS: Mapping[str, tuple[str, ...]] = {
    "v1": ("Namespace", "ConfigMap", "Secret", "ServiceAccount", "Service"),
    "apps/v1": ("Deployment",),
    "batch/v1": ("Job",),
    "rbac.authorization.k8s.io/v1": ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"),
    "authorization.k8s.io/v1": (
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
    ),
    "authentication.k8s.io/v1": ("SelfSubjectReview",),
}

MESSAGES_BY_KIND: Mapping[tuple[str, str], Message] = {
    (api_version, kind): MESSAGES[kind] for api_version, kinds in _KINDS.items() for kind in kinds
}
