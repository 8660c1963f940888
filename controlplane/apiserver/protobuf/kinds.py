"""Which kinds the hub decodes from protobuf: the ones kubectl's imperative commands send.

``kubectl create namespace|configmap|secret|serviceaccount|service|quota|deployment|job|
cronjob|role|clusterrole|rolebinding|clusterrolebinding|ingress|poddisruptionbudget|
priorityclass|token``, ``kubectl certificate approve|deny`` (a CertificateSigningRequest), ``kubectl autoscale`` (an autoscaling/v1 HorizontalPodAutoscaler) and ``kubectl auth can-i|whoami`` use typed clients that write
``application/vnd.kubernetes.protobuf`` bodies; manifests
(``kubectl apply -f``) always go as JSON, so no other kind needs a table here. Keys
are ``(apiVersion, kind)`` as the envelope names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.apiserver.protobuf.schema import Message
from controlplane.apiserver.protobuf.tables import MESSAGES

_KINDS: Mapping[str, tuple[str, ...]] = {
    "v1": ("Namespace", "ConfigMap", "Secret", "ServiceAccount", "Service", "ResourceQuota"),
    "apps/v1": ("Deployment",),
    "batch/v1": ("Job", "CronJob"),
    "rbac.authorization.k8s.io/v1": ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"),
    "networking.k8s.io/v1": ("Ingress",),
    "policy/v1": ("PodDisruptionBudget",),
    "autoscaling/v1": ("HorizontalPodAutoscaler",),
    "scheduling.k8s.io/v1": ("PriorityClass",),
    "authorization.k8s.io/v1": (
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
    ),
    "authentication.k8s.io/v1": ("SelfSubjectReview", "TokenRequest", "TokenReview"),
    "certificates.k8s.io/v1": ("CertificateSigningRequest",),
}

MESSAGES_BY_KIND: Mapping[tuple[str, str], Message] = {
    (api_version, kind): MESSAGES[kind] for api_version, kinds in _KINDS.items() for kind in kinds
}
