"""Which kinds the hub decodes from protobuf: the ones kubectl's imperative commands send.

``kubectl create namespace|configmap|secret|serviceaccount|service|deployment|job|role|
clusterrole|rolebinding|clusterrolebinding`` and ``kubectl auth can-i|whoami`` use typed clients that write ``application/vnd.kubernetes.protobuf`` bodies; manifests
(``kubectl apply -f``) always go as JSON, so no other kind needs a table here. Keys
are ``(apiVersion, kind)`` as the envelope names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.apiserver.protobuf.apps_v1 import DEPLOYMENT
from controlplane.apiserver.protobuf.batch_v1 import JOB
from controlplane.apiserver.protobuf.core_v1 import CONFIG_MAP, NAMESPACE, SECRET, SERVICE, SERVICE_ACCOUNT
from controlplane.apiserver.protobuf.rbac_v1 import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    LOCAL_SUBJECT_ACCESS_REVIEW,
    ROLE,
    ROLE_BINDING,
    SELF_SUBJECT_ACCESS_REVIEW,
    SELF_SUBJECT_REVIEW,
    SELF_SUBJECT_RULES_REVIEW,
    SUBJECT_ACCESS_REVIEW,
)
from controlplane.apiserver.protobuf.schema import Message

MESSAGES_BY_KIND: Mapping[tuple[str, str], Message] = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "ConfigMap"): CONFIG_MAP,
    ("v1", "Secret"): SECRET,
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT,
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
    ("batch/v1", "Job"): JOB,
    ("rbac.authorization.k8s.io/v1", "Role"): ROLE,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): CLUSTER_ROLE,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ROLE_BINDING,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): CLUSTER_ROLE_BINDING,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): SELF_SUBJECT_ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): SELF_SUBJECT_RULES_REVIEW,
    ("authorization.k8s.io/v1", "SubjectAccessReview"): SUBJECT_ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): LOCAL_SUBJECT_ACCESS_REVIEW,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): SELF_SUBJECT_REVIEW,
}
